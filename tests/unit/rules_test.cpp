// The correlator's named rules, each on hand-built findings (no log parsing), plus the per-line layers
// the unseen-logs work added: year inference, prefix learning, template grouping, benign warnings.
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <algorithm>
#include <ctime>

#include "firstfault/correlate_rules.hpp"
#include "firstfault/extract.hpp"
#include "firstfault/kb_lint.hpp"
#include "firstfault/normalize.hpp"
#include "firstfault/text.hpp"

namespace {

using namespace ff::correlate;
using ff::normalize::timestamp;
using ff::testing::builtin;

int sig(const std::string& name) { return ff::testing::signature_index(name); }

timestamp at(int y, int mo, int d, int h, int mi, int s, bool dated = true) {
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  timestamp t;
  t.seconds = static_cast<double>(timegm(&tm));
  t.has_date = dated;
  return t;
}

finding make(const std::string& name, std::optional<int> rank, std::optional<timestamp> ts = std::nullopt,
             ff::match::fields captured = {}, std::string text = "line") {
  finding f;
  f.signature = sig(name);
  f.rank = rank;
  f.ts = ts;
  f.captured = std::move(captured);
  f.text = std::move(text) + " " + std::to_string(rank.value_or(-1));
  f.source = "console.log";
  return f;
}

finding watchdog(int rank, const std::string& seq = "88", const std::string& numel = "1024") {
  return make("torch_nccl_watchdog_timeout", rank, std::nullopt, {{"seq", seq}, {"numel_in", numel}, {"ran_ms", "600061"}},
              "Watchdog caught collective operation timeout");
}

void activity(inputs& in, int rank, std::optional<long> step = std::nullopt, std::optional<long> planned = std::nullopt) {
  auto& a = in.activity[ff::correlate::rank_key::global_rank(rank)];
  a.lines = 10;
  a.last_line = "step " + std::to_string(step.value_or(0));
  in.source_names.resize(std::max<std::size_t>(in.source_names.size(), static_cast<std::size_t>(rank) + 1));
  in.source_names[static_cast<std::size_t>(rank)] = "rank" + std::to_string(rank) + ".log";
  a.last_source = static_cast<std::uint32_t>(rank);
  a.last_line_no = 40;
  a.last_step = step;
  a.last_step_source = a.last_source;
  a.last_step_line_no = 40;
  a.planned_steps = planned;
  if (planned) {
    a.planned_line = std::to_string(*planned) + " batches";
    a.planned_source = a.last_source;
    a.planned_line_no = 3;
  }
}

std::optional<rules::inference> infer(const inputs& in, std::string_view rule) {
  auto ctx = rules::make_context(in, builtin());
  for (const auto& r : rules::inference_rules())
    if (r.name == rule) return r.fn(ctx);
  ADD_FAILURE() << "no rule " << rule;
  return std::nullopt;
}

std::optional<rules::rank_decision> rank_by(const inputs& in, std::string_view rule, const std::string& root_sig) {
  auto ctx = rules::make_context(in, builtin());
  std::vector<const finding*> root;
  for (const auto& f : ctx.fs)
    if (f.signature == sig(root_sig)) root.push_back(&f);
  for (const auto& r : rules::rank_rules())
    if (r.name == rule) return r.fn(ctx, root);
  ADD_FAILURE() << "no rule " << rule;
  return std::nullopt;
}

// --- inference rules ------------------------------------------------------------------------------

TEST(rule_numel_differs_at_seq, names_the_odd_rank_out) {
  inputs in;
  for (int r : {0, 1, 3}) in.findings.push_back(watchdog(r, "88", "1024"));
  in.findings.push_back(watchdog(2, "88", "2048"));
  auto inf = infer(in, "numel_differs_at_seq");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->entry, "numel_differs_at_seq");
  EXPECT_EQ(inf->rank, 2);
}

TEST(rule_numel_differs_at_seq, no_single_rank_when_split_evenly) {
  inputs in;
  for (int r : {0, 1}) in.findings.push_back(watchdog(r, "88", "1024"));
  for (int r : {2, 3}) in.findings.push_back(watchdog(r, "88", "2048"));
  auto inf = infer(in, "numel_differs_at_seq");
  ASSERT_TRUE(inf);
  EXPECT_FALSE(inf->rank);
}

TEST(rule_numel_differs_at_seq, silent_when_sizes_agree) {
  inputs in;
  for (int r : {0, 1, 2}) in.findings.push_back(watchdog(r));
  EXPECT_FALSE(infer(in, "numel_differs_at_seq"));
}

TEST(rule_named_culprit, a_desync_line_names_its_rank) {
  inputs in;
  in.findings.push_back(watchdog(0));
  in.findings.push_back(make("torch_nccl_desync_not_joined", 3));
  auto inf = infer(in, "named_culprit");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->rank, 3);
}

TEST(rule_timeout_absent_rank, the_one_silent_rank_is_the_straggler) {
  inputs in;
  for (int r : {0, 2, 3}) {
    in.findings.push_back(watchdog(r));
    activity(in, r, 40);
  }
  activity(in, 1, 40);
  auto inf = infer(in, "timeout_absent_rank");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->rank, 1);
  EXPECT_EQ(inf->entry, "timeout_absent_rank");
  ASSERT_FALSE(inf->extra.empty());
  EXPECT_NE(inf->extra[0].text.find("last line of rank 1"), std::string::npos);
}

TEST(rule_timeout_absent_rank, rank0_alone_is_exclusive_work_only_with_a_work_line) {
  inputs in;
  for (int r : {1, 2, 3}) {
    in.findings.push_back(watchdog(r));
    activity(in, r, 40);
  }
  activity(in, 0, 40);
  auto inf = infer(in, "timeout_absent_rank");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->rank, 0);
  EXPECT_EQ(inf->entry, "timeout_absent_rank");  // a step was its last sign of life: a straggler
  inputs::marked_line w;
  w.source = "rank0.log";
  w.text = "saving checkpoint to /ckpt/step_40.pt";
  w.line_no = 41;  // after its last step line (activity(): line 40 of rank0.log)
  w.rank = 0;
  in.work_lines.push_back(w);
  inf = infer(in, "timeout_absent_rank");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->entry, "timeout_absent_rank0");
}

TEST(rule_timeout_absent_rank, a_rank_absent_from_an_excerpt_mid_run_decides_nothing) {
  // Rank 0 wrote no line at all and the timeout is at SeqNum 88: its absence from a pasted excerpt says
  // nothing about what it was doing.
  inputs in;
  for (int r : {1, 2, 3}) in.findings.push_back(watchdog(r));
  EXPECT_FALSE(infer(in, "timeout_absent_rank"));
}

TEST(rule_timeout_absent_rank, silent_ranks_at_the_first_collectives_are_start_up_work) {
  inputs in;
  in.findings.push_back(watchdog(2, "2"));
  auto inf = infer(in, "timeout_absent_rank");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->entry, "timeout_absent_rank0");
  EXPECT_FALSE(inf->rank);  // ranks 0 and 1 never arrived: which one worked alone is not said
}

TEST(rule_timeout_absent_rank, a_work_line_at_the_moment_the_collective_began_names_the_rank) {
  // Seven ranks time out after 1,200 s; a line of no rank said "Saving latest checkpoint" when the collective
  // began: rank 0 (silent otherwise) was saving alone.
  inputs in;
  auto t = at(2026, 2, 18, 10, 48, 25);
  for (int r = 1; r < 8; ++r) {
    auto f = make("torch_nccl_watchdog_timeout", r, t, {{"seq", "1512677"}, {"ran_ms", "1200027"}}, "Watchdog caught collective operation timeout");
    in.findings.push_back(f);
  }
  inputs::marked_line w;
  w.source = "pasted.log";
  w.text = "Saving latest checkpoint to /mnt/ckpt";
  w.line_no = 1;
  w.ts = at(2026, 2, 18, 10, 28, 25);
  in.work_lines.push_back(w);
  auto inf = infer(in, "timeout_absent_rank");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->rank, 0);
  EXPECT_EQ(inf->entry, "timeout_absent_rank0");
  bool quoted = std::any_of(inf->extra.begin(), inf->extra.end(), [](const evidence& e) { return e.text.find("Saving latest checkpoint") != std::string::npos; });
  EXPECT_TRUE(quoted);
}

TEST(rule_timeout_absent_rank, a_step_behind_with_the_same_plan_is_a_straggler) {
  // Stuck in step 50 or out of data after 49: only the planned step counts tell them apart.
  inputs in;
  for (int r : {0, 1, 2}) {
    in.findings.push_back(watchdog(r));
    activity(in, r, 50, 100);
  }
  activity(in, 3, 49, 100);
  auto inf = infer(in, "timeout_absent_rank");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->rank, 3);
  EXPECT_EQ(inf->entry, "timeout_absent_rank");
  ASSERT_EQ(inf->extra.size(), 1u);
  EXPECT_EQ(inf->extra[0].source, "rank3.log");  // evidence always has a file and a line
  EXPECT_EQ(inf->extra[0].line_no, 40u);
}

