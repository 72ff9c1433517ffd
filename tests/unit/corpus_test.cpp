// Golden tests: every case under tests/corpus/<case>/ (copied from the labelled corpora) is diagnosed
// in-process and checked against its labelled truth in expected.json, with explicit known misses. A
// separate test checks the accuracy over all cases, with the thresholds of the unseen-logs issue.
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "firstfault/kb.hpp"
#include "firstfault/pipeline.hpp"
#include "firstfault/report.hpp"

namespace fs = std::filesystem;

namespace {

using ff::testing::builtin;

std::vector<std::string> cases() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(fs::path(FF_TEST_DATA) / "corpus"))
    if (fs::exists(e.path() / "expected.json")) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

nlohmann::json diagnose_case(const std::string& name) {
  // Run from inside the case folder with the relative path "logs", as the scorer does.
  auto old = fs::current_path();
  fs::current_path(fs::path(FF_TEST_DATA) / "corpus" / name);
  auto r = ff::pipeline::diagnose({"logs"}, ff::testing::engine(), {});
  fs::current_path(old);
  if (!r) throw std::runtime_error(r.error().message);
  return ff::report::to_json(r.value());
}

class corpus_case : public ::testing::TestWithParam<std::string> {};

// Each case asserts its labelled truth: the kind (or one of also_ok; a healthy truth needs the healthy
// verdict) and, when labelled, the initiating rank. A case the tool still gets wrong says so in
// expected.json ("known_miss": {"kind": "why", "rank": "why"}, Semgrep's todoruleid): it must stay
// wrong in that respect, so that a fixed miss is noticed and its known_miss removed.
TEST_P(corpus_case, matches_labelled_truth) {
  auto exp = read_json(fs::path(FF_TEST_DATA) / "corpus" / GetParam() / "expected.json");
  auto got = diagnose_case(GetParam());
  EXPECT_EQ(got["schema"], "firstfault.report/v1");
  std::string want = exp.at("kind");
  std::set<std::string> ok{want};
  for (const auto& k : exp.value("also_ok", nlohmann::json::array())) ok.insert(k.get<std::string>());
  std::string verdict = got["verdict"];
  std::string kind = got["root_cause"].is_object() ? got["root_cause"]["kind"].get<std::string>() : "";
  bool kind_right = want == "healthy" ? verdict == "healthy" : (verdict == "failure" && ok.count(kind) > 0);
  auto miss = exp.value("known_miss", nlohmann::json::object());
  if (miss.contains("kind"))
    EXPECT_FALSE(kind_right) << "known miss now passes (remove known_miss.kind): " << miss["kind"];
  else
    EXPECT_TRUE(kind_right) << "want " << want << ", got " << verdict << " " << kind;
  if (exp["initiating_rank"].is_number_integer()) {
    bool rank_right = got["initiating_rank"] == exp["initiating_rank"];
    if (miss.contains("rank"))
      EXPECT_FALSE(rank_right) << "known miss now passes (remove known_miss.rank): " << miss["rank"];
    else
      EXPECT_TRUE(rank_right) << "want rank " << exp["initiating_rank"] << ", got " << got["initiating_rank"] << " ("
                              << got["initiating_rule"] << ")";
  }
  if (verdict == "failure") {
    EXPECT_FALSE(got["root_cause"]["evidence"].empty());
  }
  // Every report carries an action decided by a row of kb/_tables/actions.tsv (issue 49).
  ASSERT_TRUE(got.contains("action") && got["action"].is_object());
  EXPECT_FALSE(got["action"]["rule"].get<std::string>().empty()) << "no action rule decided for " << verdict << " " << kind;
  if (verdict == "healthy") EXPECT_EQ(got["action"]["kind"], "none");
  if (verdict == "undetermined") EXPECT_EQ(got["action"]["kind"], "investigate");
  if (verdict == "undetermined" && want != "healthy") {
    // The lines that look wrong, or, when none does (the log stops in set-up), the line where it stops.
    const bool points_at_a_line = !got["suspicious"].empty() || !got["collateral"].empty() ||
                                  (got["initiating_rule"] == ff::correlate::kLogStopsInStartup && !got["next_steps"].empty() &&
                                   got["next_steps"][0].get<std::string>().find(" stops: ") != std::string::npos);
    EXPECT_TRUE(points_at_a_line) << "an undetermined report lists the lines that look wrong, or where the log stops";
  }
}

INSTANTIATE_TEST_SUITE_P(corpus, corpus_case, ::testing::ValuesIn(cases()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& c : n)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

// Accuracy against the labelled truth (the same rules as ../shared/tools/score_corpus.py).
TEST(corpus, accuracy_meets_the_main_job_thresholds) {
  int total = 0, right = 0, wrong = 0, rank_known = 0, rank_right = 0, false_alarms = 0, missed = 0;
  for (const auto& name : cases()) {
    auto exp = read_json(fs::path(FF_TEST_DATA) / "corpus" / name / "expected.json");
    auto got = diagnose_case(name);
    ++total;
    std::string want = exp["kind"];
    std::set<std::string> ok{want};
    for (const auto& k : exp["also_ok"]) ok.insert(k.get<std::string>());
    std::string verdict = got["verdict"];
    std::string kind = verdict == "healthy" ? "healthy" : (got["root_cause"].is_object() ? got["root_cause"]["kind"].get<std::string>() : "");
    if (want == "healthy" && verdict != "healthy") ++false_alarms;
    if (want != "healthy" && verdict == "healthy") ++missed;
    if (verdict != "undetermined") (ok.count(kind) ? right : wrong)++;
    if (exp["initiating_rank"].is_number_integer()) {
      ++rank_known;
      if (got["initiating_rank"] == exp["initiating_rank"]) ++rank_right;
    }
  }
  ASSERT_GT(total, 0);
  EXPECT_GE(right * 100, total * 95) << right << "/" << total << " kinds right";
  EXPECT_LE(wrong * 100, total * 3) << wrong << "/" << total << " wrong";
  EXPECT_EQ(missed, 0) << "failed runs called healthy";
  EXPECT_GE(rank_right * 100, rank_known * 80) << rank_right << "/" << rank_known << " ranks right";
  std::printf("corpus: %d cases, %d right, %d wrong, ranks %d/%d, healthy false alarms %d, failed runs called healthy %d\n", total,
              right, wrong, rank_right, rank_known, false_alarms, missed);
  EXPECT_EQ(false_alarms, 0);
}

}  // namespace
