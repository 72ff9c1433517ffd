// Upstream message catalogues (kb/_catalogue, docs/catalogues.md): the line synthesis and the reading that
// decides whether the knowledge base recognises a template's class. The whole catalogue is the kb_coverage
// ctest (`firstfault kb coverage --min`).
#include <gtest/gtest.h>

#include "firstfault/catalogue.hpp"
#include "firstfault/pipeline.hpp"
#include "test_support.hpp"

namespace {

using ff::catalogue::klass;

TEST(kb_library, catalogue_fill_gives_typical_values_in_turn) {
  EXPECT_EQ(ff::catalogue::fill("rank <int> of <int> in <int>, again <int>"), "rank 3 of 42 in 1, again 3");
  EXPECT_EQ(ff::catalogue::fill("at <hex> and 0x<hex>"), "at 0x1f and 0x1f");
  EXPECT_EQ(ff::catalogue::fill("<float>s on <str> via <str> to <str>"), "1.5s on node-1 via eth0 to /tmp/x");
  EXPECT_EQ(ff::catalogue::fill("*** <str=JOB 4242> ON <str> CANCELLED"), "*** JOB 4242 ON node-1 CANCELLED");
  EXPECT_EQ(ff::catalogue::fill("a <b> and <str and <int"), "a <b> and <str and <int");  // not placeholders
}

TEST(kb_library, catalogue_synthesis_adds_the_forms_header_then_each_common_prefix) {
  ff::catalogue::entry py{"Rank <int> failed", "error", "log", "torch/distributed/elastic/agent/api.py:12@v1.13.1", "", "", 0};
  auto lines = ff::catalogue::synthesise(py, "pytorch");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "[2026-12-06 18:44:12,715] [ERROR] [api.py:12:run] Rank 3 failed");
  EXPECT_EQ(lines[1], "[rank3]:" + lines[0]);
  EXPECT_EQ(lines[2], "3: " + lines[0]);
  EXPECT_EQ(lines[3], "2026-12-06T18:44:12.715Z " + lines[0]);
  ff::catalogue::entry cpp{"Timed out", "warning", "log", "torch/csrc/distributed/c10d/TCPStore.cpp:88@v1.13.1", "", "", 0};
  EXPECT_EQ(ff::catalogue::synthesise(cpp, "pytorch")[0], "[W1206 18:44:12.715298746 TCPStore.cpp:88] Timed out");
  ff::catalogue::entry kernel{"INFO: task <str>:<int> blocked", "error", "log", "kernel/hung_task.c:120@v6.1.176", "", "", 0};
  EXPECT_EQ(ff::catalogue::synthesise(kernel, "linux")[0], "[ 1234.567890] INFO: task node-1:3 blocked");
  ff::catalogue::entry line{"srun: error: Unable to <str>", "error", "line", "src/srun/x.c:1@284c3b95f08a", "", "", 0};
  EXPECT_EQ(ff::catalogue::synthesise(line, "slurm")[0], "srun: error: Unable to node-1");
}

TEST(kb_library, catalogue_classes_parse_and_unknown_spellings_are_unclassified) {
  auto k = ff::catalogue::parse_class("kind:network_hardware:cause");
  EXPECT_EQ(k.is, klass::what::kind_cause);
  EXPECT_EQ(k.kind, "network_hardware");
  EXPECT_EQ(ff::catalogue::parse_class("kind:cuda_oom:collateral").is, klass::what::kind_collateral);
  auto b = ff::catalogue::parse_class("benign:the loss scale halves above its floor");
  EXPECT_EQ(b.is, klass::what::benign);
  EXPECT_EQ(b.condition, "the loss scale halves above its floor");
  EXPECT_EQ(ff::catalogue::parse_class("generic_error").is, klass::what::generic_error);
  EXPECT_EQ(ff::catalogue::parse_class("irrelevant").is, klass::what::irrelevant);
  for (const char* bad : {"", "kind:x", "kind:x:maybe", "benign:", "~generic_error", "error"})
    EXPECT_EQ(ff::catalogue::parse_class(bad).is, klass::what::none) << bad;
}

TEST(kb_library, catalogue_parse_needs_a_commit_and_matching_cells) {
  std::string ok_text =
      "# project: demo\n# source: https://example.invalid/demo\n# commit: 0123456789abcdef0123456789abcdef01234567\n"
      "template\tlevel\tform\tsource\tclass\tsignature\n"
      "a message <int>\terror\tline\tsrc/a.c:1@0123456789ab\tgeneric_error\t\n";
  auto p = ff::catalogue::parse("demo.tsv", ok_text);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p.value().name, "demo");
  EXPECT_EQ(p.value().commit, "0123456789abcdef0123456789abcdef01234567");
  ASSERT_EQ(p.value().entries.size(), 1u);
  EXPECT_EQ(p.value().entries[0].cls, "generic_error");
  EXPECT_FALSE(ff::catalogue::parse("x.tsv", "template\tlevel\nx\terror\n"));  // no commit
  EXPECT_FALSE(ff::catalogue::parse("x.tsv", "# commit: v1\ntemplate\tlevel\nx\n"));  // one cell of two
}

TEST(kb_library, catalogue_reading_agrees_with_each_class) {
  auto eng = ff::pipeline::engine::build(ff::testing::builtin());
  ASSERT_TRUE(eng) << eng.error().message;
  ff::catalogue::project p;
  p.name = "demo";
  p.commit = "v0";
  auto add = [&](std::string tmpl, std::string form, std::string cls, std::string source = "src/x.c:1@v0") {
    p.entries.push_back({std::move(tmpl), "error", std::move(form), std::move(source), std::move(cls), "", 0});
  };
  add("<str>:<int>:<int> [<int>] transport/net_ib.cc:1012 NCCL WARN NET/IB : Got completion from peer <str> with status=<int> opcode=<int> len=<int> vendor err <int> (Recv)",
      "line", "kind:network_hardware:cause");
  add("srun: error: Unable to create step for job <int>: Memory required by task is not available", "line", "generic_error");
  add("Epoch <int> finished in <float> s", "line", "benign:an epoch's summary");
  add("Print the list of options and exit", "line", "irrelevant");
  add("srun: error: Unable to create step for job <int>: Memory required by task is not available", "line", "kind:cuda_oom:cause");
  add("Epoch <int> finished in <float> s", "line", "generic_error");
  add("Epoch <int> finished in <float> s", "line", "");
  auto c = ff::catalogue::evaluate(eng.value(), p);
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_EQ(c.value().results.size(), 7u);
  const auto& r = c.value().results;
  EXPECT_TRUE(r[0].recognised) << r[0].line;
  EXPECT_TRUE(r[1].recognised) << r[1].line;
  EXPECT_TRUE(r[2].recognised) << r[2].line;
  EXPECT_TRUE(r[3].recognised) << r[3].line;
  EXPECT_FALSE(r[4].recognised);  // a Slurm error is no CUDA OOM
  EXPECT_FALSE(r[5].recognised);  // a progress line is not an error
  EXPECT_FALSE(r[6].classified);
  EXPECT_EQ(c.value().templates, 7u);
  EXPECT_EQ(c.value().classified, 6u);
  EXPECT_EQ(c.value().recognised, 4u);
}

}  // namespace
