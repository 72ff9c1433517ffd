#!/usr/bin/python3
"""A tiny data-parallel training job for the fault matrix (bench/faults/README.md).

Runs under torchrun, `python3 -m torch.distributed.launch`, mpirun or srun on CPU with the gloo backend and
injects at most one fault on one rank. Everything a user would see comes from real code paths of PyTorch
1.13 (Debian's python3-torch), Python and the launcher: tracebacks, gloo errors, DataLoader worker
re-raises, signals. The only lines this script prints that imitate another program are the NCCL INFO
lines of the `nccl_info` noise profile (the format of NCCL's `NCCL_DEBUG=INFO` output, reference/log_formats.md
section 1) and the well-known PyTorch warning texts of the `warnings` profile.

Rank and world size come from the launcher's environment: RANK/WORLD_SIZE (torchrun and the legacy
launcher, torch/distributed/run.py), OMPI_COMM_WORLD_RANK/SIZE (Open MPI's mpirun, its mpirun(1) manual
"Exported Environment Variables") or SLURM_PROCID/SLURM_NTASKS (srun(1) "OUTPUT ENVIRONMENT VARIABLES");
MASTER_ADDR/MASTER_PORT come from the launcher or the harness (env:// init, torch.distributed docs).

The harness passes --ctl DIR, a private folder outside the kept logs: the script writes `pid.<rank>` there
(so the harness's emulated OOM killer can find the rank whose memory grows) and `fault.<rank>` the moment
it injects its fault (so the harness knows the fault really happened).
"""
import argparse
import ctypes
import json
import logging
import math
import os
import random
import signal
import socket
import sys
import threading
import time
import queue
import warnings
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


def env_int(*names, default=None):
    for n in names:
        if os.environ.get(n, "") != "":
            return int(os.environ[n])
    return default


ap = argparse.ArgumentParser()
ap.add_argument("--fault", default="none")
ap.add_argument("--fault-rank", type=int, default=-1)
ap.add_argument("--fault-step", type=int, default=10)
ap.add_argument("--noise", default="quiet")
ap.add_argument("--style", default="plain", choices=["plain", "json", "tqdm"])
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--steps", type=int, default=24)
ap.add_argument("--step-time", type=float, default=0.12)
ap.add_argument("--timeout", type=float, default=12.0, help="collective timeout (s)")
ap.add_argument("--ckpt-dir", default="checkpoints")
ap.add_argument("--ckpt-every", type=int, default=8)
ap.add_argument("--ctl", default="")
ap.add_argument("--fault-once", default="",
                help="a marker file: the faulty rank injects the fault only when it does not exist yet, and creates it "
                     "(a transient failure that the next attempt does not meet; firstfault run's test)")
ap.add_argument("--local_rank", "--local-rank", type=int, default=None)  # torch.distributed.launch passes it
args = ap.parse_args()

RANK = env_int("RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", default=0)
WORLD = env_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", default=1)
LOCAL = env_int("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", default=0)
if args.local_rank is not None:
    LOCAL = args.local_rank
os.environ.setdefault("RANK", str(RANK))
os.environ.setdefault("WORLD_SIZE", str(WORLD))
FAULTY = RANK == args.fault_rank
if FAULTY and args.fault_once:
    if os.path.exists(args.fault_once):
        FAULTY = False  # the earlier attempt met the fault; this one runs clean
    else:
        open(args.fault_once, "w").close()
rng = random.Random(args.seed * 1000 + RANK)
torch.manual_seed(args.seed)
HOST = socket.gethostname()


def ctl(name, text=""):
    if args.ctl:
        with open(os.path.join(args.ctl, f"{name}.{RANK}"), "w") as f:
            f.write(text)


def injected(what):
    """Record that the fault happens now (harness-private, not part of the kept logs)."""
    ctl("fault", f"{time.time():.3f} {what}\n")


ctl("pid", str(os.getpid()))

# ---- output styles ---------------------------------------------------------------------------------------
log = logging.getLogger("train")
log.setLevel(logging.INFO)
if args.style == "json":

    class JsonFormatter(logging.Formatter):
        """One JSON object a line, the shape python-json-logger and most in-house formatters produce."""

        def format(self, rec):
            d = {"time": self.formatTime(rec, "%Y-%m-%dT%H:%M:%S") + f".{int(rec.msecs):03d}Z",
                 "level": rec.levelname, "logger": rec.name, "rank": RANK, "host": HOST,
                 "message": rec.getMessage()}
            if rec.exc_info:
                d["exc_info"] = self.formatException(rec.exc_info)
            return json.dumps(d)

    h = logging.StreamHandler(sys.stdout)
    h.setFormatter(JsonFormatter())
    logging.Formatter.converter = time.gmtime
else:
    h = logging.StreamHandler(sys.stdout)
    h.setFormatter(logging.Formatter(f"%(asctime)s [%(levelname)s] [rank{RANK}] %(message)s"))
