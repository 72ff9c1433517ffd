#!/usr/bin/env python3
"""`firstfault run` supervising real torchrun jobs (issue 49).

The jobs are the fault matrix's training script (bench/faults/train.py: 2 ranks, gloo on CPU, DDP) under
torchrun --tee 3 --log_dir (bench/faults/launch.py runs /usr/bin/torchrun as the matrix does):
  1. a code bug: rank 1 raises KeyError at step 3 on every attempt. The action is stop-fix-code: `run` must
     stop after the first attempt (exit 12) and print the report; a restart fails the test.
  2. a transient failure: rank 1 stalls at step 2 until the collective times out, but only on the first
     attempt (--fault-once MARKER). The action is restart: `run` must start a second attempt, which succeeds
     (exit 0); no restart fails the test.
  3. (first, no torch needed) a stand-in srun whose node logs an Xid 79: restart-excluding-hosts puts
     --exclude=gpu-node-7 into the next attempt through --exclude-template.
Each attempt's console is captured in OUT/attempt_N/console.log and torchrun's --log_dir is read too.

usage: run_test.py FIRSTFAULT_BIN REPO     (exits 77 after case 3 when torch or torchrun is missing)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

FF, REPO = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
TRAIN = os.path.join(REPO, "bench", "faults", "train.py")
# torchrun itself (/usr/bin/torchrun), with the fault matrix's one fix for Debian 12's PyTorch 1.13 on Python 3.11
LAUNCH = os.path.join(REPO, "bench", "faults", "launch.py")
PYTHON = "/usr/bin/python3"

failures = 0


def check(what, cond, detail=""):
    global failures
    print(("  ok   " if cond else "  FAIL ") + what + ("" if cond else f"\n       {detail}"))
    if not cond:
        failures += 1


FAKE_SRUN = r"""#!/bin/bash
# A stand-in for srun: without --exclude=gpu-node-7 the job lands on gpu-node-7, whose GPU falls off the bus.
echo "srun args: $*; FIRSTFAULT_EXCLUDE_HOSTS=${FIRSTFAULT_EXCLUDE_HOSTS:-}"
for a in "$@"; do
  if [ "$a" = "--exclude=gpu-node-7" ]; then echo "step 1 | loss 2.0"; echo "training finished"; exit 0; fi
