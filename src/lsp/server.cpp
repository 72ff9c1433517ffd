// firstfault lsp: the session loop (lsp.hpp). Three threads: a reader that turns stdin into messages, a
// worker that runs one diagnosis at a time, and this one, which owns every piece of state, handles the
// messages, starts debounced diagnoses and is the only writer of stdout.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <ostream>
#include <set>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>

#include "base/temp_dir.hpp"
#include "firstfault/encyclopedia.hpp"
#include "firstfault/lsp.hpp"
#include "firstfault/report.hpp"
#include "firstfault/text.hpp"

namespace ff::lsp {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;
using clock = std::chrono::steady_clock;

// JSON-RPC and LSP error codes (LSP 3.17, "ErrorCodes").
constexpr int kParseError = -32700, kInvalidRequest = -32600, kMethodNotFound = -32601, kInvalidParams = -32602,
              kInternalError = -32603, kServerNotInitialized = -32002, kRequestCancelled = -32800;
// A line of a file that is not open in the editor is measured only when the file is this small; past it
// the range ends at kUnmeasured, which clients clamp to the line's end (LSP 3.17, "Position").
constexpr std::uint64_t kMeasureFileBytes = 64u << 20;
constexpr std::uint32_t kUnmeasured = 10000;
// Files found under a folder that diagnoseFolder maps back to URIs, at most.
constexpr std::size_t kMaxFolderFiles = 100000;

struct job {
  enum class what { document, folder } kind = what::document;
  std::string uri;            // document: its URI; folder: the folder's URI
  std::int64_t version = 0;   // document version diagnosed
  std::string text;           // document text (a copy: the editor may change it meanwhile)
  std::string folder;         // folder path
  json request_id;            // folder: the request to answer
  std::shared_ptr<std::atomic<bool>> cancel = std::make_shared<std::atomic<bool>>(false);
};

struct job_result {
  job j;
  bool cancelled = false;
  std::string error;
  std::map<std::string, std::vector<json>> diagnostics;  // by URI
  json verdict, report;
  std::string fix;
  root_facts root;  // for the hover of the root cause's lines
};

struct event {
  enum class what { message, eof, broken, done } kind;
  std::string body;                      // message: the JSON text; broken: why
  std::unique_ptr<job_result> result;    // done
};

// A queue of events for the main thread, with a wait that ends at a deadline.
// Messages wait here at most kMaxQueued at a time (and kMaxQueuedBytes of bodies): past that the reader stops
// reading, so a client that writes without reading the answers cannot grow the server's memory. Other events
// (a finished diagnosis, the end of input) always get in.
class event_queue {
 public:
  static constexpr std::size_t kMaxQueued = 1024;
  static constexpr std::uint64_t kMaxQueuedBytes = 1ull << 30;
  void push(event e) {
    {
      std::unique_lock<std::mutex> l(mu_);
      if (e.kind == event::what::message) {
        room_.wait(l, [&] { return messages_ < kMaxQueued && (messages_ == 0 || bytes_ + e.body.size() <= kMaxQueuedBytes); });
        ++messages_;
        bytes_ += e.body.size();
      }
      q_.push_back(std::move(e));
    }
    cv_.notify_one();
  }
  std::optional<event> pop_until(std::optional<clock::time_point> deadline) {
    std::unique_lock<std::mutex> l(mu_);
    if (deadline) cv_.wait_until(l, *deadline, [&] { return !q_.empty(); });
    else cv_.wait(l, [&] { return !q_.empty(); });
    if (q_.empty()) return std::nullopt;
    event e = std::move(q_.front());
    q_.pop_front();
    if (e.kind == event::what::message) {
      --messages_;
      bytes_ -= e.body.size();
      room_.notify_one();
    }
    return e;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_, room_;
  std::deque<event> q_;
  std::size_t messages_ = 0;
  std::uint64_t bytes_ = 0;
};

struct document {
  std::string language, text;
  std::int64_t version = 0;
  bool log = false;
};

// A file on disk that is not open in the editor, read once for the ranges of its diagnostics. Too large
// (kMeasureFileBytes) or unreadable: every range ends at kUnmeasured.
struct measured_file {
  std::string path, text;
  std::optional<line_index> lines;
  explicit measured_file(std::string p) : path(std::move(p)) {
    std::error_code ec;
    auto size = fs::file_size(path, ec);
    if (ec || size > kMeasureFileBytes) return;
    std::ifstream f(path, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    lines.emplace(text);
  }
  std::uint32_t width(std::uint64_t line, bool utf8) const { return lines ? lines->width(line, utf8) : kUnmeasured; }
};

class session {
 public:
  session(std::ostream& out, const kb::library& lib, const options& opt) : out_(out), lib_(lib), opt_(opt) {}

