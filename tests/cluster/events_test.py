#!/usr/bin/env python3
"""firstfault scan + diagnose --events (map and reduce), on the real binary.

1. Merge equality: for every corpus case with two or more files, the files (in the order `diagnose DIR`
   reads them: each directory sorted by name) are split into 2 and into 3 contiguous parts, each part is
   scanned on its own (`scan FILES -o part.ffev --mask-key K`), and `diagnose --events part*.ffev` must print
   the same JSON report as `diagnose DIR --mask-key K`.
2. What an events file holds: masked (no raw host, address or secret), zstd JSON lines of
   firstfault.events/v1 with an end record.
3. Bad events files: each is one named input error, the others are still diagnosed, nothing escapes.

usage: events_test.py FIREFAULT_BIN TESTS_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

BIN = os.path.abspath(sys.argv[1])
TESTS = os.path.abspath(sys.argv[2])
CORPUS = os.path.join(TESTS, "corpus")
KEY = "events-test-key"
failures = []


def run(args, timeout=300, **kw):
    return subprocess.run([BIN] + args, capture_output=True, text=True, timeout=timeout, **kw)


def walk(path):
    """Files under path in read_inputs' order: each directory's entries sorted by name, recursively."""
    out = []
    for name in sorted(os.listdir(path), key=os.fsencode):
        p = os.path.join(path, name)
        if os.path.isdir(p) and not os.path.islink(p):
            out.extend(walk(p))
        elif os.path.isfile(p):
            out.append(p)
    return out


def report(args):
    r = run(["diagnose", "--no-history", "--quiet", "--format", "json", "--mask-key", KEY] + args)
    if r.returncode not in (0, 1, 3):
        return None, r
    try:
        return json.loads(r.stdout), r
    except ValueError:
        return None, r


def first_difference(a, b, path="$"):
    if type(a) is not type(b):
        return f"{path}: {json.dumps(a)[:120]} != {json.dumps(b)[:120]}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}: only in {'single run' if k in a else 'merged run'}"
            d = first_difference(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {json.dumps(a)[:160]} != {json.dumps(b)[:160]}"


def generated(tmp):
    """Multi-node torchrun --log-dir trees from bench/gen_logs.py: hosts in paths and NCCL headers, so the
    keyed host tokens of separate scans must agree for the merged report to name the same host."""
    gen = os.path.join(os.path.dirname(TESTS), "bench", "gen_logs.py")
    out = []
    for failure in ("xid79", "host_oom", "cuda_oom"):
        d = os.path.join(tmp, "gen-" + failure)
        subprocess.run([sys.executable, gen, "--out", d, "--ranks", "24", "--total-bytes", "3M", "--layout", "per-rank",
                        "--failure", failure, "--position", "middle", "--seed", "5"], check=True, capture_output=True)
        out.append(("generated-" + failure, d))
    return out


def merge_equality(tmp):
    # Under the sanitizers (make test's second pass) the splits into 2 are compared, not those into 3, and
    # every second multi-file corpus case (the generated trees always): the release pass compares all of
    # them, and this was the longest test of the sanitizer pass (7-8 min of 2 cores, then 3.6 min).
    sanitized = bool(os.environ.get("FF_SANITIZED"))
    split_counts = (2,) if sanitized else (2, 3)
    cases = 0
    corpus = [(c, os.path.join(CORPUS, c, "logs")) for c in sorted(os.listdir(CORPUS))]
    hosts_compared = 0
    multi = 0
    for case, logs in corpus + generated(tmp):
        if not os.path.isdir(logs):
            continue
        files = walk(logs)
        if len(files) < 2:
            continue
        multi += 1
        if sanitized and not case.startswith("generated-") and multi % 2 == 0:
            continue
        whole, r = report([logs])
        if whole is None:
            failures.append(f"{case}: diagnose DIR failed ({r.returncode}): {r.stderr.strip()[:200]}")
            continue
        hosts_compared += bool(whole.get("initiating_host")) or bool(whole["masking"].get("counts", {}).get("hostname"))
        for parts in split_counts:
            if len(files) < parts:
                continue
            cases += 1
            size = -(-len(files) // parts)
            chunks = [files[i:i + size] for i in range(0, len(files), size)]
            evs = []
            for i, chunk in enumerate(chunks):
                ev = os.path.join(tmp, f"{case}.{parts}.{i}.ffev")
                s = run(["scan", "--quiet", "--mask-key", KEY, "-o", ev] + chunk)
                if s.returncode not in (0, 1) or not os.path.exists(ev):
                    failures.append(f"{case}: scan of part {i} failed ({s.returncode}): {s.stderr.strip()[:200]}")
                    break
                evs.append(ev)
            else:
                merged, r = report(["--events"] + evs)
                if merged is None:
                    failures.append(f"{case}: diagnose --events failed ({r.returncode}): {r.stderr.strip()[:200]}")
                    continue
                # masking.counts are replacements made, which depend on what each scan had learnt when it
                # met a value (a host first named in another node's logs is replaced again here): summed over
                # scans they can exceed the one-run counts (docs/cluster.md). Everything else must be equal.
                whole_counts = whole["masking"].pop("counts", {})
                merged_counts = merged["masking"].pop("counts", {})
                if set(whole_counts) != set(merged_counts):
                    failures.append(f"{case}, {parts} scans: masked kinds differ: {whole_counts} vs {merged_counts}")
                d = first_difference(whole, merged)
                whole["masking"]["counts"] = whole_counts
                if d:
                    failures.append(f"{case}, {parts} scans: merged report differs: {d}")
    if cases < (12 if sanitized else 40) or hosts_compared < 3:
        failures.append(f"only {cases} split cases ran, {hosts_compared} with masked hosts (expected the corpus's multi-file cases and the generated trees)")
    print(f"merge equality: {cases} splits of multi-file corpus cases and generated trees compared ({hosts_compared} cases with masked hosts)")


def zstd_lines(path):
    raw = subprocess.run(["zstd", "-dc", path], capture_output=True, check=True).stdout.decode()
    return [json.loads(l) for l in raw.splitlines()]


def contents(tmp):
    log = os.path.join(tmp, "secret.log")
    with open(log, "w") as f:
        f.write("[default0]:gpu-node-17:4242:4300 [0] NCCL INFO Bootstrap : Using eth0:10.20.30.40<0>\n")
        f.write("[default0]:export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123456789\n")
        f.write("[default0]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.02 GiB is free.\n")
        f.write("[default0]:\x1b]0;pwned\x07 title escape\n")
    # The default: secrets masked, hosts and addresses shown (docs/security.md), no key needed.
    env = dict(os.environ)
    env.pop("SLURM_JOB_ID", None)
    env["XDG_CONFIG_HOME"] = os.path.join(tmp, "xdg")
    evd = os.path.join(tmp, "default.ffev")
    r = subprocess.run([BIN, "scan", "-o", evd, log], capture_output=True, text=True, env=env)
    if r.returncode not in (0, 1):
        failures.append(f"scan without a key (the default masking) failed: exit {r.returncode}, {r.stderr.strip()}")
    else:
        blob = json.dumps(zstd_lines(evd))
        if "hf_abcdefghijklmnopqrstuvwxyz0123456789" in blob or "gpu-node-17" not in blob:
            failures.append("the default scan must mask the token and show the host: " + blob[:300])
    ev = os.path.join(tmp, "secret.ffev")
    r = run(["scan", "--redact", "--job-id", "4711", "-o", ev, log])
    if r.returncode not in (0, 1):
        failures.append(f"scan of a log with secrets failed: {r.stderr}")
        return
    lines = zstd_lines(ev)
    blob = json.dumps(lines)
    for raw in ("gpu-node-17", "10.20.30.40", "hf_abcdefghijklmnopqrstuvwxyz0123456789", "\x1b"):
        if raw in blob:
            failures.append(f"the events file holds {raw!r} unmasked")
    if lines[0].get("t") != "header" or lines[0].get("format") != "firstfault.events/v1" or lines[0].get("redacted") is not True:
        failures.append(f"first record is not a v1 header of a redacted scan: {lines[0]}")
    if lines[-1].get("t") != "end" or lines[-1].get("records") != len(lines) - 1:
        failures.append(f"last record is not a counting end record: {lines[-1]}")
    if not any(l.get("t") == "finding" and l.get("sig", "").startswith("cuda_oom") for l in lines):
        failures.append("no cuda_oom finding in the events file: " + blob[:300])
    hosts = [l["name"] for l in lines if l.get("t") == "host"]
    if not hosts or not all(h.startswith("node-") and len(h) == 15 for h in hosts):
        failures.append(f"hosts are not keyed tokens node-<10 hex>: {hosts}")
    # The same host scanned on another "node" with the same job id gets the same token; another job, another.
    ev2 = os.path.join(tmp, "secret2.ffev")
    run(["scan", "--redact", "--job-id", "4711", "-o", ev2, log])
    ev3 = os.path.join(tmp, "secret3.ffev")
    run(["scan", "--redact", "--job-id", "4712", "-o", ev3, log])
    h2 = [l["name"] for l in zstd_lines(ev2) if l.get("t") == "host"]
    h3 = [l["name"] for l in zstd_lines(ev3) if l.get("t") == "host"]
    if h2 != hosts or h3 == hosts:
        failures.append(f"keyed tokens: same job {hosts} vs {h2}; other job {h3}")
    # --redact without a key or a job id: the per-user key (created 0600), the same in a second scan.
    evu1, evu2 = os.path.join(tmp, "user1.ffev"), os.path.join(tmp, "user2.ffev")
    r1 = subprocess.run([BIN, "scan", "--redact", "-o", evu1, log], capture_output=True, text=True, env=env)
    r2 = subprocess.run([BIN, "scan", "--redact", "-o", evu2, log], capture_output=True, text=True, env=env)
    keyf = os.path.join(tmp, "xdg", "firstfault", "redact.key")
    if r1.returncode not in (0, 1) or r2.returncode not in (0, 1) or not os.path.isfile(keyf) or (os.stat(keyf).st_mode & 0o777) != 0o600:
        failures.append(f"scan --redact without a key: exit {r1.returncode}, {r1.stderr.strip()}; key file {keyf}")
    else:
        u1 = [l["name"] for l in zstd_lines(evu1) if l.get("t") == "host"]
        u2 = [l["name"] for l in zstd_lines(evu2) if l.get("t") == "host"]
        if not u1 or u1 != u2 or not all(h.startswith("node-") and len(h) == 15 for h in u1):
            failures.append(f"scan --redact with the per-user key: {u1} vs {u2}")
    env["SLURM_JOB_ID"] = "4711"
    ev4 = os.path.join(tmp, "slurm.ffev")
    r = subprocess.run([BIN, "scan", "--redact", "-o", ev4, log], capture_output=True, text=True, env=env)
    if r.returncode not in (0, 1) or [l["name"] for l in zstd_lines(ev4) if l.get("t") == "host"] != hosts:
        failures.append(f"scan --redact under $SLURM_JOB_ID=4711 did not key like --job-id 4711: {r.stderr}")
    # --host: the node a plain console was read on becomes its inputs' host, shown by default, masked with --redact.
    plain = os.path.join(tmp, "plain.out")
    with open(plain, "w") as f:
        f.write("0: [rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.02 GiB is free.\n")
    evh = os.path.join(tmp, "plain.ffev")
    run(["scan", "--quiet", "--redact", "--job-id", "4711", "--host", "gpu-node-55", "-o", evh, plain])
    rep = json.loads(run(["diagnose", "--no-history", "--format", "json", "--events", evh]).stdout)
    if not (rep.get("initiating_host") or "").startswith("node-") or "gpu-node-55" in json.dumps(zstd_lines(evh)):
        failures.append(f"scan --host: initiating_host {rep.get('initiating_host')!r}, or the raw name is in the events file")
    evp = os.path.join(tmp, "plain_default.ffev")
    run(["scan", "--quiet", "--host", "gpu-node-55", "-o", evp, plain])
    rep = json.loads(run(["diagnose", "--no-history", "--format", "json", "--events", evp]).stdout)
    if rep.get("initiating_host") != "gpu-node-55":
        failures.append(f"scan --host by default: initiating_host {rep.get('initiating_host')!r}, not the host given")
    # A default scan and a redacted one cannot be merged (real names beside pseudonyms).
    r = run(["diagnose", "--no-history", "--events", evd, ev])
    if r.returncode != 2 or "cannot be merged" not in r.stderr:
        failures.append(f"merging a default scan with a redacted one: exit {r.returncode}, {r.stderr.strip()}")
    # Different keys cannot be merged.
    r = run(["diagnose", "--no-history", "--events", ev, ev3])
    if r.returncode != 2 or "another key" not in r.stderr:
        failures.append(f"merging two keys: exit {r.returncode}, {r.stderr.strip()}")
    return ev


def bad_files(tmp, good):
    cases = {}
    cases["not-zstd"] = b"this is a log, not an events file\n"
    cases["empty"] = b""
    with open(good, "rb") as f:
        data = f.read()
    cases["truncated"] = data[: len(data) // 2]

    def z(text):
        return subprocess.run(["zstd", "-c"], input=text.encode(), capture_output=True, check=True).stdout

    lines = zstd_lines(good)
    cases["no-end"] = z("\n".join(json.dumps(l) for l in lines[:-1]) + "\n")
    cases["wrong-format"] = z(json.dumps({"t": "header", "format": "firstfault.events/v9"}) + "\n")
    cases["not-json"] = z(json.dumps(lines[0]) + "\n{not json\n")
    bad_type = [dict(l) for l in lines]
    for l in bad_type:
        if l.get("t") == "finding":
            l["line"] = "twelve"
    cases["wrong-type"] = z("\n".join(json.dumps(l) for l in bad_type) + "\n")
    huge_rank = [dict(l) for l in lines]
    for l in huge_rank:
        if l.get("t") == "finding":
            l["rank"] = 10**30
    cases["huge-number"] = z("\n".join(json.dumps(l) for l in huge_rank) + "\n")
    cases["long-record"] = z(json.dumps(lines[0]) + "\n" + json.dumps({"t": "source", "name": "x" * (5 << 20)}) + "\n")
    # Many tiny records of a type this version does not know: the record bound stops the read.
    frame = z('{"t":"pad"}\n' * (1 << 20))
    cases["too-many-records"] = z(json.dumps(lines[0]) + "\n") + frame * 5
    escapes = [dict(l) for l in lines]
    for l in escapes:
        if l.get("t") == "finding":
            l["text"] = "CUDA out of memory \x1b[2J\x1b]8;;http://evil\x07 \u202e"
            l["sig"] = "no_such_signature_anywhere"
    escapes.insert(2, {"t": "finding", "sig": lines[[i for i, l in enumerate(lines) if l.get('t') == 'finding'][0]]["sig"],
                       "text": "OOM \x1b[31mred\x1b[0m \u202e", "source": "x", "line": 1})
    escapes[-1]["records"] = len(escapes) - 1
    cases["escapes-unknown-sig"] = z("\n".join(json.dumps(l) for l in escapes) + "\n")
    paths = []
    for name, blob in cases.items():
        p = os.path.join(tmp, f"bad-{name}.ffev")
        with open(p, "wb") as f:
            f.write(blob)
        paths.append(p)
    # Every bad file is named with a reason; the good one is still diagnosed.
    r = run(["diagnose", "--no-history", "--format", "json", "--events", good] + paths)
    if r.returncode not in (0, 1, 3):
        failures.append(f"diagnose --events with bad files: exit {r.returncode}: {r.stderr[-500:]}")
        return
    rep = json.loads(r.stdout)
    if rep["root_cause"].get("kind") != "cuda_oom":
        failures.append(f"the good file was not diagnosed next to the bad ones: {rep['root_cause']}")
    errs = {e.get("path", e.get("file", "")): e.get("reason", e.get("message", "")) for e in rep.get("input_errors", [])}
    named = json.dumps(rep.get("input_errors", []))
    for name in cases:
        if name == "escapes-unknown-sig":
            continue
        if f"bad-{name}.ffev" not in named:
            failures.append(f"bad events file {name} is not named in input_errors: {named[:400]}")
    out = r.stdout + r.stderr
    if "\x1b" in out or "\u202e" in out:
        failures.append("an escape or bidi control from an events file reached the output")
    if "no_such_signature_anywhere" not in named:
        failures.append("findings of an unknown signature were dropped without a note")
    print(f"bad events files: {len(cases)} kinds, each named; the good one still diagnosed")


def hostile(tmp, good):
    """What a hostile helper found: files that must be refused or bounded, not trusted."""
    def z(text):
        return subprocess.run(["zstd", "-c"], input=text.encode(), capture_output=True, check=True).stdout

    lines = zstd_lines(good)
    head, body, end = lines[0], lines[1:-1], lines[-1]
    finding = next(l for l in body if l.get("t") == "finding")
    src = next(l for l in body if l.get("t") == "source")
    summ = next(l for l in body if l.get("t") == "summary")
    # Memory: 400,000 copies of one finding and 200,000 ranks of activity in a file of a few hundred KB.
    # Streamed into zstd, so that this process stays small (a child's peak RSS counts its pages before exec).
    # Under the sanitizers (make test's second pass, FF_SANITIZED=1) the file is 10x smaller, still past
    # every bound, and the RSS bound is not checked: ASan's shadow memory and quarantine are not the program's.
    sanitized = bool(os.environ.get("FF_SANITIZED"))
    copies, ranks = (40000, 20000) if sanitized else (400000, 200000)
    bomb = os.path.join(tmp, "bomb.ffev")
    with open(bomb, "wb") as out:
        zp = subprocess.Popen(["zstd", "-c"], stdin=subprocess.PIPE, stdout=out)
        n = 0

        def put(rec):
            nonlocal n
            zp.stdin.write((json.dumps(rec) + "\n").encode())
            n += 1

        put(head)
        put(src)
        one = (json.dumps(finding) + "\n").encode()
        for _ in range(copies):
            zp.stdin.write(one)
        n += copies
        for r in range(ranks):
            put({"t": "activity", "scope": "global", "number": r, "lines": 1, "last_source": 0, "first_source": 0})
        put(summ)
        put({"t": "end", "records": n})
        zp.stdin.close()
        zp.wait()
    del lines, body
    # this child's own peak RSS (os.wait4), not the largest of every child so far
    out_path = os.path.join(tmp, "bomb.json")
    with open(out_path, "w") as out:
        p = subprocess.Popen([BIN, "diagnose", "--no-history", "--quiet", "--format", "json", "--events", bomb], stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    rss_mb = usage.ru_maxrss / 1024
    if rc not in (0, 1, 3):
        failures.append(f"a file of 400,000 copies of a finding: exit {rc}")
    else:
        rep = json.load(open(out_path))
        if "more records than one run" not in json.dumps(rep.get("input_errors", [])):
            failures.append("a file past the collector's bounds was read without a note: " + json.dumps(rep.get("input_errors", []))[:300])
    if rss_mb > 200 and not sanitized:
        failures.append(f"diagnose --events held {rss_mb:.0f} MB for a file past the collector's bounds (bound: 200 MB)")
    # A FIFO, /dev/zero as a key file, a directory as a key file: refused at once, nothing blocks.
    fifo = os.path.join(tmp, "pipe.ffev")
    os.mkfifo(fifo)
    try:
        r = run(["diagnose", "--no-history", "--format", "json", "--events", good, fifo], timeout=60)
        if "not a regular file" not in r.stdout + r.stderr:
            failures.append("a FIFO given as an events file was not refused as not a regular file")
    except subprocess.TimeoutExpired:
        failures.append("diagnose --events blocked on a FIFO")
    for keyfile in ("/dev/zero", tmp):
        try:
            r = run(["scan", "--mask-key-file", keyfile, "-o", os.path.join(tmp, "k.ffev"), os.path.join(tmp, "secret.log")], timeout=60)
            if r.returncode != 2 or "not a regular file" not in r.stderr:
                failures.append(f"--mask-key-file {keyfile}: exit {r.returncode}: {r.stderr.strip()[:200]}")
        except subprocess.TimeoutExpired:
            failures.append(f"--mask-key-file {keyfile} blocked")
    # Masked and unmasked files cannot be merged; the same file twice is read once; a reason does not
    # repeat its file's name.
    raw = os.path.join(tmp, "raw.ffev")
    run(["scan", "--no-mask", "-o", raw, os.path.join(tmp, "secret.log")])
    for order in ((raw, good), (good, raw)):
        r = run(["diagnose", "--no-history", "--events"] + list(order))
        if r.returncode != 2 or "cannot be merged" not in r.stderr or "gpu-node-17" in r.stdout:
            failures.append(f"masked and unmasked events files merged ({os.path.basename(order[0])} first): exit {r.returncode}")
    rep, r = report(["--events", good, good])
    if rep is None or "given twice" not in json.dumps(rep.get("input_errors", [])):
        failures.append("the same events file given twice was merged twice without a note")
    notz = os.path.join(tmp, "plain-text.ffev")
    with open(notz, "w") as f:
        f.write("hello\n")
    rep, r = report(["--events", good, notz])
    for e in (rep or {}).get("input_errors", []):
        if "plain-text.ffev" in e.get("reason", ""):
            failures.append(f"an input error repeats its path in its reason: {e}")
    print(f"hostile events files: bounded (peak RSS {rss_mb:.0f} MB for {copies:,} findings and {ranks:,} ranks), FIFO and key files refused, masked/unmasked not merged")


def main():
    with tempfile.TemporaryDirectory(prefix="ff-events-") as tmp:
        merge_equality(tmp)
        good = contents(tmp)
        if good:
            bad_files(tmp, good)
            hostile(tmp, good)
    if failures:
        print(f"FAILED ({len(failures)}):")
        for f in failures:
            print("  " + f)
        sys.exit(1)
    print("events: all passed")


main()
