// Step times per rank and slow ranks (stragglers.hpp): the clock on hand-built progress facts, the rule on
// hand-built step times (slow, equal, noisy, too few), and diagnose on generated multi-rank logs.
#include <gtest/gtest.h>

#include "test_support.hpp"
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "firstfault/pipeline.hpp"
#include "firstfault/report.hpp"
#include "firstfault/stragglers.hpp"
#include "firstfault/watch.hpp"

namespace fs = std::filesystem;
using ff::correlate::find_slow_ranks;
using ff::correlate::rank_step_time;
using ff::correlate::step_clock;
using ff::normalize::timestamp;

namespace {

timestamp wall(double s) { return timestamp{s, timestamp::clock::wall, true}; }

// A rank that steps every `per_step` seconds from t0, for `steps` steps (one line a step).
step_clock clock_of(double per_step, int steps, double t0 = 1000.25) {
  step_clock c;
  for (int s = 0; s <= steps; ++s) c.note(s, wall(t0 + s * per_step));
  return c;
}

rank_step_time timed(int rank, double secs, std::uint64_t steps = 40, bool fine = true) {
  rank_step_time r;
  r.rank = rank;
  r.seconds_per_step = secs;
  r.steps = steps;
  r.last_step = static_cast<long>(steps);
  r.sub_second = fine;
  return r;
}

}  // namespace

// Every rank of the inputs has a clock: a rank that never printed a timed step must cost little (the CLI
// memory test holds 400,000 ranks under 64 MiB).
static_assert(sizeof(step_clock) <= 56, "a clock without samples stays small");

TEST(step_clock, median_of_consecutive_steps) {
  auto c = clock_of(1.5, 20);
  ASSERT_TRUE(c.median_seconds());
  EXPECT_NEAR(*c.median_seconds(), 1.5, 1e-6);
  EXPECT_EQ(c.steps_timed(), 20u);
  EXPECT_EQ(c.samples(), 20u);
  EXPECT_TRUE(c.sub_second());
  EXPECT_EQ(c.last_step(), 20);
}

TEST(step_clock, lines_every_k_steps_give_the_time_of_one_step) {
  step_clock c;
  for (int s = 0; s <= 200; s += 10) c.note(s, wall(50 + s * 0.2));  // "step 10", "step 20", ... 2 s apart
  EXPECT_NEAR(*c.median_seconds(), 0.2, 1e-6);
  EXPECT_EQ(c.steps_timed(), 200u);
  EXPECT_EQ(c.samples(), 20u);
}

TEST(step_clock, the_first_line_of_a_step_counts_and_untimed_lines_give_nothing) {
  step_clock c;
  c.note(1, wall(10));
  c.note(1, wall(10.9));  // a second line of step 1 ("lr", "grad norm"): the step began at 10
  c.note(2, std::nullopt);  // no time of its own: no sample, and the anchor stays
  c.note(2, wall(12));
  EXPECT_NEAR(*c.median_seconds(), 2.0, 1e-6);
  EXPECT_EQ(c.samples(), 1u);
}

TEST(step_clock, a_restart_or_a_clock_change_starts_over_without_a_sample) {
  step_clock c;
  c.note(10, wall(100));
  c.note(11, wall(101));
  c.note(0, wall(200));  // the counter went back: a restart or a new epoch's counter
  c.note(1, wall(230));  // 30 s is a real sample of the new run
  c.note(2, timestamp{5, timestamp::clock::uptime, false});  // another clock: start over
  c.note(3, timestamp{6, timestamp::clock::uptime, false});
  c.note(4, timestamp{5.5, timestamp::clock::uptime, false});  // backwards: start over
  EXPECT_EQ(c.samples(), 3u);  // 11-10, 1-0 and 3-2; never 0-11 or 2-1 across clocks
  EXPECT_EQ(c.steps_timed(), 3u);
}

TEST(step_clock, keeps_the_most_recent_samples) {
  step_clock c;
  double t = 0;
  long s = 0;
  for (int i = 0; i < 200; ++i) c.note(s++, wall(t += 1.0));    // 1 s a step for a long time
  for (int i = 0; i < 80; ++i) c.note(s++, wall(t += 4.0));     // then 4 s a step
  EXPECT_EQ(c.samples(), step_clock::kKept);
  EXPECT_NEAR(*c.median_seconds(), 4.0, 1e-6);  // what the rank does now
  EXPECT_EQ(c.steps_timed(), step_clock::kKept);
}

