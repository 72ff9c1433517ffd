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

finding hit(const std::string& name, std::uint64_t line_no, std::string text, std::optional<int> rank = std::nullopt,
            ff::match::fields captured = {}, std::string source = "part2.log") {
  return ff::testing::make_finding(name, line_no, std::move(text), rank, std::move(captured), std::move(source));
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

// --- store_key_never_set (family 2: a store read timed out while the source rank worked alone) ---------------

namespace found_fam {
inputs nccl_id_timeout(int waiting, int source, const std::string& error = "Socket Timeout") {
  inputs in;
  in.findings.push_back(hit("torch_store_get_nccl_id_timeout", 1,
                            "[" + std::to_string(waiting) + "] is setting up NCCL communicator and retrieving ncclUniqueId from [" +
                                std::to_string(source) + "] via c10d key-value store by key '0', but store->get('0') got error: " + error,
                            waiting, {{"rank", std::to_string(waiting)}, {"peer_rank", std::to_string(source)}, {"error", error}}, "train.log"));
  return in;
}
std::optional<rules::inference> infer_by(const inputs& in, std::string_view rule) {
  auto ctx = rules::make_context(in, builtin());
  for (const auto& r : rules::inference_rules())
    if (r.name == rule) return r.fn(ctx);
  ADD_FAILURE() << "no rule " << rule;
  return std::nullopt;
}
}  // namespace found_fam

TEST(rule_store_key_never_set, the_source_rank_that_never_set_the_key_is_named) {
  auto inf = infer_by(nccl_id_timeout(7, 0), "store_key_never_set");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->entry, "timeout_absent_rank0");
  EXPECT_EQ(inf->rank.value_or(-1), 0);
}

TEST(rule_store_key_never_set, a_source_with_its_own_error_or_failed_exit_is_not_late) {
  {
    auto in = nccl_id_timeout(7, 0);
    in.findings.push_back(hit("py_typeerror", 5, "TypeError: unsupported operand", 0, {}, "train.log"));
    EXPECT_FALSE(infer_by(in, "store_key_never_set"));
  }
  {
    auto in = nccl_id_timeout(7, 0);
    ff::extract::exit_record e;
    e.rank = 0;
    e.exitcode = -9;
    e.signal = "SIGKILL";
    in.exits.push_back(e);
    EXPECT_FALSE(infer_by(in, "store_key_never_set"));
  }
}

TEST(rule_store_key_never_set, a_dead_store_is_not_a_timeout) {
  // "Connection reset by peer": the store (or its host) went away; torch_store_get_error, not the timeout one.
  auto r = diagnose_text("store-reset",
                         "torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via "
                         "c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer\n");
  EXPECT_NE(r.diag.kind, "rank0_exclusive_work_timeout");
}

TEST(rule_store_key_never_set, end_to_end_on_the_line_pytorch_prints) {
  auto r = diagnose_text("store-timeout",
                         "[rank3]: torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] "
                         "via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout\n"
                         "[rank3]: Exception raised from recvBytes at ../torch/csrc/distributed/c10d/Utils.hpp:604 (most recent call first):\n");
  EXPECT_EQ(r.diag.kind, "rank0_exclusive_work_timeout");
  EXPECT_EQ(r.diag.initiating_rank.value_or(-1), 0);
  EXPECT_EQ(r.diag.rule, "store_key_never_set");
}

TEST(signature_store_socket_wait_timeout, its_wait_is_read_and_a_run_that_went_on_survives_it) {
  auto r = diagnose_text("store-wait-survived",
                         "[rank1]:[W516 14:34:56.854597329 socket.cpp:489] [c10d] waitForInput: socket SocketImpl(fd=79, addr=[localhost]:41170, "
                         "remote=[localhost]:29500) timed out after 1800000ms\n"
                         "[rank1]:[I516 14:35:10.000000000 train.py:10] step 5 loss 1.0\n"
                         "[rank1]:[I516 14:36:10.000000000 train.py:10] step 6 loss 0.9\n");
  EXPECT_NE(r.diag.verdict, ff::correlate::verdict::failure);
}

