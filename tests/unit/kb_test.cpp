// The knowledge base checks itself: lint (schema, order, patterns in both engines) and every example,
// one test case per signature so that `ctest -R kb.torch_` works.
#include <gtest/gtest.h>

#include "firstfault/kb.hpp"
#include "firstfault/match.hpp"

namespace {

const ff::kb::library& builtin() {
  static const ff::kb::library lib = [] {
    auto l = ff::kb::library::load(true, {});
    if (!l) throw std::runtime_error(l.error().message);
    return std::move(l).value();
  }();
  return lib;
}

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const auto& s : builtin().signatures) out.push_back(s.name);
  return out;
}

class kb : public ::testing::TestWithParam<std::string> {};

TEST_P(kb, lint_and_examples) {
  static const auto issues = ff::kb::lint(builtin());
  for (const auto& i : issues)
    if (i.name == GetParam()) ADD_FAILURE() << i.file << ": " << i.message;
  static const auto failures = ff::kb::test_examples(builtin());
  for (const auto& f : failures)
    if (f.name == GetParam()) ADD_FAILURE() << f.message;
}

INSTANTIATE_TEST_SUITE_P(sig, kb, ::testing::ValuesIn(names()), [](const auto& info) { return info.param; });

TEST(kb_library, covers_every_corpus_kind_and_has_enough_signatures) {
  const auto& lib = builtin();
  EXPECT_GE(lib.signatures.size(), 40u);
  EXPECT_GE(lib.kinds.size(), 50u);
  for (const auto& k : lib.kinds) {
    if (k.kind == "healthy") continue;
    bool any = false;
    for (const auto& s : lib.signatures) any |= s.kind == k.kind;
    if (!any) std::printf("note: no signature yet for kind %s\n", k.kind.c_str());
  }
}

TEST(kb_library, lint_reports_a_broken_signature) {
  auto lib = ff::kb::library::from_files({{"x/bad_signature_x.yaml", "title: t\nid: nope\nname: bad_signature\nrole: cause\nfingerprints: ['(?<=a)b']\n"}});
  ASSERT_TRUE(lib);
  auto issues = ff::kb::lint(lib.value());
  auto has = [&](const std::string& needle) {
    for (const auto& i : issues)
      if (i.message.find(needle) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("UUIDv4"));
  EXPECT_TRUE(has("file stem"));
  EXPECT_TRUE(has("missing field 'kind'"));
  EXPECT_TRUE(has("common subset"));
}

TEST(kb_library, user_directory_overrides_builtin_by_name) {
  auto base = ff::kb::library::from_files({{"a/torch_nccl_watchdog_timeout.yaml", "name: torch_nccl_watchdog_timeout\ntitle: A\n"},
                                           {"b/torch_nccl_watchdog_timeout.yaml", "name: torch_nccl_watchdog_timeout\ntitle: B\n"}});
  ASSERT_TRUE(base);
  ASSERT_EQ(base.value().signatures.size(), 1u);
  EXPECT_EQ(base.value().signatures[0].title, "B");
}

TEST(match, vectorscan_prefilter_is_confirmed_by_re2_and_extracts_fields) {
  const auto& lib = builtin();
  auto m = ff::match::matcher::compile(lib);
  ASSERT_TRUE(m) << m.error().message;
  ff::match::scratch s(m.value());
  std::vector<ff::match::hit> hits;
  m.value().scan("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=8812, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.", s, hits);
  bool found = false;
  for (const auto& h : hits) {
    if (lib.signatures[static_cast<std::size_t>(h.signature)].name != "torch_nccl_watchdog_timeout") continue;
    found = true;
    std::map<std::string, std::string> f(h.captured.begin(), h.captured.end());
    EXPECT_EQ(f["seq"], "8812");
    EXPECT_EQ(f["op"], "ALLREDUCE");
    EXPECT_EQ(f["timeout_ms"], "600000");
  }
  EXPECT_TRUE(found);
  hits.clear();
  m.value().scan("step 10 loss 0.25 lr 1e-4", s, hits);
  EXPECT_TRUE(hits.empty());
}

}  // namespace
