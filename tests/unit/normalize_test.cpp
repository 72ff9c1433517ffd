// Unit tests for stage 2 (normalize): the built-in prefix catalogue on the example lines of
// ../shared/reference/log_formats.md §0.1-§0.3 and §1, timestamp parsing, and catalogue loading.
#include <gtest/gtest.h>
#include <re2/re2.h>

#include "test_support.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "firstfault/kb.hpp"
#include "firstfault/normalize.hpp"

using ff::normalize::line_meta;
using ff::normalize::parse_timestamp;
using ff::normalize::prefix_catalog;
using ff::normalize::timestamp;

namespace {

// The catalogue built from the library's own kb/_prefixes files, loaded once.
const prefix_catalog* builtin_catalog() {
  static std::string load_error;
  static prefix_catalog* cat = [] () -> prefix_catalog* {
    auto lib = ff::kb::library::load(true, {});
    if (!lib) {
      load_error = "library: " + lib.error().message;
      return nullptr;
    }
    if (lib.value().prefix_files.empty()) {
      load_error = "library has no prefix files";
      return nullptr;
    }
    auto c = prefix_catalog::load(lib.value().prefix_files);
    if (!c) {
      load_error = "prefix catalogue: " + c.error().message;
      return nullptr;
    }
    return new prefix_catalog(std::move(c.value()));
  }();
  if (!cat) ADD_FAILURE() << load_error;
  return cat;
}

std::vector<std::string> names(const line_meta& m) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < m.n_prefixes; ++i) out.push_back(builtin_catalog()->defs()[m.prefixes[i]].name);
  return out;
}

}  // namespace

#define NORMALIZE(line, meta)                      \
  const prefix_catalog* cat = builtin_catalog();   \
  ASSERT_NE(cat, nullptr);                         \
  line_meta meta;                                  \
  const bool peeled = cat->normalize(line, meta);  \
  (void)peeled

TEST(prefix_catalog, builtin_catalogue_loads_with_known_prefixes) {
  const prefix_catalog* cat = builtin_catalog();
  ASSERT_NE(cat, nullptr);
  std::vector<std::string> n;
  for (const auto& d : cat->defs()) n.push_back(d.name);
  for (const char* want : {"k8s_rfc3339", "syslog_bsd", "dmesg_uptime", "dmesg_ctime", "kmsg_raw", "pdsh_host",
                           "srun_label", "mpirun_tag", "mpirun_timestamp_tag", "torchrun_tee",
                           "torchrun_template_rank_local", "torchrun_rank_template", "c10_header_time", "c10_header",
                           "glog_header", "nccl_header", "pg_rank_tag"})
    EXPECT_NE(std::find(n.begin(), n.end(), want), n.end()) << want;
}

// ------------------------------------------------------------------ §0.1 collectors and launchers

TEST(normalize_collector, k8s_rfc3339) {
  std::string line = "2025-11-24T03:20:21.001125857Z hello world";
  NORMALIZE(line, m);
  EXPECT_TRUE(peeled);
  EXPECT_EQ(names(m), (std::vector<std::string>{"k8s_rfc3339"}));
  EXPECT_EQ(m.body, "hello world");
  ASSERT_TRUE(m.ts.has_value());
  EXPECT_EQ(m.ts->kind, timestamp::clock::wall);
  EXPECT_TRUE(m.ts->has_date);
  EXPECT_NEAR(m.ts->seconds, 1763954421.001125857, 1e-5);
  EXPECT_FALSE(m.host.has_value());
  EXPECT_FALSE(m.rank.has_value());
}

TEST(normalize_collector, journald_syslog_host) {
  std::string line = "Feb 14 05:03:41 node-01 kernel: mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE";
  NORMALIZE(line, m);
  EXPECT_EQ(names(m), (std::vector<std::string>{"syslog_bsd"}));
  EXPECT_EQ(m.host.value_or(""), "node-01");
  EXPECT_EQ(m.body, "mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE");
  ASSERT_TRUE(m.ts.has_value());
  EXPECT_FALSE(m.ts->has_date);
  EXPECT_DOUBLE_EQ(m.ts->seconds, 1771045421.0);  // default year 2026
}

TEST(normalize_collector, syslog_with_program_pid) {
  std::string line = "Feb 14 05:03:41 node-02 python3[1234]: RuntimeError: CUDA error";
  NORMALIZE(line, m);
  EXPECT_EQ(m.host.value_or(""), "node-02");
  EXPECT_EQ(m.body, "RuntimeError: CUDA error");
}

TEST(normalize_collector, dmesg_uptime_clock) {
  std::string line = "[1084456.074562] NVRM: Xid (PCI:0000:09:00): 79, pid=0, GPU has fallen off the bus.";
  NORMALIZE(line, m);
  EXPECT_EQ(names(m), (std::vector<std::string>{"dmesg_uptime"}));
  EXPECT_EQ(m.body, "NVRM: Xid (PCI:0000:09:00): 79, pid=0, GPU has fallen off the bus.");
  ASSERT_TRUE(m.ts.has_value());
  EXPECT_EQ(m.ts->kind, timestamp::clock::uptime);
  EXPECT_NEAR(m.ts->seconds, 1084456.074562, 1e-6);
}

TEST(normalize_collector, dmesg_uptime_padded) {
  std::string line = "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0";
  NORMALIZE(line, m);
  EXPECT_EQ(m.body, "NVRM: The NVIDIA GPU 0000:b3:00.0");
  ASSERT_TRUE(m.ts.has_value());
  EXPECT_EQ(m.ts->kind, timestamp::clock::uptime);
  EXPECT_NEAR(m.ts->seconds, 1843.308145, 1e-6);
}

TEST(normalize_collector, dmesg_T_ctime) {
  std::string line = "[Wed Jun  7 19:32:16 2023] NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper";
  NORMALIZE(line, m);
  EXPECT_EQ(names(m), (std::vector<std::string>{"dmesg_ctime"}));
  EXPECT_EQ(m.body, "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper");
  ASSERT_TRUE(m.ts.has_value());
  EXPECT_EQ(m.ts->kind, timestamp::clock::wall);
  EXPECT_TRUE(m.ts->has_date);
  EXPECT_DOUBLE_EQ(m.ts->seconds, 1686166336.0);
}

TEST(normalize_collector, dev_kmsg_record) {
  std::string line = "6,3964,206764307,-;nvidia-nvswitch2: open (major=510)";
  NORMALIZE(line, m);
  EXPECT_EQ(names(m), (std::vector<std::string>{"kmsg_raw"}));
  EXPECT_EQ(m.body, "nvidia-nvswitch2: open (major=510)");
  ASSERT_TRUE(m.ts.has_value());
  EXPECT_EQ(m.ts->kind, timestamp::clock::uptime);
  EXPECT_NEAR(m.ts->seconds, 206.764307, 1e-6);
}

TEST(normalize_launcher, pdsh_host) {
  std::string line = "worker-0: worker-0:19491:21059 [7] NCCL INFO Connected all rings";
  NORMALIZE(line, m);
  EXPECT_EQ(names(m), (std::vector<std::string>{"pdsh_host", "nccl_header"}));
  EXPECT_EQ(m.host.value_or(""), "worker-0");
  EXPECT_EQ(m.body, "NCCL INFO Connected all rings");
  EXPECT_FALSE(m.rank.has_value());
  EXPECT_FALSE(m.local_rank.has_value());
}

