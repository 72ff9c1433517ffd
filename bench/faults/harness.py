#!/usr/bin/python3
"""The fault matrix of real runs: launches real PyTorch jobs with one injected fault each, keeps what they
leave, checks that the fault shows, runs firstfault on the kept logs and scores it (bench/faults/README.md).

    harness.py run [--quick] [--only ID,...] --bin BIN --out results.json   the matrix (or the quick subset)
    harness.py rescore --bin BIN --out results.json                         firstfault again over kept runs
    harness.py list [--quick]                                               the run ids

Every run of the full matrix lives in build-bench/faults/runs/<id>/ (quick and --only runs in
build-bench/faults/quick/<id>/, so they never replace the full run's logs that rescore reads):
    logs/        what the job left, exactly as a user would hand it over (console capture, --log_dir tree,
                 per-node consoles, mpirun --output-filename tree, Slurm output files)
    truth.json   fault, kind (kinds.tsv of the shared corpus, or null when no kind fits), initiating_rank,
                 launch_mode, noise, seed, and how the harness saw the fault happen
    firstfault.json  the report of `firstfault diagnose logs --format json --no-history`
The job itself runs in a neutral folder (/tmp/ffjob/job-<hex>) whose name says nothing of the fault, and its
logs are copied into logs/ afterwards, so no path in a log names the fault.

Sources of the behaviour and formats relied on (all observed on this machine, Debian 12):
  * torchrun / torch.distributed.launch of PyTorch 1.13 (python3-torch 1.13.1+dfsg-4): `--tee`/`--redirects`
    prefix `[{role}{local_rank}]:` and the `--log_dir` tree `<log_dir>/<rdzv_id>_<rand>/attempt_0/<rank>/
    {stdout,stderr}.log` (torch/distributed/elastic/multiprocessing/api.py, tail_log.py); the agent's
    "failed (exitcode: N)" and ChildFailedError block (elastic/multiprocessing/errors/__init__.py); the
    c10d rendezvous (elastic/rendezvous/c10d_rendezvous_backend.py, `join_timeout` in rdzv_conf) and the
    agent's SIGTERM-then-SIGKILL shutdown of its workers (api.py `_close`, 30 s). Debian's build needs
    launch.py (a one-method fix of Std.from_str for Python 3.11, see there).
  * gloo's errors (third_party/gloo/gloo/transport/tcp/{pair.cc,unbound_buffer.cc}): "Timed out waiting
    Nms for recv operation to complete", "Connection closed by peer", "op.preamble.length <= op.nbytes".
  * Open MPI 4.1 mpirun(1): `--tag-output` prefix `[jobid,rank]<stdout>:`, `--output-filename DIR` tree
    DIR/1/rank.N/{stdout,stderr}, OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK.
  * Slurm 22.05 sbatch(1)/srun(1): `-o %x-%j.out`, `srun -l` prefix `N: `, `--kill-on-bad-exit`; the one-node
    cluster is started as tests/cluster/slurm_test.sh (part 2) does (slurm.py).
  * The emulated cgroup OOM killer: like the kernel's memcg OOM kill it sends SIGKILL to the process using
    the memory and prints nothing in the job's logs (reference/log_formats.md section 7: exit -9 is all the
    job shows); it is a thread of this harness reading /proc/PID/status VmRSS.
  * Scoring follows the shared corpus scorer (../shared/tools/score_corpus.py): kind right when the report's
    root_cause.kind is the truth's kind; a healthy truth is right only with verdict "healthy"; "undetermined"
    is an abstention; rank scored when the truth names one; failed runs called healthy counted apart.
"""
import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT_ROOT = ROOT / "build-bench" / "faults"
RUNS = OUT_ROOT / "runs"
JOB_ROOT = Path("/tmp/ffjob")
PY = "/usr/bin/python3"
TRAIN = HERE / "train.py"
LAUNCH = HERE / "launch.py"
TIMEOUT = 10  # the collective (gloo) timeout of every job, seconds
RUN_LIMIT = 150  # a run still going after this long is stopped (and checked like any other)

# ---- the matrix ------------------------------------------------------------------------------------------
MODES = ["torchrun_plain", "torchrun_tee", "torchrun_redirects", "torchrun_2agents", "torchrun_3agents",
         "legacy_launch", "mpirun_tag", "mpirun_outfile", "srun", "json_logging", "tqdm"]
MULTI = {"torchrun_2agents": 2, "torchrun_3agents": 3}
NOISES = ["quiet", "warnings", "retried", "runtime_text", "nccl_info"]

