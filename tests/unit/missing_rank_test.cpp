// Issue 43, "who is missing" and "the first to stop": rules that name the rank the others waited for, or the
// node that went silent, from what the missing ranks last printed. Hand-built inputs (no log parsing).
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <algorithm>
#include <ctime>

#include "firstfault/correlate_rules.hpp"

namespace {

using namespace ff::correlate;
using ff::normalize::timestamp;
using ff::testing::builtin;

int sig(const std::string& name) { return ff::testing::signature_index(name); }

timestamp at(int h, int mi, int s) {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 0;
  tm.tm_mday = 24;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  timestamp t;
  t.seconds = static_cast<double>(timegm(&tm));
  t.has_date = true;
  return t;
}

finding line(const std::string& name, std::optional<int> rank, std::uint64_t line_no, ff::match::fields captured = {},
             std::string text = "line", std::string source = "pasted.log") {
  return ff::testing::make_finding(name, line_no, std::move(text), rank, std::move(captured), std::move(source));
}

finding watchdog(std::optional<int> rank, std::uint64_t line_no, const std::string& ran_ms = "1802246") {
  return line("torch_nccl_watchdog_timeout", rank, line_no, {{"ran_ms", ran_ms}, {"timeout_ms", "1800000"}},
              "Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for " + ran_ms +
                  " milliseconds before timing out.");
}

inputs::marked_line marked(std::string text, std::uint64_t line_no, std::optional<int> rank = std::nullopt,
                           ff::match::fields fields = {}, std::string source = "pasted.log") {
  inputs::marked_line w;
  w.source = std::move(source);
  w.text = std::move(text);
  w.line_no = line_no;
  w.rank = rank;
  w.fields = std::move(fields);
  return w;
}

std::optional<rules::inference> infer(const inputs& in, std::string_view rule) {
  auto ctx = rules::make_context(in, builtin());
  for (const auto& r : rules::inference_rules())
    if (r.name == rule) return r.fn(ctx);
  ADD_FAILURE() << "no rule " << rule;
  return std::nullopt;
}

// --- work_spans_timeout ---------------------------------------------------------------------------

TEST(rule_work_spans_timeout, a_work_line_that_names_its_rank_before_rankless_watchdog_frames) {
  // gh-particleflow-390: rank 0 runs predictions alone (its bar's label says so), then the watchdog's frames.
  inputs in;
  in.work_lines.push_back(marked("Running predictions on sample ttbar on rank=0:  75%|███▌ | 3/4 [01:51<00:25, 25.36s/it]", 4,
                                 std::nullopt, {{"rank", "0"}}));
  in.findings.push_back(line("torch_nccl_watchdog_stack_frames", std::nullopt, 6, {},
                             "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<...>) + 0x1d2"));
  auto inf = infer(in, "work_spans_timeout");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->entry, "timeout_absent_rank0");
  EXPECT_EQ(inf->rank, 0);
  ASSERT_FALSE(inf->extra.empty());
  EXPECT_NE(inf->extra[0].text.find("rank 0 (named in the line) started"), std::string::npos) << inf->extra[0].text;
}

TEST(rule_work_spans_timeout, a_work_line_of_no_rank_gives_the_kind_but_no_rank) {
  inputs in;
  in.work_lines.push_back(marked("Saving model checkpoint to out/checkpoint-500", 1));
  in.findings.push_back(watchdog(6, 2));
  auto inf = infer(in, "work_spans_timeout");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->entry, "timeout_absent_rank0");
  EXPECT_FALSE(inf->rank);
}

TEST(rule_work_spans_timeout, nothing_when_the_working_rank_itself_timed_out) {
  inputs in;
  in.work_lines.push_back(marked("saving checkpoint", 1, 0));
  in.findings.push_back(watchdog(0, 2));
  in.findings.push_back(watchdog(1, 3));
  EXPECT_FALSE(infer(in, "work_spans_timeout"));
}

TEST(rule_work_spans_timeout, nothing_when_a_rank_that_did_not_time_out_trained_after_the_work_line) {
  inputs in;
  in.source_names = {"pasted.log"};
  in.work_lines.push_back(marked("***** Running Evaluation *****", 1));
  auto& a = in.activity[rank_key::global_rank(0)];
  a.lines = 3;
  a.last_step = 120;
  a.last_step_source = 0;
  a.last_step_line_no = 5;  // rank 0 trained on after the evaluation began: not what held the collective
  in.findings.push_back(watchdog(1, 9));
  EXPECT_FALSE(infer(in, "work_spans_timeout"));
}

