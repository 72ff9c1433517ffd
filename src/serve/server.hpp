// firstfault serve: a local web page for pasting or uploading logs (cpp-httplib).
//
// Pages (all HTML is made here; no script, no external asset):
//   GET  /                    paste a log, or choose files, a directory's files or a .tar.gz/.zip bundle
//   POST /diagnose            (form, multipart) -> 303 to /report/ID
//   GET  /report/ID           the report (report::to_html_body) with the per-rank timeline
//   GET  /report/ID/log?src=S&line=N   the lines around line N of input S (masked), the evidence marked
//   GET  /kb/..., /kb/search?q=       the encyclopedia (encyclopedia::render_site) and its search
//   GET  /history, /history/ID        the local history (history::store)
//   POST /api/diagnose        body: a log (text) or multipart files -> the CLI's JSON report (same schema)
//   GET  /api/kb, /api/kb/NAME        the entries as JSON
//
// Security (the inputs are untrusted logs, the page may be open next to anything else in the browser):
//  - bound to loopback unless allow_remote, which requires a token (header, cookie or ?token= once);
//  - the Host header must name the address served (DNS rebinding);
//  - a POST with a cross-site Origin or Sec-Fetch-Site is refused (OWASP CSRF cheat sheet, "verifying origin
//    with standard headers"), and a form POST carries this server's CSRF token;
//  - Content-Security-Policy default-src 'none' with a per-response style nonce, nosniff, referrer same-origin only,
//    frame-ancestors 'none', no-store;
//  - request bodies at most max_upload_bytes (413), a read timeout for slow clients, one diagnosis at a time;
//  - uploads go to a private temporary directory that is removed when the diagnosis ends; what is kept (the
//    reports of this server's life, the log viewer's lines) is masked like every report.
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
  std::string token;                     ///< required on every request when not empty
  std::uint64_t max_upload_bytes = 64ull << 20;
  int read_timeout_seconds = 10;         ///< a client that sends nothing for this long is dropped
  std::size_t keep_reports = 32;         ///< reports kept in memory for /report/ID (oldest dropped)
  std::string history_path;              ///< "" : no history
  mask::options mask;
  std::string ready_file;                ///< written with the URL once the port is bound
};

/// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback(const std::string& host);
/// A relative upload path made safe: components of [A-Za-z0-9._-] only, no "..", at most 8 deep; "" if
/// nothing is left.
std::string safe_relative_path(const std::string& name);

/// Serves until stop() or a signal; returns the exit status (2 when the address cannot be bound).
/// Errors: refuses a non-loopback address without allow_remote, or remote without a token.
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
