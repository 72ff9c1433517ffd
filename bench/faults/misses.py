#!/usr/bin/python3
"""Lists the misses of the kept full run (build-bench/faults/runs): one line a run that is not fully right,
with what firstfault answered and the first evidence line of its root cause (the line that led it).

    misses.py [--all] [--field launch_mode|fault|noise|got_kind]   grouped by that field (default: got_kind)
"""
import argparse
import json
from collections import defaultdict
from pathlib import Path

RUNS = Path(__file__).resolve().parent.parent.parent / "build-bench" / "faults" / "runs"

ap = argparse.ArgumentParser()
ap.add_argument("--all", action="store_true", help="also runs with the kind right and the rank wrong")
ap.add_argument("--field", default="got_kind")
a = ap.parse_args()
groups = defaultdict(list)
for d in sorted(RUNS.iterdir()):
    try:
        t = json.loads((d / "truth.json").read_text())
        r = json.loads((d / "firstfault.json").read_text())
    except (OSError, ValueError):
        continue
    if t.get("discarded"):
        continue
    verdict = r.get("verdict")
    rc = r.get("root_cause") or {}
    got = "healthy" if verdict == "healthy" else rc.get("kind") if verdict == "failure" else "undetermined"
    kind_ok = got == t["kind"] or t["kind"] is None
    rank_ok = not isinstance(t["initiating_rank"], int) or r.get("initiating_rank") == t["initiating_rank"]
    if kind_ok and (rank_ok or not a.all):
        continue
    ev = (rc.get("evidence") or [{}])[0]
    row = dict(t, got_kind=got, got_rank=r.get("initiating_rank"), sig=rc.get("signature") or rc.get("rule"),
               ev=f"{ev.get('file')}:{ev.get('line')}: {(ev.get('text') or '')[:150]}")
    groups[row[a.field]].append(row)
for k, rows in sorted(groups.items(), key=lambda kv: -len(kv[1])):
    print(f"== {k}: {len(rows)}")
    for x in rows:
        print(f"  {x['id']}: want {x['kind']}/{x['initiating_rank']} got {x['got_kind']}/{x['got_rank']} [{x['sig']}]")
        print(f"      {x['ev']}")
