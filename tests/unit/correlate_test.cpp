// Correlation rules, one scenario each, on small logs written to a temp directory.
#include <gtest/gtest.h>

#include "test_support.hpp"
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "firstfault/kb.hpp"
#include "firstfault/pipeline.hpp"

namespace fs = std::filesystem;

namespace {

using ff::testing::engine;

struct scenario {
  fs::path dir = fs::temp_directory_path() / ("ff-corr-" + std::to_string(::getpid()) + "-" + std::to_string(rand()));
  scenario() { fs::create_directories(dir); }
  ~scenario() { fs::remove_all(dir); }
  void file(const std::string& name, const std::string& text) {
    fs::create_directories((dir / name).parent_path());
    std::ofstream(dir / name) << text;
  }
  ff::correlate::diagnosis run() {
    auto r = ff::pipeline::diagnose({dir.string()}, engine(), {});
    if (!r) {  // a failure, not a crash on .value()
      ADD_FAILURE() << "diagnose failed: " << r.error().message;
      return {};
    }
    return r.value().diag;
  }
};

const char* kWatchdog =
    "[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank %d] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn=%d, NumelOut=%d, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.\n";

std::string watchdog(int rank, int numel = 1024) {
  char b[512];
  std::snprintf(b, sizeof b, kWatchdog, rank, numel, numel);
  return "[rank" + std::to_string(rank) + "]:" + b;
}

TEST(correlate, cause_beats_louder_symptoms_and_names_its_rank) {
  scenario s;
  std::string log;
  for (int r : {0, 1, 3}) log += watchdog(r);
  log += "[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 2 has a total capacity of 79.15 GiB of which 1.00 GiB is free.\n";
  s.file("console.log", log);
  auto d = s.run();
  EXPECT_EQ(d.verdict, ff::correlate::verdict::failure);
  EXPECT_EQ(d.kind, "cuda_oom");
  EXPECT_EQ(d.initiating_rank, 2);
  EXPECT_EQ(d.initiating_rule, "the only rank that reported the root-cause error");
  bool watchdog_is_collateral = false;
  for (const auto& g : d.collateral)
    if (g.signature == "torch_nccl_watchdog_timeout") {
      watchdog_is_collateral = true;
      EXPECT_EQ(g.ranks, (std::vector<int>{0, 1, 3}));
      EXPECT_NE(g.explanation.find("collateral of rank 2"), std::string::npos);
    }
  EXPECT_TRUE(watchdog_is_collateral);
}

TEST(correlate, higher_priority_cause_wins_over_earlier_lower_one) {
  scenario s;
  s.file("rank0.log", "2026-01-01 10:00:00,000 INFO    [rank0] x - RuntimeError: CUDA error: an illegal memory access was encountered\n");
  s.file("dmesg.log", "[Thu Jan  1 10:00:05 2026] NVRM: Xid (PCI:0000:09:00): 79, pid=0, GPU has fallen off the bus.\n");
  auto d = s.run();
  EXPECT_EQ(d.kind, "gpu_fell_off_bus");
  ASSERT_FALSE(d.alternatives.empty());
  EXPECT_EQ(d.alternatives[0].kind, "illegal_memory_access");
}

TEST(correlate, earliest_cause_by_time_across_ranks) {
  scenario s;
  const char* oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n";
  s.file("rank3.log", std::string("2026-01-01 10:00:07,000 INFO    [rank3] t - step 9\n") + oom);
  s.file("rank5.log", std::string("2026-01-01 10:00:02,000 INFO    [rank5] t - step 9\n") + oom);
  auto d = s.run();
  EXPECT_EQ(d.kind, "cuda_oom");
  EXPECT_EQ(d.initiating_rank, 5);
  EXPECT_NE(d.initiating_rule.find("earliest"), std::string::npos) << d.initiating_rule;
}

TEST(correlate, the_rank_missing_from_the_timeouts_is_the_straggler) {
  scenario s;
  // Rank 0's last line says it started work of its own: exclusive work.
  s.file("console.log", watchdog(1) + watchdog(2) + watchdog(3) + "[rank0]: step 7 loss 1.0\n[rank0]: saving checkpoint to /ckpt/step_7.pt\n");
  auto d = s.run();
  EXPECT_EQ(d.kind, "rank0_exclusive_work_timeout");
  EXPECT_EQ(d.initiating_rank, 0);
  // Rank 0 merely stopped after a step: a straggler like any other rank (its number proves nothing).
  s.file("console.log", watchdog(1) + watchdog(2) + watchdog(3) + "[rank0]: step 7 loss 1.0\n");
  d = s.run();
  EXPECT_EQ(d.kind, "straggler_timeout");
  EXPECT_EQ(d.initiating_rank, 0);
  s.file("console.log", watchdog(0) + watchdog(1) + watchdog(3) + "[rank2]: step 7 loss 1.0\n[rank0]: step 7 loss 1.0\n");
  d = s.run();
  EXPECT_EQ(d.kind, "straggler_timeout");
  EXPECT_EQ(d.initiating_rank, 2);
  EXPECT_EQ(d.confidence, ff::correlate::confidence::low);
}

TEST(correlate, numel_differing_at_one_seqnum_is_a_shape_mismatch) {
  scenario s;
  s.file("console.log", watchdog(0, 300) + watchdog(1, 300) + watchdog(2, 280) + watchdog(3, 300));
  auto d = s.run();
  EXPECT_EQ(d.kind, "collective_shape_mismatch");
  EXPECT_EQ(d.initiating_rank, 2);
}

TEST(correlate, only_symptoms_is_undetermined_and_nothing_is_healthy) {
  scenario s;
  s.file("console.log", watchdog(0));
  EXPECT_EQ(s.run().verdict, ff::correlate::verdict::undetermined);
  s.file("console.log", "[rank0]: step 1 loss 2.0\n[rank0]: step 2 loss 1.9\n");
  EXPECT_EQ(s.run().verdict, ff::correlate::verdict::healthy);
}

TEST(correlate, torchelastic_root_cause_names_the_rank_of_a_node_level_cause) {
  scenario s;
  s.file("dmesg.log", "[12345.678] Out of memory: Killed process 14690 (python) total-vm:100kB, anon-rss:90kB, file-rss:0kB\n");
  s.file("console.log",
         "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
         "============================================================\n"
         "train.py FAILED\n------------------------------------------------------------\n"
         "Failures:\n  <NO_OTHER_FAILURES>\n------------------------------------------------------------\n"
         "Root Cause (first observed failure):\n[0]:\n  time      : 2026-09-07_13:02:58\n  host      : localhost\n"
         "  rank      : 5 (local_rank: 1)\n  exitcode  : -9 (pid: 14690)\n  error_file: <N/A>\n"
         "  traceback : Signal 9 (SIGKILL) received by PID 14690\n============================================================\n");
  auto d = s.run();
  EXPECT_EQ(d.kind, "host_oom_sigkill");
  EXPECT_EQ(d.initiating_rank, 5);
}

}  // namespace