# fault -> (kind or None when no kind of kinds.tsv fits, rank policy, note)
#   rank policy: "fault" = the injected rank, "zero" = rank 0 does it, None = no rank initiates it,
#   "unseen" = injected on one rank, but no line the job leaves can tell which (initiating_rank null, so a
#   label never claims what the logs cannot show)
FAULTS = {
    "main_exception": ("rank_exception", "fault", "KeyError raised in the training loop"),
    "dataloader_exception": ("rank_exception", "fault", "ValueError in a DataLoader worker, re-raised by the main process"),
    "thread_exception": ("rank_exception", "fault",
                         "KeyError in a helper (prefetch) thread: Python prints 'Exception in thread' and the thread "
                         "dies, the rank's main loop blocks on the thread's queue, the other ranks time out"),
    "os_exit": (None, "fault", "os._exit(3) without a traceback: no kind of kinds.tsv is an exit without a message"),
    "oom_sigkill": ("host_oom_sigkill", "fault", "memory grows 48 MiB a step until an emulated cgroup OOM killer sends SIGKILL"),
    "segfault": ("process_segfault", "fault", "ctypes.string_at(0): SIGSEGV in native code"),
    "sigstop": (None, "fault", "the rank stops itself (SIGSTOP): a hung rank; the others time out; no kind fits "
                "(not slow but stopped; straggler_timeout is the nearest)"),
    "exclusive_checkpoint": ("rank0_exclusive_work_timeout", "zero", "rank 0 saves a checkpoint alone past the timeout"),
    "exclusive_eval": ("rank0_exclusive_work_timeout", "zero", "rank 0 evaluates alone past the timeout"),
    "exclusive_tokenize": ("rank0_exclusive_work_timeout", "zero", "rank 0 tokenizes alone past the timeout"),
    "extra_collective": ("collective_count_mismatch", "unseen", "one extra all_reduce on one rank (in the logs the same "
                         "as one skipped on the other rank: no rank labelled)"),
    "missing_collective": ("collective_count_mismatch", "unseen", "one all_reduce skipped on one rank (in the logs the "
                           "same as an extra one on the other rank: no rank labelled)"),
    "type_mismatch": ("collective_type_mismatch", "unseen", "broadcast on one rank where the others all_reduce; both "
                      "time out and no line says which called what: no rank labelled"),
    "shape_mismatch": ("collective_shape_mismatch", "fault", "all_reduce of 3 elements where the others reduce 1"),
    "dtype_mismatch": ("collective_dtype_mismatch", "unseen", "all_reduce of float64 where the others reduce float32; "
                       "the gloo abort is on the receiver, no line names the float64 rank: no rank labelled"),
    "uneven_batches": ("uneven_batches_collective_hang", "fault", "one rank's shard has fewer batches"),
    "nan_loss": ("loss_nan", "unseen", "the loss becomes NaN on one rank; the job runs on and exits 0. The logged loss "
                 "is reduced over the ranks first, so every rank prints nan at the same step: no rank labelled"),
    "disk_full": ("disk_full_checkpoint", "zero", "checkpoint directory on a 16 KiB tmpfs"),
    "readonly_ckpt": ("disk_full_checkpoint", "zero", "checkpoint directory is a read-only bind mount"),
    "straggler": ("straggler_timeout", "fault", "one rank's input pipeline slows down (0.8 s, 1.6 s, ...) until a collective times out"),
    "port_in_use": ("rendezvous_port_in_use", None, "the rendezvous/master port is held by another process before launch"),
    "node_killed": ("node_failure", "fault", "one agent of a multi-node job and its worker SIGKILLed mid-run"),
    "never_joins": ("rendezvous_timeout", None, "one node of a multi-node job never starts; the others wait for it"),
}
MULTI_ONLY = {"node_killed", "never_joins"}
QUICK = ["000", "005", "013", "016", "075", "030", "046", "063", "082", "099", "118", "136", "150", "166", "181", "199"]


def matrix():
    """The full matrix, a fixed list: (id, mode, fault, noise). Each mode gets most faults (a Latin-square
    thinning keeps the run count near 200) and three healthy runs with rotating noise profiles."""
    rows = []
    faults = list(FAULTS)
    for mi, mode in enumerate(MODES):
        for fi, fault in enumerate(faults):
            if fault in MULTI_ONLY and mode not in MULTI:
                continue
            if fault not in MULTI_ONLY and (mi + fi) % 4 == 3:
                continue
            rows.append((mode, fault, NOISES[(mi * 3 + fi) % len(NOISES)]))
        for k in range(3):
            rows.append((mode, "none", NOISES[(mi + k * 2) % len(NOISES)]))
    out = []
    for n, (mode, fault, noise) in enumerate(rows):
        if mode in MULTI:
            noise = "store" if noise == "quiet" else "store+" + noise
        out.append((f"{n:03d}-{mode}-{fault}-{noise}", mode, fault, noise))
    return out


