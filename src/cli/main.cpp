// firstfault command line. The only place that touches argv, stdout and stderr.
#include <unistd.h>

#include <httplib.h>
#include <re2/re2.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <mutex>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "firstfault/correlate_rules.hpp"
#include "firstfault/encyclopedia.hpp"
#include "firstfault/history.hpp"
#include "firstfault/watch.hpp"
#include "shell_docs.hpp"
#include "firstfault/kb.hpp"
#include "firstfault/pipeline.hpp"
#include "firstfault/report.hpp"
#include "firstfault/text.hpp"

namespace {

constexpr int kExitUsage = 2;

ff::result<ff::kb::library> load_kb(const std::vector<std::string>& dirs) {
  return ff::kb::library::load(true, dirs);
}

bool use_color(const std::string& mode) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  const char* nc = std::getenv("NO_COLOR");
  return isatty(STDOUT_FILENO) && !(nc && *nc);
}

void print_signature(const ff::kb::signature& s) {
  std::cout << s.title << "\n" << std::string(s.title.size(), '=') << "\n\n";
  std::cout << "name: " << s.name << "   kind: " << s.kind << " (" << s.category << ")   role: " << s.role
            << (s.is_cause() ? "   priority: " + std::to_string(s.priority) : "") << "\n\n";
  std::cout << s.description << "\n";
  auto list = [](const char* head, const std::vector<std::string>& xs, const char* bullet) {
    if (xs.empty()) return;
    std::cout << head << "\n";
    for (const auto& x : xs) std::cout << "  " << bullet << x << "\n";
    std::cout << "\n";
  };
  list("Fingerprints:", s.fingerprints, "");
  list("Fix:", s.fix, "- ");
  for (const auto& c : s.fix_code) {
    std::cout << "  [" << c.stack << "]\n";
    std::istringstream code(c.code);
    for (std::string l; std::getline(code, l);) std::cout << "    " << l << "\n";
  }
  list("Verify:", s.verify, "$ ");
  list("Confirm:", s.confirm, "[ ] ");
  list("Prevention:", s.prevention, "- ");
  list("False positives:", s.falsepositives, "- ");
  if (!s.positive.empty()) {
    std::cout << "Example:\n  " << s.positive.front().line << "\n\n";
  }
  list("References:", s.references, "");
}

// RE2 syntax -> POSIX ERE for `grep -E -f` (best effort: non-capturing and named groups become plain
// groups, Perl classes become POSIX classes, lazy quantifiers become greedy, inline flags are dropped).
std::string to_ere(const std::string& re) {
  std::string o;
  bool in_class = false;
  for (std::size_t i = 0; i < re.size(); ++i) {
    char c = re[i];
    if (c == '\\' && i + 1 < re.size()) {
      char n = re[++i];
      const char* rep = nullptr;
      switch (n) {
        case 'd': rep = in_class ? "0-9" : "[0-9]"; break;
        case 'D': rep = in_class ? nullptr : "[^0-9]"; break;
        case 's': rep = in_class ? "[:space:]" : "[[:space:]]"; break;
        case 'S': rep = in_class ? nullptr : "[^[:space:]]"; break;
        case 'w': rep = in_class ? "[:alnum:]_" : "[[:alnum:]_]"; break;
        case 'W': rep = in_class ? nullptr : "[^[:alnum:]_]"; break;
        default: break;
      }
      if (rep) o += rep;
      else { o += '\\'; o += n; }
      continue;
    }
    if (!in_class && c == '(' && i + 2 < re.size() && re[i + 1] == '?') {
      if (re[i + 2] == ':') { o += '('; i += 2; continue; }
      if (re[i + 2] == 'P' && i + 3 < re.size() && re[i + 3] == '<') {
        auto close = re.find('>', i);
        o += '(';
        i = close;
        continue;
      }
      auto close = re.find(')', i);  // (?i) and friends: dropped
      if (close != std::string::npos) { i = close; continue; }
    }
    if (!in_class && c == '?' && !o.empty() && (o.back() == '*' || o.back() == '+' || o.back() == '?' || o.back() == '}')) continue;
    if (c == '[' && !in_class) in_class = true;
    else if (c == ']' && in_class && !o.empty() && o.back() != '[' && !(o.size() >= 2 && o[o.size() - 2] == '[' && o.back() == '^')) in_class = false;
    o += c;
  }
  return o;
}

