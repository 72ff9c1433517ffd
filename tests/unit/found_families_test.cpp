// Issue 43, the found cases' open families (tests/found/README.md): each rule on hand-built findings, and the
// whole pipeline on hand-built lines in the real formats. Helpers live in their own namespace (unity build).
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <algorithm>

#include "firstfault/correlate_rules.hpp"

namespace found_fam {

using namespace ff::correlate;
using ff::testing::builtin;
using ff::testing::diagnose_text;

int sig_of(const std::string& name) {
  const auto& s = builtin().signatures;
  auto it = std::find_if(s.begin(), s.end(), [&](const ff::kb::signature& x) { return x.name == name; });
  if (it == s.end()) throw std::runtime_error("no signature " + name);
  return static_cast<int>(it - s.begin());
}

finding hit(const std::string& name, std::uint64_t line_no, std::string text, std::optional<int> rank = std::nullopt,
            ff::match::fields captured = {}, std::string source = "part2.log") {
  finding f;
  f.signature = sig_of(name);
  f.rank = rank;
  f.captured = std::move(captured);
  f.text = std::move(text);
  f.source = std::move(source);
  f.line_no = line_no;
  return f;
}

const finding* by_root_rule(const rules::context& ctx, std::string_view rule) {
  const finding* root = rules::strongest_cause(ctx);
  if (!root) return nullptr;
  for (const auto& r : rules::root_rules())
    if (r.name == rule) return r.fn(ctx, *root);
  ADD_FAILURE() << "no rule " << rule;
  return nullptr;
}

}  // namespace found_fam

using namespace found_fam;

// --- errno28_from_semlock (family 3: errno 28 from multiprocessing's SemLock is /dev/shm) -------------------

TEST(rule_errno28_from_semlock, the_semlock_frame_above_errno_28_takes_the_root) {
  inputs in;
  in.findings.push_back(hit("data_semlock_dev_shm", 9, "sl = self._semlock = _multiprocessing.SemLock("));
  in.findings.push_back(hit("storage_no_space_errno28", 11, "OSError: [Errno 28] No space left on device"));
  auto ctx = rules::make_context(in, builtin());
  ASSERT_EQ(ctx.sig(*rules::strongest_cause(ctx)).kind, "disk_full_checkpoint");
  const auto* root = by_root_rule(ctx, "errno28_from_semlock");
  ASSERT_TRUE(root);
  EXPECT_EQ(ctx.sig(*root).kind, "dataloader_shm_bus_error");
}

TEST(rule_errno28_from_semlock, a_frame_far_above_or_in_another_file_or_after_is_not_the_traceback) {
  for (auto [line_no, source] : {std::pair<std::uint64_t, std::string>{40, "part2.log"}, {9, "part1.log"}, {70, "part2.log"}}) {
    inputs in;
    in.findings.push_back(hit("data_semlock_dev_shm", line_no, "sl = self._semlock = _multiprocessing.SemLock(", std::nullopt, {}, source));
    in.findings.push_back(hit("storage_no_space_errno28", 60, "OSError: [Errno 28] No space left on device"));
    auto ctx = rules::make_context(in, builtin());
    EXPECT_FALSE(by_root_rule(ctx, "errno28_from_semlock")) << source << ":" << line_no;
  }
}

TEST(rule_errno28_from_semlock, a_quota_error_is_a_disk) {
  inputs in;
  in.findings.push_back(hit("data_semlock_dev_shm", 9, "sl = self._semlock = _multiprocessing.SemLock("));
  in.findings.push_back(hit("storage_no_space_errno28", 11, "OSError: [Errno 122] Disk quota exceeded"));
  auto ctx = rules::make_context(in, builtin());
  EXPECT_FALSE(by_root_rule(ctx, "errno28_from_semlock"));
}

TEST(rule_errno28_from_semlock, the_frame_alone_is_no_verdict) {
  // sem_open fails with EMFILE too: the frame says where, not why.
  auto r = diagnose_text("semlock-emfile",
                         "Traceback (most recent call last):\n"
                         "  File \"/usr/lib/python3.10/multiprocessing/synchronize.py\", line 57, in __init__\n"
                         "    sl = self._semlock = _multiprocessing.SemLock(\n"
                         "OSError: [Errno 24] Too many open files\n");
  EXPECT_NE(r.diag.kind, "dataloader_shm_bus_error");
}

TEST(rule_errno28_from_semlock, a_dataloader_traceback_end_to_end) {
  auto r = diagnose_text("semlock-enospc",
                         "Traceback (most recent call last):\n"
                         "  File \"/workspace/train.py\", line 88, in <module>\n"
                         "    for batch in loader:\n"
                         "  File \"/usr/local/lib/python3.10/dist-packages/torch/utils/data/dataloader.py\", line 388, in _get_iterator\n"
                         "    return _MultiProcessingDataLoaderIter(self)\n"
                         "  File \"/usr/lib/python3.10/multiprocessing/context.py\", line 68, in Lock\n"
                         "    return Lock(ctx=self.get_context())\n"
                         "  File \"/usr/lib/python3.10/multiprocessing/synchronize.py\", line 162, in __init__\n"
                         "    SemLock.__init__(self, SEMAPHORE, 1, 1, ctx=ctx)\n"
                         "  File \"/usr/lib/python3.10/multiprocessing/synchronize.py\", line 57, in __init__\n"
                         "    sl = self._semlock = _multiprocessing.SemLock(\n"
                         "OSError: [Errno 28] No space left on device\n");
  EXPECT_EQ(r.diag.kind, "dataloader_shm_bus_error");
  EXPECT_EQ(r.diag.rule, "errno28_from_semlock");
}

TEST(rule_errno28_from_semlock, a_checkpoint_write_stays_a_disk) {
  auto r = diagnose_text("save-enospc",
                         "Traceback (most recent call last):\n"
                         "  File \"/workspace/train.py\", line 120, in <module>\n"
                         "    torch.save(state, path)\n"
                         "  File \"/usr/local/lib/python3.10/dist-packages/torch/serialization.py\", line 440, in save\n"
                         "    with _open_zipfile_writer(f) as opened_zipfile:\n"
                         "OSError: [Errno 28] No space left on device\n");
  EXPECT_EQ(r.diag.kind, "disk_full_checkpoint");
}
