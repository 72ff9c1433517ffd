#!/usr/bin/env python3
"""HTTP tests of `firstfault serve` on loopback: the access token (403 without it on every route; Bearer,
?token= then cookie, --token-file), the API and the form, the security headers, the CSRF and origin checks,
the sample log, the icon without the token, oversized, chunked and malformed uploads (413 with the server's peak RSS bounded), slow clients (ten
byte-a-second connections do not delay a normal request; a per-address cap), the log viewer masking a
private-key block, concurrent requests, a non-loopback bind refused. Usage: http_test.py BIN TESTS_DIR.
Starts the servers itself (readiness: --ready-file, which holds the URL with the token)."""
import http.client
import json
import os
import re
import select
import socket
import stat
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


def start_serve(tmp, *args, token_env=None):
    """Starts `firstfault serve` on a free loopback port; returns (proc, host, port, token, url)."""
    ready = os.path.join(tmp, "ready")
    if os.path.exists(ready):
        os.unlink(ready)
    env = {k: v for k, v in os.environ.items() if k != "FIRSTFAULT_TOKEN"}
    env["TMPDIR"] = tmp
    env["XDG_CONFIG_HOME"] = os.path.join(tmp, "config")  # --redact's per-user key, never in the real home
    if token_env:
        env["FIRSTFAULT_TOKEN"] = token_env
    proc = subprocess.Popen([BIN, "serve", "--listen", "127.0.0.1:0", "--ready-file", ready] + list(args),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    url = wait_file(ready, proc)
    u = urllib.parse.urlparse(url)
    token = urllib.parse.parse_qs(u.query)["token"][0]
    return proc, u.hostname, u.port, token, url


def stop_serve(proc):
    proc.terminate()
    proc.wait(timeout=30)
    proc.stdout.close()
    proc.stderr.close()


def vm_hwm_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM")


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
        cls.proc, cls.host, cls.port, cls.token, cls.url = start_serve(
            cls.tmp.name, "--max-upload-mib", "2", "--history", os.path.join(cls.tmp.name, "h.db"))

    @classmethod
    def tearDownClass(cls):
        stop_serve(cls.proc)
        cls.tmp.cleanup()

    def request(self, method, path, body=None, headers=None, timeout=60, auth=True):
        """One request on a new connection, with the token as a Bearer header unless auth is False."""
        h = dict(headers or {})
        if auth:
            h.setdefault("Authorization", "Bearer " + self.token)
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        c.request(method, path, body=body, headers=h)
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
        body, headers = self.multipart({"csrf": self.csrf(), "log": ""}, [("", b"")])  # the form sent empty
        r, page = self.request("POST", "/diagnose", body=body, headers=headers)
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

    ROUTES = [("GET", "/"), ("GET", "/report/0123456789abcdef01234567"), ("GET", "/report/0123456789abcdef01234567/log?src=a&line=1"),
              ("GET", "/report/0123456789abcdef01234567/json"), ("GET", "/kb"), ("GET", "/kb/index.html"),
              ("GET", "/kb/search?q=oom"), ("GET", "/api/kb"), ("GET", "/api/kb/cuda_oom"), ("GET", "/history"),
              ("GET", "/history/1"), ("GET", "/no/such/page"), ("POST", "/diagnose"), ("POST", "/api/diagnose")]

    def test_no_token_is_403_on_every_route(self):
        wrong = "0" * len(self.token)
        cookie = "firstfault_token_%d" % self.port
        for method, path in self.ROUTES:
            body = b"[rank0]: RuntimeError: boom\n" if method == "POST" else None
            for headers in ({}, {"Authorization": "Bearer " + wrong}, {"Authorization": "Bearer " + self.token[:-1]},
                            {"Authorization": "Basic " + self.token}, {"Cookie": "%s=%s" % (cookie, wrong)},
                            {"Cookie": "firstfault_token_1=%s" % self.token}):  # another port's cookie
                r, page = self.request(method, path, body=body, headers=headers, auth=False)
                self.assertEqual(r.status, 403, (method, path, headers))
                self.assertIn(b"access token", page)
            r, _ = self.request(method, path + ("&" if "?" in path else "?") + "token=" + wrong, body=body, auth=False)
            self.assertEqual(r.status, 403, (method, path, "?token=wrong"))

    def test_token_in_the_url_sets_a_cookie_and_leaves_the_url(self):
        r, _ = self.request("GET", "/kb/search?q=out+of+memory&token=" + self.token, auth=False)
        self.assertEqual(r.status, 303)
        self.assertEqual(r.getheader("Location"), "/kb/search?q=out+of+memory")
        name = "firstfault_token_%d" % self.port
        cookie = r.getheader("Set-Cookie")
        self.assertTrue(cookie.startswith("%s=%s;" % (name, self.token)), cookie)
        for attribute in ("HttpOnly", "SameSite=Strict", "Path=/"):
            self.assertIn(attribute, cookie)
        r, page = self.request("GET", r.getheader("Location"), headers={"Cookie": "other=1; %s=%s" % (name, self.token)}, auth=False)
        self.assertEqual(r.status, 200)
        self.assertIn(b"/kb/entries/cuda_oom.html", page)
        u = urllib.parse.urlparse(self.url)  # the address printed by serve
        r, _ = self.request("GET", u.path + "?" + u.query, auth=False)
        self.assertEqual((r.status, r.getheader("Location")), (303, "/"))
        # a POST with ?token= is served where it was sent (a redirect would lose its body)
        r, out = self.request("POST", "/api/diagnose?token=" + self.token, body=b"[rank1]: RuntimeError: boom\n", auth=False)
        self.assertEqual(r.status, 200, out[:200])

    def test_ready_file_and_stdout_give_the_url_with_a_new_token(self):
        self.assertRegex(self.url, r"^http://127\.0\.0\.1:%d/\?token=[0-9a-f]{48}$" % self.port)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.tmp.name, "ready")).st_mode), 0o600)
        self.assertEqual(self.proc.stdout.readline().decode().strip(), self.url)

    def test_viewer_masks_a_private_key_block(self):
        # a made-up key body: each line carries a marker that must not reach the page
        body = ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQ%02dFAKEKEYBODYLINEnotarealkey%02dxyz" % (i, i) for i in range(6)]
        for prefix in ("", "0: "):
            lines = ["step 1 loss 2.5", "-----BEGIN PRIVATE KEY-----"] + body + ["-----END PRIVATE KEY-----",
                     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                     "capacity of 79.15 GiB of which 1.00 GiB is free.", "step 2 loss 2.4"]
            log = "".join(prefix + l + "\n" for l in lines).encode()
            form, headers = self.multipart({"csrf": self.csrf()}, [("key.log", log)])
            r, _ = self.request("POST", "/diagnose", body=form, headers=headers)
            self.assertEqual(r.status, 303)
            report = r.getheader("Location")
            r, page = self.request("GET", report)
            link = re.search(rb'class="loc" href="([^"]+)"', page)
            self.assertIsNotNone(link, "the evidence line links to the log viewer")
            link = link.group(1).decode().replace("&amp;", "&")
            r, viewer = self.request("GET", link)
            self.assertEqual(r.status, 200)
            r, every = self.request("GET", link + "&all=1")
            _, js = self.request("GET", report + "/json")
            ctx = re.search(rb'id="context">(.*?)</pre>', viewer, re.S).group(1)
            self.assertIn(b"CUDA out of memory", ctx)
            self.assertIn(b"step 1 loss", ctx)  # the lines around the block are shown ...
            self.assertIn(b"private-key", ctx)  # ... and the block as masked
            for out in (viewer, every, page, js):
                self.assertNotIn(b"FAKEKEYBODYLINE", out, "prefix %r" % prefix)

    def test_favicon_is_served_without_the_token(self):
        r, ico = self.request("GET", "/favicon.ico", auth=False)
        self.assertEqual(r.status, 200)
        self.assertEqual(r.getheader("Content-Type"), "image/x-icon")
        self.assertEqual(ico[:6], b"\x00\x00\x01\x00\x01\x00")  # an icon with one image
        self.assertEqual(len(ico), 6 + 16 + 40 + 32 * 32 * 4 + 32 * 32 // 8)
        # the exemption is for that GET alone: the Host check stands, and any other method needs the token
        r, _ = self.request("GET", "/favicon.ico", headers={"Host": "evil.example:%d" % self.port}, auth=False)
        self.assertEqual(r.status, 421)
        r, _ = self.request("POST", "/favicon.ico", body=b"x", auth=False)
        self.assertEqual(r.status, 403)
        r, _ = self.request("GET", "/favicon.ico/../", auth=False)
        self.assertEqual(r.status, 403)

    def test_sample_log(self):
        body, headers = self.multipart({"csrf": self.csrf(), "sample": "1"}, [])
        r, _ = self.request("POST", "/diagnose", body=body, headers=headers)
        self.assertEqual(r.status, 303)
        r, page = self.request("GET", r.getheader("Location"))
        self.assertIn(b'id="kind">cuda_oom<', page)
        self.assertIn(b'id="initiating-rank">2<', page)
        self.assertIn(b"oom_among_timeouts.log", page)
        # the field names no file: any other value is no sample, and the form needs its CSRF token
        body, headers = self.multipart({"csrf": self.csrf(), "sample": "../../../etc/passwd"}, [])
        r, page = self.request("POST", "/diagnose", body=body, headers=headers)
        self.assertEqual(r.status, 400)
        self.assertIn(b"nothing to diagnose", page)
        body, headers = self.multipart({"sample": "1"}, [])
        r, _ = self.request("POST", "/diagnose", body=body, headers=headers)
        self.assertEqual(r.status, 403)

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
        self.assertEqual(page.count(b"<style"), 1, "one stylesheet: the page's")
        self.assertIn(b'<nav class="top">', page)
        self.assertIn(b'href="../entries/', page)  # the entry's own links stay relative to it
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


class Redact(unittest.TestCase):
    """serve --redact: host names and addresses are pseudonyms in the report, its JSON, the log viewer and the
    history; without it they are shown (users act on them), as with diagnose."""

    LOG = ("gpu-node-17:4321:4400 [0] NCCL INFO Bootstrap : Using eth0:10.11.12.13<0>\n"
           "[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 2 has a total "
           "capacity of 79.15 GiB of which 1.00 GiB is free.\n"
           "E1206 10:00:03.000000 4321 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
           "local_rank: 2 (pid: 4323) of binary: /usr/bin/python3\n"
           "  host      : gpu-node-17\n").encode()

    def pages(self, *args):
        with tempfile.TemporaryDirectory() as d:
            proc, host, port, token, _ = start_serve(d, "--history", os.path.join(d, "h.db"), *args)
            try:
                t = Serve()
                t.host, t.port, t.token = host, port, token
                form, headers = t.multipart({"csrf": t.csrf()}, [("node.log", self.LOG)])
                r, _ = t.request("POST", "/diagnose", body=form, headers=headers)
                self.assertEqual(r.status, 303)
                report = r.getheader("Location")
                _, page = t.request("GET", report)
                _, js = t.request("GET", report + "/json")
                link = re.search(rb'class="loc" href="([^"]+)"', page)
                self.assertIsNotNone(link, "the evidence line links to the log viewer")
                _, viewer = t.request("GET", link.group(1).decode().replace("&amp;", "&") + "&all=1")
                _, hist = t.request("GET", "/history")
                return [page, js, viewer, hist]
            finally:
                stop_serve(proc)

    def test_redact_hides_hosts_and_default_shows_them(self):
        shown = self.pages()
        self.assertIn(b"gpu-node-17", shown[2], "the viewer shows the host by default")
        for out in self.pages("--redact"):
            self.assertNotIn(b"gpu-node-17", out)
            self.assertNotIn(b"10.11.12.13", out)


class Bind(unittest.TestCase):
    def test_non_loopback_refused(self):
        p = subprocess.run([BIN, "serve", "--listen", "0.0.0.0:0"], capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertIn(b"not a loopback address", p.stderr)


    def test_bad_token_refused(self):
        for args in (["--token", "s3cret"], ["--token", "x" * 20 + " y"]):
            p = subprocess.run([BIN, "serve", "--listen", "127.0.0.1:0", "--no-history"] + args, capture_output=True, timeout=60)
            self.assertEqual(p.returncode, 2, args)
            self.assertIn(b"token", p.stderr)

    def get_status(self, host, port, headers):
        c = http.client.HTTPConnection(host, port, timeout=30)
        c.request("GET", "/", headers=headers)
        status = c.getresponse().status
        c.close()
        return status

    def test_given_token(self):
        fixed = "s3cret-token-0123456789"
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "token"), "w") as f:
                f.write(fixed + "\n")
            for args, env in ((["--token-file", os.path.join(d, "token")], None), (["--token", fixed], None), ([], fixed)):
                proc, host, port, token, _ = start_serve(d, "--no-history", *args, token_env=env)
                try:
                    self.assertEqual(token, fixed, args)
                    self.assertEqual(self.get_status(host, port, {}), 403)
                    self.assertEqual(self.get_status(host, port, {"Authorization": "Bearer " + fixed}), 200)
                finally:
                    stop_serve(proc)

    def test_bad_token_file(self):
        with tempfile.TemporaryDirectory() as d:
            empty, big, fifo = (os.path.join(d, n) for n in ("empty", "big", "fifo"))
            open(empty, "w").close()
            with open(big, "w") as f:
                f.write("a" * 5000)
            os.mkfifo(fifo)
            for path, why in ((empty, b"empty"), (big, b"larger than 4 KiB"), (fifo, b"not a regular file"), (d, b"not a regular file"),
                              (os.path.join(d, "missing"), b"cannot read")):
                p = subprocess.run([BIN, "serve", "--listen", "127.0.0.1:0", "--no-history", "--token-file", path],
                                   capture_output=True, timeout=60)
                self.assertEqual(p.returncode, 2, path)
                self.assertIn(why, p.stderr, path)


