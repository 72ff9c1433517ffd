#!/usr/bin/env python3
"""Reads a firstfault JSON report on stdin; prints every evidence item (any object with a text and a
file/line) that lacks its file or its line, and every verify entry that is not runnable as printed (prose,
a <placeholder>, '...', no pass result after '  # '). Exit status 0 either way: the caller collects the output."""
import json
import re
import sys

name = sys.argv[1] if len(sys.argv) > 1 else "-"
try:
    report = json.load(sys.stdin)
except ValueError as e:
    print(f"{name}: not a JSON report ({e})")
    sys.exit(0)


def walk(o, path):
    if isinstance(o, dict):
        if "text" in o and ("file" in o or "line" in o) and (not o.get("file") or not o.get("line")):
            print(f"{name}: {path} has no file:line ({o.get('file')}:{o.get('line')}): {str(o.get('text'))[:80]}")
        for k, v in o.items():
            walk(v, f"{path}.{k}")
    elif isinstance(o, list):
        for i, v in enumerate(o):
            walk(v, f"{path}[{i}]")


walk(report, "")
prose = re.compile(r"^[A-Z][a-z]+ ")
placeholder = re.compile(r"<[A-Za-z_][A-Za-z0-9_ -]*>")
for v in report.get("verify") or []:
    cmd = v.split("  #")[0]
    if prose.match(cmd) or placeholder.search(cmd) or "..." in cmd:
        print(f"{name}: verify is not runnable as printed: {v[:100]}")
    if "  # " not in v or not v.split("  # ", 1)[1].strip():  # issue 46: a pass/fail check states its result
        print(f"{name}: verify states no pass result: {v[:100]}")
