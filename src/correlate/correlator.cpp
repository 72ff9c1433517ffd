// Cross-rank correlation: root cause, initiating rank, collateral. The rules are listed in
// docs/ARCHITECTURE.md ("Correlation rules"); each decision records the rule that made it.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <set>

#include "firstfault/correlate.hpp"
#include "firstfault/text.hpp"

namespace ff::correlate {

namespace {

using normalize::timestamp;

std::string fmt_ts(const std::optional<timestamp>& ts) {
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

// a strictly before b, comparable only on the same clock.
bool before(const std::optional<timestamp>& a, const std::optional<timestamp>& b) {
  if (!a || !b || a->kind != b->kind) return false;
  return a->seconds < b->seconds;
}

std::string field(const finding& f, const std::string& name) {
  for (const auto& [k, v] : f.captured)
    if (k == name) return v;
  return "";
}

std::optional<int> to_int(const std::string& s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  for (char c : s)
    if (c < '0' || c > '9') return std::nullopt;
  return std::stoi(s);
}

evidence to_evidence(const finding& f, std::optional<int> rank) {
  return {f.source, f.text, fmt_ts(f.ts), f.line_no, rank, f.host};
}

struct rank_resolver {
  std::map<int, std::set<int>> local_to_rank;  // a local rank seen with several ranks (nodes) maps to none
  bool single_node = false;
  std::optional<int> operator()(const std::optional<int>& rank, const std::optional<int>& local) const {
    if (rank) return rank;
    if (!local) return std::nullopt;
    if (auto it = local_to_rank.find(*local); it != local_to_rank.end())
      return it->second.size() == 1 ? std::optional<int>(*it->second.begin()) : std::nullopt;
    if (single_node) return local;  // one node: local rank == rank
    return std::nullopt;
  }
};

const kb::signature* inferred(const kb::library& lib, const std::string& rule) {
  for (const auto& s : lib.signatures)
    if (s.inferred_by == rule) return &s;
  return nullptr;
}

void fill_from_signature(diagnosis& d, const kb::signature& s) {
  d.signature = s.name;
  d.signature_id = s.id;
  d.kind = s.kind;
  d.category = s.category;
  d.title = s.title;
  d.priority = s.priority;
  d.fix = s.fix;
  d.fix_code = s.fix_code;
  d.verify = s.verify;
  d.confirm = s.confirm;
  d.references = s.references;
}

}  // namespace

diagnosis correlate(inputs in, const kb::library& lib) {
  diagnosis d;
  const auto sig = [&](const finding& f) -> const kb::signature& {
    return lib.signatures[static_cast<std::size_t>(f.signature)];
  };

  // --- ranks -----------------------------------------------------------------------------------
  rank_resolver resolve;
  resolve.local_to_rank = in.local_to_rank;
  std::set<std::string> exit_hosts;
  for (const auto& e : in.exits) {
    if (e.rank && e.local_rank) resolve.local_to_rank[*e.local_rank].insert(*e.rank);
    if (!e.host.empty()) exit_hosts.insert(e.host);
  }
  resolve.single_node = in.hosts.size() <= 1 && exit_hosts.size() <= 1;
  for (auto& e : in.exits)
    if (!e.rank) e.rank = resolve(std::nullopt, e.local_rank);
  std::set<int> all_ranks;
  for (const auto& [key, act] : in.activity) {
    int v = std::stoi(key.substr(1));
    auto r = key[0] == 'r' ? std::optional<int>(v) : resolve(std::nullopt, v);
    if (r) all_ranks.insert(*r);
  }

  // --- de-duplicate (a console log repeats the per-rank files) --------------------------------
  std::vector<finding> fs;
  {
    std::map<std::string, std::size_t> seen;
    for (auto& f : in.findings) {
      auto r = resolve(f.rank, f.local_rank);
      if (!r) r = to_int(field(f, "rank"));  // the message itself says which rank printed it
      if (!r) r = to_int(field(f, "task"));  // Slurm task id (srun starts one task per rank)
      if (!r) r = to_int(field(f, "tasks"));
      f.rank = r;
      std::string key = std::to_string(f.signature) + "|" + (r ? std::to_string(*r) : "-") + "|" + f.text;
      auto it = seen.find(key);
      if (it != seen.end()) {
        auto& kept = fs[it->second];
        ++kept.duplicates;
        if ((!kept.ts || kept.ts_inherited) && f.ts && !f.ts_inherited) {
          kept.ts = f.ts;
          kept.ts_inherited = false;
        }
        continue;
      }
      seen[key] = fs.size();
      fs.push_back(std::move(f));
    }
  }

  // --- root cause ------------------------------------------------------------------------------
  const finding* root = nullptr;
  for (const auto& f : fs) {
    if (!sig(f).is_cause()) continue;
    if (!root || sig(f).priority > sig(*root).priority ||
        (sig(f).priority == sig(*root).priority && before(f.ts, root->ts)))
      root = &f;
  }

  std::vector<const finding*> root_findings;
  const kb::signature* root_sig = nullptr;
  std::string rank_rule;
  std::optional<int> init_rank;

  // The rank a line names as the initiator, per its signature's `initiator` field.
  auto initiator_of = [&](const finding& f) -> std::optional<int> {
    const auto& s = sig(f);
    if (s.initiator == "printing_rank") return f.rank;
    if (s.initiator == "named_rank") {
      if (auto r = to_int(field(f, "peer_rank"))) return r;
      if (auto r = to_int(text::trim_copy(field(f, "ranks")))) return r;
      if (!field(f, "origin").empty()) return f.rank;
    }
    if (s.initiator == "rank_zero") return 0;
    if (s.initiator.rfind("exit_code:", 0) == 0) {  // the worker torchelastic saw die with this code
      int want = std::atoi(s.initiator.c_str() + 10);
      for (bool agent_lines : {false, true})  // the failure summary names global ranks; agent lines only local ones
        for (const auto& e : in.exits)
          if (e.from_agent_line == agent_lines && e.exitcode && *e.exitcode == want && e.rank) return e.rank;
    }
    return std::nullopt;
  };
  auto culprit_from = [&](const std::vector<const finding*>& list) -> bool {
    for (const auto* f : list)
      if (auto c = initiator_of(*f)) {
        init_rank = c;
        const auto& how = sig(*f).initiator;
        if (how == "printing_rank") rank_rule = "the rank that printed: \"" + std::string(text::prefix_utf8(f->text, 160)) + "\"";
        else if (how == "rank_zero") rank_rule = "this failure is rank 0's own work (" + sig(*f).title + ")";
        else if (how.rfind("exit_code:", 0) == 0) rank_rule = "the worker torchelastic reported with exit code " + how.substr(10);
        else rank_rule = "named in: \"" + std::string(text::prefix_utf8(f->text, 160)) + "\"" + (f->rank ? " (printed by rank " + std::to_string(*f->rank) + ")" : "");
        return true;
      }
    return false;
  };
  auto self_culprit = [&]() -> bool {
    std::vector<const finding*> all;
    for (const auto& f : fs) all.push_back(&f);
    return culprit_from(all);
  };
  auto exit_root = [&]() -> bool {
    // torchelastic's "Root Cause (first observed failure)": each agent only knows its own node, so
    // merge across nodes by the printed time (same format everywhere: YYYY-MM-DD_HH:MM:SS).
    const extract::exit_record* best = nullptr;
    for (const auto& e : in.exits)
      if (e.root_cause && e.rank && !e.time.empty() && (!best || e.time < best->time)) best = &e;
    if (!best) {  // the agent's first "failed (exitcode: N) local_rank: L" line
      for (const auto& e : in.exits)
        if (e.from_agent_line && e.rank && e.exitcode && *e.exitcode != 0) { best = &e; break; }
    }
    if (!best) return false;
    init_rank = best->rank;
    if (!best->host.empty()) d.initiating_host = best->host;
    rank_rule = best->root_cause ? "torchelastic's \"Root Cause (first observed failure)\" entry (exit code " +
                                       std::to_string(best->exitcode.value_or(0)) + ")"
                                 : "first worker the torchelastic agent saw fail (exit code " +
                                       std::to_string(best->exitcode.value_or(0)) + ")";
    return true;
  };

  if (root) {
    root_sig = &sig(*root);
    for (const auto& f : fs)
      if (f.signature == root->signature) root_findings.push_back(&f);
    // initiating rank
    if (!culprit_from(root_findings)) {
      std::set<int> ranks;
      for (const auto* f : root_findings)
        if (f->rank) ranks.insert(*f->rank);
      if (ranks.size() == 1) {
        init_rank = *ranks.begin();
        rank_rule = "the only rank that reported the root-cause error";
      } else if (ranks.size() > 1) {
        // A time inherited from the line before (the exception line of a traceback has none of its
        // own) is approximate: it orders ranks only when it leads by more than a second.
        const finding* first = nullptr;
        for (const auto* f : root_findings)
          if (f->rank && f->ts && (!first || before(f->ts, first->ts))) first = f;
        bool tie = false;
        for (const auto* f : root_findings)  // a rank without a comparable time could have been first
          if (f->rank && first && (!f->ts || f->ts->kind != first->ts->kind)) tie = true;
        if (first)
          for (const auto* f : root_findings) {
            if (!f->rank || !f->ts || *f->rank == *first->rank || f->ts->kind != first->ts->kind) continue;
            double margin = (f->ts_inherited || first->ts_inherited) ? 1.0 : 0.0;
            if (f->ts->seconds - first->ts->seconds <= margin) tie = true;
          }
        if (first && !tie) {
          init_rank = first->rank;
          rank_rule = "earliest root-cause line by time across " + std::to_string(ranks.size()) + " ranks";
        } else {
          // torchelastic root cause, if it names one of these ranks
          for (const auto& e : in.exits)
            if (e.root_cause && e.rank && ranks.count(*e.rank)) {
              init_rank = e.rank;
              rank_rule = "torchelastic's \"Root Cause (first observed failure)\" among the ranks with the error";
              break;
            }
          if (!init_rank) rank_rule = "ranks " + text::rank_ranges({ranks.begin(), ranks.end()}) +
                                      " all report it and their times do not order them";
        }
      } else if (!self_culprit() && !exit_root()) {
        rank_rule = "the root-cause line carries no rank (node or job level), and no per-rank evidence names one";
      }
    }
  }

  // --- inference when no cause-role line exists ------------------------------------------------
  if (!root) {
    std::vector<const finding*> syms;
    for (const auto& f : fs) syms.push_back(&f);
    // (a) the same SeqNum with different element counts across ranks: collective_shape_mismatch
    std::map<std::string, std::map<std::string, std::vector<int>>> numel_by_seq;
    for (const auto* f : syms) {
      auto seq = field(*f, "seq"), n = field(*f, "numel_in");
      if (!seq.empty() && !n.empty() && f->rank) numel_by_seq[seq][n].push_back(*f->rank);
    }
    for (const auto& [seq, by_n] : numel_by_seq) {
      if (by_n.size() < 2) continue;
      root_sig = inferred(lib, "numel_differs_at_seq");
      const std::vector<int>* odd = nullptr;
      int singles = 0;
      bool majority = false;
      for (const auto& [n, rs] : by_n) {
        if (rs.size() == 1) { odd = &rs; ++singles; }
        else majority = true;
      }
      if (by_n.size() == 2 && singles == 1 && majority) {
        init_rank = (*odd)[0];
        rank_rule = "the only rank whose NumelIn differs at SeqNum " + seq;
      } else {
        rank_rule = "NumelIn differs at SeqNum " + seq + " but no single rank stands out";
      }
      for (const auto* f : syms)
        if (field(*f, "seq") == seq && !field(*f, "numel_in").empty()) root_findings.push_back(f);
      break;
    }
    // (b) culprit named by a symptom line (desync report, monitored barrier)
    if (!root_sig) {
      std::vector<const finding*> named;
      for (const auto* f : syms)
        if (initiator_of(*f)) named.push_back(f);
      if (culprit_from(named)) {
        root_sig = inferred(lib, "timeout_absent_rank");
        root_findings = named;
      }
    }
    // (c) every rank but one timed out in a collective: the missing rank held them up
    if (!root_sig) {
      std::set<int> timed_out;
      std::vector<const finding*> timeouts;
      for (const auto* f : syms) {
        const auto& s = sig(*f);
        // A collective/barrier timeout: a symptom in the synchronization category, or tagged as a hang.
        bool hang = s.category == "synchronization" ||
                    std::find(s.tags.begin(), s.tags.end(), "symptom.hang") != s.tags.end() ||
                    std::find(s.tags.begin(), s.tags.end(), "symptom.timeout") != s.tags.end();
        if (hang && f->rank) {
          timed_out.insert(*f->rank);
          timeouts.push_back(f);
        }
      }
      for (const auto& e : in.exits)
        if (e.rank) all_ranks.insert(*e.rank);
      for (int r : timed_out) all_ranks.insert(r);
      // Ranks are numbered 0..world_size-1: a rank below the highest one seen exists even if it
      // wrote nothing we can attribute.
      if (!all_ranks.empty() && *all_ranks.rbegin() < 4096)
        for (int r = 0; r < *all_ranks.rbegin(); ++r) all_ranks.insert(r);
      std::vector<int> absent;
      for (int r : all_ranks)
        if (!timed_out.count(r)) absent.push_back(r);
      // Timeout arithmetic: the timed-out collective began `ran_ms` before the watchdog line. Of several
      // silent ranks, the one whose last line came before that moment never reached the collective.
      if (!timed_out.empty() && absent.size() > 1) {
        std::optional<double> began;
        for (const auto* f : timeouts) {
          auto ran = field(*f, "ran_ms");
          if (!f->ts || f->ts_inherited || ran.empty() || f->ts->kind != timestamp::clock::wall) continue;
          double b = f->ts->seconds - std::atof(ran.c_str()) / 1000.0;
          began = began ? std::min(*began, b) : b;
        }
        if (began) {
          std::vector<int> stopped_before;
          for (int r : absent) {
            auto it = in.activity.find("r" + std::to_string(r));
            if (it != in.activity.end() && it->second.last_ts && it->second.last_ts->kind == timestamp::clock::wall &&
                it->second.last_ts->seconds <= *began + 1.0)
              stopped_before.push_back(r);
          }
          if (stopped_before.size() == 1) absent = stopped_before;
        }
      }
      if (!timed_out.empty() && absent.size() == 1) {
        int c = absent[0];
        init_rank = c;
        rank_rule = "every other rank (" + text::rank_ranges({timed_out.begin(), timed_out.end()}) +
                    ") timed out in a collective; rank " + std::to_string(c) + " never did";
        // Corroboration: torchelastic sent SIGTERM to a worker that was still running (its pid is not
        // among the failed workers), which is what a rank stuck outside the collective looks like.
        for (const auto& t : in.terminated) {
          bool failed = std::any_of(in.exits.begin(), in.exits.end(), [&](const auto& e) { return e.pid && *e.pid == t.pid; });
          if (!failed) {
            rank_rule += "; torchelastic had to stop a worker that was still running (pid " + std::to_string(t.pid) + ")";
            break;
          }
        }
        // What was the missing rank doing? More steps than the others: it ran out of data later
        // or earlier (uneven inputs); otherwise it was slow. Rank 0 alone: exclusive work.
        std::optional<long> own, others_max;
        for (const auto& [key, act] : in.activity) {
          int v = std::stoi(key.substr(1));
          auto r = key[0] == 'r' ? std::optional<int>(v) : resolve(std::nullopt, v);
          if (!r || !act.last_step) continue;
          if (*r == c) own = act.last_step;
          else others_max = std::max(others_max.value_or(*act.last_step), *act.last_step);
        }
        std::string rule = "timeout_absent_rank";
        if (own && others_max && *own != *others_max) rule = "timeout_absent_rank_uneven_steps";
        else if (c == 0) rule = "timeout_absent_rank0";
        root_sig = inferred(lib, rule);
        if (!root_sig) root_sig = inferred(lib, "timeout_absent_rank");
        root_findings = timeouts;
        if (auto it = in.activity.find("r" + std::to_string(c)); it != in.activity.end())
          d.evidence_lines.push_back({"", "last line of rank " + std::to_string(c) + ": " + it->second.last_line,
                                      fmt_ts(it->second.last_ts), 0, c, std::nullopt});
      } else if (!timed_out.empty() && absent.empty()) {
        // (d) every rank timed out, but they planned different numbers of steps (uneven shards):
        // the rank with the fewest left the loop first and waits elsewhere.
        std::map<long, std::vector<int>> by_plan;
        for (const auto& [key, act] : in.activity) {
          int v = std::stoi(key.substr(1));
          auto r = key[0] == 'r' ? std::optional<int>(v) : resolve(std::nullopt, v);
          if (r && act.planned_steps) by_plan[*act.planned_steps].push_back(*r);
        }
        for (auto& [_, rs] : by_plan) {
          std::sort(rs.begin(), rs.end());
          rs.erase(std::unique(rs.begin(), rs.end()), rs.end());
        }
        // (e) every rank timed out, in different torch.distributed calls: the ranks disagree on which
        // collective comes next (order or type mismatch).
        std::map<std::string, std::set<int>> by_call;
        for (const auto* f : timeouts)
          if (auto c = field(*f, "collective"); !c.empty() && f->rank) by_call[c].insert(*f->rank);
        if (by_plan.size() < 2 && by_call.size() >= 2) {
          root_sig = inferred(lib, "timeout_in_different_collectives");
          root_findings = timeouts;
          std::string calls;
          for (const auto& [c, rs] : by_call)
            calls += (calls.empty() ? "" : ", ") + c + " on rank(s) " + text::rank_ranges({rs.begin(), rs.end()});
          const std::set<int>* odd = nullptr;
          int singles = 0;
          for (const auto& [c, rs] : by_call)
            if (rs.size() == 1) { odd = &rs; ++singles; }
          if (by_call.size() == 2 && singles == 1 && timed_out.size() >= 3) {
            init_rank = *odd->begin();
            rank_rule = "the only rank in a different collective (" + calls + ")";
          } else {
            rank_rule = "ranks timed out in different collectives (" + calls + "); which one diverged first is not in the logs";
          }
        }
        if (!root_sig && by_plan.size() >= 2) {
          root_sig = inferred(lib, "timeout_absent_rank_uneven_steps");
          root_findings = timeouts;
          const auto& fewest = by_plan.begin()->second;
          if (fewest.size() == 1) {
            init_rank = fewest[0];
            rank_rule = "rank " + std::to_string(fewest[0]) + " planned " + std::to_string(by_plan.begin()->first) +
                        " steps, the others " + std::to_string(by_plan.rbegin()->first) +
                        ": it left the loop first while its peers waited in a collective";
          } else {
            rank_rule = "ranks planned different numbers of steps, but no single rank stands out";
          }
        }
      }
    }
  }

  // --- verdict --------------------------------------------------------------------------------
  // Honest verdict: healthy only when nothing looks like a failure (no finding, no line that looks
  // wrong after benign messages were set aside, no failed worker).
  bool any_suspicious = !in.suspicious.empty();
  bool bad_exit = std::any_of(in.exits.begin(), in.exits.end(), [](auto& e) { return e.exitcode && *e.exitcode != 0; });
  if (root_sig) {
    d.verdict = "failure";
    fill_from_signature(d, *root_sig);
    if (!root) d.priority = 0;
  } else if (!fs.empty() || any_suspicious || bad_exit) {
    d.verdict = "undetermined";
    rank_rule = "no signature explains the failure";
  } else {
    d.verdict = "healthy";
  }
  d.initiating_rank = init_rank;
  d.initiating_rule = rank_rule;
  d.exits = in.exits;

  // evidence: the root lines, earliest first, one per rank, at most 6
  if (!root_sig) root_findings.clear();
  if (!root_findings.empty()) {
    std::vector<const finding*> ev = root_findings;
    std::stable_sort(ev.begin(), ev.end(), [](const finding* a, const finding* b) { return before(a->ts, b->ts); });
    if (init_rank)  // the initiating rank's line first
      std::stable_partition(ev.begin(), ev.end(), [&](const finding* f) { return f->rank == init_rank; });
    std::set<std::string> used;
    for (const auto* f : ev) {
      std::string k = f->rank ? std::to_string(*f->rank) : f->source + f->text;
      if (used.count(k)) continue;
      used.insert(k);
      d.evidence_lines.insert(d.evidence_lines.begin() + static_cast<long>(std::min<std::size_t>(used.size() - 1, d.evidence_lines.size())),
                              to_evidence(*f, f->rank));
      if (used.size() >= 6) break;
    }
    const finding* lead = ev.front();
    if (!d.initiating_host && init_rank)
      for (const auto* f : ev)
        if (f->rank == init_rank && f->host) { d.initiating_host = f->host; break; }
    if (!d.initiating_host && lead->host && (!init_rank || lead->rank == init_rank)) d.initiating_host = lead->host;
    // summary and fix from the templates; a lookup table (Xid number -> NVIDIA's meaning) adds facts
    std::string key = root_sig->lookup_field.empty() ? "" : field(*lead, root_sig->lookup_field);
    if (key.empty() && !root_sig->lookup_field.empty())
      for (const auto* f : ev)
        if (!(key = field(*f, root_sig->lookup_field)).empty()) break;
    if (!key.empty()) {
      auto k = lib.lookup(*root_sig, key, "kind");
      if (const auto* ki = k.empty() ? nullptr : lib.kind(k)) {
        d.kind = ki->kind;
        d.category = ki->category;
      }
    }
    auto value = [&](const std::string& name) -> std::string {
      if (name == "rank") return init_rank ? std::to_string(*init_rank) : (lead->rank ? std::to_string(*lead->rank) : "");
      if (name == "host") return d.initiating_host.value_or(lead->host.value_or(""));
      if (name == "ts") return fmt_ts(lead->ts);
      if (name.rfind("lookup.", 0) == 0) return key.empty() ? "" : lib.lookup(*root_sig, key, name.substr(7));
      auto v = field(*lead, name);
      if (v.empty())
        for (const auto* f : ev)
          if (!(v = field(*f, name)).empty()) break;
      return v;
    };
    d.summary = text::fill_template(root_sig->root_cause, [&](const std::string& name) -> std::string {
      auto v = value(name);
      if (!v.empty()) return v;
      return name == "host" ? "(unknown host)" : "(unknown)";
    });
    // A fix or confirm step whose placeholders all have values is shown filled; otherwise as written.
    auto fill_list = [&](std::vector<std::string>& list) {
      for (auto& line : list) {
        bool all = true;
        auto filled = text::fill_template(line, [&](const std::string& name) {
          auto v = value(name);
          all = all && !v.empty();
          return v;
        });
        if (all) line = filled;
      }
    };
    fill_list(d.fix);
    fill_list(d.verify);
    fill_list(d.confirm);
  } else if (root_sig) {
    d.summary = text::fill_template(root_sig->root_cause, [&](const std::string& name) -> std::string {
      if (name == "rank") return init_rank ? std::to_string(*init_rank) : "(unknown)";
      return "(unknown)";
    });
  }
  // confidence
  if (d.verdict == "failure") {
    if (root && root_sig->priority >= 70) d.confidence = (init_rank || root_findings.size() <= 1 || !root->rank) ? "high" : "medium";
    else if (root) d.confidence = "medium";
    else d.confidence = "low";
  }

  // --- collateral and alternatives -------------------------------------------------------------
  std::map<int, collateral_group> groups;
  std::map<std::string, alternative> alts;
  for (const auto& f : fs) {
    if (root && f.signature == root->signature) continue;
    const auto& s = sig(f);
    if (s.is_cause() && (!root_sig || s.kind != root_sig->kind)) {
      auto& a = alts[s.name];
      if (a.signature.empty()) a = {s.name, s.kind, s.title, s.priority, to_evidence(f, f.rank)};
    }
    auto& g = groups[f.signature];
    if (g.signature.empty()) {
      g.signature = s.name;
      g.kind = s.kind;
      g.title = s.title;
      g.role = s.role;
      g.example = to_evidence(f, f.rank);
    }
    g.count += 1 + f.duplicates;  // every matching line, repeats across files and processes included
    if (f.rank) g.ranks.push_back(*f.rank);
  }
  for (auto& [_, g] : groups) {
    std::sort(g.ranks.begin(), g.ranks.end());
    g.ranks.erase(std::unique(g.ranks.begin(), g.ranks.end()), g.ranks.end());
    if (d.verdict == "failure") {
      std::string of = init_rank ? "rank " + std::to_string(*init_rank) + "'s " + d.title : d.title;
      g.explanation = g.role == "symptom" ? "collateral of " + of : "secondary error, likely a consequence of " + of;
    } else {
      g.explanation = g.role == "symptom" ? "a consequence of a failure elsewhere" : "possible cause";
    }
    d.collateral.push_back(std::move(g));
  }
  std::stable_sort(d.collateral.begin(), d.collateral.end(),
                   [](const collateral_group& a, const collateral_group& b) { return a.count > b.count; });
  for (auto& [_, a] : alts) d.alternatives.push_back(std::move(a));
  std::stable_sort(d.alternatives.begin(), d.alternatives.end(),
                   [](const alternative& a, const alternative& b) { return a.priority > b.priority; });
  if (d.verdict != "healthy") {
    // Severity first, then rarity across ranks (the odd rank out first), then order of appearance.
    d.suspicious = in.suspicious;
    std::stable_sort(d.suspicious.begin(), d.suspicious.end(), [](const suspicious_line& a, const suspicious_line& b) {
      if (a.strong != b.strong) return a.strong;
      return std::max<std::size_t>(1, a.ranks.size()) < std::max<std::size_t>(1, b.ranks.size());
    });
    if (d.suspicious.size() > in.max_suspicious_shown) d.suspicious.resize(in.max_suspicious_shown);
  }
  return d;
}

}  // namespace ff::correlate
