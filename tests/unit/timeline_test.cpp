// The per-rank timeline (timeline.hpp): lanes, folding of large jobs, the interesting ranks kept apart,
// the single-node local-rank rule, node events, and the JSON form history draws from.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "firstfault/pipeline.hpp"
#include "firstfault/timeline.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

struct job {
  fs::path dir = fs::temp_directory_path() / ("ff-timeline-" + std::to_string(::getpid()) + "-" + std::to_string(rand()));
  job() { fs::create_directories(dir); }
  ~job() { fs::remove_all(dir); }
  void file(const std::string& name, const std::string& text) { std::ofstream(dir / name) << text; }
  ff::pipeline::run run() {
    auto r = ff::pipeline::diagnose({dir.string()}, ff::testing::engine(), {});
    if (!r) {
      ADD_FAILURE() << "diagnose failed: " << r.error().message;
      return {};
    }
    return std::move(r).value();
  }
};

// A torchrun console line of `rank` at second `s` past 10:00:00 (glog-style c10 header after the rank tag).
std::string at(int rank, int s, const std::string& msg) {
  char b[64];
  std::snprintf(b, sizeof b, "[rank%d]:[I1206 10:%02d:%02d.000000000 ", rank, s / 60, s % 60);
  return b + std::string("train.py:1] ") + msg + "\n";
}

std::string watchdog_line(int rank, int s) {
  char b[400];
  std::snprintf(b, sizeof b,
                "[rank%d]:[E1206 10:%02d:%02d.000000000 ProcessGroupNCCL.cpp:607] [Rank %d] Watchdog caught collective operation timeout: "
                "WorkNCCL(SeqNum=183, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.\n",
                rank, s / 60, s % 60, rank);
  return b;
}

const char* kOom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.15 GiB of which 1.00 GiB is free.";

// world size `n`, rank `bad` runs out of memory at 10:01:00, the others time out at 10:11:00.
std::string oom_console(int n, int bad) {
  std::string log;
  for (int r = 0; r < n; ++r) log += at(r, 0, "step 1");
  for (int r = 0; r < n; ++r) log += at(r, 30, "step 2");
  log += "[rank" + std::to_string(bad) + "]:" + std::string(kOom) + "\n";
  for (int r = 0; r < n; ++r)
    if (r != bad) log += watchdog_line(r, 11 * 60);
  return log;
}

std::size_t ranks_drawn(const ff::timeline::model& m) {
  std::size_t n = 0;
  for (const auto& h : m.hosts)
    for (const auto& l : h.lanes) n += l.ranks.size();
  return n;
}

// The host group and lane that draw `rank`, or nulls.
std::pair<const ff::timeline::host_group*, const ff::timeline::lane*> find_rank(const ff::timeline::model& m, int rank) {
  for (const auto& h : m.hosts)
    for (const auto& l : h.lanes)
      if (std::find(l.ranks.begin(), l.ranks.end(), rank) != l.ranks.end()) return {&h, &l};
  return {nullptr, nullptr};
}

const ff::timeline::lane* lane_of_rank(const ff::timeline::model& m, int rank) { return find_rank(m, rank).second; }

TEST(timeline, eight_ranks_get_a_lane_each_with_the_root_on_the_failing_rank) {
  job j;
  j.file("console.log", oom_console(8, 5));
  auto r = j.run();
  ASSERT_EQ(r.diag.initiating_rank, 5);
  const auto& m = r.timeline;
  EXPECT_EQ(m.axis, ff::timeline::axis::wall);
  EXPECT_EQ(m.lanes, 8u);
  EXPECT_EQ(ranks_drawn(m), 8u);
  const auto* bad = lane_of_rank(m, 5);
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->label, "rank 5");
  EXPECT_TRUE(bad->initiating);
  ASSERT_FALSE(bad->events.empty());
  EXPECT_EQ(bad->events.front().what, ff::timeline::mark::root);
  const auto* other = lane_of_rank(m, 0);
  ASSERT_NE(other, nullptr);
  EXPECT_FALSE(other->initiating);
  ASSERT_FALSE(other->events.empty());
  EXPECT_EQ(other->events.front().what, ff::timeline::mark::collateral);
  EXPECT_EQ(other->events.front().seq, 183);
  ASSERT_TRUE(m.root_at.has_value());
  EXPECT_LT(*m.root_at, other->events.front().at);  // the OOM came before the timeouts
}

