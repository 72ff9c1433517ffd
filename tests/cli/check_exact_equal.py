#!/usr/bin/env python3
"""Equality guard of the scan-first path: diagnoses every input with the gate (default) and with --exact
(every line read in full), both with --learn-lines 0 (the gate decides every line) and with the default
first batch of 256 lines, and fails on any difference in the JSON report other than the
masking counts, which by design cover only the lines read in full (docs/ARCHITECTURE.md, "Scan first").

Usage: check_exact_equal.py BIN PATH... ; a PATH that is a corpus directory (holding CASE/logs) stands
for each of its cases. Prints one line per difference and a summary; exits 1 on any difference.
"""
import json
import os
import re
import subprocess
import sys

# Masking tokens (node-3, ip-2, <secret-1>): numbered in the order values are first masked, which the
# gated path (masking only the lines it keeps) does not share with --exact. Both reports are compared
# after renumbering each kind by first appearance in the report; the values behind them are the same.
TOKEN = re.compile(r"\b(node|ip6|ip|mac|email|user)-(\d+)\b|<([a-z][a-z-]*?)-(\d+)>")


def canonical(text):
    seen = {}

    def sub(m):
        kind = m.group(1) or "<" + m.group(3)
        key = (kind, m.group(2) or m.group(4))
        if key not in seen:
            seen[key] = sum(1 for k in seen if k[0] == kind) + 1
        n = seen[key]
        return f"{kind}-{n}" if m.group(1) else f"{kind}-{n}>"
    return TOKEN.sub(sub, text)


def inputs(paths):
    for p in paths:
        if os.path.isdir(p) and not os.path.isdir(os.path.join(p, "logs")) and any(
                os.path.isdir(os.path.join(p, c, "logs")) for c in os.listdir(p)):
            for c in sorted(os.listdir(p)):
                if os.path.isdir(os.path.join(p, c, "logs")):
                    yield os.path.join(p, c, "logs")
        elif os.path.isdir(os.path.join(p, "logs")):
            yield os.path.join(p, "logs")
        else:
            yield p


def report(binary, path, exact, learn):
    # EXTRA_ARGS: more diagnose options for both modes (e.g. "--kb DIR": a catalogue the prefix lexer is off for)
    extra = os.environ.get("EXTRA_ARGS", "").split()
    cmd = [binary, "diagnose", path, "--format", "json", "--no-history", "--learn-lines", str(learn)] + extra + (["--exact"] if exact else [])
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    try:
        j = json.loads(canonical(r.stdout))
    except ValueError:
        return None, r.returncode, r.stderr.strip()[:200]
    j.get("masking", {}).pop("counts", None)
    return j, r.returncode, canonical(r.stderr)


def first_difference(a, b, where=""):
    if type(a) is not type(b):
        return where or "/"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{where}/{k}"
            d = first_difference(a[k], b[k], f"{where}/{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{where} (length {len(a)} vs {len(b)})"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{where}[{i}]")
            if d:
                return d
        return None
    return None if a == b else where


def main():
    binary, paths = sys.argv[1], sys.argv[2:]
    # STRIDE=k checks every k-th input only (the sanitizer build, where each run is ~10x slower)
    stride = int(os.environ.get("STRIDE", "1"))
    n = bad = 0
    for i, p in enumerate(inputs(paths)):
        if i % stride:
            continue
        n += 1
        # --learn-lines 0: no first batch, so the gate decides from the first line on; 256 (the default):
        # the first batch is learnt from before any line is matched, and its lines are gated too
        for learn in (0, 256):
            g, grc, gerr = report(binary, p, False, learn)
            e, erc, eerr = report(binary, p, True, learn)
            if g is None or e is None:
                bad += 1
                print(f"DIFF {p} (--learn-lines {learn}): no JSON report ({gerr if g is None else eerr})")
                break
            d = first_difference(g, e)
            if d or grc != erc or gerr != eerr:
                bad += 1
                print(f"DIFF {p} (--learn-lines {learn}): {d or ('exit code' if grc != erc else 'messages')}")
                break
    print(f"{n} inputs, {bad} with a difference between the gated and the --exact report")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
