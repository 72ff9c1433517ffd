// Unit tests for stage 3 (extract): record grouping (Python tracebacks, C++ frames) and the
// torchelastic ChildFailedError / agent-line parser, on line bodies (prefixes already peeled).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "firstfault/extract.hpp"
#include "firstfault/text.hpp"
#include "firstfault/kb.hpp"
#include "test_support.hpp"

#include <re2/re2.h>
#include <set>

using ff::extract::exit_record;
using ff::extract::extractor;
using ff::extract::line_note;
using ff::extract::terminated_pid;

namespace {

struct fed {
  std::vector<line_note> notes;
  std::vector<exit_record> exits;
  std::vector<terminated_pid> terms;
};

// Feeds every line (line numbers from 1) to one extractor and collects what it says.
fed feed_all(const std::vector<std::string>& lines, const std::string& source = "test.log") {
  extractor x(source);
  fed out;
  std::uint64_t n = 0;
  for (const auto& l : lines) {
    line_note note;
    x.feed(l, ++n, note, out.exits, out.terms);
    out.notes.push_back(note);
  }
  return out;
}

const std::vector<std::string> kChildFailedBlock = {
    "Traceback (most recent call last):",
    "  File \"/usr/local/bin/torchrun\", line 8, in <module>",
    "    sys.exit(main())",
    "  File \"/usr/local/lib/python3.8/dist-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py\", line 345, in wrapper",
    "    return f(*args, **kwargs)",
    "  \xe2\x80\xa6",
    "  File \"/usr/local/lib/python3.8/dist-packages/torch/distributed/launcher/api.py\", line 245, in launch_agent",
    "    raise ChildFailedError(",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "============================================================",
    "/root/project/scripts/train.py FAILED",
    "------------------------------------------------------------",
    "Failures:",
    "[1]:",
    "  time      : 2026-09-07_13:02:58",
    "  host      : localhost",
    "  rank      : 3 (local_rank: 3)",
    "  exitcode  : 1 (pid: 14692)",
    "  error_file: <N/A>",
    "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
    "[2]:",
    "  time      : 2026-09-07_13:03:29",
    "  host      : localhost",
    "  rank      : 0 (local_rank: 0)",
    "  exitcode  : -9 (pid: 14689)",
    "  error_file: <N/A>",
    "  traceback : Signal 9 (SIGKILL) received by PID 14689",
    "[3]:",
    "  time      : 2026-09-07_13:03:29",
    "  host      : localhost",
    "  rank      : 2 (local_rank: 2)",
    "  exitcode  : -15 (pid: 14691)",
    "  error_file: <N/A>",
    "  traceback : Signal 15 (SIGTERM) received by PID 14691",
    "------------------------------------------------------------",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2026-09-07_13:02:58",
    "  host      : localhost",
    "  rank      : 1 (local_rank: 1)",
    "  exitcode  : 1 (pid: 14690)",
    "  error_file: <N/A>",
    "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
    "============================================================",
};

const exit_record* by_rank(const std::vector<exit_record>& v, int rank) {
  for (const auto& r : v)
    if (r.rank == rank) return &r;
  return nullptr;
}

}  // namespace

// ------------------------------------------------------------------ Python tracebacks

TEST(python_traceback, chained_exception_is_one_record) {
  auto f = feed_all({
      "Traceback (most recent call last):",                                // 0
      "  File \"/home/user/train.py\", line 10, in load",                  // 1
      "    value = int(raw)",                                              // 2
      "ValueError: invalid literal for int() with base 10: 'abc'",         // 3
      "",                                                                  // 4
      "During handling of the above exception, another exception occurred:",  // 5
      "",                                                                  // 6
      "Traceback (most recent call last):",                                // 7
      "  File \"/home/user/train.py\", line 12, in load",                  // 8
      "    return table['x']",                                             // 9
      "           ~~~~~^^^^^",                                             // 10
      "KeyError: 'x'",                                                     // 11
      "next plain line",                                                   // 12
  });
  const auto& n = f.notes;
  ASSERT_EQ(n.size(), 13u);
  const int id = n[0].record;
  EXPECT_GE(id, 0);
  for (int i : {0, 1, 2, 7, 8, 9, 10}) {
    EXPECT_TRUE(n[i].skip_match) << "line " << i;
    EXPECT_EQ(n[i].record, id) << "line " << i;
    EXPECT_FALSE(n[i].exception_line) << "line " << i;
  }
  EXPECT_TRUE(n[3].exception_line);
  EXPECT_FALSE(n[3].skip_match);
  EXPECT_EQ(n[3].record, id);
  EXPECT_TRUE(n[5].skip_match);
  EXPECT_EQ(n[5].record, id);
  EXPECT_TRUE(n[11].exception_line);
  EXPECT_FALSE(n[11].skip_match);
  EXPECT_EQ(n[11].record, id);
  EXPECT_FALSE(n[12].skip_match);
  EXPECT_FALSE(n[12].exception_line);
  EXPECT_EQ(n[12].record, -1);
  EXPECT_TRUE(f.exits.empty());
  EXPECT_TRUE(f.terms.empty());
}