TEST(timeline, a_large_job_folds_the_ranks_that_tell_one_story_and_keeps_the_failing_rank_apart) {
  job j;
  j.file("console.log", oom_console(64, 17));
  auto r = j.run();
  ASSERT_EQ(r.diag.initiating_rank, 17);
  const auto& m = r.timeline;
  EXPECT_LE(m.lanes, ff::timeline::kMaxLanes);
  EXPECT_LT(m.lanes, 8u);  // 63 ranks with the same story need very few lanes
  EXPECT_EQ(ranks_drawn(m), 64u);  // every rank is on some lane
  const auto* bad = lane_of_rank(m, 17);
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->ranks, std::vector<int>{17});
  EXPECT_TRUE(bad->initiating);
  const auto* folded = lane_of_rank(m, 16);
  ASSERT_NE(folded, nullptr);
  EXPECT_TRUE(folded->folded);
  EXPECT_EQ(folded->label.rfind("ranks ", 0), 0u) << folded->label;
}

TEST(timeline, a_rank_missing_from_the_timeout_every_other_rank_printed_keeps_its_own_lane) {
  job j;
  std::string log;
  for (int r = 0; r < 48; ++r) log += at(r, 0, "step 1");
  for (int r = 0; r < 48; ++r)
    if (r != 30) log += watchdog_line(r, 11 * 60);
  j.file("console.log", log);
  auto r = j.run();
  const auto* lone = lane_of_rank(r.timeline, 30);
  ASSERT_NE(lone, nullptr);
  EXPECT_EQ(lone->ranks, std::vector<int>{30});
  EXPECT_EQ(ranks_drawn(r.timeline), 48u);
}

TEST(timeline, local_ranks_on_one_node_are_the_global_ranks) {
  // torchrun --standalone on one node with --tee: only [defaultN]: tags, LOCAL_RANK == RANK.
  job j;
  std::string log;
  for (int l = 0; l < 4; ++l) log += "[default" + std::to_string(l) + "]:step 1\n";
  log += "[default2]:" + std::string(kOom) + "\n";
  j.file("console.log", log);
  auto r = j.run();
  const auto* two = lane_of_rank(r.timeline, 2);
  ASSERT_NE(two, nullptr) << "local rank 2 was not drawn as rank 2";
  EXPECT_EQ(two->label, "rank 2");
  EXPECT_EQ(r.timeline.axis, ff::timeline::axis::position);  // no times in the lines
}

TEST(timeline, a_node_event_without_a_rank_is_drawn_for_its_host) {
  job j;
  j.file("rank0.log", "2026-01-01 10:00:00,000 INFO    [rank0] x - step 1\n"
                      "2026-01-01 10:00:09,000 INFO    [rank0] x - RuntimeError: CUDA error: an illegal memory access was encountered\n");
  j.file("dmesg.log", "[Thu Jan  1 10:00:05 2026] NVRM: Xid (PCI:0000:09:00): 79, pid=0, GPU has fallen off the bus.\n");
  auto r = j.run();
  ASSERT_EQ(r.diag.kind, "gpu_fell_off_bus");
  bool node_mark = false;
  for (const auto& h : r.timeline.hosts)
    for (const auto& l : h.lanes)
      for (const auto& e : l.events) node_mark = node_mark || e.kind == "gpu_fell_off_bus";
  EXPECT_TRUE(node_mark);
}