TEST(normalize_launcher, srun_label) {
  std::string line = "3: [rank3]: Traceback (most recent call last):";
  NORMALIZE(line, m);
  EXPECT_EQ(names(m), (std::vector<std::string>{"srun_label", "torchrun_rank_template"}));
  EXPECT_EQ(m.task.value_or(-1), 3);
  EXPECT_EQ(m.rank.value_or(-1), 3);
  EXPECT_EQ(m.body, "Traceback (most recent call last):");
}

TEST(normalize_launcher, srun_label_task_is_not_rank) {
  std::string line = "12: hello";
  NORMALIZE(line, m);
  EXPECT_EQ(m.task.value_or(-1), 12);
  EXPECT_FALSE(m.rank.has_value());
  EXPECT_EQ(m.body, "hello");
}

TEST(normalize_launcher, mpirun_tag_output) {
  // [5] is NCCL's cudaDev: the rank comes from mpirun's [jobid,rank].
  std::string line = "[1,3]<stdout>:node-01:1850304:1881110 [5] transport.cc:154 NCCL WARN Cuda failure 'invalid argument'";
  NORMALIZE(line, m);
  EXPECT_EQ(names(m), (std::vector<std::string>{"mpirun_tag", "nccl_header"}));
  EXPECT_EQ(m.rank.value_or(-1), 3);
  EXPECT_EQ(m.host.value_or(""), "node-01");
  EXPECT_EQ(m.body, "transport.cc:154 NCCL WARN Cuda failure 'invalid argument'");
  EXPECT_FALSE(m.ts.has_value());
}

TEST(normalize_launcher, mpirun_timestamp_tag_output) {
  std::string line =
      "Fri Aug 11 12:31:45 2023[1,3]<stdout>:node-01:1850304:1881110 [3] transport.cc:154 NCCL WARN Cuda failure 'invalid argument'";
  NORMALIZE(line, m);
  EXPECT_EQ(names(m).front(), "mpirun_timestamp_tag");
  EXPECT_EQ(m.rank.value_or(-1), 3);
  EXPECT_EQ(m.host.value_or(""), "node-01");
  EXPECT_EQ(m.body, "transport.cc:154 NCCL WARN Cuda failure 'invalid argument'");
  ASSERT_TRUE(m.ts.has_value());
  EXPECT_TRUE(m.ts->has_date);
  EXPECT_DOUBLE_EQ(m.ts->seconds, 1691757105.0);
}

TEST(normalize_launcher, torchrun_tee_local_rank_only) {
  std::string line = "[default3]:python: src/psm2_nccl_net.c:756: mq_progress_loop: Assertion 'r->used' failed.";
  NORMALIZE(line, m);
  EXPECT_EQ(names(m), (std::vector<std::string>{"torchrun_tee"}));
  EXPECT_EQ(m.local_rank.value_or(-1), 3);
  EXPECT_FALSE(m.rank.has_value());
  EXPECT_EQ(m.body, "python: src/psm2_nccl_net.c:756: mq_progress_loop: Assertion 'r->used' failed.");
}

TEST(normalize_launcher, torchrun_custom_template_role_local_rank_rank) {
  std::string line = "[trainer0|4]:Traceback (most recent call last):";
  NORMALIZE(line, m);
  EXPECT_EQ(names(m), (std::vector<std::string>{"torchrun_template_rank_local"}));
  EXPECT_EQ(m.local_rank.value_or(-1), 0);
  EXPECT_EQ(m.rank.value_or(-1), 4);
  EXPECT_EQ(m.body, "Traceback (most recent call last):");
}

TEST(normalize_launcher, rank_tag) {
  std::string line = "[rank3]: creating model";
  NORMALIZE(line, m);
  EXPECT_EQ(names(m), (std::vector<std::string>{"torchrun_rank_template"}));
  EXPECT_EQ(m.rank.value_or(-1), 3);
  EXPECT_FALSE(m.local_rank.has_value());
  EXPECT_EQ(m.body, "creating model");
}

TEST(normalize_launcher, rank_tag_keeps_traceback_indentation) {
  // "[rankN]: " is followed by the indented source line; only one space belongs to the tag.
  std::string line = "[rank1]:     raise RuntimeError(msg)";
  NORMALIZE(line, m);
  EXPECT_EQ(m.rank.value_or(-1), 1);
  EXPECT_EQ(m.body, "    raise RuntimeError(msg)");
}

TEST(normalize_launcher, torchx_replica) {
  std::string line =
      "trainer/0 [1]:[W socket.cpp:558] [c10d] The client socket has failed to connect to [::ffff:10.0.0.5]:40323 (errno: 110 - Connection timed out).";
  NORMALIZE(line, m);
  EXPECT_EQ(m.local_rank.value_or(-1), 1);
  EXPECT_EQ(m.level, 'W');
  EXPECT_EQ(m.body,
            "The client socket has failed to connect to [::ffff:10.0.0.5]:40323 (errno: 110 - Connection timed out).");
}

// Determined's task logs (master/pkg/model/task.go, TaskLog.Message): time, container, "[rank=N]", "||", level.
TEST(normalize_collector, determined_task_log_rank) {
  std::string line = "[2024-02-27T21:35:28.718657Z] fa88a9df [rank=4] || [E ProcessGroupNCCL.cpp:828] [Rank 4] Watchdog caught collective operation timeout";
  NORMALIZE(line, m);
  EXPECT_EQ(names(m).front(), "determined_task_log");
  EXPECT_EQ(m.rank.value_or(-1), 4);
  EXPECT_EQ(m.level, 'E');
  ASSERT_TRUE(m.ts.has_value());
  EXPECT_EQ(m.ts->kind, timestamp::clock::wall);
  EXPECT_EQ(m.body, "Watchdog caught collective operation timeout");
}

TEST(normalize_collector, determined_task_log_keeps_traceback_indentation_and_master_lines) {
  {
    std::string line = "[2024-02-27T21:35:28.727188Z] 0badc0de [rank=12] ||     self.model = self.context.wrap_model(m)";
    NORMALIZE(line, m);
    EXPECT_EQ(m.rank.value_or(-1), 12);
    EXPECT_EQ(m.body, "    self.model = self.context.wrap_model(m)");
  }
  {
    // the master's own line: 8 spaces for the container, no rank, a level
    std::string line = "[2024-02-27T21:05:03.626766Z]          || WARNING: Trial 7 was assigned to an agent";
    NORMALIZE(line, m);
    EXPECT_FALSE(m.rank.has_value());
    EXPECT_EQ(m.level, 'W');
    EXPECT_EQ(m.body, "Trial 7 was assigned to an agent");
  }
  {
    // the older TrialLog.Resolve form: the container in brackets
    std::string line = "[2021-06-01T10:00:00.123456Z] [3c1f9a2b] [rank=0] || ERROR: RuntimeError: boom";
    NORMALIZE(line, m);
    EXPECT_EQ(m.rank.value_or(-1), 0);
    EXPECT_EQ(m.body, "RuntimeError: boom");
  }
}

// ------------------------------------------------------------------ §0.2-§0.3 PyTorch and library headers

TEST(normalize_header, c10_with_time) {
  std::string line = "[W503 01:52:07.597517393 socket.cpp:204] [c10d] The hostname of the client socket cannot be retrieved. err=-3";
  NORMALIZE(line, m);
  EXPECT_EQ(names(m), (std::vector<std::string>{"c10_header_time", "c10d_tag"}));
  EXPECT_EQ(m.level, 'W');
  EXPECT_EQ(m.body, "The hostname of the client socket cannot be retrieved. err=-3");
  ASSERT_TRUE(m.ts.has_value());
  EXPECT_FALSE(m.ts->has_date);
  EXPECT_NEAR(m.ts->seconds, 1777773127.597517393, 1e-5);  // 2026-05-03 01:52:07 (default year)
}

