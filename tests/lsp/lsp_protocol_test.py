#!/usr/bin/env python3
"""Protocol tests of `firstfault lsp`: a scripted LSP client over the binary's stdin/stdout drives
initialize, didOpen of real corpus logs, publishDiagnostics (lines, ranges, severities, related
information), the firstfault/verdict notification, hover, code actions, executeCommand (explain, copy fix,
diagnose a folder of per-rank logs), debounced didChange, cancellation of a diagnosis made stale by an edit,
error answers, shutdown and exit. Usage: lsp_protocol_test.py BIN TESTS_DIR. Every wait is for a message,
bounded by a deadline; none is a fixed sleep."""
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

BIN = sys.argv[1]
TESTS = sys.argv[2]
OOM = os.path.join(TESTS, "corpus", "gh-funasr-2006", "logs", "pasted.log")
PER_RANK = os.path.join(TESTS, "corpus", "run-c_rank_exception", "logs")
MAX_HOVER = 2000  # characters (lsp.hpp kMaxHoverChars)
ENTRY_BASE = "https://github.com/firstfault/firstfault/blob/main/kb/"  # lsp.hpp kEntryBaseUrl
WAIT = 240  # seconds: the first diagnosis may compile the knowledge base on a loaded machine


def uri_of(path):
    return "file://" + urllib.parse.quote(os.path.abspath(path))


def utf16_len(s):
    return len(s.encode("utf-16-le")) // 2


def lines_of(text):
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


class Client:
    def __init__(self, *args, env=None):
        self.proc = subprocess.Popen([BIN, "lsp", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        self.inbox = queue.Queue()
        self.seen = []  # every message, in order
        self.next_id = 1
        self.answered = set()  # ids answered so far: a second answer, or one to no request, is a protocol error
        self.protocol_errors = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        out = self.proc.stdout
        while True:
            headers = {}
            while True:
                line = out.readline()
                if not line:
                    self.inbox.put(None)
                    return
                line = line.decode("ascii").strip()
                if not line:
                    break
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
            body = out.read(int(headers["content-length"]))
            m = json.loads(body.decode("utf-8"))
            if "method" not in m and m.get("id") is not None:
                if m["id"] in self.answered or not (isinstance(m["id"], int) and 0 < m["id"] < self.next_id):
                    self.protocol_errors.append("an answer to no open request: %r" % m)
                self.answered.add(m["id"])
            self.inbox.put(m)

    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, msg):
        body = json.dumps(msg).encode("utf-8")
        self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method, params):
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def wait_for(self, pred, what, seconds=WAIT):
        deadline = time.monotonic() + seconds
        for m in self.seen:
            if pred(m):
                self.seen.remove(m)
                return m
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no %s within %d s" % (what, seconds))
            try:
                m = self.inbox.get(timeout=left)
            except queue.Empty:
                continue
            if m is None:
                raise AssertionError("the server closed its output while waiting for %s (stderr: %s)" %
                                     (what, self.proc.stderr.read().decode(errors="replace")[-2000:]))
            if pred(m):
                return m
            self.seen.append(m)

    def request(self, method, params):
        i = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
        return self.wait_for(lambda m: m.get("id") == i and "method" not in m, "answer to %s" % method)

    def diagnostics(self, uri, version=None):
        def pred(m):
            if m.get("method") != "textDocument/publishDiagnostics" or m["params"]["uri"] != uri:
                return False
            return version is None or m["params"].get("version") == version
        return self.wait_for(pred, "diagnostics for %s (version %s)" % (uri, version))["params"]

    def verdict(self, uri):
        return self.wait_for(lambda m: m.get("method") == "firstfault/verdict" and m["params"]["uri"] == uri,
                             "verdict for %s" % uri)["params"]

    def initialize(self, capabilities=None):
        r = self.request("initialize", {"processId": os.getpid(), "rootUri": None,
                                        "capabilities": capabilities if capabilities is not None else {}})
        self.notify("initialized", {})
        return r

    def close(self):
        assert not self.protocol_errors, [e[:300] for e in self.protocol_errors[:5]]
        r = self.request("shutdown", None)
        assert r.get("result", "missing") is None, r
        self.notify("exit", None)
        return self.proc.wait(timeout=WAIT)


