#!/usr/bin/env python3
"""Generate realistic multi-rank distributed-training logs with ONE injected failure.

Standard library only, deterministic for a given --seed. Line formats follow
../shared/reference/log_formats.md (torchrun [defaultN]: tee prefix, torch >= 2.3 [rankN]: prefixes,
NCCL INFO chatter, c10 headers, torchelastic ChildFailedError, journald kernel lines).

Layouts
  console   one file: torchrun console of every node merged (srun running torchrun per node); worker lines
            carry `[default<local_rank>]:`, c10/traceback lines also `[rank<R>]:`; agent output unprefixed.
  per-rank  a directory: torchrun --log-dir tree per node,
            <out>/<host>/none_<id>/attempt_0/<local_rank>/stderr.log (or <out>/none_<id>/attempt_0/... for one
            node), plus <out>/launcher.log (the agents' console: banner, agent errors, ChildFailedError) and,
            for node-level failures, <out>/kern-<host>.log (journald kernel lines).
  one-file  one file: `srun --label` style, one task per GPU, every line prefixed `<rank>: `.

Timeline (synthetic, documented in bench/README.md): --position puts the culprit's first error at 5% / 50% /
the end of the bytes. The culprit's node stops logging there (its agent raises ChildFailedError); the other
nodes keep logging and print the collateral (watchdog timeouts, their own ChildFailedError) at the end.

A sidecar <out>.truth.json records the expected kind and culprit rank.
"""
import argparse
import json
import os
import random
import sys

KINDS = {"cuda_oom": "cuda_oom", "xid79": "gpu_fell_off_bus", "host_oom": "host_oom_sigkill"}
GPUS_PER_NODE = 8
STEP_SECONDS = 1.37
BASE_EPOCH = 1796004000  # 2026-11-30 02:00:00 UTC (seconds since 1970)
CHUNK = 16 << 20

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def parse_size(s):
    s = s.strip().upper().rstrip("B")
    mult = 1
    for suf, m in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40)):
        if s.endswith(suf):
            mult, s = m, s[:-1]
            break
    return int(float(s) * mult)


def civil(t):
    """UTC seconds -> (Y, M, D, h, m, s) without the time module's locale/timezone dependence."""
    import datetime
    d = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=t)
    return d.year, d.month, d.day, d.hour, d.minute, d.second


class Clock:
    """Cached string forms of a wall-clock second."""

    def __init__(self):
        self._cache = {}

    def parts(self, t):
        sec = int(t)
        p = self._cache.get(sec)
        if p is None:
            Y, M, D, h, m, s = civil(sec)
            p = {
                "py": f"{Y:04d}-{M:02d}-{D:02d} {h:02d}:{m:02d}:{s:02d}",      # python logging, + ",mmm"
                "c10": f"{M:d}{D:02d} {h:02d}:{m:02d}:{s:02d}",                 # [E1130 02:14:01 + .nnnnnnnnn
                "elastic": f"{Y:04d}-{M:02d}-{D:02d}_{h:02d}:{m:02d}:{s:02d}",  # ChildFailedError time
                "journal": f"{MONTHS[M - 1]} {D:2d} {h:02d}:{m:02d}:{s:02d}",   # journald / syslog
            }
            if len(self._cache) > 100000:
                self._cache.clear()
            self._cache[sec] = p
        return p


