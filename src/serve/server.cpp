// firstfault serve (server.hpp): cpp-httplib routes over the same pipeline, renderers and encyclopedia as
// the CLI.
#include "server.hpp"
#include "../base/small_file.hpp"

#include <fcntl.h>
#include <httplib.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <strings.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "base/temp_dir.hpp"
#include "firstfault/encyclopedia.hpp"
#include "firstfault/history.hpp"
#include "firstfault/ingest.hpp"
#include "firstfault/pipeline.hpp"
#include "firstfault/record.hpp"
#include "firstfault/report.hpp"
#include "firstfault/text.hpp"
#include "firstfault/timeline.hpp"
#include "guard.hpp"
#include "sample.hpp"

namespace fs = std::filesystem;

namespace ff::serve {

bool is_loopback(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  unsigned a = 0, b = 0, c = 0, d = 0;
  char tail = 0;
  if (std::sscanf(host.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) != 4) return false;
  return a == 127 && b < 256 && c < 256 && d < 256;
}

std::string safe_relative_path(const std::string& name) {
  std::string out;
  std::size_t depth = 0, i = 0;
  std::string n = name;
  for (char& ch : n)
    if (ch == '\\') ch = '/';
  while (i <= n.size()) {
    auto j = n.find('/', i);
    if (j == std::string::npos) j = n.size();
    std::string part = n.substr(i, j - i);
    i = j + 1;
    if (part.empty() || part == "." || part == "..") continue;
    std::string clean;
    for (char ch : part)
      clean += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-') ? ch : '_';
    if (clean.size() > 120) clean.resize(120);
    if (clean[0] == '.') clean[0] = '_';  // no hidden files (the reader skips them)
    if (++depth > 8) break;
    out += (out.empty() ? "" : "/") + clean;
  }
  return out;
}

namespace {

// `bytes` random bytes from OpenSSL's CSPRNG (RAND_bytes), as hex. Throws when the generator fails.
std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> b(bytes);
  if (RAND_bytes(b.data(), static_cast<int>(b.size())) != 1) throw std::runtime_error("the random generator failed");
  std::string s;
  for (unsigned char c : b) s += fmt::format("{:02x}", c);
  return s;
}

std::string esc(std::string_view s) { return text::html_escape(s); }
// A stored history row's text (untrusted: anyone who can write the database wrote it), for HTML.
std::string esc_row(std::string_view s) { return text::html_escape(text::sanitize(s)); }

// A private directory for one request's uploads, removed with everything in it when the request ends.
using temp_dir = base::temp_dir;

// A line's stream in a console: its global rank, or its local rank when the prefix gives only that
// (torchrun --tee's "[default3]:" on one node).
struct stream_id {
  bool local = false;
  int number = 0;
  bool operator<(const stream_id& o) const { return std::tie(local, number) < std::tie(o.local, o.number); }
  bool operator==(const stream_id& o) const { return local == o.local && number == o.number; }
  std::string label() const { return (local ? "local rank " : "rank ") + std::to_string(number); }
};

// The lines around one location of a report, masked: what the log viewer shows. `rank_lines` holds the
// location's rank's own lines when the file interleaves several ranks (a torchrun or srun console), so
// the viewer shows what that rank printed rather than whatever its neighbours printed at the same time.
struct excerpt {
  std::optional<stream_id> rank;                                // the location's rank, from its line's prefix
  std::vector<std::pair<std::uint64_t, std::string>> lines;     // (line number, masked text): every line around it
  std::vector<std::pair<std::uint64_t, std::string>> rank_lines;  // that rank's lines around it (empty: not interleaved)
};

struct stored_report {
  std::string id, title, body_html, json;
  std::map<std::pair<std::string, std::uint64_t>, excerpt> excerpts;
};

constexpr std::uint64_t kContextLines = 12;
constexpr std::size_t kMaxExcerpts = 64;
constexpr std::size_t kMaxExcerptLineBytes = 2000;  // a viewer line is cut here (a progress bar can be megabytes)
// How far past a location the viewer looks for that rank's next lines: in a 64-rank console a rank's
// dozen lines after the fault are usually within a few thousand lines; past this the viewer stops.
constexpr std::uint64_t kRankLookahead = 200000;

// The page's icon, as a 32x32 Windows icon (one 32-bit BMP image): three lanes of the timeline on a dark
// square and the root cause's red diamond on the middle one. Drawn here, so no file ships with the binary.
const std::string& favicon() {
  static const std::string ico = [] {
    constexpr int kSide = 32;
    std::string o;
    auto u16 = [&o](unsigned v) { o += static_cast<char>(v & 0xff), o += static_cast<char>(v >> 8 & 0xff); };
    auto u32 = [&](unsigned v) { u16(v & 0xffff), u16(v >> 16); };
    const unsigned pixels = kSide * kSide * 4, mask = kSide * kSide / 8, image = 40 + pixels + mask;
    u16(0), u16(1), u16(1);  // ICONDIR: an icon, one image
    o += static_cast<char>(kSide), o += static_cast<char>(kSide), o += '\0', o += '\0';
    u16(1), u16(32), u32(image), u32(6 + 16);  // the rest of ICONDIRENTRY: planes, bits, size, offset
    u32(40), u32(kSide), u32(2 * kSide), u16(1), u16(32), u32(0), u32(pixels + mask), u32(0), u32(0), u32(0), u32(0);  // BITMAPINFOHEADER
    for (int y = kSide - 1; y >= 0; --y)  // rows bottom-up, BGRA
      for (int x = 0; x < kSide; ++x) {
        const int cx = std::min(x, kSide - 1 - x), cy = std::min(y, kSide - 1 - y);
        const bool square = cx >= 1 && cy >= 1 && cx + cy >= 5;  // rounded corners
        const bool diamond = std::abs(x - 19) + std::abs(y - 16) <= 6;
        const bool lane = (y == 8 || y == 9 || y == 16 || y == 17 || y == 23 || y == 24) && x >= 6 && x <= 25;
        const std::uint32_t rgba = !square ? 0x00000000u : diamond ? 0xc0161bffu : lane ? 0xc9d1deffu : 0x1d2330ffu;
        for (int shift : {8, 16, 24, 0}) o += static_cast<char>(rgba >> shift & 0xff);
      }
    o.append(mask, '\0');  // the AND mask: unused with an alpha channel
    return o;
  }();
  return ico;
}

}  // namespace