  int run(std::istream& in) {
    std::thread reader([q = events_, &in, max = opt_.max_message_bytes] { read_loop(in, *q, max); });
    std::thread worker([&] { work_loop(); });
    int status = 1;
    for (;;) {
      auto ev = events_->pop_until(next_deadline());
      start_due();
      if (!ev) continue;
      if (ev->kind == event::what::eof) break;
      if (ev->kind == event::what::broken) {
        std::fprintf(stderr, "firstfault lsp: %s; stopping\n", ev->body.c_str());
        status = 2;
        break;
      }
      if (ev->kind == event::what::done) {
        finished(std::move(ev->result));
        continue;
      }
      bool exit = false;
      try {
        exit = handle(ev->body);
      } catch (const std::exception& e) {  // a bug of ours: said, and the session goes on
        std::fprintf(stderr, "firstfault lsp: %s\n", text::sanitize(e.what()).c_str());
      }
      if (exit) {
        status = shutdown_ ? 0 : 1;
        break;
      }
    }
    stop_worker();
    worker.join();
    // The reader may be blocked on stdin that the client keeps open: it is detached (it holds only the
    // queue, shared, and the stream; the process ends right after). Any other stream is finite (tests):
    // joined, so the caller may destroy it.
    if (&in == &std::cin) reader.detach();
    else reader.join();
    return status;
  }

 private:
  // ---- threads ----
  static void read_loop(std::istream& in, event_queue& q, std::uint64_t max_bytes) {
    for (;;) {
      std::string body, err;
      auto st = read_message(in, body, err, max_bytes);
      if (st == read_status::eof) return q.push({event::what::eof, {}, {}});
      if (st == read_status::error) return q.push({event::what::broken, err, {}});
      q.push({event::what::message, std::move(body), {}});
    }
  }

  void work_loop() {
    for (;;) {
      job j;
      {
        std::unique_lock<std::mutex> l(jobs_mu_);
        jobs_cv_.wait(l, [&] { return stopping_ || !jobs_.empty(); });
        if (stopping_) return;
        j = std::move(jobs_.front());
        jobs_.pop_front();
      }
      auto r = std::make_unique<job_result>();
      r->j = std::move(j);
      if (r->j.cancel->load()) r->cancelled = true;
      else run_job(*r);
      events_->push({event::what::done, {}, std::move(r)});
    }
  }

  void stop_worker() {
    {
      std::lock_guard<std::mutex> l(jobs_mu_);
      stopping_ = true;
      for (auto& j : jobs_) j.cancel->store(true);
    }
    for (auto& [uri, flag] : running_) flag->store(true);
    jobs_cv_.notify_all();
  }

  void post(job j) {
    running_[j.uri] = j.cancel;
    {
      std::lock_guard<std::mutex> l(jobs_mu_);
      // A document's queued older version will never be wanted: drop it (and its copy of the text) now.
      if (j.kind == job::what::document)
        jobs_.erase(std::remove_if(jobs_.begin(), jobs_.end(),
                                   [&](const job& q) { return q.kind == job::what::document && q.uri == j.uri; }),
                    jobs_.end());
      jobs_.push_back(std::move(j));
    }
    jobs_cv_.notify_one();
  }