// torchrun's [rankN]: lines carry no host; the agent's failure block names the host of each failed rank.
TEST(timeline, a_rank_without_a_host_of_its_own_is_drawn_on_the_host_its_failure_block_names) {
  job j;
  auto failure = [](int rank, const char* exitcode) {
    return "  time      : 2024-12-06_10:11:05\n  host      : gpu-node-7\n  rank      : " + std::to_string(rank) + " (local_rank: " +
           std::to_string(rank) + ")\n  exitcode  : " + exitcode + "\n  error_file: <N/A>\n"
           "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n";
  };
  j.file("console.log", oom_console(4, 2) +
                            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
                            "============================================================\ntrain.py FAILED\n"
                            "------------------------------------------------------------\nFailures:\n[1]:\n" +
                            failure(3, "-6 (pid: 1235)") +
                            "------------------------------------------------------------\nRoot Cause (first observed failure):\n[0]:\n" +
                            failure(2, "1 (pid: 1234)") + "============================================================\n");
  auto r = j.run();
  ASSERT_EQ(r.diag.initiating_rank, 2);
  auto host_of = [&](int rank) -> std::string {
    const auto* h = find_rank(r.timeline, rank).first;
    return !h ? "" : h->host.empty() ? "?" : h->host;
  };
  EXPECT_NE(host_of(3), "?");
  EXPECT_NE(host_of(3), "");
  EXPECT_EQ(host_of(3), host_of(2));
  EXPECT_EQ(host_of(0), "?");  // no line and no block names its host
}

// One node, one name: a single-node job (torchrun's [defaultN]: prefix and the rank agree) whose failure
// block names its host for some ranks draws every rank on that host, not a second "host not known" group.
TEST(timeline, a_single_node_job_has_one_host_name) {
  job j;
  std::string log;
  for (int r = 0; r < 3; ++r) log += "[default" + std::to_string(r) + "]:rank=" + std::to_string(r) + " step 1\n";
  log += "[default2]:" + std::string(kOom) + "\n";
  auto failure = [](int rank) {
    return "  time      : 2024-12-06_10:11:05\n  host      : localhost\n  rank      : " + std::to_string(rank) + " (local_rank: " +
           std::to_string(rank) + ")\n  exitcode  : 1 (pid: 12" + std::to_string(rank) + ")\n  error_file: <N/A>\n";
  };
  log += "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
         "============================================================\ntrain.py FAILED\n"
         "------------------------------------------------------------\nFailures:\n[1]:\n" +
         failure(1) + "------------------------------------------------------------\nRoot Cause (first observed failure):\n[0]:\n" +
         failure(0) + "============================================================\n";
  j.file("console.log", log);
  auto r = j.run();
  ASSERT_EQ(r.diag.initiating_rank, 2);
  ASSERT_EQ(r.timeline.hosts.size(), 1u);
  EXPECT_EQ(r.timeline.hosts[0].host, "localhost");
  EXPECT_EQ(ranks_drawn(r.timeline), 3u);
}

TEST(timeline, the_json_form_draws_the_same_picture) {
  job j;
  j.file("console.log", oom_console(64, 17));
  auto r = j.run();
  ASSERT_FALSE(r.timeline.empty());
  auto js = ff::timeline::to_json(r.timeline);
  auto back = ff::timeline::from_json(js);
  EXPECT_EQ(ff::timeline::to_json(back), js);
  EXPECT_EQ(ff::timeline::to_svg(back), ff::timeline::to_svg(r.timeline));
  // A stored report from before the timeline was kept, or a damaged one: an empty picture, not a throw.
  EXPECT_TRUE(ff::timeline::from_json(nlohmann::json()).empty());
  EXPECT_TRUE(ff::timeline::from_json(nlohmann::json::parse(R"({"hosts":[{"lanes":[{"events":"x","ranks":[1,"a"]}]}],"start":"z"})")).lanes == 1);
  EXPECT_NO_THROW(ff::timeline::to_svg(ff::timeline::from_json(nlohmann::json::parse(R"({"start":5,"end":5,"hosts":[{"host":"h","lanes":[{}]}]})"))));
}

}  // namespace