TEST(rule_timeout_absent_rank, a_different_plan_is_uneven_inputs_with_the_deciding_lines) {
  inputs in;
  for (int r : {0, 1, 2}) {
    in.findings.push_back(watchdog(r));
    activity(in, r, 50, 50);
  }
  activity(in, 3, 49, 49);
  auto inf = infer(in, "timeout_absent_rank");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->rank, 3);
  EXPECT_EQ(inf->entry, "timeout_absent_rank_uneven_steps");
  EXPECT_NE(inf->why.find("it planned 49 steps"), std::string::npos) << inf->why;
  ASSERT_EQ(inf->extra.size(), 3u);  // rank 3's plan, a peer's plan, rank 3's last line
  EXPECT_EQ(inf->extra[0].text, "rank 3 plans 49 steps: 49 batches");
  EXPECT_EQ(inf->extra[0].line_no, 3u);
  EXPECT_NE(inf->extra[1].text.find("plans 50 steps"), std::string::npos);
}

TEST(rule_timeout_absent_rank, two_silent_ranks_decide_nothing_without_times) {
  inputs in;
  for (int r : {0, 1}) in.findings.push_back(watchdog(r));
  activity(in, 2);
  activity(in, 3);
  EXPECT_FALSE(infer(in, "timeout_absent_rank"));
}

TEST(rule_timeout_absent_rank, timeout_arithmetic_picks_the_rank_that_stopped_first) {
  inputs in;
  auto t = at(2026, 1, 1, 10, 10, 1);
  for (int r : {0, 1}) {
    auto f = watchdog(r);
    f.ts = t;  // ran 600.061 s: the collective began at 10:00:01
    in.findings.push_back(f);
  }
  activity(in, 2);
  in.activity[ff::correlate::rank_key::global_rank(2)].last_ts = at(2026, 1, 1, 9, 59, 0);  // before the collective began
  activity(in, 3);
  in.activity[ff::correlate::rank_key::global_rank(3)].last_ts = at(2026, 1, 1, 10, 5, 0);  // after: it reached the collective
  auto inf = infer(in, "timeout_absent_rank");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->rank, 2);
}

TEST(rule_timeout_in_different_collectives, the_only_rank_in_another_call) {
  inputs in;
  for (int r : {0, 1, 2}) {
    auto f = watchdog(r);
    f.captured.emplace_back("collective", r == 1 ? "broadcast" : "all_reduce");
    in.findings.push_back(f);
  }
  auto inf = infer(in, "timeout_in_different_collectives");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->rank, 1);
}

TEST(rule_timeout_in_different_collectives, silent_when_a_rank_is_absent) {
  inputs in;
  for (int r : {0, 2}) {
    auto f = watchdog(r);
    f.captured.emplace_back("collective", r == 0 ? "broadcast" : "all_reduce");
    in.findings.push_back(f);
  }
  activity(in, 1);
  EXPECT_FALSE(infer(in, "timeout_in_different_collectives"));
}

// gloo's collective errors with the traceback's facts (issue 43, the odd rank out of a mismatch): a timeout or a
// closed connection, the torch.distributed call (or "backward") and the user's call site.
finding gloo_blocked(std::optional<int> rank, bool timed_out, const std::string& call, const std::string& site) {
  auto f = timed_out ? make("torch_gloo_wait_timeout", rank, std::nullopt, {},
                            "RuntimeError: [./gloo/transport/tcp/unbound_buffer.cc:133] Timed out waiting 10000ms for send operation to complete")
                     : make("torch_gloo_peer_connection_closed", rank, std::nullopt, {{"peer_addr", "127.0.0.1"}, {"peer_port", "50343"}},
                            "RuntimeError: [./gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:50343");
  f.captured.emplace_back("collective", call);
  f.captured.emplace_back("user_frame", site);
  return f;
}

TEST(rule_timeout_absent_rank, a_rank_closed_in_another_collective_is_no_straggler) {
  inputs in;
  in.findings.push_back(gloo_blocked(1, true, "all_reduce", "train.py:298 in main: dist.all_reduce(torch.cat([rl, extra]))"));
  in.findings.push_back(gloo_blocked(0, false, "backward", "train.py:282 in main: loss.backward()"));
  activity(in, 0, 8);
  activity(in, 1, 8);
  EXPECT_FALSE(infer(in, "timeout_absent_rank"));
}

TEST(rule_timeout_absent_rank, a_rank_closed_in_the_same_collective_arrived_late) {
  inputs in;  // the straggler: its peer timed out in backward, it reached the same backward after the peer had left
  in.findings.push_back(gloo_blocked(1, true, "backward", "train.py:282 in main: loss.backward()"));
  in.findings.push_back(gloo_blocked(0, false, "backward", "train.py:282 in main: loss.backward()"));
  activity(in, 0, 8);
  activity(in, 1, 8);
  auto inf = infer(in, "timeout_absent_rank");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->rank, 0);
  EXPECT_FALSE(infer(in, "timeout_in_different_collectives"));
}

TEST(rule_timeout_absent_rank, a_missing_call_site_does_not_make_a_place_different) {
  inputs in;  // the straggler's traceback kept no frame of the user's: the same call is the same place
  in.findings.push_back(gloo_blocked(1, true, "backward", "train.py:282 in main: loss.backward()"));
  in.findings.push_back(gloo_blocked(0, false, "backward", ""));
  activity(in, 0, 8);
  activity(in, 1, 8);
  auto inf = infer(in, "timeout_absent_rank");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->rank, 0);
  EXPECT_FALSE(infer(in, "timeout_in_different_collectives"));
}

TEST(rule_timeout_in_different_collectives, peers_past_the_collective_name_the_rank_that_timed_out) {
  for (int world : {2, 3}) {
    inputs in;
    in.findings.push_back(gloo_blocked(1, true, "all_reduce", "train.py:298 in main: dist.all_reduce(torch.cat([rl, extra]))"));
    for (int r = 0; r < world; ++r)
      if (r != 1) in.findings.push_back(gloo_blocked(r, false, "backward", "train.py:282 in main: loss.backward()"));
    auto inf = infer(in, "timeout_in_different_collectives");
    ASSERT_TRUE(inf) << world;
    EXPECT_EQ(inf->entry, "peers_passed_the_collective");
    EXPECT_EQ(inf->rank, 1);
    EXPECT_NE(inf->why.find("not slowness"), std::string::npos) << inf->why;  // why the peers' loud errors are not the cause
  }
}

TEST(rule_timeout_in_different_collectives, nobody_gets_past_a_barrier_a_rank_is_stuck_in) {
  // A barrier (or DDP's all-reduce) completes only with every rank: peers closed in an explicit call never passed
  // it, they issued a collective the stuck rank did not.
  inputs in;
  in.findings.push_back(gloo_blocked(0, true, "barrier", "train.py:322 in main: dist.barrier()"));
  in.findings.push_back(gloo_blocked(1, false, "all_reduce", "train.py:304 in main: dist.all_reduce(rl)"));
  auto inf = infer(in, "timeout_in_different_collectives");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->entry, "unconditional_vs_explicit_collective");
  EXPECT_FALSE(inf->rank);
}

TEST(rule_timeout_in_different_collectives, a_barrier_against_an_explicit_call_is_a_count_mismatch_without_a_rank) {
  inputs in;
  in.findings.push_back(gloo_blocked(0, true, "barrier", "train.py:322 in main: dist.barrier()"));
  in.findings.push_back(gloo_blocked(1, true, "all_reduce", "train.py:304 in main: dist.all_reduce(rl)"));
  auto inf = infer(in, "timeout_in_different_collectives");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->entry, "unconditional_vs_explicit_collective");
  EXPECT_FALSE(inf->rank);  // two ranks: no majority
}

TEST(rule_timeout_in_different_collectives, two_explicit_calls_are_a_type_mismatch) {
  inputs in;
  in.findings.push_back(gloo_blocked(0, true, "broadcast", "train.py:294 in main: dist.broadcast(rl, src=0)"));
  in.findings.push_back(gloo_blocked(1, true, "all_reduce", "train.py:303 in main: dist.all_reduce(rl)"));
  auto inf = infer(in, "timeout_in_different_collectives");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->entry, "timeout_in_different_collectives");
  EXPECT_FALSE(inf->rank);
}

TEST(rule_timeout_in_different_collectives, rankless_tracebacks_still_show_different_calls) {
  inputs in;  // two tracebacks on one console, no rank prefix
  in.findings.push_back(gloo_blocked(std::nullopt, true, "broadcast", "train.py:294 in main: dist.broadcast(rl, src=0)"));
  in.findings.push_back(gloo_blocked(std::nullopt, true, "all_reduce", "train.py:303 in main: dist.all_reduce(rl)"));
  auto inf = infer(in, "timeout_in_different_collectives");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->entry, "timeout_in_different_collectives");
  EXPECT_FALSE(inf->rank);
  // one rankless traceback says nothing about the others
  in.findings.pop_back();
  EXPECT_FALSE(infer(in, "timeout_in_different_collectives"));
}

