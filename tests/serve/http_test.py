#!/usr/bin/env python3
"""HTTP tests of `firstfault serve` on loopback: the API and the form, the security headers, the CSRF and
origin checks, oversized and malformed uploads, a slow client, concurrent requests, a non-loopback bind
refused. Usage: http_test.py BIN TESTS_DIR. Starts the server itself (readiness: --ready-file)."""
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

BIN = sys.argv[1]
TESTS = sys.argv[2]
CASE = os.path.join(TESTS, "corpus", "run2-torchrun-uneven-batches-rank3", "logs", "console.log")
OOM = os.path.join(TESTS, "corpus", "gh-funasr-2006", "logs")


def wait_file(path, proc, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                text = f.read().strip()
            if text:
                return text
        if proc.poll() is not None:
            raise RuntimeError("serve exited with %s" % proc.returncode)
        time.sleep(0.05)
    raise RuntimeError("serve did not become ready")


class Serve(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        ready = os.path.join(cls.tmp.name, "ready")
        cls.proc = subprocess.Popen([BIN, "serve", "--listen", "127.0.0.1:0", "--ready-file", ready, "--max-upload-mib", "2",
                                     "--history", os.path.join(cls.tmp.name, "h.db")],
                                    stderr=subprocess.PIPE, env=dict(os.environ, TMPDIR=cls.tmp.name))
        url = wait_file(ready, cls.proc)
        u = urllib.parse.urlparse(url)
        cls.host, cls.port = u.hostname, u.port

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        cls.proc.wait(timeout=30)
        cls.proc.stderr.close()
        cls.tmp.cleanup()

    def request(self, method, path, body=None, headers=None, timeout=60):
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r, data

    def multipart(self, fields, files):
        boundary = "ffboundary7d1a"
        out = b""
        for k, v in fields.items():
            out += ("--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n" % (boundary, k, v)).encode()
        for name, data in files:
            out += ("--%s\r\nContent-Disposition: form-data; name=\"files\"; filename=\"%s\"\r\n"
                    "Content-Type: application/octet-stream\r\n\r\n" % (boundary, name)).encode() + data + b"\r\n"
        out += ("--%s--\r\n" % boundary).encode()
        return out, {"Content-Type": "multipart/form-data; boundary=" + boundary}

    def csrf(self):
        r, body = self.request("GET", "/")
        return re.search(rb'name="csrf" value="([0-9a-f]+)"', body).group(1).decode()

    def test_api_diagnose_same_as_cli(self):
        with open(CASE, "rb") as f:
            log = f.read()
        r, body = self.request("POST", "/api/diagnose", body=log, headers={"Content-Type": "text/plain"})
        self.assertEqual(r.status, 200, body[:300])
        served = json.loads(body)
        same_name = os.path.join(self.tmp.name, "pasted.log")  # the page names a pasted log pasted.log
        with open(same_name, "wb") as f:
            f.write(log)
        cli = json.loads(subprocess.run([BIN, "diagnose", "--no-history", "-q", "-f", "json", "pasted.log"],
                                        capture_output=True, cwd=self.tmp.name).stdout)
        os.unlink(same_name)
        self.assertEqual(served["schema"], "firstfault.report/v1")
        for k in ("verdict", "root_cause", "initiating_rank", "collateral"):
            self.assertEqual(served.get(k), cli.get(k), k)

    def test_security_headers(self):
        r, body = self.request("GET", "/")
        csp = r.getheader("Content-Security-Policy")
        self.assertIn("default-src 'none'", csp)
        self.assertIn("frame-ancestors 'none'", csp)
        nonce = re.search(r"'nonce-([0-9a-f]+)'", csp).group(1)
        self.assertIn(('<style nonce="%s">' % nonce).encode(), body)
        self.assertNotIn(b"<script", body)
        self.assertEqual(r.getheader("X-Content-Type-Options"), "nosniff")
        r2, _ = self.request("GET", "/")
        self.assertNotEqual(re.search(r"'nonce-([0-9a-f]+)'", r2.getheader("Content-Security-Policy")).group(1), nonce)

    def test_form_post_redirects_to_report_with_viewer(self):
        with open(CASE, "rb") as f:
            log = f.read()
        body, headers = self.multipart({"csrf": self.csrf()}, [("console.log", log)])
        r, _ = self.request("POST", "/diagnose", body=body, headers=headers)
        self.assertEqual(r.status, 303)
        loc = r.getheader("Location")
        self.assertRegex(loc, r"^/report/[0-9a-f]{24}$")
        r, page = self.request("GET", loc)
        self.assertEqual(r.status, 200)
        self.assertIn(b'id="verdict">failure', page)
        self.assertIn(b'id="initiating-rank">3<', page)
        self.assertIn(b'class="lane', page)
        link = re.search(rb'class="loc" href="([^"]+)"', page)
        self.assertIsNotNone(link, "an evidence line links to the log viewer")
        r, viewer = self.request("GET", link.group(1).decode().replace("&amp;", "&"))
        self.assertEqual(r.status, 200)
        self.assertIn(b'id="hit"', viewer)
        # the upload directory is gone once the diagnosis is done
        left = [d for d in os.listdir(self.tmp.name) if d.startswith("firstfault-serve-")]
        self.assertEqual(left, [])

    def test_viewer_shows_the_ranks_own_lines_in_an_interleaved_console(self):
        lines = []
        for step in range(40):
            for rank in range(4):
                lines.append("[rank%d]: step %d of rank %d" % (rank, step, rank))
            if step == 20:
                lines.append("[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
                             "GPU 2 has a total capacity of 79.15 GiB of which 1.00 GiB is free.")
        body, headers = self.multipart({"csrf": self.csrf()}, [("console.log", ("\n".join(lines) + "\n").encode())])
        r, _ = self.request("POST", "/diagnose", body=body, headers=headers)
        self.assertEqual(r.status, 303)
        r, page = self.request("GET", r.getheader("Location"))
        self.assertIn(b'id="initiating-rank">2<', page)
        link = re.search(rb'class="loc" href="([^"]+)"', page).group(1).decode().replace("&amp;", "&")
        r, viewer = self.request("GET", link)
        self.assertEqual(r.status, 200)
        ctx = re.search(rb'id="context">(.*?)</pre>', viewer, re.S).group(1)
        self.assertIn(b"Lines of rank 2 only", viewer)
        self.assertIn(b"step 19 of rank 2", ctx)
        self.assertIn(b"step 21 of rank 2", ctx)
        self.assertNotIn(b"of rank 1", ctx)  # the neighbours' lines are hidden ...
        self.assertEqual(ctx.count(b"of rank 2"), 24)  # ... and the rank's 12 lines before and after are shown
        r, every = self.request("GET", link + "&all=1")
        ctx_all = re.search(rb'id="context">(.*?)</pre>', every, re.S).group(1)
        self.assertIn(b"of rank 1", ctx_all)  # ... until every line is asked for
        self.assertIn(b'id="hit"', ctx_all)

    def test_form_without_csrf_refused(self):
        body, headers = self.multipart({"csrf": "0" * 32}, [("x.log", b"[rank0]: RuntimeError: boom\n")])
        r, page = self.request("POST", "/diagnose", body=body, headers=headers)
        self.assertEqual(r.status, 403)
        self.assertIn(b"CSRF", page)

    def test_cross_origin_post_refused(self):
        r, _ = self.request("POST", "/api/diagnose", body=b"x\n", headers={"Origin": "http://evil.example"})
        self.assertEqual(r.status, 403)
        r, _ = self.request("POST", "/api/diagnose", body=b"x\n", headers={"Sec-Fetch-Site": "cross-site"})
        self.assertEqual(r.status, 403)

    def test_dns_rebinding_host_refused(self):
        r, _ = self.request("GET", "/", headers={"Host": "attacker.example:%d" % self.port})
        self.assertEqual(r.status, 421)

    def test_oversized_upload(self):
        r, page = self.request("POST", "/api/diagnose", body=b"a" * (3 << 20), headers={"Content-Type": "text/plain"})
        self.assertEqual(r.status, 413)
        # still serving
        r, _ = self.request("GET", "/")
        self.assertEqual(r.status, 200)

    def test_malformed_multipart(self):
        bad = b"--nope\r\nContent-Disposition: form-data; name=\"files\"\r\n\r\nunterminated"
        r, page = self.request("POST", "/diagnose", body=bad, headers={"Content-Type": "multipart/form-data; boundary=ffb"})
        self.assertIn(r.status, (400, 403))
        r, page = self.request("POST", "/api/diagnose", body=b"", headers={"Content-Type": "text/plain"})
        self.assertEqual(r.status, 400)
        self.assertIn(b"nothing to diagnose", page)

    def test_bundle_and_binary_input(self):
        import io
        import tarfile
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as t:
            for root, _, names in os.walk(OOM):
                for n in names:
                    t.add(os.path.join(root, n), arcname=os.path.relpath(os.path.join(root, n), OOM))
            junk = tarfile.TarInfo("core.bin.log")
            data = bytes(range(256)) * 64
            junk.size = len(data)
            t.addfile(junk, io.BytesIO(data))
        body, headers = self.multipart({}, [("job.tar.gz", buf.getvalue())])
        r, out = self.request("POST", "/api/diagnose", body=body, headers=headers)
        self.assertEqual(r.status, 200, out[:300])
        j = json.loads(out)
        self.assertEqual(j["root_cause"]["kind"], "cuda_oom")
        bad = [e for e in j["input_errors"] if "binary" in e["reason"]]
        self.assertEqual([e["path"] for e in bad], ["job.tar.gz!core.bin.log"])  # named, without the upload directory
        self.assertNotIn(b"firstfault-serve-", out)

    def test_slow_client_does_not_block_others(self):
        s = socket.create_connection((self.host, self.port))
        s.sendall(b"POST /api/diagnose HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nabc")
        try:
            r, _ = self.request("GET", "/", timeout=20)
            self.assertEqual(r.status, 200)
        finally:
            s.close()

    def test_concurrent_requests(self):
        with open(CASE, "rb") as f:
            log = f.read()
        results = []

        def one():
            r, body = self.request("POST", "/api/diagnose", body=log, headers={"Content-Type": "text/plain"}, timeout=120)
            results.append((r.status, json.loads(body).get("initiating_rank")))
        ts = [threading.Thread(target=one) for _ in range(6)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(len(results), 6)
        self.assertEqual(len(set(results)), 1, results)
        self.assertEqual(results[0][0], 200)

    def test_kb_and_history(self):
        r, page = self.request("GET", "/kb/index.html")
        self.assertEqual(r.status, 200)
        r, page = self.request("GET", "/kb/search?q=out+of+memory")
        self.assertIn(b"/kb/entries/cuda_oom.html", page)
        r, page = self.request("GET", "/kb/entries/cuda_oom.html")
        self.assertEqual(r.status, 200)
        csp = r.getheader("Content-Security-Policy")
        nonce = re.search(r"'nonce-([0-9a-f]+)'", csp).group(1)
        self.assertIn(('<style nonce="%s">' % nonce).encode(), page)
        r, body = self.request("GET", "/api/kb/cuda_oom")
        self.assertEqual(json.loads(body)["kind"], "cuda_oom")
        r, _ = self.request("GET", "/kb/../../etc/passwd")
        self.assertEqual(r.status, 404)
        self.request("POST", "/api/diagnose", body=b"[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
        r, page = self.request("GET", "/history")
        self.assertEqual(r.status, 200)
        m = re.search(rb'href="/history/(\d+)"', page)
        self.assertIsNotNone(m)
        r, page = self.request("GET", "/history/" + m.group(1).decode())
        self.assertEqual(r.status, 200)
        self.assertIn(b'id="stored"', page)
        self.assertIn(b'id="timeline"', page)  # drawn from the stored report's timeline object
        self.assertIn(b'data-ranks="1"', page)


class Bind(unittest.TestCase):
    def test_non_loopback_refused(self):
        p = subprocess.run([BIN, "serve", "--listen", "0.0.0.0:0"], capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertIn(b"not a loopback address", p.stderr)

    def test_remote_needs_token(self):
        p = subprocess.run([BIN, "serve", "--listen", "0.0.0.0:0", "--allow-remote"], capture_output=True, timeout=60,
                           env={k: v for k, v in os.environ.items() if k != "FIRSTFAULT_TOKEN"})
        self.assertEqual(p.returncode, 2)
        self.assertIn(b"token", p.stderr)

    def test_token_required_when_set(self):
        with tempfile.TemporaryDirectory() as d:
            ready = os.path.join(d, "ready")
            proc = subprocess.Popen([BIN, "serve", "--listen", "127.0.0.1:0", "--ready-file", ready, "--token", "s3cret",
                                     "--no-history"], stderr=subprocess.DEVNULL)
            try:
                u = urllib.parse.urlparse(wait_file(ready, proc))
                c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
                c.request("GET", "/")
                self.assertEqual(c.getresponse().status, 401)
                c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
                c.request("GET", "/", headers={"Authorization": "Bearer s3cret"})
                self.assertEqual(c.getresponse().status, 200)
            finally:
                proc.terminate()
                proc.wait(timeout=30)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