TEST(python_traceback, direct_cause_chain_is_one_record) {
  auto f = feed_all({
      "Traceback (most recent call last):",
      "  File \"a.py\", line 1, in <module>",
      "OSError: [Errno 28] No space left on device",
      "",
      "The above exception was the direct cause of the following exception:",
      "",
      "Traceback (most recent call last):",
      "  File \"a.py\", line 3, in <module>",
      "RuntimeError: checkpoint save failed",
  });
  EXPECT_TRUE(f.notes[2].exception_line);
  EXPECT_TRUE(f.notes[4].skip_match);
  EXPECT_TRUE(f.notes[8].exception_line);
  EXPECT_EQ(f.notes[8].record, f.notes[0].record);
  EXPECT_EQ(f.notes[4].record, f.notes[0].record);
}

// libstdc++'s verbose terminate handler right after a traceback: the process that printed it aborts
// (vterminate.cc prints "terminate called after throwing an instance of 'T'", then "  what():  ...", then abort()).
TEST(python_traceback, terminate_after_the_exception_marks_an_abort) {
  auto f = feed_all({
      "Traceback (most recent call last):",                                                   // 0
      "  File \"/usr/lib/python3/dist-packages/torch/serialization.py\", line 290, in __exit__",  // 1
      "    self.file_like.write_end_of_file()",                                                // 2
      "RuntimeError: [enforce fail at inline_container.cc:325] . unexpected pos 4032 vs 3936", // 3
      "terminate called after throwing an instance of 'c10::Error'",                          // 4
      "  what():  [enforce fail at inline_container.cc:325] . unexpected pos 4032 vs 3936",   // 5
      "terminate called after throwing an instance of 'gloo::EnforceNotMet'",                 // 6: no traceback before it
  });
  EXPECT_TRUE(f.notes[3].exception_line);
  EXPECT_FALSE(f.notes[3].aborted);
  EXPECT_TRUE(f.notes[4].aborted);
  EXPECT_FALSE(f.notes[6].aborted);
  auto g = feed_all({
      "KeyError: 'x'",  // no traceback: not an exception line of a record
      "terminate called after throwing an instance of 'c10::Error'",
      "Traceback (most recent call last):",
      "  File \"a.py\", line 1, in <module>",
      "KeyError: 'x'",
      "",
      "terminate called after throwing an instance of 'c10::Error'",  // a blank line between: still right after
      "Traceback (most recent call last):",
      "  File \"a.py\", line 1, in <module>",
      "KeyError: 'y'",
      "[rank0] step 4",
      "terminate called after throwing an instance of 'c10::Error'",  // another line came first
  });
  EXPECT_FALSE(g.notes[1].aborted);
  EXPECT_TRUE(g.notes[6].aborted);
  EXPECT_FALSE(g.notes[11].aborted);
}

TEST(python_traceback, separate_tracebacks_get_separate_records) {
  auto f = feed_all({
      "Traceback (most recent call last):",
      "  File \"a.py\", line 1, in <module>",
      "RuntimeError: first",
      "some unrelated line",
      "Traceback (most recent call last):",
      "  File \"b.py\", line 2, in <module>",
      "KeyError: 'second'",
  });
  EXPECT_GE(f.notes[0].record, 0);
  EXPECT_GE(f.notes[4].record, 0);
  EXPECT_NE(f.notes[0].record, f.notes[4].record);
  EXPECT_EQ(f.notes[6].record, f.notes[4].record);
  EXPECT_TRUE(f.notes[6].exception_line);
}

TEST(python_traceback, back_to_back_unchained_tracebacks_get_separate_records) {
  // Two different failures printed one after the other (e.g. two ranks' excepthooks in one stream),
  // with no "During handling" / "direct cause" line between them: not one chain.
  auto f = feed_all({
      "Traceback (most recent call last):",
      "  File \"a.py\", line 1, in <module>",
      "RuntimeError: first failure",
      "Traceback (most recent call last):",
      "  File \"b.py\", line 2, in <module>",
      "KeyError: 'second'",
  });
  ASSERT_TRUE(f.notes[2].exception_line);
  ASSERT_TRUE(f.notes[5].exception_line);
  EXPECT_NE(f.notes[3].record, f.notes[0].record);
}