TEST(step_clock, one_long_step_does_not_move_the_median) {
  step_clock c;
  double t = 0;
  for (int s = 0; s <= 30; ++s) {
    t += (s == 15) ? 90.0 : 1.0;  // a checkpoint save in step 15
    c.note(s, wall(t));
  }
  EXPECT_NEAR(*c.median_seconds(), 1.0, 1e-6);
}

TEST(step_clock, whole_second_clocks_are_recorded_as_such) {
  auto c = clock_of(2.0, 10, 1000.0);
  EXPECT_FALSE(c.sub_second());
}

TEST(slow_ranks, one_slow_rank_among_eight) {
  std::vector<rank_step_time> t;
  for (int r = 0; r < 8; ++r) t.push_back(timed(r, r == 5 ? 2.9 : 1.1 + 0.01 * r));
  auto slow = find_slow_ranks(t);
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].rank, 5);
  EXPECT_NEAR(slow[0].seconds_per_step, 2.9, 1e-9);
  EXPECT_NEAR(slow[0].others_seconds_per_step, 1.13, 1e-9);  // median of 1.10 ... 1.17 without 1.15
  EXPECT_EQ(slow[0].ranks_compared, 8u);
  EXPECT_EQ(slow[0].describe(), "rank 5 2.90 s/step vs median 1.13 s/step of 7 other ranks over 40 steps");
}

TEST(slow_ranks, equal_ranks_have_none) {
  std::vector<rank_step_time> t;
  for (int r = 0; r < 16; ++r) t.push_back(timed(r, 0.8));
  EXPECT_TRUE(find_slow_ranks(t).empty());
}

TEST(slow_ranks, noisy_ranks_have_none) {
  std::mt19937 rng(49);
  // +-20% around 1 s: 1.2 is at most 1.5x a median above 0.8, which 7 draws never have
  std::uniform_real_distribution<double> jitter(0.8, 1.2);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<rank_step_time> t;
    for (int r = 0; r < 8; ++r) t.push_back(timed(r, jitter(rng)));
    EXPECT_TRUE(find_slow_ranks(t).empty()) << "trial " << trial;
  }
}

TEST(slow_ranks, the_margin_needs_both_the_ratio_and_the_gap) {
  // 3x slower but 20 ms a step: below the absolute gap (jitter of a fast loop, not a straggler)
  EXPECT_TRUE(find_slow_ranks({timed(0, 0.01), timed(1, 0.01), timed(2, 0.01), timed(3, 0.03)}).empty());
  // 1 s more a step but only 1.2x: within the others' spread
  EXPECT_TRUE(find_slow_ranks({timed(0, 5), timed(1, 5), timed(2, 5), timed(3, 6)}).empty());
  // a whole-second clock needs a gap of 2 s: 1 s against 0 s is one tick of the clock
  EXPECT_TRUE(find_slow_ranks({timed(0, 0, 40, false), timed(1, 0, 40, false), timed(2, 1, 40, false)}).empty());
  auto coarse = find_slow_ranks({timed(0, 1, 40, false), timed(1, 1, 40, false), timed(2, 4, 40, false)});
  ASSERT_EQ(coarse.size(), 1u);
  EXPECT_EQ(coarse[0].rank, 2);
}

TEST(slow_ranks, two_ranks_need_a_doubled_step_time) {
  EXPECT_TRUE(find_slow_ranks({timed(0, 1.0), timed(1, 1.8)}).empty());
  auto slow = find_slow_ranks({timed(0, 1.0), timed(1, 2.5)});
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].rank, 1);
  EXPECT_EQ(slow[0].describe(), "rank 1 2.50 s/step vs median 1.00 s/step of 1 other rank over 40 steps");
}