log.addHandler(h)
log.propagate = False
if args.style == "json":
    # Warnings through the same formatter (logging.captureWarnings), as JSON-logging setups do.
    logging.captureWarnings(True)
    wl = logging.getLogger("py.warnings")
    wl.addHandler(h)
    wl.propagate = False


def info(msg):
    log.info(msg)
    h.flush()


# ---- noise -----------------------------------------------------------------------------------------------
NCCL_PID, NCCL_TID = os.getpid(), os.getpid() + 37


def nccl(text):
    # NCCL's INFO line: "<host>:<pid>:<tid> [<cudaDev>] NCCL INFO <text>" (reference/log_formats.md section 1)
    print(f"{HOST}:{NCCL_PID}:{NCCL_TID} [{LOCAL}] NCCL INFO {text}", flush=True)


def noise_start():
    if args.noise == "nccl_info":
        if RANK == 0:
            print("NCCL version 2.18.1+cuda12.1", flush=True)
        nccl(f"Bootstrap : Using eth0:10.0.0.{11 + LOCAL}<0>")
        nccl("NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory")
        nccl(f"NET/Socket : Using [0]eth0:10.0.0.{11 + LOCAL}<0>")
        nccl("Using network Socket")
        nccl(f"comm 0x{0x55d0c0a0 + RANK * 0x1000:x} rank {RANK} nranks {WORLD} cudaDev {LOCAL} busId {LOCAL + 1}000 - Init START")
        nccl("Channel 00/02 :    " + "   ".join(str(r) for r in range(WORLD)))
        nccl(f"Channel 00/0 : {RANK}[{LOCAL + 1}000] -> {(RANK + 1) % WORLD}[{(RANK + 1) % WORLD + 1}000] via P2P/IPC")
        nccl("Connected all rings")
        nccl("Connected all trees")
        nccl("2 coll channels, 0 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer")
        nccl(f"comm 0x{0x55d0c0a0 + RANK * 0x1000:x} rank {RANK} nranks {WORLD} cudaDev {LOCAL} busId {LOCAL + 1}000 - Init COMPLETE")


def noise_step(step):
    if args.noise == "warnings":
        warnings.simplefilter("always")
        warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and later, "
                      "you should call them in the opposite order: `optimizer.step()` before `lr_scheduler.step()`.  "
                      "Failure to do this will result in PyTorch skipping the first value of the learning rate schedule. "
                      "See more details at https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
                      UserWarning)
    elif args.noise == "retried" and step % 7 == 3:
        for attempt in (1, 2):
            try:
                if attempt == 1:
                    raise ConnectionResetError(104, "Connection reset by peer")
                break
            except ConnectionResetError:
                log.warning("fetching shard %d failed (attempt %d/3), retrying in 0.1 s", step, attempt,
                            exc_info=True)
                time.sleep(0.05)
    elif args.noise == "runtime_text" and step % 5 == 2:
        log.warning("skipping sample %d: RuntimeError('image file is truncated (9 bytes not processed)'); "
                    "using a blank image instead", rng.randrange(100000))
    elif args.noise == "nccl_info" and step % 6 == 0:
        nccl(f"AllReduce: opCount {step:x} sendbuff 0x7f1c5a000000 recvbuff 0x7f1c5a000000 count 1 "
             f"datatype 7 op 0 root 0 comm 0x{0x55d0c0a0 + RANK * 0x1000:x} [nranks={WORLD}] stream 0x55d0c1f0")