def plan(run_id, mode, fault, noise):
    """Seeded choices of a run, reproducible from its id."""
    seed = int(hashlib.sha256(run_id.encode()).hexdigest()[:8], 16)
    rnd = random.Random(seed)
    world = MULTI.get(mode, 2)
    kind, policy, note = FAULTS.get(fault, ("healthy", None, "no fault"))
    r = rnd.randrange(world)  # drawn for every policy: the draws that follow stay the same
    frank = {"fault": r, "unseen": r, "zero": 0, None: None}[policy]
    if fault == "node_killed":
        frank = rnd.randrange(1, world)  # the node that dies is not the one hosting the rendezvous store
    if fault == "port_in_use" and (mode.startswith("mpirun") or mode == "srun"):
        policy, frank = "zero", 0  # no launcher store here: rank 0's init_process_group fails to bind MASTER_PORT
    fstep = rnd.randint(4, 9)
    style = {"json_logging": "json", "tqdm": "tqdm"}.get(mode, "plain")
    return {"id": run_id, "launch_mode": mode, "fault": fault, "noise": noise, "kind": kind,
            "initiating_rank": frank if policy in ("fault", "zero") else None, "fault_rank": frank, "fault_step": fstep,
            "world_size": world, "style": style, "seed": seed, "note": note,
            "script_noise": noise.replace("store+", "").replace("store", "quiet")}


# ---- processes -------------------------------------------------------------------------------------------
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port):
    """True when something listens on TCP port `port` (read from /proc/net/tcp{,6}; no connection made)."""
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            for line in open(f).read().splitlines()[1:]:
                p = line.split()
                if p[3] == "0A" and int(p[1].rsplit(":", 1)[1], 16) == port:
                    return True
        except OSError:
            pass
    return False


def wait_until(pred, limit, step=0.1):
    end = time.time() + limit
    while time.time() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


def marked_pids(marker):
    """Processes whose environment carries FF_BENCH_RUN=<marker> (every process a run starts inherits it)."""
    want = f"FF_BENCH_RUN={marker}".encode()
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            try:
                if want in open(f"/proc/{d}/environ", "rb").read().split(b"\0"):
                    pids.append(int(d))
            except OSError:
                pass
    return pids


def kill_marked(marker):
    for _ in range(50):
        pids = marked_pids(marker)
        if not pids:
            return
        for p in pids:
            for sig in (signal.SIGKILL, signal.SIGCONT):
                try:
                    os.kill(p, sig)
                except OSError:
                    pass
        time.sleep(0.1)


