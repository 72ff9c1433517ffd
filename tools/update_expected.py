#!/usr/bin/env python3
"""Re-approve the golden corpus tests: records what `firstfault diagnose --format json` says now for each
tests/corpus/<case>/logs into expected.json's "approved" block, next to the labelled truth.

Usage: tools/update_expected.py [--bin build/firstfault] [CASE...]
The approved block is a snapshot for review diffs; the golden test asserts the labelled truth (kind,
also_ok, initiating_rank) and the explicit "known_miss" entries, not the snapshot.
"""
import argparse, json, subprocess, sys
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("--bin", default="build/firstfault")
ap.add_argument("cases", nargs="*")
a = ap.parse_args()
root = Path(__file__).resolve().parent.parent / "tests" / "corpus"
binary = str(Path(a.bin).resolve())
for case in sorted(root.iterdir()):
    if not (case / "expected.json").is_file() or (a.cases and case.name not in a.cases):
        continue
    out = subprocess.run([binary, "diagnose", "logs", "--format", "json"], cwd=case, capture_output=True)
    rep = json.loads(out.stdout)
    exp = json.loads((case / "expected.json").read_text())
    rc = rep.get("root_cause") or {}
    exp["approved"] = {"verdict": rep["verdict"], "kind": rc.get("kind"), "signature": rc.get("signature"),
                       "initiating_rank": rep.get("initiating_rank")}
    (case / "expected.json").write_text(json.dumps(exp, indent=2) + "\n")
    print(f"{case.name}: {exp['approved']}")
