// firstfault serve: a local web page for pasting or uploading logs (cpp-httplib).
//
// Pages (all HTML is made here; no script, no external asset):
//   GET  /                    paste a log, or drop (or choose) files, a folder or a .tar.gz/.zip bundle; try the sample
//   POST /diagnose            (form, multipart; sample=1: the bundled sample log, sample.hpp) -> 303 to /report/ID
//   GET  /report/ID           the report (report::to_html_body) with the per-rank timeline
//   GET  /report/ID/log?src=S&line=N   the lines around line N of input S (masked), the evidence marked
//   GET  /kb/..., /kb/search?q=       the encyclopedia (encyclopedia::render_site) and its search
//   GET  /history, /history/ID        the local history (history::store)
//   POST /api/diagnose        body: a log (text) or multipart files -> the CLI's JSON report (same schema)
//   GET  /api/kb, /api/kb/NAME        the entries as JSON
//   GET  /favicon.ico         the page's icon: the one route served without the token (it says nothing)
//
// Security (the inputs are untrusted logs, the page may be open next to anything else in the browser, and
// other users of the machine can reach a loopback port):
//  - every request but GET /favicon.ico needs the server's token (new_token(): 24 bytes from RAND_bytes, or --token-file / --token /
//    FIRSTFAULT_TOKEN): "Authorization: Bearer T", the cookie firstfault_token_PORT (HttpOnly, SameSite=Strict)
//    that a valid ?token=T sets, or ?token=T itself; a GET with ?token=T is redirected to the same URL without
//    it. Without a valid token: 403. Compared in constant time (SHA-256 digests, CRYPTO_memcmp);
//  - bound to loopback unless allow_remote; the Host header must name the address served (DNS rebinding);
//  - a POST with a cross-site Origin or Sec-Fetch-Site is refused (OWASP CSRF cheat sheet, "verifying origin
//    with standard headers"), and a form POST carries this server's CSRF token;
//  - Content-Security-Policy default-src 'none' with a per-response style nonce, nosniff, referrer same-origin only,
//    frame-ancestors 'none', no-store;
//  - request bodies at most max_upload_bytes, chunked or not (413), written to disk as they arrive, never held in
//    memory; no Content-Encoding (415); a POST needs Content-Length or chunked (411) and one of the two upload
//    routes (404 before the body is read); a request refused before its body is read closes the connection (also
//    when it asked "Expect: 100-continue"); one diagnosis at a time;
//  - slow clients (guard.hpp): request line and headers within 10 s in all (408), a body at least 32 KiB/s after
//    its first 10 s, 10 s of silence at most, 16 connections per client address (503), 64 served at once;
//  - uploads go to a private temporary directory that is removed when the diagnosis ends; what is kept (the
//    reports of this server's life, the log viewer's lines) is masked like every report, the log viewer's lines
//    with the report's masker reading each file from its first line (private-key blocks span lines).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "firstfault/kb.hpp"
#include "firstfault/mask.hpp"
#include "firstfault/result.hpp"

namespace ff::serve {

struct options {
  std::string host = "127.0.0.1";
  int port = 8765;                       ///< 0: any free port (the ready file says which)
  bool allow_remote = false;             ///< listen on a non-loopback address
  std::string token;                     ///< required on every request (check() refuses an empty one)
  std::uint64_t max_upload_bytes = 64ull << 20;
  int read_timeout_seconds = 10;         ///< a client that sends nothing for this long is dropped
  int header_timeout_seconds = 10;       ///< a request's line and headers, in all
  std::size_t connections_per_client = 16;  ///< open at once from one address
  std::size_t keep_reports = 32;         ///< reports kept in memory for /report/ID (oldest dropped)
  std::string history_path;              ///< "" : no history
  mask::options mask;
  std::string ready_file;                ///< written (mode 0600) with the URL and its token once the port is bound
};

/// A new access token: 24 bytes from OpenSSL's RAND_bytes as 48 hex digits. Throws if the generator fails.
std::string new_token();
/// A token given by the user: 16 to 256 characters of [A-Za-z0-9._~-] (it travels in URLs and cookies).
status check_token(const std::string& token);
/// The token in a --token-file: a regular file of at most 4 KiB, trailing white space dropped, check_token().
result<std::string> read_token_file(const std::string& path);

/// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback(const std::string& host);
/// A relative upload path made safe: components of [A-Za-z0-9._-] only, no "..", at most 8 deep; "" if
/// nothing is left.
std::string safe_relative_path(const std::string& name);

/// Serves until stop() or a signal; returns the exit status (2 when the address cannot be bound).
/// Errors: refuses a non-loopback address without allow_remote, and a missing or malformed token.
class server {
 public:
  server(const kb::library& lib, options opt);
  ~server();
  status check() const;  ///< why it cannot start (a bad address), before run()
  int run();
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace ff::serve