TEST(rule_timeout_in_different_collectives, one_failed_worker_does_not_own_tracebacks_in_two_collectives) {
  // tqdm console: two rankless tracebacks, and torchelastic records one failed worker (the other was stopped by
  // SIGTERM while it printed). A rank blocked in broadcast was not blocked in all_reduce: two ranks' tracebacks.
  inputs in;
  for (const auto& [call, site] : {std::pair<std::string, std::string>{"broadcast", "train.py:295 in main: dist.broadcast(rl, src=0)"},
                                   {"all_reduce", "train.py:304 in main: dist.all_reduce(rl)"}}) {
    auto f = gloo_blocked(std::nullopt, true, call, site);
    f.raised = true;
    in.findings.push_back(f);
  }
  ff::extract::exit_record e;
  e.rank = 1;
  e.exitcode = 1;
  in.exits.push_back(e);
  activity(in, 0, 6);
  activity(in, 1, 6);
  EXPECT_FALSE(infer(in, "timeout_absent_rank"));  // not "rank 0 never timed out"
  auto inf = infer(in, "timeout_in_different_collectives");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->entry, "timeout_in_different_collectives");
  EXPECT_FALSE(inf->rank);
}

TEST(rule_timeout_in_different_collectives, the_same_call_at_different_sites_is_a_different_collective) {
  inputs in;
  for (int r : {0, 1, 2})
    in.findings.push_back(gloo_blocked(r, true, "all_reduce", r == 2 ? "train.py:310 in main: dist.all_reduce(acc)" : "train.py:304 in main: dist.all_reduce(rl)"));
  auto inf = infer(in, "timeout_in_different_collectives");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->rank, 2);
}

TEST(rule_uneven_planned_steps, the_rank_with_the_fewest_steps) {
  inputs in;
  for (int r : {0, 1, 2, 3}) {
    in.findings.push_back(watchdog(r));
    activity(in, r, 10, r == 3 ? 90 : 100);
  }
  auto inf = infer(in, "uneven_planned_steps");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->rank, 3);
  EXPECT_EQ(inf->entry, "timeout_absent_rank_uneven_steps");
  ASSERT_GE(inf->extra.size(), 2u);  // the lines that decided: the fewest and the most planned steps
  EXPECT_EQ(inf->extra[0].text, "rank 3 plans 90 steps: 90 batches");
  EXPECT_NE(inf->extra[1].text.find("plans 100 steps"), std::string::npos);
  for (const auto& e : inf->extra) EXPECT_FALSE(e.source.empty());
}

// Interleaved tracebacks with no rank prefix: the timeouts have no rank, the plans still decide.
TEST(rule_uneven_planned_steps, timeouts_without_a_rank) {
  inputs in;
  for (int r : {0, 1}) {
    auto f = make("torch_gloo_wait_timeout", std::nullopt, std::nullopt, {}, "Timed out waiting 10000ms for recv operation to complete");
    in.findings.push_back(f);
    activity(in, r, 6, r == 0 ? 8 : 20);
  }
  auto inf = infer(in, "uneven_planned_steps");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->rank, 0);
  // Equal plans: nothing to say.
  inputs even;
  even.findings.push_back(in.findings[0]);
  for (int r : {0, 1}) activity(even, r, 6, 20);
  EXPECT_FALSE(infer(even, "uneven_planned_steps"));
}

// --- rank rules ---------------------------------------------------------------------------------

TEST(rule_only_rank, one_rank_reports_the_cause) {
  inputs in;
  in.findings.push_back(make("cuda_oom", 5));
  auto d = rank_by(in, "only_rank", "cuda_oom");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->rank, 5);
}

TEST(rule_earliest_time, leads_by_time_and_ties_decide_nothing) {
  inputs in;
  in.findings.push_back(make("cuda_oom", 3, at(2026, 1, 1, 10, 0, 7)));
  in.findings.push_back(make("cuda_oom", 5, at(2026, 1, 1, 10, 0, 2)));
  auto d = rank_by(in, "earliest_time", "cuda_oom");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->rank, 5);
  inputs tie;
  tie.findings.push_back(make("cuda_oom", 3, at(2026, 1, 1, 10, 0, 2)));
  tie.findings.push_back(make("cuda_oom", 5, at(2026, 1, 1, 10, 0, 2)));
  EXPECT_FALSE(rank_by(tie, "earliest_time", "cuda_oom"));
}

TEST(rule_torchelastic_root_among, the_root_cause_entry_among_the_ranks) {
  inputs in;
  in.findings.push_back(make("cuda_oom", 3));
  in.findings.push_back(make("cuda_oom", 5));
  ff::extract::exit_record e;
  e.rank = 5;
  e.root_cause = true;
  e.exitcode = 1;
  in.exits.push_back(e);
  auto d = rank_by(in, "torchelastic_root_among", "cuda_oom");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->rank, 5);
}

TEST(rule_initiator_field, exit_code_initiator_finds_the_killed_worker) {
  inputs in;
  in.findings.push_back(make("host_oom_killer_killed_process", std::nullopt));
  ff::extract::exit_record e;
  e.rank = 6;
  e.exitcode = -9;
  in.exits.push_back(e);
  auto d = rank_by(in, "initiator_field", "host_oom_killer_killed_process");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->rank, 6);
}

TEST(rule_host_ranks, a_node_fault_names_the_one_rank_on_its_host) {
  inputs in;
  auto f = make("xid_79_fallen_off_bus", std::nullopt);
  f.host = "node-b";
  in.findings.push_back(f);
  in.host_ranks["node-b"] = {7};
  in.host_ranks["node-a"] = {0, 1};
  auto d = rank_by(in, "host_ranks", "xid_79_fallen_off_bus");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->rank, 7);
  in.host_ranks["node-b"] = {6, 7};
  EXPECT_FALSE(rank_by(in, "host_ranks", "xid_79_fallen_off_bus"));
}

TEST(rule_culprit_anywhere, another_line_names_the_culprit) {
  inputs in;
  in.findings.push_back(make("xid_79_fallen_off_bus", std::nullopt));
  in.findings.push_back(make("torch_nccl_desync_not_joined", 4));
  auto d = rank_by(in, "culprit_anywhere", "xid_79_fallen_off_bus");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->rank, 4);
}

TEST(rule_torchelastic_root, first_observed_failure_across_nodes_by_time) {
  inputs in;
  in.findings.push_back(make("xid_79_fallen_off_bus", std::nullopt));
  ff::extract::exit_record a, b;
  a.rank = 9;
  a.root_cause = true;
  a.time = "2026-01-01_10:00:09";
  b.rank = 2;
  b.root_cause = true;
  b.time = "2026-01-01_10:00:03";
  in.exits = {a, b};
  auto d = rank_by(in, "torchelastic_root", "xid_79_fallen_off_bus");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->rank, 2);
}


// torchelastic stamps failures with whole seconds and takes the min: two failures of one second are listed
// with the lowest local rank as "Root Cause (first observed failure)" whichever failed first (bench/faults
// 001: rank 1's DataLoader ValueError, rank 0's gloo "Connection closed by peer", the entry names rank 0).
// The rank stays the entry's (right as often as a coin on two ranks), and the report says it is a tie-break.
TEST(rule_torchelastic_root, failures_of_the_same_second_are_not_ordered) {
  inputs in;
  in.findings.push_back(make("py_valueerror", std::nullopt));
  ff::extract::exit_record root, other;
  root.rank = 0;
  root.root_cause = true;
  root.exitcode = 1;
  root.time = "2026-12-06_16:08:07";
  other = root;
  other.rank = 1;
  other.root_cause = false;
  in.exits = {other, root};
  auto d = rank_by(in, "torchelastic_root", "py_valueerror");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->rank, 0);  // the entry's rank, said to be a tie-break
  EXPECT_NE(d->why.find("same second"), std::string::npos) << d->why;
  in.exits[0].time = "2026-12-06_16:08:09";  // the other failed two seconds later: the entry orders them
  d = rank_by(in, "torchelastic_root", "py_valueerror");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->rank, 0);
  EXPECT_EQ(d->why.find("same second"), std::string::npos) << d->why;
  in.exits[0].time = root.time;
  in.exits[0].exitcode = 0;  // a worker that ended well is no failure
  d = rank_by(in, "torchelastic_root", "py_valueerror");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->rank, 0);
}

TEST(rule_torchelastic_root_among, a_tie_with_another_rank_with_the_error_is_said) {
  inputs in;
  in.findings.push_back(make("cuda_oom", 3));
  in.findings.push_back(make("cuda_oom", 5));
  ff::extract::exit_record a, b;
  a.rank = 3;
  a.root_cause = true;
  a.exitcode = 1;
  a.time = "2026-01-01_10:00:03";
  b = a;
  b.rank = 5;
  b.root_cause = false;
  in.exits = {a, b};
  auto d = rank_by(in, "torchelastic_root_among", "cuda_oom");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->rank, 3);
  EXPECT_NE(d->why.find("tie-break"), std::string::npos) << d->why;
  in.exits[1].rank = 7;  // tied with a rank that did not report the error: the entry orders 3 and 5
  d = rank_by(in, "torchelastic_root_among", "cuda_oom");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->rank, 3);
  EXPECT_EQ(d->why.find("tie-break"), std::string::npos) << d->why;
}

TEST(rule_missing_client, the_one_rank_that_never_wrote_is_the_culprit) {
  inputs in;
  in.findings.push_back(make("torch_rendezvous_timeout", 0, std::nullopt, {{"joined", "3"}, {"world", "4"}}));
  for (int r : {0, 1, 3}) activity(in, r);
  auto d = rank_by(in, "missing_client", "torch_rendezvous_timeout");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->rank, 2);
  inputs only0;  // only the store's log: the culprit cannot be named, and the store is not it
  only0.findings.push_back(make("torch_rendezvous_timeout", 0, std::nullopt, {{"joined", "15"}, {"world", "16"}}));
  activity(only0, 0);
  d = rank_by(only0, "missing_client", "torch_rendezvous_timeout");
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->rank);
}

