#!/usr/bin/python3
"""A real multi-rank job with one slow rank, run under torchrun to record the logs in this folder (see
make_logs.sh). Distributed batch inference: every rank embeds its own shard batch by batch and logs each
step with a timestamp; the ranks meet only at the end, in one all_gather of the results. One rank sleeps
in every step (a slow input pipeline on its host), so its steps take longer than the others' while they
run; the others then wait for it in the all_gather, and with a short --timeout that collective times out.

usage: job.py --batches N --slow-rank R --slow-s S [--timeout SECONDS]
"""
import argparse
import datetime
import logging
import os
import sys
import time

import torch
import torch.distributed as dist

ap = argparse.ArgumentParser()
ap.add_argument("--batches", type=int, default=40)
ap.add_argument("--slow-rank", type=int, default=2)
ap.add_argument("--slow-s", type=float, default=0.2)
ap.add_argument("--step-s", type=float, default=0.05)
ap.add_argument("--timeout", type=float, default=600)
args = ap.parse_args()

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
log = logging.getLogger("embed")
log.setLevel(logging.INFO)
h = logging.StreamHandler(sys.stdout)
logging.Formatter.converter = time.gmtime
h.setFormatter(logging.Formatter(f"%(asctime)s [%(levelname)s] [rank{RANK}] %(message)s"))
log.addHandler(h)
log.propagate = False

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout))
log.info("init process group: backend=gloo rank=%d world_size=%d", RANK, WORLD)
torch.manual_seed(RANK)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 32))
out = []
with torch.no_grad():
    for step in range(args.batches):
        t0 = time.time()
        x = torch.randn(64, 64)
        if RANK == args.slow_rank:
            time.sleep(args.slow_s)  # the slow input pipeline of this rank's host
        out.append(model(x).mean(0))
        time.sleep(max(0.0, args.step_s - (time.time() - t0)))
        log.info("step %d/%d embedded 64 samples", step, args.batches)
mine = torch.stack(out)
gathered = [torch.zeros_like(mine) for _ in range(WORLD)]
dist.all_gather(gathered, mine)
log.info("gathered %d embeddings from %d ranks", sum(g.shape[0] for g in gathered), WORLD)
dist.destroy_process_group()
log.info("inference finished: %d steps", args.batches)