TEST(python_traceback, the_collective_a_traceback_was_in) {
  // The innermost distributed_c10d frame names the call; autograd's backward engine stands for DDP's gradient
  // all-reduce (issue 43: gloo tracebacks of a collective mismatch say where each rank was blocked).
  auto f = feed_all({
      "Traceback (most recent call last):",
      "  File \"/job/train.py\", line 304, in main",
      "    dist.all_reduce(rl)",
      "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1541, in all_reduce",
      "    work.wait()",
      "RuntimeError: [./gloo/transport/tcp/unbound_buffer.cc:133] Timed out waiting 10000ms for send operation to complete",
      "Traceback (most recent call last):",
      "  File \"/job/train.py\", line 282, in main",
      "    loss.backward()",
      "  File \"/usr/lib/python3/dist-packages/torch/_tensor.py\", line 488, in backward",
      "    torch.autograd.backward(",
      "  File \"/usr/lib/python3/dist-packages/torch/autograd/__init__.py\", line 197, in backward",
      "    Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass",
      "RuntimeError: [./gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:50343",
      "Traceback (most recent call last):",
      "  File \"/job/train.py\", line 9, in main",
      "    x = y[3]",
      "KeyError: 3",
  });
  EXPECT_EQ(f.notes[5].collective, "all_reduce");
  EXPECT_EQ(f.notes[5].user_frame, "train.py:304 in main: dist.all_reduce(rl)");
  EXPECT_EQ(f.notes[13].collective, "backward");
  EXPECT_EQ(f.notes[17].collective, "");
}

TEST(python_traceback, a_launchers_console_script_is_not_the_users_frame) {
  // pip's extensionless wrapper in the environment's bin/ (accelerate, torchrun) is installed code; a script of the
  // user's in a bin/ folder keeps its .py.
  auto f = feed_all({
      "Traceback (most recent call last):",
      "  File \"/usr/local/bin/accelerate\", line 8, in <module>",
      "    sys.exit(main())",
      "  File \"/usr/local/lib/python3.10/dist-packages/accelerate/commands/launch.py\", line 637, in simple_launcher",
      "    raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)",
      "subprocess.CalledProcessError: Command '['/usr/bin/python3', 'train.py']' died with <Signals.SIGKILL: 9>.",
      "Traceback (most recent call last):",
      "  File \"/home/user/bin/train.py\", line 12, in <module>",
      "    main()",
      "KeyError: 3",
  });
  EXPECT_EQ(f.notes[5].user_frame, "");
  EXPECT_EQ(f.notes[9].user_frame, "train.py:12 in <module>: main()");
}

TEST(python_traceback, every_call_of_a_traceback_and_a_paste_without_its_header) {
  // One rank's stack names its call (broadcast_object_list and the broadcast inside it); a paste that lost the
  // "Traceback" header opens the record at its first frame; two ranks' stacks interleaved on one console name
  // both calls, the one cut from its torch.distributed frame by its call site (issue 43: lightning-19106).
  auto one = feed_all({
      "Traceback (most recent call last):",
      "  File \"/job/train.py\", line 30, in main",
      "    dist.broadcast_object_list(objs, src=0)",
      "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 2411, in broadcast_object_list",
      "    broadcast(object_sizes_tensor, src=src, group=group)",
      "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1906, in broadcast",
      "    work = default_pg.broadcast([tensor], opts)",
      "RuntimeError: Detected mismatch between collectives on ranks.",
  });
  EXPECT_EQ(one.notes[7].calls, "broadcast_object_list,broadcast");
  auto two = feed_all({
      "    return _sync_ddp(result, group=group, reduce_op=reduce_op)",
      "  File \"/env/lightning_fabric/utilities/distributed.py\", line 220, in _sync_ddp",
      "    broadcast(object_sizes_tensor, src=src, group=group)",
      "  File \"/env/torch/distributed/distributed_c10d.py\", line 1906, in broadcast",
      "    torch.distributed.barrier(group=group)",
      "    torch.distributed.barrier(group=group)",
      "  File \"/env/torch/distributed/c10d_logger.py\", line 47, in wrapper",
      "    work = default_pg.broadcast([tensor], opts)",
      "RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=21, OpType=BROADCAST",
  });
  EXPECT_FALSE(two.notes[0].skip_match);  // before the first frame: no record yet
  EXPECT_TRUE(two.notes[1].skip_match);
  EXPECT_TRUE(two.notes[8].exception_line);
  EXPECT_EQ(two.notes[8].collective, "broadcast");
  EXPECT_EQ(two.notes[8].calls, "broadcast,barrier");
  // An unindented "File ..." line is no frame (a message quoting one), and opens nothing.
  auto quoted = feed_all({"File \"a.py\", line 3, in f: bad thing", "ValueError: x"});
  EXPECT_FALSE(quoted.notes[0].skip_match);
  EXPECT_FALSE(quoted.notes[1].exception_line);
}

TEST(python_traceback, an_exception_line_split_by_mpirun_tags) {
  // mpirun --tag-output tags each write: the exception type and its message arrive as separate chunks.
  auto f = feed_all({
      "Traceback (most recent call last):",
      "  File \"/job/train.py\", line 304, in main",
      "    [1,0]<stderr>:dist.all_reduce(rl)[1,0]<stderr>:",
      "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1541, in all_reduce",
      "    [1,0]<stderr>:work.wait()[1,0]<stderr>:",
      "RuntimeError[1,0]<stderr>:: [1,0]<stderr>:[./gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 10000ms for recv operation to complete",
  });
  EXPECT_TRUE(f.notes[5].exception_line);
  EXPECT_EQ(f.notes[5].collective, "all_reduce");
}