namespace {

TEST(correlate_review, two_ranks_with_different_numel_do_not_name_a_culprit) {
  scenario s;
  s.file("console.log", watchdog(0, 100) + watchdog(1, 200));
  auto d = s.run();
  EXPECT_EQ(d.kind, "collective_shape_mismatch");
  EXPECT_FALSE(d.initiating_rank.has_value());
}

TEST(correlate_review, a_rank_without_a_time_could_have_been_first) {
  scenario s;
  s.file("console.log",
         "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
         "[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n");
  auto d = s.run();
  EXPECT_EQ(d.kind, "cuda_oom");
  EXPECT_FALSE(d.initiating_rank.has_value()) << d.initiating_rule;
}

TEST(correlate_review, a_local_rank_on_several_nodes_maps_to_no_rank) {
  scenario s;
  s.file("node-a.log", "[default5]:[rank5]: step 1\n");
  s.file("node-b.log", "[default5]:[rank13]: step 1\nfailed (exitcode: -9) local_rank: 5 (pid: 777) of binary: /usr/bin/python3\n");
  s.file("dmesg.log", "[12345.678] Out of memory: Killed process 777 (python) total-vm:100kB, anon-rss:90kB, file-rss:0kB\n");
  auto d = s.run();
  EXPECT_EQ(d.kind, "host_oom_sigkill");
  EXPECT_FALSE(d.initiating_rank.has_value()) << "local rank 5 is rank 5 on one node and 13 on the other";
}

}  // namespace

