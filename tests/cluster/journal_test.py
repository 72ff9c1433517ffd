#!/usr/bin/env python3
"""diagnose/scan --journal DIR: node faults read straight from systemd journal files (sd-journal).

The journal files are made here by systemd-journal-remote from journal export format
(https://systemd.io/JOURNAL_EXPORT_FORMATS/) holding the kernel lines of a generated multi-node job (the
Xid 79 of bench/gen_logs.py's xid79 failure, with its link and NVRM lines). The job's text kernel log is
removed, so the only evidence of the node fault is in the journal:
  - with --journal the diagnosis names the GPU that fell off the bus, on the same rank and host as when
    the kernel lines were a text file; without it, it cannot;
  - scan --journal + diagnose --events gives the same;
  - a corrupt *.journal file and a directory without journal files are each one named input error.

usage: journal_test.py FIREFAULT_BIN TESTS_DIR
"""
import calendar
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

BIN = os.path.abspath(sys.argv[1])
TESTS = os.path.abspath(sys.argv[2])
REMOTE = next((p for p in ("/lib/systemd/systemd-journal-remote", "/usr/lib/systemd/systemd-journal-remote") if os.path.exists(p)), None)
failures = []


def diagnose(args):
    r = subprocess.run([BIN, "diagnose", "--no-history", "--quiet", "--format", "json", "--mask-key", "k"] + args,
                       capture_output=True, text=True, timeout=300)
    if r.returncode not in (0, 1, 3):
        raise AssertionError(f"diagnose {args}: exit {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


def export_entries(kern_log, year):
    """Text lines 'Nov 30 02:00:05 HOST kernel: MSG' as journal export entries."""
    out = []
    for i, line in enumerate(open(kern_log)):
        line = line.rstrip("\n")
        month_day_time, rest = line[:15], line[16:]
        host, _, msg = rest.partition(" kernel: ")
        t = calendar.timegm(time.strptime(f"{year} {month_day_time}", "%Y %b %d %H:%M:%S"))
        out.append("\n".join([f"__CURSOR=s=0;i={i}", f"__REALTIME_TIMESTAMP={t * 1000000}", f"__MONOTONIC_TIMESTAMP={(i + 1) * 1000}",
                              "_BOOT_ID=0123456789abcdef0123456789abcdef", "_TRANSPORT=kernel", "SYSLOG_IDENTIFIER=kernel", "PRIORITY=4",
                              f"_HOSTNAME={host}", f"MESSAGE={msg}"]) + "\n\n")
    return "".join(out)


def summary(rep):
    return rep["root_cause"].get("kind"), rep.get("initiating_rank"), rep.get("initiating_host")


def main():
    if not REMOTE:
        print("journal_test: systemd-journal-remote not installed (package systemd-journal-remote)")
        sys.exit(1)
    tmp = tempfile.mkdtemp(prefix="ff-journal-")
    try:
        job = os.path.join(tmp, "job")
        subprocess.run([sys.executable, os.path.join(os.path.dirname(TESTS), "bench", "gen_logs.py"), "--out", job, "--ranks", "16",
                        "--total-bytes", "2M", "--layout", "per-rank", "--failure", "xid79", "--position", "middle", "--seed", "7"],
                       check=True, capture_output=True)
        kern = [f for f in os.listdir(job) if f.startswith("kern-")]
        if not kern:
            raise AssertionError("gen_logs wrote no kernel log")
        with_text = diagnose([job])
        if with_text["root_cause"].get("kind") != "gpu_fell_off_bus":
            raise AssertionError(f"the text kernel log is not diagnosed as expected: {summary(with_text)}")
        jdir = os.path.join(tmp, "journal")
        os.makedirs(jdir)
        for k in kern:
            exp = os.path.join(tmp, k + ".export")
            with open(exp, "w") as f:
                f.write(export_entries(os.path.join(job, k), 2026))
            host = k[len("kern-"):-len(".log")]
            subprocess.run([REMOTE, f"--output={jdir}/remote-{host}.journal", exp], check=True, capture_output=True)
            os.remove(os.path.join(job, k))
        without = diagnose([job])
        if without["root_cause"].get("kind") == "gpu_fell_off_bus":
            failures.append("without the kernel log the GPU fault is still found: the test proves nothing")
        with_journal = diagnose([job, "--journal", jdir])
        if summary(with_journal) != summary(with_text):
            failures.append(f"--journal: {summary(with_journal)}, with the text kernel log: {summary(with_text)}")
        if not any(i["path"].endswith("(journal)") and i["lines"] > 0 for i in with_journal["inputs"]):
            failures.append(f"the journal is not listed as an input with lines: {with_journal['inputs']}")
        ev = [e for e in with_journal["root_cause"]["evidence"] if "Xid" in e["text"]]
        if not ev or not ev[0]["file"].endswith("(journal)") or not ev[0]["time"].startswith("2026-"):
            failures.append(f"the Xid evidence does not come from the journal with its date: {with_journal['root_cause']['evidence'][:2]}")
        # Map and reduce: the node's scan reads its journal too.
        e1, e2 = os.path.join(tmp, "a.ffev"), os.path.join(tmp, "b.ffev")
        subprocess.run([BIN, "scan", "--quiet", "--mask-key", "k", "-o", e1, job], check=True)
        none = os.path.join(tmp, "none")  # this node has no text log, only its journal
        os.makedirs(none)
        subprocess.run([BIN, "scan", "--quiet", "--mask-key", "k", "-o", e2, "--journal", jdir, none], check=True)
        merged = diagnose(["--events", e1, e2])
        if summary(merged)[0] != "gpu_fell_off_bus":
            failures.append(f"scan --journal + diagnose --events: {summary(merged)}")
        # Bad journals: one named error each, the logs still diagnosed.
        bad = os.path.join(tmp, "bad")
        os.makedirs(bad)
        with open(os.path.join(bad, "system.journal"), "wb") as f:
            f.write(b"LPKSHHRH" + os.urandom(4096))
        nothing = os.path.join(tmp, "nothing")
        os.makedirs(nothing)
        r = subprocess.run([BIN, "diagnose", "--no-history", "--format", "json", job, "--journal", bad, "--journal", nothing],
                           capture_output=True, text=True, timeout=300)
        if r.returncode not in (0, 1, 3):
            failures.append(f"bad journals: exit {r.returncode}: {r.stderr[-400:]}")
        else:
            rep = json.loads(r.stdout)
            errs = json.dumps(rep.get("input_errors", []))
            if "bad (journal)" not in errs or "no readable journal entries" not in errs:
                failures.append(f"a corrupt journal file is not named with its reason: {errs[:300]}")
            if "nothing (journal)" not in errs:
                failures.append(f"a directory without journal files is not named: {errs[:300]}")
            if rep["verdict"] not in ("failure", "undetermined"):
                failures.append(f"the logs were not diagnosed next to bad journals: {rep['verdict']}")
        # The journal alone (no log paths) is a diagnosis; a deep tree with no journal in its top two levels
        # (where sd_journal_open_directory looks) is refused after those two levels, not walked.
        alone = diagnose(["--journal", jdir])
        if summary(alone)[0] != "gpu_fell_off_bus":
            failures.append(f"diagnose --journal DIR with no log paths: {summary(alone)}")
        deep = os.path.join(tmp, "deep")
        d = deep
        for i in range(40):
            d = os.path.join(d, f"l{i}")
        os.makedirs(d)
        subprocess.run(["cp", os.path.join(jdir, os.listdir(jdir)[0]), d], check=True)
        r = subprocess.run([BIN, "diagnose", "--no-history", "--format", "json", job, "--journal", deep], capture_output=True, text=True, timeout=300)
        if "deep (journal)" not in r.stdout or "no journal files" not in r.stdout:
            failures.append(f"a journal 40 levels down was looked for (or the directory not named): {r.stdout[-300:]}")
    except (AssertionError, subprocess.CalledProcessError) as e:
        failures.append(str(e))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("journal_test: FAILED")
        for f in failures:
            print("  " + f)
        sys.exit(1)
    print("journal_test: all passed (journal-only node fault found, same rank and host as the text log, scan --journal, bad journals)")


main()