TEST(python_traceback, unterminated_traceback_ends_on_plain_line) {
  auto f = feed_all({
      "Traceback (most recent call last):",
      "  File \"a.py\", line 1, in <module>",
      "Killed",
  });
  EXPECT_TRUE(f.notes[1].skip_match);
  EXPECT_FALSE(f.notes[2].skip_match);
  EXPECT_FALSE(f.notes[2].exception_line);
  EXPECT_EQ(f.notes[2].record, -1);
}

TEST(python_traceback, exception_types_recognised) {
  for (std::string exc : {"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                          "KeyboardInterrupt", "SystemExit: 1",
                          "torch.distributed.DistBackendError: NCCL error in: ../NCCLUtils.hpp:275"}) {
    auto f = feed_all({"Traceback (most recent call last):", "  File \"a.py\", line 1, in <module>", exc});
    EXPECT_TRUE(f.notes[2].exception_line) << exc;
    EXPECT_EQ(f.notes[2].record, f.notes[0].record) << exc;
  }
}

// ------------------------------------------------------------------ C++ frames

TEST(cpp_frames, exception_raised_from_and_frames_are_skipped) {
  auto f = feed_all({
      "terminate called after throwing an instance of 'c10::DistBackendError'",
      "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread terminated with exception",
      "Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:632 (most recent call first):",
      "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f0f2ab6c446 in /usr/lib/libc10.so)",
      "frame #1: <unknown function> + 0x1d5f5c (0x7f0f2c0b0f5c in /usr/lib/libtorch_cuda.so)",
      "frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x7f0f2c0b7a33 in /usr/lib/libtorch_cuda.so)",
      "",
      "Fatal Python error: Aborted",
  });
  EXPECT_FALSE(f.notes[0].skip_match);
  EXPECT_FALSE(f.notes[1].skip_match);
  for (int i : {2, 3, 4, 5, 6}) EXPECT_TRUE(f.notes[i].skip_match) << "line " << i;
  EXPECT_FALSE(f.notes[7].skip_match);
}

TEST(cpp_frames, frame_line_outside_a_record_is_matched) {
  auto f = feed_all({"frame #0: oom_handler() + 0x10"});
  EXPECT_FALSE(f.notes[0].skip_match);
}

// ------------------------------------------------------------------ ChildFailedError block

TEST(child_failed_block, four_failures_one_root_cause) {
  auto f = feed_all(kChildFailedBlock, "node-01/agent.log");
  ASSERT_EQ(f.exits.size(), 4u);
  int roots = 0;
  for (const auto& r : f.exits) {
    roots += r.root_cause ? 1 : 0;
    EXPECT_FALSE(r.from_agent_line);
    EXPECT_EQ(r.source, "node-01/agent.log");
    EXPECT_EQ(r.host, "localhost");
  }
  EXPECT_EQ(roots, 1);

  const exit_record* r3 = by_rank(f.exits, 3);
  ASSERT_NE(r3, nullptr);
  EXPECT_EQ(r3->local_rank.value_or(-1), 3);
  EXPECT_EQ(r3->exitcode.value_or(0), 1);
  EXPECT_EQ(r3->pid.value_or(0), 14692);
  EXPECT_EQ(r3->time, "2026-09-07_13:02:58");
  EXPECT_EQ(r3->signal, "");
  EXPECT_FALSE(r3->root_cause);
  EXPECT_EQ(r3->line_no, 14u);  // the "[1]:" line

  const exit_record* r0 = by_rank(f.exits, 0);
  ASSERT_NE(r0, nullptr);
  EXPECT_EQ(r0->local_rank.value_or(-1), 0);
  EXPECT_EQ(r0->exitcode.value_or(0), -9);
  EXPECT_EQ(r0->pid.value_or(0), 14689);
  EXPECT_EQ(r0->time, "2026-09-07_13:03:29");
  EXPECT_EQ(r0->signal, "SIGKILL");
  EXPECT_FALSE(r0->root_cause);

  const exit_record* r2 = by_rank(f.exits, 2);
  ASSERT_NE(r2, nullptr);
  EXPECT_EQ(r2->local_rank.value_or(-1), 2);
  EXPECT_EQ(r2->exitcode.value_or(0), -15);
  EXPECT_EQ(r2->pid.value_or(0), 14691);
  EXPECT_EQ(r2->signal, "SIGTERM");
  EXPECT_FALSE(r2->root_cause);

  const exit_record* r1 = by_rank(f.exits, 1);
  ASSERT_NE(r1, nullptr);
  EXPECT_TRUE(r1->root_cause);
  EXPECT_EQ(r1->local_rank.value_or(-1), 1);
  EXPECT_EQ(r1->exitcode.value_or(0), 1);
  EXPECT_EQ(r1->pid.value_or(0), 14690);
  EXPECT_EQ(r1->time, "2026-09-07_13:02:58");
  EXPECT_EQ(r1->signal, "");
  EXPECT_EQ(r1->line_no, 37u);  // the "[0]:" line under Root Cause

  // Entry lines are not matched by signatures; the exception line is.
  EXPECT_TRUE(f.notes[7].skip_match);   // "    raise ChildFailedError("
  EXPECT_TRUE(f.notes[8].exception_line);
  EXPECT_TRUE(f.notes[14].skip_match);  // time
  EXPECT_TRUE(f.notes[16].skip_match);  // rank
  EXPECT_TRUE(f.notes[17].skip_match);  // exitcode
  EXPECT_TRUE(f.notes[43].skip_match);  // closing border
}