class Limits(unittest.TestCase):
    """A server with the default upload limit (64 MiB) and a 4 s request-header deadline: bodies over the limit,
    chunked or not, malformed framing, and slow clients."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.proc, cls.host, cls.port, cls.token, _ = start_serve(cls.tmp.name, "--no-history", "--request-timeout", "4")

    @classmethod
    def tearDownClass(cls):
        stop_serve(cls.proc)
        cls.tmp.cleanup()

    def connect(self):
        return socket.create_connection((self.host, self.port), timeout=30)

    def head(self, method, path, extra=""):
        return ("%s %s HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: Bearer %s\r\n%s\r\n"
                % (method, path, self.host, self.port, self.token, extra)).encode()

    @staticmethod
    def status_of(s):
        data = b""
        while b"\r\n" not in data:
            got = s.recv(65536)
            if not got:
                break
            data += got
        return int(data.split(b" ", 2)[1]) if data else None

    def get(self, timeout=30):
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        c.request("GET", "/", headers={"Authorization": "Bearer " + self.token})
        r = c.getresponse()
        r.read()
        c.close()
        return r.status

    def test_chunked_upload_over_the_limit(self):
        s = self.connect()
        s.sendall(self.head("POST", "/api/diagnose", "Content-Type: text/plain\r\nTransfer-Encoding: chunked\r\n"))
        line = b"[rank0]: step 1 loss 2.0 " + b"x" * 100 + b"\n"
        chunk = line * (65536 // len(line))
        frame = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
        sent, answered = 0, False
        while sent < 256 << 20:  # 256 MiB, made a frame at a time as it is sent
            if select.select([s], [], [], 0)[0]:
                answered = True
                break
            try:
                s.sendall(frame)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(chunk)
        if not answered and sent >= 256 << 20:
            s.sendall(b"0\r\n\r\n")
        status = self.status_of(s)
        s.close()
        peak = vm_hwm_kib(self.proc.pid)
        sys.stderr.write("chunked upload: refused after %d MiB sent; server VmHWM %d MiB\n" % (sent >> 20, peak >> 10))
        self.assertEqual(status, 413)
        self.assertLess(sent, 256 << 20, "refused while it was being sent")
        # (in the normal build only: AddressSanitizer's shadow memory and quarantine make RSS meaningless there,
        # as the CLI's memory checks say)
        if not os.environ.get("FF_SANITIZED"):
            self.assertLessEqual(peak, 128 << 10, "the server's peak RSS")
        self.assertEqual(self.get(), 200)

    def test_declared_length_over_the_limit(self):
        s = self.connect()
        s.sendall(self.head("POST", "/api/diagnose", "Content-Type: text/plain\r\nContent-Length: %d\r\n" % (100 << 20)))
        s.sendall(b"x" * 65536)
        self.assertEqual(self.status_of(s), 413)  # answered before the body is sent
        s.close()
        s = self.connect()  # with Expect: 100-continue, the answer is the refusal, never "100 Continue"
        s.sendall(self.head("POST", "/api/diagnose", "Content-Type: text/plain\r\nExpect: 100-continue\r\n"
                                                     "Content-Length: %d\r\n" % (100 << 20)))
        self.assertEqual(self.status_of(s), 413)
        s.close()
        s = self.connect()  # the same without the token: 403 before the body
        s.sendall(self.head("POST", "/api/diagnose", "Expect: 100-continue\r\nContent-Length: 10\r\n").replace(
            b"Bearer " + self.token.encode(), b"Bearer nope"))
        self.assertEqual(self.status_of(s), 403)
        s.close()

    def test_body_framing(self):
        for extra, want in (("Content-Type: text/plain\r\n", 411),
                            ("Content-Length: 5\r\nContent-Encoding: gzip\r\n", 415),
                            ("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", 400),
                            ("Transfer-Encoding: gzip, chunked\r\n", 501)):
            s = self.connect()
            s.sendall(self.head("POST", "/api/diagnose", extra))
            self.assertEqual(self.status_of(s), want, extra)
            s.close()
        s = self.connect()  # a POST elsewhere is refused before its body is read (cpp-httplib would keep it in memory)
        s.sendall(self.head("POST", "/nope", "Transfer-Encoding: chunked\r\n") + b"10\r\n" + b"x" * 16 + b"\r\n")
        self.assertEqual(self.status_of(s), 404)
        s.close()
        s = self.connect()  # headers over 64 KiB in all (each line under cpp-httplib's 8 KiB)
        s.sendall(self.head("GET", "/", "".join("X-Pad%d: %s\r\n" % (i, "p" * 4000) for i in range(20))))
        self.assertEqual(self.status_of(s), 431)
        s.close()
        s = self.connect()  # a GET's body would be read as the next request: refused, and the connection closed
        s.sendall(self.head("GET", "/", "Content-Length: 30\r\n") + self.head("GET", "/")[:30])
        self.assertEqual(self.status_of(s), 400)
        s.close()

    def test_slow_clients_do_not_starve_the_server(self):
        request = self.head("GET", "/")
        slow = [self.connect() for _ in range(10)]
        stop, first_round = threading.Event(), threading.Event()

        def trickle():  # a byte a second on each connection, never the whole request within the test
            for i in range(len(request)):
                for c in slow:
                    try:
                        c.send(request[i:i + 1])
                    except OSError:
                        pass
                first_round.set()
                if stop.wait(1.0):
                    return
        t = threading.Thread(target=trickle)
        opened = time.monotonic()
        t.start()
        try:
            self.assertTrue(first_round.wait(10))
            for _ in range(3):
                began = time.monotonic()
                self.assertEqual(self.get(timeout=3), 200)
                took = time.monotonic() - began
                sys.stderr.write("a normal request with 10 slow clients: %.3f s\n" % took)
                self.assertLess(took, 3.0)
            # the request-header deadline (4 s here) closes them, although each sends a byte a second
            for c in slow:
                c.settimeout(max(0.1, opened + 8 - time.monotonic()))
                try:
                    data = c.recv(65536)
                except ConnectionResetError:
                    data = b""
                self.assertTrue(data == b"" or data.startswith(b"HTTP/1.1 408"), data[:40])
            sys.stderr.write("slow clients cut off after %.1f s\n" % (time.monotonic() - opened))
        finally:
            stop.set()
            t.join()
            for c in slow:
                c.close()

    def test_connections_per_address_are_capped(self):
        held = [self.connect() for _ in range(16)]
        try:
            for c in held:
                c.send(b"G")
            deadline, status = time.monotonic() + 5, None
            while status != 503 and time.monotonic() < deadline:  # until the server has taken up the 16
                extra = self.connect()
                extra.sendall(self.head("GET", "/"))
                status = self.status_of(extra)
                extra.close()
            self.assertEqual(status, 503)
        finally:
            for c in held:
                c.close()
        deadline, status = time.monotonic() + 5, None
        while status != 200 and time.monotonic() < deadline:  # until the server has seen them closed
            status = self.get()
        self.assertEqual(status, 200)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