// Masking options for diagnose and watch: the team config (explicit or default location), extra rules, --no-mask.
ff::result<ff::mask::options> mask_options(std::string config, const std::vector<std::string>& rules, bool no_mask) {
  ff::mask::options o;
  if (config.empty()) {
    const char* xdg = std::getenv("XDG_CONFIG_HOME");
    const char* home = std::getenv("HOME");
    std::string def = xdg && *xdg ? std::string(xdg) + "/firstfault/mask.yaml" : home ? std::string(home) + "/.config/firstfault/mask.yaml" : "";
    // An unusable default location (symlink loop, name too long, no permission) is not an error of the run:
    // only an existing file is used. The error_code overload never throws.
    std::error_code ec;
    if (!def.empty() && std::filesystem::exists(def, ec) && !ec) config = def;
  }
  if (!config.empty()) {
    auto mo = ff::mask::load_config(config, o);
    if (!mo) return mo.error();
    o = mo.value();
  }
  for (const auto& r : rules) o.extra.push_back({"custom", r});
  if (no_mask) o.enabled = false;
  return o;
}

struct watch_args {
  std::vector<std::string> paths;
  bool from_start, json, no_history;
  std::string silence, exec, webhook, metrics, history;
  double run_for;
  int poll_ms;
  bool no_mask;
  std::string mask_config;
  std::vector<std::string> mask_rules;
};

std::atomic<bool> g_stop{false};

std::optional<double> parse_duration(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str()) return std::nullopt;
  std::string unit(end);
  if (unit.empty() || unit == "s") return v;
  if (unit == "ms") return v / 1000;
  if (unit == "m") return v * 60;
  if (unit == "h") return v * 3600;
  return std::nullopt;
}

// POST with retries; returns an empty string on success, else the last error.
std::string post_json(const std::string& url, const std::string& body) {
  static const re2::RE2 url_re(R"(^(https?://[^/]+)(/.*)?$)");
  std::string base, path;
  if (!re2::RE2::FullMatch(url, url_re, &base, &path)) return "not an http(s) URL: " + url;
  if (path.empty()) path = "/";
  std::string last;
  for (int attempt = 0; attempt < 3; ++attempt) {
    httplib::Client cli(base);
    cli.set_connection_timeout(5, 0);
    cli.set_read_timeout(5, 0);
    cli.set_write_timeout(5, 0);
    auto res = cli.Post(path, body, "application/json");
    if (res && res->status >= 200 && res->status < 300) return "";
    last = res ? "HTTP " + std::to_string(res->status) : httplib::to_string(res.error());
    std::this_thread::sleep_for(std::chrono::milliseconds(200 << attempt));
  }
  return last;
}

int run_watch(const ff::kb::library& L, const watch_args& a) {
  auto eng = ff::pipeline::engine::build(L);
  if (!eng) {
    std::fprintf(stderr, "firstfault: %s\n", eng.error().message.c_str());
    return ff::exit_status(eng.error());
  }
  ff::watch::options opt;
  opt.paths = a.paths;
  opt.from_start = a.from_start;
  opt.poll_ms = a.poll_ms;
  if (a.run_for > 0) opt.run_for_s = a.run_for;
  auto sil = parse_duration(a.silence);
  if (!sil) {
    std::fprintf(stderr, "firstfault: --silence %s: expected a duration such as 300s or 5m\n", a.silence.c_str());
    return kExitUsage;
  }
  opt.silence_s = *sil;
  auto mo = mask_options(a.mask_config, a.mask_rules, a.no_mask);
  if (!mo) {
    std::fprintf(stderr, "firstfault: %s\n", mo.error().message.c_str());
    return kExitUsage;
  }
  opt.pipeline.mask = mo.value();
  std::signal(SIGINT, [](int) { g_stop = true; });
  std::signal(SIGTERM, [](int) { g_stop = true; });
  std::signal(SIGPIPE, SIG_IGN);

  ff::watch::metrics mx;
  std::mutex mu;
  std::unique_ptr<httplib::Server> server;
  std::thread server_thread;
  if (!a.metrics.empty()) {
    auto colon = a.metrics.rfind(':');
    if (colon == std::string::npos) {
      std::fprintf(stderr, "firstfault: --metrics expects HOST:PORT\n");
      return kExitUsage;
    }
    std::string host = a.metrics.substr(0, colon);
    int port = std::atoi(a.metrics.c_str() + colon + 1);
    server = std::make_unique<httplib::Server>();
    server->Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> g(mu);
      double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
      res.set_content(ff::watch::to_prometheus(mx, now), "text/plain; version=0.0.4");
    });
    if (!server->bind_to_port(host.c_str(), port)) {
      std::fprintf(stderr, "firstfault: --metrics %s: cannot listen there\n", a.metrics.c_str());
      return kExitUsage;
    }
    server_thread = std::thread([&] { server->listen_after_bind(); });
  }
  std::optional<ff::history::store> hs;
  std::string hpath = a.history.empty() ? ff::history::default_path() : a.history;
  if (!a.no_history) {
    auto h = ff::history::store::open(hpath);
    if (!h) std::fprintf(stderr, "firstfault: %s; alerts are printed but not stored\n", h.error().message.c_str());
    else hs = std::move(h).value();
  }
  if (hs) opt.pipeline.host_keyer = [hpath](const std::string& real) { return ff::history::host_key(hpath, real); };
  auto sink = [&](const ff::watch::alert& al) {
    std::string js = al.report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (a.json) std::cout << js << std::endl;
    else std::cout << al.text << std::endl;
    if (!a.exec.empty()) {
      if (FILE* p = ::popen(a.exec.c_str(), "w")) {
        std::fwrite(js.data(), 1, js.size(), p);
        std::fputc('\n', p);
        int rc = ::pclose(p);
        if (rc != 0) std::fprintf(stderr, "firstfault: --exec command exited with status %d\n", rc);
      }
    }
    if (!a.webhook.empty())
      if (auto err = post_json(a.webhook, js); !err.empty())
        std::fprintf(stderr, "firstfault: --webhook %s: %s (alert not delivered)\n", a.webhook.c_str(), err.c_str());
    if (hs && al.type == "failure") {
      ff::history::entry e;
      e.source = "watch";
      e.inputs = al.inputs;
      e.verdict = al.report.value("verdict", "");
      if (al.report["root_cause"].is_object()) {
        e.signature = al.report["root_cause"].value("signature", "");
        e.kind = al.report["root_cause"].value("kind", "");
      }
      if (al.report["initiating_rank"].is_number_integer()) e.initiating_rank = al.report["initiating_rank"].get<int>();
      if (al.report["initiating_host"].is_string()) e.initiating_host = al.report["initiating_host"].get<std::string>();
      e.report_json = js;
      e.host_key = al.initiating_host_key;
      if (auto st = hs->add(e); !st) std::fprintf(stderr, "firstfault: %s\n", st.error().message.c_str());
    }
  };
  auto st = ff::watch::run(eng.value(), opt, sink, g_stop, &mx, &mu);
  if (server) {
    server->stop();
    server_thread.join();
  }
  if (!st) {
    std::fprintf(stderr, "firstfault: %s\n", st.error().message.c_str());
    return ff::exit_status(st.error());
  }
  return 0;
}

}  // namespace

