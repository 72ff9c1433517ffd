// The run's outcome against the lines that looked wrong (issue 43, family "errors the run survived"):
// a transient the loop recovers from (tag event.transient) is survived when a rank trained past it, and said
// so in the report; the same lines with nothing after them, or the loss scale at its floor, are not healthy.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "firstfault/report.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

ff::pipeline::run diagnose_outcome(const std::string& name, const std::string& text) {
  fs::path dir = fs::temp_directory_path() / ("ff-outcome-" + std::to_string(::getpid()) + "-" + name);
  fs::create_directories(dir);
  std::ofstream(dir / "console.log") << text;
  auto r = ff::pipeline::diagnose({(dir / "console.log").string()}, ff::testing::engine(), {});
  fs::remove_all(dir);
  if (!r) throw std::runtime_error(r.error().message);
  return std::move(r).value();
}

// DeepSpeed's dynamic loss scaler (deepspeed/runtime/fp16/loss_scaler.py, update_scale) and its engine's
// progress line (log_dist "step=N, skipped=M"): two skips while the scale settles from 65536.
const std::string kOverflows =
    "[2026-12-01 10:00:05,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
    "Attempted loss scale: 65536, reducing to 32768\n"
    "[2026-12-01 10:00:06,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
    "Attempted loss scale: 32768, reducing to 16384\n";
const std::string kLater = "[2026-12-01 10:00:17,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=2, lr=[0.0001], mom=[(0.9, 0.999)]\n";

TEST(outcome_transient, fp16_overflow_skips_the_run_trained_past_are_survived) {
  auto r = diagnose_outcome("ok", kOverflows + kLater);
  EXPECT_EQ(r.diag.verdict, ff::correlate::verdict::healthy);
  ASSERT_EQ(r.diag.collateral.size(), 1u);
  EXPECT_EQ(r.diag.collateral[0].signature, "train_fp16_overflow_skip");
  EXPECT_NE(r.diag.collateral[0].explanation.find("survived"), std::string::npos);
  const auto text = ff::report::to_terminal(r, {});
  EXPECT_NE(text.find("survived: fp16 gradient overflow"), std::string::npos) << text;
  EXPECT_NE(text.find("trained to step 10 after it"), std::string::npos) << text;
}

TEST(outcome_transient, overflow_skips_with_nothing_after_them_are_not_healthy) {
  auto r = diagnose_outcome("trunc", kOverflows);
  EXPECT_NE(r.diag.verdict, ff::correlate::verdict::healthy);
}

TEST(outcome_transient, a_loss_scale_at_its_floor_is_a_failure_even_with_steps_after) {
  // deepspeed/runtime/fp16/loss_scaler.py raises once the scale cannot fall further
  auto r = diagnose_outcome("floor", kOverflows + kLater +
                                      "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.\n");
  EXPECT_EQ(r.diag.verdict, ff::correlate::verdict::failure);
  EXPECT_EQ(r.diag.kind, "fp16_loss_scale_overflow");
}

}  // namespace