TEST(normalize_header, c10_without_time) {
  std::string line = "[I ProcessGroupWrapper.cpp:562] [Rank 0] Running collective: CollectiveFingerPrint(SequenceNumber=1277)";
  NORMALIZE(line, m);
  EXPECT_EQ(names(m), (std::vector<std::string>{"c10_header", "pg_rank_tag"}));
  EXPECT_EQ(m.level, 'I');
  EXPECT_EQ(m.rank.value_or(-1), 0);
  EXPECT_EQ(m.body, "Running collective: CollectiveFingerPrint(SequenceNumber=1277)");
  EXPECT_FALSE(m.ts.has_value());
}

TEST(normalize_header, c10_fatal_level) {
  std::string line =
      "[rank6]:[F429 14:03:49.385461578 ProcessGroupNCCL.cpp:1554] [PG ID 0 PG GUID 0(default_pg) Rank 6] Terminating the process";
  NORMALIZE(line, m);
  EXPECT_EQ(m.level, 'F');
  EXPECT_EQ(m.rank.value_or(-1), 6);
  EXPECT_EQ(m.body, "Terminating the process");
}

TEST(normalize_header, glog) {
  std::string line = "I1028 12:13:38.405081 632355 ProcessGroupNCCL.cpp:843] [Rank 0] NCCL watchdog thread started!";
  NORMALIZE(line, m);
  EXPECT_EQ(names(m), (std::vector<std::string>{"glog_header", "pg_rank_tag"}));
  EXPECT_EQ(m.level, 'I');
  EXPECT_EQ(m.rank.value_or(-1), 0);
  EXPECT_EQ(m.body, "NCCL watchdog thread started!");
  ASSERT_TRUE(m.ts.has_value());
  EXPECT_FALSE(m.ts->has_date);
  EXPECT_NEAR(m.ts->seconds, 1793189618.405081, 1e-5);
}

TEST(normalize_header, nccl_cuda_dev_is_not_a_rank) {
  std::string line = "node-01:984:1357 [4] file.cc:12 NCCL WARN NET/IB : Got completion from peer";
  NORMALIZE(line, m);
  EXPECT_EQ(names(m), (std::vector<std::string>{"nccl_header"}));
  EXPECT_EQ(m.host.value_or(""), "node-01");
  EXPECT_FALSE(m.rank.has_value());
  EXPECT_FALSE(m.local_rank.has_value());
  EXPECT_EQ(m.body, "file.cc:12 NCCL WARN NET/IB : Got completion from peer");
}

TEST(normalize_header, pg_guid_rank_tag) {
  std::string line = "[PG ID 0 PG GUID 0(default_pg) Rank 118]  failure detected by watchdog";
  NORMALIZE(line, m);
  EXPECT_EQ(names(m), (std::vector<std::string>{"pg_rank_tag"}));
  EXPECT_EQ(m.rank.value_or(-1), 118);
  EXPECT_EQ(m.body, "failure detected by watchdog");
}

TEST(normalize_header, pg_desc_rank_tag) {
  std::string line = "[PG 1 Rank 0] Timeout at NCCL work: 7753";
  NORMALIZE(line, m);
  EXPECT_EQ(m.rank.value_or(-1), 0);
  EXPECT_EQ(m.body, "Timeout at NCCL work: 7753");
}

TEST(normalize_header, nccl_section1_lines) {
  struct c { std::string line, host, body; };
  const std::vector<c> cases = {
      {"node-01:984:1357 [4] NCCL INFO transport/net.cc:1298 -> 6", "node-01", "NCCL INFO transport/net.cc:1298 -> 6"},
      {"node0:13571:13571 [0] NCCL INFO NET/Plugin : Plugin load (libnccl-net.so) returned 2", "node0",
       "NCCL INFO NET/Plugin : Plugin load (libnccl-net.so) returned 2"},
      {"node-01:39964:40075 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 10.0.0.2<45763> failed",
       "node-01", "misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 10.0.0.2<45763> failed"},
      {"node-01:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'", "node-01",
       "include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'"},
      {"[2025-11-24 11:20:21] node-07 [5] NCCL INFO bootstrap.cc:868 -> 6 ncclSocketConnect()", "node-07",
       "NCCL INFO bootstrap.cc:868 -> 6 ncclSocketConnect()"},
  };
  const prefix_catalog* cat = builtin_catalog();
  ASSERT_NE(cat, nullptr);
  for (const auto& k : cases) {
    line_meta m;
    EXPECT_TRUE(cat->normalize(k.line, m)) << k.line;
    EXPECT_EQ(m.host.value_or(""), k.host) << k.line;
    EXPECT_EQ(m.body, k.body) << k.line;
    EXPECT_FALSE(m.rank.has_value()) << k.line;
    EXPECT_FALSE(m.local_rank.has_value()) << k.line;
  }
  // A bare "file:line NCCL WARN" (no host header) is left alone.
  line_meta m;
  std::string bare = "init.cc:1247 NCCL WARN Mismatched collective detected, please check your collective calls";
  EXPECT_FALSE(cat->normalize(bare, m));
  EXPECT_EQ(m.body, bare);
  // PyTorch's report of an NCCL error under a rank tag.
  line_meta r;
  std::string tagged = "[rank7]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled cuda error";
  cat->normalize(tagged, r);
  EXPECT_EQ(r.rank.value_or(-1), 7);
  EXPECT_FALSE(r.host.has_value());
  EXPECT_EQ(r.body, "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled cuda error");
}

// ------------------------------------------------------------------ stacked layers and mid-line headers

TEST(normalize_stack, four_layers) {
  std::string line =
      "2025-11-24T03:20:21.001Z [default3]:[rank3]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 3] "
      "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, OpType=ALLREDUCE)";
  NORMALIZE(line, m);
  EXPECT_EQ(names(m), (std::vector<std::string>{"k8s_rfc3339", "torchrun_tee", "torchrun_rank_template",
                                                 "c10_header_time", "pg_rank_tag"}));
  EXPECT_EQ(m.body.substr(0, 8), "Watchdog");
  EXPECT_EQ(m.body, "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, OpType=ALLREDUCE)");
  EXPECT_EQ(m.rank.value_or(-1), 3);
  EXPECT_EQ(m.local_rank.value_or(-1), 3);
  EXPECT_EQ(m.level, 'E');
  // The outermost timestamp (with a date) is kept, not the c10 one.
  ASSERT_TRUE(m.ts.has_value());
  EXPECT_TRUE(m.ts->has_date);
  EXPECT_NEAR(m.ts->seconds, 1763954421.001, 1e-5);
}

TEST(normalize_stack, three_layers_from_log_formats_intro) {
  std::string line =
      "2025-11-24T03:20:21.001125857Z [2025-11-24 11:20:21] node-07 [5] misc/socket.cc:46 NCCL WARN socketProgressOpt: "
      "Call to send to 10.0.0.9<52905> failed : Connection reset by peer";
  NORMALIZE(line, m);
  EXPECT_EQ(names(m), (std::vector<std::string>{"k8s_rfc3339", "nccl_header_ts"}));
  EXPECT_EQ(m.host.value_or(""), "node-07");
  EXPECT_FALSE(m.rank.has_value());
  EXPECT_EQ(m.body, "misc/socket.cc:46 NCCL WARN socketProgressOpt: Call to send to 10.0.0.9<52905> failed : Connection reset by peer");
}