std::string new_token() { return random_hex(24); }

status check_token(const std::string& token) {
  if (token.size() < 16 || token.size() > 256)
    return error{"the token must be 16 to 256 characters long (firstfault serve makes one of 48 when none is given)"};
  for (char c : token)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.' && c != '~')
      return error{"the token may hold only letters, digits and - _ . ~ (it is sent in URLs)"};
  return ok();
}

result<std::string> read_token_file(const std::string& path) {
  const std::string shown = text::sanitize(path);
  auto file = base::read_small_file(path, "token file");
  if (!file) return file.error();
  if (file.value().larger) return error{shown + ": the token file is larger than 4 KiB"};
  std::string t = std::move(file.value().head);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  if (t.empty()) return error{shown + ": the token file is empty"};
  if (auto st2 = check_token(t); !st2) return error{shown + ": " + st2.error().message};
  return t;
}

struct server::impl {
  const kb::library& lib;
  options opt;
  std::optional<pipeline::engine> eng;
  std::string engine_error;
  guarded_server http{limits_of(opt)};
  std::string csrf = random_hex(16);
  std::map<std::string, encyclopedia::page> kb_pages;  // encyclopedia path -> page (framed by page())
  std::mutex diagnose_mu;                        // one diagnosis at a time (CPU and memory stay bounded)
  std::mutex reports_mu;
  std::deque<stored_report> reports;
  std::string origin;                            // "http://127.0.0.1:8765"
  std::vector<std::string> allowed_hosts;        // Host header values accepted

  std::string cookie_name;                       // "firstfault_token_PORT": cookies ignore ports, so one per server
  std::array<unsigned char, 32> token_digest = digest_of(opt.token);

  static connection_limits limits_of(const options& o) {
    connection_limits lim;
    lim.header_seconds = o.header_timeout_seconds;
    lim.idle_seconds = o.read_timeout_seconds;
    lim.write_seconds = std::max(30, o.read_timeout_seconds);
    // The body as sent: the upload, its multipart framing and chunk-size lines. The upload itself is
    // counted exactly as it is written (upload_sink).
    lim.max_body_bytes = o.max_upload_bytes + o.max_upload_bytes / 16 + (1 << 20);
    lim.per_client = o.connections_per_client;
    return lim;
  }

  impl(const kb::library& l, options o) : lib(l), opt(std::move(o)) {
    auto e = pipeline::engine::build(lib);
    if (e) eng.emplace(std::move(e.value()));
    else engine_error = e.error().message;
    for (auto& p : encyclopedia::render_site(lib, encyclopedia::format::html)) {
      p.content.clear();  // the exported page: this server frames the body with its own head and navigation
      kb_pages[p.path] = std::move(p);
    }
  }

  // ---- page frame -------------------------------------------------------------------------------------
  // The headers of every response; returns its style nonce (also kept in the request for the handlers).
  static std::string secure_headers(const httplib::Request& req, httplib::Response& res) {
    std::string nonce = random_hex(12);
    const_cast<httplib::Request&>(req).set_header("X-Firstfault-Nonce", nonce);
    res.set_header("Content-Security-Policy", "default-src 'none'; style-src 'nonce-" + nonce +
                                                  "'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Referrer-Policy", "same-origin");  // no-referrer would make the form's Origin "null"
    res.set_header("X-Frame-Options", "DENY");
    res.set_header("Cache-Control", "no-store");
    return nonce;
  }

  std::string page(const std::string& nonce, const std::string& title, const std::string& body) const {
    return "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">"
           "<title>" + esc(title) + " - firstfault</title><style nonce=\"" + nonce + "\">" + report::html_css() +
           "</style></head><body>\n" + nav() + body + "\n</body></html>\n";
  }
  static std::string nav() {
    return "<nav class=\"top\"><a href=\"/\"><b>firstfault</b></a><a href=\"/\">diagnose</a><a href=\"/kb/index.html\">encyclopedia</a>"
           "<a href=\"/kb/nccl.html\">NCCL errors</a><a href=\"/history\">history</a></nav>\n";
  }
  void send_page(httplib::Response& res, const std::string& nonce, const std::string& title, const std::string& body, int status = 200) {
    res.status = status;
    res.set_content(page(nonce, title, body), "text/html; charset=utf-8");
  }
  void send_error(httplib::Response& res, const std::string& nonce, int status, const std::string& why) {
    send_page(res, nonce, "error", "<h1>" + std::to_string(status) + "</h1><p class=\"err\" id=\"error\">" + esc(why) + "</p>", status);
  }

  // ---- the form ---------------------------------------------------------------------------------------
  // The start page: a sample to try, then the form. The two file inputs are the drop zones: the browser fills
  // an <input type=file> from files dropped on it, and the webkitdirectory one from a dropped folder, with no
  // script (tests/browser checks it in Chromium), so each input is drawn as a large dashed box with its words
  // laid over it, where they take no pointer (.drop, html_css()).
  std::string form_page() const {
    return fmt::format(
        "<h1>Why did the run die?</h1>\n<p>Paste a log, or drop the job's files (per-rank logs, the launcher console, dmesg), a "
        "folder, or a <code>.tar.gz</code>/<code>.zip</code> bundle. Nothing leaves this machine; uploads are deleted when the "
        "diagnosis is done, and what is kept is masked.</p>\n"
        "<form method=\"post\" action=\"/diagnose\" enctype=\"multipart/form-data\" id=\"sample-form\">"
        "<input type=\"hidden\" name=\"csrf\" value=\"{0}\"><input type=\"hidden\" name=\"sample\" value=\"1\">"
        "<p>No log at hand? <button type=\"submit\" class=\"quiet\" id=\"sample\">Try a sample log</button> "
        "<span class=\"muted\">an 8-GPU job from a public bug report, whose loudest lines are NCCL timeouts</span></p></form>\n"
        "<form method=\"post\" action=\"/diagnose\" enctype=\"multipart/form-data\" id=\"diagnose-form\">"
        "<input type=\"hidden\" name=\"csrf\" value=\"{0}\">"
        "<p><label for=\"log\">Log text</label><textarea id=\"log\" name=\"log\" spellcheck=\"false\" "
        "placeholder=\"[rank3]: torch.OutOfMemoryError: CUDA out of memory ...\"></textarea></p>"
        "<div class=\"drops\">"
        "<label class=\"drop\"><span class=\"drop-say\"><b>Files or a bundle</b><br>drop them here, or click to choose</span>"
        "<input type=\"file\" id=\"files\" name=\"files\" multiple></label>"
        "<label class=\"drop\"><span class=\"drop-say\"><b>A folder</b><br>drop it here, or click to choose</span>"
        "<input type=\"file\" id=\"dir\" name=\"files\" webkitdirectory multiple></label></div>"
        "<p><button type=\"submit\" id=\"submit\">Diagnose</button> <span class=\"muted\">at most {1} MiB</span></p></form>\n",
        csrf, opt.max_upload_bytes >> 20);
  }