TEST(rule_work_spans_timeout, nothing_when_a_progress_line_of_no_rank_followed_the_work_line) {
  // The Trainer logs on one process without a prefix: the save at step 500, then steps on, then a timeout.
  inputs in;
  in.work_lines.push_back(marked("Saving model checkpoint to out/checkpoint-500", 1));
  in.fact_lines.push_back(marked(" 40%|████ | 800/2000 [01:40<02:30, 8.00it/s]", 5, std::nullopt, {{"step", "800"}, {"planned", "2000"}}));
  in.findings.push_back(watchdog(6, 9));
  EXPECT_FALSE(infer(in, "work_spans_timeout"));
}

TEST(rule_work_spans_timeout, nothing_when_the_work_began_after_the_collective) {
  inputs in;
  auto w = marked("saving checkpoint to /ckpt", 1, 0);
  w.ts = at(10, 40, 0);  // the collective began at 10:00:00 (ran 1,800 s before 10:30:00): the save came later
  in.work_lines.push_back(w);
  auto f = watchdog(1, 2, "1800000");
  f.ts = at(10, 30, 0);
  in.findings.push_back(f);
  EXPECT_FALSE(infer(in, "work_spans_timeout"));
  in.work_lines[0].ts = at(9, 59, 50);  // begun just before it: the save is what the others waited for
  auto inf = infer(in, "work_spans_timeout");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->rank, 0);
}

TEST(rule_work_spans_timeout, a_progress_bar_that_ran_as_long_as_the_collective_waited) {
  // gh-accelerate-314: a scan's bar at 30:01 when rank 6's ALLREDUCE had waited 1,802 s.
  inputs in;
  in.fact_lines.push_back(marked(" 35%|████ | 73811210851/208140108456 [30:01<57:14, 39115047.81MB/s]", 2, std::nullopt, {{"elapsed", "30:01"}}));
  in.findings.push_back(watchdog(6, 3));
  auto inf = infer(in, "work_spans_timeout");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->entry, "timeout_absent_rank0");
  EXPECT_FALSE(inf->rank);
  EXPECT_NE(inf->why.find("30:01 (1801 s)"), std::string::npos) << inf->why;
}

TEST(rule_work_spans_timeout, a_bar_of_another_length_says_nothing) {
  // A training loop's bar stops when its rank enters the collective: its elapsed time is the epoch's so far.
  for (std::string el : {"12:40", "30:10", "1:30:01"}) {
    inputs in;
    in.fact_lines.push_back(marked(" 35%|████ | 700/2000 [" + el + "<57:14, 1.2it/s]", 2, std::nullopt, {{"elapsed", el}}));
    in.findings.push_back(watchdog(6, 3));
    EXPECT_FALSE(infer(in, "work_spans_timeout")) << el;
  }
}

TEST(rule_work_spans_timeout, a_bar_after_the_timeout_says_nothing) {
  inputs in;
  in.fact_lines.push_back(marked(" 35%|████ | 7/20 [30:01<57:14, 1.2it/s]", 4, std::nullopt, {{"elapsed", "30:01"}}));
  in.findings.push_back(watchdog(6, 3));
  EXPECT_FALSE(infer(in, "work_spans_timeout"));
}

// --- timeout_absent_rank reads a work line's rank from its text ---------------------------------------

TEST(rule_timeout_absent_rank, a_work_line_glued_after_a_bar_is_the_rank_it_names) {
  // A tqdm bar ends without a newline, so the next log record is glued to it and its prefix is not peeled:
  // "Epoch 0: 20%|...| 4/20 [00:00<00:01]2026-12-06 16:44:29,001 [INFO] [rank0] saving full checkpoint ...".
  inputs in;
  in.source_names = {"console.log"};
  for (int r : {0, 1}) {
    auto& a = in.activity[rank_key::global_rank(r)];
    a.lines = 5;
    a.last_line = "epoch 0 step 4/20";
    a.last_step = 4;
    a.last_step_source = 0;
    a.last_step_line_no = 10;
  }
  in.findings.push_back(line("torch_gloo_wait_timeout", 1, 30, {}, "RuntimeError: Timed out waiting 10000ms for recv operation to complete",
                             "console.log"));
  in.work_lines.push_back(marked("Epoch 0:  20%|██ | 4/20 [00:00<00:01]2026-12-06 16:44:29,001 [INFO] [rank0] saving full checkpoint to /ckpt/step_4.pt",
                                 17, std::nullopt, {{"rank", "0"}}, "console.log"));
  auto inf = infer(in, "timeout_absent_rank");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->rank, 0);
  EXPECT_EQ(inf->entry, "timeout_absent_rank0");
}