TEST(child_failed_block, no_other_failures_variant) {
  auto f = feed_all({
      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
      "============================================================",
      "train.py FAILED",
      "------------------------------------------------------------",
      "Failures:",
      "  <NO_OTHER_FAILURES>",
      "------------------------------------------------------------",
      "Root Cause (first observed failure):",
      "[0]:",
      "  time      : 2024-05-08_08:47:31",
      "  host      : node-01.example.com",
      "  rank      : 10 (local_rank: 2)",
      "  exitcode  : 1 (pid: 5939)",
      "  error_file: <N/A>",
      "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
      "============================================================",
  });
  ASSERT_EQ(f.exits.size(), 1u);
  const auto& r = f.exits[0];
  EXPECT_TRUE(r.root_cause);
  EXPECT_EQ(r.rank.value_or(-1), 10);
  EXPECT_EQ(r.local_rank.value_or(-1), 2);
  EXPECT_EQ(r.exitcode.value_or(0), 1);
  EXPECT_EQ(r.pid.value_or(0), 5939);
  EXPECT_EQ(r.host, "node-01.example.com");
  EXPECT_EQ(r.time, "2024-05-08_08:47:31");
  EXPECT_TRUE(f.notes[5].skip_match);
}

TEST(child_failed_block, two_blocks_in_one_stream) {
  std::vector<std::string> lines(kChildFailedBlock.begin() + 8, kChildFailedBlock.end());
  lines.push_back("a plain line between the blocks");
  lines.insert(lines.end(), kChildFailedBlock.begin() + 8, kChildFailedBlock.end());
  auto f = feed_all(lines);
  EXPECT_EQ(f.exits.size(), 8u);
  int roots = 0;
  for (const auto& r : f.exits) roots += r.root_cause;
  EXPECT_EQ(roots, 2);
  EXPECT_FALSE(f.notes[36].skip_match);  // the plain line after the first block
}

TEST(child_failed_block, code_line_raise_does_not_start_a_block) {
  auto f = feed_all({
      "    raise ChildFailedError(",
      "Failures:",
      "[1]:",
      "  time      : 2026-09-07_13:02:58",
      "  rank      : 3 (local_rank: 3)",
      "  exitcode  : 1 (pid: 14692)",
      "============================================================",
  });
  EXPECT_TRUE(f.exits.empty());
  for (const auto& n : f.notes) EXPECT_FALSE(n.skip_match);
}

// ------------------------------------------------------------------ agent lines

TEST(agent_lines, failed_exitcode_local_rank_pid) {
  auto f = feed_all({
      "failed (exitcode: 1) local_rank: 2 (pid: 5939) of binary: /home/user/anaconda3/envs/env/bin/python",
  }, "agent.log");
  ASSERT_EQ(f.exits.size(), 1u);
  const auto& r = f.exits[0];
  EXPECT_TRUE(r.from_agent_line);
  EXPECT_FALSE(r.root_cause);
  EXPECT_EQ(r.local_rank.value_or(-1), 2);
  EXPECT_EQ(r.exitcode.value_or(0), 1);
  EXPECT_EQ(r.pid.value_or(0), 5939);
  EXPECT_FALSE(r.rank.has_value());
  EXPECT_EQ(r.source, "agent.log");
  EXPECT_EQ(r.line_no, 1u);
}

TEST(agent_lines, failed_with_logger_prefix_and_negative_exitcode) {
  auto f = feed_all({
      "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) local_rank: 0 (pid: 1622990) of binary: /home/user/miniconda3/envs/env/bin/python",
  });
  ASSERT_EQ(f.exits.size(), 1u);
  EXPECT_EQ(f.exits[0].exitcode.value_or(0), -6);
  EXPECT_EQ(f.exits[0].local_rank.value_or(-1), 0);
  EXPECT_EQ(f.exits[0].pid.value_or(0), 1622990);
}