class Job:
    def __init__(self, a):
        self.rng = random.Random(a.seed)
        rng = self.rng
        self.ranks = a.ranks
        self.nodes = (a.ranks + GPUS_PER_NODE - 1) // GPUS_PER_NODE
        width = max(2, len(str(self.nodes)))
        self.hosts = [f"node-{n + 1:0{width}d}" for n in range(self.nodes)]
        self.node_pid = [rng.randrange(10000, 3000000) for _ in range(self.nodes)]
        self.agent_pid = [p - rng.randrange(200, 400) for p in self.node_pid]
        self.culprit = a.culprit_rank if a.culprit_rank is not None else rng.randrange(1, a.ranks)
        if not 0 <= self.culprit < a.ranks:
            sys.exit(f"--culprit-rank {self.culprit} is outside 0..{a.ranks - 1}")
        self.cnode = self.node(self.culprit)
        self.failure = a.failure
        self.clock = Clock()
        self.run_id = "none_" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789_") for _ in range(8))
        self.master = "10.0.0.1"
        self.losses = [f"{2.9 - i * 0.0011 + rng.uniform(-0.05, 0.05):.4f}" for i in range(997)]
        self.ms = [f"{i:03d}" for i in range(1000)]
        self.ns = [f"{rng.randrange(10**9):09d}" for _ in range(1009)]
        self.seq0 = 7000 + rng.randrange(1000)

    def node(self, r):
        return r // GPUS_PER_NODE

    def local(self, r):
        return r % GPUS_PER_NODE

    def pid(self, r):
        return self.node_pid[self.node(r)] + self.local(r)

    def host(self, r):
        return self.hosts[self.node(r)]

    def node_ranks(self, n):
        return range(n * GPUS_PER_NODE, min(self.ranks, (n + 1) * GPUS_PER_NODE))

    def t(self, step):
        return BASE_EPOCH + 60 + step * STEP_SECONDS

    def pyts(self, t, salt=0):
        return self.clock.parts(t)["py"] + "," + self.ms[(int(t * 1000) + salt) % 1000]

    def c10(self, level, t, salt=0):
        return f"{level}{self.clock.parts(t)['c10']}.{self.ns[(int(t * 1000) + salt) % 1009]}"


# ---------------------------------------------------------------------------------------------------
# Line builders. `pre(r)` is the layout's worker prefix for rank r ("" in per-rank files).

def nccl_init_lines(job, r, pre):
    h, p, l, n = job.host(r), job.pid(r), job.local(r), job.ranks
    tid = p + 391
    hdr = f"{pre}{h}:{p}:{p} [{l}] NCCL INFO "
    hdr2 = f"{pre}{h}:{p}:{tid} [{l}] NCCL INFO "
    bus = f"{0x18 + l * 0x11:x}000"
    out = [
        f"{hdr}cudaDriverVersion 12040\n",
        f"{hdr}Bootstrap : Using ib0:10.0.{job.node(r) // 250}.{job.node(r) % 250 + 2}<0>\n",
        f"{hdr}NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or directory No plugin found (libnccl-net.so), using internal implementation\n",
    ]
    if r == 0:
        out.append(f"{pre}NCCL version 2.21.5+cuda12.4\n")
    out += [
        f"{hdr2}NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB ; OOB ib0:10.0.0.{job.node(r) % 250 + 2}<0>\n",
        f"{hdr2}Using non-device net plugin version 0\n",
        f"{hdr2}Using network IB\n",
        f"{hdr2}comm 0x{0x55d0c0a00000 + r * 0x1000:x} rank {r} nranks {n} cudaDev {l} nvmlDev {l} busId {bus} commId 0x7f3a9c2b1e0d5a44 - Init START\n",
        f"{hdr2}Setting affinity for GPU {l} to ffffffff,ffffffff,00000000,00000000\n",
        f"{hdr2}NVLS multicast support is not available on dev {l}\n",
        f"{hdr2}comm 0x{0x55d0c0a00000 + r * 0x1000:x} rank {r} nRanks {n} nNodes {job.nodes} localRanks {GPUS_PER_NODE} localRank {l} MNNVL 0\n",
        f"{hdr2}Trees [0] {(r + 1) % n}/-1/-1->{r}->{(r - 1) % n} [1] {(r + 1) % n}/-1/-1->{r}->{(r - 1) % n}\n",
        f"{hdr2}P2P Chunksize set to 131072\n",
        f"{hdr2}Channel 00/0 : {r}[{l}] -> {(r + 1) % n}[{(l + 1) % GPUS_PER_NODE}] via P2P/CUMEM/read\n",
        f"{hdr2}Channel 01/0 : {r}[{l}] -> {(r + 1) % n}[{(l + 1) % GPUS_PER_NODE}] via P2P/CUMEM/read\n",
        f"{hdr2}Connected all rings\n",
        f"{hdr2}Connected all trees\n",
        f"{hdr2}threadThresholds 8/8/64 | 8192/8/64 | 512 | 512\n",
        f"{hdr2}16 coll channels, 0 collnet channels, 0 nvls channels, 16 p2p channels, 2 p2p channels per peer\n",
        f"{hdr2}TUNER/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory : when loading libnccl-tuner.so\n",
        f"{hdr2}ncclCommInitRank comm 0x{0x55d0c0a00000 + r * 0x1000:x} rank {r} nranks {n} cudaDev {l} nvmlDev {l} busId {bus} commId 0x7f3a9c2b1e0d5a44 - Init COMPLETE\n",
    ]
    return out


