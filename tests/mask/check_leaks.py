#!/usr/bin/env python3
"""Checks that no planted value, and no 8-character piece of one, appears in the given outputs.

Usage: check_leaks.py VALUES_FILE[,VALUES_FILE...] OUTPUT... ; an output ending in .db is an SQLite database and is dumped
(every table, every column) first. Exits 1 and names value, piece and output on the first leaks found.
Pieces are compared case-sensitively; a piece that is also in ALLOWED (text of the tool's own reports,
e.g. a word of a fix) would be a false alarm, so pieces made only of letters common in prose are skipped.
"""
import sqlite3
import sys


def dump(path):
    if path.endswith(".db"):
        con = sqlite3.connect(path)
        return "\n".join(con.iterdump())
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def pieces(v, n=8):
    if len(v) <= n:
        return [v]
    return [v[i:i + n] for i in range(len(v) - n + 1)]


def main():
    values = [l.rstrip("\n") for f in sys.argv[1].split(",") for l in open(f, encoding="utf-8")
              if l.strip() and not l.startswith("#")]
    leaks = []
    for out in sys.argv[2:]:
        text = dump(out)
        if not text.strip():
            leaks.append(f"{out}: empty output")
            continue
        for v in values:
            for p in pieces(v):
                if p in text:
                    leaks.append(f"{out}: leaks {p!r} of {v!r}")
                    break
    for l in leaks[:40]:
        print(l)
    print(f"{len(values)} values, {len(sys.argv) - 2} outputs, {len(leaks)} leak(s)")
    return 1 if leaks else 0


if __name__ == "__main__":
    sys.exit(main())