TEST(agent_lines, sending_closing_signal) {
  auto f = feed_all({
      "some line",
      "Sending process 17320 closing signal SIGTERM",
      "Sending process 17321 closing signal SIGTERM",
  }, "agent.log");
  ASSERT_EQ(f.terms.size(), 2u);
  EXPECT_EQ(f.terms[0].pid, 17320);
  EXPECT_EQ(f.terms[0].source, "agent.log");
  EXPECT_EQ(f.terms[0].line_no, 2u);
  EXPECT_EQ(f.terms[1].pid, 17321);
  EXPECT_TRUE(f.exits.empty());
}

// kb/_tables/progress_words.tsv holds what the hand scans assume (progress.cpp falls back to the regexps
// otherwise, correct but slower): words of [a-z][a-z0-9_]*, readings among step, planned and count, at
// most four distinct first letters in all (so each scan's letter set fits), and the rows the other tests use.
TEST(progress, table_fits_the_hand_scans) {
  const auto& t = ff::testing::builtin().tables.at("progress_words");
  ASSERT_EQ(t.columns.at(0), "word");
  ASSERT_TRUE(t.has_column("reads"));
  std::set<char> first;
  std::set<std::string> step_words;
  for (const auto& w : t.order) {
    const std::string reads = t.get(w, "reads");
    EXPECT_TRUE(re2::RE2::FullMatch(w, "[a-z][a-z0-9_]*")) << w;
    EXPECT_TRUE(re2::RE2::FullMatch(reads, "(?:step|planned|count)(?: (?:step|planned|count))*")) << w;
    first.insert(w[0]);
    if (reads.find("step") != std::string::npos) step_words.insert(w);
  }
  EXPECT_LE(first.size(), 4u);
  EXPECT_EQ(step_words, (std::set<std::string>{"step", "iteration", "iter", "global_step"}));
}

// read_progress() takes shortcuts (a hand scan for the step rule, a shape test before the planned rule):
// on every line they must give what the regexps alone give. Lines are built from the pieces the rules
// care about, in random order, plus real progress lines.
TEST(progress, shortcuts_agree_with_the_regexps) {
  const std::vector<std::string> real = {
      "step 79 loss 2.3797 lr 1.19e-05 tok/s 43128",
      "Epoch 0:  45%|####5     | 450/1000 [01:02<01:16,  7.19it/s, loss=2.31]",
      "iteration      200/   10000 | consumed samples: 3200 | elapsed time per iteration (ms): 512.3",
      "global_step=300 loss=1.2", "Step: 12", "STEP=0007", "{'loss': 1.9, 'learning_rate': 2e-05, 'epoch': 0.4, 'step': 50}",
      "iter5/10", "steps: 5/100", "train 5 batches", "substep 4", "step99999999999999999999 x", "ITERATION:3 / 9",
      "batch_idx 3 / 17", "it/s 5", "stepping 3/4", "no progress here", "iter_time=3 iter=4", "global_step 9/ 10"};
  for (const auto& l : real) {
    auto a = ff::extract::read_progress(l), b = ff::extract::detail::read_progress_by_regex(l);
    EXPECT_EQ(a.step, b.step) << l;
    EXPECT_EQ(a.planned, b.planned) << l;
    EXPECT_EQ(ff::extract::read_step(l), b.step) << l;
    EXPECT_EQ(ff::extract::read_planned(l), b.planned) << l;
  }
  const std::vector<std::string> pieces = {"step", "Step", "STEP", "iter", "Iteration", "global_step", "batch", "batches",
                                           " batches", "_", "x", "s", " ", "  ", "\t", "=", ":", "/", " / ", "0", "7",
                                           "42", "007", "99999999999999999999", "-", ",", "[", "]", "|", "it/s", "é"};
  // (and, in a second run, the words of kb/_tables/progress_words.tsv, as written and upper case)
  std::vector<std::string> all = pieces;
  const auto& t = ff::testing::builtin().tables.at("progress_words");
  for (const auto& w : t.order) {
    std::string up = w;
    for (auto& c : up) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
    all.push_back(w);
    all.push_back(up);
  }
  std::uint64_t seed = 0x9E3779B97F4A7C15ull;
  auto next = [&seed] {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
  };
  std::size_t with_step = 0, with_planned = 0;
  for (int i = 0; i < 200000; ++i) {
    std::string l;
    for (std::uint64_t k = 0, n = 1 + next() % 9; k < n; ++k) l += pieces[next() % pieces.size()];
    auto a = ff::extract::read_progress(l), b = ff::extract::detail::read_progress_by_regex(l);
    ASSERT_EQ(a.step, b.step) << "'" << l << "'";
    ASSERT_EQ(a.planned, b.planned) << "'" << l << "'";
    // the halves the light path reads separately (the step walking back, the planned count on each line)
    ASSERT_EQ(ff::extract::read_step(l), b.step) << "'" << l << "'";
    ASSERT_EQ(ff::extract::read_planned(l), b.planned) << "'" << l << "'";
    if (ff::text::is_plain(l)) {  // the span the light path keeps per line shape, and its value
      const auto sp = ff::extract::find_step(l);
      ASSERT_EQ(sp.found ? ff::extract::step_value(std::string_view(l).substr(sp.at, sp.len)) : std::nullopt, b.step) << "'" << l << "'";
      std::string other = l;  // digit-blind: other digits, same span
      for (auto& c : other)
        if (c >= '0' && c <= '9') c = static_cast<char>('0' + next() % 10);
      const auto so = ff::extract::find_step(other);
      ASSERT_EQ(so.found, sp.found) << "'" << l << "' '" << other << "'";
      if (sp.found) ASSERT_EQ(std::make_pair(so.at, so.len), std::make_pair(sp.at, sp.len)) << "'" << l << "' '" << other << "'";
    }
    with_step += b.step.has_value();
    with_planned += b.planned.has_value();
  }
  EXPECT_GT(with_step, 10000u);  // the generator reaches both rules often
  EXPECT_GT(with_planned, 1000u);
  for (int i = 0; i < 100000; ++i) {  // the same with the table's words among the pieces
    std::string l;
    for (std::uint64_t k = 0, n = 1 + next() % 9; k < n; ++k) l += all[next() % all.size()];
    auto a = ff::extract::read_progress(l), b = ff::extract::detail::read_progress_by_regex(l);
    ASSERT_EQ(a.step, b.step) << "'" << l << "'";
    ASSERT_EQ(a.planned, b.planned) << "'" << l << "'";
    ASSERT_EQ(ff::extract::read_step(l), b.step) << "'" << l << "'";
    ASSERT_EQ(ff::extract::read_planned(l), b.planned) << "'" << l << "'";
  }
}