done
echo "Dec  4 10:02:09 gpu-node-7 kernel: NVRM: Xid (PCI:0000:05:00): 79, pid=2231, name=python, GPU has fallen off the bus."
echo "srun: error: gpu-node-7: task 0: Exited with exit code 1" >&2
exit 1
"""


def exclusion_case():
    """restart-excluding-hosts through --exclude-template, with a stand-in launcher (no torch needed)."""
    print("-- 3. an Xid 79 on gpu-node-7: restart without it (--exclude-template 'srun --exclude={hosts}')")
    with tempfile.TemporaryDirectory(prefix="ff-run-exclude-") as tmp:
        srun = os.path.join(tmp, "srun")
        with open(srun, "w") as f:
            f.write(FAKE_SRUN)
        os.chmod(srun, 0o755)
        out = os.path.join(tmp, "ffrun")
        p = subprocess.run([FF, "run", "--restarts", "1", "--out", out, "--no-history", "--exclude-template",
                            "srun --exclude={hosts}", "--", srun, "-N2", "python", "train.py"],
                           cwd=tmp, capture_output=True, text=True, timeout=120)
        check("restarted once, then succeeded (exit 0)", p.returncode == 0 and attempts(out) == ["attempt_0", "attempt_1"],
              f"exit {p.returncode}, attempts {attempts(out)}; stderr: {p.stderr[-800:]}")
        check("the second attempt ran with --exclude=gpu-node-7 right after the launcher, and the environment variable",
              f"srun args: --exclude=gpu-node-7 -N2 python train.py; FIRSTFAULT_EXCLUDE_HOSTS=gpu-node-7" in p.stdout, p.stdout[-600:])
        check("stderr names the action and the host", "action=restart-excluding-hosts:gpu-node-7" in p.stderr, p.stderr[-600:])
        p = subprocess.run([FF, "run", "--restarts", "1", "--out", out + "2", "--no-history", "--", srun, "-N2", "python", "train.py"],
                           cwd=tmp, capture_output=True, text=True, timeout=120)
        check("without --exclude-template it stops (exit 11) instead of restarting on the same node",
              p.returncode == 11 and attempts(out + "2") == ["attempt_0"] and "needs --exclude-template" in p.stderr,
              f"exit {p.returncode}; stderr: {p.stderr[-600:]}")


def supervise(tmp, fault, step, extra):
    """Runs `firstfault run` over torchrun in `tmp`; returns (exit status, stdout, stderr, out dir)."""
    out = os.path.join(tmp, "ffrun")
    cmd = [FF, "run", "--restarts", "2", "--out", out, "--no-history", "--format", "json", "--",
           PYTHON, LAUNCH, "run", "--standalone", "--nproc_per_node", "2", "--monitor_interval", "1",
           "--tee", "3", "--log_dir", os.path.join(tmp, "torchrun-logs"),
           TRAIN, "--fault", fault, "--fault-rank", "1", "--fault-step", str(step), "--steps", "8",
           "--step-time", "0.05", "--timeout", "3", "--ckpt-every", "100"] + extra
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    p = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr, out


def report_of(stdout):
    """The JSON report `run` prints last (after the job's own output)."""
    at = stdout.rfind("\n{\n")
    if at < 0:
        at = 0 if stdout.startswith("{\n") else -1
    try:
        return json.loads(stdout[at:]) if at >= 0 else None
    except ValueError:
        return None


def attempts(out):
    return sorted(d for d in os.listdir(out) if d.startswith("attempt_")) if os.path.isdir(out) else []


exclusion_case()
if subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode != 0 or not shutil.which("torchrun"):
    print("skipped: the torchrun cases need torch and torchrun (scripts/install-deps.sh --bench-faults)")
    sys.exit(1 if failures else 77)

print("-- 1. a code bug (KeyError on rank 1 at step 3): stop after the first attempt")
with tempfile.TemporaryDirectory(prefix="ff-run-code-") as tmp:
    rc, stdout, stderr, out = supervise(tmp, "main_exception", 3, [])
    rep = report_of(stdout)
    check("exit status 12 (stop-fix-code)", rc == 12, f"exit {rc}; stderr tail: {stderr[-1500:]}")
    check("one attempt only: no restart of a code bug", attempts(out) == ["attempt_0"], f"attempts {attempts(out)}")
    check("stderr says why it stopped", "stopping: the action is stop-fix-code" in stderr, stderr[-800:])
    check("the console was captured", os.path.getsize(os.path.join(out, "attempt_0", "console.log")) > 0 if attempts(out) else False)
    check("the job's output was copied to the terminal", "KeyError" in stdout + stderr)
    check("report printed: rank_exception, action stop-fix-code, not retryable",
          rep is not None and rep["root_cause"]["kind"] == "rank_exception" and rep["action"]["kind"] == "stop-fix-code"
          and rep["action"]["retryable"] is False, json.dumps(rep.get("action") if rep else None))
    check("the torchrun --log_dir tree was read", rep is not None and any("torchrun-logs" in i["path"] for i in rep["inputs"]),
          json.dumps([i["path"] for i in rep["inputs"]]) if rep else "no report")

print("-- 2. a transient failure (rank 1 stalls once until the collective times out): restart, then succeed")
with tempfile.TemporaryDirectory(prefix="ff-run-transient-") as tmp:
    marker = os.path.join(tmp, "stalled-once")
    rc, stdout, stderr, out = supervise(tmp, "straggler", 2, ["--fault-once", marker])
    check("the first attempt met the fault", os.path.exists(marker))
    check("restarted: two attempts", attempts(out) == ["attempt_0", "attempt_1"], f"attempts {attempts(out)}; stderr tail: {stderr[-1500:]}")
    check("exit status 0 (the second attempt succeeded)", rc == 0, f"exit {rc}; stderr tail: {stderr[-1500:]}")
    check("stderr names the action that restarted it", "firstfault run: restart:" in stderr, stderr[-800:])
    check("attempt 0's brief line says action=restart", "action=restart " in stderr, stderr[-800:])
    check("attempt 1 succeeded", "attempt 1 succeeded" in stderr, stderr[-400:])

print(f"run: {'FAILED' if failures else 'passed'} ({failures} failure(s))")
sys.exit(1 if failures else 0)
