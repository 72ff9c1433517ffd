// Terminal, JSON and Markdown renderers.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <map>

#include "firstfault/report.hpp"
#include "firstfault/text.hpp"
#include "firstfault/timeline.hpp"

namespace ff::report {

namespace {

// The renderers are where the diagnosis's enums become words (correlate::to_string).
std::string name(correlate::verdict v) { return std::string(correlate::to_string(v)); }
std::string name(correlate::confidence c) { return std::string(correlate::to_string(c)); }

// "ranks 0-3 (4x) logs/x.log:12" for a group of lines that look wrong.
std::string suspicious_where(const correlate::suspicious_line& s) {
  std::string w;
  if (s.ranks.size() > 1) w = "ranks " + text::rank_ranges(s.ranks) + " ";
  else if (s.rank) w = "rank " + std::to_string(*s.rank) + " ";
  if (s.count > 1) w += "(" + std::to_string(s.count) + "x) ";
  return w + s.source + ":" + std::to_string(s.line_no);
}

struct paint {
  bool on;
  std::string operator()(const char* code, const std::string& s) const {
    return on ? fmt::format("\x1b[{}m{}\x1b[0m", code, s) : s;
  }
};

// The report's first three lines, the same for a live run and a stored report (history show): what
// failed, where first, and what decided it.
struct head_facts {
  std::string verdict, kind, category, confidence, title, signature, rule, initiating_rule;
  std::string rank, host;  // "" when unknown
  std::string action;      // action_line() of the report's action; "" when it has none (an old stored report)
};

// "restart-excluding-hosts (gpu-node-7) - why": the action in one line, for the head of every text form.
std::string action_line(const std::string& kind, const std::vector<std::string>& hosts, const std::string& why) {
  std::string o = kind;
  if (!hosts.empty()) o += " (" + fmt::format("{}", fmt::join(hosts, ", ")) + ")";
  if (!why.empty()) o += " - " + why;
  return o;
}
std::string action_line(const action::action& a) { return action_line(std::string(action::to_string(a.what)), a.hosts, a.why); }

nlohmann::json action_json(const action::action& a) {
  return {{"kind", action::to_string(a.what)}, {"hosts", a.hosts}, {"retryable", a.retryable},
          {"why", a.why},                       {"rule", a.rule},   {"source", a.source}};
}

void head_lines(const head_facts& h, const paint& p, const std::function<void(const std::string&)>& line) {
  std::string first = h.rank.empty() ? std::string("rank unknown") : p("1;31", "rank " + h.rank);
  if (!h.host.empty()) first += " on host " + h.host;
  if (h.verdict == "undetermined") {
    // (correlator set_verdict: nothing looked wrong, the log stops in set-up with no progress and no end)
    const bool stopped = h.initiating_rule == correlate::kLogStopsInStartup;
    line(p("1;33", "verdict: undetermined") +
         (stopped ? " - nothing read looks wrong, but the log stops before any progress or end" : " - something failed, but no signature explains it"));
    line("first failing: " + first);
    line("decided by: " + (h.initiating_rule.empty() ? std::string("no rule (see the lines below)") : h.initiating_rule));
    if (!h.action.empty()) line(p("1", "action: ") + h.action);
    return;
  }
  line(p("1;31", "verdict: failure") + fmt::format("  [{} / {}]  confidence: {}", h.kind, h.category, h.confidence));
  line("first failing: " + first + "  -  " + h.title);
  line("decided by: " + h.signature + (h.rule.empty() ? "" : " (rule " + h.rule + ")") +
       (h.initiating_rule.empty() ? "" : "; rank: " + h.initiating_rule));
  if (!h.action.empty()) line(p("1", "action: ") + h.action);
}

std::string where(const correlate::evidence& e) {
  std::string s = e.source.empty() ? "" : e.source + (e.line_no ? ":" + std::to_string(e.line_no) : "");
  std::vector<std::string> parts;
  if (e.rank) parts.push_back("rank " + std::to_string(*e.rank));
  if (e.host) parts.push_back("host " + *e.host);
  if (!e.ts.empty()) parts.push_back(e.ts);
  std::string meta;
  for (auto& p : parts) meta += (meta.empty() ? "" : ", ") + p;
  if (!meta.empty()) s += (s.empty() ? "" : " ") + std::string("(") + meta + ")";
  return s;
}

// The report's "slow_ranks" (stragglers.hpp): one object per slow rank, slowest first.
nlohmann::json slow_ranks_json(const std::vector<correlate::slow_rank>& slow) {
  auto out = nlohmann::json::array();
  auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  for (const auto& s : slow)
    out.push_back({{"rank", s.rank}, {"local", s.local}, {"attempt", opt(s.attempt)}, {"host", opt(s.host)},
                   {"seconds_per_step", s.seconds_per_step}, {"others_seconds_per_step", s.others_seconds_per_step},
                   {"steps", s.steps}, {"last_step", opt(s.last_step)}, {"ranks_compared", s.ranks_compared},
                   {"text", s.describe()}});
  return out;
}

std::string clip(const std::string& s, std::size_t n) { return s.size() <= n ? s : std::string(text::prefix_utf8(s, n)) + "..."; }

nlohmann::json ev_json(const correlate::evidence& e) {
  nlohmann::json j = {{"file", e.source}, {"line", e.line_no}, {"text", e.text}};
  j["rank"] = e.rank ? nlohmann::json(*e.rank) : nlohmann::json(nullptr);
  j["host"] = e.host ? nlohmann::json(*e.host) : nlohmann::json(nullptr);
  j["time"] = e.ts.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.ts);
  return j;
}

std::string count_of(std::size_t n, const std::string& noun);

// The report's "outcome" and "ranks" (correlate::run_outcome, rank_story): how the run ended, each rank's story.
nlohmann::json outcome_json(const correlate::run_outcome& o) {
  return {{"state", std::string(correlate::to_string(o.what))}, {"how", o.how}, {"line", o.line ? ev_json(*o.line) : nlohmann::json(nullptr)},
          {"clocks", o.clocks.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.clocks)}};
}

nlohmann::json ranks_json(const std::vector<correlate::rank_story>& stories) {
  auto out = nlohmann::json::array();
  auto ev = [](const std::optional<correlate::evidence>& e) { return e ? ev_json(*e) : nlohmann::json(nullptr); };
  for (const auto& s : stories)
    out.push_back({{"rank", s.rank}, {"host", s.host ? nlohmann::json(*s.host) : nlohmann::json(nullptr)}, {"lines", s.lines},
                   {"first", ev(s.first)}, {"last", ev(s.last)},
                   {"first_time", s.first_time.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.first_time)},
                   {"last_time", s.last_time.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.last_time)},
                   {"last_step", s.last_step ? nlohmann::json(*s.last_step) : nlohmann::json(nullptr)}, {"last_step_at", ev(s.last_step_at)},
                   {"errors", s.errors}, {"first_error", ev(s.first_error)},
                   {"exit", s.exit.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.exit)},
                   {"clock", s.clock.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.clock)}});
  return out;
}