TEST(rule_local_rank_and_timeouts, two_constraints_give_the_rank) {
  inputs in;
  in.hosts = {"node-a", "node-b"};  // several nodes: local rank 1 alone does not say which rank
  auto oom = make("cuda_oom", std::nullopt);
  oom.local_rank = 1;
  in.findings.push_back(oom);
  for (int r = 0; r < 16; ++r)
    if (r != 9) in.findings.push_back(watchdog(r));
  auto d = rank_by(in, "local_rank_and_timeouts", "cuda_oom");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->rank, 9);
}

TEST(rule_repeated_xid_same_device, separate_events_make_a_faulty_gpu_a_burst_does_not) {
  auto xid = [](const std::string& pid, timestamp t) {
    auto f = make("xid_13_graphics_engine_exception", std::nullopt, t, {{"pci", "0000:3b:00"}, {"xid", "13"}, {"pid", pid}});
    f.text += pid + std::to_string(t.seconds);
    return f;
  };
  inputs burst;
  for (int i = 0; i < 10; ++i) burst.findings.push_back(xid("<unknown>", at(2025, 1, 21, 4, 41, 44)));
  EXPECT_EQ(ff::correlate::correlate(burst, builtin()).kind, "gpu_xid_application");
  inputs days;
  days.findings.push_back(xid("111", at(2025, 1, 6, 10, 0, 0)));
  days.findings.push_back(xid("222", at(2025, 1, 7, 10, 0, 0)));
  days.findings.push_back(xid("333", at(2025, 1, 8, 10, 0, 0)));
  auto d = ff::correlate::correlate(days, builtin());
  EXPECT_EQ(d.kind, "gpu_xid_hardware");
  EXPECT_EQ(d.rule, "repeated_xid_same_device");
}

TEST(rule_launcher_exit, the_first_failed_worker_and_its_exit_code) {
  inputs in;
  ff::extract::exit_record e;
  e.rank = 3;
  e.exitcode = 1;
  e.root_cause = true;
  e.launcher = "mpirun";
  in.exits.push_back(e);
  auto inf = infer(in, "launcher_exit");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->rank, 3);
  EXPECT_EQ(inf->entry, "launcher_exit_error");
  in.exits[0].exitcode = -9;
  EXPECT_EQ(infer(in, "launcher_exit")->entry, "launcher_exit_sigkill");
  in.exits[0].exitcode = -15;  // SIGTERM says who stopped it, not why
  EXPECT_FALSE(infer(in, "launcher_exit"));
  in.exits[0].exitcode = 1;
  for (int r : {0, 1}) in.findings.push_back(watchdog(r));  // ranks waited: the launcher may name a victim
  EXPECT_FALSE(infer(in, "launcher_exit"));
}

TEST(rule_ends_in_launch_banner, a_log_that_stops_in_the_rendezvous) {
  inputs in;
  in.stream_ends.push_back({"node0.log", "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous'ing worker group", 7});
  auto inf = infer(in, "ends_in_launch_banner");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->entry, "ends_in_launch_banner");
  in.stream_ends.push_back({"node1.log", "step 100 loss 1.2", 9});
  EXPECT_FALSE(infer(in, "ends_in_launch_banner"));
}


TEST(rule_outside_stop_signal, the_agent_stopped_from_outside_with_no_earlier_failure) {
  inputs in;
  in.findings.push_back(make("launch_elastic_signal_received", std::nullopt, std::nullopt, {},
                             "WARNING:torch.distributed.elastic.agent.server.api:Received 15 death signal, shutting down workers"));
  auto inf = infer(in, "outside_stop_signal");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->entry, "outside_stop_signal");
  ff::extract::exit_record e;
  e.rank = 2;
  e.exitcode = 1;  // a worker failed on its own first: not an outside stop
  in.exits.push_back(e);
  EXPECT_FALSE(infer(in, "outside_stop_signal"));
}


TEST(rule_xid_cleanup_names_prior, the_cleanup_notice_names_the_fault) {
  inputs in;
  in.findings.push_back(make("xid_45_preemptive_cleanup", std::nullopt, std::nullopt,
                             {{"pci", "0000:dc:00"}, {"xid", "45"}, {"prior_xid", "149"}}));
  auto d = ff::correlate::correlate(in, builtin());
  EXPECT_EQ(d.rule, "xid_cleanup_names_prior");
  EXPECT_EQ(d.kind, "nvlink_error") << "the kind comes from NVIDIA's catalogue row for Xid 149";
  EXPECT_NE(d.summary.find("149"), std::string::npos);
}


TEST(rule_stack_dump_odd_rank, all_but_one_rank_wait_in_a_collective) {
  inputs in;
  auto top = [](const std::string& fn, const std::string& file, bool main) {
    inputs::dump_frame f;
    f.top = ff::extract::stack_top{fn, file, main, fn + " (" + file + ":1)"};
    f.source = "dump.txt";
    return f;
  };
  for (int r : {0, 1, 3}) {
    in.stack_tops[r].push_back(top("all_reduce", "torch/distributed/distributed_c10d.py", true));
    in.stack_tops[r].push_back(top("read", "socket.py", false));  // another thread: not the main one
  }
  in.stack_tops[2].push_back(top("read", "lustre_reader.py", true));
  auto inf = infer(in, "stack_dump_odd_rank");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->rank, 2);
  in.stack_tops[3] = {top("__getitem__", "dataset.py", true)};  // two ranks elsewhere: no single culprit
  EXPECT_FALSE(infer(in, "stack_dump_odd_rank"));
}

TEST(extractor, py_spy_and_faulthandler_stack_tops) {
  ff::extract::extractor ex("dump.txt");
  std::vector<ff::extract::exit_record> exits;
  std::vector<ff::extract::terminated_pid> terms;
  ff::extract::line_note n1, n2, n3, n4;
  ex.feed("Thread 4242 (idle): \"MainThread\"", 1, n1, exits, terms);
  ex.feed("    all_reduce (torch/distributed/distributed_c10d.py:2050)", 2, n2, exits, terms);
  ASSERT_TRUE(n2.top);
  EXPECT_EQ(n2.top->function, "all_reduce");
  EXPECT_TRUE(n2.top->main_thread);
  ex.feed("Current thread 0x00007f3a (most recent call first):", 3, n3, exits, terms);
  ex.feed("  File \"/data/reader.py\", line 41 in read", 4, n4, exits, terms);
  ASSERT_TRUE(n4.top);
  EXPECT_EQ(n4.top->function, "read");
  EXPECT_EQ(n4.top->file, "/data/reader.py");
}


TEST(wrap_width, a_fixed_terminal_width_is_evident_only_when_nothing_is_longer) {
  std::vector<std::pair<std::string, std::uint64_t>> head;
  for (int i = 0; i < 10; ++i) head.emplace_back(std::string(79, 'a') + "b", i);  // cut at 80 columns
  for (int i = 0; i < 10; ++i) head.emplace_back("continued " + std::to_string(i), i);
  EXPECT_EQ(ff::pipeline::wrap_width(head), 80u);
  head.emplace_back(std::string(120, 'x') + "y", 99);  // one longer line: no fixed wrap
  EXPECT_EQ(ff::pipeline::wrap_width(head), 0u);
  std::vector<std::pair<std::string, std::uint64_t>> rules;
  for (int i = 0; i < 10; ++i) rules.emplace_back(std::string(80, '-'), i);  // separator rules are not wraps
  EXPECT_EQ(ff::pipeline::wrap_width(rules), 0u);
  // Fixed-width lines of one format (a console where every step line has the same length) are not a
  // wrapped paste: each is followed by a line with the same prefix. Rejoining them put 64 lines into one.
  std::vector<std::pair<std::string, std::uint64_t>> fixed;
  for (int i = 0; i < 40; ++i)
    fixed.emplace_back("[default" + std::to_string(i % 8) + "]:2026-11-30 02:09:55,1" + std::to_string(10 + i) +
                           " INFO    [rank3" + std::to_string(10 + i) + "] trainer - step 391 loss 2.7655 lr 5.86e-05 tok/s 42366",
                       i + 1);
  const auto& cat = ff::testing::engine().prefixes;
  EXPECT_GE(ff::pipeline::wrap_width(fixed), 60u);  // by length alone it looks wrapped
  EXPECT_EQ(ff::pipeline::wrap_width(fixed, &cat), 0u);
  // A wrapped console paste: the rest of a cut line carries no prefix.
  std::vector<std::pair<std::string, std::uint64_t>> wrapped;
  for (int i = 0; i < 10; ++i) {
    std::string l = "[rank" + std::to_string(i) + "]: Traceback (most recent call last): File \"/opt/train/very/long/path/to/module.py\", line 12";
    l.resize(80, 'x');
    wrapped.emplace_back(l, 2 * i + 1);
    wrapped.emplace_back("3, in forward_step_func", 2 * i + 2);
  }
  EXPECT_EQ(ff::pipeline::wrap_width(wrapped, &cat), 80u);
}

// --- root rules ---------------------------------------------------------------------------------

