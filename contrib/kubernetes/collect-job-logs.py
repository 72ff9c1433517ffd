#!/usr/bin/env python3
"""Collect a failed PyTorchJob's or JobSet's pod logs with kubectl and diagnose them with firstfault.

Three subcommands (python3 standard library only; kubectl and firstfault are run as programs):

  collect        list the job's pods (kubectl get pods -l ...), save every container's log, the previous
                 instance's too after a restart (kubectl logs --previous), the pods' status and the job's
                 events, then run firstfault on them.
  split          split recorded `kubectl logs --prefix --timestamps` output ("[pod/NAME/CONTAINER] TIME
                 message" lines, from files or stdin) into the same per-pod/container files, then run
                 firstfault.
  report-failed  the hook a CronJob runs: find PyTorchJobs/JobSets whose Failed condition is true and that
                 carry no firstfault/verdict annotation, collect and diagnose each one into a report
                 directory, then annotate the job with the one-line verdict and the report's action
                 (firstfault/action, firstfault/action-hosts); opt-in, cordon (--cordon) or taint (--taint)
                 the nodes a restart-excluding-hosts action names (docs/actions.md).

Output directory (collect and split):

  OUTDIR/logs/<pod>/<container>.log            kubectl logs --timestamps (the current or last instance)
  OUTDIR/logs/<pod>/<container>.previous.log   kubectl logs --previous --timestamps (before the last restart)
  OUTDIR/logs/k8s-status.log                   one line per container instance that ended or is waiting
                                               (reason, exit code, termination message) and per pod that
                                               was evicted or failed, as "[pod/P/C] TIME ..." lines
  OUTDIR/logs/k8s-events.log                   the job's and its pods' events, "TIME TYPE REASON KIND/NAME: message"
  OUTDIR/k8s/{pods,events,job}.json            the raw objects, for people (never diagnosed)
  OUTDIR/collect.txt                           what was fetched, cut, or could not be fetched
  OUTDIR/firstfault.ffev                       firstfault scan's events file (secrets masked; hosts too with --redact)
  OUTDIR/report.txt, report.json, verdict.txt  firstfault's report (secrets masked unless --no-mask; hosts with --redact)

firstfault reads every *.log, *.txt and *.json under a directory it is given, so the logs it diagnoses
live under OUTDIR/logs/ and everything else beside it; diagnose again with `firstfault diagnose OUTDIR/logs`.

Exit status of collect and split: firstfault diagnose's (0 healthy, 1 failure diagnosed, 3 undetermined,
2 nothing readable; 0 with --no-diagnose), 2 on a usage error, 6 when kubectl could not list the pods or
firstfault could not run. report-failed exits 0 when every job it picked was reported, else 6.
"""

import argparse
import concurrent.futures
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

LABEL_KEYS = {
    # kubeflow/training-operator (kubeflow/common pkg/apis/common/v1 JobNameLabel)
    "pytorchjob": "training.kubeflow.org/job-name",
    # kubernetes-sigs/jobset (api/jobset/v1alpha2 JobSetNameKey); also the pods of a Kubeflow Trainer v2 TrainJob
    "jobset": "jobset.sigs.k8s.io/jobset-name",
}
RESOURCES = {"pytorchjob": "pytorchjobs.kubeflow.org", "jobset": "jobsets.jobset.x-k8s.io"}
ANN_VERDICT = "firstfault/verdict"
ANN_REPORT = "firstfault/report"
ANN_AT = "firstfault/diagnosed-at"
ANN_ACTION = "firstfault/action"              # the report's action (docs/actions.md): restart, stop-fix-code, ...
ANN_ACTION_HOSTS = "firstfault/action-hosts"  # the nodes a restart-excluding-hosts action leaves out, comma-separated
EXIT_USAGE, EXIT_FAILED = 2, 6

# Kubernetes object names: pods are DNS-1123 subdomains, containers DNS-1123 labels. Names from a recorded
# stream become directory and file names, so nothing else is accepted (no '/', no leading '.').
POD_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
CONTAINER_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
PREFIX = re.compile(rb"^\[pod/([^/\]\s]+)/([^\]\s]+)\] ")


class Notes:
    """collect.txt: one line per thing worth knowing about the collection (thread-safe)."""

    def __init__(self, quiet=False):
        self.lines, self.quiet, self.lock = [], quiet, threading.Lock()

    def add(self, text):
        with self.lock:
            self.lines.append(text)
        if not self.quiet:
            print("collect-job-logs: " + text, file=sys.stderr)

    def write(self, path):
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(l + "\n" for l in self.lines))


def safe_pod(name):
    return POD_NAME.match(name) is not None and ".." not in name


def safe_container(name):
    return CONTAINER_NAME.match(name) is not None


# ---------------------------------------------------------------------------------------------- kubectl

