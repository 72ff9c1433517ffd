#!/usr/bin/env python3
"""watch --alertmanager against a real prometheus-alertmanager on 127.0.0.1, started and stopped here.

Alertmanager routes to a webhook receiver in this test, which records what it is sent. The test checks:
  - a CUDA OOM written to a followed log reaches Alertmanager's v2 API as FirstfaultFailure with labels
    signature, kind, host, ranks (and the --alert-label job=...) and annotations summary, fix, verify;
  - the receiver gets it as "firing";
  - when watch is stopped (SIGTERM, as a scheduler ends a job), the alert is resolved: the receiver gets
    "resolved" and the API lists no active firstfault alert;
  - an unreachable Alertmanager is one error line per delivery and watch still prints the alert;
  - a receiver that accepts and then drips a byte every 0.5 s (Alertmanager and webhook) holds neither
    the next alert nor the end of the watch (SIGTERM);
  - --alert-label refuses the labels firstfault sets itself and empty values;
  - a slow rank (a straggler) reaches Alertmanager as FirstfaultSlowRank with the rank in its labels.
Every wait is a poll with a deadline on a readiness signal (Alertmanager's /-/ready, watch's metrics).

usage: alertmanager_test.py FIREFAULT_BIN
"""
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

BIN = os.path.abspath(sys.argv[1])
AM = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
failures = []


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_for(what, pred, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            v = pred()
            if v:
                return v
        except Exception:
            pass
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


received = []


class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        received.append(json.loads(self.rfile.read(n)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *a):
        pass


OOM = [
    "[rank1]: Traceback (most recent call last):",
    '[rank1]:   File "/workspace/train.py", line 211, in <module>',
    "[rank1]:     loss.backward()",
    "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.15 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.12 GiB memory in use.",
]


def metric(port, name):
    for line in get(f"http://127.0.0.1:{port}/metrics").splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


class Drip:
    """An 'Alertmanager' that accepts a POST and answers one byte per 0.5 s, never finishing: a slow or
    stuck receiver. watch must not be held by it (the alerts print, the watch ends when told)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.connections = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            threading.Thread(target=self.drip, args=(c,), daemon=True).start()

    def drip(self, c):
        try:
            c.recv(65536)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            while not self.stop.wait(0.5):
                c.sendall(b"x")
        except OSError:
            pass
        finally:
            c.close()


def slow_receiver(tmp):
    drip = Drip()
    logs = []
    for r in (3, 4):
        p = os.path.join(tmp, f"slow{r}.log")
        with open(p, "w") as f:
            f.write(f"[rank{r}]:2026-12-03 10:00:00,000 INFO step 1 loss 2.31\n")
        logs.append(p)
    mport = free_port()
    w = subprocess.Popen([BIN, "watch"] + logs + ["--from-start", "--json", "--no-history", "--metrics", f"127.0.0.1:{mport}",
                         "--alertmanager", f"http://127.0.0.1:{drip.port}", "--webhook", f"http://127.0.0.1:{drip.port}/hook",
                         "--poll-ms", "50"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    threading.Thread(target=lambda: [lines.append(l) for l in w.stdout], daemon=True).start()
    try:
        wait_for("watch ready (slow receiver)", lambda: (metric(mport, "firstfault_lines_read_total") or 0) >= 2)
        with open(logs[0], "a") as f:
            f.write("\n".join(l.replace("rank1", "rank3") for l in OOM) + "\n")
        wait_for("the first alert printed", lambda: any("cuda_oom" in l for l in lines))
        wait_for("the slow receiver reached", lambda: drip.connections >= 1)
        # While the receiver holds the first send, the next alert (a hang or an update) must still print:
        # the sends are not on the watch loop.
        with open(logs[1], "a") as f:
            f.write("[rank4]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 4] Process group watchdog thread terminated with exception: "
                    "[Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, "
                    "NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n")
        wait_for("a second alert printed while the receiver stalls", lambda: sum(1 for l in lines if l.startswith("{")) >= 2, timeout=30)
        w.send_signal(signal.SIGTERM)
        try:
            _, err = w.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            failures.append("watch did not end within 40 s of SIGTERM with a stalled Alertmanager and webhook")
            w.kill()
            return
        if "--alertmanager" not in err or "not delivered" not in err and "not resolved" not in err:
            failures.append("no error line for the stalled receiver: " + err[-400:])
    except AssertionError as e:
        failures.append(str(e) + " (slow receiver)")
    finally:
        if w.poll() is None:
            w.kill()
        drip.stop.set()


def slow_rank_alert(tmp, am_port):
    """A straggler (stragglers.hpp): rank 2's steps are 1.0 s apart by its lines' own times, the others' 0.3 s.
    watch sends it to Alertmanager as FirstfaultSlowRank, kind slow_rank, ranks=2, the summary naming the rank."""
    d = os.path.join(tmp, "slowjob")
    os.makedirs(d)
    for r in range(4):
        per = 1.0 if r == 2 else 0.3
        with open(os.path.join(d, f"rank{r}.log"), "w") as f:
            for s in range(20):
                t = 1765000000 + s * per
                f.write(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) + ",%03d [INFO] [rank%d] step %d loss 0.5\n"
                        % (int(t * 1000) % 1000, r, s))
    w = subprocess.Popen([BIN, "watch", d, "--from-start", "--json", "--no-history", "--alertmanager", f"http://127.0.0.1:{am_port}",
                          "--poll-ms", "50"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def slow():
            alerts = json.loads(get(f"http://127.0.0.1:{am_port}/api/v2/alerts"))
            return [a for a in alerts if a["labels"].get("alertname") == "FirstfaultSlowRank"]

        a = wait_for("the slow-rank alert in Alertmanager", slow)[0]
        if a["labels"].get("ranks") != "2" or a["labels"].get("kind") != "slow_rank":
            failures.append(f"slow-rank alert labels: {a['labels']}")
        if not a["annotations"].get("summary", "").startswith("slow rank: rank 2 1.00 s/step"):
            failures.append(f"slow-rank alert summary: {a['annotations']}")
    except AssertionError as e:
        failures.append(str(e) + " (slow rank)")
    finally:
        w.send_signal(signal.SIGTERM)
        try:
            w.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            w.kill()


def main():
    if not AM:
        print("alertmanager_test: prometheus-alertmanager not installed (scripts/install-deps.sh installs it)")
        sys.exit(1)
    tmp = tempfile.mkdtemp(prefix="ff-am-")
    hook_port, am_port = free_port(), free_port()
    hook = http.server.ThreadingHTTPServer(("127.0.0.1", hook_port), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    with open(os.path.join(tmp, "am.yml"), "w") as f:
        f.write(f"""route:
  receiver: rec
  group_by: [alertname, signature]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: rec
    webhook_configs:
      - url: http://127.0.0.1:{hook_port}/hook
        send_resolved: true
""")
    am = subprocess.Popen([AM, f"--config.file={tmp}/am.yml", f"--storage.path={tmp}/data", f"--web.listen-address=127.0.0.1:{am_port}",
                           "--cluster.listen-address="], stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "am.log"), "w"))
    watch = None
    try:
        wait_for("Alertmanager ready", lambda: get(f"http://127.0.0.1:{am_port}/-/ready") is not None)
        log = os.path.join(tmp, "rank1.log")
        with open(log, "w") as f:
            for step in range(5):
                f.write(f"[rank1]:2026-12-03 10:00:0{step},000 INFO step {step} loss 2.31\n")
        mport = free_port()
        watch = subprocess.Popen([BIN, "watch", log, "--from-start", "--json", "--no-history", "--metrics", f"127.0.0.1:{mport}",
                                  "--alertmanager", f"http://127.0.0.1:{am_port}", "--alert-label", "job=4711", "--poll-ms", "50"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for("watch ready", lambda: (metric(mport, "firstfault_lines_read_total") or 0) >= 5)
        with open(log, "a") as f:
            f.write("\n".join(OOM) + "\n")
            f.write("[rank1]:2026-12-03 10:00:09,000 INFO process exiting\n")

        def firing():
            alerts = json.loads(get(f"http://127.0.0.1:{am_port}/api/v2/alerts"))
            return [a for a in alerts if a["labels"].get("alertname") == "FirstfaultFailure"]

        alerts = wait_for("the alert in Alertmanager", firing)
        a = alerts[0]
        labels, ann = a["labels"], a["annotations"]
        expect = {"kind": "cuda_oom", "ranks": "1", "job": "4711"}
        for k, v in expect.items():
            if labels.get(k) != v:
                failures.append(f"label {k}={labels.get(k)!r}, expected {v!r}: {labels}")
        if not labels.get("signature", "").startswith("cuda_oom"):
            failures.append(f"signature label {labels.get('signature')!r}")
        for k in ("summary", "fix", "verify"):
            if not ann.get(k):
                failures.append(f"annotation {k} is empty: {ann}")
        if a["status"]["state"] != "active":
            failures.append(f"alert state {a['status']}")
        wait_for("a firing notification at the receiver",
                 lambda: any(n["status"] == "firing" and any(x["labels"].get("alertname") == "FirstfaultFailure" for x in n["alerts"]) for n in received))
        # The job ends: the scheduler sends SIGTERM; the alert is resolved.
        watch.send_signal(signal.SIGTERM)
        out, err = watch.communicate(timeout=60)
        watch = None
        if "cuda_oom" not in out:
            failures.append("watch printed no cuda_oom alert: " + out[:300])
        if "alertmanager" in err:
            failures.append("watch reported an Alertmanager error: " + err)
        wait_for("a resolved notification at the receiver",
                 lambda: any(n["status"] == "resolved" and any(x["labels"].get("alertname") == "FirstfaultFailure" for x in n["alerts"]) for n in received))
        wait_for("no active firstfault alert", lambda: not firing() or all(x["status"]["state"] != "active" for x in firing()))
        # An Alertmanager that is not there: one error per delivery, the alert still printed.
        dead = free_port()
        log2 = os.path.join(tmp, "rank2.log")
        with open(log2, "w") as f:
            f.write("\n".join(l.replace("rank1", "rank2") for l in OOM) + "\n")
        r = subprocess.run([BIN, "watch", log2, "--from-start", "--json", "--no-history", "--run-for", "2",
                            "--alertmanager", f"http://127.0.0.1:{dead}"], capture_output=True, text=True, timeout=120)
        if "cuda_oom" not in r.stdout:
            failures.append("with an unreachable Alertmanager the alert was not printed")
        if "--alertmanager" not in r.stderr or "not delivered" not in r.stderr:
            failures.append("no error line for an unreachable Alertmanager: " + r.stderr[-300:])
        bad = subprocess.run([BIN, "watch", log2, "--run-for", "1", "--alertmanager", "http://127.0.0.1:1", "--alert-label", "bad label=x"],
                             capture_output=True, text=True, timeout=60)
        if bad.returncode != 2:
            failures.append(f"a malformed --alert-label was accepted (exit {bad.returncode})")
        for label in ("alertname=Other", "ranks=0", "team="):
            bad = subprocess.run([BIN, "watch", log2, "--run-for", "1", "--alertmanager", "http://127.0.0.1:1", "--alert-label", label],
                                 capture_output=True, text=True, timeout=60)
            if bad.returncode != 2 or "--alert-label" not in bad.stderr:
                failures.append(f"--alert-label {label} was accepted (exit {bad.returncode}): it would be dropped or overwritten")
        slow_rank_alert(tmp, am_port)
        slow_receiver(tmp)
    except AssertionError as e:
        failures.append(str(e))
    finally:
        if watch:
            watch.kill()
        am.terminate()
        try:
            am.wait(timeout=30)
        except subprocess.TimeoutExpired:
            am.kill()
        hook.shutdown()
        if failures:
            sys.stdout.write(open(os.path.join(tmp, "am.log")).read()[-2000:])
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("alertmanager_test: FAILED")
        for f in failures:
            print("  " + f)
        sys.exit(1)
    print(f"alertmanager_test: all passed (firing, labels and annotations, resolved on SIGTERM, unreachable; {len(received)} notifications)")


main()