TEST(rule_scheduler_end_after_rank_error, a_cancel_after_a_rank_error_is_its_consequence) {
  inputs in;
  in.findings.push_back(make("py_keyerror", 3, at(2026, 1, 1, 9, 0, 1)));
  in.findings.push_back(make("slurm_job_cancelled", std::nullopt, at(2026, 1, 1, 9, 10, 5)));
  auto d = ff::correlate::correlate(in, builtin());
  EXPECT_EQ(d.kind, "rank_exception");
  EXPECT_EQ(d.rule, "scheduler_end_after_rank_error");
  EXPECT_EQ(d.initiating_rank, 3);
}

TEST(rule_scheduler_end_after_rank_error, a_cancel_with_no_earlier_error_stays) {
  inputs in;
  in.findings.push_back(make("slurm_job_cancelled", std::nullopt, at(2026, 1, 1, 9, 10, 5)));
  in.findings.push_back(make("py_keyerror", 3, at(2026, 1, 1, 9, 10, 6)));  // after the cancel
  auto d = ff::correlate::correlate(in, builtin());
  EXPECT_EQ(d.kind, "job_cancelled");
}

TEST(rule_victim_named_later, the_oom_header_hands_over_to_the_killed_process_line) {
  inputs in;
  auto header = make("host_oom_killer_invoked", std::nullopt, std::nullopt, {}, "python3 invoked oom-killer: gfp_mask=0xcc0");
  header.line_no = 1;
  auto victim = make("host_oom_killer_killed_process", std::nullopt, std::nullopt, {{"pid", "24739"}, {"comm", "python3"}},
                     "Killed process 24739 (python3) total-vm:2493624kB, anon-rss:1619532kB");
  victim.line_no = 86;
  in.findings = {header, victim};
  auto d = ff::correlate::correlate(in, builtin());
  EXPECT_EQ(d.rule, "victim_named_later");
  EXPECT_EQ(d.signature, "host_oom_killer_killed_process");
  ASSERT_FALSE(d.evidence_lines.empty());
  EXPECT_EQ(d.evidence_lines[0].line_no, 86u);
  // in another file, the victim line belongs to another event: the header stays
  in.findings[1].source = "other-node.log";
  EXPECT_EQ(ff::correlate::correlate(in, builtin()).signature, "host_oom_killer_invoked");
}

// --- time -----------------------------------------------------------------------------------------

TEST(year_inference, undated_stamps_take_the_runs_year) {
  inputs in;
  // The c10 header has no year (parsed as the default year); the dated line is from 2023.
  in.findings.push_back(make("cuda_oom", 1, at(2026, 6, 2, 10, 0, 0, false)));
  in.findings.push_back(make("torch_nccl_watchdog_timeout", 0, at(2023, 6, 2, 10, 0, 8)));
  auto ctx = rules::make_context(in, builtin());
  ASSERT_TRUE(ctx.year);
  EXPECT_EQ(*ctx.year, 2023);
  EXPECT_TRUE(rules::before(ctx.fs[0].ts, ctx.fs[1].ts)) << "the undated OOM is 8 s earlier";
  // Shown with the run's year (issue 46: "years come from context"), not as "06-02 10:00:00".
  EXPECT_TRUE(ctx.fs[0].ts->has_date);
  EXPECT_EQ(rules::format_time(ctx.fs[0].ts), "2023-06-02 10:00:00.000");
}

TEST(year_inference, december_january_rollover) {
  inputs in;
  in.findings.push_back(make("cuda_oom", 1, at(2026, 1, 1, 0, 0, 5, false)));    // "0101 00:00:05", no year
  in.findings.push_back(make("cuda_oom", 2, at(2023, 12, 31, 23, 59, 50)));     // dated, the evening before
  auto ctx = rules::make_context(in, builtin());
  auto y = [](double s) {
    std::time_t t = static_cast<std::time_t>(s);
    std::tm tm{};
    gmtime_r(&t, &tm);
    return tm.tm_year + 1900;
  };
  EXPECT_EQ(y(ctx.fs[0].ts->seconds), 2024);
  EXPECT_TRUE(rules::before(ctx.fs[1].ts, ctx.fs[0].ts));
}

TEST(year_inference, uptime_and_wall_clocks_never_compare) {
  timestamp up;
  up.kind = timestamp::clock::uptime;
  up.seconds = 5;
  EXPECT_FALSE(rules::before(up, at(2026, 1, 1, 0, 0, 0)));
  EXPECT_FALSE(rules::before(at(2026, 1, 1, 0, 0, 0), up));
}

// --- prefix learning ------------------------------------------------------------------------------

TEST(prefix_learner, peels_a_repeated_unknown_prefix_and_reads_its_rank) {
  ff::normalize::prefix_learner pl;
  for (int r = 0; r < 4; ++r)
    for (int i = 0; i < 3; ++i) pl.observe("[gpu-a:" + std::to_string(r) + "] step " + std::to_string(i));
  ff::normalize::line_meta m;
  std::string_view rest;
  ASSERT_TRUE(pl.peel("[gpu-a:2] KeyError: 'input_ids'", m, rest));
  EXPECT_EQ(rest, "KeyError: 'input_ids'");
  EXPECT_EQ(m.rank, 2);
}

TEST(prefix_learner, pids_are_not_ranks_and_error_words_are_not_prefixes) {
  ff::normalize::prefix_learner pl;
  for (int p = 24254; p < 24258; ++p)
    for (int i = 0; i < 3; ++i) pl.observe("[" + std::to_string(p) + "] rank x step " + std::to_string(i));
  ff::normalize::line_meta m;
  std::string_view rest;
  ASSERT_TRUE(pl.peel("[24255] rank 1 step 5", m, rest));
  EXPECT_FALSE(m.rank) << "values far from 0 are pids, not ranks";
  for (int i = 0; i < 10; ++i) pl.observe("Error: disk 3 failed");
  EXPECT_FALSE(pl.peel("Error: disk 3 failed", m, rest));
}

TEST(prefix_learner, a_rare_token_is_not_learnt) {
  ff::normalize::prefix_learner pl;
  pl.observe("[node7] hello");
  for (int i = 0; i < 40; ++i) pl.observe("plain line " + std::to_string(i));
  ff::normalize::line_meta m;
  std::string_view rest;
  EXPECT_FALSE(pl.peel("[node7] KeyError: 'x'", m, rest));
}

// --- templates and suspicion ----------------------------------------------------------------------

TEST(line_template, numbers_paths_and_quotes_are_variables) {
  EXPECT_EQ(ff::extract::line_template("AttributeError: 'list' object has no attribute 'sum' at /data/x/dataset.py:785"),
            ff::extract::line_template("AttributeError: 'dict' object has no attribute 'sum' at /data/y/dataset.py:12"));
  EXPECT_NE(ff::extract::line_template("KeyError: 'a'"), ff::extract::line_template("ValueError: 'a'"));
}

TEST(line_template, the_hand_scan_is_the_regexp) {
  // line_template() implements kTemplateVariable by hand; RE2::GlobalReplace is the reference. Random
  // text over the bytes the alternatives turn on (path, hex, number and quote bytes, a drive letter, a
  // two-byte UTF-8 character, word and non-word neighbours), lengths across the 200-character quote
  // bound, plus real lines.
  const std::vector<std::string> pieces = {"/", "/", ".", ":", ",", "+", "-", "_", "0", "7", "12345678", "0x", "x", "a", "f", "F",
                                           "g", "Z", "C:", " ", "'", "\"", "\xC3\xA9", "\xE2\x96\x88", "\t", "(", "="};
  std::uint64_t seed = 99;
  auto next = [&seed] {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<unsigned>(seed >> 33);
  };
  std::size_t changed = 0;
  for (int i = 0; i < 30000; ++i) {
    std::string s;
    const unsigned len = next() % 8 == 0 ? 150 + next() % 300 : next() % 40;
    const bool long_quote = next() % 4 == 0;  // a run of about 200 characters somewhere between two pieces
    while (s.size() < len) {
      s += pieces[next() % pieces.size()];
      if (long_quote && next() % 16 == 0) s += std::string(195 + next() % 10, next() % 2 ? 'q' : ' ');
    }
    const auto got = ff::extract::line_template(s), want = ff::extract::detail::line_template_by_regex(s);
    ASSERT_EQ(got, want) << "input: " << s;
    changed += got != ff::text::prefix_utf8(ff::text::trim(s), 400);
  }
  EXPECT_GT(changed, 10000u);
  for (const char* line :
       {"AttributeError: 'list' object has no attribute 'sum' at /data/x/dataset.py:785",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB",
        "[rank3]:[E1130 02:14:01.880000 4211 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=183, OpType=ALLREDUCE, NumelIn=262144000, Timeout(ms)=600000) ran for 600084 milliseconds",
        "node-07:1998325:1998716 [1] NCCL INFO comm 0x55d0c0a31000 rank 49 nranks 64 busId 29000 commId 0x7f3a9c2b1e0d5a44",
        "File \"C:/Users/x/train.py\", line 12, in <module>", "deadbeef12 a1b2c3d4e5f6 1.2.3a 1.2.3 10.0.0.8:29500 v1.2"})
    EXPECT_EQ(ff::extract::line_template(line), ff::extract::detail::line_template_by_regex(line)) << line;
}