// --- loss_scale_collapsed (family 5: a scale halved toward its floor with no "at minimum" line) --------------

namespace found_fam {
std::string ds_overflow(long from, long to) {
  return "[2023-06-07 22:16:00,018] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: " +
         std::to_string(from) + ", reducing to " + std::to_string(to) + "\n";
}
inputs overflows(const std::vector<long>& scales) {
  inputs in;
  std::uint64_t n = 1;
  for (long s : scales)
    in.findings.push_back(hit("train_fp16_overflow_skip", n++, "OVERFLOW! Rank 0 Skipping step. Attempted loss scale: " + std::to_string(2 * s) + ", reducing to " + std::to_string(s),
                              std::nullopt, {{"scale", std::to_string(s)}}, "train.log"));
  return in;
}
}  // namespace found_fam

TEST(rule_loss_scale_collapsed, a_run_of_halvings_below_the_bound_is_the_cause) {
  auto inf = infer_by(overflows({32, 16, 8, 4, 2}), "loss_scale_collapsed");
  ASSERT_TRUE(inf);
  EXPECT_EQ(inf->entry, "loss_scale_collapsed");
  EXPECT_EQ(inf->findings.size(), 5u);
}

TEST(rule_loss_scale_collapsed, settling_from_a_high_initial_scale_is_not) {
  // DeepSpeed's first steps: 2^32 halved a few times (cogvideo-233's warm-up).
  EXPECT_FALSE(infer_by(overflows({2147483648L, 1073741824L, 536870912L, 268435456L}), "loss_scale_collapsed"));
}

// fairseq starts at 2^7: its first overflows in a log cut early (a live run) are its search, not a collapse.
TEST(rule_loss_scale_collapsed, a_small_initial_scale_settling_is_not) {
  EXPECT_FALSE(infer_by(overflows({64, 32, 16}), "loss_scale_collapsed"));
}

TEST(rule_loss_scale_collapsed, two_halvings_or_a_scale_that_grew_back_are_not_a_collapse) {
  EXPECT_FALSE(infer_by(overflows({16, 8}), "loss_scale_collapsed"));
  EXPECT_FALSE(infer_by(overflows({64, 32, 16, 256, 128}), "loss_scale_collapsed"));  // it grew in between: clean steps
}

TEST(rule_loss_scale_collapsed, end_to_end_and_a_run_that_trained_on_survives) {
  std::string collapse = ds_overflow(64, 32) + ds_overflow(32, 16) + ds_overflow(16, 8) + ds_overflow(8, 4) + ds_overflow(4, 2);
  auto r = diagnose_text("scale-collapse", collapse);
  EXPECT_EQ(r.diag.kind, "fp16_loss_scale_overflow");
  EXPECT_EQ(r.diag.rule, "loss_scale_collapsed");
  auto ok = diagnose_text("scale-collapse-survived",
                          collapse + "[2023-06-07 22:30:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=400, skipped=5, lr=[5e-05], mom=[(0.9, 0.999)]\n"
                                     "{'train_runtime': 1234.5, 'train_samples_per_second': 12.96, 'train_steps_per_second': 1.62, 'train_loss': 0.4567, 'epoch': 3.0}\n");
  EXPECT_NE(ok.diag.rule, "loss_scale_collapsed");
}

// --- cuda_gdb_api_status_notice (family 6: cuda-gdb's notes of statuses the caller handles) ------------------

TEST(signature_cuda_gdb_api_status_notice, peer_access_statuses_are_notes_other_codes_still_look_wrong) {
  const std::string head = "[New Thread 0x7fffe6d73700 (LWP 12424)]\n";
  auto ok = diagnose_text("cudagdb-peer", head + "warning: Cuda API error detected: cudaDeviceEnablePeerAccess returned (0x2c0)\n"
                                                 "warning: Cuda API error detected: cudaGetLastError returned (0x2c0)\n");
  EXPECT_EQ(ok.diag.verdict, ff::correlate::verdict::healthy);
  auto bad = diagnose_text("cudagdb-oom", head + "warning: Cuda API error detected: cudaMalloc returned (0x2)\n");
  EXPECT_NE(bad.diag.verdict, ff::correlate::verdict::healthy);
}