// The ranks a short report lists (at most `keep`, in rank order): every rank when there are that few; else the
// first failing rank, the ranks with errors or a failed exit (earliest error first, by the order of the
// stories when times do not compare), and the rank whose last line came first (the first to stop).
std::vector<const correlate::rank_story*> ranks_to_show(const correlate::diagnosis& d, std::size_t keep) {
  std::vector<const correlate::rank_story*> out;
  if (d.ranks.size() <= keep) {
    for (const auto& s : d.ranks) out.push_back(&s);
    return out;
  }
  auto add = [&](const correlate::rank_story* s) {
    if (s && out.size() < keep && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  };
  for (const auto& s : d.ranks)
    if (d.initiating_rank && s.rank == *d.initiating_rank) add(&s);
  std::vector<const correlate::rank_story*> bad;
  for (const auto& s : d.ranks)
    if (s.errors || (!s.exit.empty() && s.exit.rfind("exit code 0 ", 0) != 0)) bad.push_back(&s);
  // Earliest first error first, by wall-clock times (their text sorts as the time does); the others after, in
  // rank order.
  auto wall = [](const correlate::rank_story* x) { return x->first_error && !x->first_error->ts.empty() && x->first_error->ts[0] != '+'; };
  auto timed_end = std::stable_partition(bad.begin(), bad.end(), wall);
  std::stable_sort(bad.begin(), timed_end, [](const auto* a, const auto* b) { return a->first_error->ts < b->first_error->ts; });
  for (const auto* s : bad) add(s);
  const correlate::rank_story* first_stop = nullptr;  // the earliest last time on the wall clock
  for (const auto& s : d.ranks)
    if (s.clock == "wall" && !s.last_time.empty() && (!first_stop || s.last_time < first_stop->last_time)) first_stop = &s;
  add(first_stop);
  std::sort(out.begin(), out.end(), [](const auto* a, const auto* b) { return a->rank < b->rank; });
  return out;
}

// One rank's story in one line: "rank 1 (host node1): 9 lines, 16:21:38.451 to 16:21:41.950; last step 4
// (16:21:41.950); 3 errors, the first at node1.log:9 (16:21:41.950); exit code 1 (torchelastic)".
std::string story_line(const correlate::rank_story& s, const std::string& drop_date) {
  auto t = [&](const std::string& ts) { return !drop_date.empty() && ts.rfind(drop_date, 0) == 0 ? ts.substr(drop_date.size()) : ts; };
  std::string o = "rank " + std::to_string(s.rank) + (s.host ? " (host " + *s.host + ")" : "") + ": " + count_of(s.lines, "line");
  if (!s.first_time.empty() && !s.last_time.empty()) o += ", times " + t(s.first_time) + " to " + t(s.last_time);
  if (s.last_step) o += "; last step " + std::to_string(*s.last_step) + (s.last_step_at && !s.last_step_at->ts.empty() ? " (" + t(s.last_step_at->ts) + ")" : "");
  if (s.errors && s.first_error)
    o += "; " + count_of(static_cast<std::size_t>(s.errors), "error") + ", the first at " + s.first_error->source + ":" + std::to_string(s.first_error->line_no) +
         (s.first_error->ts.empty() ? "" : " (" + t(s.first_error->ts) + ")");
  if (!s.exit.empty()) o += "; " + s.exit;
  return o;
}

// "outcome: ended well - a launcher ... (logs/x.log:12)": the healthy report's line on how the run ended.
std::string outcome_line(const correlate::run_outcome& o) {
  return "outcome: " + std::string(correlate::to_string(o.what)) + " - " + o.how + (o.line ? " (" + where(*o.line) + ")" : "");
}

// The date ("YYYY-MM-DD ") every time of the listed stories shares, or "": rows then print only the time of day.
std::string shared_date(const std::vector<const correlate::rank_story*>& rows) {
  std::string date;
  bool any = false;
  auto see = [&](const std::optional<correlate::evidence>& e) {
    if (!e || e->ts.empty()) return true;
    if (e->ts.size() < 11 || e->ts[4] != '-' || e->ts[10] != ' ') return false;
    std::string d = e->ts.substr(0, 11);
    if (any && d != date) return false;
    date = d;
    any = true;
    return true;
  };
  auto see_time = [&](const std::string& ts) { return see(correlate::evidence{"", "", ts, 0, std::nullopt, std::nullopt}); };
  for (const auto* s : rows)
    if (!see_time(s->first_time) || !see_time(s->last_time) || !see(s->last_step_at) || !see(s->first_error)) return "";
  return date;
}

// Log text inside a Markdown code fence must not be able to close the fence.
std::string unfence(std::string s) {
  for (std::size_t p = s.find("```"); p != std::string::npos; p = s.find("```", p)) s.replace(p, 3, "'''");
  return s;
}

// Log-derived text in Markdown prose: no code spans, images, links or HTML can be injected.
std::string md_text(std::string s) {
  std::string o;
  for (char c : s) {
    if (c == '`') o += '\'';
    else if (c == '<') o += "&lt;";
    else if (c == '[' || c == ']' || c == '*' || c == '_' || c == '!') { o += '\\'; o += c; }
    else o += c;
  }
  return o;
}

// Log-derived text in a Markdown table cell: md_text, and a '|' does not end the cell.
std::string md_cell(const std::string& t) {
  std::string o;
  for (char c : md_text(t)) o += c == '|' ? std::string("\\|") : std::string(1, c);
  return o;
}

// "1 line", "2 lines", "1 address", "3 addresses".
std::string count_of(std::size_t n, const std::string& noun) {
  std::string word = noun;
  if (n != 1) word += (!noun.empty() && noun.back() == 's') ? "es" : "s";
  return std::to_string(n) + " " + word;
}

// The masker's kinds (mask.hpp) in words; several kinds of one thing (the user-name rules) add up under one
// noun. A kind with no noun here (a secret format, a team rule) is named as it is.
std::string mask_summary(const pipeline::run& r) {
  if (!r.masked) return "masking: off (--no-mask)";
  if (r.mask_counts.empty()) return r.redacted ? "masking: on (--redact), nothing to mask" : "masking: on, nothing to mask";
  static const std::map<std::string, std::string> nouns = {
      {"hostname", "host name"},       {"ipv4", "IPv4 address"},      {"ipv6", "IPv6 address"},
      {"mac", "MAC address"},          {"email", "e-mail address"},   {"home_user", "user name"},
      {"user_assignment", "user name"}, {"user_phrase", "user name"}, {"user_option", "user name"},
      {"user_at_host", "user name"},   {"private_key", "private key"}, {"secret_continued", "wrapped secret"},
      {"over_table_bound", "value past the table bound"}};
  std::vector<std::pair<std::string, std::size_t>> by_noun;
  for (const auto& [k, n] : r.mask_counts) {
    auto it = nouns.find(k);
    std::string noun = it != nouns.end() ? it->second : k + " value";
    auto at = std::find_if(by_noun.begin(), by_noun.end(), [&](const auto& x) { return x.first == noun; });
    if (at != by_noun.end()) at->second += n;
    else by_noun.emplace_back(noun, n);
  }
  std::string s = "masked:";
  for (const auto& [noun, n] : by_noun) s += " " + count_of(n, noun) + ",";
  s.pop_back();
  return s + (r.redacted ? " (values never shown; --redact: hosts, addresses and users too)"
                         : " (values never shown; host names and addresses are shown: --redact to mask them too)");
}

}  // namespace