TEST(normalize_stack, tqdm_bar_glued_before_c10_header) {
  std::string line =
      "Epoch 0:   6%|\xe2\x96\x88\xe2\x96\x88        | 32040/500150 [6:28:43<94:39:17,  1.37it/s, loss=2.6]"
      "[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, "
      "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25624887 milliseconds before timing out.";
  NORMALIZE(line, m);
  EXPECT_TRUE(peeled);
  EXPECT_EQ(names(m), (std::vector<std::string>{"c10_header", "pg_rank_tag"}));
  EXPECT_EQ(m.body.substr(0, 8), "Watchdog");
  EXPECT_EQ(m.rank.value_or(-1), 0);
  EXPECT_EQ(m.level, 'E');
}

TEST(normalize_stack, tqdm_bar_after_torchrun_tee_tag) {
  // torchrun --tee puts "[default0]:" before every line, including rank 0's progress bar; the error
  // glued onto the bar must still be found (log_formats.md §0: headers also searched mid-line).
  std::string line =
      "[default0]:Epoch 0:   6%|\xe2\x96\x88\xe2\x96\x88        | 32040/500150 [6:28:43<94:39:17,  1.37it/s, loss=2.6]"
      "[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout";
  NORMALIZE(line, m);
  EXPECT_EQ(m.local_rank.value_or(-1), 0);
  EXPECT_EQ(m.rank.value_or(-1), 0);
}

TEST(normalize_stack, no_prefix_keeps_body) {
  std::string line = "just a plain message: nothing to peel";
  NORMALIZE(line, m);
  EXPECT_FALSE(peeled);
  EXPECT_EQ(m.body, line);
  EXPECT_EQ(m.n_prefixes, 0);
  EXPECT_FALSE(m.rank || m.local_rank || m.task || m.host || m.ts);
  EXPECT_EQ(m.level, 0);
}

TEST(normalize_stack, exception_line_is_not_a_pdsh_host) {
  std::string line = "RuntimeError: x";
  NORMALIZE(line, m);
  EXPECT_FALSE(peeled);
  EXPECT_FALSE(m.host.has_value());
  EXPECT_EQ(m.body, "RuntimeError: x");
}

TEST(normalize_stack, python_exception_types_are_not_hosts) {
  for (std::string line : {"torch.distributed.DistBackendError: NCCL error", "KeyError: 'x'",
                           "AssertionError: bad", "subprocess.CalledProcessError: Command failed"}) {
    const prefix_catalog* cat = builtin_catalog();
    ASSERT_NE(cat, nullptr);
    line_meta m;
    cat->normalize(line, m);
    EXPECT_FALSE(m.host.has_value()) << line << " -> host " << m.host.value_or("");
    EXPECT_EQ(m.body, line);
  }
}

TEST(normalize_stack, config_keys_are_not_pdsh_hosts) {
  // Lines a training script prints when it dumps its arguments.
  std::vector<std::string> wrong;
  for (std::string line : {"node_rank: 0", "master_addr: 10.0.0.1", "gpu_ids: 0,1,2,3"}) {
    const prefix_catalog* cat = builtin_catalog();
    ASSERT_NE(cat, nullptr);
    line_meta m;
    cat->normalize(line, m);
    if (m.host) wrong.push_back("'" + line + "' -> host=" + *m.host);
  }
  if (!wrong.empty()) {
    std::string all;
    for (auto& w : wrong) all += w + "; ";
    ADD_FAILURE() << "argument-dump lines taken as pdsh host prefixes: " << all;
  }
}

TEST(normalize_stack, at_most_max_layers_are_peeled) {
  std::string line;
  for (int i = 0; i < 10; ++i) line += "[rank" + std::to_string(i) + "]:";
  line += "msg";
  NORMALIZE(line, m);
  EXPECT_EQ(m.n_prefixes, prefix_catalog::kMaxLayers);
  EXPECT_EQ(m.rank.value_or(-1), prefix_catalog::kMaxLayers - 1);  // inner layers win
  EXPECT_EQ(m.body, "[rank8]:[rank9]:msg");
}

// ------------------------------------------------------------------ parse_timestamp

// The ISO fast path computes SS.frac without strtod: it must give strtod's double for every digit count,
// with '.' and ',' (the minute's epoch plus strtod of the seconds, summed as epoch() sums them).
TEST(parse_timestamp, iso_seconds_equal_strtod_for_every_fraction_length) {
  auto base = parse_timestamp("iso", "2026-11-30 02:09:00", 2026);
  ASSERT_TRUE(base);
  std::uint64_t x = 88172645463325252ull;
  for (int n = 0; n < 20000; ++n) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::string secs = std::to_string(10 + x % 50);
    int digits = static_cast<int>((x >> 8) % 19);  // 0..18: past the 15 digits of the exact path too
    if (digits > 0) secs += '.';
    for (int k = 0; k < digits; ++k) secs += static_cast<char>('0' + (x >> (12 + k)) % 10);
    std::string text = "2026-11-30 02:09:" + secs;
    if (n % 2 && digits > 0) text[19] = ',';
    auto t = parse_timestamp("iso", text, 2026);
    ASSERT_TRUE(t) << text;
    EXPECT_EQ(t->seconds, base->seconds + std::strtod(secs.c_str(), nullptr)) << text;
  }
}

// The minute's epoch is remembered per thread: a time read after another of the same minute (memo hit),
// of another minute, with an offset, or malformed, gives what a fresh thread (no memo) gives.
TEST(parse_timestamp, iso_minute_memo_gives_what_a_fresh_parse_gives) {
  const std::vector<std::string> times = {
      "2026-11-30 02:09:01,880", "2026-11-30 02:09:59.5", "2026-11-30 02:09:07", "2026-11-30T02:09:07+02:00",
      "2026-11-30 02:10:00,001", "2026-11-30 02:09:7",   "2026-11-30 02:09:61",  "2026-13-30 02:09:01",
      "2026-11-30 02:09:01.123456789012345678", "2026-11-30_02:09:01Z", "2026-11-30 02:09:0x", "2026-11-30 02:09:01-0700"};
  auto fresh = [](const std::string& t) {
    std::optional<ff::normalize::timestamp> out;
    std::thread([&] { out = parse_timestamp("iso", t, 2026); }).join();
    return out;
  };
  for (int round = 0; round < 3; ++round)
    for (const auto& t : times) {
      auto a = parse_timestamp("iso", t, 2026), b = fresh(t);
      ASSERT_EQ(a.has_value(), b.has_value()) << t;
      if (a) {
        EXPECT_EQ(a->seconds, b->seconds) << t;
      }
    }
}