// mpirun's proc-failed block (Open MPI help-mpirun.txt) at the very end of a pasted log: the exit code line
// completes the record, with nothing after it.
TEST(mpirun_exit_block, a_block_that_ends_the_log_is_kept) {
  auto f = feed_all({
      "mpirun detected that one or more processes exited with non-zero status, thus causing",
      "the job to be terminated. The first process to do so was:",
      "",
      "  Process name: [[50371,1],0]",
      "  Exit code:    1",
  });
  ASSERT_EQ(f.exits.size(), 1u);
  EXPECT_EQ(f.exits[0].rank, 0);
  EXPECT_EQ(f.exits[0].exitcode, 1);
  EXPECT_TRUE(f.exits[0].root_cause);
}

// mpirun's proc-aborted-signal line (Open MPI help-orterun.txt) names the rank and the signal.
TEST(mpirun_exit_block, a_rank_killed_by_a_signal) {
  auto f = feed_all({"mpirun noticed that process rank 0 with PID 0 on node vm exited on signal 9 (Killed)."});
  ASSERT_EQ(f.exits.size(), 1u);
  EXPECT_EQ(f.exits[0].rank, 0);
  EXPECT_EQ(f.exits[0].exitcode, -9);
  EXPECT_EQ(f.exits[0].signal, "SIGKILL");
  EXPECT_EQ(f.exits[0].host, "vm");
}

// srun's task exit lines (Slurm's launch plugin, launch_slurm.c, _task_finish: "NODE: task N: Exited with exit code C" or the
// signal's strsignal text): a task killed by a signal is read too, not only one that exited with a code.
TEST(srun_exit, tasks_killed_by_a_signal_and_exited_with_a_code) {
  auto f = feed_all({"srun: error: localhost: task 1: Killed", "srun: error: node3: task 5: Segmentation fault",
                     "srun: error: node3: task 2: Exited with exit code 2", "srun: error: localhost: task 0: Terminated"});
  ASSERT_EQ(f.exits.size(), 4u);
  EXPECT_EQ(f.exits[0].rank, 1);
  EXPECT_EQ(f.exits[0].exitcode, -9);
  EXPECT_EQ(f.exits[0].signal, "SIGKILL");
  EXPECT_EQ(f.exits[0].host, "localhost");
  EXPECT_EQ(f.exits[1].exitcode, -11);
  EXPECT_EQ(f.exits[1].signal, "SIGSEGV");
  EXPECT_EQ(f.exits[2].exitcode, 2);
  EXPECT_EQ(f.exits[2].signal, "");
  EXPECT_EQ(f.exits[3].signal, "SIGTERM");
}