  // ---- the worker's part: one diagnosis ----
  void run_job(job_result& r) {
    if (!engine_) {
      auto e = pipeline::engine::build(lib_);
      if (!e) {
        r.error = "the knowledge base did not compile: " + e.error().message;
        return;
      }
      engine_.emplace(std::move(e.value()));
    }
    const job& j = r.j;
    base::temp_dir tmp("firstfault-lsp");
    std::string root, input;
    if (j.kind == job::what::document) {
      if (j.text.size() > opt_.max_document_bytes) {
        json d{{"range", {{"start", {{"line", 0}, {"character", 0}}}, {"end", {{"line", 0}, {"character", 0}}}}},
               {"severity", kSeverityWarning},
               {"source", "firstfault"},
               {"code", "too-large"},
               {"data", {{"role", "too-large"}, {"signature", ""}, {"kind", ""}}},
               {"message", fmt::format("not diagnosed in the editor: {} MiB is over the {} MiB limit (run firstfault diagnose on the file)",
                                       j.text.size() >> 20, opt_.max_document_bytes >> 20)}};
        r.diagnostics[j.uri].push_back(std::move(d));
        return;
      }
      if (tmp.path.empty()) {
        r.error = "cannot create a temporary directory";
        return;
      }
      std::string name = "document.log";
      if (auto p = uri_to_path(j.uri)) name = fs::path(*p).filename().string();
      else if (auto slash = j.uri.rfind('/'); slash != std::string::npos && slash + 1 < j.uri.size()) name = j.uri.substr(slash + 1);
      // A name the file system cannot take (over NAME_MAX, a NUL, a '/') becomes document.log.
      if (name.empty() || name == "." || name == ".." || name.size() > 200 || name.find_first_of(std::string("/\0", 2)) != std::string::npos)
        name = "document.log";
      root = tmp.path + "/";
      input = root + name;
      std::ofstream f(input, std::ios::binary);
      f.write(j.text.data(), static_cast<std::streamsize>(j.text.size()));
      if (!f) {
        r.error = "cannot write the document's temporary copy";
        return;
      }
    } else {
      root = j.folder + (j.folder.empty() || j.folder.back() != '/' ? "/" : "");
      input = j.folder;
    }
    std::vector<std::string> raw_names;  // by source id, as read
    std::map<std::string, std::string> raw_of;  // reported (masked) source name -> name as read
    pipeline::options po;
    po.mask = opt_.mask;
    po.threads = opt_.threads;
    po.ingest.display_root = root;
    // The language server's sink (sink.hpp): each source's name as read, so a diagnostic points at the real
    // file; a stop when an edit made the run stale (asked as each input opens and after each block).
    struct lsp_sink final : pipeline::sink {
      const job& j;
      const std::string& input;
      std::vector<std::string>& raw_names;
      std::map<std::string, std::string>& raw_of;
      lsp_sink(const job& j_, const std::string& in, std::vector<std::string>& names, std::map<std::string, std::string>& of)
          : j(j_), input(in), raw_names(names), raw_of(of) {}
      bool begin(std::uint32_t id, const std::string& raw) override {
        if (j.cancel->load()) return false;
        // The document's copy is open now (ingest holds its descriptor): its name goes at once, so an editor
        // that kills the server mid-run (SIGTERM on quit) leaves no copy of an unsaved buffer behind.
        if (j.kind == job::what::document) ::unlink(input.c_str());
        if (raw_names.size() < kMaxFolderFiles) {
          raw_names.resize(std::max<std::size_t>(raw_names.size(), id + 1));
          raw_names[id] = raw;
        }
        return true;
      }
      bool progress(std::uint64_t, std::size_t) override { return !j.cancel->load(); }
      void finish(pipeline::collector& col, const pipeline::run&) override {
        const auto& names = col.inputs().source_names;
        for (std::size_t i = 0; i < names.size() && i < raw_names.size(); ++i) raw_of.emplace(names[i], raw_names[i]);
      }
    } events(j, input, raw_names, raw_of);
    auto run = pipeline::diagnose({input}, *engine_, po, events);
    if (!run) {
      if (run.error().code == errc::cancelled) r.cancelled = true;
      else r.error = run.error().message;
      return;
    }
    const auto& res = run.value();
    uri_fn uri_of = [&](const std::string& source) -> std::optional<std::string> {
      auto it = raw_of.find(source);
      if (it == raw_of.end()) return std::nullopt;
      if (j.kind == job::what::document) return j.uri;
      if (it->second.find('!') != std::string::npos) return std::nullopt;  // an archive member: no file to open
      return path_to_uri((fs::path(root) / it->second).lexically_normal().string());
    };
    // Line widths for the ranges: the document's lines indexed once; a folder's files read once each while
    // their diagnostics come in a row (the last one is kept).
    std::optional<line_index> doc_lines;
    std::unique_ptr<measured_file> last_file;
    width_fn width = [&](const std::string& uri, std::uint64_t line) -> std::uint32_t {
      if (j.kind == job::what::document) {
        if (!doc_lines) doc_lines.emplace(j.text);
        return doc_lines->width(line, utf8_);
      }
      std::string path = uri_to_path(uri).value_or("");
      if (!last_file || last_file->path != path) last_file = std::make_unique<measured_file>(path);
      return last_file->width(line, utf8_);
    };
    r.diagnostics = to_diagnostics(res, uri_of, width);
    r.verdict = verdict_params(res, j.uri);
    r.fix = fix_text(res.diag);
    r.root = facts_of(res.diag);
    if (j.kind == job::what::folder) {
      r.report = report::to_json(res);
      for (const auto& [masked, raw] : raw_of) {  // every file read gets its diagnostics, none clears old ones
        if (auto u = uri_of(masked)) r.diagnostics.try_emplace(*u);
      }
    }
  }