TEST(signature_cuda_gdb_api_status_notice, the_applications_own_error_after_the_notes_is_the_cause) {
  auto r = diagnose_text("cudagdb-then-nccl",
                         "warning: Cuda API error detected: cudaDeviceEnablePeerAccess returned (0x2c0)\n"
                         "node-1:12414:12424 [0] transport/p2p.cc:136 NCCL WARN Cuda failure 'peer access is not supported between these two devices'\n");
  EXPECT_EQ(r.diag.verdict, ff::correlate::verdict::failure);
}

// --- event.advisory (Slurm task/cgroup's "Exceeded step memory limit at some point.": a note, not a kill) --------

TEST(rule_advisory_note, alone_it_is_survived_with_a_kill_or_a_failed_task_it_is_the_cause) {
  auto ok = diagnose_text("slurm-note-alone", "52428800 bytes (52 MB) copied, 0.459204 s, 114 MB/s\n"
                                              "slurmstepd: Exceeded step memory limit at some point.\n");
  EXPECT_EQ(ok.diag.verdict, ff::correlate::verdict::healthy);
  auto task = diagnose_text("slurm-note-task-killed", "step 10 loss 2.3\n"
                                                      "srun: error: node1: task 0: Killed\n"
                                                      "slurmstepd: error: Exceeded step memory limit at some point.\n");
  EXPECT_EQ(task.diag.verdict, ff::correlate::verdict::failure);
  EXPECT_EQ(task.diag.kind, "host_oom_sigkill");
  EXPECT_EQ(task.diag.signature, "slurm_memory_limit_reached_note");
  // The kill forms stay the other signature's, and win over the note on the same run.
  auto kill = diagnose_text("slurm-kill", "slurmstepd: error: Job 41176 exceeded memory limit (3940736 > 2068480), being killed\n"
                                          "slurmstepd: error: Exceeded job memory limit at some point.\n");
  EXPECT_EQ(kill.diag.signature, "slurm_exceeded_memory_limit");
}

TEST(rule_advisory_note, a_survived_error_or_the_applications_own_error_does_not_make_it_the_cause) {
  // The run ended well after a survived error: the note stays a note (review finding: a survived line counted as
  // "the run failed").
  auto ok = diagnose_text("note-after-survived", "node1:100:100 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>\n"
                                                 "[rank0]: step 10/100 loss 2.31\n"
                                                 "[rank0]: ERROR: failed to upload metrics to wandb (HTTP 503)\n"
                                                 "[rank0]: step 100/100 loss 1.20\n"
                                                 "[rank0]: Training complete\n");
  EXPECT_EQ(ok.diag.verdict, ff::correlate::verdict::healthy);
  // The rank's own exception explains the failed task; the memory note does not outrank it.
  auto app = diagnose_text("note-and-keyerror", "[rank0]: Traceback (most recent call last):\n"
                                                "[rank0]:   File \"/job/train.py\", line 10, in <module>\n"
                                                "[rank0]:     batch = item['labels']\n"
                                                "[rank0]: KeyError: 'labels'\n"
                                                "srun: error: node1: task 0: Exited with exit code 1\n"
                                                "slurmstepd: error: Exceeded step memory limit at some point.\n");
  EXPECT_EQ(app.diag.kind, "rank_exception");
}

// --- the proxy service thread's lines say a peer left: alone they decide no kind ------------------------------------

TEST(signature_nccl_service_thread_peer_closed, after_a_finished_run_is_no_network_fault) {
  auto r = diagnose_text("service-thread-after-end",
                         "[rank0]: step 100/100 loss 1.20\n"
                         "[rank0]: Training complete\n"
                         "node1:2374:2994 [0] proxy.cc:1458 NCCL WARN [Service thread] Accept failed Resource temporarily unavailable\n"
                         "node1:2374:2994 [0] proxy.cc:1497 NCCL WARN [Service thread] Could not receive type from localRank 0, res=3, closed=0\n");
  EXPECT_NE(r.diag.verdict, ff::correlate::verdict::failure);
}

// --- an input with no line holding a letter or a digit is not a healthy run: nothing was read, as an empty file ---