// 512 ranks that tell many different stories (they stopped at different times, with different errors) still
// fit in kMaxLanes lanes, with labels that fit their column, and the failing rank on a lane of its own.
TEST(timeline, many_stories_fold_under_the_lane_cap_with_short_labels) {
  job j;
  std::string log;
  for (int r = 0; r < 512; ++r) log += at(r, 0, "step 1");
  for (int r = 0; r < 512; ++r) log += at(r, 1 + (r * 7) % 50, "step 2");
  log += "[rank331]:" + std::string(kOom) + "\n";
  for (int r = 0; r < 512; ++r)
    if (r != 331) log += r % 3 == 0 ? watchdog_line(r, 11 * 60) : at(r, 11 * 60, "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.2]:12345");
  j.file("console.log", log);
  auto r = j.run();
  ASSERT_EQ(r.diag.initiating_rank, 331);
  const auto& m = r.timeline;
  EXPECT_LE(m.lanes, ff::timeline::kMaxLanes);
  EXPECT_EQ(ranks_drawn(m), 512u);
  for (const auto& g : m.hosts)
    for (const auto& l : g.lanes) EXPECT_LE(l.label.size(), 26u) << l.label;
  const auto* bad = lane_of_rank(m, 331);
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->ranks, std::vector<int>{331});
  EXPECT_TRUE(bad->initiating);
}

// The root line of a multi-node console's local rank ("[default3]:") is drawn on the rank the diagnosis
// named, not on a "local rank 3" lane.
TEST(timeline, the_root_mark_is_on_the_initiating_rank_s_lane) {
  job j;
  std::string log;
  for (int r = 0; r < 16; ++r) log += at(r, 0, "step 1");
  log += "[default3]:" + std::string(kOom) + "\n";
  log += "[default3]:[rank11]: step 2 failed on this rank\n";  // pairs local rank 3 with rank 11 on one node...
  log += "[default3]:[rank3]: step 2\n";                      // ...and with rank 3 on another: ambiguous
  for (int r = 0; r < 16; ++r)
    if (r != 11) log += watchdog_line(r, 11 * 60);
  j.file("console.log", log);
  auto r = j.run();
  ASSERT_TRUE(r.diag.initiating_rank);
  const auto* lane = lane_of_rank(r.timeline, *r.diag.initiating_rank);
  ASSERT_NE(lane, nullptr);
  bool root = false;
  for (const auto& e : lane->events) root = root || e.what == ff::timeline::mark::root;
  EXPECT_TRUE(root) << lane->label;
}

// A run of an hour that fails in its last minute: the axis is zoomed to the failure window, and says where
// the run began.
TEST(timeline, a_late_failure_is_drawn_zoomed_with_the_whole_run_as_context) {
  job j;
  std::string log;
  for (int s = 0; s <= 50 * 60; s += 300)
    for (int r = 0; r < 4; ++r) log += at(r, s, "step " + std::to_string(s / 300));
  log += "[rank2]:[E1206 10:55:00.000000000 train.py:1] " + std::string(kOom) + "\n";
  for (int r : {0, 1, 3}) log += watchdog_line(r, 55 * 60 + 30);
  j.file("console.log", log);
  auto r = j.run();
  const auto& m = r.timeline;
  ASSERT_EQ(m.axis, ff::timeline::axis::wall);
  ASSERT_TRUE(m.run_start);
  ASSERT_TRUE(m.root_at);
  EXPECT_GT(m.start, *m.run_start + 600);
  EXPECT_LT(m.start, *m.root_at);
  EXPECT_NE(ff::timeline::to_text(m, 60, false).find("zoomed to the failure: the run began at 10:00:00"), std::string::npos)
      << ff::timeline::to_text(m, 60, false);
  auto back = ff::timeline::from_json(ff::timeline::to_json(m));
  EXPECT_EQ(back.run_start, m.run_start);
}