  // ---- security checks --------------------------------------------------------------------------------
  // SHA-256 of a candidate token, compared with the server's in constant time (CRYPTO_memcmp): neither the
  // position of the first wrong byte nor the length of the token shows in the time taken.
  static std::array<unsigned char, 32> digest_of(std::string_view t) {
    std::array<unsigned char, 32> d{};
    unsigned int n = 0;
    if (EVP_Digest(t.data(), t.size(), d.data(), &n, EVP_sha256(), nullptr) != 1) d.fill(0xff);
    return d;
  }
  bool token_ok(std::string_view t) const {
    const auto d = digest_of(t);
    return !opt.token.empty() && CRYPTO_memcmp(d.data(), token_digest.data(), d.size()) == 0;
  }
  // The value of this server's cookie in the request's Cookie headers ("" when absent).
  std::string cookie_of(const httplib::Request& req) const {
    for (std::size_t i = 0, n = req.get_header_value_count("Cookie"); i < n; ++i) {
      const std::string value = req.get_header_value("Cookie", i);
      std::string_view all = value;
      while (!all.empty()) {
        auto semi = all.find(';');
        std::string_view pair = all.substr(0, semi);
        all = semi == std::string_view::npos ? std::string_view() : all.substr(semi + 1);
        while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
        if (pair.size() > cookie_name.size() && pair.substr(0, cookie_name.size()) == cookie_name && pair[cookie_name.size()] == '=')
          return std::string(pair.substr(cookie_name.size() + 1));
      }
    }
    return "";
  }
  // The request's target without its token parameter (where a GET with ?token= is sent once the cookie is set).
  static std::string without_token(const httplib::Request& req) {
    std::string_view target = req.target;
    auto q = target.find('?');
    std::string out(target.substr(0, q)), query;
    for (std::string_view rest = q == std::string_view::npos ? std::string_view() : target.substr(q + 1); !rest.empty();) {
      auto amp = rest.find('&');
      std::string_view part = rest.substr(0, amp);
      rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
      if (part.empty() || part == "token" || part.substr(0, 6) == "token=") continue;
      query += (query.empty() ? "" : "&") + std::string(part);
    }
    if (out.empty() || out[0] != '/') out = "/";
    return query.empty() ? out : out + "?" + query;
  }

  // How the request's body is framed: refused (status, reason) when the body could be misread or is too large.
  std::optional<std::pair<int, std::string>> refuse_framing(const httplib::Request& req) const {
    const std::size_t n_te = req.get_header_value_count("Transfer-Encoding"), n_cl = req.get_header_value_count("Content-Length");
    const std::string te = req.get_header_value("Transfer-Encoding"), cl = req.get_header_value("Content-Length");
    if (n_te > 1 || n_cl > 1 || (n_te && n_cl)) return std::make_pair(400, std::string("ambiguous message length"));
    if (n_te && strcasecmp(te.c_str(), "chunked") != 0) return std::make_pair(501, std::string("only the chunked transfer coding is accepted"));
    if (n_cl && (cl.empty() || cl.size() > 19 || cl.find_first_not_of("0123456789") != std::string::npos))
      return std::make_pair(400, std::string("malformed Content-Length"));
    const std::uint64_t length = n_cl ? std::strtoull(cl.c_str(), nullptr, 10) : 0;
    if (req.method != "POST") {
      if (n_te || length > 0) return std::make_pair(400, req.method + " takes no body");
      return std::nullopt;
    }
    if (std::string enc = req.get_header_value("Content-Encoding"); !enc.empty() && strcasecmp(enc.c_str(), "identity") != 0)
      return std::make_pair(415, std::string("a compressed request body is not accepted (send the .gz file itself)"));
    if (!n_te && !n_cl) return std::make_pair(411, std::string("a POST needs Content-Length or chunked transfer coding"));
    if (length > opt.max_upload_bytes) return std::make_pair(413, too_large());
    return std::nullopt;
  }
  std::string too_large() const { return fmt::format("the upload is larger than {} MiB", opt.max_upload_bytes >> 20); }

  // nullopt: go on; else the status and reason the request is refused with (303: `redirect` is where to).
  std::optional<std::pair<int, std::string>> refuse(const httplib::Request& req, httplib::Response& res, std::string& redirect) const {
    std::string host = req.get_header_value("Host");
    if (!allowed_hosts.empty() && std::find(allowed_hosts.begin(), allowed_hosts.end(), host) == allowed_hosts.end())
      return std::make_pair(421, "this server answers only for " + allowed_hosts.front());
    if (auto why = refuse_framing(req)) return why;
    if (req.path == "/favicon.ico" && (req.method == "GET" || req.method == "HEAD")) return std::nullopt;  // no token (docs/security.md)
    std::string auth = req.get_header_value("Authorization");
    bool ok = (auth.size() > 7 && strncasecmp(auth.c_str(), "Bearer ", 7) == 0 && token_ok(std::string_view(auth).substr(7))) ||
              token_ok(cookie_of(req));
    if (!ok && req.has_param("token") && token_ok(req.get_param_value("token"))) {
      ok = true;
      res.set_header("Set-Cookie", cookie_name + "=" + opt.token + "; HttpOnly; SameSite=Strict; Path=/");
      if (req.method == "GET") {  // the token leaves the address bar, the history and any Referer
        redirect = without_token(req);
        return std::make_pair(303, std::string());
      }
    }
    if (!ok)
      return std::make_pair(403, "this server needs its access token: open the address firstfault serve printed (it ends in "
                                 "?token=...), or send Authorization: Bearer TOKEN");
    if (req.method == "POST") {
      // Only the upload routes read a body as it arrives; cpp-httplib would read any other POST's body whole
      // into memory (Server::read_content) before answering 404.
      if (req.path != "/diagnose" && req.path != "/api/diagnose") return std::make_pair(404, std::string("no such page"));
      std::string site = req.get_header_value("Sec-Fetch-Site");
      if (!site.empty() && site != "same-origin" && site != "none") return std::make_pair(403, "cross-site request refused");
      std::string from = req.get_header_value("Origin");
      if (!from.empty() && from != origin && !(allowed_hosts.size() > 1 && from == "http://" + allowed_hosts[1]))
        return std::make_pair(403, "request from another origin refused");
    }
    return std::nullopt;
  }