  // ---- the main thread ----
  std::optional<clock::time_point> next_deadline() const {
    std::optional<clock::time_point> t;
    for (const auto& [uri, due] : due_)
      if (!t || due < *t) t = due;
    return t;
  }

  void start_due() {
    auto now = clock::now();
    for (auto it = due_.begin(); it != due_.end();) {
      if (it->second > now) {
        ++it;
        continue;
      }
      auto d = docs_.find(it->first);
      if (d != docs_.end() && d->second.log) {
        if (auto r = running_.find(it->first); r != running_.end()) r->second->store(true);
        job j;
        j.uri = it->first;
        j.version = d->second.version;
        j.text = d->second.text;
        post(std::move(j));
      }
      it = due_.erase(it);
    }
  }

  void finished(std::unique_ptr<job_result> r) {
    const job& j = r->j;
    if (auto it = running_.find(j.uri); it != running_.end() && it->second == j.cancel) running_.erase(it);
    if (j.kind == job::what::folder) {
      folder_requests_.erase(j.request_id.dump());
      if (r->cancelled) return reply_error(j.request_id, kRequestCancelled, "cancelled");
      if (!r->error.empty()) return reply_error(j.request_id, kInternalError, r->error);
      for (auto& [uri, diags] : r->diagnostics) {
        roots_[uri] = r->root;
        publish(uri, std::move(diags), std::nullopt);
      }
      fixes_[j.uri] = r->fix;
      notify("firstfault/verdict", r->verdict);
      return reply(j.request_id, r->report);
    }
    auto d = docs_.find(j.uri);
    if (r->cancelled || d == docs_.end() || d->second.version != j.version) return;  // stale: a newer run follows
    if (!r->error.empty()) return notify("window/showMessage", {{"type", 1}, {"message", "firstfault: " + r->error}});
    auto mine = std::move(r->diagnostics[j.uri]);
    publish(j.uri, std::move(mine), j.version);
    fixes_[j.uri] = r->fix;
    roots_[j.uri] = std::move(r->root);
    if (!r->verdict.is_null()) notify("firstfault/verdict", r->verdict);
  }

  void publish(const std::string& uri, std::vector<json> diags, std::optional<std::int64_t> version) {
    json p{{"uri", uri}, {"diagnostics", diags}};
    if (version) p["version"] = *version;
    published_[uri] = std::move(diags);
    notify("textDocument/publishDiagnostics", p);
  }

  void send(const json& msg) {
    out_ << frame(msg);
    out_.flush();
  }
  void notify(const std::string& method, const json& params) { send({{"jsonrpc", "2.0"}, {"method", method}, {"params", params}}); }
  void reply(const json& id, const json& result) { send({{"jsonrpc", "2.0"}, {"id", id}, {"result", result}}); }
  void reply_error(const json& id, int code, const std::string& message) {
    send({{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}});
  }

