// The run's outcome against the lines that looked wrong (issue 43, family "errors the run survived"):
// a transient the loop recovers from (tag event.transient) is survived when a rank trained past it, and said
// so in the report, as is one whose number is still far from its floor (kb transient_above: a loss scale
// settling); near the floor with nothing after them, or the scale at its floor, they are not healthy.
#include <gtest/gtest.h>

#include "firstfault/report.hpp"
#include "test_support.hpp"

namespace {

// DeepSpeed's dynamic loss scaler (deepspeed/runtime/fp16/loss_scaler.py, update_scale) and its engine's
// progress line (log_dist "step=N, skipped=M"): two skips while the scale settles from 65536.
const std::string kOverflows =
    "[2026-12-01 10:00:05,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
    "Attempted loss scale: 65536, reducing to 32768\n"
    "[2026-12-01 10:00:06,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
    "Attempted loss scale: 32768, reducing to 16384\n";
const std::string kLater = "[2026-12-01 10:00:17,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=2, lr=[0.0001], mom=[(0.9, 0.999)]\n";

TEST(outcome_transient, fp16_overflow_skips_the_run_trained_past_are_survived) {
  auto r = ff::testing::diagnose_text("ok", kOverflows + kLater);
  EXPECT_EQ(r.diag.verdict, ff::correlate::verdict::healthy);
  ASSERT_EQ(r.diag.collateral.size(), 1u);
  EXPECT_EQ(r.diag.collateral[0].signature, "train_fp16_overflow_skip");
  EXPECT_NE(r.diag.collateral[0].explanation.find("survived"), std::string::npos);
  const auto text = ff::report::to_terminal(r, {});
  EXPECT_NE(text.find("survived: fp16 gradient overflow"), std::string::npos) << text;
  EXPECT_NE(text.find("trained to step 10 after it"), std::string::npos) << text;
}

TEST(outcome_transient, overflow_skips_far_above_the_floor_are_the_scaler_settling) {
  // the log ends in them (an excerpt, a run still warming up): the scale 16384 is still >= 1024 (kb transient_above)
  auto r = ff::testing::diagnose_text("settling", kOverflows);
  EXPECT_EQ(r.diag.verdict, ff::correlate::verdict::healthy);
  ASSERT_EQ(r.diag.collateral.size(), 1u);
  EXPECT_NE(r.diag.collateral[0].explanation.find("its scale is"), std::string::npos) << r.diag.collateral[0].explanation;
}

TEST(outcome_transient, overflow_skips_near_the_floor_with_nothing_after_them_are_not_healthy) {
  auto r = ff::testing::diagnose_text("near_floor",
                            "[2026-12-01 10:00:05,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
                            "Attempted loss scale: 64, reducing to 32\n"
                            "[2026-12-01 10:00:06,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
                            "Attempted loss scale: 32, reducing to 16\n");
  EXPECT_NE(r.diag.verdict, ff::correlate::verdict::healthy);
  // and trained past, they are survived all the same
  auto later = ff::testing::diagnose_text("near_floor_later",
                                "[2026-12-01 10:00:05,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
                                "Attempted loss scale: 64, reducing to 32\n" + kLater);
  EXPECT_EQ(later.diag.verdict, ff::correlate::verdict::healthy);
}

TEST(outcome_transient, halvings_late_in_a_run_are_not_settling) {
  // Megatron's progress line at iteration 17060 (past DeepSpeed's 1000-step loss_scale_window), then halvings
  auto r = ff::testing::diagnose_text("late",
                            " iteration    17060/  159576 | consumed samples:      8126688 | elapsed time per iteration (ms): 573125.8 | "
                            "lm loss: 2.665295E+00 | loss scale: 1048576.0 |\n" + kOverflows);
  EXPECT_NE(r.diag.verdict, ff::correlate::verdict::healthy);
}

TEST(outcome_transient, a_loss_scale_at_its_floor_is_a_failure_even_with_steps_after) {
  // deepspeed/runtime/fp16/loss_scaler.py raises once the scale cannot fall further
  auto r = ff::testing::diagnose_text("floor", kOverflows + kLater +
                                      "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.\n");
  EXPECT_EQ(r.diag.verdict, ff::correlate::verdict::failure);
  EXPECT_EQ(r.diag.kind, "fp16_loss_scale_overflow");
}

}  // namespace