  // ---- diagnosis --------------------------------------------------------------------------------------
  // A request's body written to files in a private directory as it arrives, never held in memory: the form's
  // "log" field as pasted.log, every file part under its name made safe (safe_relative_path), a plain body as
  // pasted.log; the "csrf" field is kept (at most 64 bytes), and so is "sample" (at most 8 bytes: "1" asks
  // for the sample log). Counts the uploaded bytes: past `max` it stops.
  struct upload_sink {
    static constexpr std::size_t kMaxFiles = 4096;
    std::string dir;
    std::uint64_t max = 0, total = 0;
    bool over = false, too_many = false, write_failed = false;
    std::size_t files = 0;
    std::string csrf, sample;
    enum class into { nothing, csrf, sample, file } to = into::nothing;
    std::string name;  // the part's safe relative name; the file is made at its first byte (empty parts make none)
    std::ofstream out;

    bool begin(const httplib::MultipartFormData& part) {
      out.close();
      name.clear();
      if (part.name == "csrf") to = into::csrf;
      else if (part.name == "sample" && part.filename.empty()) to = into::sample;
      else if ((part.name == "log" && part.filename.empty()) || part.name == "files" || !part.filename.empty()) {
        to = into::file;
        name = part.name == "log" && part.filename.empty() ? "pasted.log" : safe_relative_path(part.filename);
      } else to = into::nothing;
      return true;
    }
    void begin_plain() {
      to = into::file;
      name = "pasted.log";
    }
    bool take(const char* data, std::size_t n) {
      if (n == 0) return true;  // the multipart parser hands over empty pieces (an empty field): no file for them
      total += n;
      if (total > max) return !(over = true);
      if (to == into::csrf) csrf.append(data, std::min<std::size_t>(n, 64 - std::min<std::size_t>(64, csrf.size())));
      if (to == into::sample) sample.append(data, std::min<std::size_t>(n, 8 - std::min<std::size_t>(8, sample.size())));
      if (to != into::file) return true;
      if (!out.is_open()) {
        if (files >= kMaxFiles) return !(too_many = true);
        fs::path p = fs::path(dir) / (name.empty() ? "upload-" + std::to_string(files) + ".log" : name);
        std::error_code ec;
        fs::create_directories(p.parent_path(), ec);
        if (fs::exists(p)) p += "." + std::to_string(files);
        out.open(p, std::ios::binary);
        ++files;
      }
      out.write(data, static_cast<std::streamsize>(n));
      if (!out) return !(write_failed = true);
      return true;
    }
  };

  // Receives the body into `sink`; nullopt, or the status and reason to refuse the request with (the connection
  // is then closed: what is left of the body is never parsed as a request).
  std::optional<std::pair<int, std::string>> receive(const httplib::Request& req, const httplib::ContentReader& reader, upload_sink& sink) {
    sink.max = opt.max_upload_bytes;
    bool ok = false;
    if (req.is_multipart_form_data())
      ok = reader([&](const httplib::MultipartFormData& part) { return sink.begin(part); },
                  [&](const char* d, std::size_t n) { return sink.take(d, n); });
    else {
      sink.begin_plain();
      ok = reader([&](const char* d, std::size_t n) { return sink.take(d, n); });
    }
    sink.out.close();
    if (ok && !sink.write_failed) return std::nullopt;
    guarded_server::close_after_response();
    if (sink.over || guarded_server::fault() == stream_fault::body_too_large) return std::make_pair(413, too_large());
    if (sink.too_many) return std::make_pair(413, fmt::format("more than {} files", upload_sink::kMaxFiles));
    if (sink.write_failed) return std::make_pair(500, std::string("cannot write the upload to a temporary directory"));
    if (guarded_server::fault() == stream_fault::body_too_slow) return std::make_pair(408, std::string("the upload was too slow"));
    return std::make_pair(400, std::string("the upload was cut short or is malformed"));
  }

  // Runs the pipeline over the uploads in `dir`; fills `out` (report kept for /report/ID). Returns "" or the error.
  std::string diagnose(const std::string& dir, std::size_t files, stored_report& out, pipeline::run& run_out) {
    if (!eng) return "the knowledge base did not compile: " + engine_error;
    if (files == 0) return "nothing to diagnose: paste a log or choose files";
    std::lock_guard<std::mutex> lock(diagnose_mu);
    pipeline::options po;
    po.mask = opt.mask;
    po.ingest.display_root = dir + "/";
    std::optional<history::store> store;
    if (!opt.history_path.empty()) {
      auto h = history::store::open(opt.history_path);
      if (h) store.emplace(std::move(h.value()));
    }
    if (store) {
      po.host_keyer = [this](const std::string& real) { return history::host_key(opt.history_path, real); };
      po.recurrences = [&store](const std::string& key, const std::string& kind, int days) -> std::optional<std::int64_t> {
        auto r = store->recurrences(key, kind, days);
        return r ? std::optional<std::int64_t>(r.value()) : std::nullopt;
      };
    }
    // serve's sink (sink.hpp): at the end, the log viewer's excerpts, masked by the run's own masker.
    struct excerpt_sink final : pipeline::sink {
      impl& self;
      const std::string& dir;
      stored_report& out;
      excerpt_sink(impl& s, const std::string& d, stored_report& o) : self(s), dir(d), out(o) {}
      void finish(pipeline::collector& col, const pipeline::run& r) override { self.keep_excerpts(col, r, dir, out); }
    } events(*this, dir, out);
    auto r = pipeline::diagnose({dir}, *eng, po, events);
    if (!r) return r.error().message;
    run_out = std::move(r.value());
    out.json = report::to_json(run_out).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    if (store && run_out.any_readable) {
      auto e = history::entry_of(run_out, "serve");
      (void)store->add(e);
    }
    return "";
  }