  // Returns true when the session ends (the exit notification).
  bool handle(const std::string& body) {
    json msg = json::parse(body, nullptr, false);
    if (msg.is_discarded() || !msg.is_object()) {
      reply_error(nullptr, kParseError, "not a JSON object");
      return false;
    }
    // JSON-RPC 2.0: an id is an integer or a string; a request with any other id is answered with id null.
    const bool has_id = msg.contains("id") && !msg["id"].is_null();
    const bool is_request = has_id && (msg["id"].is_number_integer() || msg["id"].is_string());
    const bool has_method = msg.contains("method");
    if (has_method && !msg["method"].is_string()) {
      if (has_id) reply_error(is_request ? msg["id"] : json(nullptr), kInvalidRequest, "method is not a string");
      return false;
    }
    std::string method = has_method ? msg["method"].get<std::string>() : "";
    if (method.empty()) {  // a response to something we sent (we send no requests) or garbage
      if (is_request && !msg.contains("result") && !msg.contains("error")) reply_error(msg["id"], kInvalidRequest, "no method");
      return false;
    }
    if (has_id && !is_request) {
      reply_error(nullptr, kInvalidRequest, "the id is not an integer or a string");
      return false;
    }
    if (method == "exit") return true;
    const json params = msg.contains("params") ? msg["params"] : json::object();
    try {
      if (is_request) request(msg["id"], method, params);
      else notification(method, params);
    } catch (const json::exception& e) {  // a missing field or one of the wrong type: the client's mistake
      if (is_request) reply_error(msg["id"], kInvalidParams, std::string("invalid params: ") + e.what());
    } catch (const std::exception& e) {  // a filesystem error on a folder path, say: answered, not fatal
      if (is_request) reply_error(msg["id"], kInternalError, text::sanitize(e.what()));
    }
    return false;
  }

  void request(const json& id, const std::string& method, const json& params) {
    if (method == "initialize") {
      if (initialized_) return reply_error(id, kInvalidRequest, "already initialized");
      return initialize(id, params);
    }
    if (!initialized_) return reply_error(id, kServerNotInitialized, "initialize first");
    if (shutdown_) return reply_error(id, kInvalidRequest, "the server is shutting down");
    if (method == "shutdown") {
      shutdown_ = true;
      return reply(id, nullptr);
    }
    if (method == "textDocument/hover") return hover(id, params);
    if (method == "textDocument/codeAction") return code_action(id, params);
    if (method == "workspace/executeCommand") return execute(id, params);
    reply_error(id, kMethodNotFound, "method not supported: " + text::sanitize(text::prefix_utf8(method, 80)));
  }

  void notification(const std::string& method, const json& params) {
    if (!initialized_ || shutdown_) return;  // LSP 3.17: notifications before initialize are dropped
    if (method == "textDocument/didOpen") {
      const auto& td = params.at("textDocument");
      std::string uri = td.at("uri").get<std::string>();
      document d;
      d.language = td.value("languageId", "");
      d.text = td.at("text").get<std::string>();
      d.version = td.value("version", 0);
      d.log = looks_like_log(uri, d.language, d.text, engine_prefixes());
      docs_[uri] = std::move(d);
      if (docs_[uri].log) due_[uri] = clock::now();
    } else if (method == "textDocument/didChange") {
      std::string uri = params.at("textDocument").at("uri").get<std::string>();
      auto d = docs_.find(uri);
      if (d == docs_.end()) return;
      // Everything is read before anything changes: a wrong-typed field leaves the document as it was.
      std::int64_t version = params.at("textDocument").value("version", d->second.version + 1);
      const std::string* text = nullptr;
      for (const auto& c : params.at("contentChanges"))
        if (!c.contains("range")) text = c.at("text").get_ptr<const std::string*>();  // full sync (what we ask for)
      if (text) d->second.text = *text;
      d->second.version = version;
      if (!d->second.log) d->second.log = looks_like_log(uri, d->second.language, d->second.text, engine_prefixes());
      if (auto r = running_.find(uri); r != running_.end()) r->second->store(true);
      if (d->second.log) due_[uri] = clock::now() + std::chrono::milliseconds(opt_.debounce_ms);
    } else if (method == "textDocument/didClose") {
      std::string uri = params.at("textDocument").at("uri").get<std::string>();
      docs_.erase(uri);
      due_.erase(uri);
      fixes_.erase(uri);
      roots_.erase(uri);
      if (auto r = running_.find(uri); r != running_.end()) r->second->store(true);
      if (published_.count(uri)) publish(uri, {}, std::nullopt);
      published_.erase(uri);
    } else if (method == "$/cancelRequest") {
      auto it = folder_requests_.find(params.value("id", json()).dump());
      if (it != folder_requests_.end()) it->second->store(true);
    }
    // initialized, didSave, $/setTrace and other notifications need nothing
  }