namespace {

// Words that mean failure whatever the level tag (kb/_tables/failure_words.tsv), and lines that look wrong
// which the run went on past (correlate: suspicious_survived).
TEST(outcome_failure_words, a_warning_that_says_connection_refused_is_not_healthy) {
  auto r = ff::testing::diagnose_text("refused", "step 1 loss 2.3\nWARNING:root:fetch failed: [Errno 111] Connection refused\n");
  EXPECT_NE(r.diag.verdict, ff::correlate::verdict::healthy);
  auto plain = ff::testing::diagnose_text("nofile", "step 1 loss 2.3\n[2026-12-01 10:00:00] WARNING could not open /data/shard-3.bin: No such file or directory\n");
  EXPECT_NE(plain.diag.verdict, ff::correlate::verdict::healthy);
  auto benign = ff::testing::diagnose_text("benign", "step 1 loss 2.3\nWARNING: apex not found, using torch.amp\n");
  EXPECT_EQ(benign.diag.verdict, ff::correlate::verdict::healthy);
}

const std::string kRankError = "2026-12-01 10:00:05,000 [ERROR] [rank0] getaddrinfo failed: cannot resolve node-7\n";

TEST(outcome_suspicious, a_line_the_rank_trained_past_by_its_own_times_is_survived) {
  auto r = ff::testing::diagnose_text("past", "2026-12-01 10:00:00,000 [INFO] [rank0] step 1 loss 2.3\n" + kRankError +
                                        "2026-12-01 10:00:10,000 [INFO] [rank0] step 2 loss 2.2\n");
  EXPECT_EQ(r.diag.verdict, ff::correlate::verdict::healthy);
  ASSERT_EQ(r.diag.suspicious.size(), 1u);
  EXPECT_EQ(r.diag.suspicious[0].survived, "rank 0 trained to step 2 after it");
  EXPECT_NE(ff::report::to_json(r)["suspicious"][0].value("survived", ""), "");
  EXPECT_NE(ff::report::to_terminal(r, {}).find("survived:"), std::string::npos);
}

TEST(outcome_suspicious, nothing_after_it_or_the_same_second_is_not_survived) {
  auto last = ff::testing::diagnose_text("last", "2026-12-01 10:00:00,000 [INFO] [rank0] step 1 loss 2.3\n" + kRankError);
  EXPECT_EQ(last.diag.verdict, ff::correlate::verdict::undetermined);
  auto same = ff::testing::diagnose_text("same", "2026-12-01 10:00:00,000 [INFO] [rank0] step 1 loss 2.3\n" + kRankError +
                                           "2026-12-01 10:00:05,500 [INFO] [rank0] step 2 loss 2.2\n");
  EXPECT_EQ(same.diag.verdict, ff::correlate::verdict::undetermined);
  // another rank's later step does not vouch for rank 0
  auto other = ff::testing::diagnose_text("other", "2026-12-01 10:00:00,000 [INFO] [rank0] step 1 loss 2.3\n" + kRankError +
                                             "2026-12-01 10:00:10,000 [INFO] [rank1] step 2 loss 2.2\n");
  EXPECT_EQ(other.diag.verdict, ff::correlate::verdict::undetermined);
}

}  // namespace

namespace {

// Lightning's set-up line as the log's last line (pytorch-lightning#8707: a 2-node job started without srun
// waits there for members that never come): the log stops in start-up (launch_inferred_log_ends_in_startup),
// not a healthy run.
TEST(outcome_startup, a_log_that_stops_at_lightnings_process_group_setup_is_not_healthy) {
  for (const char* line : {"initializing ddp: GLOBAL_RANK: 0, MEMBER: 1/8", "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/8"}) {
    auto r = ff::testing::diagnose_text("lightning", std::string("GPU available: True, used: True\n") + line + "\n");
    EXPECT_EQ(r.diag.verdict, ff::correlate::verdict::failure) << line;
    EXPECT_EQ(r.diag.signature, "launch_inferred_log_ends_in_startup") << line;
  }
  auto trained = ff::testing::diagnose_text("lightning_trained",
                                  "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2\n[rank0] step 1 loss 2.3\n[rank0] step 2 loss 2.2\n");
  EXPECT_EQ(trained.diag.verdict, ff::correlate::verdict::healthy);
}

}  // namespace

namespace {

// A line that named only its local rank ([defaultN]:) is vouched for by that local rank's own later step,
// never by another rank's (review of the survived lines: local rank 1 may have hung while 0 trained on).
TEST(outcome_suspicious, a_local_rank_line_needs_that_local_ranks_later_step) {
  const std::string err = "[default1]:2026-12-01 10:00:05,000 [ERROR] loader died: worker pipe broken\n";
  auto other = ff::testing::diagnose_text("local_other", "[default0]:2026-12-01 10:00:00,000 [INFO] step 11 loss 2.3\n"
                                               "[default1]:2026-12-01 10:00:00,000 [INFO] step 11 loss 2.3\n" + err +
                                               "[default0]:2026-12-01 10:00:10,000 [INFO] step 12 loss 2.2\n");
  EXPECT_NE(other.diag.verdict, ff::correlate::verdict::healthy);
  auto own = ff::testing::diagnose_text("local_own", "[default1]:2026-12-01 10:00:00,000 [INFO] step 11 loss 2.3\n" + err +
                                           "[default1]:2026-12-01 10:00:10,000 [INFO] step 12 loss 2.2\n");
  EXPECT_EQ(own.diag.verdict, ff::correlate::verdict::healthy);
}

TEST(outcome_failure_words, an_info_line_that_coped_is_not_a_failure) {
  auto r = ff::testing::diagnose_text("info", "step 1 loss 2.3\n2026-12-01 10:00:00,000 [INFO] fetch: connection refused, retrying in 1 s\n");
  EXPECT_EQ(r.diag.verdict, ff::correlate::verdict::healthy);
}

}  // namespace
