// How the run ended, and each rank's story (issue 43: "an outcome per run and per attempt, from the evidence
// of every launcher and scheduler, and a story per rank: first and last line, last progress with its time,
// errors with their times, exit or signal. Each source keeps its own clock; where times cannot be compared,
// say so."). Facts of the report: nothing here changes the verdict.
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "firstfault/correlate_rules.hpp"
#include "firstfault/limits.hpp"
#include "firstfault/text.hpp"
#include "correlate/rules_detail.hpp"

namespace ff::correlate {

std::string_view to_string(run_outcome::state s) {
  switch (s) {
    case run_outcome::state::ended_well: return "ended well";
    case run_outcome::state::failed: return "failed";
    case run_outcome::state::unknown: return "no end seen";
  }
  return "no end seen";
}

namespace rules {
namespace {

using normalize::timestamp;

std::string clock_name(const std::optional<timestamp>& ts) {
  if (!ts) return "";
  return ts->kind == timestamp::clock::uptime ? "uptime" : "wall";
}

// "exit code 1", "SIGKILL (exit code -9)": a launcher's record of one worker, in words ("" when it has neither).
std::string exit_words(const extract::exit_record& e) {
  if (!e.signal.empty()) return e.signal + (e.exitcode ? " (exit code " + std::to_string(*e.exitcode) + ")" : "");
  if (e.exitcode) return "exit code " + std::to_string(*e.exitcode);
  return "";
}

// Orders two lines by their own times on one clock, else not at all (nullopt).
std::optional<bool> earlier(const finding& a, const finding& b) {
  if (a.source == b.source) return a.line_no < b.line_no;
  if (!a.ts || !b.ts || a.ts_inherited || b.ts_inherited || a.ts->kind != b.ts->kind) return std::nullopt;
  return a.ts->seconds < b.ts->seconds;
}

}  // namespace

std::vector<rank_story> rank_stories(const context& ctx, std::optional<int> keep, std::size_t* total) {
  std::set<int> ranks;
  for (const auto& [r, _] : ctx.activity) ranks.insert(r);
  for (const auto& e : ctx.exits)
    if (e.rank) ranks.insert(*e.rank);
  for (const auto& f : ctx.fs)
    if (f.rank) ranks.insert(*f.rank);
  if (total) *total = ranks.size();
  // At most kMaxRankStories, in rank order, `keep` (the first failing rank) always among them.
  std::set<int> told;
  if (keep && ranks.count(*keep)) told.insert(*keep);
  for (int r : ranks) {
    if (told.size() >= limits::kMaxRankStories) break;
    told.insert(r);
  }
  // Each told rank's errors: lines of a cause or symptom signature the run did not survive; the first by the
  // lines' own order (same file) or times (one clock), else the first read.
  std::map<int, std::pair<int, const finding*>> errors;
  std::set<std::tuple<int, std::string, std::uint64_t>> counted;  // a line that matched two signatures counts once
  for (const auto& f : ctx.fs) {
    if (!f.rank || !told.count(*f.rank) || ctx.survived.count(&f)) continue;
    const auto role = ctx.sig(f).role;
    if (role != kb::role::cause && role != kb::role::symptom) continue;
    auto& [n, first] = errors[*f.rank];
    if (counted.insert({*f.rank, f.source, f.line_no}).second) ++n;
    if (!first || earlier(f, *first).value_or(false)) first = &f;
  }
  // How each ended: the first record that says it failed, else the first record.
  std::map<int, const extract::exit_record*> exits;
  for (const auto& e : ctx.exits)
    if (e.rank && told.count(*e.rank)) {
      auto& rec = exits[*e.rank];
      if (!rec || (e.failed() && !rec->failed())) rec = &e;
    }
  // The host of each rank, when exactly one host named it.
  std::map<int, std::set<std::string>> hosts;
  for (const auto& [h, rs] : ctx.in->host_ranks)
    for (int r : rs)
      if (told.count(r)) hosts[r].insert(h);
  std::vector<rank_story> out;
  out.reserve(told.size());
  for (int r : told) {
    rank_story s;
    s.rank = r;
    if (auto h = hosts.find(r); h != hosts.end() && h->second.size() == 1) s.host = *h->second.begin();
    if (auto it = ctx.activity.find(r); it != ctx.activity.end()) {
      const auto& a = it->second;
      s.lines = a.lines;
      if (a.lines) {
        // The first and last lines may have no time of their own: the times are those of the first and last
        // lines that had one, shown apart (pairing a line with another line's time is a wrong fact).
        s.first = evidence{ctx.in->source_name(a.first_source), "", "", a.first_line_no, r, s.host};
        s.last = evidence{ctx.in->source_name(a.last_source), a.last_line, "", a.last_line_no, r, s.host};
        s.first_time = format_time(a.first_ts);
        s.last_time = format_time(a.last_ts);
      }
      if (a.last_step) {
        s.last_step = a.last_step;
        s.last_step_at = evidence{ctx.in->source_name(a.last_step_source), "", format_time(a.last_step_ts), a.last_step_line_no, r, s.host};
      }
      s.clock = clock_name(a.last_ts ? a.last_ts : a.first_ts);
    }
    if (auto it = errors.find(r); it != errors.end()) {
      const finding* first = it->second.second;
      s.errors = it->second.first;
      // (a time the line inherited from an earlier line is not its own: not shown, not compared)
      // (its text clipped to a quote: a story is a summary, the evidence sections quote lines whole)
      s.first_error = evidence{first->source, std::string(text::prefix_utf8(first->text, limits::kQuoteBytes)),
                               first->ts_inherited ? "" : format_time(first->ts), first->line_no, r, first->host};
    }
    if (auto it = exits.find(r); it != exits.end() && !exit_words(*it->second).empty())
      s.exit = exit_words(*it->second) + " (" + it->second->launcher + ")";
    out.push_back(std::move(s));
  }
  return out;
}

run_outcome outcome_of(const context& ctx, const std::vector<rank_story>& stories) {
  run_outcome o;
  auto first_failed = [&]() -> const extract::exit_record* {
    const extract::exit_record* best = nullptr;
    for (const auto& e : ctx.exits)
      if (e.failed() && (!best || (e.root_cause && !best->root_cause))) best = &e;
    return best;
  };
  if (const auto* w = ctx.ended_well) {
    o.what = run_outcome::state::ended_well;
    o.how = w->job ? "a launcher or trainer said the job finished" : "every rank that wrote a line said it finished";
    o.line = evidence{w->source, w->text, format_time(w->ts), w->line_no, w->rank, std::nullopt};
  } else if (const auto* e = first_failed()) {
    o.what = run_outcome::state::failed;
    std::string who = e->rank ? "rank " + std::to_string(*e->rank) : e->local_rank ? "local rank " + std::to_string(*e->local_rank) : "a worker";
    if (!e->rank && !e->host.empty()) who += " on " + e->host;
    o.how = e->launcher + ": " + who + " ended with " + exit_words(*e);
    o.line = evidence{e->source, "", e->time, e->line_no, e->rank, e->host.empty() ? std::nullopt : std::optional<std::string>(e->host)};
  } else {
    o.how = "no launcher or scheduler line says how the run ended";
  }
  // Clocks: ranks whose times are on another clock, or carry none, are not ordered against the others.
  std::map<std::string, std::vector<int>> by_clock;
  for (const auto& s : stories)
    if (s.lines) by_clock[s.clock].push_back(s.rank);
  if (by_clock.size() > 1) {
    std::string words;
    for (const auto& [clock, rs] : by_clock) {
      if (!words.empty()) words += "; ";
      words += (rs.size() == 1 ? "rank " : "ranks ") + text::rank_ranges(rs) + ": " +
               (clock.empty() ? "no times" : clock == "uptime" ? "seconds since boot" : "wall clock");
    }
    o.clocks = words + " (times on different clocks are not compared)";
  }
  return o;
}

}  // namespace rules
}  // namespace ff::correlate