def nccl_subcomm_lines(job, r, pre, k):
    h, p, l = job.host(r), job.pid(r), job.local(r)
    hdr = f"{pre}{h}:{p}:{p + 391 + k % 7} [{l}] NCCL INFO "
    c = 0x55d0c1a00000 + (k * 4096 + r) * 0x1000
    return (f"{hdr}comm 0x{c:x} rank {l} nRanks {GPUS_PER_NODE} nNodes 1 localRanks {GPUS_PER_NODE} localRank {l} MNNVL 0\n"
            f"{hdr}ncclCommInitRank comm 0x{c:x} rank {l} nranks {GPUS_PER_NODE} cudaDev {l} nvmlDev {l} busId {0x18 + l * 0x11:x}000 commId 0x{0x1b2c3d4e5f600000 + k:x} - Init COMPLETE\n")


def warning_lines(job, r, pre, t, k):
    if k % 3 == 0:
        return (f"{pre}/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:295: FutureWarning: `torch.cpu.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cpu', args...)` instead.\n"
                f"{pre}  with torch.enable_grad(), device_autocast_ctx, torch.cpu.amp.autocast(**ctx.cpu_autocast_kwargs):  # type: ignore[attr-defined]\n")
    if k % 3 == 1:
        return f"{pre}{job.pyts(t, r)} WARNING [rank{r}] data - slow batch: waited {1.5 + (k % 40) / 10:.1f}s for the prefetch queue (num_workers=8)\n"
    return f"{pre}{job.pyts(t, r)} WARNING [rank{r}] trainer - grad_norm {12.0 + (k % 90) / 10:.2f} above clip threshold 1.0, clipping\n"


def tqdm_line(job, pre, step, total_steps):
    parts = []
    for i in range(10):
        s = max(0, step - 9 + i)
        pct = s * 100 // max(1, total_steps)
        filled = pct // 10
        bar = "\u2588" * filled + " " * (10 - filled)
        el = int(s * STEP_SECONDS)
        rem = int((total_steps - s) * STEP_SECONDS)
        parts.append(f"Epoch 0: {pct:3d}%|{bar}| {s}/{total_steps} [{el // 3600}:{el // 60 % 60:02d}:{el % 60:02d}<{rem // 3600}:{rem // 60 % 60:02d}:{rem % 60:02d},  0.73it/s, loss={job.losses[s % 997][:4]}]")
    return pre + "\r".join(parts) + "\n"