# ---- data ------------------------------------------------------------------------------------------------
class Shard(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if args.fault == "dataloader_exception" and FAULTY and i == args.fault_step * 4:
            injected("dataloader worker raises")
            raise ValueError(f"sample {i}: expected 3 channels, got 4 (corrupt record in shard-{RANK:05d}.tar)")
        g = torch.Generator().manual_seed(args.seed * 7919 + RANK * 104729 + i)
        x = torch.randn(16, generator=g)
        return x, (x[:4] * 2.0).detach()


# ---- the job ---------------------------------------------------------------------------------------------
def main():
    timeout = timedelta(seconds=args.timeout)
    info(f"init process group: backend=gloo rank={RANK} world_size={WORLD} local_rank={LOCAL} "
         f"master={os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}")
    dist.init_process_group("gloo", rank=RANK, world_size=WORLD, timeout=timeout)
    noise_start()
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
    batch = 4
    steps = args.steps
    if args.fault == "uneven_batches" and FAULTY:
        steps = args.fault_step  # this rank's shard ends early: drop_last=False and uneven files
        injected("short shard")
    workers = 1 if args.fault == "dataloader_exception" else 0
    loader = DataLoader(Shard(steps * batch), batch_size=batch, num_workers=workers, shuffle=False)
    info(f"dataset: {steps * batch} samples, {steps} batches of {batch} on this rank")

    helper_q = queue.Queue(maxsize=4)
    if args.fault == "thread_exception":
        def prefetch():
            """A helper thread that prepares the next batch's augmentation parameters."""
            for s in range(10 ** 6):
                if FAULTY and s == args.fault_step:
                    injected("helper thread raises")
                    raise KeyError(f"augmentation policy 'randaug-{s % 3}' not found in registry")
                helper_q.put(s)
        threading.Thread(target=prefetch, name="prefetch", daemon=True).start()

    hog = []
    bar = None
    if args.style == "tqdm" and RANK == 0:
        from tqdm import tqdm
        bar = tqdm(total=steps, desc="Epoch 0", dynamic_ncols=False, ncols=100, mininterval=0)

    t_step = args.step_time
    step = 0
    for step, (x, y) in enumerate(loader):
        t0 = time.time()
        ctl("step", str(step))
        noise_step(step)
        if args.fault == "thread_exception":
            helper_q.get()  # blocks for ever once the helper thread is dead
        f = args.fault if FAULTY and step == args.fault_step else None
        if FAULTY and args.fault == "oom_sigkill" and step >= args.fault_step:
            if step == args.fault_step:
                injected("memory grows")
            hog.append(bytearray(48 << 20))  # 48 MiB a step, touched: resident
            for i in range(0, len(hog[-1]), 4096):
                hog[-1][i] = 1
        if f == "main_exception":
            injected("raise")
            idx = {"tok_1": 0, "tok_2": 1}
            _ = idx[f"tok_{step}"]  # KeyError in the loop
        elif f == "os_exit":
            injected("os._exit")
            os._exit(3)
        elif f == "segfault":
            injected("segfault")
            ctypes.string_at(0)
        elif f == "sigstop":
            injected("SIGSTOP")
            os.kill(os.getpid(), signal.SIGSTOP)
        elif f in ("exclusive_checkpoint", "exclusive_eval", "exclusive_tokenize"):
            injected(f)
            msg = {"exclusive_checkpoint": f"saving full checkpoint to {args.ckpt_dir}/step_{step}.pt (gathering optimizer state)",
                   "exclusive_eval": "running evaluation on the validation set (rank 0 only, 5000 samples)",
                   "exclusive_tokenize": "tokenizing the evaluation corpus on this rank (cache miss), others wait at the barrier"}[f]
            info(msg)
            time.sleep(args.timeout * 1.6)
            info("done")
        elif f == "straggler":
            injected("straggler")
        if FAULTY and args.fault == "straggler" and step >= args.fault_step:
            d = min(args.timeout * 1.5, 0.8 * 2 ** (step - args.fault_step))
            info(f"data loading took {d + t_step:.2f} s (input pipeline is slow on this host)")
            time.sleep(d)

        out = ddp(x)
        loss = ((out - y) ** 2).mean()
        if f == "nan_loss":
            injected("nan")
            loss = loss * float("nan")
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        # the loss that is logged: the mean over ranks, one all_reduce a step
        rl = loss.detach().clone().reshape(1)
        if f == "extra_collective":
            injected("extra all_reduce")
            dist.all_reduce(torch.ones(1))  # e.g. a metric reduced only where a condition held
        if f == "missing_collective":
            injected("skipped all_reduce")
        elif f == "type_mismatch":
            injected("broadcast instead of all_reduce")
            dist.broadcast(rl, src=0)
        elif f == "shape_mismatch":
            injected("all_reduce of 3 elements")
            info("reducing 3 metric values (loss, acc, ppl)")
            dist.all_reduce(torch.cat([rl, torch.zeros(2)]))
        elif f == "dtype_mismatch":
            injected("all_reduce float64")
            dist.all_reduce(rl.double())
        else:
            dist.all_reduce(rl)
        lv = rl.item() / WORLD
        if f == "nan_loss" or not math.isfinite(loss.item()):
            lv = loss.item()  # the local value is what a rank prints when it is not finite
        if bar is not None:
            bar.set_postfix(loss=f"{lv:.4f}")
            bar.update(1)
        elif args.style == "json" or step % 2 == 0 or not math.isfinite(lv):
            info(f"epoch 0 step {step}/{steps} loss {lv:.4f} lr {sched.get_last_lr()[0]:.2e}")

        if (step + 1) % args.ckpt_every == 0 and RANK == 0:
            os.makedirs(args.ckpt_dir, exist_ok=True)
            if args.fault in ("disk_full", "readonly_ckpt") and FAULTY:
                injected(args.fault)
            path = os.path.join(args.ckpt_dir, f"step_{step + 1}.pt")
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step + 1,
                        "ema": torch.zeros(64 * 1024)}, path)
            info(f"saved checkpoint {path}")
        dist.barrier() if (step + 1) % args.ckpt_every == 0 else None
        time.sleep(max(0.0, t_step - (time.time() - t0)))

    if bar is not None:
        bar.close()
    dist.barrier()
    info(f"training finished: {step + 1} steps")
    dist.destroy_process_group()


if __name__ == "__main__":
    if args.style == "json":
        try:
            main()
        except BaseException:
            log.exception("training failed")
            h.flush()
            sys.exit(1)
    else:
        main()