class Kubectl:
    def __init__(self, binary, extra, timeout):
        self.binary, self.extra, self.timeout = binary, list(extra), timeout

    def run(self, args, max_bytes=None):
        """Run kubectl; returns (rc, stdout bytes, stderr text). rc None: timed out or not runnable.

        stdout goes to a temporary file (never all in memory); at most max_bytes of it are returned.
        """
        cmd = [self.binary] + self.extra + ["--request-timeout=%ds" % self.timeout] + args
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            try:
                p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
            except OSError as e:
                return None, b"", "cannot run %s: %s" % (self.binary, e)
            try:
                rc = p.wait(timeout=self.timeout + 2)  # kubectl's own --request-timeout, then a grace period
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                rc = None
            out.seek(0)
            data = out.read() if max_bytes is None else out.read(max_bytes)
            err.seek(0, os.SEEK_END)
            err.seek(max(0, err.tell() - 4096))
            etext = err.read().decode("utf-8", "replace").strip()
            if rc is None:
                etext = ("timed out after %ds; " % (self.timeout + 2)) + etext
            return rc, data, etext

    def get_json(self, args):
        rc, data, err = self.run(args + ["-o", "json"])
        if rc != 0:
            raise RuntimeError("kubectl %s: %s" % (" ".join(args), err or "exit %s" % rc))
        try:
            return json.loads(data.decode("utf-8"))
        except ValueError as e:
            raise RuntimeError("kubectl %s: not JSON (%s)" % (" ".join(args), e))


# ------------------------------------------------------------------------------------------ log bounds

def cut_at_line(data, keep_end):
    """data cut to whole lines: keep_end=False keeps the head (up to the last newline), True the tail."""
    if keep_end:
        nl = data.find(b"\n")
        return data[nl + 1:] if nl >= 0 else b""
    nl = data.rfind(b"\n")
    return data[:nl + 1] if nl >= 0 else b""


def omitted_line(nbytes, limit):
    size = "about %d bytes" % nbytes if nbytes >= 0 else "the middle"
    return ("[collect-job-logs: %s of this log left out here (--limit-bytes %d): the head and the tail "
            "are kept]\n" % (size, limit)).encode()


def trim_file(path, limit):
    """A file over limit bytes becomes its first and last limit/2 bytes (whole lines) with a marker."""
    size = os.path.getsize(path)
    if size <= limit:
        return False
    half = limit // 2
    with open(path, "rb") as f:
        head = cut_at_line(f.read(half), False)
        f.seek(size - half)
        tail = cut_at_line(f.read(half), True)
    tmp = path + ".trim"
    with open(tmp, "wb") as f:
        f.write(head + omitted_line(size - len(head) - len(tail), limit) + tail)
    os.replace(tmp, path)
    return True


# ------------------------------------------------------------------------------------ status and events

def rfc3339(ts):
    """A Kubernetes time (RFC 3339, possibly with fractions or an offset) as given, else None."""
    if not isinstance(ts, str) or not re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", ts):
        return None
    return ts


def one_line(text, limit=4096):
    text = (text or "").strip()
    if len(text) > limit:
        text = text[:limit] + "..."
    return text.replace("\r", " ").replace("\n", " | ")


def container_specs(pod):
    """(kind, name) for the pod's init, regular and ephemeral containers, in that order."""
    spec = pod.get("spec") or {}
    out = []
    for kind, key in (("init", "initContainers"), ("main", "containers"), ("ephemeral", "ephemeralContainers")):
        for c in spec.get(key) or []:
            if isinstance(c, dict) and isinstance(c.get("name"), str):
                out.append((kind, c["name"]))
    return out


def container_statuses(pod):
    st = pod.get("status") or {}
    out = {}
    for key in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"):
        for s in st.get(key) or []:
            if isinstance(s, dict) and isinstance(s.get("name"), str):
                out[s["name"]] = s
    return out


def fetch_plan(status):
    """Which instances kubectl logs can serve, following the kubelet's choice of container (current
    first, else the last terminated one): a list of (previous, why).

    running or terminated: the current instance, and the previous one when the container restarted.
    waiting after a restart (CrashLoopBackOff): only the last terminated instance; `kubectl logs` without
    --previous would return the same one again.
    """
    if not status:
        return [], "no container status (not scheduled or not created yet)"
    state = status.get("state") or {}
    last = (status.get("lastState") or {}).get("terminated")
    has_prev = bool(last and last.get("containerID"))
    if "running" in state or "terminated" in state:
        plan = [(False, "current")]
        if has_prev:
            plan.append((True, "previous"))
        return plan, ""
    if has_prev:
        return [(True, "previous")], ""
    waiting = state.get("waiting") or {}
    return [], "waiting to start: %s" % (waiting.get("reason") or "unknown")