TEST(classify_line, failures_warnings_and_zero_counts) {
  using ff::extract::classify_line;
  using ff::extract::suspicion;
  EXPECT_EQ(classify_line("[1,0]<stderr>:ValueError: bad shard", 0), suspicion::strong);
  EXPECT_EQ(classify_line("host:12:34 [0] NCCL WARN Cuda failure 'out of memory'", 0), suspicion::strong);
  EXPECT_EQ(classify_line("Segmentation fault (core dumped)", 0), suspicion::strong);
  EXPECT_EQ(classify_line("12345678   train   FAILED   1:0", 0), suspicion::weak);
  EXPECT_EQ(classify_line("step 10 finished, 0 errors", 0), suspicion::none);
  EXPECT_EQ(classify_line("train WARNING eval: val error rate=0.641", 0), suspicion::none);
  EXPECT_EQ(classify_line("UserWarning: failed to load image extension", 0), suspicion::none);
  EXPECT_EQ(classify_line("The server socket has failed to bind", 'W'), suspicion::none);
  EXPECT_EQ(classify_line("    raise KeyError(key)", 0), suspicion::none);
  EXPECT_EQ(classify_line("timeout=1800 seconds configured", 0), suspicion::none);
}

// --- the verdict ------------------------------------------------------------------------------------

TEST(verdict, healthy_only_when_nothing_looks_wrong) {
  inputs in;
  EXPECT_EQ(ff::correlate::correlate(in, builtin()).verdict, ff::correlate::verdict::healthy);
  suspicious_line s;
  s.text = "srun: error: node3: task 5: Exited with exit code 2";
  s.tmpl = ff::extract::line_template(s.text);
  in.suspicious.push_back(s);
  auto d = ff::correlate::correlate(in, builtin());
  EXPECT_EQ(d.verdict, ff::correlate::verdict::undetermined);
  ASSERT_EQ(d.suspicious.size(), 1u);
}

TEST(verdict, suspicious_groups_rank_strong_and_rare_first) {
  inputs in;
  suspicious_line common, rare, strong;
  common.text = "error: retrying";
  common.ranks = {0, 1, 2, 3};
  rare.text = "error: shard 7 unreadable";
  rare.ranks = {2};
  strong.text = "ValueError: x";
  strong.strong = true;
  strong.ranks = {0, 1, 2, 3};
  in.suspicious = {common, rare, strong};
  auto d = ff::correlate::correlate(in, builtin());
  ASSERT_EQ(d.suspicious.size(), 3u);
  EXPECT_EQ(d.suspicious[0].text, "ValueError: x");
  EXPECT_EQ(d.suspicious[1].text, "error: shard 7 unreadable");
}

TEST(benign, a_known_healthy_warning_is_not_evidence) {
  ff::pipeline::collector col(ff::testing::engine(), {});
  ff::ingest::source src;
  src.display = "console.log";
  auto st = col.open_stream(src);
  col.add_line(st, "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system "
                   "being overloaded, please further tune the variable for optimal performance in your application as needed.",
               1);
  col.add_line(st, "[W socket.cpp:426] [c10d] The server socket cannot be initialized on [::]:29500 (errno: 97 - Address family "
                   "not supported by protocol).",
               2);
  col.add_line(st, "Training completed", 3);  // benign too, and it says the rank finished (outcome.rank_done)
  EXPECT_EQ(col.inputs().benign_lines, 3u);
  ASSERT_EQ(col.inputs().success_ends.size(), 1u);
  EXPECT_FALSE(col.inputs().success_ends[0].job);
  EXPECT_EQ(col.diagnose().verdict, ff::correlate::verdict::healthy);
}

// --- lint both ways ---------------------------------------------------------------------------------

TEST(rules_and_kb, every_rule_output_has_an_entry_and_every_entry_a_rule) {
  std::vector<std::string> produced;
  for (const auto& r : rules::inference_rules())
    for (auto p : r.produces) produced.emplace_back(p);
  EXPECT_TRUE(ff::kb::lint_inferred(builtin(), produced).empty());
  produced.push_back("no_such_rule_output");
  EXPECT_EQ(ff::kb::lint_inferred(builtin(), produced).size(), 1u);
  produced.pop_back();
  produced.erase(std::remove(produced.begin(), produced.end(), "numel_differs_at_seq"), produced.end());
  EXPECT_EQ(ff::kb::lint_inferred(builtin(), produced).size(), 1u);
}

TEST(rules_and_kb, every_rule_is_named_summarised_and_sourced) {
  std::set<std::string_view> names;
  auto check = [&](std::string_view n, std::string_view summary, std::string_view source) {
    EXPECT_TRUE(names.insert(n).second) << "duplicate rule " << n;
    EXPECT_FALSE(summary.empty()) << n;
    EXPECT_FALSE(source.empty()) << n;
  };
  for (const auto& r : rules::root_rules()) check(r.name, r.summary, r.source);
  for (const auto& r : rules::rank_rules()) check(r.name, r.summary, r.source);
  for (const auto& r : rules::inference_rules()) check(r.name, r.summary, r.source);
}

}  // namespace

// Errors the run survived (rules::survived_errors): the rank printed a step before the error and a later,
// higher one after it, on its own clock or later in the same file.
namespace {
finding at_step(finding f, long step_at, std::uint64_t line_no) {
  f.step_at = step_at;
  f.line_no = line_no;
  return f;
}
void stepped(inputs& in, int rank, long step, std::uint64_t line_no, std::optional<timestamp> ts = std::nullopt) {
  activity(in, rank, step);
  auto& a = in.activity[rank_key::global_rank(rank)];
  in.source_names[static_cast<std::size_t>(rank)] = "console.log";
  a.last_step_source = static_cast<std::uint32_t>(rank);
  a.last_step_line_no = line_no;
  a.last_step_ts = ts;
}
}  // namespace

TEST(rule_survived_errors, a_caught_exception_then_later_steps_is_not_the_root) {
  inputs in;
  in.findings.push_back(at_step(make("py_rank_exception", 1, at(2026, 12, 6, 10, 0, 0), {}, "ValueError: flaky batch"), 4, 20));
  stepped(in, 1, 30, 200, at(2026, 12, 6, 10, 5, 0));
  auto ctx = rules::make_context(in, builtin());
  ASSERT_EQ(ctx.survived.size(), 1u);
  EXPECT_NE(ctx.survived.begin()->second.find("went on to step 30"), std::string::npos);
  EXPECT_EQ(rules::strongest_cause(ctx), nullptr);
}

TEST(rule_survived_errors, buffered_steps_in_the_same_second_are_not_later) {
  inputs in;
  auto t = at(2026, 11, 30, 2, 1, 43);
  in.findings.push_back(at_step(make("py_rank_exception", 1, t, {}, "RuntimeError: boom"), 2, 14));
  stepped(in, 1, 4, 75, t);  // the step lines reached the console after the error, written the same second
  auto ctx = rules::make_context(in, builtin());
  EXPECT_TRUE(ctx.survived.empty());
  ASSERT_NE(rules::strongest_cause(ctx), nullptr);
}

TEST(rule_survived_errors, untimed_steps_after_a_traceback_are_not_later) {
  // print()'s steps to a piped stdout are block-buffered: they can reach the file after the traceback.
  inputs in;
  in.findings.push_back(at_step(make("py_rank_exception", 1, std::nullopt, {}, "ValueError: x"), 4, 20));
  stepped(in, 1, 30, 200);
  EXPECT_TRUE(rules::make_context(in, builtin()).survived.empty());
}

TEST(rule_survived_errors, no_step_before_the_error_decides_nothing) {
  inputs in;
  in.findings.push_back(make("py_rank_exception", 1, std::nullopt, {}, "KeyError: 'label'"));  // step_at none
  stepped(in, 1, 9, 500);
  auto ctx = rules::make_context(in, builtin());
  EXPECT_TRUE(ctx.survived.empty());
}

TEST(rule_survived_errors, a_non_finite_loss_is_never_survived) {
  inputs in;
  in.findings.push_back(at_step(make("train_log_metric_nonfinite", 1, std::nullopt, {{"metric", "loss"}, {"value", "nan"}}, "step 7 | loss nan"), 7, 16));
  stepped(in, 1, 29, 100);
  auto ctx = rules::make_context(in, builtin());
  EXPECT_TRUE(ctx.survived.empty());
}

TEST(rule_survived_errors, a_start_up_port_warning_before_training_is_survived) {
  inputs in;
  auto f = make("torch_rendezvous_port_in_use", std::nullopt, at(2026, 12, 6, 10, 0, 0), {}, "address already in use");
  in.findings.push_back(f);
  stepped(in, 0, 40, 300, at(2026, 12, 6, 10, 0, 30));
  auto ctx = rules::make_context(in, builtin());
  ASSERT_EQ(ctx.survived.size(), 1u);
  EXPECT_NE(ctx.survived.begin()->second.find("trained to step 40"), std::string::npos) << ctx.survived.begin()->second;
}

// Symptoms alone (rules::orphan_symptom): specific symptoms of one kind stand for it; timeouts, generic
// error codes, mixed kinds or a failed worker do not.
TEST(rule_orphan_symptom, specific_symptoms_of_one_kind_stand_for_it) {
  inputs in;
  in.findings.push_back(make("nccl_remote_error", 0, std::nullopt, {}, "ncclRemoteError: remote process exited or there was a network error"));
  in.findings.push_back(make("nccl_socket_connection_closed", 0, std::nullopt, {}, "Call to recv from 10.0.0.1<33759> failed : Connection reset by peer"));
  auto ctx = rules::make_context(in, builtin());
  const auto* f = rules::orphan_symptom(ctx);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(ctx.sig(*f).kind, "network_hardware");
}