def step_block(job, pres, ranks, step, total_steps, order_seed):
    """All the lines the given ranks print around one optimizer step."""
    t = job.t(step)
    py = job.clock.parts(t)["py"]
    ms, losses = job.ms, job.losses
    base_ms = int(t * 1000)
    ss = str(step)
    lr = "3e-4" if step > 2000 else f"{3e-4 * step / 2000:.2e}"
    tail = f" lr {lr} tok/s "
    out = [f"{pres[r]}{py},{ms[(base_ms + r * 7) % 1000]} INFO    [rank{r}] trainer - step {ss} loss {losses[(step * 31 + r * 17) % 997]}{tail}{41000 + (r * 131 + step * 17) % 3000}\n"
           for r in ranks]
    if order_seed is not None and len(out) > 1:
        # interleave: rotate and swap a few neighbours (deterministic, cheap)
        k = order_seed % len(out)
        out = out[k:] + out[:k]
        for i in range((order_seed % 5) + 1, len(out) - 1, 7):
            out[i], out[i + 1] = out[i + 1], out[i]
    if step % 10 == 9:
        out += [tqdm_line(job, pres[r], step, total_steps) for r in ranks if job.local(r) == 0]
    if step % 97 == 50:
        out += [warning_lines(job, r, pres[r], t, step + r) for r in ranks if (r * 2654435761 + step) % 53 == 0]
    if step % 250 == 125:
        out += [nccl_subcomm_lines(job, r, pres[r], step // 250) for r in ranks]
    return out


# ---------------------------------------------------------------------------------------------------
# Failure records.

def culprit_lines(job, t, wpre, rpre):
    """The culprit rank's own error record. wpre: launcher prefix; rpre: `[rankN]:` (c10 needs no space)."""
    r, l = job.culprit, job.local(job.culprit)
    tp = f"{wpre}{rpre} "  # excepthook prefix has a space
    if job.failure == "cuda_oom":
        frames = [
            "Traceback (most recent call last):",
            '  File "/home/user/project/train.py", line 412, in <module>',
            "    main()",
            '  File "/home/user/project/train.py", line 388, in main',
            "    loss.backward()",
            '  File "/usr/local/lib/python3.10/dist-packages/torch/_tensor.py", line 581, in backward',
            "    torch.autograd.backward(",
            '  File "/usr/local/lib/python3.10/dist-packages/torch/autograd/__init__.py", line 347, in backward',
            "    _engine_run_backward(",
            '  File "/usr/local/lib/python3.10/dist-packages/torch/autograd/graph.py", line 825, in _engine_run_backward',
            "    return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 226.00 MiB. GPU " + str(l)
            + " has a total capacity of 79.15 GiB of which 210.38 MiB is free. Including non-PyTorch memory, this process has 78.93 GiB memory in use. Of the allocated memory 76.10 GiB is allocated by PyTorch, and 1.20 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
        ]
        return [f"{tp}{f}\n" for f in frames]
    if job.failure == "xid79":
        msg = "CUDA error: unspecified launch failure"
        pg = f"[PG ID 0 PG GUID 0(default_pg) Rank {r}]"
        return [
            f"{wpre}{rpre}[{job.c10('E', t, 1)} ProcessGroupNCCL.cpp:1785] {pg} Exception (either an error or timeout) detected by watchdog at work: {job.seq0}, last enqueued NCCL work: {job.seq0 + 2}, last completed NCCL work: {job.seq0 - 1}.\n",
            f"{wpre}{rpre}[{job.c10('E', t, 2)} ProcessGroupNCCL.cpp:1834] {pg} Process group watchdog thread terminated with exception: {msg}\n",
            f"{wpre}CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n",
            f"{wpre}For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n",
            f"{wpre}Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n",
            f"{wpre}\n",
            f"{wpre}Exception raised from c10_cuda_check_implementation at /pytorch/c10/cuda/CUDAException.cpp:43 (most recent call first):\n",
            f"{wpre}frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f0c1a96c446 in /usr/local/lib/python3.10/dist-packages/torch/lib/libc10.so)\n",
            f"{wpre}frame #1: c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool) + 0x3c2 (0x7f0c1aa1b772 in /usr/local/lib/python3.10/dist-packages/torch/lib/libc10_cuda.so)\n",
            f"{wpre}frame #2: c10d::ProcessGroupNCCL::WorkNCCL::finishedGPUExecutionInternal() const + 0x56 (0x7f0bcc2b3f56 in /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so)\n",
            f"{wpre}terminate called after throwing an instance of 'c10::DistBackendError'\n",
            f"{wpre}  what():  {pg} Process group watchdog thread terminated with exception: {msg}\n",
        ]
    return []  # host_oom: the process is SIGKILLed and prints nothing


def kernel_lines(job, t, jpre_fn):
    """Node-level kernel lines (journald format) for node-level failures."""
    h = job.hosts[job.cnode]
    j = job.clock.parts(t)["journal"]
    pre = jpre_fn(f"{j} {h} kernel: ")
    l = job.local(job.culprit)
    if job.failure == "xid79":
        bus = f"{0x18 + l * 0x11:02x}"
        return [
            f"{pre}NVRM: Xid (PCI:0000:{bus}:00): 79, pid={job.pid(job.culprit)}, name=python3, GPU has fallen off the bus.\n",
            f"{pre}NVRM: GPU 0000:{bus}:00.0: GPU has fallen off the bus.\n",
            f"{pre}NVRM: A GPU crash dump has been created. If possible, please run\n",
            f"{pre}NVRM: nvidia-bug-report.sh as root to collect this data before\n",
            f"{pre}NVRM: the NVIDIA kernel module is unloaded.\n",
        ]
    if job.failure == "host_oom":
        p = job.pid(job.culprit)
        return [
            f"{pre}python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0\n",
            f"{pre}oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,global_oom,task_memcg=/system.slice/slurmstepd.scope,task=python3,pid={p},uid=1000\n",
            f"{pre}Out of memory: Killed process {p} (python3) total-vm:1873412244kB, anon-rss:1962412320kB, file-rss:1103872kB, shmem-rss:2097152kB, UID:1000 pgtables:3912456kB oom_score_adj:0\n",
        ]
    return []


def watchdog_lines(job, r, t, wpre, rpre):
    s = job.seq0
    pg = f"[PG 0 (default_pg) Rank {r}]"
    c = lambda salt: job.c10("E", t, r * 5 + salt)
    return [
        f"{wpre}{rpre}[{c(0)} ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={s}, OpType=ALLREDUCE, NumelIn=544997376, NumelOut=544997376, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.\n",
        f"{wpre}{rpre}[{c(1)} ProcessGroupNCCL.cpp:1664] {pg} Exception (either an error or timeout) detected by watchdog at work: {s}, last enqueued NCCL work: {s + 2}, last completed NCCL work: {s - 1}.\n",
        f"{wpre}{rpre}[{c(2)} ProcessGroupNCCL.cpp:1709] {pg} Timeout at NCCL work: {s}, last enqueued NCCL work: {s + 2}, last completed NCCL work: {s - 1}.\n",
        f"{wpre}{rpre}[{c(3)} ProcessGroupNCCL.cpp:621] [Rank {r}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.\n",
        f"{wpre}{rpre}[{c(4)} ProcessGroupNCCL.cpp:627] [Rank {r}] To avoid data inconsistency, we are taking the entire process down.\n",
    ]


def culprit_exit(job):
    return {"cuda_oom": (1, None), "xid79": (-6, "Signal 6 (SIGABRT)"), "host_oom": (-9, "Signal 9 (SIGKILL)")}[job.failure]


def agent_block(job, n, t_first, t_rest, is_culprit_node):
    """One node's torchelastic agent output: agent errors + the ChildFailedError block."""
    ranks = list(job.node_ranks(n))
    if is_culprit_node:
        root = job.culprit
        code, sig = culprit_exit(job)
        others = [(r, -15, "Signal 15 (SIGTERM)", t_first + 1) for r in ranks if r != root]
        t_root = t_first
    else:
        root = ranks[0]
        code, sig = -6, "Signal 6 (SIGABRT)"
        others = [(r, -6, "Signal 6 (SIGABRT)", t_rest + 0.2 + 0.01 * i) for i, r in enumerate(ranks[1:])]
        t_root = t_rest
    host = job.hosts[n]
    cl = job.clock
    out = []
    for i, (r, _, _, tt) in enumerate(others if is_culprit_node else []):
        out.append(f"W{cl.parts(tt)['c10']}.{100000 + 7919 * i:06d} {job.agent_pid[n]} torch/distributed/elastic/multiprocessing/api.py:897] Sending process {job.pid(r)} closing signal SIGTERM\n")
    c = cl.parts(t_root + 3)["c10"]
    out.append(f"E{c}.{job.ns[n % 1009][:6]} {job.agent_pid[n]} torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: {code}) local_rank: {job.local(root)} (pid: {job.pid(root)}) of binary: /usr/bin/python3\n")
    out += [
        "Traceback (most recent call last):\n",
        '  File "/usr/local/bin/torchrun", line 8, in <module>\n',
        "    sys.exit(main())\n",
        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 355, in wrapper\n',
        "    return f(*args, **kwargs)\n",
        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/run.py", line 919, in main\n',
        "    run(args)\n",
        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/run.py", line 910, in run\n',
        "    elastic_launch(\n",
        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py", line 138, in __call__\n',
        "    return launch_agent(self._config, self._entrypoint, list(args))\n",
        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py", line 269, in launch_agent\n',
        "    raise ChildFailedError(\n",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n",
        "============================================================\n",
        "/home/user/project/train.py FAILED\n",
        "------------------------------------------------------------\n",
        "Failures:\n",
    ]

    def entry(i, r, code, sig, tt):
        tb = f"Signal {sig.split()[1]} {sig.split()[2]} received by PID {job.pid(r)}" if sig else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
        return [f"[{i}]:\n", f"  time      : {cl.parts(tt)['elastic']}\n", f"  host      : {host}\n",
                f"  rank      : {r} (local_rank: {job.local(r)})\n", f"  exitcode  : {code} (pid: {job.pid(r)})\n",
                "  error_file: <N/A>\n", f"  traceback : {tb}\n"]

    if not others:
        out.append("  <NO_OTHER_FAILURES>\n")
    for i, (r, code2, sig2, tt) in enumerate(others, 1):
        out += entry(i, r, code2, sig2, tt)
    out += ["------------------------------------------------------------\n", "Root Cause (first observed failure):\n"]
    out += entry(0, root, code, sig, t_root)
    out.append("============================================================\n")
    return out


def banner():
    return ["W1130 02:00:01.512000 4211 torch/distributed/run.py:793] \n",
            "W1130 02:00:01.512000 4211 torch/distributed/run.py:793] *****************************************\n",
            "W1130 02:00:01.512000 4211 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. \n",
            "W1130 02:00:01.512000 4211 torch/distributed/run.py:793] *****************************************\n"]


# ---------------------------------------------------------------------------------------------------

class Sink:
    def __init__(self, path):
        self.f = open(path, "wb", buffering=0)
        self.buf = []
        self.size = 0  # bytes pending in buf (utf-8)
        self.written = 0

    def add(self, lines):
        s = "".join(lines).encode("utf-8")
        self.buf.append(s)
        self.size += len(s)
        if self.size >= CHUNK:
            self.flush()
        return len(s)

    def flush(self):
        if self.buf:
            self.f.write(b"".join(self.buf))
            self.written += self.size
            self.buf, self.size = [], 0

    def total(self):
        return self.written + self.size

    def close(self):
        self.flush()
        self.f.close()


POS = {"early": 0.05, "middle": 0.5, "last": 1.0}


def gen_single_file(job, a, path):
    """console or one-file layout."""
    console = a.layout == "console"
    if console:
        pres = [f"[default{job.local(r)}]:" for r in range(job.ranks)]
        rpre = lambda r: f"[rank{r}]:"
        jpre = lambda s: s                      # kernel lines merged by the log collector, as-is
        wpre_agent = lambda n: ""
    else:
        pres = [f"{r}: " for r in range(job.ranks)]
        rpre = lambda r: f"[rank{r}]:"
        jpre = lambda s: s
        wpre_agent = None
    out = Sink(path)
    target = a.total_bytes
    # header
    hdr = banner() if console else []
    for r in range(job.ranks):
        hdr += nccl_init_lines(job, r, pres[r])
    out.add(hdr)
    # size of the tail (collateral), estimated on a sample
    sample_wd = sum(len(x) for x in watchdog_lines(job, 1, job.t(0), pres[1], rpre(1)))
    tail_est = sample_wd * job.ranks + 1200 * job.nodes + 4096
    # bytes per step, measured on two steps
    probe = sum(len(x.encode()) for s in (10, 11) for x in step_block(job, pres, range(job.ranks), s, 100000, None)) // 2
    body = max(probe, target - out.total() - tail_est)
    total_steps = max(3, body // max(1, probe))
    fail_step = min(total_steps, max(1, int(total_steps * POS[a.position])))
    alive = list(range(job.ranks))
    dead = set(job.node_ranks(job.cnode))
    failed = False
    step = 0
    fail_bytes = target * POS[a.position]
    while True:
        if not failed and (out.total() >= fail_bytes - tail_est * (a.position == "last") or step >= fail_step):
            failed = True
            fail_step = step
            tf = job.t(step) + 0.4
            rec = []
            if job.failure in ("xid79", "host_oom"):
                rec += kernel_lines(job, tf - 0.3, jpre)
            rec += culprit_lines(job, tf, pres[job.culprit], rpre(job.culprit))
            if console:
                rec += agent_block(job, job.cnode, tf, None, True)
            else:
                code, _ = culprit_exit(job)
                what = {1: "Exited with exit code 1", -6: "Aborted", -9: "Killed"}[code]
                rec.append(f"srun: error: {job.hosts[job.cnode]}: task {job.culprit}: {what}\n")
            out.add(rec)
            alive = [r for r in alive if r not in dead]
        # a one-node job (8 ranks) has no rank left alive once its node failed: nothing more is printed
        if failed and (out.total() >= target - tail_est or not alive):
            break
        out.add(step_block(job, pres, alive, step, total_steps, (step * 7919) % 1000 + 1))
        step += 1
    # collateral at the end
    tend = job.t(step) + 600.06
    rec = []
    for r in alive:
        rec += watchdog_lines(job, r, tend, pres[r], rpre(r))
    if console:
        for n in range(job.nodes):
            if n != job.cnode:
                rec += agent_block(job, n, None, tend + 2, False)
    else:
        rec.append("srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n")
        rec.append(f"srun: error: {job.hosts[0 if job.cnode else 1]}: tasks 0-{job.ranks - 1}: Aborted\n")
    out.add(rec)
    out.close()
    return fail_step, step, out.written


def gen_per_rank(job, a, root):
    os.makedirs(root, exist_ok=True)
    # the culprit's node stops at the failure: spread its missing bytes over the other files
    frac = POS[a.position] if a.position != "last" else 1.0
    per_file = int(a.total_bytes / (job.ranks - len(job.node_ranks(job.cnode)) * (1 - frac)))
    probe_job_pres = [""] * job.ranks
    probe = len("".join(step_block(job, probe_job_pres, [1], 10, 100000, None)).encode())
    # tqdm/warnings/nccl sub-comm lines: averaged over 1000 steps for local rank 0 and 1
    node0 = list(range(min(GPUS_PER_NODE, job.ranks)))
    avg = sum(len("".join(step_block(job, probe_job_pres, node0, s, 100000, None)).encode()) for s in range(1000)) / (1000 * len(node0))
    init_sz = len("".join(nccl_init_lines(job, 1, "")).encode())
    wd_sz = len("".join(watchdog_lines(job, 1, job.t(0), "", "[rank1]:")).encode())
    total_steps = max(3, int((per_file - init_sz - wd_sz) / max(avg, 1)))
    fail_step = max(1, int(total_steps * POS[a.position])) if a.position != "last" else total_steps
    written = 0
    one_node = job.nodes == 1
    for r in range(job.ranks):
        n = job.node(r)
        d = os.path.join(root, "" if one_node else job.hosts[n], job.run_id, "attempt_0", str(job.local(r)))
        os.makedirs(d, exist_ok=True)
        lines = nccl_init_lines(job, r, "")
        last = fail_step if n == job.cnode else total_steps
        chunk = [lines]
        for s in range(last):
            chunk.append(step_block(job, probe_job_pres, [r], s, total_steps, None))
        flat = [x for c in chunk for x in c]
        if r == job.culprit:
            flat += culprit_lines(job, job.t(fail_step) + 0.4, "", f"[rank{r}]:")
        elif n != job.cnode:
            flat += watchdog_lines(job, r, job.t(total_steps) + 600.06, "", f"[rank{r}]:")
        data = "".join(flat).encode()
        with open(os.path.join(d, "stderr.log"), "wb") as f:
            f.write(data)
        written += len(data)
    tf = job.t(fail_step) + 0.4
    tend = job.t(total_steps) + 600.06
    # launcher console: every node's agent
    rec = banner()
    rec += agent_block(job, job.cnode, tf, None, True)
    for n in range(job.nodes):
        if n != job.cnode:
            rec += agent_block(job, n, None, tend + 2, False)
    data = "".join(rec).encode()
    with open(os.path.join(root, "launcher.log"), "wb") as f:
        f.write(data)
    written += len(data)
    if job.failure in ("xid79", "host_oom"):
        h = job.hosts[job.cnode]
        j0 = job.clock.parts(BASE_EPOCH + 5)["journal"]
        rec = [f"{j0} {h} kernel: mlx5_core 0000:{0x0c + i:02x}:00.0 mlx5_{i}: Port: 1 Link ACTIVE\n" for i in range(4)]
        rec += [f"{j0} {h} systemd[1]: Started slurmstepd.scope.\n"]
        rec += kernel_lines(job, tf - 0.3, lambda s: s)
        data = "".join(rec).encode()
        with open(os.path.join(root, f"kern-{h}.log"), "wb") as f:
            f.write(data)
        written += len(data)
    return fail_step, total_steps, written


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output file (console, one-file) or directory (per-rank)")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--total-bytes", default="100M", help="approximate total size: 100M, 2G, 4G")
    ap.add_argument("--layout", choices=["console", "per-rank", "one-file"], default="console")
    ap.add_argument("--failure", choices=sorted(KINDS), default="cuda_oom")
    ap.add_argument("--position", choices=["early", "middle", "last"], default="middle")
    ap.add_argument("--culprit-rank", type=int, default=None)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if not 8 <= a.ranks <= 1024:
        ap.error("--ranks must be in 8..1024")
    a.total_bytes = parse_size(a.total_bytes)
    job = Job(a)
    out = a.out.rstrip("/")
    if a.layout == "per-rank":
        fail_step, steps, written = gen_per_rank(job, a, out)
    else:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        fail_step, steps, written = gen_single_file(job, a, out)
    truth = {"kind": KINDS[a.failure], "failure": a.failure, "initiating_rank": job.culprit,
             "culprit_host": job.hosts[job.cnode], "layout": a.layout, "ranks": a.ranks, "position": a.position,
             "fail_step": fail_step, "steps": steps, "bytes": written, "seed": a.seed}
    with open(out + ".truth.json", "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")
    print(json.dumps(truth))


if __name__ == "__main__":
    main()