  void initialize(const json& id, const json& params) {
    const json caps = params.value("capabilities", json::object());  // params not an object: throws, answered
    if (caps.contains("general") && caps["general"].contains("positionEncodings"))
      for (const auto& e : caps["general"]["positionEncodings"])
        if (e == "utf-8") utf8_ = true;
    literal_actions_ = caps.contains("textDocument") && caps["textDocument"].contains("codeAction") &&
                       caps["textDocument"]["codeAction"].contains("codeActionLiteralSupport");
    json server_caps{{"textDocumentSync", {{"openClose", true}, {"change", 1}}},
                     {"hoverProvider", true},
                     {"codeActionProvider", true},
                     {"executeCommandProvider",
                      {{"commands", {"firstfault.explain", "firstfault.copyFix", "firstfault.diagnoseFolder"}}}},
                     {"positionEncoding", utf8_ ? "utf-8" : "utf-16"}};
    initialized_ = true;
    reply(id, {{"capabilities", server_caps}, {"serverInfo", {{"name", "firstfault"}, {"version", opt_.version}}}});
  }

  // The diagnostics published for `uri` on `line`, in publishing order.
  std::vector<const json*> diagnostics_on(const std::string& uri, std::int64_t first, std::int64_t last) const {
    std::vector<const json*> out;
    auto it = published_.find(uri);
    if (it == published_.end()) return out;
    for (const auto& d : it->second) {
      std::int64_t l = d.at("range").at("start").at("line").get<std::int64_t>();
      if (l >= first && l <= last) out.push_back(&d);
    }
    return out;
  }

  void hover(const json& id, const json& params) {
    std::string uri = params.at("textDocument").at("uri").get<std::string>();
    std::int64_t line = params.at("position").at("line").get<std::int64_t>();
    for (const json* d : diagnostics_on(uri, line, line)) {
      std::string sig = d->value("data", json::object()).value("signature", "");
      auto root = roots_.find(uri);
      std::string md = hover_markdown(*d, sig.empty() ? nullptr : lib_.find(sig), root == roots_.end() ? nullptr : &root->second);
      return reply(id, {{"contents", {{"kind", "markdown"}, {"value", md}}}, {"range", d->at("range")}});
    }
    reply(id, nullptr);
  }

  void code_action(const json& id, const json& params) {
    std::string uri = params.at("textDocument").at("uri").get<std::string>();
    std::int64_t first = params.at("range").at("start").at("line").get<std::int64_t>();
    std::int64_t last = params.at("range").at("end").at("line").get<std::int64_t>();
    json actions = json::array();
    std::set<std::string> explained;
    bool fixable = false;
    for (const json* d : diagnostics_on(uri, first, last)) {
      const json data = d->value("data", json::object());
      std::string sig = data.value("signature", "");
      if (data.value("role", "") == "root") fixable = true;
      if (sig.empty() || !explained.insert(sig).second) continue;
      actions.push_back(action("firstfault: explain " + sig, "firstfault.explain", {sig}, *d));
    }
    if (auto f = fixes_.find(uri); fixable && f != fixes_.end() && !f->second.empty()) actions.push_back(action("firstfault: copy the fix", "firstfault.copyFix", {uri}, nullptr));
    reply(id, actions);
  }

  json action(const std::string& title, const std::string& command, const json& args, const json& diag) const {
    json cmd{{"title", title}, {"command", command}, {"arguments", args}};
    if (!literal_actions_) return cmd;
    json a{{"title", title}, {"kind", "quickfix"}, {"command", cmd}};
    if (!diag.is_null()) a["diagnostics"] = json::array({diag});
    return a;
  }