TEST(rule_orphan_symptom, a_timeout_or_a_generic_code_or_a_failed_worker_decides_nothing) {
  {
    inputs in;
    in.findings.push_back(make("nccl_remote_error", 0));
    in.findings.push_back(watchdog(1));
    EXPECT_EQ(rules::orphan_symptom(rules::make_context(in, builtin())), nullptr);
  }
  {
    inputs in;
    in.findings.push_back(make("nccl_unhandled_system_error", 0));
    EXPECT_EQ(rules::orphan_symptom(rules::make_context(in, builtin())), nullptr);
  }
  {
    inputs in;
    in.findings.push_back(make("nccl_remote_error", 0));
    ff::extract::exit_record e;
    e.rank = 1;
    e.exitcode = -9;
    in.exits.push_back(e);
    EXPECT_EQ(rules::orphan_symptom(rules::make_context(in, builtin())), nullptr);
  }
}

// gloo's size check: exactly 2, 4 or 8 times the bytes is two element widths (rules::kind_rules).
TEST(rule_size_ratio_is_an_element_width, a_power_of_two_width_ratio_is_a_dtype_mismatch) {
  auto run = [](const std::string& got, const std::string& buf) -> std::optional<std::string> {
    inputs in;
    in.findings.push_back(make("torch_gloo_message_size_mismatch", 1, std::nullopt, {{"bytes", got}, {"buffer_bytes", buf}}, "op.preamble.length <= op.nbytes"));
    auto ctx = rules::make_context(in, builtin());
    std::vector<const finding*> root{&ctx.fs[0]};
    for (const auto& kr : rules::kind_rules())
      if (kr.name == "size_ratio_is_an_element_width")
        if (auto k = kr.fn(ctx, root, "collective_shape_mismatch")) return k->first;
    return std::nullopt;
  };
  EXPECT_EQ(run("8", "4"), "collective_dtype_mismatch");
  EXPECT_EQ(run("4096", "8192"), "collective_dtype_mismatch");
  EXPECT_FALSE(run("180", "168"));  // 15 vs 14 elements of one width: a shape
  EXPECT_FALSE(run("12", "4"));     // 3 times: no pair of widths
}

// gloo's size check with a one-element buffer: the receiver was in a scalar collective, its peer sent a tensor.
TEST(rule_buffer_of_one_element, a_tensor_into_a_scalar_buffer_is_a_collective_only_some_ranks_call) {
  auto run = [](const std::string& got, const std::string& buf) -> std::optional<std::string> {
    inputs in;
    in.findings.push_back(make("torch_gloo_message_size_mismatch", 0, std::nullopt, {{"bytes", got}, {"buffer_bytes", buf}}, "op.preamble.length <= op.nbytes"));
    auto ctx = rules::make_context(in, builtin());
    std::vector<const finding*> root{&ctx.fs[0]};
    for (const auto& kr : rules::kind_rules())
      if (kr.name == "buffer_of_one_element")
        if (auto k = kr.fn(ctx, root, "collective_shape_mismatch")) return k->first;
    return std::nullopt;
  };
  EXPECT_EQ(run("676", "4"), "collective_count_mismatch");  // fault matrix: an extra all_reduce of a scalar
  EXPECT_EQ(run("452", "8"), "collective_count_mismatch");
  EXPECT_FALSE(run("8", "4"));      // two widths: size_ratio_is_an_element_width
  EXPECT_FALSE(run("32", "4"));     // 8 elements against 1: could be the same tensor's rows
  EXPECT_FALSE(run("180", "168"));  // a shape
}

// A collective-mismatch report cut before the peer's fingerprint, with the tracebacks printed beside it: two
// different torch.distributed calls are two ranks in different collectives (lightning-19106: broadcast against
// barrier, a count mismatch); one call, or a report that names the peer's op itself, decides nothing here.
TEST(rule_different_calls_in_tracebacks, two_calls_beside_a_cut_report_are_different_collectives) {
  auto run = [](std::vector<std::pair<std::string, std::string>> fields) -> std::optional<std::string> {
    inputs in;
    in.findings.push_back(make("torch_collective_mismatch_detail", 1, std::nullopt, fields,
                               "RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
                               "CollectiveFingerPrint(SequenceNumber=21, OpType=BROADCAST"));
    auto ctx = rules::make_context(in, builtin());
    std::vector<const finding*> root{&ctx.fs[0]};
    for (const auto& kr : rules::kind_rules())
      if (kr.name == "different_calls_in_tracebacks")
        if (auto k = kr.fn(ctx, root, "collective_shape_mismatch")) return k->first;
    return std::nullopt;
  };
  EXPECT_EQ(run({{"calls", "broadcast,barrier"}}), "collective_count_mismatch");
  EXPECT_EQ(run({{"calls", "monitored_barrier,all_reduce"}}), "collective_count_mismatch");
  EXPECT_EQ(run({{"calls", "all_gather_into_tensor,all_reduce"}}), "collective_type_mismatch");
  EXPECT_FALSE(run({{"calls", "broadcast_object_list,broadcast"}}));  // one call and its helper: one rank
  EXPECT_FALSE(run({{"calls", "all_reduce"}}));
  EXPECT_FALSE(run({{"calls", "all_reduce,barrier"}, {"peer_op", "ALLREDUCE"}}));  // the report says it all
  EXPECT_FALSE(run({}));
}

// Two agents on one machine: local rank 0 ran on both nodes; the line's host says which global rank it was.
TEST(rank_resolver, a_local_rank_of_several_nodes_is_the_one_on_the_lines_host) {
  rules::rank_resolver r;
  r.local_to_rank[0] = {0, 1};
  r.host_ranks["node-1"] = {0};
  r.host_ranks["node-2"] = {1};
  EXPECT_FALSE(r(std::nullopt, 0));
  EXPECT_EQ(r.on_host(std::nullopt, 0, std::string("node-2")), 1);
  EXPECT_EQ(r.on_host(std::nullopt, 0, std::string("node-1")), 0);
  EXPECT_FALSE(r.on_host(std::nullopt, 0, std::string("node-3")));
}

// --- the run's outcome and its consequences ------------------------------------------------------------

TEST(rule_ended_well, a_job_level_line_or_every_rank_done_and_no_failed_worker) {
  auto mark = [](std::optional<int> rank, bool job) {
    inputs::marked_line m;
    m.source = "console.log";
    m.text = job ? "[default] worker group successfully finished." : "training finished";
    m.rank = rank;
    m.job = job;
    return m;
  };
  {
    inputs in;
    activity(in, 0, 20);
    activity(in, 1, 20);
    in.success_ends.push_back(mark(0, false));
    EXPECT_EQ(rules::ended_well(rules::make_context(in, builtin())), nullptr);  // rank 1 never said so
    in.success_ends.push_back(mark(1, false));
    EXPECT_NE(rules::ended_well(rules::make_context(in, builtin())), nullptr);
  }
  {
    inputs in;
    activity(in, 0, 20);
    in.success_ends.push_back(mark(std::nullopt, true));
    EXPECT_NE(rules::ended_well(rules::make_context(in, builtin())), nullptr);
    ff::extract::exit_record e;
    e.rank = 1;
    e.exitcode = 1;
    in.exits.push_back(e);
    EXPECT_EQ(rules::ended_well(rules::make_context(in, builtin())), nullptr);  // a worker failed
  }
}

TEST(rule_cancel_after_task_exit, srun_cancelling_its_step_after_a_failed_task_is_not_the_root) {
  inputs in;
  auto cancel = make("slurm_job_cancelled", std::nullopt, std::nullopt, {}, "*** STEP 5.0 ON node-1 CANCELLED AT 2026-12-06T16:38:38 ***");
  cancel.line_no = 50;
  in.findings.push_back(cancel);
  EXPECT_NE(rules::strongest_cause(rules::make_context(in, builtin())), nullptr);  // alone: an outside stop
  ff::extract::exit_record e;
  e.launcher = "srun";
  e.rank = 0;
  e.exitcode = -11;
  e.signal = "SIGSEGV";
  e.source = "console.log";
  e.line_no = 48;
  in.exits.push_back(e);
  EXPECT_EQ(rules::strongest_cause(rules::make_context(in, builtin())), nullptr);
}

TEST(rule_odd_side_of_split, one_rank_against_more_missing_is_named_and_a_tie_is_not) {
  auto report = [](const std::string& missing, const std::string& expected) {
    inputs in;
    auto m = make("torch_fr_missing_ranks", std::nullopt, std::nullopt, {{"peer_rank", missing.substr(0, 1)}, {"missing", missing}}, "missing ranks");
    m.line_no = 5;
    auto x = make("torch_fr_missing_ranks", std::nullopt, std::nullopt, {{"expected", expected}}, "expected ranks");
    x.line_no = 8;
    in.findings = {m, x};
    return rank_by(in, "odd_side_of_split", "torch_fr_missing_ranks");
  };
  auto three = report("1, 2", "3");
  ASSERT_TRUE(three);
  EXPECT_EQ(three->rank, 0);
  // Two ranks: "1 never issued it" and "0 issued one more" read the same. The rule decides that no rank is
  // named, so the report's own "missing" rank is not taken as the culprit by a later rule.
  auto tie = report("1", "2");
  ASSERT_TRUE(tie);
  EXPECT_FALSE(tie->rank);
  EXPECT_NE(tie->why.find("read the same"), std::string::npos);
  EXPECT_FALSE(report("1", "4"));  // one missing of four: not a tie, and three ranks are not one odd rank
}