TEST(slow_ranks, one_rank_or_half_slow_has_none) {
  EXPECT_TRUE(find_slow_ranks({timed(0, 3.0)}).empty());
  EXPECT_TRUE(find_slow_ranks({}).empty());
  // two nodes of two speeds: no majority pace to be slower than
  EXPECT_TRUE(find_slow_ranks({timed(0, 1), timed(1, 1), timed(2, 3), timed(3, 3)}).empty());
  // two slow ranks of seven are both named, slowest first
  std::vector<rank_step_time> t;
  for (int r = 0; r < 7; ++r) t.push_back(timed(r, r == 2 ? 3.0 : r == 6 ? 4.0 : 1.0));
  auto slow = find_slow_ranks(t);
  ASSERT_EQ(slow.size(), 2u);
  EXPECT_EQ(slow[0].rank, 6);
  EXPECT_EQ(slow[1].rank, 2);
}

TEST(slow_ranks, ranks_with_too_few_steps_are_not_compared) {
  ff::correlate::inputs in;
  auto key = [](int r) { return ff::correlate::rank_key::global_rank(r); };
  for (int r = 0; r < 3; ++r) in.activity[key(r)].steps = clock_of(1.0, 30);
  in.activity[key(3)].steps = clock_of(5.0, 5);  // slow, but only 5 steps timed
  EXPECT_EQ(ff::correlate::timed_ranks(in).size(), 3u);
  EXPECT_TRUE(ff::correlate::slow_ranks_of(in).empty());
  in.activity[key(3)].steps = clock_of(5.0, 12);
  in.host_ranks["node-b"] = {3};
  auto slow = ff::correlate::slow_ranks_of(in);
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].rank, 3);
  EXPECT_EQ(slow[0].host.value_or(""), "node-b");
  EXPECT_EQ(slow[0].describe(), "rank 3 (host node-b) 5.00 s/step vs median 1.00 s/step of 3 other ranks over 12 steps");
}

TEST(slow_ranks, only_the_latest_attempt_is_compared) {
  ff::correlate::inputs in;
  using ff::correlate::rank_key;
  for (int r = 0; r < 4; ++r) in.activity[rank_key::global_rank(r, 0)].steps = clock_of(r == 1 ? 6.0 : 1.0, 20);
  for (int r = 0; r < 4; ++r) in.activity[rank_key::global_rank(r, 1)].steps = clock_of(1.0, 20);
  EXPECT_TRUE(ff::correlate::slow_ranks_of(in).empty());  // rank 1 was slow in attempt 0, not after the restart
}

// diagnose on generated logs: 4 ranks interleaved in one console, long enough that the collector's
// blocks defer the steps of light lines (more than one block of 4,096 lines).
namespace {

struct job_dir {
  fs::path dir = fs::temp_directory_path() / ("ff-strag-" + std::to_string(::getpid()) + "-" + std::to_string(rand()));
  job_dir() { fs::create_directories(dir); }
  ~job_dir() { fs::remove_all(dir); }
};

// `slow_rank` steps `factor` times slower than the others; every rank prints `steps` lines.
std::string console(int ranks, int steps, int slow_rank, double factor, bool end_with_timeout) {
  std::string o;
  std::vector<double> t(static_cast<std::size_t>(ranks), 0);
  struct line {
    double at;
    int rank, step;
  };
  std::vector<line> lines;
  for (int r = 0; r < ranks; ++r)
    for (int s = 0; s < steps; ++s) lines.push_back({s * (r == slow_rank ? 0.4 * factor : 0.4) + r * 0.001, r, s});
  std::stable_sort(lines.begin(), lines.end(), [](const line& a, const line& b) { return a.at < b.at; });
  char buf[256];
  for (const auto& l : lines) {
    double at = 1765000000.0 + l.at;
    auto secs = static_cast<std::time_t>(at);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char ts[32];
    std::strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", &tm);
    std::snprintf(buf, sizeof buf, "[default%d]:%s,%03d [INFO] [rank%d] step %d loss %.4f\n", l.rank, ts,
                  static_cast<int>((at - std::floor(at)) * 1000), l.rank, l.step, 2.0 / (1 + l.step));
    o += buf;
  }
  if (end_with_timeout)
    o += "[default0]:[E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective operation timeout: "
         "WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600061 "
         "milliseconds before timing out.\n";
  return o;
}

ff::pipeline::run diagnose_text(const std::string& text) {
  job_dir d;
  std::ofstream(d.dir / "console.log") << text;
  auto r = ff::pipeline::diagnose({d.dir.string()}, ff::testing::engine(), {});
  EXPECT_TRUE(static_cast<bool>(r));
  return r ? r.value() : ff::pipeline::run{};
}

}  // namespace