// The shape memo's shortcut: for a text of iso_plain_shape(), parse_iso_plain() is parse_timestamp("iso")
// (same value or both none), in any order of minutes (memo hit and miss), seconds 00-99 and fraction
// lengths 0-13; and iso_plain_shape() is its regexp on those texts and near misses.
TEST(parse_timestamp, iso_plain_is_parse_timestamp) {
  using ff::normalize::detail::iso_plain_shape;
  using ff::normalize::detail::parse_iso_plain;
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  auto next = [&x] { return x ^= x << 13, x ^= x >> 7, x ^= x << 17; };
  std::size_t plain = 0, none = 0;
  for (int n = 0; n < 60000; ++n) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02d%c%02d:%02d:%02d", static_cast<int>(1990 + next() % 50), static_cast<int>(next() % 14),
                  static_cast<int>(next() % 33), "T _"[next() % 3], static_cast<int>(next() % 25), static_cast<int>(next() % 4 == 0 ? next() % 61 : 9),
                  static_cast<int>(next() % 100));
    std::string t = buf;
    static std::string last;
    if (!last.empty() && next() % 4 != 0) {  // mostly the minute before (memo hits), or the one after it
      t.replace(0, 16, last, 0, 16);
      if (next() % 4 == 0) t[15] = static_cast<char>('0' + next() % 10);
    }
    last = t;
    const int digits = static_cast<int>(next() % 16);  // 14 and 15: not of the shape
    if (digits > 0) t += ".,"[next() % 2];
    for (int k = 0; k < digits; ++k) t += static_cast<char>('0' + next() % 10);
    const int spoil = static_cast<int>(next() % 8);  // a near miss: an offset, a letter, a cut
    if (spoil == 1) t += "+02:00";
    if (spoil == 2) t[next() % t.size()] = 'x';
    if (spoil == 3) t.resize(next() % t.size());
    static const re2::RE2 shape(R"(\d{4}-\d\d-\d\d.\d\d:\d\d:\d\d(?:[.,]\d{1,13})?)");
    const bool want_shape = re2::RE2::FullMatch(t, shape);
    ASSERT_EQ(iso_plain_shape(t), want_shape) << t;
    if (!want_shape) continue;
    const auto a = parse_iso_plain(t), b = parse_timestamp("iso", t, 2026);
    ASSERT_EQ(a.has_value(), b.has_value()) << t;
    if (a) {
      ASSERT_EQ(a->seconds, b->seconds) << t;
    }
    plain += a.has_value();
    none += !a.has_value();
    if (next() % 8 == 0) (void)parse_timestamp("iso", "2026-11-30 02:09:01", 2026);  // another minute in the memo
  }
  EXPECT_GT(plain, 10000u);
  EXPECT_GT(none, 1000u);
}

TEST(parse_timestamp, iso) {
  auto t = parse_timestamp("iso", "2025-11-24T03:20:21.5Z", 2026);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->kind, timestamp::clock::wall);
  EXPECT_TRUE(t->has_date);
  EXPECT_DOUBLE_EQ(t->seconds, 1763954421.5);
  auto c = parse_timestamp("iso", "2026-11-30 02:14:01,880", 2000);
  ASSERT_TRUE(c.has_value());
  EXPECT_NEAR(c->seconds, 1796004841.880, 1e-6);
}

TEST(parse_timestamp, iso_with_utc_offset) {
  auto z = parse_timestamp("iso", "2025-02-14T05:03:41Z", 2026);
  auto off = parse_timestamp("iso", "2025-02-14T07:03:41+02:00", 2026);
  ASSERT_TRUE(z && off);
  EXPECT_DOUBLE_EQ(z->seconds, 1739509421.0);
}

TEST(parse_timestamp, c10_has_no_year) {
  auto t = parse_timestamp("c10", "1206 18:44:12.715298746", 2026);
  ASSERT_TRUE(t.has_value());
  EXPECT_FALSE(t->has_date);
  EXPECT_EQ(t->kind, timestamp::clock::wall);
  EXPECT_NEAR(t->seconds, 1796582652.715298746, 1e-5);
  auto y = parse_timestamp("c10", "1206 18:44:12.0", 2025);
  ASSERT_TRUE(y.has_value());
  EXPECT_NEAR(t->seconds - y->seconds, 365.0 * 86400 + 0.715298746, 1e-5);  // default_year is used
  EXPECT_FALSE(parse_timestamp("c10", "1306 18:44:12.1", 2026).has_value());  // month 13
}

TEST(parse_timestamp, syslog) {
  auto t = parse_timestamp("syslog", "Feb 14 05:03:41", 2026);
  ASSERT_TRUE(t.has_value());
  EXPECT_FALSE(t->has_date);
  EXPECT_DOUBLE_EQ(t->seconds, 1771045421.0);
  auto pad = parse_timestamp("syslog", "Feb  4 05:03:41", 2026);
  ASSERT_TRUE(pad.has_value());
  EXPECT_DOUBLE_EQ(pad->seconds, 1771045421.0 - 10 * 86400);
  EXPECT_FALSE(parse_timestamp("syslog", "Foo 14 05:03:41", 2026).has_value());
}

TEST(parse_timestamp, ctime) {
  auto t = parse_timestamp("ctime", "Fri Aug 11 12:31:45 2023", 1999);
  ASSERT_TRUE(t.has_value());
  EXPECT_TRUE(t->has_date);
  EXPECT_DOUBLE_EQ(t->seconds, 1691757105.0);
}

TEST(parse_timestamp, uptime) {
  auto t = parse_timestamp("uptime", "1084456.074562", 2026);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->kind, timestamp::clock::uptime);
  EXPECT_NEAR(t->seconds, 1084456.074562, 1e-6);
  auto us = parse_timestamp("uptime_us", "206764307", 2026);
  ASSERT_TRUE(us.has_value());
  EXPECT_EQ(us->kind, timestamp::clock::uptime);
  EXPECT_NEAR(us->seconds, 206.764307, 1e-9);
}

TEST(parse_timestamp, elastic) {
  auto t = parse_timestamp("elastic", "2026-09-07_13:02:58", 2000);
  ASSERT_TRUE(t.has_value());
  EXPECT_TRUE(t->has_date);
  EXPECT_DOUBLE_EQ(t->seconds, 1788786178.0);
}

TEST(parse_timestamp, epoch) {
  auto t = parse_timestamp("epoch", "1700000000", 2026);
  ASSERT_TRUE(t.has_value());
  EXPECT_DOUBLE_EQ(t->seconds, 1700000000.0);
}

TEST(parse_timestamp, invalid_is_nullopt) {
  EXPECT_FALSE(parse_timestamp("iso", "not a time", 2026).has_value());
  EXPECT_FALSE(parse_timestamp("iso", "", 2026).has_value());
  EXPECT_FALSE(parse_timestamp("ctime", "yesterday", 2026).has_value());
  EXPECT_FALSE(parse_timestamp("uptime", "abc", 2026).has_value());
  EXPECT_FALSE(parse_timestamp("c10", "18:44", 2026).has_value());
  EXPECT_FALSE(parse_timestamp("no_such_format", "2025-11-24T03:20:21Z", 2026).has_value());
}

TEST(parse_timestamp, out_of_range_date_is_nullopt) {
  auto t = parse_timestamp("iso", "2025-13-45T10:00:00Z", 2026);
  EXPECT_FALSE(t.has_value());
}

// ------------------------------------------------------------------ catalogue loading

TEST(prefix_catalog_load, small_catalogue_loads_and_peels) {
  const std::string yaml = R"(prefixes:
  - name: my_tag
    regex: '\[mytag(?P<rank>\d+)\] '
    samples:
      - line: '[mytag4] hello'
        expect: {rank: '4', body: hello}
)";
  auto c = prefix_catalog::load({{"_prefixes/90_test.yaml", yaml}});
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_EQ(c.value().defs().size(), 1u);
  EXPECT_EQ(c.value().defs()[0].name, "my_tag");
  line_meta m;
  EXPECT_TRUE(c.value().normalize("[mytag17] x", m));
  EXPECT_EQ(m.rank.value_or(-1), 17);
  EXPECT_EQ(m.body, "x");
}