class Session(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.log = os.path.join(cls.tmp.name, "job 1", "pasted.log")  # a space: the URI is percent-encoded
        os.makedirs(os.path.dirname(cls.log))
        shutil.copy(OOM, cls.log)
        with open(cls.log, encoding="utf-8") as f:
            cls.text = f.read()
        cls.uri = uri_of(cls.log)
        cls.c = Client("--debounce-ms", "200", env=dict(os.environ, TMPDIR=cls.tmp.name))
        caps = {"textDocument": {"codeAction": {"codeActionLiteralSupport": {"codeActionKind": {"valueSet": ["quickfix"]}}}}}
        cls.init = cls.c.initialize(caps)
        cls.c.notify("textDocument/didOpen", {"textDocument": {"uri": cls.uri, "languageId": "log", "version": 1, "text": cls.text}})
        cls.first = cls.c.diagnostics(cls.uri, 1)
        cls.first_verdict = cls.c.verdict(cls.uri)

    @classmethod
    def tearDownClass(cls):
        if cls.c.proc.poll() is None:
            cls.c.proc.kill()
        cls.tmp.cleanup()

    def line_index(self, needle, text=None):
        for i, l in enumerate(lines_of(text or self.text)):
            if needle in l:
                return i
        raise AssertionError("no line with %r" % needle)

    def test_01_capabilities(self):
        caps = self.init["result"]["capabilities"]
        self.assertEqual(caps["textDocumentSync"]["change"], 1)
        self.assertTrue(caps["hoverProvider"])
        self.assertEqual(caps["positionEncoding"], "utf-16")
        self.assertIn("firstfault.diagnoseFolder", caps["executeCommandProvider"]["commands"])
        self.assertEqual(self.init["result"]["serverInfo"]["name"], "firstfault")

    def test_02_root_cause_is_an_error_on_the_oom_line(self):
        diags = self.first["diagnostics"]
        errors = [d for d in diags if d["severity"] == 1]
        self.assertEqual(len(errors), 1, diags)
        e = errors[0]
        oom = self.line_index("CUDA out of memory")
        self.assertEqual(e["range"]["start"], {"line": oom, "character": 0})
        self.assertEqual(e["range"]["end"], {"line": oom, "character": utf16_len(lines_of(self.text)[oom])})
        self.assertEqual(e["source"], "firstfault")
        self.assertEqual(e["data"]["role"], "root")
        self.assertEqual(e["data"]["kind"], "cuda_oom")
        self.assertIn("rank 2", e["message"])
        self.assertIn("fix:", e["message"])

    def test_03_collateral_is_information_pointing_at_the_root_cause(self):
        oom = self.line_index("CUDA out of memory")
        infos = [d for d in self.first["diagnostics"] if d["severity"] == 3]
        self.assertTrue(infos, self.first["diagnostics"])
        for d in infos:
            self.assertEqual(d["data"]["role"], "collateral")
            self.assertNotEqual(d["range"]["start"]["line"], oom)
            rel = d["relatedInformation"][0]["location"]
            self.assertEqual(rel["uri"], self.uri)
            self.assertEqual(rel["range"]["start"]["line"], oom)
        # The watchdog timeout on rank 5 is the loudest line and only collateral.
        on_lines = [lines_of(self.text)[d["range"]["start"]["line"]] for d in infos]
        self.assertTrue(any("Watchdog caught collective operation timeout" in l for l in on_lines), on_lines)
        self.assertTrue(all(d["data"]["kind"] for d in infos))

    def test_04_verdict_notification(self):
        v = self.first_verdict
        self.assertEqual(v["verdict"], "failure")
        self.assertEqual(v["kind"], "cuda_oom")
        self.assertEqual(v["initiatingRank"], 2)

    def test_05_hover_is_the_verdict_the_fix_and_a_link_and_nothing_elsewhere(self):
        oom = self.line_index("CUDA out of memory")
        r = self.c.request("textDocument/hover", {"textDocument": {"uri": self.uri}, "position": {"line": oom, "character": 5}})
        md = r["result"]["contents"]["value"]
        self.assertEqual(r["result"]["contents"]["kind"], "markdown")
        self.assertTrue(md.startswith("**root cause: "), md[:200])
        self.assertIn("rank 2", md)
        self.assertIn("out of memory", md.lower())
        self.assertIn("\n**Fix**\n- ", md)
        self.assertLessEqual(len(md), MAX_HOVER)
        sig = self.first["diagnostics"][0]["data"]["signature"]
        self.assertIn("](%s" % ENTRY_BASE, md)
        self.assertIn("/%s.yaml)" % sig, md)
        self.assertIn("`firstfault explain %s`" % sig, md)
        quiet = self.line_index("train, rank: 4")
        r = self.c.request("textDocument/hover", {"textDocument": {"uri": self.uri}, "position": {"line": quiet, "character": 0}})
        self.assertIsNone(r["result"])

    def test_06_code_actions_explain_and_copy_the_fix(self):
        oom = self.line_index("CUDA out of memory")
        rng = {"start": {"line": oom, "character": 0}, "end": {"line": oom, "character": 3}}
        r = self.c.request("textDocument/codeAction", {"textDocument": {"uri": self.uri}, "range": rng,
                                                       "context": {"diagnostics": []}})
        actions = r["result"]
        titles = [a["title"] for a in actions]
        self.assertTrue(any(t.startswith("firstfault: explain ") for t in titles), titles)
        self.assertIn("firstfault: copy the fix", titles)
        for a in actions:
            self.assertEqual(a["kind"], "quickfix")
            cmd = a["command"]
            res = self.c.request("workspace/executeCommand", {"command": cmd["command"], "arguments": cmd["arguments"]})
            self.assertNotIn("error", res, res)
            if cmd["command"] == "firstfault.explain":
                self.assertIn("out of memory", res["result"]["markdown"].lower())
                self.assertTrue(res["result"]["title"])
            else:
                self.assertIn("# fix", res["result"]["text"])
                self.assertIn("# verify", res["result"]["text"])

    def test_07_explain_a_kind_and_an_unknown_name(self):
        r = self.c.request("workspace/executeCommand", {"command": "firstfault.explain", "arguments": ["straggler_timeout"]})
        self.assertIn("straggler_timeout", r["result"]["markdown"])
        r = self.c.request("workspace/executeCommand", {"command": "firstfault.explain", "arguments": ["no_such_thing_at_all"]})
        self.assertEqual(r["error"]["code"], -32602)

    def test_08_edits_are_debounced_and_rediagnosed(self):
        # Five quick edits: each puts one more line on top. The last version is the one diagnosed, and the
        # Error follows the OOM line down; no publish for the document may go back to an older version.
        texts = []
        for v in range(2, 7):
            t = "".join("[2024-08-12 23:04:0%d,000][root][INFO] - edit %d\n" % (v, k) for k in range(v - 1)) + self.text
            texts.append(t)
            self.c.notify("textDocument/didChange", {"textDocument": {"uri": self.uri, "version": v},
                                                     "contentChanges": [{"text": t}]})
        p = self.c.diagnostics(self.uri, 6)
        err = [d for d in p["diagnostics"] if d["severity"] == 1]
        self.assertEqual(len(err), 1)
        self.assertEqual(err[0]["range"]["start"]["line"], self.line_index("CUDA out of memory", texts[-1]))
        stale = [m for m in self.c.seen if m.get("method") == "textDocument/publishDiagnostics"
                 and m["params"]["uri"] == self.uri and m["params"].get("version", 6) > 6]
        self.assertEqual(stale, [])

    def test_09_a_long_diagnosis_made_stale_by_an_edit_is_cancelled(self):
        # A 40 MB document, then at once a small edit: the big version's diagnosis is dropped (cancelled
        # mid-read or discarded) and only the small version's diagnostics arrive.
        big_uri = uri_of(os.path.join(self.tmp.name, "big.log"))
        line = "[rank1]: step 17 loss 0.25 lr 1e-4 tokens/s 12000 this line is filler for size\n"
        big = line * (40_000_000 // len(line)) + self.text
        self.c.notify("textDocument/didOpen", {"textDocument": {"uri": big_uri, "languageId": "log", "version": 1, "text": big}})
        self.c.notify("textDocument/didChange", {"textDocument": {"uri": big_uri, "version": 2},
                                                 "contentChanges": [{"text": self.text}]})
        p = self.c.diagnostics(big_uri, 2)
        self.assertTrue(any(d["severity"] == 1 for d in p["diagnostics"]))
        old = [m for m in self.c.seen if m.get("method") == "textDocument/publishDiagnostics"
               and m["params"]["uri"] == big_uri and m["params"].get("version") == 1]
        self.assertEqual(old, [])
        self.c.notify("textDocument/didClose", {"textDocument": {"uri": big_uri}})
        cleared = self.c.diagnostics(big_uri)
        self.assertEqual(cleared["diagnostics"], [])

    def test_10_diagnose_a_folder_of_per_rank_logs(self):
        folder = os.path.join(self.tmp.name, "run")
        shutil.copytree(PER_RANK, folder)
        r = self.c.request("workspace/executeCommand", {"command": "firstfault.diagnoseFolder", "arguments": [uri_of(folder)]})
        self.assertNotIn("error", r, r)
        report = r["result"]
        self.assertEqual(report["verdict"], "failure", json.dumps(report)[:1000])
        v = self.c.verdict(uri_of(folder))
        self.assertEqual(v["verdict"], "failure")
        # Diagnostics went to files under the folder, and each Error's line holds its evidence.
        published = {}
        for m in list(self.c.seen):
            if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"].startswith(uri_of(folder) + "/"):
                published[m["params"]["uri"]] = m["params"]["diagnostics"]
        errors = [(u, d) for u, ds in published.items() for d in ds if d["severity"] == 1]
        self.assertTrue(errors, list(published))
        for u, d in errors:
            path = urllib.parse.unquote(urllib.parse.urlparse(u).path)
            self.assertTrue(os.path.isfile(path), path)
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = lines_of(f.read())
            line = lines[d["range"]["start"]["line"]]
            self.assertTrue(line.strip(), (u, d))
        self.assertEqual(report["initiating_rank"] if "initiating_rank" in report else v["initiatingRank"], v["initiatingRank"])

    def test_13_planted_values_never_reach_a_reply(self):
        # tests/mask/planted.log opened as a document and diagnosed as a folder: no planted value, and no
        # 8-character piece of one, in any message the server sent (diagnostics, verdicts, the folder reply).
        folder = os.path.join(self.tmp.name, "planted")
        os.makedirs(folder)
        shutil.copy(os.path.join(TESTS, "mask", "planted.log"), os.path.join(folder, "rank0.log"))
        with open(os.path.join(folder, "rank0.log"), encoding="utf-8") as f:
            text = f.read()
        uri = uri_of(os.path.join(folder, "rank0.log"))
        self.c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "log", "version": 1, "text": text}})
        d = self.c.diagnostics(uri, 1)
        r = self.c.request("workspace/executeCommand", {"command": "firstfault.diagnoseFolder", "arguments": [uri_of(folder)]})
        self.assertNotIn("error", r, r)
        sent = json.dumps(list(self.c.seen)) + json.dumps(d) + json.dumps(r)
        with open(os.path.join(TESTS, "mask", "planted_secrets.txt"), encoding="utf-8") as f:
            values = [l.rstrip("\n") for l in f if l.strip() and not l.startswith("#")]
        for v in values:
            for p in ([v] if len(v) <= 8 else [v[i:i + 8] for i in range(len(v) - 7)]):
                # (json.dumps escapes a backslash or a quote in a value the way the reply does)
                self.assertNotIn(json.dumps(p)[1:-1], sent, "reply leaks %r of %r" % (p, v))

    def test_10b_every_hover_over_the_corpus_is_short_and_links_its_entry(self):
        # Each corpus case's logs diagnosed as a folder; every line with a signature's diagnostic hovered.
        cases = sorted(d for d in os.listdir(os.path.join(TESTS, "corpus"))
                       if os.path.isdir(os.path.join(TESTS, "corpus", d, "logs")))
        self.assertGreater(len(cases), 100)
        hovered, longest = 0, (0, "")
        for case in cases:
            folder = os.path.join(TESTS, "corpus", case, "logs")
            prefix = uri_of(folder) + "/"
            start = len(self.c.seen)
            r = self.c.request("workspace/executeCommand", {"command": "firstfault.diagnoseFolder", "arguments": [uri_of(folder)]})
            self.assertNotIn("error", r, (case, r))
            published = {}
            for m in self.c.seen[start:]:
                if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"].startswith(prefix):
                    published[m["params"]["uri"]] = m["params"]["diagnostics"]
            for u, ds in published.items():
                for line in sorted({d["range"]["start"]["line"] for d in ds if d.get("data", {}).get("signature")}):
                    h = self.c.request("textDocument/hover", {"textDocument": {"uri": u}, "position": {"line": line, "character": 0}})
                    md = h["result"]["contents"]["value"]
                    hovered += 1
                    longest = max(longest, (len(md), case))
                    self.assertLessEqual(len(md), MAX_HOVER, (case, u, line, md[:300]))
                    if not md.startswith("**looks wrong"):
                        self.assertIn("](%s" % ENTRY_BASE, md, (case, md))
                        self.assertIn("`firstfault explain ", md, (case, md))
                    self.assertNotIn("](#", md, (case, md))  # no anchors into a page the editor does not show
                    self.assertNotIn("](../", md, (case, md))
        self.assertGreater(hovered, 100)
        print("hovers over the corpus: %d, the longest %d characters (%s)" % (hovered, longest[0], longest[1]), file=sys.stderr)

    def test_11_errors_are_answered(self):
        r = self.c.request("textDocument/definition", {"textDocument": {"uri": self.uri}, "position": {"line": 0, "character": 0}})
        self.assertEqual(r["error"]["code"], -32601)
        r = self.c.request("workspace/executeCommand", {"command": "firstfault.diagnoseFolder", "arguments": ["/no/such/dir"]})
        self.assertEqual(r["error"]["code"], -32602)
        r = self.c.request("textDocument/hover", {"textDocument": {"uri": self.uri}})  # no position
        self.assertEqual(r["error"]["code"], -32602)
        body = b"{not json"
        self.c.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        m = self.c.wait_for(lambda m: m.get("error", {}).get("code") == -32700, "a parse error")
        self.assertIsNone(m["id"])

    def test_12_wrong_shapes_are_answered_and_the_session_goes_on(self):
        # Found by a hostile client: a method that is not a string aborted the server; an id that is not an
        # integer or a string was never answered; a NUL in a folder path slipped past the folder check.
        c = self.c
        c.next_id = max(c.next_id, 9002)  # 9001 is sent by hand below
        c.send({"jsonrpc": "2.0", "id": 9001, "method": 7})
        m = c.wait_for(lambda m: m.get("id") == 9001, "an answer to a numeric method")
        self.assertEqual(m["error"]["code"], -32600)
        c.notify({"a": 1}, None)
        c.send({"jsonrpc": "2.0", "id": 1.5, "method": "textDocument/hover", "params": {}})
        m = c.wait_for(lambda m: m.get("id", 0) is None and m.get("error", {}).get("code") == -32600, "an answer to a float id")
        self.assertIn("id", m["error"]["message"])
        r = c.request("initialize", {"capabilities": {}})
        self.assertEqual(r["error"]["code"], -32600)
        r = c.request("workspace/executeCommand", {"command": "firstfault.diagnoseFolder",
                                                   "arguments": [self.tmp.name + "\u0000/../../../etc"]})
        self.assertEqual(r["error"]["code"], -32602)
        oom = self.line_index("CUDA out of memory")
        r = c.request("textDocument/hover", {"textDocument": {"uri": self.uri}, "position": {"line": oom, "character": 0}})
        self.assertIn("result", r)

    def test_99_shutdown_and_exit(self):
        self.assertEqual(self.c.close(), 0)