TEST(input_blank_lines_only, is_not_read_and_never_healthy) {
  auto r = diagnose_text("blank-only", "\n   \n\t\n");
  EXPECT_FALSE(r.any_readable);
  EXPECT_EQ(r.diag.verdict, ff::correlate::verdict::undetermined);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_EQ(r.errors.back().reason, "no line with a letter or a digit");
  auto one = diagnose_text("one-line", "\nstep 1 loss 2.0\n\n");
  EXPECT_TRUE(one.any_readable);
}

// --- ib_timeout_on_every_host (kind rule: IB completion error 12 on every host before any progress) -------------

TEST(rule_ib_timeout_on_every_host, every_host_at_set_up_is_configuration_one_host_or_after_training_is_hardware) {
  const std::string a = "gpu4:35902:35977 [0] transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, vendor err 129\n";
  const std::string b = "gpu5:35917:35994 [0] transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, vendor err 129\n";
  auto both = diagnose_text("ib12-both", a + b);
  EXPECT_EQ(both.diag.kind, "nccl_env_misconfig");
  EXPECT_EQ(both.diag.rule, "ib_timeout_on_every_host");
  auto one = diagnose_text("ib12-one", "gpu4:35902:35977 [0] NCCL INFO comm 0x1 rank 0 nranks 2\ngpu5:35917:35917 [0] NCCL INFO comm 0x2 rank 1 nranks 2\n" + b);
  EXPECT_EQ(one.diag.kind, "network_hardware");
  auto later = diagnose_text("ib12-after-training", "[rank0]: step 120/5000 | loss 2.314\n" + a + b);
  EXPECT_EQ(later.diag.kind, "network_hardware");
}

// --- launcher_exit: a one-process launcher's CalledProcessError names no rank, its signal still says the end --------

TEST(rule_launcher_exit, a_rankless_only_failed_process_killed_by_sigkill_is_a_kill_of_unknown_rank) {
  const std::string tb =
      "Traceback (most recent call last):\n"
      "  File \"/usr/local/lib/python3.10/dist-packages/accelerate/commands/launch.py\", line 637, in simple_launcher\n"
      "    raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)\n";
  auto r = diagnose_text("accelerate-sigkill",
                         "Loading checkpoint shards:   0% 0/2 [00:00<?, ?it/s]\n" + tb +
                             "subprocess.CalledProcessError: Command '['/usr/bin/python3', 'train.py']' died with <Signals.SIGKILL: 9>.\n");
  EXPECT_EQ(r.diag.kind, "host_oom_sigkill");
  EXPECT_EQ(r.diag.rule, "launcher_exit");
  EXPECT_FALSE(r.diag.initiating_rank.has_value());
  // A SIGTERM says who stopped it, not why: no verdict from it.
  auto term = diagnose_text("accelerate-sigterm", tb + "subprocess.CalledProcessError: Command '['/usr/bin/python3', 'train.py']' died with <Signals.SIGTERM: 15>.\n");
  EXPECT_NE(term.diag.rule, "launcher_exit");
}

// --- uneven_planned_steps: the long rank lost its peer in backward (gloo), the short one timed out in barrier ------