// --- node_went_silent ------------------------------------------------------------------------------

// Three nodes, one rank each, each node's console in its own file: rank r on host node<r>, training to step 6.
inputs three_nodes() {
  inputs in;
  in.source_names = {"node0.log", "node1.log", "node2.log"};
  for (int r = 0; r < 3; ++r) {
    std::string h = "node" + std::to_string(r);
    in.hosts.insert(h);
    in.host_ranks[h].insert(r);
    auto& a = in.activity[rank_key::global_rank(r)];
    a.lines = 8;
    a.last_line = "epoch 0 step 6/20 loss 5.2089";
    a.last_source = static_cast<std::uint32_t>(r);
    a.last_line_no = 7;
    a.last_step = 6;
    a.last_step_source = a.last_source;
    a.last_step_line_no = 7;
  }
  return in;
}

// Rank r lost its peer (gloo) and its node's agent reported the worker failed.
void lost_peer(inputs& in, int r) {
  std::string h = "node" + std::to_string(r);
  auto f = line("torch_gloo_peer_connection_closed", r, 19, {}, "RuntimeError: [./gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:13197",
                h + ".log");
  f.host = h;
  in.findings.push_back(f);
  ff::extract::exit_record e;
  e.local_rank = 0;
  e.exitcode = 1;
  e.from_agent_line = true;
  e.source = h + ".log";
  e.line_no = 20;
  in.exits.push_back(e);
}

TEST(rule_node_went_silent, the_node_whose_ranks_and_agent_said_nothing) {
  auto in = three_nodes();
  lost_peer(in, 0);
  lost_peer(in, 1);
  auto inf = infer(in, "node_went_silent");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->entry, "node_went_silent");
  EXPECT_EQ(inf->rank, 2);
  EXPECT_NE(inf->why.find("host node2 (rank 2)"), std::string::npos) << inf->why;
  ASSERT_FALSE(inf->extra.empty());
  EXPECT_NE(inf->extra[0].text.find("last line of rank 2"), std::string::npos);
}

TEST(rule_node_went_silent, nothing_when_its_agent_reported_the_worker) {
  // A worker that died alone is reported by its own agent: launcher_exit names it, not a node failure.
  auto in = three_nodes();
  lost_peer(in, 0);
  lost_peer(in, 1);
  ff::extract::exit_record e;
  e.local_rank = 0;
  e.exitcode = -9;
  e.from_agent_line = true;
  e.source = "node2.log";
  e.host = "node2";
  in.exits.push_back(e);
  EXPECT_FALSE(infer(in, "node_went_silent"));
}

TEST(rule_node_went_silent, nothing_when_the_others_timed_out_instead_of_losing_the_peer) {
  // A rank that hangs (SIGSTOP, a stuck kernel) keeps its sockets: its peers wait and time out.
  auto in = three_nodes();
  for (int r : {0, 1}) {
    auto f = line("torch_gloo_wait_timeout", r, 19, {}, "RuntimeError: Timed out waiting 10000ms for recv operation to complete",
                  "node" + std::to_string(r) + ".log");
    f.host = "node" + std::to_string(r);
    in.findings.push_back(f);
  }
  lost_peer(in, 0);
  in.findings.erase(std::remove_if(in.findings.begin(), in.findings.end(), [&](const finding& f) { return f.signature == sig("torch_gloo_peer_connection_closed"); }),
                    in.findings.end());
  EXPECT_FALSE(infer(in, "node_went_silent"));
}

TEST(rule_node_went_silent, nothing_when_two_nodes_went_silent) {
  auto in = three_nodes();
  lost_peer(in, 0);
  EXPECT_FALSE(infer(in, "node_went_silent"));
}

TEST(rule_node_went_silent, nothing_when_the_silent_node_had_not_trained) {
  auto in = three_nodes();
  lost_peer(in, 0);
  lost_peer(in, 1);
  in.activity[rank_key::global_rank(2)].last_step.reset();
  EXPECT_FALSE(infer(in, "node_went_silent"));
}

