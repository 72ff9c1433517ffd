#!/usr/bin/env python3
"""Thread guard of `diagnose`: every input is diagnosed with --threads 1 and --threads 2, and the two runs
must print the same bytes (report, messages, exit code). With two threads one reads and scans blocks with
the gate while the other runs the collector in input order (include/firstfault/pipeline.hpp, options::threads), so any
difference is a bug.

Usage: check_threads_equal.py BIN PATH... ; a PATH that is a corpus directory (holding CASE/logs) stands
for each of its cases. STRIDE=k checks every k-th input only (the sanitizer build).
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_exact_equal import inputs  # noqa: E402


def run(binary, path, threads, extra):
    cmd = [binary, "diagnose", path, "--format", "json", "--no-history", "--threads", str(threads)] + extra
    r = subprocess.run(cmd, capture_output=True)
    return r.returncode, r.stdout, r.stderr


def main():
    binary, paths = sys.argv[1], sys.argv[2:]
    stride = int(os.environ.get("STRIDE", "1"))
    n = bad = 0
    for i, p in enumerate(inputs(paths)):
        if i % stride:
            continue
        # --learn-lines 0: every line of a small input goes through the blocks (the reader's side); a large
        # input is also checked with the default first batch
        big = os.path.isfile(p) and os.path.getsize(p) > (1 << 20)
        for extra in ([], ["--learn-lines", "0"]) if big else (["--learn-lines", "0"],):
            n += 1
            a, b = run(binary, p, 1, extra), run(binary, p, 2, extra)
            if a != b:
                bad += 1
                what = "exit code" if a[0] != b[0] else "report" if a[1] != b[1] else "messages"
                print(f"DIFF {p} {' '.join(extra)}: {what}")
    print(f"{n} runs, {bad} with a difference between --threads 1 and --threads 2")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