def status_lines(pods):
    """k8s-status.log: how each container instance ended (or why it waits) and why a pod failed, in
    kubectl's --prefix form so that firstfault attributes each line to its pod."""
    out = []
    for pod in pods:
        meta, st = pod.get("metadata") or {}, pod.get("status") or {}
        name = meta.get("name", "")
        if not safe_pod(name):
            continue
        when = rfc3339(st.get("startTime")) or rfc3339(meta.get("creationTimestamp")) or ""
        if st.get("reason") or st.get("message"):
            out.append((when, "[pod/%s/pod] %s Pod %s: phase %s, Reason: %s, Message: %s" % (
                name, when, name, st.get("phase", "?"), st.get("reason", ""), one_line(st.get("message")))))
        for cond in st.get("conditions") or []:
            if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
                t = rfc3339(cond.get("lastTransitionTime")) or when
                out.append((t, "[pod/%s/pod] %s Pod %s: DisruptionTarget, Reason: %s, Message: %s" % (
                    name, t, name, cond.get("reason", ""), one_line(cond.get("message")))))
        statuses = container_statuses(pod)
        for kind, cname in container_specs(pod):
            if not safe_container(cname):
                continue
            s = statuses.get(cname)
            if not s:
                continue
            restarts = s.get("restartCount", 0)
            for label, term in (("previous instance", (s.get("lastState") or {}).get("terminated")),
                                ("current instance", (s.get("state") or {}).get("terminated"))):
                if not term:
                    continue
                code = term.get("exitCode")
                if code == 0 and kind == "init":
                    continue  # an init container that did its job
                t = rfc3339(term.get("finishedAt")) or when
                line = "[pod/%s/%s] %s Container %s (%s, restarts: %s) Terminated, Reason: %s, Exit Code: %s" % (
                    name, cname, t, cname, label, restarts, term.get("reason", ""), code)
                if term.get("signal"):
                    line += ", Signal: %s" % term.get("signal")
                if term.get("message"):
                    line += ", Message: " + one_line(term.get("message"))
                out.append((t, line))
            waiting = (s.get("state") or {}).get("waiting")
            if waiting and waiting.get("reason") not in (None, "", "PodInitializing", "ContainerCreating"):
                out.append((when, "[pod/%s/%s] %s Container %s Waiting, Reason: %s, Message: %s" % (
                    name, cname, when, cname, waiting.get("reason"), one_line(waiting.get("message")))))
    out.sort(key=lambda x: x[0])
    return [l for _, l in out]


def event_time(ev):
    for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
        t = rfc3339(ev.get(key))
        if t:
            return t
    t = rfc3339(((ev.get("series") or {}).get("lastObservedTime")))
    return t or rfc3339((ev.get("metadata") or {}).get("creationTimestamp")) or ""


def event_lines(events, names, uids, cap=5000):
    """k8s-events.log: the events of the job and its pods (matched by name, or by uid when known)."""
    rows = []
    for ev in events:
        obj = ev.get("involvedObject") or ev.get("regarding") or {}
        if obj.get("uid") not in uids and obj.get("name") not in names:
            continue
        msg = one_line(ev.get("message") or ev.get("note"))
        count = ev.get("count") or (ev.get("series") or {}).get("count") or 1
        t = event_time(ev)
        rows.append((t, "%s %s %s %s/%s: %s%s" % (t, ev.get("type", ""), ev.get("reason", ""), obj.get("kind", "?"),
                                                  obj.get("name", "?"), msg, " (x%d)" % count if count > 1 else "")))
    rows.sort(key=lambda x: x[0])
    return [l for _, l in rows[-cap:]]


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(l + "\n" for l in lines))


# -------------------------------------------------------------------------------------------- collect