TEST(rule_node_went_silent, nothing_when_the_silent_ranks_lived_past_the_others_failure) {
  auto in = three_nodes();
  lost_peer(in, 0);
  lost_peer(in, 1);
  for (auto& f : in.findings) f.ts = at(16, 28, 21);
  in.activity[rank_key::global_rank(2)].last_ts = at(16, 28, 40);  // still printing 19 s after its peers failed
  EXPECT_FALSE(infer(in, "node_went_silent"));
  in.activity[rank_key::global_rank(2)].last_ts = at(16, 28, 21);
  EXPECT_TRUE(infer(in, "node_went_silent"));
}

// --- store_client_fallback (root rule) ---------------------------------------------------------------

const finding* root_by(const rules::context& ctx, std::string_view rule) {
  const finding* root = rules::strongest_cause(ctx);
  if (!root) return nullptr;
  for (const auto& r : rules::root_rules())
    if (r.name == rule) return r.fn(ctx, *root);
  ADD_FAILURE() << "no rule " << rule;
  return nullptr;
}

inputs port_warning_then(bool with_timeout, bool raised) {
  inputs in;
  auto w = line("torch_rendezvous_port_in_use", std::nullopt, 2, {{"port", "53919"}},
                raised ? "RuntimeError: The server socket has failed to listen on any local network address. The server socket has failed to bind "
                         "to [::]:53919 (errno: 98 - Address already in use)."
                       : "The server socket has failed to bind to [::]:53919 (errno: 98 - Address already in use).",
                "node1.log");
  w.raised = raised;
  in.findings.push_back(w);
  if (with_timeout)
    in.findings.push_back(line("torch_rendezvous_timeout", std::nullopt, 45, {}, "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError", "node0.log"));
  return in;
}

TEST(rule_store_client_fallback, a_bind_warning_before_a_rendezvous_timeout_is_not_the_cause) {
  auto in = port_warning_then(true, false);
  auto ctx = rules::make_context(in, builtin());
  ASSERT_EQ(ctx.sig(*rules::strongest_cause(ctx)).kind, "rendezvous_port_in_use");  // the higher priority, before the rule
  const auto* root = root_by(ctx, "store_client_fallback");
  ASSERT_TRUE(root);
  EXPECT_EQ(ctx.sig(*root).kind, "rendezvous_timeout");
}

TEST(rule_store_client_fallback, a_raised_bind_error_stays_the_cause) {
  auto in = port_warning_then(true, true);
  auto ctx = rules::make_context(in, builtin());
  EXPECT_FALSE(root_by(ctx, "store_client_fallback"));
}

TEST(rule_store_client_fallback, the_warning_alone_stays_the_cause) {
  auto in = port_warning_then(false, false);
  auto ctx = rules::make_context(in, builtin());
  EXPECT_FALSE(root_by(ctx, "store_client_fallback"));
}

TEST(rule_store_client_fallback, the_report_says_why_the_warning_is_set_aside) {
  auto in = port_warning_then(true, false);
  auto d = correlate(in, builtin());
  EXPECT_EQ(d.kind, "rendezvous_timeout");
  EXPECT_EQ(d.rule, "store_client_fallback");
  auto g = std::find_if(d.collateral.begin(), d.collateral.end(), [](const collateral_group& c) { return c.kind == "rendezvous_port_in_use"; });
  ASSERT_NE(g, d.collateral.end());
  EXPECT_EQ(g->explanation.rfind("not the cause (store_client_fallback): ", 0), 0u) << g->explanation;
}

// --- launcher_exit: the launcher's first failure only lost its peer ----------------------------------

ff::extract::exit_record child(int rank, int code, bool root_cause) {
  ff::extract::exit_record e;
  e.rank = rank;
  e.local_rank = rank;
  e.exitcode = code;
  e.root_cause = root_cause;
  e.time = "2026-12-06_16:11:04";
  e.source = "console.log";
  e.line_no = static_cast<std::uint64_t>(60 + rank);
  return e;
}

TEST(rule_launcher_exit, a_worker_that_exited_silently_went_before_the_root_cause_that_lost_its_peer) {
  // os._exit(3) on rank 1: no traceback; rank 0 then fails on the closed connection and torchrun's "Root Cause
  // (first observed failure)" names rank 0, the first exit its agent noticed.
  inputs in;
  in.exits = {child(1, 3, false), child(0, 1, true)};
  auto f = line("torch_gloo_peer_connection_closed", 0, 36, {}, "RuntimeError: [./gloo/transport/tcp/pair.cc:589] Read error [127.0.0.1]:3797: Connection reset by peer",
                "console.log");
  f.raised = true;
  in.findings.push_back(f);
  auto inf = infer(in, "launcher_exit");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->entry, "launcher_exit_error");
  EXPECT_EQ(inf->rank, 1);
  EXPECT_NE(inf->why.find("rank 1 failed with no error of its own"), std::string::npos) << inf->why;
  in.findings[0].rank.reset();  // the traceback had no prefix: Python's exit status 1 says whose it was
  inf = infer(in, "launcher_exit");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->rank, 1);
}