// The stylesheet of every HTML page: the report, the web page and the encyclopedia. It holds down to a
// 400 px window with nothing wider than the window: long words (log lines, paths) break anywhere, tables
// scroll in their own box (.table-box), the timeline in its own (.timeline-box), the navigation wraps,
// form controls take the width they are given, and below 40rem the facts list has one column.
const std::string& html_css() {
  static const std::string css =
      ":root{--fg:#1d2330;--muted:#5a6272;--line:#d8dce3;--bg2:#f5f6f8;--red:#c0161b;--amber:#9a5b00;--link:#1a4f9c}"
      "*,*::before,*::after{box-sizing:border-box}"
      "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;color:var(--fg);max-width:78rem;margin:1rem auto 1.5rem;padding:0 1rem;"
      "line-height:1.45;overflow-wrap:anywhere}"
      "h1{font-size:1.5rem;margin:.2rem 0}h2{font-size:1.1rem;margin:1.6rem 0 .5rem;border-bottom:1px solid var(--line);padding-bottom:.2rem}"
      "h3{font-size:1rem;margin:1.2rem 0 .3rem}"
      "pre,code{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:.85rem}"
      "pre{background:var(--bg2);padding:.6rem;white-space:pre-wrap;border-radius:4px;max-width:100%}"
      "img,svg{max-width:100%}.timeline-box svg{max-width:none}"
      ".table-box{overflow-x:auto;max-width:100%;margin:.5rem 0}"
      "table{border-collapse:collapse;width:100%;overflow-wrap:break-word}td,th{border:1px solid var(--line);padding:.3rem .5rem;text-align:left;vertical-align:top}"
      "th{background:var(--bg2)}.verdict{display:inline-block;padding:.15rem .6rem;border-radius:3px;font-weight:600;color:#fff}"
      ".v-failure{background:var(--red)}.v-undetermined{background:#b7791f}.v-healthy{background:#2f7d32}"
      ".facts{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.2rem 1rem;margin:.8rem 0}.facts dt{color:var(--muted)}.facts dd{margin:0}"
      ".timeline-box{overflow-x:auto;border:1px solid var(--line);border-radius:4px;padding:.4rem;background:#fff}"
      ".ev-line{display:block;margin-bottom:.4rem}.muted{color:var(--muted)}a{color:var(--link)}"
      "nav.top{display:flex;flex-wrap:wrap;gap:.2rem 1.2rem;align-items:baseline;padding:0 0 .6rem;margin-bottom:1rem;border-bottom:1px solid var(--line)}"
      "input,button,textarea{font:inherit;max-width:100%}"
      "form textarea{display:block;width:100%;min-height:14rem;font-family:ui-monospace,monospace;font-size:.85rem}"
      "button{padding:.4rem 1.1rem;border:1px solid var(--link);border-radius:4px;background:var(--link);color:#fff;cursor:pointer}"
      "button.quiet{background:#fff;color:var(--link)}"
      ".search{display:flex;flex-wrap:wrap;gap:.5rem;margin:.5rem 0 1rem}.search input{flex:1 1 12rem;min-width:0;padding:.35rem .5rem}"
      ".drops{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(17rem,100%),1fr));gap:1rem;margin:1rem 0}"
      ".drop{position:relative;display:block}"
      ".drop input{display:block;width:100%;min-height:8.5rem;padding:4.4rem 1rem 1rem;border:2px dashed #8a94a6;border-radius:6px;"
      "background:var(--bg2);color:var(--muted);text-align:center;cursor:pointer}"
      ".drop input:hover,.drop input:focus-visible{border-color:var(--link);background:#eef3fb}"
      ".drop-say{position:absolute;top:1rem;left:1rem;right:1rem;text-align:center;pointer-events:none}"
      ".err{background:#fdecea;border:1px solid #f5c2c0;padding:.5rem;border-radius:4px}"
      ".ctx .hit{background:#fff3c4;display:block}.ctx .ln{color:var(--muted);display:inline-block;min-width:4rem;user-select:none}"
      "@media (max-width:40rem){.facts{grid-template-columns:minmax(0,1fr);gap:0}.facts dd{margin-bottom:.5rem}h1{font-size:1.3rem}"
      ".ctx .ln{min-width:2.8rem}"
      // a table of class cards becomes one box per row, each cell on its line after its column's name (data-label)
      "table.cards,table.cards tbody,table.cards tr,table.cards td{display:block;width:100%}table.cards tr:first-child{display:none}"
      "table.cards tr{border:1px solid var(--line);border-radius:4px;margin:0 0 .7rem;padding:.3rem .6rem}"
      "table.cards td{border:0;padding:.1rem 0}table.cards td[data-label]::before{content:attr(data-label) \": \";color:var(--muted)}}";
  return css;
}

namespace {

// "<h2>title</h2><ul id=...>" with one escaped item per entry (in <code> when `code`); no heading when title is "".
std::string html_list(const std::string& title, const std::string& id, const std::vector<std::string>& items, bool code) {
  std::string o = title.empty() ? "" : "<h2>" + title + "</h2>";
  o += id.empty() ? "<ul>" : "<ul id=\"" + id + "\">";
  for (const auto& i : items) o += code ? "<li><code>" + text::html_escape(i) + "</code></li>" : "<li>" + text::html_escape(i) + "</li>";
  return o + "</ul>\n";
}

std::string link_or_text(const html_options& opt, const std::string& source, std::uint64_t line_no, const std::string& label) {
  std::string url = opt.line_link ? opt.line_link(source, line_no) : std::string();
  if (url.empty()) return text::html_escape(label);
  return "<a class=\"loc\" href=\"" + text::html_escape(url) + "\">" + text::html_escape(label) + "</a>";
}

}  // namespace

// The lead the correlator gives a group whose every line was survived (correlator.cpp).
constexpr std::string_view kSurvivedLead = "also seen, survived: ";

// A survived group's reason without the lead, where the section already says "survived".
std::string survived_reason(const std::string& explanation) {
  std::string_view why = explanation;
  if (why.starts_with(kSurvivedLead)) why.remove_prefix(kSurvivedLead.size());
  return std::string(why);
}