def fetch_container_log(kc, ns, pod, cname, previous, path, limit, keep_prefix, notes):
    """kubectl logs into path, bounded: the first limit bytes; a log that fills them is kept as its
    head and tail (a second call with --tail), so the last lines (the error) are never the part lost."""
    base = ["logs", "-n", ns, pod, "-c", cname, "--timestamps"]
    if previous:
        base.append("--previous")
    if keep_prefix:
        base.append("--prefix")
    what = "%s/%s%s" % (pod, cname, " (previous)" if previous else "")
    rc, data, err = kc.run(base + ["--limit-bytes=%d" % limit], max_bytes=limit)
    if rc != 0:
        notes.add("%s: no log: %s" % (what, err or "kubectl exit %s" % rc))
        return False
    if len(data) >= limit:
        half = limit // 2
        head = cut_at_line(data[:half], False)
        avg = max(1, len(head) // max(1, head.count(b"\n")))
        tail_lines, tail = max(1, half // avg), b""
        for _ in range(3):  # lines longer at the end than at the start: fewer lines, at most three tries
            rc2, t, err2 = kc.run(base + ["--tail=%d" % tail_lines, "--limit-bytes=%d" % half], max_bytes=half)
            if rc2 != 0:
                notes.add("%s: the tail could not be fetched (%s): only the head is kept" % (what, err2))
                tail = b""
                break
            tail = t
            if len(t) < half:
                break
            tail_lines = max(1, tail_lines // 4)
        if tail and len(tail) >= half:
            tail = cut_at_line(tail, True)
        data = head + omitted_line(-1, limit) + tail
        notes.add("%s: over --limit-bytes %d: kept the first %d bytes and the last %d lines" % (
            what, limit, len(head), tail.count(b"\n")))
    with open(path, "wb") as f:
        f.write(data)
    return True


def resolve_selector(args):
    if args.selector:
        return args.selector, None, None
    kind = "pytorchjob" if args.pytorchjob else "jobset"
    name = args.pytorchjob or args.jobset
    return "%s=%s" % (LABEL_KEYS[kind], name), kind, name


def collect(args, notes):
    """Fetch everything into args.out; returns (ok, job id)."""
    kc = Kubectl(args.kubectl, args.kubectl_arg, args.timeout)
    selector, kind, name = resolve_selector(args)
    logs = os.path.join(args.out, "logs")
    meta = os.path.join(args.out, "k8s")
    os.makedirs(logs, exist_ok=True)
    os.makedirs(meta, exist_ok=True)
    notes.add("namespace %s, selector %s" % (args.namespace, selector))
    job_uid = None
    if kind:
        try:
            job = kc.get_json(["get", RESOURCES[kind], name, "-n", args.namespace])
            with open(os.path.join(meta, "job.json"), "w", encoding="utf-8") as f:
                json.dump(job, f, indent=1)
            job_uid = (job.get("metadata") or {}).get("uid")
        except RuntimeError as e:
            notes.add("the %s itself could not be read (%s); going on with its pods" % (kind, e))
    try:
        plist = kc.get_json(["get", "pods", "-n", args.namespace, "-l", selector])
    except RuntimeError as e:
        notes.add("cannot list the pods: %s" % e)
        return False, None
    with open(os.path.join(meta, "pods.json"), "w", encoding="utf-8") as f:
        json.dump(plist, f, indent=1)
    pods = [p for p in plist.get("items") or [] if isinstance(p, dict)]
    pods.sort(key=lambda p: (p.get("metadata") or {}).get("name", ""))
    if not pods:
        notes.add("no pods match %s in %s (deleted already? a cleanPodPolicy or TTL removes them)" % (selector, args.namespace))
    if len(pods) > args.max_pods:
        notes.add("%d pods: only the first %d (by name) are collected (--max-pods)" % (len(pods), args.max_pods))
        pods = pods[:args.max_pods]
    tasks = []
    for pod in pods:
        pname = (pod.get("metadata") or {}).get("name", "")
        if not safe_pod(pname):
            notes.add("pod name %r skipped (not a Kubernetes name)" % pname)
            continue
        statuses = container_statuses(pod)
        for _, cname in container_specs(pod):
            if not safe_container(cname):
                notes.add("%s: container name %r skipped" % (pname, cname))
                continue
            s = statuses.get(cname)
            plan, why = fetch_plan(s)
            if why:
                notes.add("%s/%s: no log to fetch: %s" % (pname, cname, why))
            if s and s.get("restartCount", 0) > 1 and any(prev for prev, _ in plan):
                notes.add("%s/%s: restarted %d times; the kubelet keeps the log of the last previous instance only"
                          % (pname, cname, s["restartCount"]))
            for previous, _ in plan:
                d = os.path.join(logs, pname)
                os.makedirs(d, exist_ok=True)
                path = os.path.join(d, cname + (".previous.log" if previous else ".log"))
                tasks.append((pname, cname, previous, path))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.parallel)) as ex:
        futs = [ex.submit(fetch_container_log, kc, args.namespace, p, c, prev, path, args.limit_bytes,
                          args.keep_prefix, notes) for p, c, prev, path in tasks]
        fetched = sum(1 for f in futs if f.result())
    for pname in {t[0] for t in tasks}:
        d = os.path.join(logs, pname)
        if os.path.isdir(d) and not os.listdir(d):
            os.rmdir(d)
    notes.add("%d pod(s), %d of %d container log(s) fetched" % (len(pods), fetched, len(tasks)))
    write_lines(os.path.join(logs, "k8s-status.log"), status_lines(pods))
    names = {(p.get("metadata") or {}).get("name") for p in pods}
    uids = {(p.get("metadata") or {}).get("uid") for p in pods} - {None}
    if name:
        names.add(name)
    if job_uid:
        uids.add(job_uid)
    try:
        evs = kc.get_json(["get", "events", "-n", args.namespace])
        items = [e for e in evs.get("items") or [] if isinstance(e, dict)]
        mine = [e for e in items if ((e.get("involvedObject") or {}).get("uid") in uids
                                     or (e.get("involvedObject") or {}).get("name") in names)]
        with open(os.path.join(meta, "events.json"), "w", encoding="utf-8") as f:
            json.dump({"apiVersion": "v1", "kind": "List", "items": mine}, f, indent=1)
        write_lines(os.path.join(logs, "k8s-events.log"), event_lines(mine, names, uids))
    except RuntimeError as e:
        notes.add("no events: %s" % e)
    job_id = "%s/%s/%s" % (args.namespace, name or selector, job_uid or "")
    return True, job_id


# ---------------------------------------------------------------------------------------------- split

class Splitter:
    """Distributes "[pod/P/C] ..." lines into OUTDIR/logs/P/C[.previous].log (appending; at most
    max_open files open at once). Lines without the prefix, or with a name that is not a Kubernetes
    name, go to OUTDIR/logs/unprefixed.log."""

    def __init__(self, logs, keep_prefix, max_open=64):
        self.logs, self.keep_prefix, self.max_open = logs, keep_prefix, max_open
        self.open, self.paths, self.counts, self.unprefixed = {}, set(), {}, 0

    def _file(self, path):
        f = self.open.pop(path, None)
        if f is None:
            if len(self.open) >= self.max_open:
                _, old = self.open.popitem()  # the least recently used (dicts keep insertion order)
                old.close()
            os.makedirs(os.path.dirname(path), exist_ok=True)
            f = open(path, "ab")
            self.paths.add(path)
        self.open[path] = f
        return f

    def feed(self, stream, previous):
        suffix = ".previous.log" if previous else ".log"
        for line in stream:
            m = PREFIX.match(line)
            if m:
                pod, cont = m.group(1).decode("utf-8", "replace"), m.group(2).decode("utf-8", "replace")
                if safe_pod(pod) and safe_container(cont):
                    path = os.path.join(self.logs, pod, cont + suffix)
                    self._file(path).write(line if self.keep_prefix else line[m.end():])
                    self.counts[path] = self.counts.get(path, 0) + 1
                    continue
            if line.strip():
                self._file(os.path.join(self.logs, "unprefixed.log")).write(line)
                self.unprefixed += 1

    def close(self):
        for f in self.open.values():
            f.close()
        self.open.clear()


def split(args, notes):
    logs = os.path.join(args.out, "logs")
    meta = os.path.join(args.out, "k8s")
    os.makedirs(logs, exist_ok=True)
    sp = Splitter(logs, args.keep_prefix)
    for previous, sources in ((False, args.files or ([] if args.previous else ["-"])), (True, args.previous or [])):
        for src in sources:
            if src == "-":
                sp.feed(sys.stdin.buffer, previous)
            else:
                with open(src, "rb") as f:
                    sp.feed(f, previous)
    sp.close()
    for path in sorted(sp.paths):
        if trim_file(path, args.limit_bytes):
            notes.add("%s: over --limit-bytes %d: kept its head and tail" % (os.path.relpath(path, args.out), args.limit_bytes))
    for path in sorted(sp.counts):
        notes.add("%s: %d line(s)" % (os.path.relpath(path, args.out), sp.counts[path]))
    if sp.unprefixed:
        notes.add("%d line(s) without a [pod/NAME/CONTAINER] prefix: logs/unprefixed.log" % sp.unprefixed)
    names, uids, pods = set(), set(), []
    if args.pods_json:
        with open(args.pods_json, encoding="utf-8") as f:
            doc = json.load(f)
        pods = doc.get("items", [doc]) if isinstance(doc, dict) else []
        write_lines(os.path.join(logs, "k8s-status.log"), status_lines(pods))
        os.makedirs(meta, exist_ok=True)
        shutil.copyfile(args.pods_json, os.path.join(meta, "pods.json"))
        names = {(p.get("metadata") or {}).get("name") for p in pods}
        uids = {(p.get("metadata") or {}).get("uid") for p in pods} - {None}
    if args.events_json:
        with open(args.events_json, encoding="utf-8") as f:
            doc = json.load(f)
        evs = [e for e in doc.get("items") or [] if isinstance(e, dict)]
        if args.job_name:
            names.add(args.job_name)
        if not names:  # no pods to filter by: every event given
            names = {(e.get("involvedObject") or {}).get("name") for e in evs}
        write_lines(os.path.join(logs, "k8s-events.log"), event_lines(evs, names, uids))
        os.makedirs(meta, exist_ok=True)
        shutil.copyfile(args.events_json, os.path.join(meta, "events.json"))
    return True, args.job_id or "split/%s" % os.path.basename(os.path.abspath(args.out))


# -------------------------------------------------------------------------------------------- diagnose

def firstfault_cmd(args):
    return [args.firstfault] + [a for d in args.kb for a in ("--kb", d)]


def mask_args(args):
    out = []
    if args.no_mask:
        out.append("--no-mask")
    elif args.redact:
        out.append("--redact")
    if args.mask_config:
        out += ["--mask-config", args.mask_config]
    return out


def diagnose(args, job_id, notes):
    """firstfault scan OUTDIR/logs once, then diagnose --events for each report; returns diagnose's
    exit status (None when firstfault could not run)."""
    logs = os.path.join(args.out, "logs")
    ffev = os.path.join(args.out, "firstfault.ffev")
    ff = firstfault_cmd(args)
    history = ["--history", args.history] if args.history else ["--no-history"]
    try:
        r = subprocess.run(ff + ["scan", logs, "-o", ffev, "--job-id", job_id, "-q"] + mask_args(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=args.diagnose_timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        notes.add("firstfault scan did not run: %s" % e)
        return None
    if r.returncode == 1:  # nothing readable: the events file is still written, and diagnose says so
        notes.add("firstfault scan: nothing readable in %s" % logs)
    elif r.returncode != 0 or not os.path.exists(ffev):
        notes.add("firstfault scan exited %d: %s" % (r.returncode, r.stderr.decode("utf-8", "replace").strip()[-2000:]))
        return r.returncode if r.returncode in (2, 4, 5) else None
    status = None
    for fmt, name in (("json", "report.json"), ("text", "report.txt"), ("brief", "verdict.txt")):
        cmd = ff + ["diagnose", "--events", ffev, "--job-id", job_id, "--format", fmt, "-q"] + history + mask_args(args)
        if fmt == "text":
            cmd += ["--color", "never"]
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=args.diagnose_timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            notes.add("firstfault diagnose did not run: %s" % e)
            return None
        with open(os.path.join(args.out, name), "wb") as f:
            f.write(r.stdout)
        if r.returncode not in (0, 1, 3):
            notes.add("firstfault diagnose --format %s exited %d: %s" % (fmt, r.returncode, r.stderr.decode("utf-8", "replace").strip()[-2000:]))
        status = r.returncode
        history = ["--no-history"]  # one history entry per job, not one per format
    return status


def job_action(args, out, job_id):
    """The report's action as (kind, nodes). The hosts of a restart-excluding-hosts action are named by the
    node each stands for: a pod of the job (its spec.nodeName) or one of the job's nodes; firstfault maps a
    masked token back through the mask key (diagnose --format action --action-hosts) and drops other names,
    so a hook never acts on a node the job did not run on. ("", []) when firstfault could not say."""
    try:
        with open(os.path.join(out, "k8s", "pods.json"), encoding="utf-8") as f:
            items = json.load(f).get("items") or []
    except (OSError, ValueError):
        items = []
    node_of = {}
    for p in items:
        name, node = (p.get("metadata") or {}).get("name"), (p.get("spec") or {}).get("nodeName")
        if name and node and safe_pod(name) and safe_pod(node):
            node_of[name] = node
    nodes = set(node_of.values())
    cmd = firstfault_cmd(args) + ["diagnose", "--events", os.path.join(out, "firstfault.ffev"), "--job-id", job_id,
                                  "--format", "action", "-q", "--no-history"] + mask_args(args)
    if node_of:
        cmd += ["--action-hosts", ",".join(sorted(set(node_of) | nodes))]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=args.diagnose_timeout)
    except (OSError, subprocess.TimeoutExpired):
        return "", []
    line = r.stdout.decode("utf-8", "replace").strip().split("\n")[0]
    kind, _, hosts = line.partition(" ")
    picked = []
    for h in hosts.split(","):
        n = node_of.get(h) or (h if h in nodes else None)
        if n and n not in picked:
            picked.append(n)
    return kind, picked


def act_on_nodes(args, kc, kind, nodes):
    """--cordon / --taint: the nodes a restart-excluding-hosts action names. Returns the errors."""
    if kind != "restart-excluding-hosts":
        return 0
    errors = 0
    for node in nodes:
        steps = []
        if args.cordon:
            steps.append(["cordon", node])
        if args.taint:
            steps.append(["taint", "nodes", node, args.taint, "--overwrite"])
        for step in steps:
            rc, _, err = kc.run(step)
            if rc != 0:
                errors += 1
                print("collect-job-logs: %s: %s" % (" ".join(step), err), file=sys.stderr)
            else:
                print("  %s %s (action %s)" % ("cordoned" if step[0] == "cordon" else "tainted", node, kind))
    return errors


def finish(args, notes, ok, job_id):
    if not ok:
        notes.write(os.path.join(args.out, "collect.txt"))
        return EXIT_FAILED
    status = 0
    if not args.no_diagnose:
        status = diagnose(args, job_id, notes)
    notes.write(os.path.join(args.out, "collect.txt"))
    if status is None:
        return EXIT_FAILED
    if not args.no_diagnose and args.print != "none":
        name = {"text": "report.txt", "json": "report.json", "brief": "verdict.txt"}[args.print]
        with open(os.path.join(args.out, name), "rb") as f:
            sys.stdout.buffer.write(f.read())
        sys.stdout.flush()
    if args.discard_logs:
        shutil.rmtree(os.path.join(args.out, "logs"), ignore_errors=True)
        shutil.rmtree(os.path.join(args.out, "k8s"), ignore_errors=True)
    return status


# --------------------------------------------------------------------------------------- report-failed

def failed_since(obj):
    """The time the job's Failed condition became true, '' when it is failed without one, None when not failed."""
    st = obj.get("status") or {}
    for c in st.get("conditions") or []:
        if c.get("type") == "Failed" and str(c.get("status")) == "True":
            return c.get("lastTransitionTime") or c.get("lastUpdateTime") or ""
    if st.get("terminalState") == "Failed":  # JobSet
        return ""
    return None


def parse_time(t):
    try:
        return datetime.datetime.strptime(t[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    except (TypeError, ValueError):
        return None


def report_failed(args):
    kc = Kubectl(args.kubectl, args.kubectl_arg, args.timeout)
    now = datetime.datetime.now(datetime.timezone.utc)
    picked, errors = [], 0
    scopes = [["-A"]] if args.all_namespaces else [["-n", ns] for ns in args.namespace]
    for kind in args.kinds:
        for scope in scopes:
            try:
                lst = kc.get_json(["get", RESOURCES[kind]] + scope)
            except RuntimeError as e:
                print("collect-job-logs: %s" % e, file=sys.stderr)
                errors += 1
                continue
            for obj in lst.get("items") or []:
                meta = obj.get("metadata") or {}
                since = failed_since(obj)
                if since is None or ANN_VERDICT in (meta.get("annotations") or {}):
                    continue
                t = parse_time(since)
                if t and args.max_age_hours and (now - t).total_seconds() > args.max_age_hours * 3600:
                    continue
                ns, name, uid = meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", "")
                if not safe_pod(ns) or not safe_pod(name):
                    continue
                out = os.path.join(args.reports, ns, "%s-%s" % (name, uid[:8] or "nouid"))
                if os.path.exists(os.path.join(out, "verdict.txt")):
                    continue  # reported by an earlier run whose annotation failed
                picked.append((kind, ns, name, out))
    picked = picked[:args.max_jobs]
    for kind, ns, name, out in picked:
        a = argparse.Namespace(**vars(args))
        a.namespace, a.selector, a.out, a.print = ns, None, out, "none"
        a.pytorchjob = name if kind == "pytorchjob" else None
        a.jobset = name if kind == "jobset" else None
        os.makedirs(out, exist_ok=True)
        notes = Notes(quiet=True)
        ok, job_id = collect(a, notes)
        status = finish(a, notes, ok, job_id)
        verdict = ""
        vpath = os.path.join(out, "verdict.txt")
        if os.path.exists(vpath):
            with open(vpath, encoding="utf-8", errors="replace") as f:
                verdict = one_line(f.read(), 1000)
        if status == 2:  # nothing readable: the pods are gone (cleanPodPolicy, TTL, a JobSet restart) or never ran
            verdict = "undetermined: no pod logs could be collected (pods deleted or never started?): see collect.txt"
        if status not in (0, 1, 2, 3) or not verdict:
            errors += 1
            print("%s %s/%s: no diagnosis (see %s)" % (kind, ns, name, os.path.join(out, "collect.txt")))
            continue
        print("%s %s/%s: %s" % (kind, ns, name, verdict))
        act, act_nodes = job_action(args, out, job_id) if status in (0, 1, 3) and job_id else ("", [])
        errors += act_on_nodes(args, kc, act, act_nodes)
        if args.print_reports:
            with open(os.path.join(out, "report.txt"), encoding="utf-8", errors="replace") as f:
                sys.stdout.write(f.read())
        if not args.no_annotate:
            rc, _, err = kc.run(["annotate", RESOURCES[kind], name, "-n", ns, "--overwrite",
                                 "%s=%s" % (ANN_VERDICT, verdict), "%s=%s" % (ANN_REPORT, out),
                                 "%s=%s" % (ANN_AT, now.strftime("%Y-%m-%dT%H:%M:%SZ")),
                                 "%s=%s" % (ANN_ACTION, act or "investigate"), "%s=%s" % (ANN_ACTION_HOSTS, ",".join(act_nodes))])
            if rc != 0:
                errors += 1
                print("collect-job-logs: annotate %s/%s: %s" % (ns, name, err), file=sys.stderr)
    if not picked:
        print("no failed job without a %s annotation" % ANN_VERDICT)
    return 0 if errors == 0 else EXIT_FAILED


# ------------------------------------------------------------------------------------------------ main

def byte_size(s):
    m = re.match(r"^(\d+)([KMG]i?)?$", s.strip(), re.I)
    if not m:
        raise argparse.ArgumentTypeError("expected bytes such as 16777216, 512Ki or 16Mi")
    mult = {"": 1, "k": 1024, "ki": 1024, "m": 1 << 20, "mi": 1 << 20, "g": 1 << 30, "gi": 1 << 30}[(m.group(2) or "").lower()]
    v = int(m.group(1)) * mult
    if v < 4096:
        raise argparse.ArgumentTypeError("at least 4096 bytes")
    return v


def add_common(p, collecting):
    p.add_argument("-o", "--out", help="output directory (default: ./firstfault-<name>-<UTC time>)")
    p.add_argument("--limit-bytes", type=byte_size, default=16 << 20,
                   help="cap per container log (default 16Mi); a longer log keeps its head and tail")
    p.add_argument("--keep-prefix", action="store_true",
                   help="keep kubectl's [pod/NAME/CONTAINER] prefix on every line (firstfault then names the pod "
                        "as the host; without it the pod is only the directory name)")
    p.add_argument("--no-diagnose", action="store_true", help="only collect")
    p.add_argument("--print", choices=["text", "json", "brief", "none"], default="text",
                   help="which report to print on stdout (all are written to OUTDIR)")
    p.add_argument("--firstfault", default=os.environ.get("FIRSTFAULT", "firstfault"), help="firstfault binary")
    p.add_argument("--kb", action="append", default=[], metavar="DIR", help="extra signature directory (repeatable)")
    p.add_argument("--no-mask", action="store_true", help="reports show secrets too (default: secrets masked, host names shown)")
    p.add_argument("--redact", action="store_true", help="reports mask pod, node and host names and addresses too (keyed by the job id)")
    p.add_argument("--mask-config", help="firstfault team masking config")
    p.add_argument("--history", help="firstfault history database to record the diagnosis in (default: none)")
    p.add_argument("--diagnose-timeout", type=int, default=600, help="seconds for each firstfault run")
    p.add_argument("--discard-logs", action="store_true",
                   help="after diagnosing, delete logs/ and k8s/ (keep the masked reports and events file)")
    if collecting:
        p.add_argument("--kubectl", default=os.environ.get("KUBECTL", "kubectl"), help="kubectl binary")
        p.add_argument("--kubectl-arg", action="append", default=[], metavar="ARG",
                       help="extra global kubectl argument, written --kubectl-arg=--context=prod (repeatable)")
        p.add_argument("--timeout", type=int, default=60, help="seconds for each kubectl call (default 60)")
        p.add_argument("--parallel", type=int, default=4, help="kubectl logs calls at once (default 4)")
        p.add_argument("--max-pods", type=int, default=2000, help="collect at most this many pods (default 2000)")


def main(argv):
    ap = argparse.ArgumentParser(prog="collect-job-logs", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    sub = ap.add_subparsers(dest="cmd")
    c = sub.add_parser("collect", help="fetch a job's pod logs with kubectl and diagnose them", allow_abbrev=False)
    c.add_argument("-n", "--namespace", required=True)
    g = c.add_mutually_exclusive_group(required=True)
    g.add_argument("--pytorchjob", metavar="NAME", help="a Kubeflow PyTorchJob (pods labelled %s=NAME)" % LABEL_KEYS["pytorchjob"])
    g.add_argument("--jobset", metavar="NAME", help="a JobSet or Kubeflow TrainJob (pods labelled %s=NAME)" % LABEL_KEYS["jobset"])
    g.add_argument("-l", "--selector", help="any label selector for the job's pods")
    add_common(c, True)
    s = sub.add_parser("split", help="split recorded `kubectl logs --prefix --timestamps` output and diagnose it",
                       allow_abbrev=False)
    s.add_argument("files", nargs="*", metavar="FILE", help="recorded output of the current instances (- for stdin, the default)")
    s.add_argument("--previous", action="append", default=[], metavar="FILE",
                   help="recorded `kubectl logs --previous --prefix --timestamps` output (repeatable)")
    s.add_argument("--pods-json", metavar="FILE", help="recorded `kubectl get pods -o json`: adds logs/k8s-status.log")
    s.add_argument("--events-json", metavar="FILE", help="recorded `kubectl get events -o json`: adds logs/k8s-events.log")
    s.add_argument("--job-name", help="the job's name (its own events are kept from --events-json)")
    s.add_argument("--job-id", help="id that keys firstfault's masking (default: split/<OUTDIR name>)")
    add_common(s, False)
    r = sub.add_parser("report-failed", help="collect and diagnose every failed job not reported yet; annotate it",
                       allow_abbrev=False)
    r.add_argument("-n", "--namespace", action="append", default=[], help="namespace to look in (repeatable)")
    r.add_argument("-A", "--all-namespaces", action="store_true",
                   help="look in every namespace (needs a ClusterRole)")
    r.add_argument("--kinds", default="pytorchjob,jobset", help="comma-separated: pytorchjob,jobset")
    r.add_argument("--reports", required=True, help="root directory: one report directory per job under <ns>/<name>-<uid>")
    r.add_argument("--max-jobs", type=int, default=5, help="jobs reported per run (default 5)")
    r.add_argument("--max-age-hours", type=float, default=72, help="skip jobs that failed longer ago (default 72; 0: no limit)")
    r.add_argument("--no-annotate", action="store_true", help="do not annotate the jobs (the report directory still marks them done)")
    r.add_argument("--print-reports", action="store_true", help="also print each text report on stdout")
    r.add_argument("--cordon", action="store_true",
                   help="cordon the nodes a restart-excluding-hosts action names (an Xid 79, ECC errors, the same "
                        "failure again on a node: docs/actions.md); implies --keep-prefix (each line names its pod, whose "
                        "spec.nodeName is the node); needs RBAC to patch nodes")
    r.add_argument("--taint", metavar="KEY=VALUE:EFFECT",
                   help="taint those nodes, e.g. firstfault.io/action=restart-excluding-hosts:NoSchedule (implies --keep-prefix)")
    add_common(r, True)
    args = ap.parse_args(argv)
    if not args.cmd:
        ap.print_help(sys.stderr)
        return EXIT_USAGE
    if args.cmd == "report-failed":
        args.kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
        bad = [k for k in args.kinds if k not in RESOURCES]
        if bad or not args.kinds:
            ap.error("--kinds: expected pytorchjob and/or jobset, got %s" % args.kinds)
        if not args.namespace and not args.all_namespaces:
            ap.error("report-failed needs -n NAMESPACE or -A")
        if args.cordon or args.taint:
            args.keep_prefix = True  # each line names its pod, so the action can name the pod's node
        return report_failed(args)
    if not args.out:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        label = getattr(args, "pytorchjob", None) or getattr(args, "jobset", None) or "job"
        args.out = "firstfault-%s-%s" % (label, stamp)
    os.makedirs(args.out, exist_ok=True)
    notes = Notes()
    if args.cmd == "collect":
        ok, job_id = collect(args, notes)
    else:
        for src in args.files + args.previous + [x for x in (args.pods_json, args.events_json) if x]:
            if src != "-" and not os.path.isfile(src):
                ap.error("%s: no such file" % src)
        ok, job_id = split(args, notes)
    return finish(args, notes, ok, job_id)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(1)