TEST(prefix_catalog_load, sample_not_matching_own_regex_fails) {
  const std::string yaml = R"(prefixes:
  - name: my_broken_tag
    regex: '\[mytag(?P<rank>\d+)\] '
    samples:
      - line: 'no tag on this line'
)";
  auto c = prefix_catalog::load({{"_prefixes/90_test.yaml", yaml}});
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("my_broken_tag"), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find("90_test.yaml"), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find("no tag on this line"), std::string::npos) << c.error().message;
}

TEST(prefix_catalog_load, sample_with_wrong_expectation_fails) {
  const std::string yaml = R"(prefixes:
  - name: my_tag
    regex: '\[mytag(?P<rank>\d+)\] '
    samples:
      - line: '[mytag4] hello'
        expect: {rank: '5'}
)";
  auto c = prefix_catalog::load({{"t.yaml", yaml}});
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("my_tag"), std::string::npos);
  EXPECT_NE(c.error().message.find("rank='4'"), std::string::npos) << c.error().message;
}

TEST(prefix_catalog_load, bad_regex_and_missing_samples_fail) {
  auto bad = prefix_catalog::load({{"b.yaml", "prefixes:\n  - name: broken\n    regex: '(unclosed'\n    samples:\n      - line: x\n"}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("b.yaml: prefix broken: bad regex"), std::string::npos) << bad.error().message;
  auto nos = prefix_catalog::load({{"n.yaml", "prefixes:\n  - name: lonely\n    regex: 'x: '\n"}});
  ASSERT_FALSE(nos);
  EXPECT_NE(nos.error().message.find("lonely"), std::string::npos) << nos.error().message;
  auto nots = prefix_catalog::load({{"ts.yaml", "prefixes:\n  - name: tsnofmt\n    regex: '(?P<ts>\\d+) '\n    samples:\n      - line: '1 x'\n"}});
  ASSERT_FALSE(nots);
  EXPECT_NE(nots.error().message.find("ts.yaml: prefix tsnofmt: has (?P<ts>) but no ts_format"), std::string::npos) << nots.error().message;
}

// The parsed and ordered catalogue is cached: a catalogue loaded from the cache has the same entries in the
// same order and peels every sample line as one parsed from YAML; a corrupt cache file is parsed again.
TEST(prefix_catalog_load, the_cache_gives_the_same_catalogue) {
  auto dir = std::filesystem::temp_directory_path() / ("ff-prefixcache-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ::setenv("FIRSTFAULT_CACHE_DIR", "off", 1);
  auto lib = ff::kb::library::load(true, {});
  ASSERT_TRUE(lib);
  const auto& files = lib.value().prefix_files;
  auto reference = prefix_catalog::load(files);
  ASSERT_TRUE(reference);
  ::setenv("FIRSTFAULT_CACHE_DIR", dir.c_str(), 1);
  auto first = prefix_catalog::load(files);   // parsed, stored
  auto second = prefix_catalog::load(files);  // from the cache
  ASSERT_TRUE(first);
  ASSERT_TRUE(second);
  std::vector<std::filesystem::path> caches;
  for (auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind("prefixes-", 0) == 0) caches.push_back(e.path());
  ASSERT_EQ(caches.size(), 1u);
  auto describe = [](const prefix_catalog& c) {
    std::string out;
    for (const auto& d : c.defs()) out += d.name + '\x1f' + d.title + '\x1f' + d.regex + '\x1f' + d.ts_format + (d.midline ? "m" : "-") + '\n';
    return out;
  };
  EXPECT_EQ(describe(second.value()), describe(reference.value()));
  EXPECT_EQ(second.value().fingerprint(), reference.value().fingerprint());
  EXPECT_TRUE(second.value().lexer_enabled());
  std::size_t lines = 0;
  for (const auto& [name, text] : files) {
    std::istringstream in(text);
    std::string l;
    while (std::getline(in, l)) {
      auto at = l.find("line: '");
      if (at == std::string::npos || l.size() < at + 8) continue;
      std::string line = l.substr(at + 7, l.size() - at - 8);
      line_meta a, b;
      reference.value().normalize(line, a);
      second.value().normalize(line, b);
      EXPECT_EQ(names(a), names(b)) << line;
      EXPECT_EQ(a.body, b.body) << line;
      ++lines;
    }
  }
  EXPECT_GT(lines, 30u);
  std::ofstream(caches[0], std::ios::binary | std::ios::trunc) << "\x05garbage";
  auto third = prefix_catalog::load(files);  // corrupt cache: parsed again
  ASSERT_TRUE(third);
  EXPECT_EQ(describe(third.value()), describe(reference.value()));
  ::unsetenv("FIRSTFAULT_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

// The memo of prefix captures is a shortcut: on every line of the test corpus, normalize() gives what
// RE2's captures alone give.
TEST(normalize_shortcuts, the_capture_memo_agrees_with_re2_on_the_corpus) {
  auto lib = ff::kb::library::load(true, {});
  ASSERT_TRUE(lib);
  auto fast = prefix_catalog::load(lib.value().prefix_files);
  auto slow = prefix_catalog::load(lib.value().prefix_files);
  ASSERT_TRUE(fast);
  ASSERT_TRUE(slow);
  slow.value().disable_shortcuts();
  auto describe = [](const line_meta& m) {
    std::string d = std::to_string(m.rank.value_or(-1)) + "|" + std::to_string(m.local_rank.value_or(-1)) + "|" +
                    std::to_string(m.task.value_or(-1)) + "|" + m.host.value_or("-") + "|" + std::string(1, m.level ? m.level : '-') +
                    "|" + (m.ts ? std::to_string(m.ts->seconds) : "-") + "|" + std::string(m.body) + "|";
    for (std::size_t i = 0; i < m.n_prefixes; ++i) d += std::to_string(m.prefixes[i]) + ",";
    return d;
  };
  std::size_t lines = 0, peeled = 0;
  for (const auto& c : std::filesystem::recursive_directory_iterator(std::filesystem::path(FF_TEST_DATA) / "corpus")) {
    if (!c.is_regular_file() || c.path().parent_path().filename() == "expected.json") continue;
    if (c.path().extension() == ".json" && c.path().filename() != "log.json") continue;
    std::ifstream in(c.path(), std::ios::binary);
    std::vector<std::string> all;
    for (std::string l; std::getline(in, l);) all.push_back(l);
    // One catalogue at a time over the whole file (the memo is per thread and starts over when the
    // catalogue changes), twice for the fast one: the second time the memo answers.
    std::vector<std::string> want, got1, got2, got3, got4;
    for (const auto& l : all) {
      line_meta m;
      bool p = slow.value().normalize(l, m);
      want.push_back(std::to_string(p) + describe(m));
      peeled += p;
    }
    for (auto* got : {&got1, &got2})
      for (const auto& l : all) {
        line_meta m;
        bool p = fast.value().normalize(l, m);
        got->push_back(std::to_string(p) + describe(m));
      }
    // normalize_fast (lexer, shape memo) against the catalogue without any shortcut, also twice
    for (auto* got : {&got3, &got4})
      for (const auto& l : all) {
        line_meta m;
        bool p = fast.value().normalize_fast(l, m);
        got->push_back(std::to_string(p) + describe(m));
      }
    for (std::size_t i = 0; i < all.size(); ++i) {
      ASSERT_EQ(got1[i], want[i]) << c.path() << ": " << all[i];
      ASSERT_EQ(got2[i], want[i]) << c.path() << ": " << all[i];
      ASSERT_EQ(got3[i], want[i]) << "normalize_fast: " << c.path() << ": " << all[i];
      ASSERT_EQ(got4[i], want[i]) << "normalize_fast, second pass: " << c.path() << ": " << all[i];
    }
    lines += all.size();
  }
  EXPECT_GT(lines, 10000u);
  EXPECT_GT(peeled, 3000u);
}

// leading_token() scans by hand on ASCII text; the regexp it replaces is the reference. Tokens are
// generated from the bytes that decide each alternative ('[', ']', '<', '>', ':', '|', spaces, word
// characters), at lengths around the {1,48} and {1,8} bounds and the 96-byte window.
TEST(prefix_learner, leading_token_hand_scan_equals_regexp) {
  // with UTF-8 bytes (an "é" split or whole) and an invalid one: the hand scan takes non-ASCII text too
  static const char kAlphabet[] = "[]<>:| \t.@-_aZ09x\xc3\xa9\xff";
  ff::testing::lcg next(12345);
  std::vector<std::string> lines = {"[rank3]: x", "[default0]:y", "[1,2]<stdout>:z", "node-1: a", "w | b", "[x]",
                                    std::string(48, 'a') + ": m", std::string(49, 'a') + ": m",
                                    "[" + std::string(48, 'b') + "] m", "[" + std::string(49, 'b') + "] m",
                                    "[a]<" + std::string(8, 'c') + ">: m", "[a]<" + std::string(9, 'c') + ">: m",
                                    std::string(95, 'q') + ": ", "[" + std::string(94, 'q') + "]",
                                    "[r\xc3\xa9]: x", "\xc3\xa9t\xc3\xa9: x", "node\xc3\xa9: x", "[" + std::string(47, 'b') + "\xc3\xa9] m"};
  for (int i = 0; i < 200000; ++i) {
    std::string l;
    std::size_t len = next() % 110;
    bool runs = next() % 2;  // long runs of one byte reach the bounds
    while (l.size() < len) {
      char c = kAlphabet[next() % (sizeof kAlphabet - 1)];
      l.append(runs ? next() % 60 + 1 : 1, c);
    }
    l.resize(len);
    lines.push_back(std::move(l));
  }
  for (const auto& l : lines)
    ASSERT_EQ(ff::normalize::detail::leading_token_extent(l, false), ff::normalize::detail::leading_token_extent(l, true))
        << "line: '" << l << "'";
}

TEST(prefix_learner, leading_token_message_words_any_case) {
  EXPECT_TRUE(ff::normalize::leading_token("[ErRoR1]: x").first.empty());
  EXPECT_TRUE(ff::normalize::leading_token("Traceback7: x").first.empty());
  EXPECT_EQ(ff::normalize::leading_token("[job7]: x").first, "[job7]: ");
  EXPECT_EQ(ff::normalize::leading_token("[job7]: x").second, "[job#]: ");
  EXPECT_EQ(ff::normalize::leading_token("w3 | x").first, "w3 | ");
  EXPECT_TRUE(ff::normalize::leading_token("Epoch: 3").first.empty());  // a bare word is a message
}

namespace {
std::string describe(const line_meta& m, bool peeled) {
  std::string s = peeled ? "peeled" : "bare";
  auto opt = [](const std::optional<int>& v) { return v ? std::to_string(*v) : std::string("-"); };
  s += " rank=" + opt(m.rank) + " local=" + opt(m.local_rank) + " task=" + opt(m.task);
  s += " host=" + m.host.value_or("-") + " level=" + std::string(1, m.level ? m.level : '-');
  if (m.ts) s += " ts=" + std::to_string(m.ts->seconds) + "/" + std::to_string(static_cast<int>(m.ts->kind)) + "/" + std::to_string(m.ts->has_date);
  s += " prefixes=";
  for (std::size_t i = 0; i < m.n_prefixes; ++i) s += std::to_string(m.prefixes[i]) + ",";
  s += " body=[" + std::string(m.body) + "]";
  return s;
}

void expect_fast_equals_catalogue(const prefix_catalog& cat, const std::string& line) {
  line_meta a, b;
  bool pa = cat.normalize(line, a);
  bool pb = cat.normalize_fast(line, b);
  ASSERT_EQ(describe(a, pa), describe(b, pb)) << "line: '" << line << "'";
}
}  // namespace

// The lexer's rules were derived from this catalogue: a change to kb/_prefixes turns the lexer off until
// its rules (prefix_catalog.cpp, lex_tag / lex_nccl / lex_no_prefix) are checked against the new prefixes
// and kLexerCatalogue is set to the fingerprint printed here.
TEST(prefix_catalog, lexer_is_on_for_the_builtin_catalogue) {
  const prefix_catalog* cat = builtin_catalog();
  ASSERT_NE(cat, nullptr);
  EXPECT_TRUE(cat->lexer_enabled()) << "built-in catalogue fingerprint: " << cat->fingerprint() << "ULL";
}

// normalize_fast() is normalize() with shortcuts: the same result on every line of every corpus log (the
// first 4,000 lines of each file) and on generated lines that combine the lexer's forms with the others.
TEST(prefix_catalog, normalize_fast_equals_normalize) {
  const prefix_catalog* cat = builtin_catalog();
  ASSERT_NE(cat, nullptr);
  ASSERT_TRUE(cat->lexer_enabled());
  std::size_t n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(std::filesystem::path(FF_TEST_DATA) / "corpus")) {
    if (!e.is_regular_file()) continue;
    std::ifstream f(e.path());
    std::string line;
    for (int i = 0; i < 4000 && std::getline(f, line); ++i, ++n) expect_fast_equals_catalogue(*cat, line);
  }
  EXPECT_GT(n, 10000u);
  const std::vector<std::string> heads = {"[default3]:", "[rank12]:", "[rank12]: ", "[trainer_7]:", "[rank0]:[rank0]: ",
                                          "[default0]:[W1130 02:00:01.512000 41 x.py:9] ", "[3]:", "[rank1|2]: ", "",
                                          "[default1]:node-1:123:456 [1] ", "gpu-node-07:2691950:2692341 [7] ",
                                          "node-1:1:2 [0] ProcessGroupNCCL.cpp:1575 ", "h:1:2 [0] a.c:3 ", "h.x:1:2 [0] .cpp:3 ",
                                          "2026-03-01 00:00:01,970 | INFO | ", "[2026-03-01 00:00:01,970] [INFO] [logging.py:96:log_dist] ",
                                          "W1130 02:00:01.512000 4211 torch/distributed/run.py:793] ", "Jan 12 10:00:00 node1 kernel: ",
                                          "12: ", "node-3: ", "kern  :err  : ", "pod/x [0]:", "E1130 ", "I 12 "};
  const std::vector<std::string> bodies = {"step 5 loss 2.3", "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P", "Epoch: 3",
                                           "node-1:2:3 [0] NCCL WARN x", "kern: x", "host : y", "Jan 12 x", "Sat x", "I1206 x",
                                           "abc/5 [0]: y", "x [I 1] y", "x [rank3]: y", "x [E1206 12:00:00.000 1 f.cc:1] y",
                                           "Traceback (most recent call last):", "  File \"x.py\", line 3", "", "a", "local7 : x",
                                           "ProcessGroupNCCL.cpp:1575 x", "12: x", "[rank4]: y"};
  for (const auto& h : heads)
    for (const auto& b : bodies)
      for (const auto& h2 : {std::string(), std::string("[rank9]:"), std::string("node-2:9:9 [2] ")}) {
        expect_fast_equals_catalogue(*cat, h + h2 + b);
        expect_fast_equals_catalogue(*cat, h + b);
      }
}

// The lexer checks each key once against the catalogue, then trusts it: its rules must refuse every line
// whose key could be shared by a line without a prefix and one with. Each pair below has the same key;
// the first line has no prefix, the second does. Each pair runs on a new thread (a fresh memo).
TEST(prefix_catalog, normalize_fast_rules_refuse_keys_a_prefix_can_share) {
  const prefix_catalog* cat = builtin_catalog();
  ASSERT_NE(cat, nullptr);
  const std::vector<std::pair<std::string, std::string>> traps = {
      {"abc/x", "abc/5 [0]: y"},
      {"node-1:x", "node-1: y"},
      {"kern x", "kern : err : y"},
      {"Jan x", "Jan 12 10:00:00 node1 kernel: y"},
      {"Sat x", "Sat Jan 12 10:00:00 2026 y"},
      {"I1130 x", "I1130 02:00:01.512000 4211 x.py:1] y"},
      {"x y", "x [rank3]: y"},
      {"x y", "x [E1206 12:00:00.000 1 f.cc:1] y"},
      {"[default1]:x y", "[default1]:x [rank3]: y"},
  };
  for (const auto& [first, second] : traps) {
    std::string got;
    std::thread t([&, first = first, second = second] {
      line_meta a, b, c;
      cat->normalize_fast(first, a);
      bool pb = cat->normalize_fast(second, b);
      bool pc = cat->normalize(second, c);
      if (describe(b, pb) != describe(c, pc)) got = describe(b, pb) + " vs " + describe(c, pc);
    });
    t.join();
    EXPECT_EQ(got, "") << "after '" << first << "', line '" << second << "'";
  }
}

TEST(prefix_catalog, digit_blind_regexps) {
  using ff::normalize::detail::digit_blind;
  EXPECT_TRUE(digit_blind(R"(\[rank(?P<rank>\d+)\]: ?)"));
  EXPECT_TRUE(digit_blind(R"((?P<ts>\d{4}-\d\d-\d\d[ _]\d\d:\d\d:\d\d(?:[,.]\d+)?) )"));
  EXPECT_TRUE(digit_blind(R"([A-Za-z0-9][\w.-]*[ \d][^;]*;(?P<g1>x)local\d)"));
  EXPECT_TRUE(digit_blind(R"([^\[\]\s]{1,48}\])"));
  EXPECT_FALSE(digit_blind(R"(\[rank[0-7]\])"));
  EXPECT_FALSE(digit_blind(R"(worker1: )"));
  EXPECT_FALSE(digit_blind(R"([1-9]\d*)"));
  EXPECT_FALSE(digit_blind(R"(\x31)"));
  EXPECT_FALSE(digit_blind(R"([[:digit:]])"));
  EXPECT_FALSE(digit_blind(R"([a-z5])"));
  EXPECT_FALSE(digit_blind(R"(\[c10d\])"));  // without a word list
  std::vector<std::string> words;
  EXPECT_TRUE(digit_blind(R"(\[c10d(?: [^\]]*)?\] )", &words));
  EXPECT_EQ(words, std::vector<std::string>{"c10d"});
  EXPECT_FALSE(digit_blind(R"(c1+)", &words));  // a repeated digit: "c11" and "c12" would share a key
  EXPECT_FALSE(digit_blind(R"(\[12\])", &words));  // a bare number
  // the shape memo is on for the built-in catalogue
  const prefix_catalog* cat = builtin_catalog();
  ASSERT_NE(cat, nullptr);
  words.clear();
  for (const auto& d : cat->defs()) EXPECT_TRUE(digit_blind(d.regex, &words)) << d.name << ": " << d.regex;
}

// A known line shape takes its layers from the memo and its values from its own bytes: ranks, hosts,
// times (also ones that do not parse: day 35, hour 99) and levels differ from line to line.
TEST(prefix_catalog, shape_memo_takes_each_lines_own_values) {
  const prefix_catalog* cat = builtin_catalog();
  ASSERT_NE(cat, nullptr);
  for (int i = 0; i < 400; ++i) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "[default%d]:2026-03-%02d %02d:00:%02d,%03d | INFO | train.py:%d | step %d loss 0.%d", i % 10,
                  i % 40, i % 100, i % 60, i, i, i, i);
    expect_fast_equals_catalogue(*cat, buf);
    std::snprintf(buf, sizeof buf, "[rank%d]:node-%d:%d:%d [%d] NCCL INFO Channel %02d/0 : %d[%d] -> %d[%d]", i % 16, i % 9, 1000 + i, 2000 + i,
                  i % 8, i % 32, i, i % 8, i + 1, (i + 1) % 8);
    expect_fast_equals_catalogue(*cat, buf);
    std::snprintf(buf, sizeof buf, "%c%02d%02d %02d:%02d:%02d.%06d %d torch/distributed/run.py:%d] step %d", "IWEF"[i % 4], i % 13,
                  i % 32, i % 24, i % 60, i % 60, i, 4000 + i, i, i);
    expect_fast_equals_catalogue(*cat, buf);
    std::snprintf(buf, sizeof buf, "%d: [rank%d]:[2026-03-01 00:00:%02d,%03d] [%s] [logging.py:%d:log_dist] x", i % 5, i % 7, i % 60, i,
                  i % 2 ? "INFO" : "WARNING", i);
    expect_fast_equals_catalogue(*cat, buf);
    std::snprintf(buf, sizeof buf, "Mar %2d %02d:%02d:%02d gpu-node-%d kernel: [%d.%06d] NVRM: Xid (PCI:0000:%02x:00): 79", i % 31 + 1,
                  i % 24, i % 60, i % 60, i % 4, i, i, i % 256);
    expect_fast_equals_catalogue(*cat, buf);
    std::snprintf(buf, sizeof buf, "[c%dd] step %d", i % 30, i);  // "[c10d] " is a prefix, "[c20d] " is not
    expect_fast_equals_catalogue(*cat, buf);
  }
}

namespace {
// The order prefixes are tried in comes from their samples (lnav's rule), not from file names: the bare
// kubectl timestamp listed first still lets rsyslog's "TIME HOST prog: " peel its host, because the bare
// one matches rsyslog's sample and not the other way round.
TEST(prefix_catalog, order_comes_from_sample_collisions_not_file_names) {
  const std::string general = R"(prefixes:
  - name: bare_rfc3339
    regex: '(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?) '
    ts_format: iso
    samples:
      - line: '2025-11-24T03:20:21.001125857Z hello'
        expect: {body: hello}
)";
  const std::string specific = R"(prefixes:
  - name: syslog_rfc3339_host_x
    regex: '(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?) (?P<host>[A-Za-z0-9][\w.-]*) [\w./@-]+(?:\[\d+\])?: '
    ts_format: iso
    samples:
      - line: '2025-02-14T05:03:41.123+00:00 node-01 kernel: Link DOWN'
        expect: {host: node-01, body: 'Link DOWN'}
)";
  for (bool general_first : {true, false}) {
    std::vector<std::pair<std::string, std::string>> files = {{"_prefixes/10_a.yaml", general_first ? general : specific},
                                                             {"_prefixes/20_b.yaml", general_first ? specific : general}};
    auto c = ff::normalize::prefix_catalog::load(files);
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c.value().defs().front().name, "syslog_rfc3339_host_x") << general_first;
    ff::normalize::line_meta m;
    c.value().normalize("2025-02-14T05:03:41.123+00:00 gpu-7 kernel: NVRM: Xid 79", m);
    ASSERT_TRUE(m.host.has_value());
    EXPECT_EQ(*m.host, "gpu-7");
  }
}
}  // namespace