namespace {

TEST(correlate_review, timeout_arithmetic_picks_the_rank_that_stopped_before_the_collective) {
  scenario s;
  // The collective timed out at 10:10:00 after 600 s, so it began at 10:00:00. Ranks 2 and 3 printed no
  // timeout; rank 3 kept logging until 10:05, rank 2's last line is from 09:59:58: rank 2 never arrived.
  auto wd = [](int r) {
    return "[rank" + std::to_string(r) + "]:[E0101 10:10:00.000000000 ProcessGroupNCCL.cpp:607] [Rank " + std::to_string(r) +
           "] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, "
           "Timeout(ms)=600000) ran for 600000 milliseconds before timing out.\n";
  };
  s.file("console.log", "[rank2]:[I0101 09:59:58.000000000 train.py:1] step 41 loading shard 17\n"
                        "[rank3]:[I0101 10:05:00.000000000 train.py:1] step 42 waiting for eval\n" +
                            wd(0) + wd(1));
  auto d = s.run();
  EXPECT_EQ(d.initiating_rank, 2) << d.initiating_rule;
}

}  // namespace

namespace {

TEST(correlate_review, a_worker_stopped_while_still_running_corroborates_the_straggler) {
  auto r = ff::pipeline::diagnose({(fs::path(FF_TEST_DATA) / "corpus" / "run-k_straggler_timeout" / "logs").string()},
                                  engine(), {});
  ASSERT_TRUE(r);
  EXPECT_EQ(r.value().diag.initiating_rank, 2);
  EXPECT_NE(r.value().diag.initiating_rule.find("still running (pid 17320)"), std::string::npos) << r.value().diag.initiating_rule;
}

}  // namespace

// A log that stops in the job's start-up (NCCL's set-up chatter) with no progress and no end is not healthy;
// the same lines followed by training steps are.
TEST(correlate, a_log_that_stops_in_start_up_is_not_healthy) {
  scenario s;
  s.file("job.log", "node-a:1234:1234 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.23<0>\n");
  EXPECT_EQ(s.run().verdict, ff::correlate::verdict::undetermined);
  s.file("job.log", "node-a:1234:1234 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.23<0>\n[rank0]: step 1 loss 0.9\n[rank0]: step 2 loss 0.8\n");
  EXPECT_EQ(s.run().verdict, ff::correlate::verdict::healthy);
}

// An undetermined verdict says what to do next: the line to read first, then the evidence to capture, chosen by
// what the logs hold (collective timeouts: the flight recorder and py-spy; set-up: NCCL_DEBUG=INFO).
TEST(correlate, an_undetermined_verdict_ends_with_next_steps) {
  scenario s;
  s.file("job.log", "[rank1]:[E1002 16:04:30.860963433 ProcessGroupNCCL.cpp:2252] [PG ID 1 PG GUID 1 Rank 1]  failure detected by "
                    "watchdog at work sequence id: 1116 PG status: last enqueued work: 1118, last completed work: 1115\n"
                    "[rank1]:[E1002 16:04:30.861173927 ProcessGroupNCCL.cpp:2584] [PG ID 1 PG GUID 1 Rank 1] First PG on this rank to signal dumping.\n");
  auto d = s.run();
  ASSERT_EQ(d.verdict, ff::correlate::verdict::undetermined);
  ASSERT_GE(d.next_steps.size(), 2u);
  EXPECT_EQ(d.next_steps[0].rfind("Read ", 0), 0u) << d.next_steps[0];
  EXPECT_NE(d.next_steps[0].find("job.log:"), std::string::npos) << d.next_steps[0];
  bool fr = false;
  for (const auto& n : d.next_steps) fr = fr || n.find("TORCH_NCCL_TRACE_BUFFER_SIZE") != std::string::npos;
  EXPECT_TRUE(fr);
  // A start-up log that stops: NCCL's set-up chatter asks for NCCL_DEBUG=INFO.
  s.file("job.log", "node-a:1234:1234 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.23<0>\n");
  d = s.run();
  ASSERT_EQ(d.verdict, ff::correlate::verdict::undetermined);
  bool nccl = false;
  for (const auto& n : d.next_steps) nccl = nccl || n.find("NCCL_DEBUG=INFO") != std::string::npos;
  EXPECT_TRUE(nccl);
  // A failure has a fix instead.
  s.file("job.log", watchdog(0) + "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n");
  EXPECT_TRUE(s.run().next_steps.empty());
}

