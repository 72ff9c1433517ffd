#!/usr/bin/env python3
"""Quick developer check of kb/**/*.yaml with Python's re (close to RE2 for the subset we allow).

The authoritative checks are `firstfault kb lint` and `firstfault kb test` (RE2 + Vectorscan);
this script only lets a signature author iterate without building.
Usage: tools/kb_check.py [FILES...]   (default: every kb/**/*.yaml except kb/_prefixes)
"""
import re, sys, glob, os, yaml, uuid

ORDER = ["title", "id", "name", "status", "level", "description", "references", "author", "date", "modified",
         "tags", "related", "kind", "category", "role", "priority", "systems", "collateral_of", "initiator", "match_in_stack", "inferred_by",
         "fingerprints", "extract", "root_cause", "fix", "fix_code", "verify", "confirm", "prevention",
         "falsepositives", "examples"]
REQ = ["title", "id", "name", "status", "level", "description", "references", "author", "date", "tags", "kind",
       "category", "role", "systems", "root_cause", "fix", "verify", "confirm", "examples"]

def kinds():
    out = {}
    for line in open(os.path.join(os.path.dirname(__file__), "..", "kb", "kinds.tsv")).read().splitlines()[1:]:
        k, c, _ = line.split("\t", 2)
        out[k] = c
    return out

def check(path, K, ids, names, all_sigs):
    errs = []
    d = yaml.safe_load(open(path))
    keys = list(d.keys())
    for k in keys:
        if k not in ORDER: errs.append(f"unknown field {k}")
    known = [k for k in keys if k in ORDER]
    if known != sorted(known, key=ORDER.index): errs.append("fields out of order")
    for k in REQ:
        if k not in d: errs.append(f"missing {k}")
    stem = os.path.splitext(os.path.basename(path))[0]
    if d.get("name") != stem: errs.append("name != file stem")
    if not re.fullmatch(r"[a-z0-9_]{8,64}", d.get("name", "")): errs.append("bad name")
    try: uuid.UUID(str(d.get("id")), version=4)
    except Exception: errs.append("id not a UUID")
    if d.get("id") in ids: errs.append("duplicate id")
    if d.get("name") in names: errs.append("duplicate name")
    ids.add(d.get("id")); names.add(d.get("name"))
    if d.get("kind") not in K: errs.append(f"kind {d.get('kind')} not in kinds.tsv")
    elif K[d["kind"]] != d.get("category"): errs.append(f"category should be {K[d['kind']]}")
    if d.get("role") not in ("cause", "symptom"): errs.append("bad role")
    if d.get("role") == "cause" and not isinstance(d.get("priority"), int): errs.append("cause needs integer priority")
    fps = d.get("fingerprints") or []
    if not fps and not d.get("inferred_by"): errs.append("no fingerprints")
    pats = []
    for p in fps + (d.get("extract") or []):
        if "(?<" in p.replace("(?<=", "X").replace("(?<!", "X") or "(?=" in p or "(?!" in p or "(?<=" in p or "(?<!" in p:
            errs.append(f"look-around or (?<name>) in {p!r}")
        try: pats.append(re.compile(p))
        except re.error as e: errs.append(f"bad regex {p!r}: {e}")
    groups = set()
    for p in (d.get("extract") or []):
        try: groups |= set(re.compile(p).groupindex)
        except re.error: pass
    for ph in re.findall(r"\{(\w+)\}", d.get("root_cause", "")):
        if ph not in groups | {"rank", "host", "ts"}: errs.append(f"placeholder {{{ph}}} has no extract group")
    ex = d.get("examples") or {}
    pos, neg = ex.get("positive") or [], ex.get("negative") or []
    if not pos: errs.append("no positive example")
    if not neg and not d.get("inferred_by"): errs.append("no negative example")
    fpr = [re.compile(p) for p in fps]
    exr = [re.compile(p) for p in (d.get("extract") or [])]
    for e in pos:
        line = e["line"]
        if fpr and not any(r.search(line) for r in fpr): errs.append(f"positive does not match: {line[:80]}")
        got = {}
        for r in exr:
            m = r.search(line)
            if m: got.update({k: v for k, v in m.groupdict().items() if v is not None})
        for k, v in (e.get("expect") or {}).items():
            if str(got.get(k)) != str(v): errs.append(f"expect {k}={v!r} got {got.get(k)!r}")
    for e in neg:
        if any(r.search(e["line"]) for r in fpr): errs.append(f"negative matches: {e['line'][:80]}")
    all_sigs.append((d.get("name"), fpr, pos))
    return errs

def main():
    files = sys.argv[1:] or sorted(f for f in glob.glob("kb/**/*.yaml", recursive=True) if "/_prefixes/" not in f and "/_encyclopedia/" not in f)
    K = kinds(); ids = set(); names = set(); sigs = []; bad = 0
    for f in files:
        try: errs = check(f, K, ids, names, sigs)
        except Exception as e: errs = [f"cannot load: {e}"]
        for e in errs: print(f"{f}: {e}")
        bad += bool(errs)
    for name, _, pos in sigs:  # co-matches (informational)
        for e in pos:
            others = [n for n, fpr, _ in sigs if n != name and any(r.search(e["line"]) for r in fpr)]
            if others: print(f"note: {name} positive also matches {', '.join(others)}")
    print(f"{len(files)} files, {bad} with errors")
    return 1 if bad else 0

sys.exit(main())