// torch.distributed.launch (torch 1.x) raises CalledProcessError after its spawn loop with the loop's last `cmd`:
// the exit status is the failed worker's, the --local_rank the last one spawned. The record names no rank.
TEST(launch_exit, called_process_error_keeps_the_status_and_names_no_rank) {
  auto f = feed_all({"subprocess.CalledProcessError: Command '['/usr/bin/python', '-u', 'train.py', '--local_rank=3']' returned "
                     "non-zero exit status 1."});
  ASSERT_EQ(f.exits.size(), 1u);
  EXPECT_EQ(f.exits[0].exitcode, 1);
  EXPECT_FALSE(f.exits[0].local_rank);
  EXPECT_FALSE(f.exits[0].rank);
  EXPECT_EQ(f.exits[0].launcher, "launch");
  // DeepSpeed's launcher prints the same last command with the failed worker's status
  auto ds = feed_all({"[ERROR] [launch.py:325:sigkill_handler] ['/usr/bin/python3', '-u', 'train.py', '--local_rank=1'] exits with return code = -9"});
  ASSERT_EQ(ds.exits.size(), 1u);
  EXPECT_EQ(ds.exits[0].exitcode, -9);
  EXPECT_EQ(ds.exits[0].signal, "SIGKILL");
  EXPECT_FALSE(ds.exits[0].local_rank);
  EXPECT_EQ(ds.exits[0].launcher, "deepspeed");
}

// horovodrun's Gloo launcher names each failed worker by rank, in the order they ended: the first is the first
// failure (horovod/runner/gloo_run.py, _exec_command).
TEST(launch_exit, horovod_names_each_failed_rank_the_first_first) {
  auto f = feed_all({"[1]<stderr>:RuntimeError: boom", "Process 1 exit with status code 1.",
                     "Terminating remaining workers after failure of Process 1.", "Process 0 exit with status code 143."});
  ASSERT_EQ(f.exits.size(), 2u);
  EXPECT_EQ(f.exits[0].rank, 1);
  EXPECT_EQ(f.exits[0].exitcode, 1);
  EXPECT_TRUE(f.exits[0].root_cause);
  EXPECT_EQ(f.exits[1].rank, 0);
  EXPECT_FALSE(f.exits[1].root_cause);
  EXPECT_EQ(f.exits[1].signal, "SIGTERM");  // 128 + 15: the worker ran under a shell
  EXPECT_EQ(f.exits[0].launcher, "horovod");
  EXPECT_TRUE(feed_all({"Process 1 exit with status code"}).exits.empty());
}

// A launcher's CalledProcessError for a Python worker killed by a signal (accelerate's simple_launcher): the
// signal, no rank; a build tool's (ninja) is not a worker's exit.
TEST(launch_exit, a_python_worker_killed_by_a_signal) {
  auto f = feed_all({"subprocess.CalledProcessError: Command '['/usr/bin/python3', '-m', 'autotrain.trainers.clm']' died with <Signals.SIGKILL: 9>."});
  ASSERT_EQ(f.exits.size(), 1u);
  EXPECT_EQ(f.exits[0].exitcode, -9);
  EXPECT_EQ(f.exits[0].signal, "SIGKILL");
  EXPECT_FALSE(f.exits[0].rank);
  EXPECT_TRUE(feed_all({"subprocess.CalledProcessError: Command '['ninja', '-v']' died with <Signals.SIGKILL: 9>."}).exits.empty());
}

// Slurm's job.step id is not a training step: "STEP 8.0" in slurmstepd's CANCELLED line.
TEST(progress, a_dotted_step_id_is_not_progress) {
  EXPECT_FALSE(ff::extract::read_step("slurmstepd-node1: error: *** STEP 8.0 ON node1 CANCELLED AT 2026-12-06T16:39:19 ***", true));
  EXPECT_EQ(ff::extract::read_step("epoch 0 step 8/20 loss 0.5", true), 8);
  EXPECT_EQ(ff::extract::read_step("reached step 8.", true), 8);
  EXPECT_FALSE(ff::extract::read_step("step 12.5 of the schedule", false));  // the regexp path agrees
}

// kb/_tables/exit_reports.tsv: the extractor asks for each of these rows by name and reads its groups in the
// order the table lists them, so every row is there with as many capturing groups as its `groups` names.
TEST(extract, exit_report_rows_have_their_groups) {
  const auto& t = ff::testing::builtin().tables.at("exit_reports");
  const std::set<std::string> asked = {"torchelastic_entry", "torchelastic_time", "torchelastic_host", "torchelastic_rank",
                                       "torchelastic_exitcode", "torchelastic_signal", "mpirun_process", "mpirun_host",
                                       "mpirun_exit_code", "mpirun_signal", "srun_task", "called_process_error",
                                       "torchelastic_worker_failed", "torchelastic_closing_signal", "deepspeed_exit", "cxx_terminate",
                                       "horovod_process_exit", "called_process_signal"};
  EXPECT_EQ(std::set<std::string>(t.order.begin(), t.order.end()), asked);
  for (const auto& name : t.order) {
    re2::RE2 re(t.get(name, "regex"));
    ASSERT_TRUE(re.ok()) << name;
    const std::string groups = t.get(name, "groups");
    int n = 0;
    if (groups != "-")
      for (std::size_t i = 0; i != std::string::npos; i = groups.find(' ', i + 1)) ++n;
    EXPECT_EQ(re.NumberOfCapturingGroups(), n) << name << ": " << groups;
  }
}