// slurmstepd prints its own time in the message ("CANCELLED AT ..."): that is the line's time, not the time
// of the line before it.
TEST(correlate, a_time_in_a_slurm_cancel_message_is_the_line_s_own) {
  scenario s;
  s.file("job.log", "2021-05-27 21:32:05 iteration 4/1000 | elapsed time per iteration (ms): 128000.0\n"
                    "slurmstepd: error: *** JOB 1999616 ON node-1 CANCELLED AT 2021-05-27T21:42:11 DUE TO TIME LIMIT ***\n");
  auto d = s.run();
  bool seen = false;
  for (const auto& e : d.evidence_lines)
    if (e.text.find("CANCELLED AT") != std::string::npos) {
      seen = true;
      EXPECT_EQ(e.ts, "2021-05-27 21:42:11.000");  // not 21:32:05 (inherited), and not marked so
    }
  EXPECT_TRUE(seen);
}

// An exception's facts: the deepest frame of the user's code, not a library's, and for a DataLoader worker's
// exception re-raised in the main process, the worker's own exception ("Original Traceback").
TEST(correlate, an_exception_names_the_user_frame_and_the_worker_s_own_exception) {
  scenario s;
  s.file("rank2.log",
         "Traceback (most recent call last):\n"
         "  File \"/home/u/proj/train.py\", line 65, in main\n"
         "    for step, (x, y) in enumerate(loader):\n"
         "  File \"/usr/lib/python3/dist-packages/torch/_utils.py\", line 543, in reraise\n"
         "    raise exception\n"
         "KeyError: Caught KeyError in DataLoader worker process 1.\n"
         "Original Traceback (most recent call last):\n"
         "  File \"/usr/lib/python3/dist-packages/torch/utils/data/_utils/worker.py\", line 302, in _worker_loop\n"
         "    data = fetcher.fetch(index)\n"
         "  File \"/home/u/proj/data.py\", line 39, in __getitem__\n"
         "    return torch.tensor(rec[\"tokens\"]), rec[\"label\"]\n"
         "                                        ~~~^^^^^^^^^\n"
         "KeyError: 'label'\n");
  auto d = s.run();
  ASSERT_EQ(d.verdict, ff::correlate::verdict::failure);
  ASSERT_EQ(d.facts.size(), 2u);
  EXPECT_EQ(d.facts[0], "the exception behind it: KeyError: 'label'");
  EXPECT_EQ(d.facts[1], "raised at data.py:39 in __getitem__: return torch.tensor(rec[\"tokens\"]), rec[\"label\"]");
  // "During handling": the first exception stays the cause; the later traceback gives only the user's frame.
  s.file("rank2.log",
         "Traceback (most recent call last):\n"
         "  File \"/usr/lib/python3/dist-packages/torch/serialization.py\", line 650, in _save\n"
         "    zip_file.write_record(name, storage.data_ptr(), num_bytes)\n"
         "RuntimeError: [enforce fail at inline_container.cc:445] . PytorchStreamWriter failed writing file data/0: file write failed\n"
         "\n"
         "During handling of the above exception, another exception occurred:\n"
         "\n"
         "Traceback (most recent call last):\n"
         "  File \"/home/u/proj/train.py\", line 24, in save_checkpoint\n"
         "    torch.save(state, path)\n"
         "RuntimeError: [enforce fail at inline_container.cc:325] . unexpected pos 640 vs 586\n");
  d = s.run();
  ASSERT_EQ(d.facts.size(), 1u);
  EXPECT_EQ(d.facts[0], "raised at train.py:24 in save_checkpoint: torch.save(state, path)");
}

