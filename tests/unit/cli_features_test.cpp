// The feature logic the CLI used to hold: grep export, kb search and name resolution, the history record
// of a run and the history list helpers, the healthy-baseline check. Table-driven where cases repeat.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <re2/re2.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <unistd.h>

#include "firstfault/record.hpp"
#include "test_support.hpp"

namespace {

struct ere_case {
  const char* re2;
  const char* ere;
};

class to_ere : public ::testing::TestWithParam<ere_case> {};

TEST_P(to_ere, rewrites_re2_syntax) { EXPECT_EQ(ff::kb::to_ere(GetParam().re2), GetParam().ere); }

INSTANTIATE_TEST_SUITE_P(
    kb, to_ere,
    ::testing::Values(ere_case{R"(CUDA out of memory)", R"(CUDA out of memory)"},
                      ere_case{R"(Xid \d+)", R"(Xid [0-9]+)"},
                      ere_case{R"(rank\s*=\s*\d+)", R"(rank[[:space:]]*=[[:space:]]*[0-9]+)"},
                      ere_case{R"([\d.]+ GiB)", R"([0-9.]+ GiB)"},
                      ere_case{R"(\w+Error)", R"([[:alnum:]_]+Error)"},
                      ere_case{R"(\S+ \D \W)", R"([^[:space:]]+ [^0-9] [^[:alnum:]_])"},
                      ere_case{R"((?:ALLREDUCE|BROADCAST))", R"((ALLREDUCE|BROADCAST))"},
                      ere_case{R"(rank (?P<rank>\d+))", R"(rank ([0-9]+))"},
                      ere_case{R"((?i)watchdog caught)", R"(watchdog caught)"},
                      ere_case{R"(a.*?b.+?c)", R"(a.*b.+c)"},
                      ere_case{R"(x{2,3}?y)", R"(x{2,3}y)"},
                      ere_case{R"([]a] \])", R"([]a] \])"},
                      ere_case{R"([^]x]\.)", R"([^]x]\.)"}));

// Every exported fingerprint must still compile as an ERE (the benchmark's grep -E -f row reads them all).
TEST(to_ere, every_builtin_fingerprint_compiles_as_posix_ere) {
  std::size_t n = 0;
  for (const auto& s : ff::testing::builtin().signatures)
    for (const auto& p : s.fingerprints) {
      auto e = ff::kb::to_ere(p);
      EXPECT_NO_THROW(std::regex(e, std::regex::extended)) << s.name << ": " << p << " -> " << e;
      ++n;
    }
  EXPECT_GT(n, 100u);
}

TEST(kb_search, ranks_name_hits_first_and_general_entries_before_specific_ones) {
  const auto& lib = ff::testing::builtin();
  auto found = ff::kb::search(lib, "WATCHDOG");
  ASSERT_FALSE(found.empty());
  EXPECT_NE(found.front()->name.find("watchdog"), std::string::npos);
  for (std::size_t i = 1; i < found.size(); ++i) {  // a name hit is never below a hit elsewhere
    bool prev = found[i - 1]->name.find("watchdog") != std::string::npos;
    bool cur = found[i]->name.find("watchdog") != std::string::npos;
    EXPECT_FALSE(!prev && cur) << found[i - 1]->name << " before " << found[i]->name;
  }
  EXPECT_TRUE(ff::kb::search(lib, "no-such-word-anywhere-xyzzy").empty());
  EXPECT_EQ(ff::kb::search(lib, "").size(), lib.signatures.size());  // the empty word is in every name
}

TEST(kb_resolve_name, accepts_other_case_and_separators_only_when_unambiguous) {
  const auto& lib = ff::testing::builtin();
  ASSERT_TRUE(lib.kind("cuda_oom"));
  EXPECT_EQ(ff::kb::resolve_name(lib, "cuda_oom"), "cuda_oom");
  EXPECT_EQ(ff::kb::resolve_name(lib, "CUDA-OOM"), "cuda_oom");
  EXPECT_EQ(ff::kb::resolve_name(lib, "Cuda Oom"), "cuda_oom");
  EXPECT_EQ(ff::kb::resolve_name(lib, "cuda_oomx"), "cuda_oomx");  // a typo is not silently corrected
}

TEST(history_record, entry_of_a_run_carries_the_verdict_and_only_masked_names) {
  ff::pipeline::run r;
  r.diag.verdict = ff::correlate::verdict::failure;
  r.diag.signature = "cuda_oom_torch";
  r.diag.kind = "cuda_oom";
  r.diag.initiating_rank = 6;
  r.diag.initiating_host = "host-1";
  r.initiating_host_key = "k123";
  r.inputs = {{"a/rank0.log", 10, 100}, {"a/rank1.log", 12, 120}};
  r.any_readable = true;
  auto e = ff::history::entry_of(r, "watch");
  EXPECT_EQ(e.source, "watch");
  EXPECT_EQ(e.inputs, "a/rank0.log; a/rank1.log");
  EXPECT_EQ(e.verdict, "failure");
  EXPECT_EQ(e.signature, "cuda_oom_torch");
  EXPECT_EQ(e.kind, "cuda_oom");
  ASSERT_TRUE(e.initiating_rank.has_value());
  EXPECT_EQ(*e.initiating_rank, 6);
  EXPECT_EQ(e.initiating_host, "host-1");
  EXPECT_EQ(e.host_key, "k123");
  auto j = nlohmann::json::parse(e.report_json);
  EXPECT_EQ(j.value("verdict", ""), "failure");
  EXPECT_EQ(ff::history::entry_of(r, "watch", "{\"given\":1}").report_json, "{\"given\":1}");
}

TEST(history_record, list_helpers) {
  EXPECT_EQ(ff::history::format_utc(0), "1970-01-01 00:00:00Z");
  EXPECT_EQ(ff::history::format_utc(1764674553), "2025-12-02 11:22:33Z");
  EXPECT_EQ(ff::history::summarize_inputs("a.log"), "a.log");
  EXPECT_EQ(ff::history::summarize_inputs("a.log; b.log; c.log"), "a.log (+2 more)");
  EXPECT_EQ(ff::history::summarize_inputs("0123456789abcdef", 10), "...9abcdef");
  EXPECT_EQ(ff::history::summarize_inputs(""), "");
}

TEST(healthy_baselines, a_failure_log_in_a_healthy_folder_is_reported_with_its_signature) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("ff_healthy_" + std::to_string(::getpid()));
  fs::create_directories(dir / "good");
  fs::create_directories(dir / "bad");
  std::ofstream(dir / "good" / "train.log") << "step 1 loss 2.5\nstep 2 loss 2.4\ntraining finished\n";
  std::ofstream(dir / "bad" / "train.log")
      << "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
         "79.15 GiB of which 1.06 GiB is free.\n";
  auto fails = ff::pipeline::check_healthy_baselines({(dir / "good").string(), (dir / "bad").string()}, ff::testing::builtin());
  ASSERT_EQ(fails.size(), 1u);
  EXPECT_NE(fails[0].message.find("bad"), std::string::npos);
  EXPECT_NE(fails[0].message.find("failure"), std::string::npos);
  EXPECT_NE(fails[0].name, "(healthy)");
  fs::remove_all(dir);
}

}  // namespace