TEST(rule_uneven_planned_steps, a_rank_that_lost_its_peer_in_a_collective_counts_as_blocked) {
  auto r = diagnose_text(
      "uneven-peer-closed",
      "[default0]:2026-12-07 06:20:40,543 [INFO] [rank0] dataset: 80 samples, 20 batches of 4 on this rank\n"
      "[default0]:2026-12-07 06:20:40,546 [INFO] [rank0] epoch 0 step 0/20 loss 5.6491 lr 5.00e-02\n"
      "[default1]:2026-12-07 06:20:40,539 [INFO] [rank1] dataset: 16 samples, 4 batches of 4 on this rank\n"
      "[default1]:2026-12-07 06:20:40,546 [INFO] [rank1] epoch 0 step 0/4 loss 5.6491 lr 5.00e-02\n"
      "[default1]:2026-12-07 06:20:40,747 [INFO] [rank1] epoch 0 step 2/4 loss 4.0661 lr 5.00e-02\n"
      "[default0]:2026-12-07 06:20:40,747 [INFO] [rank0] epoch 0 step 2/20 loss 4.0661 lr 5.00e-02\n"
      "[default0]:Traceback (most recent call last):\n"
      "[default0]:  File \"/tmp/job/train.py\", line 349, in <module>\n"
      "[default0]:    main()\n"
      "[default0]:  File \"/tmp/job/train.py\", line 291, in main\n"
      "[default0]:    loss.backward()\n"
      "[default0]:  File \"/usr/lib/python3/dist-packages/torch/_tensor.py\", line 488, in backward\n"
      "[default0]:    torch.autograd.backward(\n"
      "[default0]:  File \"/usr/lib/python3/dist-packages/torch/autograd/__init__.py\", line 197, in backward\n"
      "[default0]:    Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass\n"
      "[default0]:RuntimeError: [./gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:13185\n"
      "[default1]:Traceback (most recent call last):\n"
      "[default1]:  File \"/tmp/job/train.py\", line 349, in <module>\n"
      "[default1]:    main()\n"
      "[default1]:  File \"/tmp/job/train.py\", line 335, in main\n"
      "[default1]:    dist.barrier()\n"
      "[default1]:  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 3152, in barrier\n"
      "[default1]:    work.wait()\n"
      "[default1]:RuntimeError: [./gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 10000ms for recv operation to complete\n");
  EXPECT_EQ(r.diag.kind, "uneven_batches_collective_hang");
  EXPECT_EQ(r.diag.initiating_rank.value_or(-1), 1);
}

// --- fingerprint_first_differing_rank (DETAIL mismatch: the first rank in rank order that differs) -----------------

TEST(rule_fingerprint_first_differing_rank, a_named_rank_above_two_agreeing_ranks_is_the_odd_one_two_ranks_give_none) {
  const std::string fp = "CollectiveFingerPrint(SequenceNumber=101, OpType=ALLGATHER, TensorShape=[1], TensorDtypes=Long)";
  const std::string report = "[rank1]: RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: " + fp +
                             ", but Rank 7 is running collective: CollectiveFingerPrint(SequenceNumber=0, OpType=REDUCE).\n";
  auto r = diagnose_text("fp-rank7", report + "[rank7]: Traceback (most recent call last):\n");
  EXPECT_EQ(r.diag.initiating_rank.value_or(-1), 7);
  // Rank 7 never wrote a line: ranks above it may differ as well (0-1 against 2-3), so not this rule.
  auto unseen = diagnose_text("fp-rank7-unseen", report);
  EXPECT_NE(unseen.diag.initiating_rank.value_or(-1), 7);
  // Two ranks: rank 0 names rank 1 and rank 1 names rank 0; no majority, so not this rule.
  auto two = diagnose_text("fp-two", "[rank0]: RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running collective: " + fp +
                                         ", but Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=101, OpType=REDUCE).\n");
  EXPECT_NE(two.diag.initiating_rule.rfind("rank 0's check", 0), 0u);
  EXPECT_NE(two.diag.initiating_rank.value_or(-1), 1);
}

// --- orphan symptoms: torchelastic's summary of failed workers names no kind of its own ---------------------------

TEST(rule_orphan_symptoms, a_root_cause_block_cut_before_the_workers_error_is_undetermined) {
  auto r = diagnose_text("root-cause-block-cut",
                         "Root Cause (first observed failure):\n"
                         "[0]:\n"
                         "  time      : 2026-01-13_09:20:58\n"
                         "  host      : job-0-0.default.svc.cluster.local\n"
                         "  rank      : 0 (local_rank: 0)\n"
                         "  exitcode  : 1 (pid: 1016)\n"
                         "  error_file: /tmp/torchelastic_ey36uo59/attempt_0/0/error.json\n"
                         "  traceback : Traceback (most recent call last):\n"
                         "    File \"/app/train.py\", line 140, in set_determinism\n"
                         "      torch.distributed.broadcast(seed_tensor, src=0)\n");
  EXPECT_EQ(r.diag.verdict, ff::correlate::verdict::undetermined);
  EXPECT_NE(r.diag.kind, "rank_exception");
}