// Run facts fill the steps: the checkpoint directory the run wrote to (not $CKPT_DIR), the script a
// traceback ran (not train.py, the template's fallback); the ranks seen are not the processes per node (an
// excerpt may show some of them), so that stays the fallback.
TEST(correlate, run_facts_fill_the_verify_commands) {
  scenario s;
  std::string log;
  for (int r = 0; r < 4; ++r) log += "[default" + std::to_string(r) + "]:rank=" + std::to_string(r) + " INFO epoch 0 step 10 loss 0.5\n";
  log += "[default0]:2026-11-30 02:14:40,828 rank=0 INFO saved checkpoint /scratch/u/ckpt/epoch_001.pt (39.1 KiB)\n"
         "[default0]:Traceback (most recent call last):\n"
         "[default0]:  File \"/home/u/proj/train.py\", line 46, in <module>\n"
         "[default0]:    save_checkpoint(model, opt, epoch)\n"
         "[default0]:  File \"/usr/lib/python3/dist-packages/torch/serialization.py\", line 650, in _save\n"
         "[default0]:    zip_file.write_record(name, storage.data_ptr(), num_bytes)\n"
         "[default0]:OSError: [Errno 28] No space left on device\n";
  s.file("console.log", log);
  auto d = s.run();
  ASSERT_EQ(d.kind, "disk_full_checkpoint");
  ASSERT_FALSE(d.verify.empty());
  EXPECT_EQ(d.verify[0].substr(0, d.verify[0].find("  #")), "df -h /scratch/u/ckpt ");
  // No path in the log: the variable, explained under "where".
  s.file("console.log", "[default0]:OSError: [Errno 28] No space left on device\n");
  d = s.run();
  ASSERT_FALSE(d.verify.empty());
  EXPECT_EQ(d.verify[0].rfind("df -h $CKPT_DIR", 0), 0u) << d.verify[0];

  s.file("console.log",
         "[default0]:Traceback (most recent call last):\n"
         "[default0]:  File \"/home/u/proj/finetune.py\", line 120, in <module>\n"
         "[default0]:    main()\n"
         "[default0]:  File \"/home/u/proj/data.py\", line 39, in __getitem__\n"
         "[default0]:    return rec[\"label\"]\n"
         "[default0]:KeyError: 'label'\n"
         "[default1]:step 3\n[default2]:step 3\n");
  d = s.run();
  ASSERT_EQ(d.signature, "py_keyerror");
  bool rerun = false;
  for (const auto& v : d.verify) rerun = rerun || v.find("torchrun --nproc_per_node 2 /home/u/proj/finetune.py;") != std::string::npos;
  EXPECT_TRUE(rerun) << (d.verify.empty() ? "" : d.verify[0]);
}

// A time limit's report says how long the run needed, from the last progress line's own figures.
TEST(correlate, a_time_limit_says_how_long_the_run_needed) {
  scenario s;
  s.file("slurm-1999616.out",
         " iteration        3/    1000 | elapsed time per iteration (ms): 128642.7 | lm loss: 4.075232E+01 |\n"
         " iteration        4/    1000 | elapsed time per iteration (ms): 127766.0 | lm loss: 3.899556E+01 |\n"
         "slurmstepd: error: *** JOB 1999616 ON node-a CANCELLED AT 2021-05-27T21:42:11 DUE TO TIME LIMIT ***\n");
  auto d = s.run();
  ASSERT_EQ(d.kind, "job_time_limit");
  ASSERT_EQ(d.facts.size(), 1u);
  EXPECT_EQ(d.facts[0], "the last progress line: step 4 of 1000 at 128 s per step; the whole run needs about 35.5 h, and the steps "
                        "left about 35.3 h more");
  // No progress line: no fact (never a guess).
  s.file("slurm-1999616.out", "slurmstepd: error: *** JOB 1999616 ON node-a CANCELLED AT 2021-05-27T21:42:11 DUE TO TIME LIMIT ***\n");
  EXPECT_TRUE(s.run().facts.empty());
}

