// Renderers, the matcher, the pipeline's wrap detection and thread equality, and watch's metrics: table
// tests where cases repeat.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "firstfault/report.hpp"
#include "firstfault/watch.hpp"
#include "test_support.hpp"

namespace {

using ff::correlate::verdict;

ff::pipeline::run a_run(verdict v) {
  ff::pipeline::run r;
  r.any_readable = true;
  r.inputs = {{"job/rank0.log", 3, 120}};
  r.total_lines = 3;
  auto& d = r.diag;
  d.verdict = v;
  if (v == verdict::failure) {
    d.signature = "cuda_oom";
    d.kind = "cuda_oom";
    d.category = "memory";
    d.title = "CUDA out of memory <script>alert(1)</script>";
    d.summary = "Rank 2 ran out of GPU memory.";
    d.confidence = ff::correlate::confidence::high;
    d.initiating_rank = 2;
    d.initiating_host = "host-1";
    d.evidence_lines.push_back({"job/rank2.log", "torch.OutOfMemoryError: CUDA out of memory. <img src=x>", "", 7, 2, "host-1"});
    ff::correlate::collateral_group g;
    g.signature = "torch_nccl_watchdog_timeout";
    g.kind = "nccl_timeout";
    g.title = "NCCL watchdog timeout";
    g.role = ff::kb::role::symptom;
    g.ranks = {0, 1, 3};
    g.count = 3;
    d.collateral.push_back(g);
    d.fix = {"Lower the batch size."};
    d.verify = {"nvidia-smi"};
  }
  if (v == verdict::undetermined) {
    ff::correlate::suspicious_line sl;
    sl.source = "job/rank0.log";
    sl.text = "RuntimeError: something odd";
    sl.line_no = 2;
    sl.rank = 0;
    sl.strong = true;
    sl.ranks = {0};
    d.suspicious.push_back(sl);
  }
  return r;
}

struct render_case {
  verdict v;
  bool readable;
  int exit;
  const char* json_verdict;
  const char* brief_start;
};

class render : public ::testing::TestWithParam<render_case> {};

TEST_P(render, every_format_says_the_verdict_and_the_exit_code_follows_it) {
  const auto& c = GetParam();
  auto r = a_run(c.v);
  r.any_readable = c.readable;
  EXPECT_EQ(ff::report::exit_code(r), c.exit);
  auto j = ff::report::to_json(r);
  EXPECT_EQ(j.value("schema", ""), "firstfault.report/v1");
  EXPECT_EQ(j.value("verdict", ""), c.json_verdict);
  EXPECT_EQ(ff::report::to_brief(r).rfind(c.brief_start, 0), 0u) << ff::report::to_brief(r);
  auto text = ff::report::to_terminal(r, {false});
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << "no colour when not asked";
  auto html = ff::report::to_html(r);
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_NE(ff::report::to_markdown(r).find(c.json_verdict), std::string::npos);
  if (c.v == verdict::failure) {
    EXPECT_EQ(j["initiating_rank"], 2);
    ASSERT_TRUE(j["collateral"].is_array());
    EXPECT_EQ(j["collateral"][0].value("role", ""), "symptom");
    EXPECT_EQ(j["root_cause"].value("confidence", ""), "high");
    EXPECT_NE(text.find("verdict: failure"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(report, render,
                         ::testing::Values(render_case{verdict::healthy, true, 0, "healthy", "healthy"},
                                           render_case{verdict::failure, true, 1, "failure", "failure kind=cuda_oom rank=2"},
                                           render_case{verdict::undetermined, true, 3, "undetermined", "undetermined"}));

TEST(render, colour_only_when_asked) {
  auto r = a_run(verdict::failure);
  EXPECT_NE(ff::report::to_terminal(r, {true}).find('\x1b'), std::string::npos);
}

struct match_case {
  const char* line;
  const char* signature;  // expected among the hits
};

class match_table : public ::testing::TestWithParam<match_case> {};

TEST_P(match_table, the_database_finds_the_signature) {
  const auto& eng = ff::testing::engine();
  ff::match::scratch s(eng.matcher);
  std::vector<ff::match::hit> hits;
  ASSERT_TRUE(eng.matcher.scan(GetParam().line, s, hits));
  std::vector<std::string> names;
  for (const auto& h : hits) names.push_back(ff::testing::builtin().signatures[static_cast<std::size_t>(h.signature)].name);
  EXPECT_NE(std::find(names.begin(), names.end(), GetParam().signature), names.end()) << GetParam().line;
}

INSTANTIATE_TEST_SUITE_P(
    match, match_table,
    ::testing::Values(
        match_case{"NVRM: Xid (PCI:0000:05:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", "xid_79_fallen_off_bus"},
        match_case{"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of "
                   "which 1.06 GiB is free.",
                   "cuda_oom"},
        match_case{"[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn=1024, "
                   "NumelOut=1024, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.",
                   "torch_nccl_watchdog_timeout"}));

TEST(match_table, an_ordinary_line_hits_nothing) {
  const auto& eng = ff::testing::engine();
  ff::match::scratch s(eng.matcher);
  std::vector<ff::match::hit> hits;
  ASSERT_TRUE(eng.matcher.scan("step 120 loss 2.31 lr 3e-4 tok/s 41000", s, hits));
  EXPECT_TRUE(hits.empty());
}

TEST(pipeline_wrap, a_paste_cut_at_a_fixed_width_is_recognised_and_a_log_is_not) {
  std::vector<std::pair<std::string, std::uint64_t>> log, paste;
  for (int i = 0; i < 40; ++i) log.emplace_back("[rank" + std::to_string(i % 8) + "]: step " + std::to_string(i) + " loss 2.5", i + 1);
  EXPECT_EQ(ff::pipeline::wrap_width(log), 0u);
  std::string text;
  for (int i = 0; i < 40; ++i) text += "torch.distributed.DistBackendError: NCCL error in ProcessGroupNCCL.cpp:1970, rank " + std::to_string(i) + "; ";
  for (std::size_t at = 0, n = 1; at < text.size(); at += 80, ++n) paste.emplace_back(text.substr(at, 80), n);
  EXPECT_EQ(ff::pipeline::wrap_width(paste), 80u);
}

// The report does not depend on the thread count (the reader/worker split keeps every stateful step in order).
TEST(pipeline_threads, one_and_two_threads_give_the_same_report) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("ff_threads_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream o(dir / "console.log");
    for (int step = 0; step < 3000; ++step)
      for (int r = 0; r < 8; ++r) o << "[rank" << r << "]: step " << step << " loss 2." << (step * 7 + r) % 100 << "\n";
    o << "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 5 has a total capacity of 79.15 GiB of which 1.06 GiB is free.\n";
    for (int r = 0; r < 8; ++r)
      if (r != 5)
        o << "[rank" << r << "]: [Rank " << r << "] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3001, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.\n";
  }
  std::string reports[2];
  for (unsigned t : {1u, 2u}) {
    ff::pipeline::options opt;
    opt.threads = t;
    auto r = ff::pipeline::diagnose({(dir / "console.log").string()}, ff::testing::engine(), opt);
    ASSERT_TRUE(r);
    reports[t - 1] = ff::report::to_json(r.value()).dump();
    EXPECT_EQ(r.value().diag.initiating_rank, 5);
  }
  EXPECT_EQ(reports[0], reports[1]);
  fs::remove_all(dir);
}

TEST(watch_metrics, labels_by_writer_and_restart_counters) {
  ff::watch::metrics m;
  m.ready = true;
  m.files = 3;
  m.rotations = 1;
  m.truncations = 2;
  m.last_line_at[{ff::watch::writer::by::rank, 2, {}}] = 100.0;
  m.last_line_at[{ff::watch::writer::by::local_rank, 1, {}}] = 100.0;
  m.last_line_at[{ff::watch::writer::by::file, 0, "odd\"name.log"}] = 100.0;
  auto text = ff::watch::to_prometheus(m, 101.5);
  for (const char* want : {"firstfault_rank_seconds_since_last_line{rank=\"2\"} 1.500",
                           "firstfault_rank_seconds_since_last_line{local_rank=\"1\"} 1.500",
                           "firstfault_rank_seconds_since_last_line{source=\"odd\\\"name.log\"} 1.500",
                           "firstfault_file_restarts_total{reason=\"rotated\"} 1", "firstfault_file_restarts_total{reason=\"truncated\"} 2",
                           "firstfault_files_followed 3"})
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  m.ready = false;
  EXPECT_EQ(ff::watch::to_prometheus(m, 101.5).find("firstfault_files_followed"), std::string::npos);
  EXPECT_EQ((ff::watch::writer{ff::watch::writer::by::rank, 7, {}}).label(), "rank 7");
  EXPECT_EQ((ff::watch::writer{ff::watch::writer::by::file, 0, "a.log"}).label(), "a.log");
}

}  // namespace

namespace {
// watch finishes a run (and masks the kept raw last lines) in the middle of a stream: that must not end an
// open private-key block, or the key's next lines take the light path unmasked.
TEST(watch_masking, a_report_in_the_middle_of_a_key_block_does_not_unmask_the_rest) {
  ff::pipeline::options opt;
  opt.learn_lines = 0;
  ff::pipeline::collector col(ff::testing::engine(), opt);
  ff::ingest::source src;
  src.display = "rank0.log";
  auto st = col.open_stream(src);
  std::uint64_t n = 0;
  col.add_line_gated(st, "[rank0]: step 1 loss 2.0", ++n);
  col.add_line_gated(st, "[rank0]: -----BEGIN RSA PRIVATE KEY-----", ++n);
  ff::pipeline::run mid;
  ff::pipeline::finish(col, mid);  // what watch's alert does
  const std::string body = "MIIEowIBAAKCAQEAv9Hq3Zk2mXqPzL0wYt7RsNcVbF4eGh8jKlMnOpQrStUvWxYz";
  col.add_line_gated(st, "[rank0]: " + body, ++n);
  ff::pipeline::run end;
  ff::pipeline::finish(col, end);
  auto json = ff::report::to_json(end).dump();
  EXPECT_EQ(json.find(body.substr(0, 16)), std::string::npos) << json;
  for (const auto& [key, act] : col.inputs().activity) EXPECT_EQ(act.last_line.find(body.substr(0, 16)), std::string::npos) << act.last_line;
}
}  // namespace