TEST(slow_ranks_diagnose, a_healthy_run_with_a_slow_rank_stays_healthy_and_names_it) {
  auto r = diagnose_text(console(4, 1500, 2, 3.0, false));  // 6,000 lines: light lines over two blocks
  EXPECT_EQ(r.diag.verdict, ff::correlate::verdict::healthy);
  ASSERT_EQ(r.diag.slow_ranks.size(), 1u);
  EXPECT_EQ(r.diag.slow_ranks[0].rank, 2);
  EXPECT_NEAR(r.diag.slow_ranks[0].seconds_per_step, 1.2, 0.01);
  EXPECT_NEAR(r.diag.slow_ranks[0].others_seconds_per_step, 0.4, 0.01);
  auto j = ff::report::to_json(r);
  ASSERT_TRUE(j["slow_ranks"].is_array());
  ASSERT_EQ(j["slow_ranks"].size(), 1u);
  EXPECT_EQ(j["slow_ranks"][0]["rank"], 2);
  EXPECT_NE(ff::report::to_terminal(r, {false}).find("warning: slow rank: rank 2 1.20 s/step vs median 0.40 s/step"),
            std::string::npos);
  EXPECT_NE(ff::report::to_markdown(r).find("**Slow rank:** rank 2"), std::string::npos);
  EXPECT_NE(ff::report::to_html(r).find("class=\"slow-rank\">rank 2"), std::string::npos);
}

TEST(slow_ranks_diagnose, equal_ranks_and_short_runs_name_none) {
  auto equal = diagnose_text(console(4, 300, -1, 1.0, false));
  EXPECT_EQ(equal.diag.verdict, ff::correlate::verdict::healthy);
  EXPECT_TRUE(equal.diag.slow_ranks.empty());
  auto j = ff::report::to_json(equal);
  EXPECT_TRUE(j["slow_ranks"].is_array() && j["slow_ranks"].empty());
  auto short_run = diagnose_text(console(4, 5, 1, 3.0, false));  // 5 steps: too few to time
  EXPECT_TRUE(short_run.diag.slow_ranks.empty());
}

TEST(slow_ranks_diagnose, a_slow_rank_before_a_timeout_is_a_fact_of_the_failure) {
  auto r = diagnose_text(console(4, 200, 3, 4.0, true));
  EXPECT_NE(r.diag.verdict, ff::correlate::verdict::healthy);
  ASSERT_EQ(r.diag.slow_ranks.size(), 1u);
  EXPECT_EQ(r.diag.slow_ranks[0].rank, 3);
  EXPECT_NE(ff::report::to_terminal(r, {false}).find("slow rank before the end: rank 3"), std::string::npos);
}

TEST(slow_ranks_metrics, step_times_and_the_slow_count_are_gauges) {
  ff::watch::metrics m;
  m.step_seconds[{ff::watch::writer::by::rank, 2, {}}] = 1.25;
  m.step_seconds[{ff::watch::writer::by::rank, 10, {}}] = 0.3;
  m.step_seconds[{ff::watch::writer::by::local_rank, 1, {}}] = 0.5;
  m.slow_ranks = 1;
  auto text = ff::watch::to_prometheus(m, 0);
  EXPECT_NE(text.find("# TYPE firstfault_rank_step_seconds gauge\n"), std::string::npos);
  EXPECT_NE(text.find("firstfault_rank_step_seconds{rank=\"2\"} 1.250000\n"), std::string::npos);
  EXPECT_NE(text.find("firstfault_rank_step_seconds{rank=\"10\"} 0.300000\n"), std::string::npos);
  EXPECT_NE(text.find("firstfault_rank_step_seconds{local_rank=\"1\"} 0.500000\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE firstfault_slow_ranks gauge\nfirstfault_slow_ranks 1\n"), std::string::npos);
  EXPECT_NE(ff::watch::to_prometheus(ff::watch::metrics{}, 0).find("firstfault_slow_ranks 0\n"), std::string::npos);
}