// The script a verify step reruns is the traceback's file at module level; python -c's "<string>" is no file,
// so the step keeps its fallback (issue 46: a verify command runs as printed).
TEST(correlate, verify_reruns_the_script_a_traceback_names_but_never_string) {
  auto oom = [](const std::string& file) {
    return "Traceback (most recent call last):\n"
           "  File \"" + file + "\", line 7, in <module>\n"
           "    y = model(x)\n"
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 3.94 GiB is free.\n";
  };
  auto rerun = [](const ff::correlate::diagnosis& d) {
    for (const auto& v : d.verify)
      if (v.find("CUDA out of memory") != std::string::npos) return v;
    return std::string();
  };
  scenario s;
  s.file("rank0.log", oom("<string>"));
  auto d = s.run();
  ASSERT_EQ(d.verdict, ff::correlate::verdict::failure);
  EXPECT_NE(rerun(d).find(" train.py 2>&1"), std::string::npos) << rerun(d);
  s.file("rank0.log", oom("/home/u/proj/finetune.py"));
  d = s.run();
  EXPECT_NE(rerun(d).find(" /home/u/proj/finetune.py 2>&1"), std::string::npos) << rerun(d);
}

// Issue 43, found2 families: what the lines alone say when they are all the log holds.
namespace {
ff::correlate::diagnosis diagnose_one(const std::string& text) {
  scenario s;
  s.file("console.log", text);
  return s.run();
}
}  // namespace