TEST(rule_launcher_exit, the_root_cause_stays_when_it_did_not_lose_a_peer) {
  inputs in;
  in.exits = {child(1, 3, false), child(0, 1, true)};
  auto inf = infer(in, "launcher_exit");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->rank, 0);
}

TEST(rule_launcher_exit, the_root_cause_stays_when_two_workers_exited_silently) {
  inputs in;
  in.exits = {child(1, 3, false), child(2, 3, false), child(0, 1, true)};
  in.findings.push_back(line("torch_gloo_peer_connection_closed", 0, 36, {}, "RuntimeError: [./gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:1",
                             "console.log"));
  auto inf = infer(in, "launcher_exit");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->rank, 0);
}

// --- thread_died_on_waited_rank (rank rule) ----------------------------------------------------------

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

TEST(rule_thread_died_on_waited_rank, the_rank_that_never_timed_out_owns_the_dead_thread) {
  // "Exception in thread prefetch:" and its KeyError, printed with no prefix and given to rank 0 (the one worker
  // that exited with an error); but rank 0 timed out waiting in a collective: the thread was rank 1's.
  inputs in;
  in.findings.push_back(line("py_thread_exception", std::nullopt, 5, {}, "Exception in thread prefetch:", "console.log"));
  in.findings.push_back(line("py_keyerror", 0, 13, {}, "KeyError: \"augmentation policy 'randaug-2' not found in registry\"", "console.log"));
  in.findings.push_back(line("torch_gloo_wait_timeout", 0, 39, {}, "RuntimeError: Timed out waiting 10000ms for recv operation to complete", "console.log"));
  in.activity[rank_key::global_rank(1)].lines = 4;
  auto d = rank_by(in, "thread_died_on_waited_rank", "py_keyerror");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->rank, 1);
}

TEST(rule_thread_died_on_waited_rank, nothing_without_a_dead_thread_or_when_its_rank_did_not_time_out) {
  inputs in;
  in.findings.push_back(line("py_keyerror", 0, 13, {}, "KeyError: 'x'", "console.log"));
  in.findings.push_back(line("torch_gloo_wait_timeout", 0, 39, {}, "RuntimeError: Timed out waiting 10000ms for recv operation to complete", "console.log"));
  in.activity[rank_key::global_rank(1)].lines = 4;
  EXPECT_FALSE(rank_by(in, "thread_died_on_waited_rank", "py_keyerror"));  // no "Exception in thread" before it
  in.findings.push_back(line("py_thread_exception", std::nullopt, 5, {}, "Exception in thread prefetch:", "console.log"));
  in.findings[1].rank = 1;  // the timeout was rank 1's: rank 0's thread died, its own rank decides
  EXPECT_FALSE(rank_by(in, "thread_died_on_waited_rank", "py_keyerror"));
}

TEST(rule_thread_died_on_waited_rank, a_timeout_of_no_rank_is_the_one_worker_that_exited_with_an_error) {
  // Nothing has a prefix: the timeout traceback ended the worker that exited with code 1 (rank 1; the other was
  // still running when its launcher stopped it), the KeyError was given to rank 1 too: the thread was rank 0's.
  inputs in;
  in.findings.push_back(line("py_thread_exception", std::nullopt, 5, {}, "Exception in thread prefetch:", "console.log"));
  in.findings.push_back(line("py_keyerror", 1, 13, {}, "KeyError: \"augmentation policy 'randaug-1' not found in registry\"", "console.log"));
  in.findings.push_back(line("torch_gloo_wait_timeout", std::nullopt, 44, {}, "RuntimeError: Timed out waiting 10000ms for recv operation to complete",
                             "console.log"));
  ff::extract::exit_record e;
  e.rank = 1;
  e.exitcode = 1;
  e.source = "console.log";
  in.exits.push_back(e);
  for (int r : {0, 1}) in.activity[rank_key::global_rank(r)].lines = 4;
  auto d = rank_by(in, "thread_died_on_waited_rank", "py_keyerror");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->rank, 0);
}

}  // namespace
