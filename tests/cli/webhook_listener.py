#!/usr/bin/env python3
"""A webhook receiver on loopback for the watch tests: appends every POST body (and a newline) to OUT.
Usage: webhook_listener.py PORT OUT"""
import http.server
import sys

port, out = int(sys.argv[1]), sys.argv[2]


class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(out, "ab") as f:
            f.write(body + b"\n")
        self.send_response(200)
        self.end_headers()

    def log_message(self, *a):
        pass


http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