// UCX's signal handler line with its prefix peeled, and a rank's own SIGBUS as the launchers report it: NCCL's
// /dev/shm segments beyond what the tmpfs backs; a DataLoader worker's bus error keeps its own kind.
TEST(correlate, a_ranks_own_sigbus_is_shared_memory_beyond_dev_shm) {
  auto d = diagnose_one("[8d6bf97c3bf4:3039 :0:3095] Caught signal 7 (Bus error: nonexistent physical address)\n"
                        "==== backtrace (tid:   3095) ====\n"
                        " 2 0x000000000007587d ncclGroupEnd()  ???:0\n"
                        " 4 0x0000000000059e97 ncclGetUniqueId()  ???:0\n"
                        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n");
  EXPECT_EQ(d.verdict, ff::correlate::verdict::failure);
  EXPECT_EQ(d.kind, "nccl_shm_unavailable");
  EXPECT_EQ(d.signature, "host_process_sigbus_shm");
  ASSERT_FALSE(d.evidence_lines.empty());
  EXPECT_EQ(d.evidence_lines.front().text.rfind("Caught signal 7", 0), 0u) << d.evidence_lines.front().text;
  EXPECT_EQ(d.evidence_lines.front().host.value_or(""), "8d6bf97c3bf4");
  d = diagnose_one("[2023-07-20 15:45:13,980] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 3966\n"
                   "[2023-07-20 15:45:14,103] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python3', '-u', 'main.py', '--local_rank=1'] exits with return code = -7\n");
  EXPECT_EQ(d.kind, "nccl_shm_unavailable");
  d = diagnose_one("[8d6bf97c3bf4:3039 :0:3095] Caught signal 7 (Bus error: nonexistent physical address)\n"
                   "RuntimeError: DataLoader worker (pid 16417) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory.\n");
  EXPECT_EQ(d.kind, "dataloader_shm_bus_error");
  d = diagnose_one("[node-1:3039 :0:3095] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x8)\n");
  EXPECT_NE(d.kind, "nccl_shm_unavailable");
}

// DeepSpeed's (and torch.distributed.launch's) sigkill_handler kills the other workers after one failed: not a
// cancel. Without the return-code line the log says only that a worker died; with "received SIGTERM" it was a stop.
TEST(correlate, a_launchers_own_kill_of_its_workers_is_not_a_cancel) {
  auto d = diagnose_one("[2023-07-20 15:45:13,980] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 3966\n"
                        "[2023-07-20 15:45:13,981] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 3967\n");
  EXPECT_NE(d.kind, "job_cancelled");
  EXPECT_NE(d.verdict, ff::correlate::verdict::healthy);
  bool named = false;
  for (const auto& c : d.collateral) named = named || c.signature == "launch_sigkill_handler_killing_workers";
  EXPECT_TRUE(named || d.signature == "launch_sigkill_handler_killing_workers");
  d = diagnose_one("[2023-07-20 15:45:13,980] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 3966\n"
                   "[2023-07-20 15:45:13,981] [INFO] [launch.py:330:sigkill_handler] Main process received SIGTERM, exiting\n");
  EXPECT_EQ(d.kind, "job_cancelled");
}

// NCCL's INFO-level error return chain from the network transport, the only failure in the log.
TEST(correlate, an_nccl_return_chain_from_the_net_transport_is_the_interface) {
  auto d = diagnose_one("dgxa100:1050:1315 [0] NCCL INFO Channel 15/0 : 0[90000] -> 1[1000] [send] via NET/Socket/7\n"
                        "dgxa100:1050:1316 [0] NCCL INFO include/net.h:25 -> 2\n"
                        "dgxa100:1050:1316 [0] NCCL INFO transport/net.cc:515 -> 2\n");
  EXPECT_EQ(d.verdict, ff::correlate::verdict::failure);
  EXPECT_EQ(d.kind, "nccl_network_interface");
  // The same chain before the run's successful end is survived.
  d = diagnose_one("node-1:1:2 [0] NCCL INFO transport/net.cc:515 -> 2\n"
                   "INFO:torch.distributed.elastic.agent.server.api:[default] worker group successfully finished. Waiting 300 seconds for other agents to finish.\n");
  EXPECT_EQ(d.verdict, ff::correlate::verdict::healthy);
  // Another file's chain (error 6, a peer gone) is not read as the interface.
  d = diagnose_one("node-1:1:2 [0] NCCL INFO transport/net.cc:1302 -> 6\n");
  EXPECT_NE(d.kind, "nccl_network_interface");
}

// A c10d name-resolution warning as the whole log: the rendezvous host does not resolve.
TEST(correlate, a_gai_error_alone_is_an_unreachable_rendezvous) {
  auto d = diagnose_one("[W socket.cpp:601] [c10d] The IPv6 network addresses of (user, 53821) cannot be retrieved (gai error: -3 - Temporary failure in name resolution).\n");
  EXPECT_EQ(d.verdict, ff::correlate::verdict::failure);
  EXPECT_EQ(d.kind, "rendezvous_unreachable");
  d = diagnose_one("[W socket.cpp:601] [c10d] The IPv6 network addresses of (node-1, 53821) cannot be retrieved (gai error: -9 - Address family for hostname not supported).\n");
  EXPECT_NE(d.kind, "rendezvous_unreachable");
}

// A rank named inside the text: "[1] ... retrieving ncclUniqueId from [0]": rank 0 went away first.
TEST(correlate, the_rank_a_store_get_waited_for_is_the_first_to_fail) {
  auto d = diagnose_one("[rank1]: torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] "
                        "via c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer\n");
  EXPECT_EQ(d.verdict, ff::correlate::verdict::failure);
  EXPECT_EQ(d.initiating_rank, std::optional<int>(0)) << d.initiating_rule;
}

// Two ranks' tracebacks interleaved after a cut mismatch report: broadcast on one, barrier on the other.
TEST(correlate, interleaved_tracebacks_in_two_calls_are_a_count_mismatch) {
  auto d = diagnose_one(
      "    return _sync_ddp(result, group=group, reduce_op=reduce_op)\n"
      "  File \"/env/lightning_fabric/utilities/distributed.py\", line 220, in _sync_ddp\n"
      "    broadcast(object_sizes_tensor, src=src, group=group)\n"
      "  File \"/env/torch/distributed/c10d_logger.py\", line 47, in wrapper\n"
      "    return func(*args, **kwargs)\n"
      "  File \"/env/torch/distributed/distributed_c10d.py\", line 1906, in broadcast\n"
      "    torch.distributed.barrier(group=group)\n"
      "    torch.distributed.barrier(group=group)\n"
      "    work = default_pg.broadcast([tensor], opts)\n"
      "RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=21, "
      "OpType=BROADCAST, TensorShape=[1], TensorDtypes=Long, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda\n");
  EXPECT_EQ(d.verdict, ff::correlate::verdict::failure);
  EXPECT_EQ(d.kind, "collective_count_mismatch") << d.kind_reason;
}