  // The log viewer's lines: around every location the report links to, read again from the upload and
  // masked with the masker that masked the report (the same host tokens), every line from the file's first
  // in order, as the pipeline masked them: a private-key block spans lines, and only the masker's state at
  // the line says that a line inside it is key material. One pass per file serves all of its locations. A line's rank is its prefix's (the prefix catalogue); a line without one (a traceback's
  // continuation) belongs to the rank of the line before it, as the pipeline attributes it.
  void keep_excerpts(pipeline::collector& col, const pipeline::run& r, const std::string& dir, stored_report& out) {
    std::map<std::string, std::set<std::uint64_t>> want;  // masked display name -> line numbers
    std::size_t n_want = 0;
    auto add = [&](const std::string& src, std::uint64_t line) {
      if (line == 0 || n_want >= kMaxExcerpts) return;
      if (want[src].insert(line).second) ++n_want;
    };
    const auto& d = r.diag;
    for (const auto& e : d.evidence_lines) add(e.source, e.line_no);
    for (const auto& g : d.collateral) add(g.example.source, g.example.line_no);
    for (const auto& a : d.alternatives) add(a.example.source, a.example.line_no);
    for (const auto& s : d.suspicious) add(s.source, s.line_no);
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_regular_file()) continue;
      std::string rel = it->path().string().substr(dir.size() + 1);
      auto w = want.find(col.masker().apply_path(text::sanitize(rel)));
      if (w == want.end()) continue;  // archive members and stdin have no viewer
      for (auto& [line, ex] : excerpts_of_file(col, it->path().string(), w->second)) out.excerpts[{w->first, line}] = std::move(ex);
    }
  }

  // Each line is sanitised, cut at the pipeline's line bound, masked (mask::masker::apply, one stream from
  // reset_stream() at the file's start), then cut at the viewer's width.
  std::map<std::uint64_t, excerpt> excerpts_of_file(pipeline::collector& col, const std::string& path, const std::set<std::uint64_t>& lines) {
    using row = std::pair<std::uint64_t, std::string>;
    std::map<std::uint64_t, excerpt> out;
    std::map<stream_id, std::deque<row>> recent;  // per rank: its last kContextLines lines
    std::deque<row> recent_all;
    std::set<stream_id> ranks_seen;
    std::optional<stream_id> cur;  // the rank of the line before
    const std::uint64_t first = *lines.begin(), last = *lines.rbegin();
    auto& masker = col.masker();
    masker.reset_stream();
    const std::size_t max_line = ingest::options{}.max_line_bytes;
    std::ifstream f(path, std::ios::binary);
    std::string l;
    for (std::uint64_t no = 1; no <= last + kRankLookahead && std::getline(f, l); ++no) {
      if (l.size() > max_line) l.resize(max_line);
      std::string shown = text::sanitize(l);
      if (masker.enabled()) shown = masker.apply(shown);
      if (shown.size() > kMaxExcerptLineBytes) shown = std::string(text::prefix_utf8(shown, kMaxExcerptLineBytes));
      row r{no, std::move(shown)};
      normalize::line_meta m;
      if (eng && eng->prefixes.normalize(r.second, m)) {
        if (m.rank) cur = stream_id{false, *m.rank};
        else if (m.local_rank) cur = stream_id{true, *m.local_rank};
      }
      if (cur) ranks_seen.insert(*cur);
      for (auto& [at, ex] : out) {  // after a location: every line within kContextLines, that rank's next lines
        if (no <= at + kContextLines) ex.lines.push_back(r);
        if (ex.rank && cur == ex.rank && ex.rank_lines.size() < 2 * kContextLines + 1) ex.rank_lines.push_back(r);
      }
      if (lines.count(no)) {
        excerpt& ex = out[no];
        ex.rank = cur;
        ex.lines.assign(recent_all.begin(), recent_all.end());
        ex.lines.push_back(r);
        if (cur) {
          const auto& rq = recent[*cur];
          ex.rank_lines.assign(rq.begin(), rq.end());
          ex.rank_lines.push_back(r);
        }
      }
      if (no > last) {
        bool done = no > last + kContextLines;
        for (const auto& [at, ex] : out) done = done && (!ex.rank || ex.rank_lines.size() >= 2 * kContextLines + 1);
        if (done) break;
        continue;
      }
      if (cur) {
        auto& rq = recent[*cur];
        rq.push_back(r);
        if (rq.size() > kContextLines) rq.pop_front();
      }
      if (no + kContextLines >= first) {
        recent_all.push_back(std::move(r));
        if (recent_all.size() > kContextLines) recent_all.pop_front();
      }
    }
    for (auto& [at, ex] : out)
      if (ranks_seen.size() < 2) ex.rank_lines.clear();  // a file of one rank needs no second view
    return out;
  }

  std::string keep(stored_report rep) {
    std::lock_guard<std::mutex> lock(reports_mu);
    rep.id = random_hex(12);
    reports.push_back(std::move(rep));
    while (reports.size() > opt.keep_reports) reports.pop_front();
    return reports.back().id;
  }
  std::optional<stored_report> find(const std::string& id) {
    std::lock_guard<std::mutex> lock(reports_mu);
    for (const auto& r : reports)
      if (r.id == id) return r;
    return std::nullopt;
  }

  // ---- routes -----------------------------------------------------------------------------------------
  void routes() {
    http.Get("/", [this](const httplib::Request& req, httplib::Response& res) { send_page(res, nonce_of(req), "diagnose", form_page()); });
    // The uploads are read by the handlers (a content reader), as they are written to disk.
    http.Post("/diagnose", [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
      post_diagnose(req, res, reader);
    });
    http.Post("/api/diagnose", [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
      api_diagnose(req, res, reader);
    });
    http.Get(R"(/report/([0-9a-f]+))", [this](const httplib::Request& req, httplib::Response& res) { get_report(req, res); });
    http.Get(R"(/report/([0-9a-f]+)/log)", [this](const httplib::Request& req, httplib::Response& res) { get_log(req, res); });
    http.Get(R"(/report/([0-9a-f]+)/json)", [this](const httplib::Request& req, httplib::Response& res) {
      auto rep = find(req.matches[1]);
      if (!rep) return send_error(res, nonce_of(req), 404, "no such report (reports are kept while the server runs)");
      res.set_content(rep->json, "application/json");
    });
    http.Get("/kb/search", [this](const httplib::Request& req, httplib::Response& res) { kb_search(req, res); });
    http.Get(R"(/kb/(.*))", [this](const httplib::Request& req, httplib::Response& res) { kb_page(req, res); });
    http.Get("/kb", [](const httplib::Request&, httplib::Response& res) { res.set_redirect("/kb/index.html", 303); });
    http.Get("/api/kb", [this](const httplib::Request&, httplib::Response& res) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& s : lib.signatures) j.push_back({{"name", s.name}, {"kind", s.kind}, {"title", s.title}, {"role", role_word(s.role)}});
      res.set_content(j.dump(), "application/json");
    });
    http.Get(R"(/api/kb/([A-Za-z0-9_.-]+))", [this](const httplib::Request& req, httplib::Response& res) { api_kb_entry(req, res); });
    // The browser asks for the icon without the token (before the cookie is set, or from another tab): it is
    // the same picture for everyone and says nothing about the server, so it is the one route without one.
    http.Get("/favicon.ico", [](const httplib::Request&, httplib::Response& res) { res.set_content(favicon(), "image/x-icon"); });
    http.Get("/history", [this](const httplib::Request& req, httplib::Response& res) { history_list(req, res); });
    http.Get(R"(/history/(\d+))", [this](const httplib::Request& req, httplib::Response& res) { history_show(req, res); });
  }

  static std::string role_word(kb::role r) {
    switch (r) {
      case kb::role::cause: return "cause";
      case kb::role::symptom: return "symptom";
      case kb::role::benign: return "benign";
      default: return "unknown";
    }
  }

  // Each response gets its own style nonce (set by the pre-routing handler into this header).
  static std::string nonce_of(const httplib::Request& req) { return req.get_header_value("X-Firstfault-Nonce"); }

  void post_diagnose(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    const std::string nonce = nonce_of(req);
    if (!req.is_multipart_form_data()) {
      guarded_server::close_after_response();
      return send_error(res, nonce, 400, "the form must be sent as multipart/form-data");
    }
    temp_dir tmp("firstfault-serve");
    if (tmp.path.empty()) {
      guarded_server::close_after_response();
      return send_error(res, nonce, 500, "cannot create a temporary directory");
    }
    upload_sink sink;
    sink.dir = tmp.path;
    if (auto why = receive(req, reader, sink)) return send_error(res, nonce, why->first, why->second);
    if (sink.csrf.size() != csrf.size() || CRYPTO_memcmp(sink.csrf.data(), csrf.data(), csrf.size()) != 0)
      return send_error(res, nonce, 403, "the form's CSRF token is missing or stale: reload the page");
    if (sink.sample == "1") {  // the bundled sample (sample.hpp), never a path from the client
      fs::path p = fs::path(tmp.path) / kSampleName;
      if (std::error_code ec; fs::exists(p, ec)) p += ".sample";  // an upload of that name stays as it is
      std::ofstream f(p, std::ios::binary);
      if (!(f << kSampleLog)) return send_error(res, nonce, 500, "cannot write the sample log to a temporary directory");
      ++sink.files;
    }
    stored_report rep;
    pipeline::run run;
    if (auto e = diagnose(tmp.path, sink.files, rep, run); !e.empty()) return send_error(res, nonce, 400, e);
    std::string id_placeholder = "\x01ID\x01";
    report::html_options ho;
    ho.line_link = [&](const std::string& src, std::uint64_t line) {
      if (!rep.excerpts.count({src, line})) return std::string();
      return "/report/" + id_placeholder + "/log?src=" + httplib::detail::encode_query_param(src) + "&line=" + std::to_string(line);
    };
    rep.body_html = report::to_html_body(run, ho);
    rep.title = std::string(correlate::to_string(run.diag.verdict)) + (run.diag.title.empty() ? "" : ": " + run.diag.title);
    std::string id = keep(std::move(rep));
    {
      std::lock_guard<std::mutex> lock(reports_mu);  // the id is known only now: fill it into the links
      for (auto& r : reports)
        if (r.id == id)
          for (std::size_t p = r.body_html.find(id_placeholder); p != std::string::npos; p = r.body_html.find(id_placeholder, p))
            r.body_html.replace(p, id_placeholder.size(), id);
    }
    res.set_redirect("/report/" + id, 303);
  }

  void api_diagnose(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    auto fail = [&res](int status, const std::string& why) {
      res.status = status;
      res.set_content(nlohmann::json{{"error", why}}.dump() + "\n", "application/json");
    };
    temp_dir tmp("firstfault-serve");
    if (tmp.path.empty()) {
      guarded_server::close_after_response();
      return fail(500, "cannot create a temporary directory");
    }
    upload_sink sink;
    sink.dir = tmp.path;
    if (auto why = receive(req, reader, sink)) return fail(why->first, why->second);
    stored_report rep;
    pipeline::run run;
    if (auto e = diagnose(tmp.path, sink.files, rep, run); !e.empty()) return fail(400, e);
    res.set_content(rep.json + "\n", "application/json");
  }

  void get_report(const httplib::Request& req, httplib::Response& res) {
    auto rep = find(req.matches[1]);
    if (!rep) return send_error(res, nonce_of(req), 404, "no such report (reports are kept while the server runs)");
    send_page(res, nonce_of(req), rep->title,
              rep->body_html + "<p><a href=\"/report/" + rep->id + "/json\">JSON report</a> &middot; <a href=\"/\">diagnose another</a></p>");
  }

  void get_log(const httplib::Request& req, httplib::Response& res) {
    const std::string nonce = nonce_of(req);
    auto rep = find(req.matches[1]);
    if (!rep) return send_error(res, nonce, 404, "no such report");
    std::string src = req.get_param_value("src");
    std::uint64_t line = std::strtoull(req.get_param_value("line").c_str(), nullptr, 10);
    auto it = rep->excerpts.find({src, line});
    if (it == rep->excerpts.end()) return send_error(res, nonce, 404, "no lines kept for that location");
    const excerpt& ex = it->second;
    const bool by_rank = !ex.rank_lines.empty() && req.get_param_value("all") != "1";
    const std::string here = "/report/" + rep->id + "/log?src=" + httplib::detail::encode_query_param(src) + "&line=" + std::to_string(line);
    std::string body = "<h1>" + esc(src) + ":" + std::to_string(line) + "</h1>";
    if (by_rank)
      body += fmt::format("<p class=\"muted\" id=\"view\">Lines of {} only: this file interleaves several ranks. "
                          "<a href=\"{}&amp;all=1\">every line</a></p>", ex.rank->label(), esc(here));
    else if (!ex.rank_lines.empty())
      body += fmt::format("<p class=\"muted\" id=\"view\">Every line of the file around it. <a href=\"{}\">only {}</a></p>", esc(here), ex.rank->label());
    body += "<pre class=\"ctx\" id=\"context\">";
    for (const auto& [no, l] : by_rank ? ex.rank_lines : ex.lines) {
      bool hit = no == line;
      body += std::string(hit ? "<span class=\"hit\" id=\"hit\">" : "<span>") + "<span class=\"ln\">" + std::to_string(no) + "</span>" + esc(l) + "</span>";
      if (!hit) body += "\n";
    }
    body += "</pre><p><a href=\"/report/" + rep->id + "\">back to the report</a></p>";
    send_page(res, nonce, src, body);
  }

  static std::string search_form(const std::string& q) {
    return "<form method=\"get\" action=\"/kb/search\" class=\"search\"><input name=\"q\" value=\"" + esc(q) +
           "\" placeholder=\"search the encyclopedia\" aria-label=\"search the encyclopedia\"><button>search</button></form>";
  }

  void kb_page(const httplib::Request& req, httplib::Response& res) {
    std::string path = req.matches[1];
    if (path.empty()) path = "index.html";
    auto it = kb_pages.find(path);
    if (it == kb_pages.end()) return send_error(res, nonce_of(req), 404, "no such encyclopedia page");
    send_page(res, nonce_of(req), it->second.title, search_form("") + it->second.body);
  }

  void kb_search(const httplib::Request& req, httplib::Response& res) {
    std::string q = req.get_param_value("q");
    if (q.size() > 200) q.resize(200);
    auto hits = kb::search(lib, q);
    std::string body = "<h1>Encyclopedia: " + esc(q) + "</h1>" + search_form(q) + "<ul id=\"results\">";
    for (const auto* s : hits)
      body += "<li><a href=\"/kb/entries/" + esc(s->name) + ".html\">" + esc(s->title) + "</a> <code>" + esc(s->kind) + "</code></li>";
    body += "</ul>";
    if (hits.empty()) body += "<p>Nothing mentions that.</p>";
    send_page(res, nonce_of(req), "search", body);
  }

  void api_kb_entry(const httplib::Request& req, httplib::Response& res) {
    std::string name = kb::resolve_name(lib, req.matches[1]);
    for (const auto& s : lib.signatures)
      if (s.name == name) {
        nlohmann::json j = {{"name", s.name}, {"id", s.id}, {"title", s.title}, {"kind", s.kind}, {"category", s.category},
                            {"role", role_word(s.role)}, {"root_cause", s.root_cause}, {"fix", text::with_fallbacks(s.fix)}, {"verify", text::with_fallbacks(s.verify)},
                            {"confirm", s.confirm}, {"references", s.references}, {"fingerprints", s.fingerprints}};
        res.set_content(j.dump(2), "application/json");
        return;
      }
    res.status = 404;
    res.set_content(nlohmann::json{{"error", "no such entry"}}.dump(), "application/json");
  }

  void history_list(const httplib::Request& req, httplib::Response& res) {
    const std::string nonce = nonce_of(req);
    if (opt.history_path.empty()) return send_page(res, nonce, "history", "<h1>History</h1><p>The history is off (--no-history).</p>");
    auto h = history::store::open(opt.history_path);
    if (!h) return send_error(res, nonce, 500, "history: " + h.error().message);
    auto rows = h.value().list(100);
    if (!rows) return send_error(res, nonce, 500, "history: " + rows.error().message);
    std::string body = "<h1>History</h1><div class=\"table-box\"><table id=\"history\" class=\"cards\"><tr><th>id</th><th>when (UTC)</th><th>from</th><th>verdict</th><th>kind</th><th>rank</th><th>host</th><th>inputs</th></tr>";
    for (const auto& e : rows.value())
      body += fmt::format("<tr><td><a href=\"/history/{0}\">{0}</a></td><td data-label=\"when\">{1}</td><td data-label=\"from\">{2}</td>"
                          "<td data-label=\"verdict\">{3}</td><td data-label=\"kind\"><code>{4}</code></td><td data-label=\"rank\">{5}</td>"
                          "<td data-label=\"host\">{6}</td><td data-label=\"inputs\">{7}</td></tr>",
                          e.id, esc_row(history::format_utc(e.created_at)), esc_row(e.source), esc_row(e.verdict), esc_row(e.kind),
                          e.initiating_rank ? std::to_string(*e.initiating_rank) : "-", esc_row(e.initiating_host),
                          esc_row(history::summarize_inputs(e.inputs, 60)));
    body += "</table></div>";
    send_page(res, nonce, "history", body);
  }

  void history_show(const httplib::Request& req, httplib::Response& res) {
    const std::string nonce = nonce_of(req);
    if (opt.history_path.empty()) return send_error(res, nonce, 404, "the history is off");
    auto h = history::store::open(opt.history_path);
    if (!h) return send_error(res, nonce, 500, "history: " + h.error().message);
    auto e = h.value().get(std::strtoll(req.matches[1].str().c_str(), nullptr, 10));
    if (!e || !e.value()) return send_error(res, nonce, 404, "no such history entry");
    auto j = nlohmann::json::parse(e.value()->report_json, nullptr, false);
    std::string text = j.is_discarded() ? std::string("(the stored report is not valid JSON)") : report::from_stored_json(j);
    // The stored report is already masked; the picture is drawn from its "timeline" object (reports stored
    // before it was kept have none, and show the text alone).
    std::string picture;
    if (!j.is_discarded() && j.contains("timeline")) {
      auto m = timeline::from_json(j["timeline"]);
      if (!m.empty()) picture = "<h2>Timeline</h2>\n<div class=\"timeline-box\" id=\"timeline\">" + timeline::to_svg(m) + "</div>\n";
    }
    send_page(res, nonce, "history " + std::to_string(e.value()->id),
              "<h1>History entry " + std::to_string(e.value()->id) + "</h1><p class=\"muted\">" + esc_row(history::format_utc(e.value()->created_at)) +
                  " &middot; " + esc_row(e.value()->source) + "</p>" + picture + "<pre id=\"stored\">" + esc(text) + "</pre>");
  }
};

