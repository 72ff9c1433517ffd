// The inference rules (correlate_rules.hpp): verdicts reasoned across ranks when no line states a cause.
// Split from rules.cpp, whose helpers they share (rules_detail.hpp).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <re2/re2.h>

#include "firstfault/correlate_rules.hpp"
#include "firstfault/limits.hpp"
#include "firstfault/text.hpp"
#include "correlate/rules_detail.hpp"
#include "kb_data/tables.hpp"

namespace ff::correlate::rules {

using normalize::timestamp;

namespace {

// Where a rank was blocked when the run died: a collective error raised inside a torch.distributed call (the
// traceback's innermost distributed_c10d frame, or autograd's backward engine, where DDP all-reduces
// gradients), either a timeout or gloo's "connection closed by peer" (tagged event.peer_closed: the rank was
// still waiting there when its peer exited). `place` is the call and the user's call site ("all_reduce at
// train.py:304 in main"): two ranks at different places are in different collectives.
struct blocked_at {
  const finding* f = nullptr;
  std::string call;
  std::string place;
  bool timed_out = false;
};

std::optional<blocked_at> blocked_of(const context& ctx, const finding& f) {
  auto call = field(f, "collective");
  if (call.empty() || ctx.survived.count(&f)) return std::nullopt;
  const auto& s = ctx.sig(f);
  bool closed = s.has_tag("event.peer_closed");
  if (!closed && !is_timeout(s)) return std::nullopt;
  blocked_at b{&f, call, call, !closed};
  auto site = field(f, "user_frame");  // "train.py:304 in main: dist.all_reduce(rl)"
  if (auto colon = site.find(": "); colon != std::string::npos) site.resize(colon);
  if (!site.empty()) b.place += " at " + site;
  return b;
}

// Each rank's place (a timeout before a closed connection: the rank's own failure first), and, when no
// collective error carries a rank (tracebacks printed on one console without a prefix), the rankless ones.
struct blocked_view {
  std::map<int, blocked_at> by_rank;
  std::vector<blocked_at> rankless;
};
blocked_view blocked(const context& ctx) {
  blocked_view v;
  for (const auto& f : ctx.fs) {
    auto b = blocked_of(ctx, f);
    if (!b) continue;
    if (!f.rank) { v.rankless.push_back(*b); continue; }
    auto it = v.by_rank.find(*f.rank);
    if (it == v.by_rank.end()) v.by_rank.emplace(*f.rank, *b);
    else if (b->timed_out && !it->second.timed_out) it->second = *b;
  }
  if (!v.by_rank.empty()) v.rankless.clear();
  // A call seen once without its call site (a traceback with no frame of the user's) cannot be told apart by
  // site: that call's places are the call alone, so a missing frame never makes two ranks look divergent.
  std::set<std::string> siteless;
  auto note = [&](const blocked_at& b) { if (b.place == b.call) siteless.insert(b.call); };
  auto strip = [&](blocked_at& b) { if (siteless.count(b.call)) b.place = b.call; };
  for (const auto& [_, b] : v.by_rank) note(b);
  for (const auto& b : v.rankless) note(b);
  for (auto& [_, b] : v.by_rank) strip(b);
  for (auto& b : v.rankless) strip(b);
  return v;
}

// Collectives every rank issues at the same point whatever its branch: a barrier ends a phase, DDP's gradient
// all-reduce runs in every backward. A rank waiting in one while another waits in an explicit call of the
// user's is at another point of the sequence: one rank issued a collective the other did not.
bool unconditional(const std::string& call) { return call == "barrier" || call == "monitored_barrier" || call == "backward"; }

// Seconds in tqdm's elapsed field (format_interval: "MM:SS", "H:MM:SS"), or none.
std::optional<double> elapsed_seconds(const std::string& s) {
  double total = 0;
  int parts = 0;
  std::size_t at = 0;
  while (at <= s.size()) {
    auto colon = s.find(':', at);
    auto part = to_int(s.substr(at, colon == std::string::npos ? std::string::npos : colon - at));
    if (!part) return std::nullopt;
    total = total * 60 + *part;
    ++parts;
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  if (parts < 2 || parts > 3) return std::nullopt;
  return total;
}

// Line `w` comes before finding `f`: earlier in the same file, or, in another file, no later on the same clock
// (both times the lines' own). Otherwise they are not ordered.
bool line_precedes(const inputs::marked_line& w, const finding& f) {
  if (w.source == f.source) return w.line_no < f.line_no;
  return w.ts && !w.ts_inherited && f.ts && w.ts->kind == f.ts->kind && w.ts->seconds <= f.ts->seconds;
}

// A rank's last progress step came after line `w`: later in the same file, or a second or more later by the
// step line's own time. Unordered (another file, no times) counts as after: no verdict rests on it.
bool step_after_line(const context& ctx, const rank_activity& a, const inputs::marked_line& w) {
  if (!a.last_step) return false;
  if (ctx.in->source_name(a.last_step_source) == w.source) return a.last_step_line_no > w.line_no;
  if (w.ts && !w.ts_inherited && a.last_step_ts && w.ts->kind == a.last_step_ts->kind) return a.last_step_ts->seconds >= w.ts->seconds + 1.0;
  return true;
}

}  // namespace

// A collective timed out and the last thing before it was one rank's own work (issue 43, "who is missing": the
// missing rank's last lines, and the gap between them and the timeout, say what it was doing). Used when the
// ranks do not say who is missing (timeout_absent_rank gave nothing: one rank's timeout in an excerpt, watchdog
// frames with no rank). Two kinds of evidence:
//  - a work line (activity.work: saving a checkpoint, evaluating, tokenizing) before the first timeout line of
//    its file, after which no rank that did not time out printed a step, of a rank that did not time out (its
//    prefix's rank or the rank its text names; a line of no rank when some rank is known not to have timed
//    out, or none is known), begun by the time the collective began when both times are known;
//  - a progress bar (tqdm, any unit) before the first timeout line, of no timed-out rank, whose elapsed time
//    equals the time the collective had waited (Timeout(ms) ... ran for N milliseconds), from 5 s less to 2 s
//    more: the bar's loop began when the collective did and ran through the whole wait. A training loop's
//    bar stops when its rank enters the collective, so its elapsed time says nothing of the wait.
std::optional<inference> work_spans_timeout(const context& ctx) {
  std::vector<const finding*> lines;
  std::set<int> timed_out;
  for (const auto& f : ctx.fs)
    if (is_timeout(ctx.sig(f)) && !ctx.survived.count(&f)) {
      lines.push_back(&f);
      if (f.rank) timed_out.insert(*f.rank);
    }
  if (lines.empty()) return std::nullopt;
  // Ranks known not to have timed out (every rank below the highest seen exists): a line of no rank is theirs.
  const bool someone_absent = timed_out.empty() || !timeouts(ctx).absent.empty();
  // Before the first timeout line of its own file, or of the run when its file has none.
  auto before_timeouts = [&](const inputs::marked_line& w) {
    bool same_file = false, ok = true, any = false;
    for (const auto* f : lines)
      if (f->source == w.source) {
        same_file = true;
        ok = ok && w.line_no < f->line_no;
      }
    if (same_file) return ok;
    for (const auto* f : lines) any = any || line_precedes(w, *f);
    return any;
  };
  // When the collective began: the watchdog's time minus how long it had run (own wall-clock times only).
  std::optional<double> began;
  std::vector<double> waited;
  for (const auto* f : lines) {
    auto ran = field(*f, "ran_ms");
    if (ran.empty()) continue;
    waited.push_back(std::atof(ran.c_str()) / 1000.0);
    if (!f->ts || f->ts_inherited || f->ts->kind != timestamp::clock::wall) continue;
    double b = f->ts->seconds - waited.back();
    began = began ? std::min(*began, b) : b;
  }
  auto rank_ok = [&](const std::optional<int>& r) { return r ? !timed_out.count(*r) : someone_absent; };
  auto no_progress_after = [&](const inputs::marked_line& w) {
    for (const auto& [k, a] : ctx.activity)
      if (!timed_out.count(k) && step_after_line(ctx, a, w)) return false;  // r did not time out (rank_ok)
    return true;
  };
  inference inf;
  inf.entry = "timeout_absent_rank0";
  inf.findings = lines;
  auto quote = [&](const inputs::marked_line& w, const std::optional<int>& r, const std::string& what) {
    std::string who = r ? "rank " + std::to_string(*r) + (work_rank_from_text(ctx, w) ? " (named in the line)" : "") : "a rank (the line names none)";
    inf.extra.push_back({w.source, who + " " + what + ": " + w.text, format_time(w.ts), w.line_no, r, std::nullopt});
  };
  // The last work line that qualifies.
  for (auto it = ctx.in->work_lines.rbegin(); it != ctx.in->work_lines.rend(); ++it) {
    const auto& w = *it;
    auto r = work_rank(ctx, w);
    if (!before_timeouts(w) || !rank_ok(r) || !no_progress_after(w)) continue;
    // Nor a progress line of no rank after it in its file (a script that logs steps on one rank, unprefixed: the
    // per-rank activity does not see them), before the timeout.
    if (std::any_of(ctx.in->fact_lines.begin(), ctx.in->fact_lines.end(), [&](const inputs::marked_line& p) {
          return !p.rank && !p.local_rank && p.source == w.source && p.line_no > w.line_no && before_timeouts(p) &&
                 std::any_of(p.fields.begin(), p.fields.end(), [](const auto& kv) { return kv.first == "step"; });
        }))
      continue;
    const bool timed = began && w.ts && !w.ts_inherited && w.ts->kind == timestamp::clock::wall;
    if (timed && w.ts->seconds > *began + 1.0) continue;  // begun after the collective: not what held it up
    inf.rank = r;
    inf.why = std::string(r ? "rank " + std::to_string(*r) : "a rank") + " started work of its own before the collective that " +
              (timed_out.empty() ? "timed out" : "rank" + std::string(timed_out.size() > 1 ? "s " : " ") +
                                                     text::rank_ranges({timed_out.begin(), timed_out.end()}) + " timed out in") +
              ", and no step followed it" + (timed ? " (it had begun when the collective began)" : "");
    quote(w, r, "started");
    return inf;
  }
  // A bar whose elapsed time is the collective's wait.
  if (waited.empty()) return std::nullopt;
  for (auto it = ctx.in->fact_lines.rbegin(); it != ctx.in->fact_lines.rend(); ++it) {
    const auto& w = *it;
    std::string el;
    for (const auto& [k, v] : w.fields)
      if (k == "elapsed") el = v;
    auto secs = elapsed_seconds(el);
    if (!secs || !before_timeouts(w)) continue;
    auto r = ctx.resolve(w.rank, w.local_rank);
    if (!rank_ok(r)) continue;
    for (double wait : waited)
      if (*secs >= wait - 5.0 && *secs <= wait + 2.0) {
        inf.rank = r;
        char b[160];
        std::snprintf(b, sizeof b, "a progress bar had run %s (%.0f s) when the collective had waited %.0f s: its loop began when the collective did",
                      el.c_str(), *secs, wait);
        inf.why = b;
        quote(w, r, "progress bar");
        return inf;
      }
    break;  // only the last bar before the timeout
  }
  return std::nullopt;
}

namespace {

// The launcher_exit entry an exit's code or signal gives: a kill, a segfault or an error code; empty for other
// signals (SIGTERM, SIGABRT), which say who stopped the worker, not why.
std::string exit_entry(int code, const std::string& signal) {
  return code == -9 || signal == "SIGKILL"    ? "launcher_exit_sigkill"
         : code == -11 || signal == "SIGSEGV" ? "launcher_exit_sigsegv"
         : code > 0                           ? "launcher_exit_error"
                                              : "";
}

// A launcher's or scheduler's report about a rank (torchelastic's failure summary, srun's task exit, mpirun's
// block), not the rank's own output.
bool launcher_report(const kb::signature& s) {
  return s.has_tag("component.torchelastic") || s.has_tag("component.launcher") || s.has_tag("component.slurm") || s.has_tag("component.mpi");
}

// The line that says rank `r` lost its connection to a peer (a signature tagged symptom.peer_gone), when every
// finding of that rank, survived ones aside, is a symptom: its failure was the loss of its peer. Else none.
const finding* lost_peer_only(const context& ctx, int r) {
  const finding* lost = nullptr;
  for (const auto& f : ctx.fs) {
    if (!f.rank || *f.rank != r || ctx.survived.count(&f) || launcher_report(ctx.sig(f))) continue;
    const auto& s = ctx.sig(f);
    if (s.is_cause()) return nullptr;
    if (s.has_tag("symptom.peer_gone") && !lost) lost = &f;
  }
  return lost;
}

// Rank `r` printed a finding of its own (survived ones and its launcher's reports about it aside).
bool has_own_finding(const context& ctx, int r) {
  return std::any_of(ctx.fs.begin(), ctx.fs.end(),
                     [&](const finding& f) { return f.rank && *f.rank == r && !ctx.survived.count(&f) && !launcher_report(ctx.sig(f)); });
}

}  // namespace

// The node that went silent (issue 43, "the first to stop"). In a multi-node job each node's launcher (the
// torchrun agent) reports its own workers' failures; a node whose ranks stop in the middle of training with no
// error, and whose launcher then says nothing either, while the ranks of every other node fail because a peer
// closed or reset its connection (a signature tagged symptom.peer_gone: gloo's "Connection closed by peer",
// NCCL's socket and remote errors, the store's reset), lost its agent and workers together: the node died, was
// rebooted or was killed. A worker that died alone is reported by its own agent (launcher_exit), a rank that
// hangs leaves its peers waiting (timeouts), not disconnected.
// Conditions: two or more hosts with ranks; exactly one host with no finding of its own (survived ones aside)
// and no exit record, whose every rank reported a progress step; every other host has a finding or a failed
// worker, and one of them a peer_gone line; some other host's launcher wrote an exit record (its output is in
// the logs, so the silent node's would be too); the silent ranks' last lines no later than a second after the
// other hosts' first failure, where both have their own time on one clock.
std::optional<inference> node_went_silent(const context& ctx) {
  // Each rank's host, where the run puts it on exactly one.
  std::map<int, std::string> host_of;
  std::map<int, int> hosts_per_rank;
  for (const auto& [h, rs] : ctx.in->host_ranks)
    for (int r : rs) {
      ++hosts_per_rank[r];
      host_of[r] = h;
    }
  for (const auto& [r, n] : hosts_per_rank)
    if (n > 1) host_of.erase(r);
  // A file's host: the host its findings name (per-node files, torchrun's agents on one machine each).
  std::map<std::string, std::set<std::string>> file_hosts;
  for (const auto& f : ctx.fs)
    if (f.host) file_hosts[f.source].insert(*f.host);
  auto host_of_file = [&](const std::string& src) -> std::optional<std::string> {
    auto it = file_hosts.find(src);
    if (it == file_hosts.end() || it->second.size() != 1) return std::nullopt;
    return *it->second.begin();
  };
  struct node {
    std::set<int> ranks;
    bool failed = false, peer_gone = false, exit_seen = false;
    const finding* first = nullptr;  ///< its earliest failure line
  };
  std::map<std::string, node> nodes;
  for (const auto& [r, h] : host_of) nodes[h].ranks.insert(r);
  if (nodes.size() < 2) return std::nullopt;
  std::vector<const finding*> gone;
  for (const auto& f : ctx.fs) {
    if (ctx.survived.count(&f)) continue;
    std::optional<std::string> h = f.host;
    if (!h && f.rank && host_of.count(*f.rank)) h = host_of[*f.rank];
    if (!h) h = host_of_file(f.source);
    if (!h || !nodes.count(*h)) return std::nullopt;  // a failure no node owns: not this picture
    auto& n = nodes[*h];
    n.failed = true;
    // Its first failure by the line's own time (an inherited time is only the earliest it can have been written).
    if (f.ts && !f.ts_inherited && (!n.first || before(f.ts, n.first->ts))) n.first = &f;
    if (ctx.sig(f).has_tag("symptom.peer_gone")) {
      n.peer_gone = true;
      gone.push_back(&f);
    }
  }
  bool agent_output = false;
  for (const auto& e : ctx.exits) {
    std::optional<std::string> h;
    if (!e.host.empty() && nodes.count(e.host)) h = e.host;
    if (!h && e.rank && host_of.count(*e.rank)) h = host_of[*e.rank];
    if (!h) h = host_of_file(e.source);
    if (!h || !nodes.count(*h)) continue;
    auto& n = nodes[*h];
    n.exit_seen = true;
    if (e.failed()) n.failed = true;
    agent_output = true;
  }
  if (gone.empty() || !agent_output) return std::nullopt;
  const std::string* silent = nullptr;
  for (const auto& [h, n] : nodes) {
    if (n.failed || n.exit_seen) continue;
    if (silent) return std::nullopt;  // two silent nodes: which one went first is not said
    silent = &h;
  }
  if (!silent) return std::nullopt;
  const auto& quiet = nodes[*silent];
  for (int r : quiet.ranks) {  // every rank of it was training
    auto it = ctx.activity.find(r);
    if (it == ctx.activity.end() || !it->second.last_step) return std::nullopt;
  }
  // Its ranks went quiet no later than the others' first failure (a second of noise), where that is known.
  for (const auto& [h, n] : nodes) {
    if (&h == silent || !n.first || !n.first->ts) continue;
    for (int r : quiet.ranks) {
      const auto& a = ctx.activity.at(r);
      if (a.last_ts && a.last_ts->kind == n.first->ts->kind && a.last_ts->seconds > n.first->ts->seconds + 1.0) return std::nullopt;
    }
  }
  inference inf;
  inf.entry = "node_went_silent";
  if (quiet.ranks.size() == 1) inf.rank = *quiet.ranks.begin();
  inf.findings = gone;
  std::vector<int> rs(quiet.ranks.begin(), quiet.ranks.end());
  inf.why = "host " + *silent + " (rank" + (rs.size() > 1 ? "s " : " ") + text::rank_ranges(rs) +
            ") stopped mid-training with no error and its launcher reported nothing, while the other nodes' ranks lost "
            "their connection to a peer";
  for (int r : rs)
    if (auto e = last_line_evidence(ctx, r); e && inf.extra.size() < 4) inf.extra.push_back(*e);
  return inf;
}

// A store read that names the rank it waited for (a signature tagged symptom.source_late: ProcessGroupNCCL's
// "[R] is setting up NCCL communicator and retrieving ncclUniqueId from [S] ... got error: Socket Timeout")
// timed out: the store answered nothing for the whole timeout because S never set the key, that is, S had not
// reached the communicator's first collective. When S printed no error of its own and no launcher saw it fail,
// it was busy alone before that collective (issue 43, "who is missing": tokenising or preprocessing on the main
// process under main_process_first is the classic case), the reading timeout_absent_rank gives a rank silent at
// the job's first collectives. A dead store or source gives "Connection reset by peer" or "refused" instead.
std::optional<inference> store_key_never_set(const context& ctx) {
  std::vector<const finding*> lines;
  std::set<int> sources, waiting;
  for (const auto& f : ctx.fs) {
    if (!ctx.sig(f).has_tag("symptom.source_late") || ctx.survived.count(&f)) continue;
    auto s = named_peer(f);
    if (!s) continue;
    sources.insert(*s);
    if (f.rank) waiting.insert(*f.rank);
    lines.push_back(&f);
  }
  if (sources.size() != 1) return std::nullopt;
  const int s = *sources.begin();
  if (waiting.count(s) || has_own_finding(ctx, s)) return std::nullopt;
  for (const auto& e : ctx.exits)
    if (e.rank && *e.rank == s && e.failed()) return std::nullopt;  // the launcher saw it fail: not late, dead
  inference inf;
  inf.entry = "timeout_absent_rank0";
  inf.rank = s;
  inf.findings = lines;
  inf.why = std::string(waiting.empty() ? "a rank" : "rank" + std::string(waiting.size() > 1 ? "s " : " ") +
                                                          text::rank_ranges({waiting.begin(), waiting.end()})) +
            " waited in the store for the NCCL id from rank " + std::to_string(s) + " until the read timed out; rank " + std::to_string(s) +
            " printed no error and no launcher saw it fail: it had not reached the first collective";
  if (auto e = last_line_evidence(ctx, s)) inf.extra.push_back(*e);
  return inf;
}

// A loss scale that collapsed toward its floor (issue 43, "numbers in any syntax": a loss scale collapsed to its
// floor is a failure, while halving from its initial value in the first steps is normal). The scaler halves the
// scale on each overflowing step and grows it only after a window of clean steps (DeepSpeed's DynamicLossScaler
// in runtime/fp16/loss_scaler.py: "OVERFLOW! Rank 0 Skipping step. Attempted loss scale: X, reducing to Y",
// and "Current loss scale already at minimum" once it is at min_loss_scale, default 1; apex's "Gradient
// overflow.  Skipping step, loss scaler 0 reducing loss scale to Y"). When the log stops before that last line,
// the halvings themselves say it: the last kLossScaleRun or more overflow lines each lower than the one before,
// the last below the signature's transient_above bound (ten halvings from the default floor), and none of them
// survived (no rank trained on past them, the run did not end well).
constexpr std::size_t kLossScaleRun = 3;
std::optional<inference> loss_scale_collapsed(const context& ctx) {
  std::vector<std::pair<const finding*, double>> run;
  for (const auto& f : ctx.fs) {
    const auto& s = ctx.sig(f);
    if (!s.has_tag("event.transient")) continue;
    if (auto x = transient_value(ctx, f)) run.emplace_back(&f, *x);
  }
  if (run.size() < kLossScaleRun) return std::nullopt;
  // In the order written: by their own times where every line has one on one clock, else by file and line.
  const bool timed = std::all_of(run.begin(), run.end(), [&](const auto& p) {
    return p.first->ts && !p.first->ts_inherited && p.first->ts->kind == run.front().first->ts->kind;
  });
  std::stable_sort(run.begin(), run.end(), [&](const auto& a, const auto& b) {
    if (timed) return a.first->ts->seconds < b.first->ts->seconds;
    return a.first->source != b.first->source ? a.first->source < b.first->source : a.first->line_no < b.first->line_no;
  });
  const auto& [last, scale] = run.back();
  const auto& sig = ctx.sig(*last);
  if (scale >= sig.transient_above || ctx.survived.count(last)) return std::nullopt;
  std::size_t falling = 1;
  for (std::size_t i = run.size() - 1; i > 0 && run[i].second < run[i - 1].second; --i) ++falling;
  if (falling < kLossScaleRun) return std::nullopt;
  const auto& first = run[run.size() - falling];
  // Halvings in the run's first steps from a small initial scale (fairseq starts at 2^7: 64, 32, 16 on its
  // first overflows) may be the scaler's search in a log cut early (a live run under watch). There the
  // collapse needs the run to have stopped too (a launcher reported a failure), or a scale within three
  // halvings of DeepSpeed's and Megatron's default floor of 1 (kNearFloor).
  constexpr double kNearFloor = 8;
  const bool stopped = any_worker_failed(ctx) || std::any_of(ctx.fs.begin(), ctx.fs.end(), [&](const finding& f) {
                         return launcher_report(ctx.sig(f)) && !ctx.survived.count(&f);
                       });
  if (settling(ctx, *first.first) && scale > kNearFloor && !stopped) return std::nullopt;
  inference inf;
  inf.entry = "loss_scale_collapsed";
  char b[200];
  std::snprintf(b, sizeof b, "the last %zu overflowing steps reduced the loss scale each time, to %g and down to %g: below %d "
                "and still falling toward the scaler's floor", falling, first.second, scale, sig.transient_above);
  inf.why = b;
  for (std::size_t i = run.size() - falling; i < run.size(); ++i) inf.findings.push_back(run[i].first);
  return inf;
}

// Longer than the ~120-line guideline on purpose: a table of rules in the order they are tried (see
// rank_rules()); kb lint checks that each rule's outputs have knowledge-base entries and back.
const std::vector<inference_rule>& inference_rules() {
  static const std::vector<inference_rule> rules = {
      {"numel_differs_at_seq", "watchdog lines at the same SeqNum with different NumelIn: ranks passed different sizes",
       "https://pytorch.org/docs/stable/distributed.html#debugging-torch-distributed-applications",
       {"numel_differs_at_seq"},
       [](const context& ctx) -> std::optional<inference> {
         std::map<std::string, std::map<std::string, std::vector<int>>> by_seq;
         for (const auto& f : ctx.fs) {
           auto seq = field(f, "seq"), n = field(f, "numel_in");
           if (!seq.empty() && !n.empty() && f.rank) by_seq[seq][n].push_back(*f.rank);
         }
         for (const auto& [seq, by_n] : by_seq) {
           if (by_n.size() < 2) continue;
           inference inf;
           inf.entry = "numel_differs_at_seq";
           const std::vector<int>* odd = nullptr;
           int singles = 0;
           bool majority = false;
           for (const auto& [n, rs] : by_n) {
             if (rs.size() == 1) { odd = &rs; ++singles; }
             else majority = true;
           }
           if (by_n.size() == 2 && singles == 1 && majority) {
             inf.rank = (*odd)[0];
             inf.why = "the only rank whose NumelIn differs at SeqNum " + seq;
           } else {
             inf.why = "NumelIn differs at SeqNum " + seq + " but no single rank stands out";
           }
           for (const auto& f : ctx.fs)
             if (field(f, "seq") == seq && !field(f, "numel_in").empty()) inf.findings.push_back(&f);
           return inf;
         }
         return std::nullopt;
       }},
      {"store_key_never_set", "a rank's store read for the NCCL id timed out, naming the source rank that never set it; that "
                              "rank printed no error and no launcher saw it fail: it was late to the first collective, "
                              "busy alone",
       "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (broadcastUniqueNCCLID: store->get of the source rank's "
       "ncclUniqueId); torch/csrc/distributed/c10d/Utils.hpp (recvBytes: \"Socket Timeout\" when the read times out)",
       {"timeout_absent_rank0"},
       [](const context& ctx) -> std::optional<inference> { return store_key_never_set(ctx); }},
      {"named_culprit", "a symptom line names the culprit (desync report, monitored barrier)",
       "https://pytorch.org/docs/stable/distributed.html#torch.distributed.monitored_barrier",
       {"timeout_absent_rank"},
       [](const context& ctx) -> std::optional<inference> {
         std::vector<const finding*> named;
         // Only a line that names the rank the others waited for (its kind a synchronization one: a desync
         // report, a monitored barrier, a dump signal). A line that names the peer it lost (a store get reset
         // by the rank that hosts it) names the rank that went first, but not a straggler: initiator_field
         // takes its rank for the root the line gives.
         for (const auto& f : ctx.fs)
           if (ctx.sig(f).category == "synchronization" && initiator_of(ctx, f)) named.push_back(&f);
         auto d = culprit_from(ctx, named);
         if (!d) return std::nullopt;
         return inference{"timeout_absent_rank", d->rank, d->why, named, {}};
       }},
      {"timeout_absent_rank", "every known rank but one timed out in a collective: the missing rank held them up "
                              "(rank 0 alone: exclusive work; a different last step: uneven inputs; else a straggler)",
       "https://pytorch.org/docs/stable/distributed.html (collectives block until every rank joins)",
       {"timeout_absent_rank", "timeout_absent_rank0", "timeout_absent_rank_uneven_steps"},
       [](const context& ctx) -> std::optional<inference> {
         auto v = timeouts(ctx);
         if (v.timed_out.empty() || v.absent.empty()) return std::nullopt;
         // A silent rank whose own traceback shows it blocked in another collective (gloo closed its connection
         // when the peer that timed out exited) was not slow: it had got past the collective its peers timed out
         // in (timeout_in_different_collectives reads it). Blocked in the same one, it arrived late: a straggler.
         {
           auto b = blocked(ctx);
           std::set<std::string> stuck;
           for (int r : v.timed_out)
             if (auto it = b.by_rank.find(r); it != b.by_rank.end()) stuck.insert(it->second.place);
           std::erase_if(v.absent, [&](int r) {
             auto it = b.by_rank.find(r);
             return !stuck.empty() && it != b.by_rank.end() && !stuck.count(it->second.place);
           });
           if (v.absent.empty()) return std::nullopt;
         }
         auto absent = v.absent;
         auto is_absent = [&](int r) { return std::find(absent.begin(), absent.end(), r) != absent.end(); };
         // The timed-out collective began `ran_ms` before the watchdog line (own wall-clock times only).
         std::optional<double> began;
         for (const auto* f : v.lines) {
           auto ran = field(*f, "ran_ms");
           if (!f->ts || f->ts_inherited || ran.empty() || f->ts->kind != timestamp::clock::wall) continue;
           double b = f->ts->seconds - std::atof(ran.c_str()) / 1000.0;
           began = began ? std::min(*began, b) : b;
         }
         // What the silent ranks were doing: their last work line (saving, evaluating, preprocessing). A line
         // with no rank is rank 0's when rank 0 is silent and wrote nothing attributed to it: scripts log on
         // rank 0 only (Hugging Face and Lightning log on the main process by default).
         std::map<int, const inputs::marked_line*> work;
         for (const auto& w : ctx.in->work_lines) {
           auto r = work_rank(ctx, w);  // its prefix's rank, or the one its own text names
           if (!r && !w.rank && !w.local_rank && !ctx.activity.count(0)) r = 0;
           if (r && is_absent(*r)) work[*r] = &w;
         }
         auto work_began = [&](const inputs::marked_line& w) {  // it started by the time the collective began
           return began && w.ts && !w.ts_inherited && w.ts->kind == timestamp::clock::wall && w.ts->seconds <= *began + 1.0;
         };
         // The work line came after the rank's last progress step: the work, not training, was the last
         // thing the rank did (no step at all, a later line of the same file, or a later own time).
         auto work_after_progress = [&](int r, const inputs::marked_line& w) {
           auto it = ctx.activity.find(r);
           if (it == ctx.activity.end() || !it->second.last_step) return true;
           const auto& a = it->second;
           if (ctx.in->source_name(a.last_step_source) == w.source) return w.line_no > a.last_step_line_no;
           return w.ts && !w.ts_inherited && a.last_step_ts && w.ts->kind == a.last_step_ts->kind && w.ts->seconds >= a.last_step_ts->seconds;
         };
         // Timeout arithmetic: of several silent ranks, the one whose last line (or work line) came before
         // the collective began never reached it.
         if (absent.size() > 1) {
           std::vector<int> stopped_before;
           if (began)
             for (int r : absent) {
               auto it = ctx.activity.find(r);
               bool by_line = it != ctx.activity.end() && it->second.last_ts && it->second.last_ts->kind == timestamp::clock::wall &&
                              it->second.last_ts->seconds <= *began + 1.0;
               bool by_work = work.count(r) && work_began(*work[r]) && work_after_progress(r, *work[r]);
               if (by_line || by_work) stopped_before.push_back(r);
             }
           // With no times: the one silent rank that said it started work of its own, the others silent.
           if (stopped_before.empty() && work.size() == 1 &&
               std::none_of(absent.begin(), absent.end(), [&](int r) { return r != work.begin()->first && ctx.activity.count(r); }))
             stopped_before.push_back(work.begin()->first);
           if (stopped_before.size() == 1) absent = stopped_before;
         }
         // Silent from the start: no line of the rank at all. At the job's first collectives (SeqNum 1-3: the
         // barrier after init_process_group, DDP's parameter broadcast) a rank that never arrived was still
         // doing start-up work alone (dataset preprocessing on the main process); later, its absence from an
         // excerpt says nothing about why, so no verdict is given.
         auto silent = [&](int r) { return !ctx.activity.count(r) && !work.count(r); };
         if (std::all_of(absent.begin(), absent.end(), silent)) {
           const finding* with_seq = nullptr;
           bool at_start = true;
           for (const auto* f : v.lines)
             if (auto seq = to_int(field(*f, "seq"))) {
               at_start &= *seq >= 1 && *seq <= 3;
               if (!with_seq) with_seq = f;
             }
           if (!with_seq || !at_start) return std::nullopt;
           inference inf;
           inf.entry = "timeout_absent_rank0";
           if (absent.size() == 1) inf.rank = absent[0];
           inf.findings = v.lines;
           inf.why = "ranks " + text::rank_ranges({v.timed_out.begin(), v.timed_out.end()}) + " timed out in the job's first collectives (SeqNum " +
                     field(*with_seq, "seq") + "); rank" + (absent.size() > 1 ? "s " : " ") + text::rank_ranges(absent) +
                     " never arrived and printed nothing: start-up work done by one rank alone";
           return inf;
         }
         if (absent.size() != 1) return std::nullopt;
         int c = absent[0];
         inference inf;
         inf.rank = c;
         inf.findings = v.lines;
         inf.why = "every other rank (" + text::rank_ranges({v.timed_out.begin(), v.timed_out.end()}) +
                   ") timed out in a collective; rank " + std::to_string(c) + " never did";
         // Corroboration: torchelastic sent SIGTERM to a worker that was still running (its pid is not
         // among the failed workers), which is what a rank stuck outside the collective looks like.
         // Only when exactly one such worker exists: after a failure torchelastic stops every survivor.
         std::vector<int> running;
         for (const auto& t : ctx.in->terminated)
           if (std::none_of(ctx.exits.begin(), ctx.exits.end(), [&](const auto& e) { return e.pid && *e.pid == t.pid; }) &&
               std::find(running.begin(), running.end(), t.pid) == running.end())
             running.push_back(t.pid);
         if (running.size() == 1)
           inf.why += "; torchelastic had to stop a worker that was still running (pid " + std::to_string(running[0]) + ")";
         // Uneven inputs only when the ranks said so: the silent rank planned a different number of steps
         // (its "N batches" or "i/N" lines). A rank that is merely a step behind is what a straggler looks
         // like too, and the straggler's fix (find what that rank was doing) covers both.
         // Plans are compared only between lines of one shape ("iter i/N" of the same loop): an evaluation
         // loop's "eval batch 2/400" on one rank says nothing about another rank's "step 1/1000".
         std::optional<long> own_plan, other_plan;
         int other_rank = -1;
         std::string own_shape;
         if (auto it = ctx.activity.find(c); it != ctx.activity.end() && it->second.planned_steps) {
           own_plan = it->second.planned_steps;
           own_shape = extract::line_template(it->second.planned_line);
         }
         for (const auto& [r, act] : ctx.activity) {
           if (!act.planned_steps || r == c || extract::line_template(act.planned_line) != own_shape) continue;
           if (!other_plan || *act.planned_steps > *other_plan) { other_plan = act.planned_steps; other_rank = r; }
         }
         inf.entry = "timeout_absent_rank";
         if (own_plan && other_plan && *own_plan != *other_plan) {
           inf.entry = "timeout_absent_rank_uneven_steps";
           inf.why += "; it planned " + std::to_string(*own_plan) + " steps, rank " + std::to_string(other_rank) +
                      " " + std::to_string(*other_plan);
           if (auto e = planned_evidence(ctx, c)) inf.extra.push_back(*e);
           if (auto e = planned_evidence(ctx, other_rank)) inf.extra.push_back(*e);
         } else if (work.count(c) && work_after_progress(c, *work[c])) {
           const auto& w = *work[c];
           inf.entry = "timeout_absent_rank0";
           inf.why += "; its last sign of life was work of its own" + std::string(work_began(w) ? ", begun when the collective began" : "");
           inf.extra.push_back({w.source, "rank " + std::to_string(c) + (w.rank || w.local_rank ? "" : work_rank_from_text(ctx, w) ? " (named in the line)" : " (a line of no rank)") + " started: " + w.text,
                                format_time(w.ts), w.line_no, c, std::nullopt});
         }
         // The rank's last line, unless it is the work line already quoted.
         if (auto e = last_line_evidence(ctx, c);
             e && std::none_of(inf.extra.begin(), inf.extra.end(), [&](const evidence& x) { return x.source == e->source && x.line_no == e->line_no; }))
           inf.extra.push_back(*e);
         return inf;
       }},
      {"timeout_in_different_collectives", "every rank is blocked in a collective (timed out, or closed by the peer that "
                                           "timed out), at different calls or call sites: the ranks disagree on which "
                                           "collective comes next. The peers got past the one a lone rank timed out in: "
                                           "sizes differed; a barrier or DDP's backward against an explicit call: one rank "
                                           "issued a collective the other did not; else different calls",
       "https://pytorch.org/docs/stable/distributed.html#debugging-torch-distributed-applications; "
       "https://github.com/pytorch/gloo/blob/main/gloo/transport/tcp/unbound_buffer.cc (waitSend/waitRecv timeouts); "
       "https://pytorch.org/docs/stable/notes/ddp.html (gradients all-reduced during backward)",
       {"timeout_in_different_collectives", "peers_passed_the_collective", "unconditional_vs_explicit_collective"},
       [](const context& ctx) -> std::optional<inference> {
         auto v = timeouts(ctx);
         auto b = blocked(ctx);
         // Every known rank is accounted for: it timed out, or it was blocked in a collective when its peer
         // exited. With no rank on any collective error, the rankless tracebacks stand for the ranks.
         std::erase_if(v.absent, [&](int r) { return b.by_rank.count(r) > 0; });
         bool rankless = b.by_rank.empty() && v.timed_out.empty();
         if (rankless ? b.rankless.size() < 2 : (v.timed_out.empty() || !v.absent.empty())) return std::nullopt;
         std::set<long> plans;
         for (const auto& [_, act] : ctx.activity)
           if (act.planned_steps) plans.insert(*act.planned_steps);
         if (plans.size() >= 2) return std::nullopt;  // uneven plans explain it better
         // Places, with the ranks (or rankless lines) blocked there and whether any of them timed out there.
         struct place_info {
           std::string call;
           std::set<int> ranks;
           int lines = 0;
           bool timed_out = false;
         };
         std::map<std::string, place_info> by_place;
         auto add = [&](const blocked_at& x, std::optional<int> r) {
           auto& p = by_place[x.place];
           p.call = x.call;
           if (r) p.ranks.insert(*r);
           ++p.lines;
           p.timed_out = p.timed_out || x.timed_out;
         };
         inference inf;
         if (rankless) {
           for (const auto& x : b.rankless) { add(x, std::nullopt); inf.findings.push_back(x.f); }
         } else {
           for (const auto& [r, x] : b.by_rank) { add(x, r); inf.findings.push_back(x.f); }
           for (const auto* f : v.lines)
             if (std::find(inf.findings.begin(), inf.findings.end(), f) == inf.findings.end()) inf.findings.push_back(f);
         }
         if (by_place.size() < 2) return std::nullopt;
         std::string calls;
         for (const auto& [pl, p] : by_place)
           calls += (calls.empty() ? "" : "; ") + pl + (p.ranks.empty() ? "" : " on rank" + std::string(p.ranks.size() > 1 ? "s " : " ") +
                                                                                   text::rank_ranges({p.ranks.begin(), p.ranks.end()})) +
                    (p.timed_out ? " (timed out)" : " (closed by its peer)");
         std::size_t stuck_places = 0, with_unconditional = 0;
         const place_info* stuck = nullptr;
         for (const auto& [_, p] : by_place) {
           if (p.timed_out) { ++stuck_places; stuck = &p; }
           if (unconditional(p.call)) ++with_unconditional;
         }
         // Some rank must have timed out: ranks that were only closed by their peers, at different places, lost
         // a peer that died (a SIGKILL, a crash), which says nothing of the order of their collectives.
         if (stuck_places == 0) return std::nullopt;
         // Only an explicit call can have been completed by the peers: a barrier or DDP's all-reduce needs every
         // rank, so peers blocked elsewhere never passed the one a rank is stuck in (they issued another call).
         if (stuck_places == 1 && !unconditional(stuck->call)) {
           // One place timed out; every other rank was still waiting elsewhere when the timed-out rank exited
           // and gloo closed its connection: they had entered their next collective after it entered its own,
           // past the collective it is stuck in. gloo paired their calls, and the timed-out rank waited for
           // data its peers never asked for (a send its peer never received): the sizes differed. A straggler
           // would be closed in the very collective its peers timed out in (timeout_absent_rank).
           inf.entry = "peers_passed_the_collective";
           inf.why = "ranks blocked in different collectives (" + calls + "): the others got past the collective " +
                     (stuck->ranks.size() == 1 ? "rank " + std::to_string(*stuck->ranks.begin()) : std::string("the timed-out ranks")) +
                     " timed out in; their 'connection closed by peer' is its exit, not slowness of theirs";
           if (stuck->ranks.size() == 1) inf.rank = *stuck->ranks.begin();
           return inf;
         }
         // Every place timed out, or the stuck one is a barrier or backward: the ranks waited in collectives that
         // never paired.
         inf.entry = with_unconditional > 0 && with_unconditional < by_place.size() ? "unconditional_vs_explicit_collective"
                                                                                      : "timeout_in_different_collectives";
         const place_info* odd = nullptr;
         int singles = 0;
         std::size_t ranked = 0;
         for (const auto& [_, p] : by_place) {
           ranked += p.ranks.size();
           if (p.ranks.size() == 1) { odd = &p; ++singles; }
         }
         if (by_place.size() == 2 && singles == 1 && ranked >= 3) {
           inf.rank = *odd->ranks.begin();
           inf.why = "the only rank in a different collective (" + calls + ")";
         } else {
           inf.why = "ranks blocked in different collectives (" + calls + "); with no majority, which one diverged is not in the logs";
         }
         if (inf.entry == "unconditional_vs_explicit_collective")
           inf.why += "; a barrier or DDP's backward, which every rank issues, against an explicit call: one rank issued a "
                      "collective the other did not";
         return inf;
       }},
      {"uneven_planned_steps", "every rank timed out, but the ranks planned different numbers of steps (uneven shards): the "
                               "rank with the fewest left the loop first",
       "https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler (drop_last)",
       {"timeout_absent_rank_uneven_steps"},
       [](const context& ctx) -> std::optional<inference> {
         auto v = timeouts(ctx);
         // Tracebacks printed without a rank prefix (interleaved on one console) still say the run died in
         // collective timeouts; with no rank known to be elsewhere, the plans alone decide.
         std::vector<const finding*> rankless;
         if (v.timed_out.empty())
           for (const auto& f : ctx.fs)
             if (is_timeout(ctx.sig(f)) && !f.rank && !ctx.survived.count(&f)) rankless.push_back(&f);
         // A rank that did not time out but lost its peer while blocked (gloo's "Connection closed by peer" in
         // backward's all-reduce: tag event.peer_closed) was in a collective too: its peer timed out and exited.
         std::set<int> lost_peer;
         for (const auto& f : ctx.fs)
           if (auto b = f.rank ? blocked_of(ctx, f) : std::nullopt; b && !b->timed_out) lost_peer.insert(*f.rank);
         const bool all_blocked = std::all_of(v.absent.begin(), v.absent.end(), [&](int r) { return lost_peer.count(r) > 0; });
         if (rankless.empty() && (v.timed_out.empty() || !all_blocked)) return std::nullopt;
         if (!rankless.empty()) v.lines = rankless;
         // Only plans stated by lines of one shape (the most common one) are compared: see timeout_absent_rank.
         std::map<std::string, int> shapes;
         std::map<int, std::string> shape_of;
         for (const auto& [r, act] : ctx.activity)
           if (act.planned_steps) ++shapes[shape_of[r] = extract::line_template(act.planned_line)];
         if (shapes.empty()) return std::nullopt;
         auto shape = std::max_element(shapes.begin(), shapes.end(), [](const auto& a, const auto& b) { return a.second < b.second; })->first;
         std::map<long, std::vector<int>> by_plan;
         for (const auto& [r, s] : shape_of)
           if (s == shape) by_plan[*ctx.activity.at(r).planned_steps].push_back(r);
         if (by_plan.size() < 2) return std::nullopt;
         inference inf;
         inf.entry = "timeout_absent_rank_uneven_steps";
         inf.findings = v.lines;
         const auto& fewest = by_plan.begin()->second;
         // The lines that decided: where the rank with the fewest steps and one rank with the most said so.
         if (auto e = planned_evidence(ctx, fewest[0])) inf.extra.push_back(*e);
         if (auto e = planned_evidence(ctx, by_plan.rbegin()->second[0])) inf.extra.push_back(*e);
         if (fewest.size() == 1) {
           if (auto e = last_line_evidence(ctx, fewest[0])) inf.extra.push_back(*e);
           inf.rank = fewest[0];
           inf.why = "rank " + std::to_string(fewest[0]) + " planned " + std::to_string(by_plan.begin()->first) +
                     " steps, the others " + std::to_string(by_plan.rbegin()->first) +
                     ": it left the loop first while its peers waited in a collective";
         } else {
           inf.why = "ranks planned different numbers of steps, but no single rank stands out";
         }
         return inf;
       }},
      {"stack_dump_odd_rank", "stack dumps (py-spy, faulthandler) of several ranks: all but one wait in a collective, the "
                              "one elsewhere (file I/O, data loading, its own work) held the others up",
       "https://github.com/benfred/py-spy (py-spy dump); https://docs.python.org/3/library/faulthandler.html",
       {"timeout_absent_rank"},
       [](const context& ctx) -> std::optional<inference> {
         // In a collective: a torch.distributed frame, DDP's reducer, or autograd's backward (DDP all-reduces
         // gradients there), as the innermost frame of the main thread.
         static const re2::RE2 coll_fn("^(?:" + kb::detail::regex_alternation(kb::detail::embedded_table("collective_calls")) + ")$");
         std::map<int, std::pair<bool, const inputs::dump_frame*>> by_rank;  // rank -> (in collective, a frame)
         for (const auto& [r, frames] : ctx.in->stack_tops) {
           bool any_main = std::any_of(frames.begin(), frames.end(), [](const auto& f) { return f.top.main_thread; });
           bool in_coll = false;
           const inputs::dump_frame* shown = nullptr;
           for (const auto& f : frames) {
             if (any_main && !f.top.main_thread) continue;
             bool c = f.top.file.find("torch/distributed") != std::string::npos ||
                      f.top.file.find("nn/parallel/distributed.py") != std::string::npos ||
                      re2::RE2::FullMatch(f.top.function, coll_fn);
             in_coll = in_coll || c;
             if (!shown || (!c && !in_coll)) shown = &f;
           }
           if (shown) by_rank[r] = {in_coll, shown};
         }
         if (by_rank.size() < 2) return std::nullopt;
         std::vector<int> elsewhere, waiting;
         for (const auto& [r, v] : by_rank) (v.first ? waiting : elsewhere).push_back(r);
         if (elsewhere.size() != 1 || waiting.empty()) return std::nullopt;
         int c = elsewhere[0];
         const auto* f = by_rank[c].second;
         inference inf;
         inf.entry = "timeout_absent_rank";
         inf.rank = c;
         inf.why = "stack dumps: ranks " + text::rank_ranges(waiting) + " wait in a collective, rank " + std::to_string(c) +
                   " is in " + f->top.function + " (" + f->top.file + ")";
         inf.extra.push_back({f->source, "rank " + std::to_string(c) + " innermost frame: " + f->top.text, "", f->line_no, c,
                              std::nullopt});
         return inf;
       }},
      {"work_spans_timeout", "a collective timed out, and the last thing before it was one rank's own work: a line that says it "
                             "started (saving, evaluating, tokenizing) after every step of the ranks that did not time out, "
                             "or a progress bar that had run as long as the collective waited; that rank worked alone",
       "https://pytorch.org/docs/stable/distributed.html#torch.distributed.init_process_group (timeout: collectives wait "
       "for every rank); https://github.com/tqdm/tqdm/blob/master/tqdm/std.py (format_meter: [{elapsed}<{remaining}])",
       {"timeout_absent_rank0"},
       [](const context& ctx) -> std::optional<inference> { return work_spans_timeout(ctx); }},
      {"node_went_silent", "the ranks of every node but one failed because a peer closed or reset its connection, and on that "
                           "one node the ranks stopped mid-training with no error and its launcher reported nothing: the "
                           "node (its agent and workers) went away",
       "https://pytorch.org/docs/stable/elastic/agent.html (each node's agent reports its own workers' failures); "
       "https://github.com/pytorch/gloo/blob/main/gloo/transport/tcp/pair.cc (a peer's socket closed or reset)",
       {"node_went_silent"},
       [](const context& ctx) -> std::optional<inference> { return node_went_silent(ctx); }},
      {"loss_scale_collapsed", "the fp16 loss scale was halved on each of the last overflowing steps down below the bound "
                               "where the scaler is still settling, and the run did not go on past them: it was collapsing to "
                               "its floor, where DeepSpeed stops the run",
       "https://github.com/deepspeedai/DeepSpeed/blob/master/deepspeed/runtime/fp16/loss_scaler.py (DynamicLossScaler.update_scale: "
       "halve on overflow, raise at min_scale); https://www.deepspeed.ai/docs/config-json/#fp16-training-options (min_loss_scale 1)",
       {"loss_scale_collapsed"},
       [](const context& ctx) -> std::optional<inference> { return loss_scale_collapsed(ctx); }},
      {"ends_in_launch_banner", "nothing looks wrong, but every input ends in the launcher's start-up (rendezvous, world "
                                "info): the job never got past start-up, usually because a node or worker never joined",
       "https://pytorch.org/docs/stable/elastic/run.html (rendezvous); DeepSpeed launcher (deepspeed/launcher/launch.py)",
       {"ends_in_launch_banner"},
       [](const context& ctx) -> std::optional<inference> {
         if (ctx.in->stream_ends.empty() || !ctx.fs.empty() || !ctx.in->suspicious.empty()) return std::nullopt;
         if (!ends_in_startup(ctx, false)) return std::nullopt;
         for (const auto& [_, act] : ctx.activity)
           if (act.last_step) return std::nullopt;  // a rank trained: this is not a start-up hang
         inference inf;
         inf.entry = "ends_in_launch_banner";
         inf.why = "every input ends in the launcher's start-up; no rank reported any progress";
         for (const auto& e : ctx.in->stream_ends)
           if (inf.extra.size() < 4) inf.extra.push_back({e.source, "last line: " + e.text, "", e.line_no, std::nullopt, std::nullopt});
         return inf;
       }},
      {"launcher_exit", "no line explains the failure, no rank timed out, and the launcher names the first worker that "
                        "exited (torchelastic Root Cause, mpirun's first process, srun's first task, CalledProcessError): "
                        "the exit code says what kind of end it was",
       "https://pytorch.org/docs/stable/elastic/errors.html; https://slurm.schedmd.com/srun.html; Open MPI help-orterun.txt",
       {"launcher_exit_error", "launcher_exit_sigkill", "launcher_exit_sigsegv"},
       [](const context& ctx) -> std::optional<inference> {
         // Waiting ranks (a timeout, with or without a rank): the launcher names a victim, not the cause.
         if (std::any_of(ctx.fs.begin(), ctx.fs.end(), [&](const finding& f) { return is_timeout(ctx.sig(f)) && !ctx.survived.count(&f); }))
           return std::nullopt;
         const extract::exit_record* best = nullptr;
         for (const auto& e : ctx.exits)  // the launcher's own "first failure" first
           if (e.root_cause && e.rank && e.exitcode && *e.exitcode != 0 && (!best || (!e.time.empty() && e.time < best->time)))
             best = &e;
         if (!best)
           for (const auto& e : ctx.exits)
             if (e.rank && e.exitcode && *e.exitcode != 0) { best = &e; break; }
         if (!best) {
           // A launcher of one process names no rank (accelerate's simple_launcher, a script's subprocess.run:
           // "CalledProcessError: Command '[...]' died with <Signals.SIGKILL: 9>"): when it is the only failed
           // exit, its code still says what kind of end it was; the rank stays unknown.
           const extract::exit_record* only = nullptr;
           for (const auto& e : ctx.exits)
             if (e.exitcode && *e.exitcode != 0) {
               if (only) return std::nullopt;
               only = &e;
             }
           if (!only) return std::nullopt;
           const int code = *only->exitcode;
           inference inf;
           inf.entry = exit_entry(code, only->signal);
           if (inf.entry.empty()) return std::nullopt;
           inf.why = "the launcher's only failed process, of no rank (exit code " + std::to_string(code) + ")";
           inf.extra.push_back({only->source, "launcher: its process exited with code " + std::to_string(code), only->time, only->line_no,
                                std::nullopt, only->host.empty() ? std::nullopt : std::optional<std::string>(only->host)});
           for (const auto& f : ctx.fs)
             if (ctx.sig(f).kind == "rank_exception" || ctx.sig(f).category == "launch") inf.findings.push_back(&f);
           return inf;
         }
         // The launcher's first failure may be a rank that only lost its peer (a connection closed or reset: a
         // line tagged symptom.peer_gone of its own): torchrun's "first observed failure" is the first exit its
         // agent noticed. Then the one other worker that failed without a line of its own (os._exit, a SIGKILL
         // with no message) went first (issue 43, the first to stop).
         std::string handed;
         const finding* lost = lost_peer_only(ctx, *best->rank);
         // A traceback of no rank that ends in the lost connection (two workers failed, so the collector could not
         // give it to one): Python exits with status 1 on an uncaught exception (Py_RunMain), so it is the one
         // failed worker with exit code 1, when the launcher's first failure is that worker.
         if (!lost && *best->exitcode == 1 && !has_own_finding(ctx, *best->rank)) {
           std::set<int> code1;
           for (const auto& e : ctx.exits)
             if (e.rank && e.exitcode && *e.exitcode == 1) code1.insert(*e.rank);
           if (code1.size() == 1)
             for (const auto& f : ctx.fs) {
               if (f.rank || f.local_rank || ctx.survived.count(&f) || launcher_report(ctx.sig(f))) continue;
               if (!raised_exception(f)) continue;  // an exception that ended its process
               if (!ctx.sig(f).has_tag("symptom.peer_gone")) { lost = nullptr; break; }
               if (!lost) lost = &f;
             }
         }
         if (lost) {
           const extract::exit_record* quiet = nullptr;
           for (const auto& e : ctx.exits) {
             // Only a failure that says why it stopped (an error code, SIGKILL, SIGSEGV): a worker the launcher
             // stopped (SIGTERM) or that aborted (SIGABRT) is not handed the blame.
             const bool says_why = *e.exitcode > 0 || *e.exitcode == -9 || *e.exitcode == -11 || e.signal == "SIGKILL" || e.signal == "SIGSEGV";
             if (!e.rank || *e.rank == *best->rank || !e.exitcode || *e.exitcode == 0 || !says_why || has_own_finding(ctx, *e.rank)) continue;
             if (quiet && *quiet->rank != *e.rank) { quiet = nullptr; break; }
             if (!quiet || (quiet->from_agent_line && !e.from_agent_line)) quiet = &e;
           }
           if (quiet) {
             handed = "; the launcher's first failure, rank " + std::to_string(*best->rank) + ", lost its connection to a peer (\"" +
                      std::string(text::prefix_utf8(lost->text, limits::kQuoteBytes)) + "\"), and rank " + std::to_string(*quiet->rank) +
                      " failed with no error of its own";
             best = quiet;
           }
         }
         int code = *best->exitcode;
         inference inf;
         inf.rank = best->rank;
         inf.entry = exit_entry(code, best->signal);
         if (inf.entry.empty()) return std::nullopt;  // other signals (SIGTERM, SIGABRT) say who stopped it, not why
         inf.why = handed.empty() ? first_failure_phrase(*best) + " (rank " + std::to_string(*best->rank) + ", exit code " + std::to_string(code) + ")"
                                  : "rank " + std::to_string(*best->rank) + " exited with code " + std::to_string(code) + handed;
         inf.extra.push_back({best->source, "launcher: rank " + std::to_string(*best->rank) + " exited with code " + std::to_string(code),
                              best->time, best->line_no, best->rank, best->host.empty() ? std::nullopt : std::optional<std::string>(best->host)});
         for (const auto& f : ctx.fs)
           if (ctx.sig(f).kind == "rank_exception" || ctx.sig(f).category == "launch") inf.findings.push_back(&f);
         return inf;
       }},
      {"xid_cleanup_names_prior", "no cause line, but the driver's Xid 45 cleanup notice names the earlier Xid that caused it",
       "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html (Xid 45: preemptive cleanup, due to previous errors)",
       {"xid_cleanup_names_prior"},
       [](const context& ctx) -> std::optional<inference> {
         inference inf;
         for (const auto& f : ctx.fs)
           if (!field(f, "prior_xid").empty()) inf.findings.push_back(&f);
         if (inf.findings.empty()) return std::nullopt;
         inf.entry = "xid_cleanup_names_prior";
         inf.why = "the GPU fault is node-level; no line names a rank";
         return inf;
       }},
      {"outside_stop_signal", "no line names a cause, no rank timed out or failed first, and the launcher itself received a "
                              "stop signal (SIGTERM/SIGINT/SIGHUP): the job was stopped from outside",
       "torch/distributed/elastic/agent/server/api.py (\"Received ... death signal, shutting down workers\")",
       {"outside_stop_signal"},
       [](const context& ctx) -> std::optional<inference> {
         static const re2::RE2 stop(R"(Received (?:Signals\.SIG(?:TERM|INT|HUP)|1|2|15) death signal, shutting down workers)");
         if (!timeouts(ctx).timed_out.empty()) return std::nullopt;
         for (const auto& e : ctx.exits)
           if (e.exitcode && *e.exitcode > 0) return std::nullopt;  // a worker failed on its own
         for (const auto& f : ctx.fs)
           if (re2::RE2::PartialMatch(f.text, stop)) {
             inference inf;
             inf.entry = "outside_stop_signal";
             inf.why = "the signal came from outside the job; no rank had failed before it";
             inf.findings.push_back(&f);
             return inf;
           }
         return std::nullopt;
       }},
  };
  return rules;
}

}  // namespace ff::correlate::rules