class Lifecycle(unittest.TestCase):
    def test_requests_before_initialize_are_refused(self):
        c = Client()
        r = c.request("textDocument/hover", {"textDocument": {"uri": "file:///x.log"}, "position": {"line": 0, "character": 0}})
        self.assertEqual(r["error"]["code"], -32002)
        c.initialize()
        self.assertEqual(c.close(), 0)

    def test_exit_without_shutdown_is_status_1(self):
        c = Client()
        c.initialize()
        c.notify("exit", None)
        self.assertEqual(c.proc.wait(timeout=WAIT), 1)

    def test_a_broken_frame_ends_the_session_with_a_message(self):
        c = Client()
        c.send_raw(b"Content-Type: text/plain\r\n\r\n{}")
        self.assertEqual(c.proc.wait(timeout=WAIT), 2)
        self.assertIn("without a Content-Length", c.proc.stderr.read().decode())

    def test_a_client_that_does_not_read_cannot_grow_the_server(self):
        # A client that writes 4,000 requests of 64 KiB and never reads an answer: the server's stdout pipe
        # fills, its main thread waits there, at most 1,024 messages wait in its queue, and the reader stops,
        # so the writer blocks after about 1,030. Before the fix the server took in all 4,000 (256 MiB).
        proc = subprocess.Popen([BIN, "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        junk = "x" * 65536
        n = 4000
        sent = [0]
        def frame(msg):
            body = json.dumps(msg).encode("utf-8")
            return b"Content-Length: %d\r\n\r\n" % len(body) + body
        def write():
            try:
                proc.stdin.write(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {}}}))
                for k in range(n):
                    proc.stdin.write(frame({"jsonrpc": "2.0", "id": k + 1, "method": "workspace/executeCommand",
                                            "params": {"command": "firstfault.explain", "arguments": ["cuda_oom", junk]}}))
                    proc.stdin.flush()
                    sent[0] += 1
            except (BrokenPipeError, ValueError, OSError):
                pass
        t = threading.Thread(target=write, daemon=True)
        t.start()
        last, still = -1, 0
        deadline = time.monotonic() + WAIT
        while t.is_alive() and still < 40 and time.monotonic() < deadline:  # done, or no progress for 40 polls
            t.join(timeout=0.05)
            still = still + 1 if sent[0] == last else 0
            last = sent[0]
        taken = sent[0]
        proc.kill()
        proc.wait(timeout=WAIT)
        t.join(timeout=WAIT)
        self.assertLess(taken, 2000, "%d of %d requests taken in while no answer was read" % (taken, n))
        self.assertGreater(taken, 100)

    def test_oversized_documents_long_names_and_early_notifications(self):
        tmp = tempfile.TemporaryDirectory()
        c = Client("--max-document-mib", "1")
        early = uri_of(os.path.join(tmp.name, "early.log"))
        c.notify("textDocument/didOpen", {"textDocument": {"uri": early, "languageId": "log", "version": 1,
                                                           "text": "[rank0]: torch.OutOfMemoryError: CUDA out of memory.\n"}})
        c.initialize()
        big = uri_of(os.path.join(tmp.name, "big.log"))
        c.notify("textDocument/didOpen", {"textDocument": {"uri": big, "languageId": "log", "version": 1,
                                                           "text": "[rank0]: step 1\n" * 150000}})
        p = c.diagnostics(big, 1)
        self.assertEqual([d["code"] for d in p["diagnostics"]], ["too-large"])
        r = c.request("textDocument/hover", {"textDocument": {"uri": big}, "position": {"line": 0, "character": 0}})
        self.assertIn("limit", r["result"]["contents"]["value"])  # the hover that read past a missing field
        r = c.request("textDocument/codeAction", {"textDocument": {"uri": big}, "context": {"diagnostics": []},
                                                  "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}})
        self.assertEqual(r["result"], [])
        longname = uri_of(os.path.join(tmp.name, "A" * 300 + ".log"))
        c.notify("textDocument/didOpen", {"textDocument": {"uri": longname, "languageId": "log", "version": 1,
                                                           "text": "[rank0]: torch.OutOfMemoryError: CUDA out of memory.\n"}})
        p = c.diagnostics(longname, 1)
        self.assertTrue(any(d["severity"] == 1 for d in p["diagnostics"]), p)
        self.assertEqual(c.close(), 0)
        self.assertEqual([m for m in c.seen if m.get("params", {}).get("uri") == early], [])
        tmp.cleanup()

    def test_a_server_killed_mid_run_leaves_no_copy_of_the_document(self):
        # The copy's name is removed as soon as ingest has it open: while the run goes on, its private
        # directory is already empty, and a SIGKILL then leaves no text behind.
        tmp = tempfile.TemporaryDirectory()
        c = Client(env=dict(os.environ, TMPDIR=tmp.name))
        c.initialize()
        line = "[rank1]: step 17 loss 0.25 secret-looking filler 0123456789abcdef0123456789abcdef\n"
        c.notify("textDocument/didOpen", {"textDocument": {"uri": uri_of(os.path.join(tmp.name, "x", "big.log")),
                                                           "languageId": "log", "version": 1,
                                                           "text": line * (80_000_000 // len(line))}})
        # While the run reads the copy, the server holds it open with its name already gone: /proc shows the
        # descriptor as "(deleted)". Before the fix the name stayed until the run ended and the file closed.
        deadline = time.monotonic() + WAIT
        emptied = False
        fd_dir = "/proc/%d/fd" % c.proc.pid
        while time.monotonic() < deadline and not emptied and c.proc.poll() is None:
            for fd in os.listdir(fd_dir):
                try:
                    target = os.readlink(os.path.join(fd_dir, fd))
                except OSError:
                    continue
                if target.startswith(tmp.name) and target.endswith("big.log (deleted)"):
                    emptied = True
            if not emptied:
                time.sleep(0.002)  # polling /proc for the state under test, bounded by the deadline
        c.proc.kill()
        c.proc.wait(timeout=WAIT)
        self.assertTrue(emptied, "the copy kept its name while its diagnosis read it")
        left = [os.path.join(r, f) for r, _, fs in os.walk(tmp.name) for f in fs]
        self.assertEqual(left, [])
        tmp.cleanup()

    def test_source_code_and_utf8_positions(self):
        # A C++ file gets no diagnostics (not a log); with utf-8 offered, ranges count bytes.
        tmp = tempfile.TemporaryDirectory()
        c = Client()
        r = c.initialize({"general": {"positionEncodings": ["utf-8", "utf-16"]}})
        self.assertEqual(r["result"]["capabilities"]["positionEncoding"], "utf-8")
        code_uri = uri_of(os.path.join(tmp.name, "main.cpp"))
        c.notify("textDocument/didOpen", {"textDocument": {"uri": code_uri, "languageId": "cpp", "version": 1,
                                                           "text": "int main() {\n  // error: none\n  return 1;\n}\n"}})
        text = "[rank0]: été step 1\n[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (é)\n"
        log_uri = uri_of(os.path.join(tmp.name, "r.txt"))
        c.notify("textDocument/didOpen", {"textDocument": {"uri": log_uri, "languageId": "plaintext", "version": 1, "text": text}})
        p = c.diagnostics(log_uri, 1)
        err = [d for d in p["diagnostics"] if d["severity"] == 1]
        self.assertEqual(len(err), 1, p)
        self.assertEqual(err[0]["range"]["end"]["character"], len(lines_of(text)[1].encode("utf-8")))
        self.assertEqual(c.close(), 0)
        code = [m for m in c.seen if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == code_uri]
        self.assertEqual(code, [])
        tmp.cleanup()


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
