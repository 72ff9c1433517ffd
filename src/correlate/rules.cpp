// The correlator's named rules (correlate_rules.hpp). Each rule is a small pure function of the
// context; docs/ARCHITECTURE.md ("Correlation rules") lists them in order.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <memory>

#include <re2/re2.h>

#include "firstfault/correlate_rules.hpp"
#include "firstfault/limits.hpp"
#include "firstfault/text.hpp"
#include "correlate/rules_detail.hpp"
#include "kb_data/tables.hpp"

namespace ff::correlate::rules {

using normalize::timestamp;

std::optional<int> to_int(const std::string& s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  for (char c : s)
    if (c < '0' || c > '9') return std::nullopt;
  return std::stoi(s);
}


// A collective or barrier timeout: a symptom in the synchronization category, or tagged as a hang.
bool is_timeout(const kb::signature& s) {
  return s.category == "synchronization" || s.has_tag("symptom.hang") || s.has_tag("symptom.timeout");
}

bool raised_exception(const finding& f) {
  static const re2::RE2 exception_line(R"(^\s*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception): )");
  return f.raised || re2::RE2::PartialMatch(f.text, exception_line);
}

int year_of(double seconds) {
  std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return tm.tm_year + 1900;
}

// The same month, day and time of day in another year.
double with_year(double seconds, int year) {
  std::time_t t = static_cast<std::time_t>(std::floor(seconds));
  double frac = seconds - std::floor(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  tm.tm_year = year - 1900;
  return static_cast<double>(timegm(&tm)) + frac;
}

// Timeouts by rank, shared by the inference rules (rules_detail.hpp).

timeout_view timeouts(const context& ctx) {
  timeout_view v;
  for (const auto& f : ctx.fs)
    if (is_timeout(ctx.sig(f)) && f.rank && !ctx.survived.count(&f)) {
      v.timed_out.insert(*f.rank);
      v.lines.push_back(&f);
    }
  std::set<int> all = ctx.all_ranks;
  for (int r : v.timed_out) all.insert(r);
  // Ranks are numbered 0..world_size-1: a rank below the highest one seen exists even if it wrote
  // nothing we can attribute.
  if (!all.empty() && *all.rbegin() < limits::kMaxListedRanks)
    for (int r = 0; r < *all.rbegin(); ++r) all.insert(r);
  for (int r : all)
    if (!v.timed_out.count(r)) v.absent.push_back(r);
  return v;
}

// gloo's size check (op.preamble.length <= op.nbytes. GOT vs BUFFER): the bytes that arrived and the bytes
// of the buffer posted for them, both positive, from torch_gloo_message_size_mismatch's fields.
std::optional<std::pair<int, int>> gloo_sizes(const finding& f) {
  auto got = to_int(field(f, "bytes")), buf = to_int(field(f, "buffer_bytes"));
  if (!got || !buf || *got <= 0 || *buf <= 0) return std::nullopt;
  return std::make_pair(*got, *buf);
}

// The kb/_tables/collective_calls.tsv row a torch.distributed function belongs to ("broadcast_object_list" ->
// "broadcast", "monitored_barrier" -> "barrier"), or empty when it is none of them (a helper such as
// "scatter_object_list", "wait" of point-to-point aside: its row is kept, it is a collective of its own).
std::string collective_row(const std::string& fn) {
  static const auto rows = [] {
    std::vector<std::pair<std::string, std::shared_ptr<re2::RE2>>> v;
    const auto& t = kb::detail::embedded_table("collective_calls");
    int name = t.column("name"), regex = t.column("regex");
    if (name < 0 || regex < 0) return v;
    for (const auto& r : t.rows) v.emplace_back(r[name], std::make_shared<re2::RE2>("^(?:" + r[regex] + ")$"));
    return v;
  }();
  for (const auto& [name, re] : rows)
    if (re2::RE2::FullMatch(fn, *re)) return name;
  return {};
}

std::optional<int> rank_resolver::operator()(const std::optional<int>& rank, const std::optional<int>& local) const {
  if (rank) return rank;
  if (!local) return std::nullopt;
  if (auto it = local_to_rank.find(*local); it != local_to_rank.end())
    return it->second.size() == 1 ? std::optional<int>(*it->second.begin()) : std::nullopt;
  if (single_node) return local;
  return std::nullopt;
}

std::optional<int> rank_resolver::on_host(const std::optional<int>& rank, const std::optional<int>& local,
                                          const std::optional<std::string>& host) const {
  if (auto r = (*this)(rank, local)) return r;
  if (!local || !host) return std::nullopt;
  auto l = local_to_rank.find(*local);
  auto h = host_ranks.find(*host);
  if (l == local_to_rank.end() || h == host_ranks.end()) return std::nullopt;
  std::optional<int> found;
  for (int r : l->second)
    if (h->second.count(r)) {
      if (found) return std::nullopt;
      found = r;
    }
  return found;
}

bool before(const std::optional<timestamp>& a, const std::optional<timestamp>& b) {
  if (!a || !b || a->kind != b->kind) return false;
  return a->seconds < b->seconds;
}

std::string format_time(const std::optional<timestamp>& ts) {
  if (!ts) return "";
  if (ts->kind == timestamp::clock::uptime) {
    char b[48];
    std::snprintf(b, sizeof b, "+%.3fs since boot", ts->seconds);
    return b;
  }
  long long ms_total = std::llround(ts->seconds * 1000.0);  // round: 07,257 parses as 7.2569999...
  std::time_t t = static_cast<std::time_t>(ms_total / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[48];
  if (ts->has_date) std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S", &tm);
  else std::strftime(b, sizeof b, "%m-%d %H:%M:%S", &tm);
  char ms[16];
  std::snprintf(ms, sizeof ms, ".%03d", static_cast<int>(ms_total % 1000));
  return std::string(b) + ms;
}

// A rank's last line and the line that stated its planned steps, as evidence with file and line.
std::optional<evidence> last_line_evidence(const context& ctx, int r) {
  auto it = ctx.activity.find(r);
  if (it == ctx.activity.end() || it->second.last_line.empty()) return std::nullopt;
  const auto& a = it->second;
  return evidence{ctx.in->source_name(a.last_source), "last line of rank " + std::to_string(r) + ": " + a.last_line, format_time(a.last_ts),
                  a.last_line_no, r, std::nullopt};
}

std::optional<evidence> planned_evidence(const context& ctx, int r) {
  auto it = ctx.activity.find(r);
  if (it == ctx.activity.end() || it->second.planned_line.empty()) return std::nullopt;
  const auto& a = it->second;
  return evidence{ctx.in->source_name(a.planned_source),
                  "rank " + std::to_string(r) + " plans " + std::to_string(a.planned_steps.value_or(0)) + " steps: " +
                      a.planned_line,
                  "", a.planned_line_no, r, std::nullopt};
}

std::string field(const finding& f, const std::string& name) {
  for (const auto& [k, v] : f.captured)
    if (k == name) return v;
  return "";
}

std::optional<int> work_rank(const context& ctx, const inputs::marked_line& w) {
  if (auto r = ctx.resolve(w.rank, w.local_rank)) return r;
  if (w.rank || w.local_rank) return std::nullopt;  // a prefix named it, ambiguously: the text does not overrule it
  for (const auto& [k, v] : w.fields)
    if (k == "rank")
      if (auto r = to_int(v)) return r;
  return std::nullopt;
}

bool work_rank_from_text(const context& ctx, const inputs::marked_line& w) {
  return !ctx.resolve(w.rank, w.local_rank) && !w.rank && !w.local_rank && work_rank(ctx, w).has_value();
}

namespace {

// Exits and ranks: a local rank maps to a global one when lines or exit records pair them, or on a single
// node; exit records get their global rank that way.
void resolve_exits(context& c, const inputs& in) {
  c.resolve.local_to_rank = in.local_to_rank;
  c.resolve.host_ranks = in.host_ranks;
  std::set<std::string> exit_hosts;
  c.exits = in.exits;
  for (const auto& e : c.exits) {
    if (e.rank && e.local_rank) c.resolve.local_to_rank[*e.local_rank].insert(*e.rank);
    if (!e.host.empty()) exit_hosts.insert(e.host);
  }
  c.resolve.single_node = in.hosts.size() <= 1 && exit_hosts.size() <= 1;
  for (auto& e : c.exits)
    if (!e.rank) e.rank = c.resolve(std::nullopt, e.local_rank);
}

// Per-rank activity by resolved rank. One rank can have several keys (its global rank and its local rank on
// a single node): merge them, field by field, the later line winning where both have one.
void merge_activity(context& c, const inputs& in) {
  for (const auto& [key, act] : in.activity) {
    // an attempt not known is kept for every attempt
    if (key.attempt && in.only_attempt && *key.attempt != *in.only_attempt) continue;
    auto r = key.kind == rank_key::scope::global ? std::optional<int>(key.number) : c.resolve(std::nullopt, key.number);
    if (!r) continue;
    c.all_ranks.insert(*r);
    auto& a = c.activity[*r];
    bool later = a.lines == 0 || before(a.last_ts, act.last_ts) || !a.last_ts;
    // The first line: the first key's, or an earlier one by own times (the rank's story, story.cpp).
    if (a.lines == 0 || (act.first_ts && (!a.first_ts || before(act.first_ts, a.first_ts)))) {
      if (act.first_ts || a.lines == 0) a.first_ts = act.first_ts;
      a.first_source = act.first_source;
      a.first_line_no = act.first_line_no;
    }
    a.lines += act.lines;
    if (later || a.last_line.empty()) {
      if (act.last_ts) a.last_ts = act.last_ts;
      if (!act.last_line.empty()) {
        a.last_line = act.last_line;
        a.last_source = act.last_source;
        a.last_line_no = act.last_line_no;
      }
    }
    if (act.last_step && (later || !a.last_step)) a.take_step_of(act);
    if (act.planned_steps && (later || !a.planned_steps)) {
      a.planned_steps = act.planned_steps;
      a.planned_line = act.planned_line;
      a.planned_source = act.planned_source;
      a.planned_line_no = act.planned_line_no;
    }
  }
  for (const auto& e : c.exits)
    if (e.rank) c.all_ranks.insert(*e.rank);
}

// Findings without an attempt get one where the evidence says which. A console line that repeats a per-rank
// file's line takes that line's attempt; when the same line is in the files several times, the console's
// k-th copy is the k-th file line's attempt (both in order: an attempt that printed it twice takes two
// copies). Any other line with a wall-clock time (an agent line of the console) belongs to the attempt that
// had started by then: the latest attempt whose first timed line is not after it.
void assign_attempts(std::vector<finding>& all) {
  using twin_key = std::tuple<int, int, std::string>;
  std::map<twin_key, std::vector<int>> attempts_of;
  for (const auto& f : all)
    if (f.attempt) attempts_of[{f.signature, f.rank.value_or(-1), f.text}].push_back(*f.attempt);
  std::map<twin_key, std::size_t> copies;
  for (auto& f : all) {
    if (f.attempt) continue;
    twin_key k{f.signature, f.rank.value_or(-1), f.text};
    auto it = attempts_of.find(k);
    if (it == attempts_of.end()) continue;
    auto& v = it->second;
    std::sort(v.begin(), v.end());  // stable order of attempts; repeats kept
    std::size_t n = copies[k]++;
    f.attempt = v[std::min(n, v.size() - 1)];
  }
  std::map<int, double> attempt_start;
  for (const auto& f : all)
    if (f.attempt && f.ts && f.ts->kind == timestamp::clock::wall) {
      auto [it, fresh] = attempt_start.emplace(*f.attempt, f.ts->seconds);
      if (!fresh) it->second = std::min(it->second, f.ts->seconds);
    }
  if (attempt_start.size() < 2) return;
  for (auto& f : all) {
    if (f.attempt || !f.ts || f.ts->kind != timestamp::clock::wall) continue;
    for (const auto& [a, start] : attempt_start)
      if (start <= f.ts->seconds + 0.001) f.attempt = a;
  }
}

// Findings with ranks resolved (the line's prefix, else the rank, task or tasks the message names),
// attempts assigned, and duplicates merged: a console log repeats the per-rank files. Key: signature, rank,
// text and attempt, and for a line of no rank its call site (a struct key, so no character of a line can collide
// with a separator).
void merge_findings(context& c, const inputs& in) {
  std::vector<finding> all = in.findings;
  for (auto& f : all) {
    auto r = c.resolve.on_host(f.rank, f.local_rank, f.host);
    if (!r) r = to_int(field(f, "rank"));  // the message itself says which rank printed it
    if (!r) r = to_int(field(f, "task"));  // Slurm task id (srun starts one task per rank)
    if (!r) r = to_int(field(f, "tasks"));
    f.rank = r;
  }
  // A console that repeats the per-rank files (mpirun --output-filename's rank.N/stdout and stderr under its
  // untagged console, Open MPI's mpirun(1) --output-filename; a torchrun --log_dir tree beside a console of the
  // same job): a line of no rank whose signature and text the other files hold under exactly one rank, and
  // only in other files, is that rank's copy. Before the exits are read: a copy is not a guess.
  {
    std::map<std::pair<int, std::string>, std::set<std::pair<int, std::string>>> copies;  // (sig, text) -> (rank, source)
    for (const auto& f : all)
      if (f.rank) copies[{f.signature, f.text}].insert({*f.rank, f.source});
    for (auto& f : all) {
      if (f.rank || f.local_rank) continue;
      auto it = copies.find({f.signature, f.text});
      if (it == copies.end()) continue;
      std::set<int> ranks;
      bool elsewhere = true;
      for (const auto& [r, src] : it->second) {
        ranks.insert(r);
        elsewhere &= src != f.source;
      }
      if (ranks.size() == 1 && elsewhere) f.rank = *ranks.begin();
    }
  }
  // An unprefixed traceback (a console of workers that print no rank prefix): when exactly one worker exited
  // with an error code, the exception lines of no rank were raised by it. A worker stopped by a signal prints
  // no traceback, and the launcher's own exception (ChildFailedError, launch category) is not the worker's.
  // Except one signal: a traceback followed by "terminate called after throwing" (finding::aborted) was
  // printed by a process that then called abort(), so it is the worker that ended by SIGABRT, when exactly one
  // did (torchelastic's exitcode -6, "Signal 6 (SIGABRT) received by PID"; libstdc++-v3/libsupc++/vterminate.cc).
  std::set<int> failed, aborted;
  for (const auto& e : c.exits) {
    if (e.rank && e.exitcode && *e.exitcode > 0) failed.insert(*e.rank);
    if (e.rank && ((e.exitcode && *e.exitcode == -6) || e.signal == "SIGABRT")) aborted.insert(*e.rank);
  }
  for (auto& f : all)
    if (!f.rank && !f.local_rank && f.raised && f.aborted && aborted.size() == 1) f.rank = *aborted.begin();
  // Not collective errors raised in two different places, though: a rank blocked in one collective was not
  // blocked in another, so those tracebacks are two ranks' (the other rank was stopped by the launcher's
  // SIGTERM while it printed; torch/distributed/elastic/agent/server/api.py stops every worker after one fails).
  auto collective_error = [&](const finding& f) {
    return !field(f, "collective").empty() && (is_timeout(c.sig(f)) || c.sig(f).has_tag("event.peer_closed"));
  };
  std::set<std::string> places;
  for (const auto& f : all)
    if (!f.rank && !f.local_rank && f.raised && collective_error(f)) places.insert(field(f, "collective") + " at " + field(f, "user_frame"));
  if (failed.size() == 1)
    for (auto& f : all)
      if (!f.rank && !f.local_rank && f.raised && !f.aborted && c.sig(f).category != "launch" && (places.size() < 2 || !collective_error(f)))
        f.rank = *failed.begin();
  assign_attempts(all);
  // Lines of no rank with the same text but raised at different call sites (two ranks' tracebacks on one
  // console, "Timed out waiting 10000ms ..." under dist.broadcast and under dist.all_reduce) are not repeats,
  // nor are lines of no rank that two hosts printed (each node's NCCL WARN: the same event on two nodes; a copy
  // of a line in another file names the same host).
  std::map<std::tuple<int, int, std::string, int, std::string, std::string>, std::size_t> seen;
  for (auto& f : all) {
    auto key = std::make_tuple(f.signature, f.rank.value_or(-1), f.text, f.attempt.value_or(-1), f.rank ? std::string() : field(f, "user_frame"),
                               f.rank || !f.host ? std::string() : *f.host);
    if (auto it = seen.find(key); it != seen.end()) {
      auto& kept = c.fs[it->second];
      ++kept.duplicates;
      if ((!kept.ts || kept.ts_inherited) && f.ts && !f.ts_inherited) {
        kept.ts = f.ts;
        kept.ts_inherited = false;
      }
      continue;
    }
    seen[key] = c.fs.size();
    c.fs.push_back(std::move(f));
  }
  if (in.only_attempt) {
    auto other = [&](const std::optional<int>& a) { return a && *a != *in.only_attempt; };
    std::erase_if(c.fs, [&](const finding& f) { return other(f.attempt); });
    std::erase_if(c.exits, [&](const auto& e) { return other(e.attempt); });
  }
}

// Year-less stamps (c10 "[E1206 18:44:12...]", glog, syslog) take the year of the run's dated stamps (a
// launcher's or a logger's full dates, slurmstepd's "CANCELLED AT <ISO time>"): of the same day in the year
// before, the same and the next, the one nearest the dated stamps. They are then shown with that year; with
// no dated stamp in the run they stay month and day only (a year from a file's date would be a guess: a
// copied log's date is the copy's).
void rebase_yearless(context& c) {
  std::optional<double> ref;
  auto consider = [&](const std::optional<timestamp>& t) {
    if (t && t->kind == timestamp::clock::wall && t->has_date) ref = ref ? std::min(*ref, t->seconds) : t->seconds;
  };
  for (const auto& f : c.fs) consider(f.ts);
  for (const auto& [_, a] : c.activity) consider(a.last_ts);
  if (!ref) return;
  c.year = year_of(*ref);
  auto rebase = [&](std::optional<timestamp>& t) {
    if (!t || t->kind != timestamp::clock::wall || t->has_date) return;
    double best = t->seconds;
    double best_gap = -1;
    for (int y : {*c.year - 1, *c.year, *c.year + 1}) {
      double s = with_year(t->seconds, y);
      double gap = std::fabs(s - *ref);
      if (best_gap < 0 || gap < best_gap) {
        best = s;
        best_gap = gap;
      }
    }
    t->seconds = best;
    t->has_date = true;  // the year is now known: shown as a full date like the dated stamps around it
  };
  for (auto& f : c.fs) rebase(f.ts);
  for (auto& [_, a] : c.activity) rebase(a.last_ts);
}

}  // namespace

context make_context(const inputs& in, const kb::library& lib) {
  context c;
  c.in = &in;
  c.lib = &lib;
  resolve_exits(c, in);
  merge_activity(c, in);
  merge_findings(c, in);
  rebase_yearless(c);
  c.ended_well = ended_well(c);
  c.survived = survived_errors(c);
  return c;
}

std::optional<int> named_peer(const finding& f) {
  auto peer = to_int(field(f, "peer_rank"));
  auto own = to_int(field(f, "rank"));
  if (peer && own && f.rank && *own != *f.rank) return std::nullopt;  // group ranks, not global ones
  if (field(f, "store_key").find(':') != std::string::npos) return std::nullopt;  // a send/recv pair's own numbering
  return peer;
}

// The first exit record of a rank with this exit code: the launcher's failure summaries first (they name global
// ranks), a torchelastic agent's lines last (they name local ones). Shared by initiator_of and culprit_from, so
// the launcher a report names is the one whose record gave the rank.
namespace {
const extract::exit_record* exit_with_code(const context& ctx, int code) {
  for (bool agent_lines : {false, true})
    for (const auto& e : ctx.exits)
      if (e.from_agent_line == agent_lines && e.exitcode && *e.exitcode == code && e.rank) return &e;
  return nullptr;
}
}  // namespace

std::optional<int> initiator_of(const context& ctx, const finding& f) {
  using how = kb::initiator::how;
  const auto& ini = ctx.sig(f).initiator;
  if (ini.kind == how::printing_rank) return f.rank;
  if (ini.kind == how::named_rank) {
    if (auto r = named_peer(f)) return r;
    if (auto r = to_int(text::trim_copy(field(f, "ranks")))) return r;
    if (!field(f, "origin").empty()) return f.rank;
  }
  if (ini.kind == how::rank_zero) return 0;
  if (ini.kind == how::exit_code)  // the worker the launcher saw die with this code
    if (const auto* e = exit_with_code(ctx, ini.exit_code)) return e->rank;
  return std::nullopt;
}

std::optional<rank_decision> culprit_from(const context& ctx, const std::vector<const finding*>& list) {
  for (const auto* f : list)
    if (auto c = initiator_of(ctx, *f)) {
      using how = kb::initiator::how;
      const auto& ini = ctx.sig(*f).initiator;
      rank_decision d;
      d.rank = c;
      auto quoted = "\"" + std::string(text::prefix_utf8(f->text, limits::kQuoteBytes)) + "\"";
      if (ini.kind == how::printing_rank) d.why = "the rank that printed: " + quoted;
      else if (ini.kind == how::rank_zero) d.why = "this failure is rank 0's own work (" + ctx.sig(*f).title + ")";
      else if (ini.kind == how::exit_code) {
        const auto* e = exit_with_code(ctx, ini.exit_code);  // the record initiator_of took the rank from
        d.why = (e ? first_failure_phrase(*e) : std::string("the launcher's failed worker")) + " (exit code " + std::to_string(ini.exit_code) + ")";
      }
      else d.why = "named in: " + quoted + (f->rank ? " (printed by rank " + std::to_string(*f->rank) + ")" : "");
      return d;
    }
  return std::nullopt;
}

// How the launcher that printed an exit report calls its first failure.
std::string first_failure_phrase(const extract::exit_record& e) {
  if (e.launcher == "mpirun") return "mpirun's first process to exit with a non-zero status";
  if (e.launcher == "srun") return "the first task srun reported failed";
  if (e.launcher == "horovod") return "the first process horovodrun reported failed";
  if (e.root_cause) return "torchelastic's \"Root Cause (first observed failure)\" entry";
  return "the first worker the launcher saw fail";
}

// a is a stronger cause than b: higher priority, then earlier on the same clock.
bool stronger(const context& ctx, const finding& a, const finding& b) {
  int pa = ctx.sig(a).priority, pb = ctx.sig(b).priority;
  return pa > pb || (pa == pb && before(a.ts, b.ts));
}

std::set<int> ranks_of(const std::vector<const finding*>& list) {
  std::set<int> r;
  for (const auto* f : list)
    if (f->rank) r.insert(*f->rank);
  return r;
}


bool ends_in_startup(const context& ctx, bool with_nccl_init) {
  // Launchers' start-up lines, as printed (kb/_tables/launch_banners.tsv: torchrun/torchelastic, DeepSpeed,
  // Lightning; each row cites its source).
  static const re2::RE2 banner(kb::detail::regex_alternation(kb::detail::embedded_table("launch_banners")));
  // NCCL prints INFO lines while it sets up a communicator (bootstrap, transports, rings), and nothing in
  // steady state (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-debug).
  static const re2::RE2 nccl_init(R"(\bNCCL INFO\b)");
  if (ctx.in->stream_ends.empty()) return false;
  for (const auto& e : ctx.in->stream_ends)
    if (!re2::RE2::PartialMatch(e.text, banner) && !(with_nccl_init && re2::RE2::PartialMatch(e.text, nccl_init))) return false;
  for (const auto& [_, act] : ctx.in->activity)
    if (act.last_step) return false;  // a rank trained: this is not a start-up hang
  return true;
}

const finding* orphan_symptom(const context& ctx) {
  if (!ctx.survived.empty()) return nullptr;
  if (any_worker_failed(ctx)) return nullptr;
  const finding* first = nullptr;
  std::string kind;
  bool peer_left = false;
  for (const auto& f : ctx.fs) {
    const auto& s = ctx.sig(f);
    // A generic line printed only because something else failed (a launcher killing its other workers after
    // one died) names no kind and hides none: the other symptoms decide, or nothing does.
    if (!s.is_cause() && s.layer_rank() != 0 && s.has_tag("symptom.collateral")) continue;
    // Nor does torchelastic's summary of failed workers ("ChildFailedError", "Root Cause (first observed
    // failure)"), nor a line that only says a peer left (symptom.peer_gone): each points at another process's
    // own error, whatever its kind, or at nothing (peers that exit at the end of work that passed).
    if (!s.is_cause() && s.has_tag("symptom.collateral") && (s.has_tag("component.torchelastic") || s.has_tag("symptom.peer_gone"))) {
      peer_left |= s.has_tag("symptom.peer_gone");
      continue;
    }
    // Only specific symptoms: a family or generic one (any NCCL error code, "unhandled system error")
    // carries a kind that its line alone does not establish.
    if (s.is_cause() || is_timeout(s) || s.kind == "healthy" || s.layer_rank() != 0) return nullptr;
    if (!kind.empty() && s.kind != kind) return nullptr;
    kind = s.kind;
    if (!first || before(f.ts, first->ts)) first = &f;
  }
  // A peer that left explains the socket and transport errors around it (NCCL's return chains when the
  // communicators of exiting peers are torn down): they name no network fault of their own then.
  if (first && peer_left && ctx.sig(*first).category == "network") return nullptr;
  return first;
}

// A step or job cancelled after one of its tasks had already failed (srun: "task N: Exited with exit code C",
// a signal other than SIGTERM) earlier in the same file: srun ended the step because of that task
// (--kill-on-bad-exit, "_step_signal: Terminating StepId"), so the cancel is a consequence, not an outside
// stop (https://slurm.schedmd.com/srun.html#OPT_kill-on-bad-exit).
bool cancel_after_task_exit(const context& ctx, const finding& f) {
  if (ctx.sig(f).kind != "job_cancelled") return false;
  return std::any_of(ctx.exits.begin(), ctx.exits.end(), [&](const auto& e) {
    return e.launcher == "srun" && e.source == f.source && e.line_no < f.line_no && e.failed() && e.signal != "SIGTERM";
  });
}

const finding* strongest_cause(const context& ctx) {
  const finding* root = nullptr;
  for (const auto& f : ctx.fs) {
    const auto& s = ctx.sig(f);
    if (!s.is_cause() || ctx.survived.count(&f) || cancel_after_task_exit(ctx, f)) continue;
    if (!root || stronger(ctx, f, *root)) root = &f;
  }
  return root;
}

const std::vector<root_rule>& root_rules() {
  static const std::vector<root_rule> rules = {
      {"scheduler_end_after_rank_error",
       "a cancel or time limit that came after a rank's own error is its consequence: the rank's error is the root",
       "on-call practice: srun/slurmstepd CANCELLED lines follow the failure that stopped the job "
       "(https://slurm.schedmd.com/srun.html#OPT_kill-on-bad-exit)",
       [](const context& ctx, const finding& root) -> const finding* {
         const auto& rs = ctx.sig(root);
         if (rs.kind != "job_cancelled" && rs.kind != "job_time_limit") return nullptr;
         if (!root.ts || root.ts->kind != timestamp::clock::wall) return nullptr;
         const finding* best = nullptr;
         for (const auto& f : ctx.fs) {
           const auto& s = ctx.sig(f);
           if (!s.is_cause() || s.category == "scheduler" || !f.rank || !f.ts || f.ts->kind != timestamp::clock::wall || ctx.survived.count(&f)) continue;
           if (f.ts->seconds > root.ts->seconds - 1.0) continue;  // at least a second earlier
           if (!best || stronger(ctx, f, *best)) best = &f;
         }
         return best;
       }},
      {"store_client_fallback",
       "a rendezvous store that could not bind its port, logged only as the socket layer's warning, is the c10d "
       "backend's fallback to the store's client (several agents of one rendezvous on one machine, or a stale store "
       "on the port): when the rendezvous then timed out, the timeout is the failure",
       "torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py, _create_tcp_store: tries is_host then is_server=False, "
       "'there can be more than one process that is part of the same rendezvous on this machine and only one of them will "
       "eventually host the store' (https://github.com/pytorch/pytorch/blob/main/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py)",
       [](const context& ctx, const finding& root) -> const finding* {
         if (ctx.sig(root).kind != "rendezvous_port_in_use") return nullptr;
         // Raised as an exception (the static backend's TCPStore, init_process_group's store, a pasted error), the
         // bind failure ended the launcher: that is the failure.
         for (const auto& f : ctx.fs)
           if (ctx.sig(f).kind == "rendezvous_port_in_use" && raised_exception(f)) return nullptr;
         const finding* best = nullptr;
         for (const auto& f : ctx.fs)
           if (ctx.sig(f).kind == "rendezvous_timeout" && !ctx.survived.count(&f) && (!best || before(f.ts, best->ts))) best = &f;
         return best;
       }},
      {"victim_named_later",
       "a report header (the kernel's 'invoked oom-killer') is the start of an event whose later line names the victim "
       "(pid, process): that line is the evidence to act on",
       "mm/oom_kill.c prints the header, the task list, then 'Killed process PID (COMM) total-vm:... anon-rss:...' "
       "(https://github.com/torvalds/linux/blob/master/mm/oom_kill.c)",
       [](const context& ctx, const finding& root) -> const finding* {
         // Only the OOM killer's report has this shape; elsewhere a later line with a pid is a later event
         // (Xid 43's channel reset after Xid 13 names the process, but Xid 13 is the fault).
         // The header is "COMM invoked oom-killer: ..."; the victim line is the next kill line of the same
         // file before another header (another event).
         const auto& rs = ctx.sig(root);
         if (rs.kind != "host_oom_sigkill" || !field(root, "pid").empty() ||
             root.text.find("invoked oom-killer") == std::string::npos)
           return nullptr;
         const finding* best = nullptr;
         std::uint64_t next_header = root.line_no + 400;
         for (const auto& f : ctx.fs) {
           if (&f == &root || f.source != root.source || f.line_no <= root.line_no || f.line_no > root.line_no + 400) continue;
           if (f.text.find("invoked oom-killer") != std::string::npos) next_header = std::min(next_header, f.line_no);
           const auto& s = ctx.sig(f);
           if (s.is_cause() && s.kind == rs.kind && !field(f, "pid").empty() && (!best || f.line_no < best->line_no)) best = &f;
         }
         return best && best->line_no < next_header ? best : nullptr;
       }},
      {"errno28_from_semlock",
       "'[Errno 28] No space left on device' raised through the frame where multiprocessing creates a SemLock is /dev/shm "
       "full (the semaphore is a file on that tmpfs), not a disk: the frame's line is the evidence to act on",
       "CPython Lib/multiprocessing/synchronize.py (SemLock.__init__ calls _multiprocessing.SemLock) and "
       "Modules/_multiprocessing/semaphore.c (sem_open, errors raised from errno); glibc creates named semaphores in "
       "/dev/shm (https://man7.org/linux/man-pages/man7/sem_overview.7.html)",
       [](const context& ctx, const finding& root) -> const finding* { return semlock_frame_of(ctx, root); }},
  };
  return rules;
}

const finding* semlock_frame_of(const context& ctx, const finding& root) {
  static const re2::RE2 enospc(R"(\[Errno 28\]|No space left on device)");
  if (ctx.sig(root).kind != "disk_full_checkpoint" || !re2::RE2::PartialMatch(root.text, enospc)) return nullptr;
  // The frame is the traceback's innermost (its source line is the one right above the exception), but
  // tracebacks of several ranks on one console interleave, so a few lines may come between: the nearest
  // such frame above the line, at most kFrameGap lines up, in the same file.
  constexpr std::uint64_t kFrameGap = 12;
  const finding* best = nullptr;
  for (const auto& f : ctx.fs) {
    if (f.source != root.source || f.line_no >= root.line_no || f.line_no + kFrameGap < root.line_no) continue;
    if (ctx.sig(f).name != "data_semlock_dev_shm") continue;
    if (f.rank && root.rank && *f.rank != *root.rank) continue;  // another rank's traceback, interleaved
    if (!best || f.line_no > best->line_no) best = &f;
  }
  return best;
}

// Longer than the ~120-line guideline on purpose: this is a table, one entry per rule (name, what it
// decides, its source, its function), in the order they are tried; the order is part of the behaviour and
// is read in one place. Each rule is tested on its own (tests/unit/rules_test.cpp).
const std::vector<rank_rule>& rank_rules() {
  static const std::vector<rank_rule> rules = {
      {"odd_side_of_split", "a report of ranks missing from a collective (flight recorder) names the smaller side: when the "
                            "missing ranks are as many as the others or more, the others issued a collective the rest never "
                            "did, and the culprit is the one rank that did",
       "https://pytorch.org/tutorials/prototype/flight_recorder_tutorial.html (\"missing ranks\", \"expected ranks\")",
       [](const context& ctx, const std::vector<const finding*>& root) -> std::optional<rank_decision> {
         for (const auto* f : root) {
           auto miss_text = field(*f, "missing");
           if (miss_text.empty()) continue;
           std::set<int> missing;
           for (std::size_t i = 0; i < miss_text.size();) {
             if (!std::isdigit(static_cast<unsigned char>(miss_text[i]))) { ++i; continue; }
             std::size_t j = i;
             while (j < miss_text.size() && std::isdigit(static_cast<unsigned char>(miss_text[j]))) ++j;
             if (auto r = to_int(miss_text.substr(i, j - i))) missing.insert(*r);
             i = j;
           }
           std::optional<int> expected;  // "expected ranks: N" of the same report: the next lines of its file
           for (const auto* g : root)
             if (g->source == f->source && g->line_no > f->line_no && g->line_no <= f->line_no + 16)
               if (auto e = to_int(field(*g, "expected"))) { expected = e; break; }
           if (!expected || missing.empty() || *expected > 65536 || static_cast<int>(missing.size()) >= *expected) continue;
           std::vector<int> present;
           for (int r = 0; r < *expected; ++r)
             if (!missing.count(r)) present.push_back(r);
           if (*missing.rbegin() >= *expected) continue;  // ranks of a subgroup: 0..expected-1 is not its range
           // A missing rank with an error of its own (it crashed) is the cause: leave it to the other rules.
           bool missing_failed = std::any_of(ctx.fs.begin(), ctx.fs.end(), [&](const finding& x) {
             return x.rank && missing.count(*x.rank) && ctx.sig(x).is_cause() && !ctx.survived.count(&x);
           });
           if (missing_failed) continue;
           if (present.size() == missing.size()) {
             // A tie: with two ranks, "rank 1 never issued it" and "rank 0 issued one more" read the same (the
             // flight recorder tutorial's example blames rank 1 for rank 0's extra all_reduce).
             std::string ms = text::rank_ranges({missing.begin(), missing.end()}), ps = text::rank_ranges(present);
             return rank_decision{std::nullopt, std::nullopt,
                                  "the report names rank" + std::string(missing.size() > 1 ? "s " : " ") + ms + " missing of " +
                                      std::to_string(*expected) + ": rank" + (missing.size() > 1 ? "s " : " ") + ms +
                                      " skipping a collective and rank" + (present.size() > 1 ? "s " : " ") + ps +
                                      " issuing one more read the same, so no rank is named"};
           }
           if (present.size() != 1 || present.size() >= missing.size()) continue;
           return rank_decision{present[0], std::nullopt,
                                "the report names rank" + std::string(missing.size() > 1 ? "s " : " ") + text::rank_ranges({missing.begin(), missing.end()}) +
                                    " missing of " + std::to_string(*expected) + ": rank " + std::to_string(present[0]) +
                                    " is the odd one out, the only rank that issued the collective"};
         }
         return std::nullopt;
       }},
      {"fingerprint_first_differing_rank",
       "a TORCH_DISTRIBUTED_DEBUG=DETAIL mismatch report names the first rank, in rank order, whose fingerprint differs "
       "from the reporter's: when that rank J is above the reporter, J >= 2 and J is the highest rank in the logs, ranks "
       "0..J-1 (two or more) agree with the reporter, so rank J is the odd rank out, not the rank that printed the report",
       "torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp (CollectiveFingerPrint::verify_tensors compares the gathered "
       "fingerprints in rank order and reports the first that differs)",
       [](const context& ctx, const std::vector<const finding*>& root) -> std::optional<rank_decision> {
         std::set<int> odd;
         std::optional<int> by;
         for (const auto* f : root) {
           auto j = to_int(field(*f, "peer_rank"));
           auto r = to_int(field(*f, "rank"));
           if (!r) r = f->rank;
           if (!j || !r || *j <= *r || *j < 2) continue;  // a lower rank named, or two ranks only: no majority
           odd.insert(*j);
           by = *r;
         }
         if (odd.size() != 1) return std::nullopt;
         const int j = *odd.begin();
         // Ranks above J were not compared by the report: J must be the highest rank these logs show (it wrote
         // lines of its own), else ranks J and up may be a second block as large as the first (a length split
         // unevenly over four ranks: 0-1 against 2-3).
         if (ctx.all_ranks.empty() || *ctx.all_ranks.rbegin() != j) return std::nullopt;
         return rank_decision{j, std::nullopt,
                              "rank " + std::to_string(*by) + "'s check found rank" + (j > 2 ? "s 0-" + std::to_string(j - 1) : "s 0 and 1") +
                                  " running its collective and rank " + std::to_string(j) +
                                  " the first that differs (the check compares in rank order): rank " + std::to_string(j) +
                                  " is the odd rank out, not the rank that printed the report"};
       }},
      {"thread_died_on_waited_rank",
       "the root is a helper thread's uncaught exception ('Exception in thread NAME:' just before it); the ranks its lines "
       "were given timed out in a collective themselves, and exactly one rank never did: the thread was that rank's (its "
       "main loop blocked on the dead thread's work while the others waited for it)",
       "https://docs.python.org/3/library/threading.html#threading.excepthook (an uncaught exception ends its thread only; "
       "the process goes on)",
       [](const context& ctx, const std::vector<const finding*>& root) -> std::optional<rank_decision> {
         bool thread = false;
         for (const auto* f : root)
           for (const auto& g : ctx.fs)
             if (g.source == f->source && g.line_no < f->line_no && g.line_no + 40 >= f->line_no && ctx.sig(g).has_tag("event.thread_died"))
               thread = true;
         if (!thread) return std::nullopt;
         auto v = timeouts(ctx);
         // Timeout tracebacks printed with no prefix: the one worker that exited with an error code ended on them
         // (the stalled worker was still running and was stopped by its launcher).
         if (v.timed_out.empty()) {
           bool rankless_timeout = std::any_of(ctx.fs.begin(), ctx.fs.end(), [&](const finding& f) {
             return !f.rank && !f.local_rank && is_timeout(ctx.sig(f)) && !ctx.survived.count(&f);
           });
           std::set<int> failed;
           for (const auto& e : ctx.exits)
             if (e.rank && e.exitcode && *e.exitcode > 0) failed.insert(*e.rank);
           if (!rankless_timeout || failed.size() != 1) return std::nullopt;
           v.timed_out = failed;
           v.absent.clear();
           std::set<int> all = ctx.all_ranks;
           if (!all.empty() && *all.rbegin() < limits::kMaxListedRanks)
             for (int r = 0; r < *all.rbegin(); ++r) all.insert(r);
           for (int r : all)
             if (!failed.count(r)) v.absent.push_back(r);
         }
         if (v.timed_out.empty() || v.absent.size() != 1) return std::nullopt;
         auto rs = ranks_of(root);
         for (int r : rs)
           if (!v.timed_out.count(r)) return std::nullopt;  // a rank of the lines that did not time out: its own rank decides
         int c = v.absent[0];
         return rank_decision{c, std::nullopt,
                              "a helper thread died (\"Exception in thread\"); rank" + std::string(v.timed_out.size() > 1 ? "s " : " ") +
                                  text::rank_ranges({v.timed_out.begin(), v.timed_out.end()}) + " timed out waiting in a collective, rank " +
                                  std::to_string(c) + " never did: the thread was rank " + std::to_string(c) + "'s, whose main loop then stalled"};
       }},
      {"initiator_field", "the root-cause signature says which rank its line names (printing rank, named peer, rank 0, an exit code)",
       "docs/signatures.md (initiator)",
       [](const context& ctx, const std::vector<const finding*>& root) { return culprit_from(ctx, root); }},
      {"missing_client", "a store or rendezvous timeout reports that one of W clients never joined: the printing rank "
                         "waited, the culprit is the one rank of 0..W-1 that left no line",
       "torch/csrc/distributed/c10d/TCPStore.cpp (\"Timed out after N seconds waiting for clients. J/W clients joined.\")",
       [](const context& ctx, const std::vector<const finding*>& root) -> std::optional<rank_decision> {
         for (const auto* f : root) {
           auto world = to_int(field(*f, "world")), joined = to_int(field(*f, "joined"));
           if (!world || !joined || *joined >= *world || *world > 65536) continue;
           std::vector<int> missing;
           for (int r = 0; r < *world && missing.size() < 2; ++r)
             if (!ctx.all_ranks.count(r)) missing.push_back(r);
           if (*joined + 1 == *world && missing.size() == 1)
             return rank_decision{missing[0], std::nullopt,
                                  "rank " + std::to_string(missing[0]) + " is the one of " + std::to_string(*world) +
                                      " ranks that never wrote a line; the store waited for it (" + field(*f, "joined") + "/" +
                                      field(*f, "world") + " joined)"};
           return rank_decision{std::nullopt, std::nullopt,
                                field(*f, "joined") + "/" + field(*f, "world") +
                                    " clients joined: the rank that printed this waited; the ranks that never joined are not identifiable from these logs"};
         }
         return std::nullopt;
       }},
      {"only_rank", "the only rank that reported the root-cause error", "correlation by rank (docs/ARCHITECTURE.md)",
       [](const context&, const std::vector<const finding*>& root) -> std::optional<rank_decision> {
         auto r = ranks_of(root);
         if (r.size() != 1) return std::nullopt;
         return rank_decision{*r.begin(), std::nullopt, "the only rank that reported the root-cause error"};
       }},
      {"earliest_time", "among several ranks with the error, the earliest by time when it leads without a tie",
       "per-rank timelines merged by wall-clock time",
       [](const context&, const std::vector<const finding*>& root) -> std::optional<rank_decision> {
         auto ranks = ranks_of(root);
         if (ranks.size() < 2) return std::nullopt;
         // A time inherited from the line before (the exception line of a traceback has none of its own)
         // is approximate: it orders ranks only when it leads by more than a second.
         const finding* first = nullptr;
         for (const auto* f : root)
           if (f->rank && f->ts && (!first || before(f->ts, first->ts))) first = f;
         if (!first) return std::nullopt;
         for (const auto* f : root) {
           if (!f->rank || *f->rank == *first->rank) continue;
           if (!f->ts || f->ts->kind != first->ts->kind) return std::nullopt;  // a rank without a comparable time could have been first
           double margin = (f->ts_inherited || first->ts_inherited) ? 1.0 : 0.0;
           if (f->ts->seconds - first->ts->seconds <= margin) return std::nullopt;
         }
         return rank_decision{first->rank, std::nullopt,
                              "earliest root-cause line by time across " + std::to_string(ranks.size()) + " ranks"};
       }},
      {"torchelastic_root_among", "torchelastic's \"Root Cause (first observed failure)\" entry, among the ranks with the error",
       "https://pytorch.org/docs/stable/elastic/errors.html",
       [](const context& ctx, const std::vector<const finding*>& root) -> std::optional<rank_decision> {
         auto ranks = ranks_of(root);
         if (ranks.size() < 2) return std::nullopt;
         for (const auto& e : ctx.exits)
           if (e.root_cause && e.rank && ranks.count(*e.rank)) {
             auto tied = same_second_failures(ctx, e);
             std::erase_if(tied, [&](int r) { return ranks.count(r) == 0; });
             std::string why = "torchelastic's \"Root Cause (first observed failure)\" among the ranks with the error";
             // Stamped with the same second as another rank with the error: the entry does not order them. The
             // rank stays the entry's, and the report says it is a tie-break.
             if (!tied.empty()) why += tie_note(e, tied);
             return rank_decision{e.rank, std::nullopt, why};
           }
         return std::nullopt;
       }},
      {"local_rank_and_timeouts", "the root-cause line names only a local rank, and exactly one rank never timed out: "
                                  "the two constraints together give the rank",
       "cross-rank reasoning (unseen-logs issue, family 6)",
       [](const context& ctx, const std::vector<const finding*>& root) -> std::optional<rank_decision> {
         if (!ranks_of(root).empty()) return std::nullopt;
         std::optional<int> local;
         for (const auto* f : root)
           if (f->local_rank) local = f->local_rank;
         if (!local) return std::nullopt;
         auto v = timeouts(ctx);
         if (v.timed_out.empty() || v.absent.size() != 1) return std::nullopt;
         int c = v.absent[0];
         if (auto it = ctx.resolve.local_to_rank.find(*local); it != ctx.resolve.local_to_rank.end() && !it->second.count(c))
           return std::nullopt;  // known mappings of this local rank exclude the silent rank
         return rank_decision{c, std::nullopt,
                              "the error names local rank " + std::to_string(*local) + ", and rank " + std::to_string(c) +
                                  " is the only rank that never timed out in the collective"};
       }},
      {"host_ranks", "a node-level fault (no rank on its line) on a host where exactly one rank ran",
       "ranks per host learnt from lines that carry both",
       [](const context& ctx, const std::vector<const finding*>& root) -> std::optional<rank_decision> {
         if (!ranks_of(root).empty()) return std::nullopt;
         for (const auto* f : root) {
           if (!f->host) continue;
           auto it = ctx.in->host_ranks.find(*f->host);
           if (it != ctx.in->host_ranks.end() && it->second.size() == 1)
             return rank_decision{*it->second.begin(), f->host,
                                  "the only rank that ran on " + *f->host + ", where the fault was reported"};
         }
         return std::nullopt;
       }},
      {"culprit_anywhere", "a node-level root cause; another line names the culprit rank (initiator field)",
       "docs/signatures.md (initiator)",
       [](const context& ctx, const std::vector<const finding*>& root) -> std::optional<rank_decision> {
         if (!ranks_of(root).empty()) return std::nullopt;
         // A symptom names a culprit only when it reports who the others waited for (a synchronization kind);
         // a line that names the peer it lost (a store get reset) does not outrank the launcher's first failure.
         std::vector<const finding*> all;
         for (const auto& f : ctx.fs)
           if (ctx.sig(f).is_cause() || ctx.sig(f).category == "synchronization") all.push_back(&f);
         return culprit_from(ctx, all);
       }},
      {"torchelastic_root", "a node-level root cause; torchelastic's first observed failure (merged across nodes by time), "
                            "else the agent's first failed worker",
       "https://pytorch.org/docs/stable/elastic/errors.html",
       [](const context& ctx, const std::vector<const finding*>& root) -> std::optional<rank_decision> {
         if (!ranks_of(root).empty()) return std::nullopt;
         // Each agent only knows its own node: merge by the printed time (YYYY-MM-DD_HH:MM:SS everywhere).
         const extract::exit_record* best = nullptr;
         for (const auto& e : ctx.exits)
           if (e.root_cause && e.rank && !e.time.empty() && (!best || e.time < best->time)) best = &e;
         if (!best)
           for (const auto& e : ctx.exits)
             if ((e.from_agent_line || e.launcher == "srun") && e.rank && e.exitcode && *e.exitcode != 0) { best = &e; break; }
         if (!best) return std::nullopt;
         rank_decision d;
         d.rank = best->rank;
         if (!best->host.empty()) d.host = best->host;
         auto code = std::to_string(best->exitcode.value_or(0));
         d.why = first_failure_phrase(*best) + " (exit code " + code + ")";
         if (best->root_cause && best->launcher == "torchelastic")
           if (auto tied = same_second_failures(ctx, *best); !tied.empty()) d.why += tie_note(*best, tied);
         return d;
       }},
  };
  return rules;
}

}  // namespace ff::correlate::rules