class Job:
    """The processes of one run, each in its own process group, all marked by FF_BENCH_RUN."""

    def __init__(self, marker, cwd):
        self.marker, self.cwd, self.procs = marker, cwd, []

    def start(self, cmd, console, env=None):
        e = dict(os.environ, FF_BENCH_RUN=self.marker, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
        e.pop("PYTHONPATH", None)
        e.update(env or {})
        f = open(console, "wb")
        p = subprocess.Popen([str(c) for c in cmd], cwd=self.cwd, env=e, stdout=f, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        f.close()
        self.procs.append(p)
        return p

    def wait(self, deadline):
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                return False
        return True

    def terminate(self, grace=15):
        """What a user's Ctrl-C or a scheduler's stop does: SIGTERM to each launcher still running, which
        then shuts its workers down itself; returns once they are gone or `grace` seconds passed."""
        live = [p for p in self.procs if p.poll() is None]
        for p in live:
            try:
                os.kill(p.pid, signal.SIGTERM)
            except OSError:
                pass
        return self.wait(time.time() + grace)

    def kill(self):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        kill_marked(self.marker)


def rss_mib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


class OomKiller(threading.Thread):
    """An emulated cgroup OOM killer: SIGKILLs the rank once its memory grew `limit` MiB past its start."""

    def __init__(self, ctl, rank, limit=320):
        super().__init__(daemon=True)
        self.ctl, self.rank, self.limit, self.stop, self.killed = ctl, rank, limit, threading.Event(), None

    def run(self):
        pidf = self.ctl / f"pid.{self.rank}"
        base = None
        while not self.stop.is_set():
            if pidf.exists():
                try:
                    pid = int(pidf.read_text())
                except ValueError:
                    pid = None
                r = rss_mib(pid) if pid else None
                if r is not None:
                    base = r if base is None else min(base, r)
                    if r - base > self.limit:
                        os.kill(pid, signal.SIGKILL)
                        self.killed = {"pid": pid, "rss_mib": round(r), "at": time.time()}
                        return
            time.sleep(0.05)


# ---- one run ---------------------------------------------------------------------------------------------
def train_args(t, work, ctl):
    return [work / "train.py", "--fault", t["fault"], "--fault-rank", t["fault_rank"] if t["fault_rank"] is not None else -1,
            "--fault-step", t["fault_step"], "--noise", t["script_noise"], "--style", t["style"], "--seed", t["seed"],
            "--steps", 20, "--step-time", 0.1, "--timeout", TIMEOUT, "--ckpt-dir", work / "checkpoints",
            "--ckpt-every", 8, "--ctl", ctl]


def torchrun(*a):
    return [PY, LAUNCH, "run", "--monitor_interval", "1", *a]


def run_one(t, slurm, keep_dir):
    """Runs one job; returns the harness's observations (exit codes, what it did, timings)."""
    marker = f"{t['seed']:08x}"
    work = JOB_ROOT / f"job-{marker}"
    shutil.rmtree(work, ignore_errors=True)
    logs = work / "logs"
    ctl = keep_dir / "ctl"
    shutil.rmtree(ctl, ignore_errors=True)
    logs.mkdir(parents=True)
    ctl.mkdir(parents=True)
    shutil.copy(TRAIN, work / "train.py")
    ck = work / "checkpoints"
    ck.mkdir()
    mode, fault = t["launch_mode"], t["fault"]
    obs = {"mounted": None, "exit": {}, "actions": []}
    mounts = []
    holder = None
    oom = None
    job = Job(marker, work)
    port = free_port()
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    t0 = time.time()
    deadline = t0 + RUN_LIMIT
    targs = train_args(t, work, ctl)
    try:
        if fault == "disk_full":
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k,mode=0777", "ffbench", ck], check=True)
            mounts.append(ck)
        elif fault == "readonly_ckpt":
            subprocess.run(["mount", "--bind", ck, ck], check=True)
            mounts.append(ck)
            subprocess.run(["mount", "-o", "remount,bind,ro", ck], check=True)
        if fault == "port_in_use":
            holder = socket.socket()
            holder.bind(("127.0.0.1", port))
            holder.listen(16)
            obs["actions"].append(f"port {port} held (listening) before launch")
        if fault == "oom_sigkill":
            oom = OomKiller(ctl, t["fault_rank"])
            oom.start()

        if mode in ("torchrun_plain", "json_logging", "tqdm"):
            job.start(torchrun("--nproc_per_node", 2, "--master_port", port, *targs), logs / "console.log")
        elif mode == "torchrun_tee":
            job.start(torchrun("--nproc_per_node", 2, "--master_port", port, "--tee", 3, "--log_dir",
                               logs / "torchelastic", *targs), logs / "console.log")
        elif mode == "torchrun_redirects":
            job.start(torchrun("--nproc_per_node", 2, "--master_port", port, "--redirects", 3, "--log_dir",
                               logs / "torchelastic", *targs), logs / "console.log")
        elif mode == "legacy_launch":
            job.start([PY, LAUNCH, "launch", "--nproc_per_node", 2, "--master_port", port, *targs],
                      logs / "console.log")
        elif mode in ("mpirun_tag", "mpirun_outfile"):
            out = ["--tag-output"] if mode == "mpirun_tag" else ["--output-filename", logs / "mpi"]
            job.start(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", 2, "--mca", "oob_tcp_if_include", "lo",
                       "--mca", "btl_tcp_if_include", "lo", "-x", "MASTER_ADDR", "-x", "MASTER_PORT",
                       "-x", "FF_BENCH_RUN", "-x", "PYTHONUNBUFFERED", "-x", "OMP_NUM_THREADS", *out, PY, *targs],
                      logs / "console.log", env)
        elif mode in MULTI:
            n = MULTI[mode]
            starts = n - 1 if fault == "never_joins" else n
            rid = f"job{marker}"
            for i in range(starts):
                job.start(torchrun("--nnodes", n, "--nproc_per_node", 1, "--rdzv_backend", "c10d",
                                   "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", rid,
                                   "--rdzv_conf", "join_timeout=20,last_call_timeout=1", "--tee", 3, *targs),
                          logs / f"node{i}.log")
                if i == 0 and fault != "port_in_use":
                    # the first agent hosts the c10d store: start the others once it listens (a real
                    # cluster's agents start in any order; the later ones retry their connection)
                    if not wait_until(lambda: listening(port), 30):
                        obs["actions"].append("agent 0 did not listen within 30 s")
            if fault == "never_joins":
                obs["actions"].append(f"node {n - 1} of {n} never started")
        elif mode == "srun":
            script = work / "train.sbatch"
            script.write_text("#!/bin/bash\n#SBATCH -J train\n#SBATCH -n 2\n"
                              f"export MASTER_ADDR=127.0.0.1 MASTER_PORT={port}\n"
                              "srun -l --kill-on-bad-exit=1 " + " ".join(map(str, [PY, *targs])) + "\n")
            obs["slurm_job"] = slurm.submit(script, work, logs / "%x-%j.out", dict(os.environ, FF_BENCH_RUN=marker,
                                                                                   PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1"))
        else:
            raise ValueError(mode)

        if fault == "node_killed":
            # kill the agent (the "node") hosting the faulty rank once the job is past a few steps
            pidf = ctl / f"pid.{t['fault_rank']}"
            wait_until(lambda: step_of(ctl, t["fault_rank"]) >= t["fault_step"] or job_done(job), 60)
            pid = int(pidf.read_text()) if pidf.exists() else None
            agent = ppid(pid) if pid else None
            for p in job.procs:
                if agent and p.pid == agent:
                    os.killpg(p.pid, signal.SIGKILL)
                    obs["actions"].append(f"SIGKILL to the agent (pid {agent}) of rank {t['fault_rank']} and its worker")
                    (ctl / f"fault.{t['fault_rank']}").write_text(f"{time.time():.3f} node killed\n")
        done = (lambda: slurm.done(obs["slurm_job"])) if mode == "srun" else (lambda: job_done(job))
        why = watch(done, logs, deadline)
        if why:
            # A job that hangs: the user stops it, as one would (scancel; Ctrl-C / kill to the launcher, and
            # kill -9 when it does not react: torchelastic's agent waits in its exit barrier, 300 s in 1.13,
            # elastic/agent/server/api.py _exit_barrier, deaf to SIGTERM while in the store's C++ wait).
            obs["actions"].append(why)
            if mode == "srun":
                slurm.cancel(obs["slurm_job"])
                obs["actions"].append("scancel")
            elif not job.terminate(grace=10):
                obs["actions"].append("launcher(s) still running 10 s after SIGTERM: SIGKILL")
        if fault == "sigstop":
            obs["sigstop_seen"] = (ctl / f"fault.{t['fault_rank']}").exists()
        if oom is not None:
            obs["oom_kill"] = oom.killed
            if oom.killed:
                obs["actions"].append(f"emulated OOM killer: SIGKILL to rank {t['fault_rank']} (pid {oom.killed['pid']}, RSS {oom.killed['rss_mib']} MiB)")
    finally:
        if oom is not None:
            oom.stop.set()
        if mode == "srun" and obs.get("slurm_job"):
            slurm.cancel(obs["slurm_job"])
        job.kill()
        if holder is not None:
            holder.close()
        for m in reversed(mounts):
            subprocess.run(["umount", "-l", m], check=False)
    obs["exit"] = {str(i): p.returncode for i, p in enumerate(job.procs)}
    if mode == "srun" and obs.get("slurm_job"):
        obs["exit"] = {"0": slurm.exit_code(obs["slurm_job"])}
    obs["seconds"] = round(time.time() - t0, 1)
    obs["injected"] = {f.name: f.read_text().strip() for f in sorted(ctl.glob("fault.*"))}
    dst = keep_dir / "logs"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(logs, dst, symlinks=True)
    shutil.rmtree(work, ignore_errors=True)
    return obs


STALL = 30  # seconds without a new byte in any log while the job runs: the job hangs


def log_bytes(logs):
    n = 0
    for p in logs.rglob("*"):
        try:
            n += p.stat().st_size
        except OSError:
            pass
    return n


def watch(done, logs, deadline):
    """Waits for the job to end; returns None, or why the user would stop it now (no output for STALL
    seconds, or the run's time limit)."""
    last, since = -1, time.time()
    while not done():
        now = time.time()
        if now >= deadline:
            return f"still running after {RUN_LIMIT} s: SIGTERM to the launcher(s)"
        n = log_bytes(logs)
        if n != last:
            last, since = n, now
        elif now - since >= STALL:
            return f"no new output for {STALL} s while the job still ran (it hangs): the user stops it"
        time.sleep(0.25)
    return None


def step_of(ctl, rank):
    try:
        return int((ctl / f"step.{rank}").read_text())
    except (OSError, ValueError):
        return -1


def job_done(job):
    return all(p.poll() is not None for p in job.procs)


def ppid(pid):
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


# ---- the check: is the fault visible in what the job left? ----------------------------------------------
def all_text(logs):
    parts = []
    for p in sorted(Path(logs).rglob("*")):
        if p.is_file():
            parts.append(p.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


HANG = r"Timed out waiting \d+ms|Connection closed by peer|Connection reset by peer|enforce fail"
EXIT_SIG = {  # how each launcher reports a rank killed by signal N / exiting with status N
    "torchrun": lambda n, sig: (rf"exitcode\s*: -{n}\b|Signal {n} \(SIG" if sig else rf"exitcode\s*: {n}\b"),
    "mpirun": lambda n, sig: (rf"exited on signal {n}\b" if sig else rf"Exit code:\s+{n}\b"),
    "srun": lambda n, sig: ({9: r"task \d+: Killed", 11: r"task \d+: Segmentation fault"}.get(n, rf"signal {n}\b") if sig
                            else rf"task \d+: Exited with exit code {n}"),
}


def launcher_of(mode):
    return "mpirun" if mode.startswith("mpirun") else "srun" if mode == "srun" else "torchrun"


def check(t, obs, logs):
    """Returns None when the fault happened and shows in the kept logs, else why the run is discarded."""
    # mpirun --tag-output tags every write(), and an unbuffered Python writes a traceback line in pieces:
    # "KeyError[1,0]<stderr>:: [1,0]<stderr>:'tok_6'". The text is there; match it with the tags taken out.
    text = re.sub(r"\[\d+,\d+\]<std(?:out|err)>:", "", all_text(logs))
    fault, mode = t["fault"], t["launch_mode"]
    L = EXIT_SIG[launcher_of(mode)]
    finished = len(re.findall(r"training finished: \d+ steps", text))
    failed_exit = any(v not in (0, None) for v in obs["exit"].values())
    if fault == "none":
        if failed_exit or finished < t["world_size"]:
            return f"healthy run did not finish cleanly (exit {obs['exit']}, {finished} ranks finished)"
        return None
    harness_side = {"port_in_use", "never_joins", "node_killed", "oom_sigkill"}
    if fault not in harness_side and not obs["injected"]:
        return "the fault was never injected (no fault marker from the rank)"
    if fault == "nan_loss":
        if "loss nan" not in text:
            return "no non-finite loss in the logs"
        return None if not failed_exit else f"job did not exit 0 ({obs['exit']})"
    if not failed_exit and fault != "never_joins":
        return f"job exited 0 ({obs['exit']})"
    need = {
        "main_exception": [r"KeyError: 'tok_\d+'"],
        "dataloader_exception": [r"Caught ValueError in DataLoader worker process", r"expected 3 channels, got 4"],
        "thread_exception": [r"Exception in thread prefetch", r"KeyError: \"augmentation policy"],
        "os_exit": [L(3, False)],
        "oom_sigkill": [L(9, True)],
        "segfault": [L(11, True)],
        "sigstop": [HANG],
        "exclusive_checkpoint": [r"saving full checkpoint to", HANG],
        "exclusive_eval": [r"running evaluation on the validation set", HANG],
        "exclusive_tokenize": [r"tokenizing the evaluation corpus", HANG],
        "extra_collective": [HANG],
        "missing_collective": [HANG],
        "type_mismatch": [HANG],
        "shape_mismatch": [r"reducing 3 metric values", HANG],
        "dtype_mismatch": [HANG],
        "uneven_batches": [rf"dataset: {t['fault_step'] * 4} samples", HANG],
        "disk_full": [r"No space left on device|file write failed"],
        "readonly_ckpt": [r"Read-only file system|cannot be opened|Permission denied"],
        "straggler": [r"data loading took", HANG],
        "port_in_use": [r"Address already in use|errno: 98|EADDRINUSE|timed out|Timed out"],
        "node_killed": [HANG + r"|RendezvousClosedError|Connection refused|connection to the C10d store"],
        "never_joins": [r"RendezvousTimeoutError|rendezvous.*timed out|RendezvousClosedError"],
    }[fault]
    for rx in need:
        if not re.search(rx, text, re.I if fault in ("port_in_use", "never_joins") else 0):
            return f"not in the logs: /{rx}/"
    if fault == "oom_sigkill" and not obs.get("oom_kill"):
        return "the emulated OOM killer did not fire"
    if fault == "node_killed" and not any("SIGKILL to the agent" in a for a in obs["actions"]):
        return "no agent was killed"
    if fault == "sigstop" and not obs.get("sigstop_seen"):
        return "the rank never stopped"
    return None


# ---- firstfault ------------------------------------------------------------------------------------------
def diagnose(binary, run_dir):
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, XDG_DATA_HOME=home, NO_COLOR="1")
        try:
            p = subprocess.run([binary, "diagnose", "logs", "--format", "json", "--no-history"], cwd=run_dir,
                               env=env, capture_output=True, timeout=120)
        except (subprocess.TimeoutExpired, OSError):
            return None
    try:
        rep = json.loads(p.stdout.decode("utf-8", "replace"))
    except json.JSONDecodeError:
        return None
    (Path(run_dir) / "firstfault.json").write_text(json.dumps(rep, indent=1))
    return rep


def score_row(truth, rep):
    row = {k: truth[k] for k in ("id", "launch_mode", "fault", "noise", "kind", "initiating_rank")}
    if rep is None:
        row.update(verdict="error", got_kind=None, got_rank=None)
        return row
    verdict = rep.get("verdict")
    root = rep.get("root_cause") or {}
    row.update(verdict=verdict, got_kind="healthy" if verdict == "healthy" else root.get("kind"),
               got_rank=rep.get("initiating_rank"))
    return row


def tally(rows):
    s = dict(runs=len(rows), kind_scored=0, kind_right=0, kind_wrong=0, undetermined=0, unlabelled=0,
             rank_known=0, rank_right=0, failed=0, failed_called_healthy=0, healthy=0, false_alarms=0)
    for r in rows:
        if r["kind"] == "healthy":
            s["healthy"] += 1
            s["false_alarms"] += r["verdict"] != "healthy"
        else:
            s["failed"] += 1
            s["failed_called_healthy"] += r["verdict"] == "healthy"
        if r["kind"] is None:
            s["unlabelled"] += 1  # no kind fits: the kind is not scored (README)
        else:
            s["kind_scored"] += 1
            if r["verdict"] == "undetermined":
                s["undetermined"] += 1
            elif r["got_kind"] == r["kind"]:
                s["kind_right"] += 1
            else:
                s["kind_wrong"] += 1
        if isinstance(r["initiating_rank"], int):
            s["rank_known"] += 1
            s["rank_right"] += r["got_rank"] == r["initiating_rank"]
    s["kind_right_pct"] = round(100.0 * s["kind_right"] / s["kind_scored"], 1) if s["kind_scored"] else None
    s["rank_right_pct"] = round(100.0 * s["rank_right"] / s["rank_known"], 1) if s["rank_known"] else None
    return s


def summarize(rows, discarded):
    by = lambda key: {v: tally([r for r in rows if r[key] == v]) for v in sorted({r[key] for r in rows})}
    return {"overall": tally(rows), "discarded": {"count": len(discarded), "runs": discarded},
            "launch_modes": len({r["launch_mode"] for r in rows}),
            "faults": len({r["fault"] for r in rows} - {"none"}),
            "by_launch_mode": by("launch_mode"), "by_fault": by("fault"), "by_noise": by("noise")}


def version(binary):
    p = subprocess.run([binary, "--version"], capture_output=True, text=True)
    return p.stdout.strip()


def write_results(out, binary, rows, discarded):
    doc = {"firstfault": version(binary), "runs": rows, "summary": summarize(rows, discarded)}
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def fmt(s):
    k = f"{s['kind_right']}/{s['kind_scored']}" + (f" ({s['kind_right_pct']:.0f}%)" if s["kind_scored"] else "")
    r = f"{s['rank_right']}/{s['rank_known']}" if s["rank_known"] else "-"
    return (f"kind {k}, undetermined {s['undetermined']}; rank {r}; failed called healthy "
            f"{s['failed_called_healthy']}/{s['failed']}; false alarms {s['false_alarms']}/{s['healthy']}")


# ---- commands --------------------------------------------------------------------------------------------
def private_bin(binary):
    """A copy of the binary for this session: the team may relink build/firstfault while the matrix runs."""
    src = Path(binary).resolve()
    end = time.time() + 600
    while not os.access(src, os.X_OK) and time.time() < end:
        time.sleep(1)
    OUT_ROOT.mkdir(parents=True, exist_ok=True)
    dst = OUT_ROOT / f"firstfault.{os.getpid()}"
    shutil.copy2(src, dst)
    return str(dst)


def cmd_run(a):
    rows_all = matrix()
    if a.quick:
        rows_all = [r for r in rows_all if r[0][:3] in QUICK]
    if a.only:
        want = set(a.only.split(","))
        rows_all = [r for r in rows_all if r[0] in want or r[0][:3] in want]
    global RUNS
    if a.replace:
        if not a.only:
            raise SystemExit("--replace goes with --only")
        # rerun chosen runs of the full matrix in place (then `rescore` rebuilds results.json from runs/)
    elif a.quick or a.only:
        RUNS = OUT_ROOT / "quick"  # the full run's kept logs (runs/, read by rescore) stay as they are
    else:
        shutil.rmtree(RUNS, ignore_errors=True)  # a full run replaces the previous one
    binary = private_bin(a.bin)
    RUNS.mkdir(parents=True, exist_ok=True)
    JOB_ROOT.mkdir(parents=True, exist_ok=True)
    slurm = None
    rows, discarded = [], []
    try:
        if any(m == "srun" for _, m, _, _ in rows_all):
            from slurm import Slurm
            slurm = Slurm(OUT_ROOT / "slurm")
            slurm.start()
        for i, (rid, mode, fault, noise) in enumerate(rows_all):
            t = plan(rid, mode, fault, noise)
            keep = RUNS / rid
            shutil.rmtree(keep, ignore_errors=True)
            keep.mkdir(parents=True)
            obs = run_one(t, slurm, keep)
            why = check(t, obs, keep / "logs")
            truth = dict(t, harness=obs, discarded=why)
            (keep / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
            if why:
                discarded.append({"id": rid, "why": why})
                print(f"[{i + 1}/{len(rows_all)}] {rid}: DISCARDED ({why}) {obs['seconds']}s", flush=True)
                continue
            rep = diagnose(binary, keep)
            row = score_row(t, rep)
            rows.append(row)
            ok = "ok" if (row["got_kind"] == row["kind"]) else "--"
            print(f"[{i + 1}/{len(rows_all)}] {rid}: {obs['seconds']}s want {row['kind']}/{row['initiating_rank']} "
                  f"got {row['verdict']} {row['got_kind']}/{row['got_rank']} {ok}", flush=True)
    finally:
        if slurm is not None:
            slurm.stop()
    doc = write_results(a.out, binary, rows, discarded)
    print("overall:", fmt(doc["summary"]["overall"]), f"; discarded {len(discarded)}")
    return 0


def cmd_rescore(a):
    binary = private_bin(a.bin)
    rows, discarded = [], []
    order = {rid: n for n, (rid, _, _, _) in enumerate(matrix())}
    for d in sorted(RUNS.iterdir(), key=lambda p: order.get(p.name, 10 ** 6)):
        tf = d / "truth.json"
        if not tf.is_file():
            continue
        t = json.loads(tf.read_text())
        old = dict(t)
        # the labels again from the run's id (plan() is deterministic; the fault rank and step are the same)
        p = plan(t["id"], t["launch_mode"], t["fault"], t["noise"])
        assert (p["fault_rank"], p["fault_step"], p["seed"]) == (t["fault_rank"], t["fault_step"], t["seed"]), t["id"]
        t.update({k: p[k] for k in ("kind", "initiating_rank", "note")})
        t["discarded"] = check(t, t["harness"], d / "logs")  # it reads only the kept logs and observations
        if t != old:
            tf.write_text(json.dumps(t, indent=1) + "\n")
        if t.get("discarded"):
            discarded.append({"id": t["id"], "why": t["discarded"]})
            continue
        rows.append(score_row(t, diagnose(binary, d)))
    if not rows:
        print(f"rescore: no kept runs under {RUNS}", file=sys.stderr)
        return 2
    doc = write_results(a.out, binary, rows, discarded)
    print(f"rescored {len(rows)} runs; overall:", fmt(doc["summary"]["overall"]), f"; discarded {len(discarded)}")
    return 0


# ---- tables ----------------------------------------------------------------------------------------------
def table(title, groups):
    lines = [f"| {title} | runs | kind right | undetermined | rank right | failed called healthy | false alarms |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, s in groups.items():
        k = f"{s['kind_right']}/{s['kind_scored']}" + (f" ({s['kind_right_pct']:.0f}%)" if s["kind_scored"] else "")
        if not s["kind_scored"]:
            k = "- (no kind fits)"
        r = f"{s['rank_right']}/{s['rank_known']}" if s["rank_known"] else "-"
        fch = f"{s['failed_called_healthy']}/{s['failed']}" if s["failed"] else "-"
        fa = f"{s['false_alarms']}/{s['healthy']}" if s["healthy"] else "-"
        lines.append(f"| {name} | {s['runs']} | {k} | {s['undetermined']} | {r} | {fch} | {fa} |")
    return "\n".join(lines)


def replace_between(path, begin, end, text):
    p = Path(path)
    doc = p.read_text()
    i, j = doc.find(begin), doc.find(end)
    if i < 0 or j < i:
        print(f"tables: no {begin} ... {end} in {path}; not updated", file=sys.stderr)
        return
    p.write_text(doc[:i + len(begin)] + "\n" + text + "\n" + doc[j:])


def cmd_tables(a):
    doc = json.loads(Path(a.results).read_text())
    s = doc["summary"]
    o = s["overall"]
    head = (f"`{doc['firstfault']}`: {o['runs']} runs kept ({o['failed']} failed, {o['healthy']} healthy) in "
            f"{s['launch_modes']} launch modes with {s['faults']} faults; {s['discarded']['count']} discarded "
            f"(the fault did not show).")
    total = {"all runs": o}
    full = "\n\n".join([head, table("", total), table("launch mode", s["by_launch_mode"]),
                         table("fault", s["by_fault"]), table("noise", s["by_noise"])])
    replace_between(HERE / "README.md", "<!-- tables:begin -->", "<!-- tables:end -->", full)
    short = "\n\n".join([head, table("launch mode", dict(s["by_launch_mode"], **{"**all**": o}))])
    replace_between(ROOT / "README.md", "<!-- fault-matrix:begin -->", "<!-- fault-matrix:end -->", short)
    print(full)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--quick", action="store_true")
    r.add_argument("--only", help="comma-separated run ids or their 3-digit numbers")
    r.add_argument("--replace", action="store_true",
                   help="with --only: write the runs into build-bench/faults/runs/ (the full run's), replacing them")
    r.add_argument("--bin", required=True)
    r.add_argument("--out", required=True)
    s = sub.add_parser("rescore")
    s.add_argument("--bin", required=True)
    s.add_argument("--out", required=True)
    tb = sub.add_parser("tables", help="write the tables of RESULTS into bench/faults/README.md and README.md")
    tb.add_argument("results")
    ls = sub.add_parser("list")
    ls.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    # SIGTERM/SIGHUP to the harness unwind like Ctrl-C: every run's `finally` stops its processes and mounts
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, f: sys.exit(128 + n))
    if a.cmd == "list":
        for rid, *_ in matrix():
            if not a.quick or rid[:3] in QUICK:
                print(rid)
        return 0
    if a.cmd == "tables":
        return cmd_tables(a)
    try:
        return cmd_run(a) if a.cmd == "run" else cmd_rescore(a)
    finally:
        Path(OUT_ROOT / f"firstfault.{os.getpid()}").unlink(missing_ok=True)  # private_bin's copy


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())
