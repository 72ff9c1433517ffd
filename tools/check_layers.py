#!/usr/bin/env python3
"""The layer check: no source includes a header of a layer above its own (cmake/layers.tsv).

The compiler already refuses most backward includes (each target sees only its closure's headers, see
cmake/layers.cmake). This check covers what an include path cannot: relative includes ("../base/dl.hpp"),
headers and sources that belong to no layer, a header owned twice, and a dependency on a row below in the
file. It runs at every build (target check_layers) and as the ctest `layers`.

    tools/check_layers.py --root .                       # exit 1 and one line per problem
    tools/check_layers.py --root . --probe src/kb/x.cpp '#include "firstfault/pipeline.hpp"'
        # checks the tree plus one made-up file (the ctest layers_probe: a backward include is caught)
    tools/check_layers.py --root . --graph               # the layer graph, one "layer -> deps" a line
"""
import argparse
import os
import re
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def read_table(root):
    rows = []
    with open(os.path.join(root, "cmake", "layers.tsv"), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            cols = line.split("\t")
            if len(cols) != 4:
                raise SystemExit(f"cmake/layers.tsv:{n}: a row needs 4 tab-separated columns")
            layer, deps, srcs, hdrs = cols
            rows.append((n, layer, [d for d in deps.split() if d != "-"], srcs.split(), hdrs.split()))
    return rows


def check(root, probe=None):
    problems = []
    rows = read_table(root)
    order, closure, owner_of_header, source_rules = [], {}, {}, []
    for n, layer, deps, srcs, hdrs in rows:
        cl = set()
        for d in deps:
            if d not in closure:
                problems.append(f"cmake/layers.tsv:{n}: {layer} depends on {d}, which is not a row above it")
                continue
            cl |= {d} | closure[d]
        closure[layer] = cl
        order.append(layer)
        for h in hdrs:
            if h in owner_of_header:
                problems.append(f"cmake/layers.tsv:{n}: {h} is owned by {owner_of_header[h]} and {layer}")
            owner_of_header[h] = layer
            if not os.path.exists(os.path.join(root, h)):
                problems.append(f"cmake/layers.tsv:{n}: {layer} owns {h}, which does not exist")
        for s in srcs:
            if not s.startswith("@"):
                source_rules.append((s, layer))

    def owner_of_source(rel):
        for s, layer in source_rules:
            if rel == s or os.path.dirname(rel) == s:
                return layer
        return None

    files = {}
    for top in ("src", os.path.join("include", "firstfault")):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if name.endswith((".cpp", ".hpp")):
                    p = os.path.relpath(os.path.join(dirpath, name), root)
                    files[p] = None
    if probe:
        files[probe[0]] = probe[1]

    for rel in sorted(files):
        layer = owner_of_header.get(rel) if rel.endswith(".hpp") else owner_of_source(rel)
        if layer is None:
            problems.append(f"{rel}: belongs to no layer (cmake/layers.tsv)")
            continue
        text = files[rel]
        if text is None:
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                text = f.read()
        for m in INCLUDE_RE.finditer(text):
            inc = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            # The compiler's order for "...": the including file's directory, then the include path.
            candidates = [os.path.normpath(os.path.join(os.path.dirname(rel), inc)),
                          os.path.normpath(os.path.join("include", inc)), os.path.normpath(os.path.join("src", inc))]
            target = next((c for c in candidates if c in files or c in owner_of_header), None)
            if target is None:
                continue  # generated (serve/sample.hpp is owned, kb_embedded.cpp is not a header) or not ours
            to = owner_of_header.get(target)
            if to is None:
                problems.append(f"{rel}:{line}: includes {inc}, a header of no layer")
            elif to != layer and to not in closure[layer]:
                problems.append(f"{rel}:{line}: backward include: {layer} includes {inc} ({to}), "
                                f"which {layer} may not use (cmake/layers.tsv)")
    return problems, order, closure, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--probe", nargs=2, metavar=("PATH", "TEXT"), help="check one made-up file as well")
    ap.add_argument("--graph", action="store_true", help="print the layers and their direct deps")
    ap.add_argument("--quiet", action="store_true", help="print nothing when the check passes")
    a = ap.parse_args()
    probe = (a.probe[0], a.probe[1].replace("\\n", "\n")) if a.probe else None
    problems, order, closure, rows = check(os.path.abspath(a.root), probe)
    if a.graph:
        for _, layer, deps, _, _ in rows:
            print(f"{layer} -> {' '.join(deps) if deps else '-'}")
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    if not a.quiet:
        print(f"check_layers: {len(order)} layers, no backward include")
    return 0


if __name__ == "__main__":
    sys.exit(main())