static int run_main(int argc, char** argv) {
  CLI::App app{"firstfault: find out why a distributed training run died"};
  app.require_subcommand(1);
  app.set_version_flag("--version", [] {
    std::string v = std::string("firstfault ") + FF_VERSION;
    if (auto lib = load_kb({})) v += " (built-in knowledge base: " + std::to_string(lib.value().signatures.size()) + " signatures, " + lib.value().content_hash + ")";
    return v;
  });
  std::vector<std::string> kb_dirs;
  app.add_option("--kb", kb_dirs, "extra directory of signature files (repeatable)")->check(CLI::ExistingDirectory);

  // diagnose
  auto* diag = app.add_subcommand("diagnose", "name the root cause and first failing rank in job logs");
  std::vector<std::string> paths;
  std::string format = "text", color = "auto";
  std::size_t max_line_kib = 1024;
  diag->add_option("paths", paths, "log files, directories, archives, or - for stdin")->required();
  diag->add_option("--format,-f", format, "text | json | markdown | html | brief")->check(CLI::IsMember({"text", "json", "markdown", "html", "brief"}));
  bool brief = false;
  diag->add_flag("--brief", brief, "one line: verdict, kind, first failing rank and host, title (same as --format brief)");
  diag->add_option("--color", color, "auto | always | never")->check(CLI::IsMember({"auto", "always", "never"}));
  diag->add_option("--max-line-kib", max_line_kib, "cut lines longer than this (KiB, 1-1048576)")->check(CLI::Range(1, 1048576));
  diag->add_option("--kb", kb_dirs, "extra directory of signature files (repeatable)")->check(CLI::ExistingDirectory);
  bool no_mask = false;
  std::vector<std::string> mask_rules;
  std::string mask_config;
  diag->add_flag("--no-mask", no_mask, "do not mask addresses, host names, user names and secrets");
  bool quiet = false;
  diag->add_flag("--quiet,-q", quiet, "no progress line and no per-input notes on stderr (the report still lists them)");
  bool reveal = false;
  diag->add_flag("--reveal", reveal, "after the report, print the real host name behind each masked token (on this terminal only: never stored or sent)");
  bool exact = false;
  diag->add_flag("--exact", exact, "read every line in full (reference mode; default: scan first, read in full only lines that can matter)");
  unsigned threads = 0;
  diag->add_option("--threads,-j", threads, "1: read and match on one thread; 2: read and peel on one, the rest on another (the report is the same; default: 2 on a machine with two cores or more)")
      ->check(CLI::Range(0u, 2u));
  std::size_t learn_lines = 256;
  diag->add_option("--learn-lines", learn_lines, "lines of each input read first to learn unknown prefixes (testing)")->group("");
  bool no_history = false;
  std::string history_path;
  diag->add_flag("--no-history", no_history, "do not store this diagnosis in the local history");
  diag->add_option("--history", history_path, "history database (default $XDG_DATA_HOME/firstfault/history.db)");
  diag->add_option("--mask-rule", mask_rules, "extra RE2 pattern to mask (repeatable; group 1 if present)");
  diag->add_option("--mask-config", mask_config, "team masking config (YAML: enabled, rules, keep_hosts)");

  // kb
  auto* kb = app.add_subcommand("kb", "inspect and check the knowledge base");
  kb->require_subcommand(1);
  auto* kb_lint = kb->add_subcommand("lint", "check every signature's schema and patterns");
  auto* kb_test = kb->add_subcommand("test", "run every signature's examples (and check healthy baselines)");
  std::vector<std::string> healthy_dirs;
  kb_test->add_option("--healthy", healthy_dirs, "logs of healthy runs: any cause finding in them fails");
  auto* kb_list = kb->add_subcommand("list", "list signatures");
  std::string list_format = "text";
  kb_list->add_option("--format", list_format, "text | json")->check(CLI::IsMember({"text", "json"}));
  auto* kb_show = kb->add_subcommand("show", "show one signature");
  std::string show_name;
  kb_show->add_option("name", show_name)->required();
  auto* kb_search = kb->add_subcommand("search", "find signatures by word");
  std::string search_q;
  kb_search->add_option("query", search_q)->required();
  auto* kb_export = kb->add_subcommand("export", "export the knowledge base");
  bool export_patterns = false;
  std::string export_format, export_dir;
  kb_export->add_flag("--patterns", export_patterns, "one fingerprint regex per line (RE2 syntax, for rg -f)");
  bool export_ere = false;
  kb_export->add_flag("--ere", export_ere, "with --patterns: POSIX extended syntax, for grep -E -f");
  kb_export->add_option("--format", export_format, "markdown | html: write the encyclopedia")->check(CLI::IsMember({"markdown", "html"}));
  kb_export->add_option("dir", export_dir, "output directory for --format");
  for (auto* c : {kb_lint, kb_test, kb_list, kb_show, kb_search, kb_export})
    c->add_option("--kb", kb_dirs, "extra directory of signature files")->check(CLI::ExistingDirectory);

  auto* watch = app.add_subcommand("watch", "follow a running job's logs and alert on the first fault");
  std::vector<std::string> watch_paths;
  bool watch_from_start = false, watch_json = false, watch_no_history = false;
  std::string watch_silence = "300s", watch_exec, watch_webhook, watch_metrics, watch_history;
  double watch_run_for = 0;
  int watch_poll_ms = 200;
  watch->add_option("paths", watch_paths, "log files or directories to follow")->required();
  watch->add_flag("--from-start", watch_from_start, "read existing content first (default: start at the end)");
  watch->add_option("--silence", watch_silence, "quiet time that counts as a possible hang, e.g. 300s, 5m");
  watch->add_flag("--json", watch_json, "print alerts as JSON lines (same schema as diagnose --format json)");
  watch->add_option("--exec", watch_exec, "run this shell command per alert, with the alert JSON on stdin");
  watch->add_option("--webhook", watch_webhook, "POST each alert as JSON to this http:// URL (3 tries, 5 s timeout)");
  watch->add_option("--metrics", watch_metrics, "serve Prometheus metrics on HOST:PORT (e.g. 127.0.0.1:9464)");
  watch->add_option("--poll-ms", watch_poll_ms, "wake-up interval when nothing is written (ms)");
  watch->add_option("--run-for", watch_run_for, "stop after this many seconds (default: until interrupted)");
  watch->add_flag("--no-history", watch_no_history, "do not store alerts in the local history");
  watch->add_option("--history", watch_history, "history database");
  watch->add_flag("--no-mask", no_mask, "do not mask addresses, host names, user names and secrets");
  watch->add_option("--mask-rule", mask_rules, "extra RE2 pattern to mask (repeatable)");
  watch->add_option("--mask-config", mask_config, "team masking config (YAML: enabled, rules, keep_hosts)");

  auto* hist = app.add_subcommand("history", "list, show and count stored diagnoses");
  hist->require_subcommand(1);
  std::string hist_path;
  hist->add_option("--history", hist_path, "history database (default $XDG_DATA_HOME/firstfault/history.db)");
  auto* hist_list = hist->add_subcommand("list", "most recent diagnoses");
  int hist_limit = 20;
  std::string hist_format = "text";
  hist_list->add_option("--limit", hist_limit, "how many");
  hist_list->add_option("--format", hist_format, "text | json")->check(CLI::IsMember({"text", "json"}));
  auto* hist_show = hist->add_subcommand("show", "the stored report of one diagnosis");
  std::int64_t hist_id = 0;
  std::string show_format = "text";
  hist_show->add_option("id", hist_id)->required();
  hist_show->add_option("--format", show_format, "text | json")->check(CLI::IsMember({"text", "json"}));
  auto* hist_stats = hist->add_subcommand("stats", "failures counted by signature, kind or host");
  std::string hist_by = "signature";
  int hist_days = 7;
  hist_stats->add_option("--by", hist_by, "signature | kind | host")->check(CLI::IsMember({"signature", "kind", "host"}));
  hist_stats->add_option("--days", hist_days, "window in days");
  for (auto* c : {hist_list, hist_show, hist_stats})  // also after the subcommand: history list --history PATH
    c->add_option("--history", hist_path, "history database (default $XDG_DATA_HOME/firstfault/history.db)");

  auto* explain = app.add_subcommand("explain", "explain a failure signature (name or kind)");
  std::string explain_name;
  explain->add_option("name", explain_name)->required();

  auto* completion = app.add_subcommand("completion", "print a shell completion script (bash, zsh or fish)");
  std::string completion_shell;
  completion->add_option("shell", completion_shell, "bash | zsh | fish")->required()->check(CLI::IsMember({"bash", "zsh", "fish"}));
  auto* man = app.add_subcommand("man", "print the man page (roff)")->group("");

  try {
    // An unknown command gets a suggestion (CLI11 would only say that a subcommand is required).
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--kb") {
        ++i;
        continue;
      }
      if (!a.empty() && a[0] == '-') continue;
      std::vector<std::string> names;
      for (const auto* sub : app.get_subcommands({})) names.push_back(sub->get_name());
      if (std::find(names.begin(), names.end(), a) == names.end()) {
        auto near = ff::text::closest(a, names, 2);
        std::fprintf(stderr, "firstfault: unknown command '%s'%s (see firstfault --help)\n", ff::text::sanitize(a).c_str(),
                     near.empty() ? "" : (" - did you mean '" + near[0] + "'?").c_str());
        return kExitUsage;
      }
      break;
    }
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }

  if (completion->parsed()) {
    std::cout << ff::cli::completion_script(app, completion_shell);
    return 0;
  }
  if (man->parsed()) {
    std::cout << ff::cli::man_page(app, std::string("firstfault ") + FF_VERSION);
    return 0;
  }

  auto lib = load_kb(kb_dirs);
  if (!lib) {
    std::fprintf(stderr, "firstfault: knowledge base: %s\n", lib.error().message.c_str());
    return ff::exit_status(lib.error());
  }
  const auto& L = lib.value();

  if (diag->parsed()) {
    ff::pipeline::options opt;
    opt.ingest.max_line_bytes = max_line_kib << 10;
    opt.exact = exact;
    opt.learn_lines = learn_lines;
    opt.threads = threads;
    opt.reveal = reveal;
    if (!no_history) {  // the first failing host's real name reaches only the history's salted key
      std::string hp = history_path.empty() ? ff::history::default_path() : history_path;
      opt.host_keyer = [hp](const std::string& real) { return ff::history::host_key(hp, real); };
    }
    // A progress line on a terminal, once reading takes more than a second: bytes, inputs, rate.
    const bool show_progress = !quiet && isatty(2);
    const auto started = std::chrono::steady_clock::now();
    auto last_drawn = started;
    bool drawn = false;
    if (show_progress)
      opt.progress = [&](std::uint64_t bytes, std::size_t inputs) {
        auto now = std::chrono::steady_clock::now();
        double secs = std::chrono::duration<double>(now - started).count();
        if (secs < 1.0 || now - last_drawn < std::chrono::milliseconds(250)) return;
        last_drawn = now;
        drawn = true;
        std::fprintf(stderr, "\rfirstfault: read %.1f MB from %zu input(s), %.1f MB/s   ", static_cast<double>(bytes) / 1e6, inputs,
                     static_cast<double>(bytes) / 1e6 / secs);
      };
    auto mo = mask_options(mask_config, mask_rules, no_mask);
    if (!mo) {
      std::fprintf(stderr, "firstfault: %s\n", mo.error().message.c_str());
      return kExitUsage;
    }
    opt.mask = mo.value();
    auto run = ff::pipeline::diagnose(paths, L, opt);
    if (drawn) std::fprintf(stderr, "\r\033[K");  // clear the progress line before anything else is printed
    if (!run) {
      std::fprintf(stderr, "firstfault: %s\n", run.error().message.c_str());
      return ff::exit_status(run.error());
    }
    auto& r = run.value();
    // History: the recurrence note comes from earlier runs; a history problem never loses the diagnosis.
    std::optional<ff::history::store> hs;
    std::string hpath = history_path.empty() ? ff::history::default_path() : history_path;
    if (!no_history && r.any_readable) {
      auto h = ff::history::store::open(hpath);
      if (!h) std::fprintf(stderr, "firstfault: %s; the diagnosis is printed but not stored\n", h.error().message.c_str());
      else hs = std::move(h).value();
    }
    std::string hkey = r.initiating_host_key;
    if (hs && r.diag.verdict == "failure" && !hkey.empty())
      if (auto n = hs->recurrences(hkey, r.diag.kind, r.recurrence_days)) r.recurrences = n.value();
    if (!quiet)
      for (const auto& n : ff::report::note_lines(r.errors)) std::fprintf(stderr, "firstfault: %s\n", ff::text::sanitize(n).c_str());
    if (format == "brief" || brief) std::cout << ff::report::to_brief(r);
    else if (format == "json") std::cout << ff::report::to_json(r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    else if (format == "markdown") std::cout << ff::report::to_markdown(r);
    else if (format == "html") std::cout << ff::report::to_html(r);
    else std::cout << ff::report::to_terminal(r, {use_color(color)});
    if (!r.any_readable) std::fprintf(stderr, "firstfault: nothing readable in the inputs\n");
    if (reveal) {  // stderr, so that no report format (stdout, history) ever carries a real name
      if (r.revealed.empty()) std::fprintf(stderr, "firstfault: --reveal: no masked host names in this run\n");
      else std::fprintf(stderr, "firstfault: masked host names (this terminal only, never stored or sent):\n");
      for (const auto& [token, real] : r.revealed)
        std::fprintf(stderr, "  %s = %s\n", ff::text::sanitize(token).c_str(), ff::text::sanitize(real).c_str());
    }
    if (hs) {
      ff::history::entry e;
      for (const auto& i : r.inputs) e.inputs += (e.inputs.empty() ? "" : "; ") + i.path;
      e.verdict = r.diag.verdict;
      e.signature = r.diag.signature;
      e.kind = r.diag.kind;
      e.initiating_rank = r.diag.initiating_rank;
      e.initiating_host = r.diag.initiating_host.value_or("");
      e.host_key = hkey;
      e.report_json = ff::report::to_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      if (auto st = hs->add(e); !st)
        std::fprintf(stderr, "firstfault: %s; the diagnosis is printed but not stored\n", st.error().message.c_str());
    }
    return ff::report::exit_code(r);
  }

  if (watch->parsed()) return run_watch(L, {watch_paths, watch_from_start, watch_json, watch_no_history, watch_silence,
                                             watch_exec, watch_webhook, watch_metrics, watch_history, watch_run_for,
                                             watch_poll_ms, no_mask, mask_config, mask_rules});

  if (hist->parsed()) {
    auto h = ff::history::store::open(hist_path.empty() ? ff::history::default_path() : hist_path);
    if (!h) {
      std::fprintf(stderr, "firstfault: %s\n", h.error().message.c_str());
      return kExitUsage;
    }
    auto& hs = h.value();
    auto when = [](std::int64_t t) {
      std::time_t tt = static_cast<std::time_t>(t);
      std::tm tm{};
      gmtime_r(&tt, &tm);
      char b[32];
      std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%SZ", &tm);
      return std::string(b);
    };
    if (hist_list->parsed()) {
      auto rows = hs.list(hist_limit);
      if (!rows) { std::fprintf(stderr, "firstfault: %s\n", rows.error().message.c_str()); return kExitUsage; }
      if (hist_format == "json") {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& e : rows.value())
          j.push_back({{"id", e.id}, {"created_at", e.created_at}, {"source", e.source}, {"inputs", e.inputs},
                       {"verdict", e.verdict}, {"signature", e.signature}, {"kind", e.kind},
                       {"initiating_rank", e.initiating_rank ? nlohmann::json(*e.initiating_rank) : nlohmann::json(nullptr)},
                       {"initiating_host", e.initiating_host}});
        std::cout << j.dump(2) << "\n";
      } else {
        std::printf("%-5s %-20s  %-12s %-30s %-6s %-12s %s\n", "ID", "WHEN (UTC)", "VERDICT", "KIND", "RANK", "HOST", "INPUTS");
        for (const auto& e : rows.value()) {
          // inputs: the first path and how many more (the full list: --format json)
          std::string first = e.inputs.substr(0, e.inputs.find("; "));
          std::size_t more = 0;
          for (std::size_t p = e.inputs.find("; "); p != std::string::npos; p = e.inputs.find("; ", p + 2)) ++more;
          if (first.size() > 60) first = "..." + first.substr(first.size() - 57);
          if (more) first += " (+" + std::to_string(more) + " more)";
          std::printf("%-5lld %-20s  %-12s %-30s %-6s %-12s %s\n", static_cast<long long>(e.id), when(e.created_at).c_str(),
                      e.verdict.c_str(), e.kind.empty() ? "-" : e.kind.c_str(),
                      e.initiating_rank ? std::to_string(*e.initiating_rank).c_str() : "-",
                      e.initiating_host.empty() ? "-" : e.initiating_host.c_str(), ff::text::sanitize(first).c_str());
        }
        if (rows.value().empty()) std::printf("(no diagnoses stored yet)\n");
      }
      return 0;
    }
    if (hist_show->parsed()) {
      auto e = hs.get(hist_id);
      if (!e) { std::fprintf(stderr, "firstfault: %s\n", e.error().message.c_str()); return kExitUsage; }
      if (!e.value()) { std::fprintf(stderr, "firstfault: no diagnosis with id %lld\n", static_cast<long long>(hist_id)); return kExitUsage; }
      auto j = nlohmann::json::parse(e.value()->report_json, nullptr, false);
      if (show_format == "json") std::cout << j.dump(2) << "\n";
      else std::cout << "diagnosis " << hist_id << " of " << when(e.value()->created_at) << "\n\n" << ff::report::from_stored_json(j);
      return 0;
    }
    auto rows = hs.stats(hist_by, hist_days);
    if (!rows) { std::fprintf(stderr, "firstfault: %s\n", rows.error().message.c_str()); return kExitUsage; }
    std::printf("failures in the last %d days by %s:\n", hist_days, hist_by.c_str());
    for (const auto& c : rows.value()) std::printf("  %5lld  %s\n", static_cast<long long>(c.count), c.key.c_str());
    if (rows.value().empty())
      std::printf("  (none%s)\n", hist_by == "host" ? ": no stored failure named its first failing host" : "");
    return 0;
  }

  if (kb_lint->parsed()) {
    auto issues = ff::kb::lint(L);
    std::vector<std::string> produced;
    for (const auto& r : ff::correlate::rules::inference_rules())
      for (auto p : r.produces) produced.emplace_back(p);
    for (auto& i : ff::kb::lint_inferred(L, produced)) issues.push_back(std::move(i));
    for (const auto& i : issues) std::printf("%s: %s: %s\n", i.file.c_str(), i.name.c_str(), i.message.c_str());
    std::printf("%zu signatures, %zu problem(s)\n", L.signatures.size(), issues.size());
    return issues.empty() ? 0 : 1;
  }
  if (kb_test->parsed()) {
    auto fails = ff::kb::test_examples(L);
    for (const auto& dir : healthy_dirs) {  // Sigma's goodlog test: healthy logs give no finding
      auto run = ff::pipeline::diagnose({dir}, L, {});
      if (!run) {
        fails.push_back({"(healthy)", run.error().message});
        continue;
      }
      if (run.value().diag.verdict != "healthy")
        fails.push_back({run.value().diag.signature.empty() ? "(healthy)" : run.value().diag.signature,
                         dir + " is a healthy baseline but gives verdict " + run.value().diag.verdict});
    }
    for (const auto& f : fails) std::printf("FAIL %s: %s\n", f.name.c_str(), f.message.c_str());
    std::size_t n = 0;
    for (const auto& s : L.signatures) n += s.positive.size() + s.negative.size();
    std::printf("%zu examples in %zu signatures, %zu failure(s)\n", n, L.signatures.size(), fails.size());
    return fails.empty() ? 0 : 1;
  }
  if (kb_list->parsed()) {
    if (list_format == "json") {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& s : L.signatures)
        j.push_back({{"name", s.name}, {"id", s.id}, {"title", s.title}, {"kind", s.kind}, {"category", s.category},
                     {"role", s.role}, {"priority", s.priority}, {"status", s.status}, {"level", s.level},
                     {"examples", s.positive.size() + s.negative.size()}, {"fix", s.fix}, {"verify", s.verify},
                     {"references", s.references}});
      std::cout << j.dump(2) << "\n";
    } else {
      for (const auto& s : L.signatures)
        std::printf("%-48s %-8s %-32s %s\n", s.name.c_str(), s.role.c_str(), s.kind.c_str(), s.title.c_str());
    }
    return 0;
  }
  if (kb_search->parsed()) {
    auto lower = [](std::string s) {
      for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return s;
    };
    auto q = lower(search_q);
    // Ranked: a match in the name first, then the title, the kind or tags, then the description; then the
    // shorter name, causes before symptoms, higher priority ("watchdog" finds the watchdog timeout first).
    std::vector<std::pair<int, const ff::kb::signature*>> found;
    for (const auto& s : L.signatures) {
      std::string tags;
      for (const auto& t : s.tags) tags += " " + lower(t);
      int score = 0;
      if (lower(s.name).find(q) != std::string::npos) score += 8;
      if (lower(s.title).find(q) != std::string::npos) score += 4;
      if (lower(s.kind).find(q) != std::string::npos || tags.find(q) != std::string::npos) score += 2;
      if (lower(s.description).find(q) != std::string::npos) score += 1;
      if (score > 0) found.emplace_back(score, &s);
    }
    std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first > b.first;
      // the most general entry has the shortest name (watchdog_timeout before watchdog_thread_terminated)
      if (a.second->name.size() != b.second->name.size()) return a.second->name.size() < b.second->name.size();
      if (a.second->is_cause() != b.second->is_cause()) return a.second->is_cause();
      if (a.second->priority != b.second->priority) return a.second->priority > b.second->priority;
      return a.second->name < b.second->name;
    });
    for (const auto& [_, s] : found) std::printf("%-48s %s\n", s->name.c_str(), s->title.c_str());
    if (found.empty()) {
      std::fprintf(stderr, "firstfault: no signature mentions '%s'\n", ff::text::sanitize(search_q).c_str());
      return 1;
    }
    return 0;
  }
  if (kb_show->parsed() || explain->parsed()) {
    std::string n = kb_show->parsed() ? show_name : explain_name;
    std::vector<std::string> names;
    for (const auto& sig : L.signatures) names.push_back(sig.name);
    for (const auto& k : L.kinds) names.push_back(k.kind);
    auto near = ff::text::closest(n, names, 5);
    // Typed with other separators or case ("cuda-oom", "CUDA_OOM"): that one name, no question asked.
    if (!L.find(n) && !L.kind(n) && !near.empty() && ff::text::name_key(near[0]) == ff::text::name_key(n) &&
        (near.size() < 2 || ff::text::name_key(near[1]) != ff::text::name_key(n)))
      n = near[0];
    if (const auto* s = L.find(n)) {
      print_signature(*s);
      return 0;
    }
    if (const auto* k = L.kind(n)) {  // a failure kind: its meaning, then its signatures, strongest cause first
      std::vector<const ff::kb::signature*> of_kind;
      for (const auto& s : L.signatures)
        if (s.kind == n) of_kind.push_back(&s);
      std::stable_sort(of_kind.begin(), of_kind.end(), [](auto* a, auto* b) {
        return a->is_cause() != b->is_cause() ? a->is_cause() : a->priority > b->priority;
      });
      std::cout << "kind " << k->kind << " (" << k->category << ")\n  " << k->meaning << "\n\n";
      std::cout << "Signatures of this kind:\n";
      for (const auto* s : of_kind) std::printf("  %-48s %-8s %s\n", s->name.c_str(), s->role.c_str(), s->title.c_str());
      if (!of_kind.empty()) {
        std::cout << "\n";
        print_signature(*of_kind.front());
      }
      return 0;
    }
    std::string hint;
    for (const auto& c : near) hint += (hint.empty() ? "" : ", ") + c;
    std::fprintf(stderr, "firstfault: no signature or kind named '%s'%s\n", ff::text::sanitize(n).c_str(),
                 hint.empty() ? " (try: firstfault kb search WORD)" : ("; did you mean: " + hint + "?").c_str());
    return kExitUsage;
  }
  if (kb_export->parsed()) {
    if (!export_format.empty()) {
      if (export_dir.empty()) {
        std::fprintf(stderr, "firstfault: kb export --format %s needs an output directory\n", export_format.c_str());
        return kExitUsage;
      }
      auto pages = ff::encyclopedia::render_site(L, export_format == "html" ? ff::encyclopedia::format::html
                                                                          : ff::encyclopedia::format::markdown);
      for (const auto& p : pages) {
        std::filesystem::path out = std::filesystem::path(export_dir) / p.path;
        std::error_code ec;
        std::filesystem::create_directories(out.parent_path(), ec);
        std::ofstream f(out, std::ios::binary);
        if (!f || !(f << p.content)) {
          std::fprintf(stderr, "firstfault: %s: cannot write\n", out.string().c_str());
          return kExitUsage;
        }
      }
      std::printf("wrote %zu pages to %s (open %s/index.%s)\n", pages.size(), export_dir.c_str(), export_dir.c_str(),
                  export_format == "html" ? "html" : "md");
      return 0;
    }
    if (!export_patterns) {
      std::fprintf(stderr, "firstfault: kb export needs --patterns or --format markdown|html DIR\n");
      return kExitUsage;
    }
    for (const auto& s : L.signatures)
      for (const auto& p : s.fingerprints) std::cout << (export_ere ? to_ere(p) : p) << "\n";
    return 0;
  }
  return 0;
}

// No exception escapes main: every failure is one line on stderr and exit status 2.
int main(int argc, char** argv) {
  try {
    return run_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "firstfault: error: %s\n", ff::text::sanitize(e.what()).c_str());
  } catch (...) {
    std::fprintf(stderr, "firstfault: error: unexpected failure\n");
  }
  return kExitUsage;
}