std::string to_html_body(const pipeline::run& r, const html_options& opt) {
  const auto esc = [](const std::string& s) { return text::html_escape(s); };
  const auto& d = r.diag;
  std::string o;
  std::string v = name(d.verdict);
  o += "<header><span class=\"verdict v-" + esc(v) + "\" id=\"verdict\">" + esc(v) + "</span>\n";
  // A healthy verdict beside lines that looked wrong (all survived) says the run went on past them.
  const bool healthy = d.verdict == correlate::verdict::healthy;
  const bool survived_any = healthy && (!d.collateral.empty() || !d.suspicious.empty());
  o += "<h1>" + (d.verdict == correlate::verdict::failure ? esc(d.title)
                 : survived_any                          ? std::string("The run went on past every line that looked wrong")
                 : healthy                               ? std::string("Nothing in these logs looks like a failure")
                                                         : std::string("Something failed, and no signature explains it")) +
       "</h1></header>\n<dl class=\"facts\">";
  if (d.verdict == correlate::verdict::failure) {
    o += "<dt>kind</dt><dd><code id=\"kind\">" + esc(d.kind) + "</code> (" + esc(d.category) + "), confidence " + esc(name(d.confidence)) + "</dd>";
    o += "<dt>root cause</dt><dd>" + esc(d.summary);
    for (const auto& f : d.facts) o += "<br><code>" + esc(clip(f, 400)) + "</code>";
    o += "</dd>";
  }
  if (d.verdict != correlate::verdict::healthy)
    o += "<dt>action</dt><dd><b id=\"action\">" + esc(std::string(action::to_string(r.action.what))) + "</b>" +
         (r.action.hosts.empty() ? "" : " excluding <code id=\"action-hosts\">" + esc(fmt::format("{}", fmt::join(r.action.hosts, " "))) + "</code>") +
         " <span class=\"muted\">" + esc(r.action.why) + "</span></dd>";
  if (!healthy)
    o += "<dt>first failing rank</dt><dd><b id=\"initiating-rank\">" +
       (d.initiating_rank ? std::to_string(*d.initiating_rank) : std::string("unknown")) + "</b>" +
       (d.initiating_host ? " on host <b>" + esc(*d.initiating_host) + "</b>" : "") + " <span class=\"muted\">(" + esc(d.initiating_rule) + ")</span></dd>";
  if (!d.signature.empty())
    o += "<dt>decided by</dt><dd><code>" + esc(d.signature) + "</code>" + (d.rule.empty() ? "" : " (rule " + esc(d.rule) + ")") + "</dd>";
  if (!d.launcher_note.empty()) o += "<dt>launcher</dt><dd>" + esc(d.launcher_note) + "</dd>";
  for (const auto& s : d.slow_ranks) o += "<dt>slow rank</dt><dd class=\"slow-rank\">" + esc(s.describe()) + "</dd>";
  o += "<dt>run ended</dt><dd id=\"outcome\">" + esc(std::string(correlate::to_string(d.outcome.what)) + " - " + d.outcome.how) +
       (d.outcome.line ? " " + link_or_text(opt, d.outcome.line->source, d.outcome.line->line_no, where(*d.outcome.line)) : "") +
       (d.outcome.clocks.empty() ? "" : "<br><span class=\"muted\">clocks: " + esc(d.outcome.clocks) + "</span>") + "</dd>";
  if (r.recurrences && *r.recurrences > 0)
    o += fmt::format("<dt>history</dt><dd>the same kind on the same host {} time(s) in the last {} days</dd>", *r.recurrences, r.recurrence_days);
  o += fmt::format("<dt>read</dt><dd>{} line(s), {} input(s)</dd></dl>\n", r.total_lines, r.inputs.size());
  if (!r.timeline.empty())
    o += "<h2>Timeline</h2>\n<div class=\"timeline-box\" id=\"timeline\">" + timeline::to_svg(r.timeline) + "</div>\n";
  if (!d.evidence_lines.empty()) {
    o += "<h2>Evidence</h2><pre id=\"evidence\">";
    for (const auto& e : d.evidence_lines)
      o += "<span class=\"ev-line\">" + link_or_text(opt, e.source, e.line_no, where(e)) + "\n    " + esc(e.text) + "</span>";
    o += "</pre>\n";
  }
  if (auto rows = ranks_to_show(d, 16); !healthy && !rows.empty()) {
    o += fmt::format("<h2>Ranks</h2><p class=\"muted\">{} of {} ranks: the first failing rank, the ranks with errors, the first to stop.</p>", rows.size(), d.ranks_total) +
         "<div class=\"table-box\"><table id=\"ranks\" class=\"cards\"><tr><th>rank</th><th>host</th><th>lines</th><th>first time</th><th>last time</th><th>last line</th><th>last step</th><th>errors</th><th>exit</th></tr>\n";
    auto dash = [&](const std::string& v) { return v.empty() ? std::string("-") : esc(v); };
    for (const auto* st : rows) {
      o += "<tr><td data-label=\"rank\">" + std::to_string(st->rank) + "</td><td data-label=\"host\">" + dash(st->host.value_or("")) +
           "</td><td data-label=\"lines\">" + std::to_string(st->lines) + "</td><td data-label=\"first time\">" + dash(st->first_time) +
           "</td><td data-label=\"last time\">" + dash(st->last_time) + "</td><td data-label=\"last line\">" +
           (st->last ? link_or_text(opt, st->last->source, st->last->line_no, st->last->source + ":" + std::to_string(st->last->line_no)) +
                           "<br><code>" + esc(clip(st->last->text, 200)) + "</code>"
                     : "") +
           "</td><td data-label=\"last step\">" + (st->last_step ? std::to_string(*st->last_step) : "-") + "</td><td data-label=\"errors\">" +
           (st->errors && st->first_error ? std::to_string(st->errors) + ", first " +
                                                link_or_text(opt, st->first_error->source, st->first_error->line_no,
                                                             st->first_error->source + ":" + std::to_string(st->first_error->line_no)) +
                                                (st->first_error->ts.empty() ? "" : " " + esc(st->first_error->ts))
                                          : "-") +
           "</td><td data-label=\"exit\">" + dash(st->exit) + "</td></tr>\n";
    }
    o += "</table></div>\n";
  }
  if (!d.collateral.empty()) {
    o += healthy ? "<h2>Survived</h2><p class=\"muted\">Lines that look like failures, which the run went on past.</p>"
                   "<div class=\"table-box\"><table id=\"collateral\" class=\"cards\"><tr><th>ranks</th><th>error</th><th>lines</th><th>why it is not the cause</th><th>example</th></tr>\n"
                 : "<h2>Collateral</h2><p class=\"muted\">Errors on the other ranks that followed from the root cause.</p>"
                   "<div class=\"table-box\"><table id=\"collateral\" class=\"cards\"><tr><th>ranks</th><th>error</th><th>lines</th><th>why it is collateral</th><th>example</th></tr>\n";
    for (const auto& g : d.collateral)
      o += "<tr><td data-label=\"ranks\">" + esc(g.ranks.empty() ? "-" : text::rank_ranges(g.ranks)) + "</td><td>" + esc(g.title) +
           "</td><td data-label=\"lines\">" + std::to_string(g.count) + "</td><td>" + esc(healthy ? survived_reason(g.explanation) : g.explanation) + "</td><td>" +
           link_or_text(opt, g.example.source, g.example.line_no, g.example.source + ":" + std::to_string(g.example.line_no)) +
           "<br><code>" + esc(clip(g.example.text, 300)) + "</code></td></tr>\n";
    o += "</table></div>\n";
  }
  if (d.verdict == correlate::verdict::failure) {
    o += html_list("Fix", "fix", d.fix, false);
    for (const auto& c : d.fix_code) o += "<p>" + esc(c.stack) + ":</p><pre>" + esc(c.code) + "</pre>\n";
    o += html_list("Verify", "verify", d.verify, true);
    if (!d.verify_where.empty()) o += "<p class=\"muted\">where</p>" + html_list("", "", d.verify_where, true);
    o += html_list("Confirm", "confirm", d.confirm, false);
    if (!d.references.empty()) o += html_list("References", "", d.references, false);
  }
  if (!d.next_steps.empty()) o += html_list("Next steps", "next-steps", d.next_steps, false);
  if (!d.alternatives.empty()) {
    o += "<h2>Other causes seen</h2><ul>";
    for (const auto& a : d.alternatives)
      o += "<li>" + esc(a.title) + " <code>" + esc(a.kind) + "</code> - " +
           link_or_text(opt, a.example.source, a.example.line_no, where(a.example)) + "</li>";
    o += "</ul>\n";
  }
  if (!d.suspicious.empty()) {
    // A healthy report lists only lines the run went on past (correlate::rank_suspicious), each with why.
    o += std::string(d.verdict == correlate::verdict::healthy ? "<h2>Lines the run went on past</h2>" : "<h2>Lines that look wrong</h2>") +
         "<pre id=\"suspicious\">";
    for (const auto& s2 : d.suspicious)
      o += link_or_text(opt, s2.source, s2.line_no, suspicious_where(s2)) + " " + esc(s2.text) +
           (s2.survived.empty() ? "" : " <em>(survived: " + esc(s2.survived) + ")</em>") + "\n";
    o += "</pre>\n";
  }
  auto notes = note_lines(r.errors);
  if (!notes.empty()) {
    o += "<h2>Inputs</h2><ul id=\"notes\">";
    for (const auto& n : notes) o += "<li>" + esc(n) + "</li>";
    o += "</ul>\n";
  }
  o += "<p><small class=\"muted\">" + esc(mask_summary(r)) + "</small></p>\n";
  return o;
}