  void execute(const json& id, const json& params) {
    std::string command = params.at("command").get<std::string>();
    json args = params.value("arguments", json::array());
    std::string arg = args.is_array() && !args.empty() && args[0].is_string() ? args[0].get<std::string>() : "";
    if (command == "firstfault.explain") {
      std::string name = kb::resolve_name(lib_, arg);
      std::string md = entry_markdown(name);
      if (md.empty()) return reply_error(id, kInvalidParams, "no signature or kind named '" + text::sanitize(text::prefix_utf8(arg, 80)) + "'");
      const auto* s = lib_.find(name);
      return reply(id, {{"title", s ? s->title : name}, {"markdown", md}});
    }
    if (command == "firstfault.copyFix") {
      auto it = fixes_.find(arg);
      if (it == fixes_.end() || it->second.empty()) return reply_error(id, kInvalidParams, "no diagnosed root cause with a fix for this document");
      return reply(id, {{"text", it->second}});
    }
    if (command == "firstfault.diagnoseFolder") {
      std::string path = uri_to_path(arg).value_or(arg);
      std::error_code ec;
      if (path.empty() || path.find('\0') != std::string::npos || !fs::is_directory(path, ec))
        return reply_error(id, kInvalidParams, "not a folder: " + text::sanitize(text::prefix_utf8(arg, 200)));
      job j;
      j.kind = job::what::folder;
      j.folder = fs::absolute(path).lexically_normal().string();
      while (j.folder.size() > 1 && j.folder.back() == '/') j.folder.pop_back();
      j.uri = path_to_uri(j.folder);
      j.request_id = id;
      folder_requests_[id.dump()] = j.cancel;
      return post(std::move(j));
    }
    reply_error(id, kInvalidParams, "unknown command: " + text::sanitize(text::prefix_utf8(command, 80)));
  }

  // A signature's encyclopedia page (as `kb export --format markdown` writes it), or a kind's list of
  // signatures; "" for neither. The site is rendered once, on the first call.
  std::string entry_markdown(const std::string& name) {
    if (pages_.empty())
      for (auto& p : encyclopedia::render_site(lib_, encyclopedia::format::markdown)) pages_.emplace(p.path, std::move(p.content));
    if (auto it = pages_.find("entries/" + name + ".md"); it != pages_.end()) {
      // From the title on: the page's navigation links lead nowhere in an editor.
      auto title = it->second.find("\n# ");
      return title == std::string::npos ? it->second : it->second.substr(title + 1);
    }
    if (const auto* k = lib_.kind(name)) {
      std::string md = "# " + k->kind + "\n\n" + k->meaning + "\n\nSignatures of this kind:\n\n";
      for (const auto& s : lib_.signatures)
        if (s.kind == k->kind) md += "- `" + s.name + "`: " + s.title + "\n";
      return md;
    }
    return "";
  }

  // The prefix catalogue for looks_like_log(): the engine's when built, else one loaded for it.
  const normalize::prefix_catalog& engine_prefixes() {
    if (!sniff_prefixes_) {
      auto c = normalize::prefix_catalog::load(lib_.prefix_files);
      sniff_prefixes_.emplace(c ? std::move(c.value()) : normalize::prefix_catalog{});
    }
    return *sniff_prefixes_;
  }

  std::ostream& out_;
  const kb::library& lib_;
  const options& opt_;
  std::shared_ptr<event_queue> events_ = std::make_shared<event_queue>();
  std::mutex jobs_mu_;
  std::condition_variable jobs_cv_;
  std::deque<job> jobs_;
  bool stopping_ = false;
  std::optional<pipeline::engine> engine_;  // the worker's, built on its first job
  // main thread only:
  std::map<std::string, document> docs_;
  std::map<std::string, clock::time_point> due_;                       // uri -> when to diagnose it
  std::map<std::string, std::shared_ptr<std::atomic<bool>>> running_;  // uri -> the cancel flag of its newest job
  std::map<std::string, std::shared_ptr<std::atomic<bool>>> folder_requests_;
  std::map<std::string, std::vector<json>> published_;
  std::map<std::string, std::string> fixes_;
  std::map<std::string, root_facts> roots_;  // uri -> its diagnosis' root cause, for hovers
  std::map<std::string, std::string> pages_;
  std::optional<normalize::prefix_catalog> sniff_prefixes_;
  bool initialized_ = false, shutdown_ = false, literal_actions_ = false;
  std::atomic<bool> utf8_{false};  // set by initialize, before any job; read by the worker
};

}  // namespace

int serve(std::istream& in, std::ostream& out, const kb::library& lib, const options& opt) {
  // std::cin is tied to std::cout: every read would flush the output first, from the reader thread, racing
  // the main thread's writes (Neovim saw the initialize answer twice). Untied, only the main thread writes.
  in.tie(nullptr);
  session s(out, lib, opt);
  return s.run(in);
}

}  // namespace ff::lsp
