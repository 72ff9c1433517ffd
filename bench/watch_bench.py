#!/usr/bin/env python3
"""Alert latency and memory of `firstfault watch` under a steady write rate.

A writer appends realistic rank log lines to N rank files at RATE MB/s for SECONDS, then writes one CUDA OOM
line on one rank and measures the time until `watch --json` prints the failure alert. Watch's peak RSS
(VmHWM) is read from /proc at the end. Usage:
  bench/watch_bench.py --bin build/firstfault [--files 64] [--rate 50] [--seconds 20]
Prints one result line; exit 1 when no alert arrived within 60 s after the decisive line.
"""
import argparse, json, os, subprocess, sys, tempfile, time

ap = argparse.ArgumentParser()
ap.add_argument("--bin", default="build/firstfault")
ap.add_argument("--files", type=int, default=64)
ap.add_argument("--rate", type=float, default=50.0, help="MB/s written in total")
ap.add_argument("--seconds", type=float, default=20.0)
a = ap.parse_args()

d = tempfile.mkdtemp(prefix="ff-watch-bench-")
files = [open(os.path.join(d, f"rank{r}.log"), "a", buffering=1 << 16) for r in range(a.files)]
for r, f in enumerate(files):
    f.write(f"[rank{r}]: starting\n"); f.flush()
out = open(os.path.join(d, "alerts.jsonl"), "w")
env = dict(os.environ, XDG_DATA_HOME=os.path.join(d, "data"))
w = subprocess.Popen([os.path.abspath(a.bin), "watch", d, "--json", "--silence", "3600s", "--poll-ms", "50",
                      "--no-history"], stdout=out, stderr=subprocess.DEVNULL, env=env)
time.sleep(1.0)
line_tpl = "[rank{r}]:2026-11-30 02:14:01,880 INFO    [rank{r}] trainer - step {i} loss 2.3141 lr 3.0e-04 grad_norm 0.82 tokens/s 151234\n"
per_tick = max(1, int(a.rate * 1e6 / len(line_tpl.format(r=0, i=0)) / 100))  # lines per 10 ms tick
written = 0
start = time.time()
i = 0
while time.time() - start < a.seconds:
    tick = time.time()
    for k in range(per_tick):
        r = (i + k) % a.files
        files[r].write(line_tpl.format(r=r, i=i))
        written += len(line_tpl)
    i += per_tick
    for f in files:
        f.flush()
    sleep = 0.01 - (time.time() - tick)
    if sleep > 0:
        time.sleep(sleep)
elapsed = time.time() - start
t0 = time.time()
files[7].write("[rank7]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 7 has a total capacity of 79.15 GiB of which 1.2 GiB is free.\n")
files[7].flush()
latency = None
deadline = t0 + 60
while time.time() < deadline and latency is None:
    with open(os.path.join(d, "alerts.jsonl")) as fh:
        for l in fh:
            j = json.loads(l)
            if j.get("alert", {}).get("type") == "failure":
                latency = j["alert"]["detected_at_ms"] / 1000.0 - t0
                break
    time.sleep(0.02)
hwm = "?"
try:
    for l in open(f"/proc/{w.pid}/status"):
        if l.startswith("VmHWM:"):
            hwm = l.split()[1] + " kB"
except OSError:
    pass
w.terminate(); w.wait()
rate = written / elapsed / 1e6
print(f"files={a.files} target={a.rate:.0f} MB/s written={written/1e6:.0f} MB in {elapsed:.1f} s ({rate:.1f} MB/s) "
      f"alert latency={'none' if latency is None else f'{latency*1000:.0f} ms'} watch peak RSS={hwm}")
sys.exit(0 if latency is not None else 1)