std::string to_html(const pipeline::run& r, const html_options& opt) {
  std::string nonce = opt.nonce.empty() ? std::string() : " nonce=\"" + text::html_escape(opt.nonce) + "\"";
  std::string o = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">"
                  "<title>firstfault: " + text::html_escape(name(r.diag.verdict)) + (r.diag.verdict == correlate::verdict::failure ? " - " + text::html_escape(r.diag.title) : "") +
                  "</title><style" + nonce + ">" + html_css() + "</style></head><body>\n";
  o += opt.header;
  o += to_html_body(r, opt);
  o += "<p><small class=\"muted\">firstfault report; every log text in it is masked and escaped.</small></p></body></html>\n";
  return o;
}

std::string to_html(const pipeline::run& r) { return to_html(r, html_options{}); }

std::vector<std::string> attempt_lines(const correlate::diagnosis& d) {
  std::vector<std::string> out;
  if (d.attempts.empty()) return out;
  out.push_back("");
  std::size_t total = std::max(d.attempts_total, d.attempts.size());
  out.push_back(fmt::format("RESTARTS  the logs hold {} torchrun attempts; the verdict above is attempt {}'s, the one that ended the job",
                            total, d.attempts.back().attempt));
  for (std::size_t i = 0; i < d.attempts.size(); ++i) {
    const auto& a = d.attempts[i];
    if (i > 0 && total > d.attempts.size() && i == d.attempts.size() / 2)
      out.push_back(fmt::format("  ... {} attempts in between not shown", total - d.attempts.size()));
    std::string what = a.verdict == correlate::verdict::failure ? a.kind + ": " + a.title : name(a.verdict);
    std::string who = a.initiating_rank ? "rank " + std::to_string(*a.initiating_rank) : "rank unknown";
    out.push_back(fmt::format("  attempt {}: {}, first failing {}", a.attempt, what, who));
    if (a.first) out.push_back("    " + where(*a.first) + "  " + clip(a.first->text, 200));
  }
  return out;
}

std::vector<std::string> note_lines(const std::vector<ingest::input_error>& errors, std::size_t keep) {
  std::map<std::string, std::size_t> per_reason;
  for (const auto& e : errors) ++per_reason[e.reason];
  std::vector<std::string> out;
  std::map<std::string, std::size_t> shown;
  for (const auto& e : errors) {
    std::size_t n = per_reason[e.reason];
    std::size_t& k = shown[e.reason];
    // An empty file is no evidence either way (torchrun leaves an empty stdout.log per rank): one line for all.
    if (e.reason == "empty file" && n > 1) {
      if (k++ == 0) out.push_back(fmt::format("{} empty files skipped, e.g. {}", n, e.path));
      continue;
    }
    if (n <= keep + 1 || k < keep) out.push_back(e.path + ": " + e.reason);
    else if (k == keep) out.push_back(fmt::format("{} more input(s): {}", n - keep, e.reason));
    ++k;
  }
  return out;
}

namespace {
// The action line of a stored report, or "" for one stored before reports had an action.
std::string stored_action(const nlohmann::json& j) {
  if (!j.contains("action") || !j["action"].is_object()) return "";
  const auto& a = j["action"];
  auto str = [&a](const char* k) { return a.contains(k) && a[k].is_string() ? a[k].get<std::string>() : std::string(); };
  std::vector<std::string> hosts;
  if (a.contains("hosts") && a["hosts"].is_array())
    for (const auto& h : a["hosts"])
      if (h.is_string()) hosts.push_back(h.get<std::string>());
  return str("kind").empty() ? "" : action_line(str("kind"), hosts, str("why"));
}
}  // namespace