server::server(const kb::library& lib, options opt) : impl_(std::make_unique<impl>(lib, std::move(opt))) {}
server::~server() = default;

status server::check() const {
  const auto& o = impl_->opt;
  if (!impl_->eng) return error{"the knowledge base did not compile: " + impl_->engine_error};
  if (!is_loopback(o.host) && !o.allow_remote)
    return error{"refusing to listen on " + o.host + ", which is not a loopback address: pass --allow-remote"};
  if (auto t = check_token(o.token); !t) return error{"token: " + t.error().message};
  if (o.port < 0 || o.port > 65535) return error{"port must be 0-65535"};
  return ok();
}

int server::run() {
  auto& im = *impl_;
  auto& http = im.http;
  // The Content-Length bound as cpp-httplib applies it (a chunked body is bounded by guarded_server's stream
  // and upload_sink); the timeouts are guarded_server's (connection_limits), the library's read timeout is set
  // only for the sockets it opens itself.
  http.set_payload_max_length(im.opt.max_upload_bytes);
  http.set_read_timeout(im.opt.read_timeout_seconds, 0);
  http.set_write_timeout(im.opt.read_timeout_seconds, 0);
  // "Expect: 100-continue" is answered before routing (Server::process_request): a request that will be
  // refused is refused there, so that its body is not sent at all.
  http.set_expect_100_continue_handler([&im](const httplib::Request& req, httplib::Response& res) {
    std::string redirect;
    auto why = im.refuse(req, res, redirect);
    if (!why || why->first == 303) return 100;
    guarded_server::close_after_response();
    im.send_error(res, im.secure_headers(req, res), why->first, why->second);
    return why->first;
  });
  http.set_pre_routing_handler([&im](const httplib::Request& req, httplib::Response& res) {
    const std::string nonce = im.secure_headers(req, res);
    std::string redirect;
    if (auto why = im.refuse(req, res, redirect)) {
      if (why->first == 303) res.set_redirect(redirect, 303);
      else {
        guarded_server::close_after_response();  // a body it may carry is not read: it must not be taken for a request
        im.send_error(res, nonce, why->first, why->second);
      }
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_error_handler([&im](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string nonce = req.get_header_value("X-Firstfault-Nonce");
    switch (guarded_server::fault()) {  // the connection's stream gave up (guard.hpp): say why
      case stream_fault::header_timeout: res.status = 408; break;
      case stream_fault::header_too_large: res.status = 431; break;
      case stream_fault::body_too_large: res.status = 413; break;
      case stream_fault::body_too_slow: res.status = 408; break;
      case stream_fault::none: break;
    }
    if (guarded_server::fault() != stream_fault::none) guarded_server::close_after_response();
    std::string why = res.status == 413   ? im.too_large()
                      : res.status == 408 ? "the request was too slow"
                      : res.status == 431 ? "the request's headers are too large"
                      : res.status == 404 ? "no such page"
                      : res.status == 400 ? "malformed request"
                                          : "request failed";
    im.send_error(res, nonce, res.status, why);
  });
  http.set_exception_handler([&im](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
    im.send_error(res, req.get_header_value("X-Firstfault-Nonce"), 500, "internal error");
  });
  im.routes();
  int port = im.opt.port;
  if (port == 0) port = http.bind_to_any_port(im.opt.host);
  else if (!http.bind_to_port(im.opt.host, port)) port = -1;
  if (port <= 0) {
    std::fprintf(stderr, "firstfault: cannot listen on %s:%d\n", text::sanitize(im.opt.host).c_str(), im.opt.port);
    return 2;
  }
  std::string host_for_url = im.opt.host.find(':') != std::string::npos ? "[" + im.opt.host + "]" : im.opt.host;
  im.origin = "http://" + host_for_url + ":" + std::to_string(port);
  if (is_loopback(im.opt.host)) {
    im.allowed_hosts = {host_for_url + ":" + std::to_string(port), "localhost:" + std::to_string(port)};
  }
  im.cookie_name = "firstfault_token_" + std::to_string(port);
  // Jupyter's convention: the address to open carries the token; the page then keeps it in a cookie.
  const std::string url = im.origin + "/?token=" + im.opt.token;
  std::fprintf(stderr, "firstfault: serving on %s/ (Ctrl-C stops); open the address below\n", im.origin.c_str());
  std::printf("%s\n", url.c_str());
  std::fflush(stdout);
  if (!im.opt.ready_file.empty()) {  // it holds the token: readable by its owner only
    std::string tmp = im.opt.ready_file + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      std::string line = url + "\n";
      bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
      ::close(fd);
      if (!written || std::rename(tmp.c_str(), im.opt.ready_file.c_str()) != 0) std::remove(tmp.c_str());
    }
    if (fd < 0) std::fprintf(stderr, "firstfault: cannot write the ready file %s\n", text::sanitize(im.opt.ready_file).c_str());
  }
  bool ok = http.listen_after_bind();
  return ok ? 0 : 2;
}

void server::stop() { impl_->http.stop(); }

}  // namespace ff::serve
