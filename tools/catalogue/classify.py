#!/usr/bin/env python3
"""Give every catalogue template its class (docs/catalogues.md).

    classify.py [--bin build/firstfault] [PROJECT ...]

Rules come from kb/_catalogue/classes.tsv, read top to bottom, the first that fits a row wins:
project, path (glob on the source path), level (glob), template (Python regex searched in the template,
empty for any) -> class. A rule for one template goes above its family's rule.

With --bin, the tool's own reading settles what the rules leave general: `firstfault kb coverage
--format tsv` says which signatures match each template's synthesised line; when the rule gave
generic_error and a specific or family signature (not a generic catch-all) explains the line, the class
becomes that signature's kind (cause for a cause signature, collateral for a symptom) and the signature
column names it. A signature that calls a benign or irrelevant template a failure is printed as a
conflict, for a person to settle (the rule, an override, or the signature).
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CAT = os.path.normpath(os.path.join(HERE, "..", "..", "kb", "_catalogue"))


def read_rules(path: str) -> list[tuple]:
    rules = []
    with open(path, encoding="utf-8") as f:
        header = None
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            cells = line.split("\t")
            if header is None:
                header = cells
                continue
            if len(cells) != len(header):
                sys.exit(f"{path}:{n}: {len(cells)} cells, the header has {len(header)}")
            r = dict(zip(header, cells))
            rules.append((r["project"], r["path"], r["level"], re.compile(r["template"]) if r["template"] else None,
                          r["class"], n))
    return rules


PLACEHOLDER = re.compile(r"<(int|hex|float|str)(?:=[^>]*)?>")


def read_hints(path: str) -> list[tuple]:
    """hints.tsv: project, template regex, values ('|' between placeholders, empty keeps the generic one)."""
    out = []
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8") as f:
        rows = [l.rstrip("\n").split("\t") for l in f if l.strip() and not l.startswith("#")]
    for cells in rows[1:]:
        out.append((cells[0], re.compile(cells[1]), cells[2].split("|")))
    return out


def apply_hints(project: str, template: str, hints: list[tuple]) -> str:
    """The template with typical values on the placeholders a hint names (<str=JOB 42>), others plain."""
    plain = PLACEHOLDER.sub(lambda m: f"<{m.group(1)}>", template)
    for proj, rx, values in hints:
        if fnmatch.fnmatch(project, proj) and rx.search(plain):
            it = iter(values)
            return PLACEHOLDER.sub(lambda m: (lambda v: f"<{m.group(1)}={v}>" if v else f"<{m.group(1)}>")(next(it, "")), plain)
    return plain


def classify_row(project: str, row: dict, rules: list[tuple]) -> str:
    path = row["source"].rsplit("@", 1)[0].rsplit(":", 1)[0]
    for proj, glob, level, rx, cls, _ in rules:
        if not fnmatch.fnmatch(project, proj):
            continue
        if not fnmatch.fnmatch(path, glob) or not fnmatch.fnmatch(row["level"], level):
            continue
        if rx is not None and not rx.search(PLACEHOLDER.sub(lambda m: f"<{m.group(1)}>", row["template"])):
            continue
        return cls
    return ""


def read_catalogue(path: str) -> tuple[list[str], list[str], list[dict]]:
    head, cols, rows = [], None, []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#"):
                head.append(line)
                continue
            cells = line.split("\t")
            if cols is None:
                cols = cells
                continue
            rows.append(dict(zip(cols, cells)))
    return head, cols or [], rows


def write_catalogue(path: str, head: list[str], cols: list[str], rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for h in head:
            f.write(h + "\n")
        f.write("\t".join(cols) + "\n")
        for r in rows:
            f.write("\t".join(r.get(c, "") for c in cols) + "\n")


def tool_readings(binary: str) -> tuple[dict, dict]:
    """(project, source, template) -> matched signature names; signature name -> (kind, role, layer)."""
    out = subprocess.run([binary, "kb", "coverage", "--format", "tsv", "--catalogue", CAT], check=True,
                         capture_output=True, text=True).stdout.splitlines()
    matched = {}
    for line in out[1:]:
        c = line.split("\t")
        if len(c) >= 6:
            matched[(c[0], c[1], c[2])] = [m for m in c[5].split(",") if m]
    sigs = {}
    for s in json.loads(subprocess.run([binary, "kb", "list", "--format", "json"], check=True, capture_output=True,
                                       text=True).stdout):
        sigs[s["name"]] = (s["kind"], s["role"], s.get("layer", "specific"))
    return matched, sigs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("projects", nargs="*")
    ap.add_argument("--bin", help="a built firstfault, to settle generic errors by the signatures that read them")
    a = ap.parse_args()
    rules = read_rules(os.path.join(CAT, "classes.tsv"))
    hints = read_hints(os.path.join(CAT, "hints.tsv"))
    matched, sigs = tool_readings(a.bin) if a.bin else ({}, {})
    names = a.projects or sorted(f[:-4] for f in os.listdir(CAT) if f.endswith(".tsv") and f not in ("classes.tsv", "hints.tsv"))
    conflicts = 0
    for name in names:
        path = os.path.join(CAT, name + ".tsv")
        head, cols, rows = read_catalogue(path)
        counts: dict[str, int] = {}
        for r in rows:
            r["template"] = apply_hints(name, r["template"], hints)
            cls = classify_row(name, r, rules)
            default = cls.startswith("~")
            cls = cls.lstrip("~")
            sig = ""
            found = matched.get((name, r["source"], r["template"]), [])
            useful = [m for m in found if m in sigs and sigs[m][1] in ("cause", "symptom") and sigs[m][2] != "generic"]
            if useful and default:
                best = next((m for m in useful if sigs[m][1] == "cause"), useful[0])
                kind, role, _ = sigs[best]
                cls = f"kind:{kind}:{'cause' if role == 'cause' else 'collateral'}"
                sig = best
            elif useful and cls.startswith("kind:"):
                want = cls.split(":")[1]
                sig = next((m for m in useful if sigs[m][0] == want), "")
                # A family rule holds "unless listed otherwise": a specific signature of another kind that
                # reads the line is that listing.
                specific = sorted((m for m in useful if sigs[m][2] == "specific"), key=lambda m: sigs[m][1] != "cause")
                if not sig and specific and not default:
                    kind, role, _ = sigs[specific[0]]
                    cls, sig = f"kind:{kind}:{'cause' if role == 'cause' else 'collateral'}", specific[0]
            elif useful and cls.startswith("benign") and any(sigs[m][1] == "cause" for m in useful):
                conflicts += 1
                print(f"conflict: {name} {r['source']} [{cls}] read as {','.join(useful)}: {r['template'][:120]}",
                      file=sys.stderr)
            r["class"], r["signature"] = cls, sig
            key = cls.split(":")[0] if cls else "(none)"
            counts[key] = counts.get(key, 0) + 1
        write_catalogue(path, head, cols, rows)
        print(f"{name}: {len(rows)} templates; " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=sys.stderr)
    if conflicts:
        print(f"{conflicts} conflict(s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