std::string from_stored_json(const nlohmann::json& j) {
  // Reads only what to_json() writes; a field that is missing or of another type is left out.
  auto str = [](const nlohmann::json& o, const char* k) {
    return o.is_object() && o.contains(k) && o[k].is_string() ? o[k].get<std::string>() : std::string();
  };
  auto num = [](const nlohmann::json& o, const char* k) {
    return o.is_object() && o.contains(k) && o[k].is_number_integer() ? std::to_string(o[k].get<long long>()) : std::string();
  };
  auto list = [](const nlohmann::json& o, const char* k) {
    std::vector<std::string> out;
    if (o.is_object() && o.contains(k) && o[k].is_array())
      for (const auto& x : o[k])
        if (x.is_string()) out.push_back(x.get<std::string>());
    return out;
  };
  std::string o;
  auto line = [&o](const std::string& s) { o += text::sanitize(s) + "\n"; };
  const std::string verdict = str(j, "verdict");
  const nlohmann::json rc = j.contains("root_cause") ? j["root_cause"] : nlohmann::json::object();
  const head_facts head{verdict,           str(rc, "kind"),  str(rc, "category"), str(rc, "confidence"), str(rc, "title"),
                        str(rc, "signature"), str(rc, "rule"), str(j, "initiating_rule"), num(j, "initiating_rank"),
                        str(j, "initiating_host"), stored_action(j)};
  if (verdict == "failure" || verdict == "undetermined") head_lines(head, paint{false}, line);
  else line("verdict: " + (verdict.empty() ? std::string("unknown") : verdict));
  if (verdict == "failure") {
    line("");
    line("ROOT CAUSE  " + str(rc, "title"));
    if (auto sum = str(rc, "summary"); !sum.empty()) line("  " + sum);
    for (const auto& f : list(rc, "facts")) line("  " + std::string(text::prefix_utf8(f, 400)));
    if (rc.contains("evidence") && rc["evidence"].is_array() && !rc["evidence"].empty()) {
      line("");
      line("EVIDENCE");
      for (const auto& e : rc["evidence"]) {
        std::string ln = num(e, "line"), er = num(e, "rank");
        line("  " + str(e, "file") + (ln.empty() ? "" : ":" + ln) + (er.empty() ? "" : "  rank " + er));
        line("    " + std::string(text::prefix_utf8(str(e, "text"), 400)));
      }
    }
    const nlohmann::json fix = j.contains("fix") ? j["fix"] : nlohmann::json::object();
    if (auto steps = list(fix, "steps"); !steps.empty()) {
      line("");
      line("FIX");
      for (const auto& st : steps) line("  - " + st);
    }
    if (auto v = list(j, "verify"); !v.empty()) {
      line("");
      line("VERIFY");
      for (const auto& c : v) line("  $ " + c);
    }
  } else if (verdict == "undetermined" && j.contains("suspicious") && j["suspicious"].is_array() && !j["suspicious"].empty()) {
    line("");
    line("LINES THAT LOOK WRONG");
    for (const auto& sl : j["suspicious"]) line("  " + str(sl, "file") + ":" + num(sl, "line") + " " + std::string(text::prefix_utf8(str(sl, "text"), 300)));
  }
  if (auto steps = list(j, "next_steps"); !steps.empty()) {
    line("");
    line("NEXT STEPS");
    for (const auto& st : steps) line("  - " + st);
  }
  if (j.contains("slow_ranks") && j["slow_ranks"].is_array())
    for (const auto& sr : j["slow_ranks"]) line("slow rank: " + str(sr, "text"));
  if (j.contains("stats") && j["stats"].is_object()) {
    auto n = [&](const char* k) -> std::size_t {
      const auto& st = j["stats"];
      return st.contains(k) && st[k].is_number_integer() && st[k].get<long long>() > 0 ? st[k].get<std::size_t>() : 0;
    };
    line("\nread " + count_of(n("lines"), "line") + " (" + count_of(n("bytes"), "byte") + ") from " +
         count_of(j.contains("inputs") && j["inputs"].is_array() ? j["inputs"].size() : 0, "input"));
  }
  return o;
}

std::string to_brief(const pipeline::run& r) {
  const auto& d = r.diag;
  std::string verdict = r.any_readable ? name(d.verdict) : "undetermined";
  std::string o = verdict;
  auto field = [&o](const std::string& k, const std::string& v) { o += " " + k + "=" + (v.empty() ? "-" : v); };
  if (verdict == "failure") field("kind", d.kind);
  if (verdict != "healthy") {
    field("rank", d.initiating_rank ? std::to_string(*d.initiating_rank) : "");
    field("host", d.initiating_host.value_or(""));
    if (r.any_readable) {
      std::string act(action::to_string(r.action.what));
      for (const auto& h : r.action.hosts) act += (h == r.action.hosts.front() ? ":" : ",") + h;
      field("action", act);
    }
  }
  if (verdict == "failure") o += " " + d.title;
  else if (verdict == "undetermined") o += " " + (r.any_readable ? std::string("no signature explains the failure") : "nothing could be read");
  else o += fmt::format(" {} lines from {} input(s)", r.total_lines, r.inputs.size());
  for (auto& c : o)
    if (c == '\n' || c == '\r') c = ' ';
  return o + "\n";
}

int exit_code(const pipeline::run& r) {
  if (!r.any_readable) return 2;
  if (r.diag.verdict == correlate::verdict::failure) return 1;
  if (r.diag.verdict == correlate::verdict::undetermined) return 3;
  return 0;
}

int action_exit_code(const pipeline::run& r) { return r.any_readable ? action::exit_status(r.action.what) : 2; }

nlohmann::json to_json(const pipeline::run& r) {
  const auto& d = r.diag;
  nlohmann::json j;
  j["schema"] = "firstfault.report/v1";
  j["verdict"] = name(d.verdict);
  if (d.verdict == correlate::verdict::failure) {
    nlohmann::json ev = nlohmann::json::array();
    for (const auto& e : d.evidence_lines) ev.push_back(ev_json(e));
    j["root_cause"] = {{"signature", d.signature}, {"id", d.signature_id}, {"kind", d.kind}, {"category", d.category},
                       {"title", d.title},         {"summary", d.summary},   {"confidence", name(d.confidence)},
                       {"priority", d.priority},   {"evidence", ev},         {"references", d.references},
                       {"rule", d.rule},           {"kind_reason", d.kind_reason}, {"facts", d.facts}};
  } else {
    j["root_cause"] = nullptr;
  }
  j["initiating_rank"] = d.initiating_rank ? nlohmann::json(*d.initiating_rank) : nlohmann::json(nullptr);
  j["initiating_host"] = d.initiating_host ? nlohmann::json(*d.initiating_host) : nlohmann::json(nullptr);
  j["initiating_rule"] = d.initiating_rule;
  j["collateral"] = nlohmann::json::array();
  for (const auto& g : d.collateral)
    j["collateral"].push_back({{"signature", g.signature}, {"kind", g.kind}, {"title", g.title}, {"role", kb::to_string(g.role)},
                               {"ranks", g.ranks}, {"count", g.count}, {"explanation", g.explanation},
                               {"example", ev_json(g.example)}});
  nlohmann::json code = nlohmann::json::array();
  for (const auto& c : d.fix_code) code.push_back({{"stack", c.stack}, {"code", c.code}});
  j["fix"] = {{"steps", d.fix}, {"code", code}};
  j["verify"] = d.verify;
  j["next_steps"] = d.next_steps;
  j["verify_where"] = d.verify_where;
  if (!d.launcher_note.empty()) j["launcher_note"] = d.launcher_note;
  if (!d.attempts.empty()) {
    j["attempts_total"] = std::max(d.attempts_total, d.attempts.size());
    j["attempts"] = nlohmann::json::array();
    for (const auto& a : d.attempts)
      j["attempts"].push_back({{"attempt", a.attempt}, {"verdict", name(a.verdict)}, {"kind", a.kind}, {"title", a.title},
                               {"signature", a.signature},
                               {"initiating_rank", a.initiating_rank ? nlohmann::json(*a.initiating_rank) : nlohmann::json(nullptr)},
                               {"initiating_rule", a.rank_rule},
                               {"evidence", a.first ? ev_json(*a.first) : nlohmann::json(nullptr)}});
  }
  j["confirm"] = d.confirm;
  j["alternatives"] = nlohmann::json::array();
  for (const auto& a : d.alternatives)
    j["alternatives"].push_back({{"signature", a.signature}, {"kind", a.kind}, {"title", a.title},
                                 {"priority", a.priority}, {"example", ev_json(a.example)}});
  j["suspicious"] = nlohmann::json::array();
  for (const auto& s : d.suspicious)
    j["suspicious"].push_back({{"file", s.source}, {"line", s.line_no}, {"text", s.text},
                               {"rank", s.rank ? nlohmann::json(*s.rank) : nlohmann::json(nullptr)},
                               {"template", s.tmpl}, {"count", s.count}, {"ranks", s.ranks}, {"strong", s.strong}});
  for (std::size_t i = 0; i < d.suspicious.size(); ++i)
    if (!d.suspicious[i].survived.empty()) j["suspicious"][i]["survived"] = d.suspicious[i].survived;
  j["inputs"] = nlohmann::json::array();
  for (const auto& i : r.inputs) j["inputs"].push_back({{"path", i.path}, {"lines", i.lines}, {"bytes", i.bytes}});
  j["input_errors"] = nlohmann::json::array();
  for (const auto& e : r.errors)
    j["input_errors"].push_back({{"path", e.path}, {"reason", e.reason}, {"skipped", e.fatal_for_input}});
  j["stats"] = {{"lines", r.total_lines}, {"bytes", r.total_bytes}};
  j["masking"] = {{"enabled", r.masked}, {"redacted", r.redacted}, {"counts", r.mask_counts}};
  j["action"] = action_json(r.action);
  j["recurrences"] = r.recurrences ? nlohmann::json({{"count", *r.recurrences}, {"days", r.recurrence_days}}) : nlohmann::json(nullptr);
  if (!r.timeline.empty()) j["timeline"] = timeline::to_json(r.timeline);  // history draws the picture from it
  j["slow_ranks"] = slow_ranks_json(d.slow_ranks);
  j["outcome"] = outcome_json(d.outcome);
  j["ranks_total"] = d.ranks_total;
  j["ranks"] = ranks_json(d.ranks);
  return j;
}