// ------------------------------------------------------------------ whose unprefixed traceback (merge_findings)

namespace {

ff::extract::exit_record exit_of(std::optional<int> rank, std::optional<int> local, int code, const std::string& signal = "",
                                 const std::string& launcher = "torchelastic") {
  ff::extract::exit_record e;
  e.rank = rank;
  e.local_rank = local;
  e.exitcode = code;
  e.signal = signal;
  e.launcher = launcher;
  return e;
}

const finding* with_text(const rules::context& ctx, const std::string& start) {
  for (const auto& f : ctx.fs)
    if (f.text.rfind(start, 0) == 0) return &f;
  return nullptr;
}

}  // namespace

// legacy_launch, disk full: rank 0's torch.save traceback then "terminate called after throwing" (exit -6,
// SIGABRT), rank 1's gloo "Connection closed by peer" (exit 1), all on one console with no rank prefix.
TEST(merge_findings, a_traceback_that_ended_in_an_abort_is_the_sigabrt_workers) {
  inputs in;
  auto disk = make("storage_no_space_errno28", std::nullopt, std::nullopt, {}, "RuntimeError: PytorchStreamWriter failed writing file data/4: file write failed");
  disk.raised = true;
  disk.aborted = true;
  auto closed = make("torch_gloo_peer_connection_closed", std::nullopt, std::nullopt, {}, "RuntimeError: Connection closed by peer");
  closed.raised = true;
  in.findings = {disk, closed};
  in.exits = {exit_of(std::nullopt, 0, -6), exit_of(1, 1, 1), exit_of(0, 0, -6, "SIGABRT")};
  auto ctx = rules::make_context(in, builtin());
  ASSERT_TRUE(with_text(ctx, "RuntimeError: Pytorch") && with_text(ctx, "RuntimeError: Connection"));
  EXPECT_EQ(with_text(ctx, "RuntimeError: Pytorch")->rank, 0);
  EXPECT_EQ(with_text(ctx, "RuntimeError: Connection")->rank, 1);
  // Without the abort mark, the one worker that exited with an error code raised both (the rule before).
  in.findings[0].aborted = false;
  ctx = rules::make_context(in, builtin());
  EXPECT_EQ(with_text(ctx, "RuntimeError: Pytorch")->rank, 1);
  // Two workers aborted: the mark does not say which.
  in.findings[0].aborted = true;
  in.exits.push_back(exit_of(2, 2, -6, "SIGABRT"));
  ctx = rules::make_context(in, builtin());
  EXPECT_FALSE(with_text(ctx, "RuntimeError: Pytorch")->rank);
  EXPECT_EQ(with_text(ctx, "RuntimeError: Connection")->rank, 1);
}

// mpirun --output-filename: the untagged console repeats logs/mpi/1/rank.N/stderr. The helper thread's
// KeyError is in rank.1's file: its console copy is rank 1's, though mpirun names rank 0 as the first to exit.
TEST(merge_findings, a_console_copy_takes_the_rank_of_its_per_rank_file) {
  inputs in;
  auto copy = make("py_keyerror", std::nullopt, std::nullopt, {}, "x");
  copy.text = "KeyError: \"augmentation policy 'randaug-1' not found in registry\"";
  copy.raised = true;
  auto own = copy;
  own.rank = 1;
  own.source = "mpi/1/rank.1/stderr";
  in.findings = {copy, own};
  in.exits = {exit_of(0, std::nullopt, 1, "", "mpirun")};
  auto ctx = rules::make_context(in, builtin());
  ASSERT_EQ(ctx.fs.size(), 1u);  // one line, seen twice
  EXPECT_EQ(ctx.fs[0].rank, 1);
  EXPECT_EQ(ctx.fs[0].duplicates, 1);
  // The same text under two ranks' files: the copy is not told apart by its text.
  auto other = own;
  other.rank = 0;
  other.source = "mpi/1/rank.0/stderr";
  in.findings = {copy, own, other};
  in.exits.clear();
  ctx = rules::make_context(in, builtin());
  ASSERT_EQ(ctx.fs.size(), 3u);
  EXPECT_FALSE(ctx.fs[0].rank);
  // A ranked line of the same file is not a copy's source: the console may repeat a rank's line unprefixed.
  own.source = copy.source;
  in.findings = {copy, own};
  ctx = rules::make_context(in, builtin());
  EXPECT_FALSE(ctx.fs[0].rank);
}

// The whole road, on the console of a real legacy-launch run (bench/faults 111, trimmed): rank 0's torch.save
// traceback ends in "terminate called after throwing" (exit -6), rank 1's gloo traceback (exit 1) follows,
// neither with a rank prefix. The disk-full error is rank 0's.
TEST(merge_findings, an_aborted_unprefixed_traceback_end_to_end) {
  const std::string log =
      "2026-12-06 16:32:14,774 [INFO] [rank0] epoch 0 step 6/20 loss 3.5633 lr 5.00e-02\n"
      "2026-12-06 16:32:14,774 [INFO] [rank1] epoch 0 step 6/20 loss 3.5633 lr 5.00e-02\n"
      "Traceback (most recent call last):\n"
      "  File \"/usr/lib/python3/dist-packages/torch/serialization.py\", line 423, in save\n"
      "    _save(obj, opened_zipfile, pickle_module, pickle_protocol)\n"
      "  File \"/usr/lib/python3/dist-packages/torch/serialization.py\", line 650, in _save\n"
      "    zip_file.write_record(name, storage.data_ptr(), num_bytes)\n"
      "RuntimeError: [enforce fail at inline_container.cc:445] . PytorchStreamWriter failed writing file data/4: file write failed\n"
      "\n"
      "During handling of the above exception, another exception occurred:\n"
      "\n"
      "Traceback (most recent call last):\n"
      "  File \"/tmp/job/train.py\", line 319, in main\n"
      "    torch.save({\"model\": model.state_dict()}, path)\n"
      "  File \"/usr/lib/python3/dist-packages/torch/serialization.py\", line 290, in __exit__\n"
      "    self.file_like.write_end_of_file()\n"
      "RuntimeError: [enforce fail at inline_container.cc:325] . unexpected pos 4032 vs 3936\n"
      "terminate called after throwing an instance of 'c10::Error'\n"
      "  what():  [enforce fail at inline_container.cc:325] . unexpected pos 4032 vs 3936\n"
      "frame #0: <unknown function> + 0x4c062 (0x7fb360bc4062 in /lib/x86_64-linux-gnu/libc10.so.1.13)\n"
      "\n"
      "Traceback (most recent call last):\n"
      "  File \"/tmp/job/train.py\", line 322, in main\n"
      "    dist.barrier()\n"
      "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 3152, in barrier\n"
      "    work.wait()\n"
      "RuntimeError: [./gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:25011\n"
      "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) local_rank: 0 (pid: 20047) of binary: /usr/bin/python3\n"
      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
      "============================================================\n"
      "/tmp/job/train.py FAILED\n"
      "------------------------------------------------------------\n"
      "Failures:\n"
      "[1]:\n"
      "  time      : 2026-12-06_16:32:17\n"
      "  host      : localhost\n"
      "  rank      : 1 (local_rank: 1)\n"
      "  exitcode  : 1 (pid: 20048)\n"
      "  error_file: <N/A>\n"
      "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
      "------------------------------------------------------------\n"
      "Root Cause (first observed failure):\n"
      "[0]:\n"
      "  time      : 2026-12-06_16:32:17\n"
      "  host      : localhost\n"
      "  rank      : 0 (local_rank: 0)\n"
      "  exitcode  : -6 (pid: 20047)\n"
      "  error_file: <N/A>\n"
      "  traceback : Signal 6 (SIGABRT) received by PID 20047\n"
      "============================================================\n";
  auto r = ff::testing::diagnose_text("aborted_traceback", log);
  EXPECT_EQ(r.diag.kind, "disk_full_checkpoint");
  EXPECT_EQ(r.diag.initiating_rank, 0) << r.diag.initiating_rule;
}

// ProcessGroupNCCL prints "[R] ... retrieving ncclUniqueId from [S] ... by key 'K'" in its group's numbering:
// S is a global rank only when R is the line's own global rank and K a collective's counter (not a send/recv
// pair's "a:b").
TEST(named_peer, group_numbering_names_no_global_rank) {
  finding f;
  f.rank = 1;
  f.captured = {{"rank", "1"}, {"peer_rank", "0"}, {"store_key", "0"}};
  EXPECT_EQ(ff::correlate::rules::named_peer(f), 0);
  f.rank = 9;  // printed [1] on global rank 9: a subgroup's numbering
  EXPECT_FALSE(ff::correlate::rules::named_peer(f));
  f.rank = 16;
  f.captured = {{"rank", "16"}, {"peer_rank", "0"}, {"store_key", "8:16"}};  // a point-to-point pair
  EXPECT_FALSE(ff::correlate::rules::named_peer(f));
}