std::string to_terminal(const pipeline::run& r, const terminal_style& st) {
  const auto& d = r.diag;
  paint p{st.color};
  std::string o;
  auto line = [&](const std::string& s) { o += s + "\n"; };
  if (!r.any_readable) {
    line(p("1;33", "verdict: undetermined") + " - nothing could be read from the inputs");
    for (const auto& n : note_lines(r.errors)) line(p("33", "note: ") + n);
    return o;
  }
  if (d.verdict == correlate::verdict::healthy) {
    // Lines that looked wrong and were survived (rules::survived_errors) are said, each with its reason:
    // a healthy verdict beside an error line must say why that line is not the cause.
    const bool survived = !d.collateral.empty() || !d.suspicious.empty();
    line(p("1;32", "verdict: healthy") +
         (survived ? " - the run went on past every line that looked wrong" : " - no failure signature matched and no error stands out"));
    line(fmt::format("read {} lines from {} input(s)", r.total_lines, r.inputs.size()));
    for (const auto& g : d.collateral)
      line(fmt::format("{} {} ({} line{}, first {}): {}", p("2", "survived:"), g.title, g.count, g.count == 1 ? "" : "s", where(g.example),
                       clip(survived_reason(g.explanation), 300)));
    for (const auto& s : d.suspicious)  // a healthy report keeps only the survived ones (correlate)
      line(fmt::format("{} {} {}: {}", p("2", "survived:"), suspicious_where(s), clip(s.text, 200), clip(s.survived, 300)));
    for (const auto& s : d.slow_ranks) line(p("1;33", "warning: slow rank: ") + s.describe());
    line(outcome_line(d.outcome));
    return o;
  }
  head_lines({name(d.verdict), d.kind, d.category, name(d.confidence), d.title, d.signature, d.rule, d.initiating_rule,
              d.initiating_rank ? std::to_string(*d.initiating_rank) : "", d.initiating_host.value_or(""), action_line(r.action)},
             p, line);
  if (d.verdict != correlate::verdict::undetermined) {
    line("");
    line(p("1", "ROOT CAUSE  ") + d.title);
    if (!d.summary.empty()) line("  " + d.summary);
    for (const auto& f : d.facts) line("  " + clip(f, 400));
    line("  signature: " + d.signature + (d.rule.empty() ? "" : "   rule: " + d.rule));
    if (!d.kind_reason.empty()) line("  kind: " + d.kind_reason);
    line("");
    line(p("1", "EVIDENCE"));
    for (const auto& e : d.evidence_lines) {
      line("  " + p("2", where(e)));
      line("    " + clip(e.text, 400));
    }
  }
  line("");
  line(p("1", "FIRST FAILING RANK  ") +
       (d.initiating_rank ? p("1;31", "rank " + std::to_string(*d.initiating_rank)) : std::string("unknown")) +
       (d.initiating_host ? " on host " + *d.initiating_host : ""));
  if (!d.initiating_rule.empty()) line("  decided by: " + d.initiating_rule);
  if (!d.launcher_note.empty()) line("  note: " + d.launcher_note);
  for (const auto& l : attempt_lines(d)) line(l);
  for (const auto& s : d.slow_ranks) line(p("1;33", "  slow rank before the end: ") + s.describe());
  if (r.recurrences && *r.recurrences > 0)
    line(p("1;33", fmt::format("  this host had the same failure {} time(s) in the last {} days (firstfault history stats --by host)",
                               *r.recurrences, r.recurrence_days)));
  line("");
  line(p("1", "HOW THE RUN ENDED  ") + std::string(correlate::to_string(d.outcome.what)) + " - " + d.outcome.how);
  if (d.outcome.line) line("  " + p("2", where(*d.outcome.line)) + (d.outcome.line->text.empty() ? "" : " " + clip(d.outcome.line->text, 200)));
  if (!d.outcome.clocks.empty()) line("  clocks: " + d.outcome.clocks);
  if (auto rows = ranks_to_show(d, st.max_ranks); !rows.empty()) {
    const std::string date = shared_date(rows);
    line(p("1", "RANKS") + fmt::format(" ({} of {}{})", rows.size(), d.ranks_total, date.empty() ? "" : "; times on " + date.substr(0, 10)));
    for (const auto* s : rows) line("  " + story_line(*s, date));
    if (d.ranks_total > rows.size()) line(fmt::format("  ... {} more (--format json lists up to 1,024 ranks' stories, \"ranks\")", d.ranks_total - rows.size()));
  }
  if (!d.collateral.empty()) {
    line("");
    line(p("1", "COLLATERAL") + " (why the loudest errors are not the cause)");
    int n = 0;
    for (const auto& g : d.collateral) {
      if (++n > st.max_collateral) {
        line(fmt::format("  ... and {} more group(s)", d.collateral.size() - static_cast<std::size_t>(st.max_collateral)));
        break;
      }
      std::string who = g.ranks.empty() ? "no rank" : (g.ranks.size() == 1 ? "rank " : "ranks ") + text::rank_ranges(g.ranks);
      line(fmt::format("  {}: {} ({}x) - {}", who, g.title, g.count, g.explanation));
      line("    e.g. " + p("2", where(g.example)) + " " + clip(g.example.text, 200));
    }
  }
  if (d.verdict == correlate::verdict::failure) {
    line("");
    line(p("1", "FIX"));
    for (const auto& f : d.fix) line("  - " + f);
    for (const auto& c : d.fix_code) {
      line("  [" + c.stack + "]");
      std::string code = c.code;
      std::size_t pos = 0;
      while (pos < code.size()) {
        auto nl = code.find('\n', pos);
        line("    " + code.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
        if (nl == std::string::npos) break;
        pos = nl + 1;
      }
    }
    if (!d.verify.empty()) {
      line("");
      line(p("1", "VERIFY"));
      for (const auto& v : d.verify) line("  $ " + v);
      if (!d.verify_where.empty()) {
        line("  where");
        for (const auto& w : d.verify_where) line("    " + w);
      }
    }
    if (!d.confirm.empty()) {
      line("");
      line(p("1", "CONFIRM THE DIAGNOSIS"));
      for (const auto& c : d.confirm) line("  [ ] " + c);
    }
    if (!d.alternatives.empty()) {
      line("");
      line(p("1", "ALSO CONSIDERED"));
      for (const auto& a : d.alternatives)
        line(fmt::format("  - {} [{}] at {}", a.title, a.kind, where(a.example)));
    }
  }
  if (d.verdict == correlate::verdict::undetermined && !d.suspicious.empty()) {
    line("");
    line(p("1", "LINES THAT LOOK WRONG"));
    for (const auto& s : d.suspicious) line("  " + p("2", suspicious_where(s)) + " " + clip(s.text, 300));
  }
  if (!d.next_steps.empty()) {
    line("");
    line(p("1", "NEXT STEPS"));
    for (const auto& s : d.next_steps) line("  - " + s);
  }
  if (!r.errors.empty()) {
    line("");
    for (const auto& n : note_lines(r.errors)) line(p("33", "note: ") + n);
  }
  line("");
  line("read " + count_of(r.total_lines, "line") + " (" + count_of(r.total_bytes, "byte") + ") from " + count_of(r.inputs.size(), "input"));
  line(mask_summary(r));
  return o;
}

std::string to_markdown(const pipeline::run& r) {
  const auto& d = r.diag;
  std::string o;
  auto line = [&](const std::string& s) { o += s + "\n"; };
  auto code_span = [](std::string s) {
    for (auto& c : s)
      if (c == '`') c = '\'';
    return "`" + s + "`";
  };
  line("## firstfault: " + name(d.verdict) + (d.verdict == correlate::verdict::failure ? " - " + d.title : ""));
  line("");
  if (d.verdict == correlate::verdict::failure) {
    line(fmt::format("- **Kind:** {} ({}), confidence {}", d.kind, d.category, name(d.confidence)));
    if (!d.summary.empty()) line("- **Root cause:** " + md_text(d.summary));
    for (const auto& f : d.facts) line("- " + md_text(clip(f, 400)));
  }
  if (r.recurrences && *r.recurrences > 0)
    line(fmt::format("- **Recurrence:** this host had the same failure {} time(s) in the last {} days", *r.recurrences, r.recurrence_days));
  if (d.verdict != correlate::verdict::healthy)
    line("- **Action:** " + code_span(std::string(action::to_string(r.action.what))) +
         (r.action.hosts.empty() ? "" : " excluding " + code_span(fmt::format("{}", fmt::join(r.action.hosts, " ")))) + " - " +
         md_text(r.action.why));
  if (d.verdict != correlate::verdict::healthy)
    line("- **First failing rank:** " + (d.initiating_rank ? std::to_string(*d.initiating_rank) : std::string("unknown")) +
         (d.initiating_host ? " on " + *d.initiating_host : "") + (d.initiating_rule.empty() ? "" : " (" + md_text(d.initiating_rule) + ")"));
  for (const auto& s : d.slow_ranks) line("- **Slow rank:** " + md_text(s.describe()));
  line("- **Run ended:** " + md_text(std::string(correlate::to_string(d.outcome.what)) + " - " + d.outcome.how +
                                     (d.outcome.line ? " (" + where(*d.outcome.line) + ")" : "")));
  if (!d.outcome.clocks.empty()) line("- **Clocks:** " + md_text(d.outcome.clocks));
  if (!d.evidence_lines.empty()) {
    line("");
    line("### Evidence");
    line("```");
    for (const auto& e : d.evidence_lines) line(unfence(where(e) + "\n    " + clip(e.text, 400)));
    line("```");
  }
  if (auto rows = ranks_to_show(d, 8); d.verdict != correlate::verdict::healthy && !rows.empty()) {
    line("");
    line(fmt::format("### Ranks ({} of {})", rows.size(), d.ranks_total));
    line("| rank | host | lines | first time | last time | last step | errors | exit |");
    line("|---|---|---|---|---|---|---|---|");
    for (const auto* st : rows)
      line(fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |", st->rank, md_cell(st->host.value_or("-")), st->lines,
                       st->first_time.empty() ? "-" : st->first_time, st->last_time.empty() ? "-" : st->last_time,
                       st->last_step ? std::to_string(*st->last_step) : "-",
                       st->errors && st->first_error ? fmt::format("{} (first {}:{})", st->errors, md_cell(st->first_error->source), st->first_error->line_no) : "-",
                       st->exit.empty() ? "-" : md_cell(st->exit)));
  }
  if (!d.collateral.empty()) {
    line("");
    const bool healthy = d.verdict == correlate::verdict::healthy;  // then every group was survived
    line(healthy ? "### Survived" : "### Collateral");
    line(healthy ? "| ranks | error | count | why it is not the cause |" : "| ranks | error | count | why |");
    line("|---|---|---|---|");
    for (const auto& g : d.collateral)
      line(fmt::format("| {} | {} | {} | {} |", g.ranks.empty() ? "-" : text::rank_ranges(g.ranks), g.title, g.count,
                       md_cell(healthy ? survived_reason(g.explanation) : g.explanation)));
  }
  if (d.verdict == correlate::verdict::failure) {
    line("");
    line("### Fix");
    for (const auto& f : d.fix) line("- " + f);
    for (const auto& c : d.fix_code) {
      std::string code = c.code;
      while (!code.empty() && code.back() == '\n') code.pop_back();
      std::string lang = c.stack == "pytorch" || c.stack == "hf-trainer" || c.stack == "megatron" ? "python"
                         : c.stack == "deepspeed" ? "json" : "sh";
      line("\n" + c.stack + ":\n```" + lang + "\n" + code + "\n```");
    }
    line("");
    line("### Verify");
    for (const auto& v : d.verify) line("- " + code_span(v));
    for (const auto& w : d.verify_where) line("  - where " + code_span(w.substr(0, w.find(':'))) + w.substr(w.find(':')));
    line("");
    line("### Confirm");
    for (const auto& c : d.confirm) line("- [ ] " + c);
  }
  if ((d.verdict == correlate::verdict::undetermined || d.verdict == correlate::verdict::healthy) && !d.suspicious.empty()) {
    const bool healthy = d.verdict == correlate::verdict::healthy;  // then only the survived lines are listed
    line("");
    line(healthy ? "### Lines the run went on past" : "### Lines that look wrong");
    line("```");
    for (const auto& s : d.suspicious)
      line(unfence(suspicious_where(s) + " " + clip(s.text, 300) + (s.survived.empty() ? "" : "\n    survived: " + clip(s.survived, 300))));
    line("```");
  }
  if (!d.next_steps.empty()) {
    line("");
    line("### Next steps");
    for (const auto& s : d.next_steps) line("- " + md_text(s));
  }
  line("");
  line("_" + mask_summary(r) + "_");
  return o;
}

}  // namespace ff::report
