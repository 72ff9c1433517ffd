// The per-rank timeline (timeline.hpp): built from the correlator's inputs and the diagnosis, drawn as SVG
// for the HTML report and the web page, and as text rows for `diagnose --timeline`.
#include "firstfault/timeline.hpp"

#include <climits>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <set>

#include "firstfault/text.hpp"

namespace ff::timeline {
namespace {

// One rank (or one local rank the job's layout does not map to a global rank) before lanes are made.
struct row {
  bool local = false;
  int number = 0;
  std::string host;
  std::optional<double> first, last;
  std::optional<double> gap_from, gap_to;
  std::uint64_t lines = 0;
  std::vector<event> events;
  bool interesting = false;
};

bool is_wall(const std::optional<normalize::timestamp>& ts) {
  return ts && ts->kind == normalize::timestamp::clock::wall;
}

std::optional<long> seq_of(const match::fields& captured) {
  for (const auto& [k, v] : captured)
    if (k == "seq" && !v.empty() && v.size() < 19 && std::all_of(v.begin(), v.end(), ::isdigit)) return std::stol(v);
  return std::nullopt;
}

// A finding with no rank that names a node-level fault: hardware (Xid, ECC, PCIe, NVLink), the host's
// kernel (OOM killer, soft lockup) and its storage and links. Launcher and Python lines without a rank
// are not node events: they belong to no lane and are left to the report's text.
bool node_level(const kb::signature& s) {
  if (s.category == "hardware" || s.category == "storage") return true;
  auto in = [&](const char* dir) { return s.file.find(std::string("/") + dir + "/") != std::string::npos; };
  return in("gpu") || in("host");
}

// Folds `events` to at most `cap`: the root and causes stay, collateral and node events keep the first of
// each kind (with the count of the rest).
void cap_events(std::vector<event>& events, std::size_t cap) {
  std::stable_sort(events.begin(), events.end(), [](const event& a, const event& b) { return a.at < b.at; });
  if (events.size() <= cap) return;
  std::vector<event> kept;
  std::map<std::pair<int, std::string>, std::size_t> first_of;
  for (auto& e : events) {
    if (e.what == mark::root || e.what == mark::cause) {
      kept.push_back(e);
      continue;
    }
    auto key = std::make_pair(static_cast<int>(e.what), e.kind);
    auto it = first_of.find(key);
    if (it == first_of.end()) {
      first_of[key] = kept.size();
      kept.push_back(e);
    } else {
      kept[it->second].count += e.count;
    }
  }
  if (kept.size() > cap) kept.resize(cap);
  events = std::move(kept);
}

// What makes two ranks' lanes the same picture: the kinds of their errors and when they stopped.
std::string story(const row& r, double start, double span) {
  std::set<std::string> kinds;
  for (const auto& e : r.events) kinds.insert(std::to_string(static_cast<int>(e.what)) + e.kind);
  std::string s;
  for (const auto& k : kinds) s += k + ",";
  if (r.last) s += "@" + std::to_string(static_cast<long>(std::floor((*r.last - start) / span * 25)));
  return s;
}

// The kinds of a rank's errors alone, without when it stopped: the coarser fold when stories are too many.
std::string kinds_of(const row& r) {
  std::set<std::string> kinds;
  for (const auto& e : r.events) kinds.insert(std::to_string(static_cast<int>(e.what)) + e.kind);
  std::string s;
  for (const auto& k : kinds) s += k + ",";
  return s;
}

// A folded lane's label lists its ranks as ranges up to this many characters ("ranks 0-7,9,12-15"), else
// gives their count and span ("248 ranks in 1-511"): a label never runs off the plot.
constexpr std::size_t kMaxLabelRanges = 16;

lane lane_of(const std::vector<const row*>& rows) {
  lane l;
  for (const auto* r : rows) {
    if (!r->local) l.ranks.push_back(r->number);
    if (r->first) l.first = l.first ? std::min(*l.first, *r->first) : *r->first;
    if (r->last) l.last = l.last ? std::max(*l.last, *r->last) : *r->last;
    l.lines += r->lines;
    l.events.insert(l.events.end(), r->events.begin(), r->events.end());
  }
  l.folded = rows.size() > 1;
  if (rows.size() == 1) {
    const row& r = *rows[0];
    l.label = (r.local ? "local rank " : "rank ") + std::to_string(r.number);
    l.gap_from = r.gap_from;
    l.gap_to = r.gap_to;
  } else {
    std::vector<int> locals;
    for (const auto* r : rows)
      if (r->local) locals.push_back(r->number);
    // A label fits the lane's column: the ranks as ranges when that is short, else their count and span.
    auto ranks_label = [](const char* what, std::vector<int> v) {
      std::sort(v.begin(), v.end());
      std::string ranges = text::rank_ranges(v);
      if (ranges.size() <= kMaxLabelRanges) return std::string(what) + " " + ranges;
      return std::to_string(v.size()) + " " + what + " in " + std::to_string(v.front()) + "-" + std::to_string(v.back());
    };
    l.label = l.ranks.empty() ? ranks_label("local ranks", locals)
                              : ranks_label("ranks", l.ranks) + (locals.empty() ? "" : " +" + std::to_string(locals.size()) + " local");
    if (l.label.find(" in ") == std::string::npos) l.label += " (" + std::to_string(rows.size()) + ")";
  }
  cap_events(l.events, kMaxEventsPerLane);
  return l;
}

struct builder {
  const correlate::inputs& in;
  const correlate::diagnosis& d;
  const kb::library& lib;
  std::map<std::string, std::uint32_t> source_id;
  std::vector<std::uint64_t> source_lines;  // the largest line number seen per input
  std::map<std::pair<bool, int>, row> rows;
  std::map<std::string, std::vector<event>> node_events;  // by host
  std::map<int, std::string> host_of_rank;
  bool wall = false;
  model m;

  // A local rank's global rank: the one the lines paired it with; or, when no line pairs any and every
  // global rank seen is below the number of local ranks (one node: torchrun's standalone layout, where
  // LOCAL_RANK == RANK), the same number.
  std::optional<int> global_of_local(int l) const {
    auto it = in.local_to_rank.find(l);
    if (it != in.local_to_rank.end() && it->second.size() == 1) return *it->second.begin();
    if (in.local_to_rank.empty() && single_node) return l;
    return std::nullopt;
  }
  bool single_node = false;
  void decide_single_node() {
    std::set<int> locals;
    int max_global = -1;
    for (const auto& [k, a] : in.activity)
      (k.kind == correlate::rank_key::scope::local ? (void)locals.insert(k.number) : (void)(max_global = std::max(max_global, k.number)));
    for (const auto& [l, ranks] : in.local_to_rank)
      if (ranks.size() == 1 && *ranks.begin() == l) locals.insert(l);  // LOCAL_RANK == RANK: torchrun's one-node layout
    for (const auto& f : in.findings) {
      if (f.local_rank && !f.rank) locals.insert(*f.local_rank);
      if (f.rank) max_global = std::max(max_global, *f.rank);
    }
    single_node = !locals.empty() && max_global < static_cast<int>(locals.size()) && *locals.rbegin() < static_cast<int>(locals.size()) &&
                  in.hosts.size() <= 1;
  }
  row& row_for(std::optional<int> rank, std::optional<int> local) {
    if (!rank && local) rank = global_of_local(*local);
    auto key = rank ? std::make_pair(false, *rank) : std::make_pair(true, *local);
    auto& r = rows[key];
    r.local = key.first;
    r.number = key.second;
    return r;
  }
  double position(std::uint32_t src, std::uint64_t line_no) const {
    std::uint64_t n = src < source_lines.size() ? source_lines[src] : 0;
    return n == 0 ? 0.0 : static_cast<double>(line_no) / static_cast<double>(n);
  }
  std::uint32_t id_of(const std::string& source) const {
    auto it = source_id.find(source);
    return it == source_id.end() ? UINT32_MAX : it->second;
  }

  void index_sources() {
    for (std::uint32_t i = 0; i < in.source_names.size(); ++i) source_id.emplace(in.source_names[i], i);
    source_lines.assign(in.source_names.size(), 0);
    auto see = [&](std::uint32_t src, std::uint64_t no) {
      if (src < source_lines.size()) source_lines[src] = std::max(source_lines[src], no);
    };
    for (const auto& [k, a] : in.activity) {
      see(a.last_source, a.last_line_no);
      see(a.first_source, a.first_line_no);
    }
    for (const auto& f : in.findings) see(id_of(f.source), f.line_no);
    std::size_t timed = 0;
    for (const auto& [k, a] : in.activity) {
      if (is_wall(a.first_ts) && is_wall(a.last_ts)) ++timed;
      if ((a.first_ts && !a.first_ts->has_date) || (a.last_ts && !a.last_ts->has_date)) m.yearless = true;
    }
    // Wall time when at least half of the ranks' lines carry one; else each input's line positions.
    wall = !in.activity.empty() && timed * 2 >= in.activity.size();
    m.axis = wall ? axis::wall : axis::position;
    for (const auto& [host, ranks] : in.host_ranks)
      for (int r : ranks) host_of_rank.emplace(r, host);
    // The agent's failure block names each failed rank's host ("host : node-46", "rank : 360"): a rank
    // that printed no host of its own (torchrun's [defaultN]: lines carry none) is drawn on it too.
    for (const auto& e : in.exits)
      if (e.rank && !e.host.empty()) host_of_rank.emplace(*e.rank, e.host);
  }

  void add_activity() {
    for (const auto& [k, a] : in.activity) {
      std::optional<int> rank, local;
      (k.kind == correlate::rank_key::scope::global ? rank : local) = k.number;
      row& r = row_for(rank, local);
      r.lines += a.lines;
      std::optional<double> first, last;
      if (wall) {
        if (is_wall(a.first_ts)) first = a.first_ts->seconds;
        if (is_wall(a.last_ts)) last = a.last_ts->seconds;
        if (is_wall(a.gap_start) && a.gap_seconds > 0 && (!r.gap_from || a.gap_seconds > *r.gap_to - *r.gap_from)) {
          r.gap_from = a.gap_start->seconds;
          r.gap_to = a.gap_start->seconds + a.gap_seconds;
        }
      } else {
        first = position(a.first_source, a.first_line_no);
        last = position(a.last_source, a.last_line_no);
      }
      if (first) r.first = r.first ? std::min(*r.first, *first) : *first;
      if (last) r.last = r.last ? std::max(*r.last, *last) : *last;
    }
  }

  bool is_root(const correlate::finding& f, const kb::signature& s) const {
    if (s.name != d.signature) return false;
    for (const auto& e : d.evidence_lines)
      if (e.line_no == f.line_no && e.source == f.source) return true;
    return false;
  }

  void add_findings() {
    for (const auto& f : in.findings) {
      if (f.signature < 0 || static_cast<std::size_t>(f.signature) >= lib.signatures.size()) continue;
      const auto& s = lib.signatures[static_cast<std::size_t>(f.signature)];
      if (s.role == kb::role::benign) continue;
      event e;
      e.kind = s.kind;
      e.title = s.title;
      e.seq = seq_of(f.captured);
      e.source = f.source;
      e.line_no = f.line_no;
      e.what = is_root(f, s) ? mark::root : s.role == kb::role::cause ? mark::cause : mark::collateral;
      bool rankless = !f.rank && !f.local_rank;
      if (rankless && e.what != mark::root) {
        if (!node_level(s)) continue;
        e.what = mark::node;
      }
      if (wall) {
        if (!is_wall(f.ts)) {
          ++m.untimed;
          continue;
        }
        e.at = f.ts->seconds;
      } else {
        e.at = position(id_of(f.source), f.line_no);
      }
      if (e.what == mark::root && !m.root_at) m.root_at = e.at;
      if (rankless) {
        node_events[f.host.value_or("")].push_back(e);
        continue;
      }
      // The root line of a local rank ("[default3]:" on a multi-node console) is drawn on the rank the
      // diagnosis named, not on a lane of every node's local rank 3.
      std::optional<int> rank = f.rank;
      if (!rank && e.what == mark::root && d.initiating_rank) rank = d.initiating_rank;
      row& r = row_for(rank, rank ? std::nullopt : f.local_rank);
      if (r.host.empty() && f.host) r.host = *f.host;
      r.events.push_back(std::move(e));
    }
    // An inferred root cause (a rank that went silent, a rank missing from a collective) has no line of its
    // own: the initiating rank's last line stands for it.
    if (!m.root_at && d.initiating_rank && d.verdict == correlate::verdict::failure) {
      auto it = rows.find({false, *d.initiating_rank});
      if (it != rows.end() && it->second.last) {
        event e;
        e.what = mark::root;
        e.kind = d.kind;
        e.title = d.title + " (inferred: " + d.initiating_rule + ")";
        e.at = *it->second.last;
        if (!d.evidence_lines.empty()) {
          e.source = d.evidence_lines.front().source;
          e.line_no = d.evidence_lines.front().line_no;
        }
        m.root_at = e.at;
        it->second.events.push_back(std::move(e));
      }
    }
  }

  void set_range() {
    bool any = false;
    auto see = [&](double v) {
      m.start = any ? std::min(m.start, v) : v;
      m.end = any ? std::max(m.end, v) : v;
      any = true;
    };
    for (const auto& [k, r] : rows) {
      if (r.first) see(*r.first);
      if (r.last) see(*r.last);
      for (const auto& e : r.events) see(e.at);
    }
    for (const auto& [h, evs] : node_events)
      for (const auto& e : evs) see(e.at);
    if (!any) m.start = 0, m.end = 1;
    if (!wall) m.start = 0, m.end = std::max(m.end, 1.0);
    if (m.end <= m.start) m.end = m.start + 1;
  }

  // A lane of its own for: the initiating rank, a rank with the root or another cause, a rank that stopped
  // writing well before the others, and a rank missing from the error most other ranks printed.
  void mark_interesting() {
    double span = m.end - m.start;
    std::vector<double> lasts;
    for (const auto& [k, r] : rows)
      if (r.last) lasts.push_back(*r.last);
    std::sort(lasts.begin(), lasts.end());
    double median_last = lasts.empty() ? m.end : lasts[lasts.size() / 2];
    std::map<std::string, std::size_t> kind_ranks;
    for (const auto& [k, r] : rows) {
      std::set<std::string> kinds;
      for (const auto& e : r.events)
        if (e.what == mark::collateral) kinds.insert(e.kind);
      for (const auto& kd : kinds) ++kind_ranks[kd];
    }
    for (auto& [k, r] : rows) {
      if (!r.local && d.initiating_rank && r.number == *d.initiating_rank) r.interesting = true;
      for (const auto& e : r.events)
        if (e.what == mark::root || e.what == mark::cause) r.interesting = true;
      if (r.last && *r.last < median_last - 0.1 * span) r.interesting = true;
      if (rows.size() >= 4)
        for (const auto& kn : kind_ranks) {
          const std::string& kd = kn.first;  // not a structured binding: clang 14 cannot capture one in a lambda
          if (kn.second * 4 < rows.size() * 3 || kn.second == rows.size()) continue;
          bool has = std::any_of(r.events.begin(), r.events.end(), [&](const event& e) { return e.kind == kd; });
          if (!has) r.interesting = true;
        }
    }
    std::size_t n = 0;  // at most a third of the lanes are spent on singled-out ranks
    for (auto& [k, r] : rows)
      if (r.interesting && ++n > kMaxLanes / 3 && !(d.initiating_rank && !r.local && r.number == *d.initiating_rank))
        r.interesting = false;
  }

  // The one host of a single-node job, when its lines named exactly one (a prefix, a path, the agent's
  // failure block).
  std::optional<std::string> single_host() const {
    if (!single_node) return std::nullopt;
    std::set<std::string> named(in.hosts.begin(), in.hosts.end());
    for (const auto& [r, h] : host_of_rank) named.insert(h);
    named.erase("");
    return named.size() == 1 ? std::optional<std::string>(*named.begin()) : std::nullopt;
  }

  void make_lanes(std::size_t max_lanes) {
    const auto only_host = single_host();
    std::map<std::string, std::vector<const row*>> by_host;
    std::vector<std::string> host_order;
    for (auto& [k, r] : rows) {
      if (r.host.empty() && !r.local && d.initiating_rank && d.initiating_host && r.number == *d.initiating_rank) r.host = *d.initiating_host;
      if (r.host.empty() && !r.local) {
        auto it = host_of_rank.find(r.number);
        if (it != host_of_rank.end()) r.host = it->second;
      }
      // One node, one name: on a single-node job whose lines named one host, a rank that printed none is
      // on it (not a second group "host not known" beside "localhost").
      if (r.host.empty() && only_host) r.host = *only_host;
      if (!by_host.count(r.host)) host_order.push_back(r.host);
      by_host[r.host].push_back(&r);
    }
    if (only_host)
      if (auto un = node_events.find(""); un != node_events.end()) {
        auto& into = node_events[*only_host];
        into.insert(into.end(), un->second.begin(), un->second.end());
        node_events.erase(un);
      }
    for (const auto& [h, evs] : node_events)
      if (!by_host.count(h)) {
        host_order.push_back(h);
        by_host[h];
      }
    const double span = m.end - m.start;
    const bool fold = rows.size() + node_events.size() > max_lanes;
    // Within a host: a lane per interesting rank, one per run of ranks that tell the same story.
    std::vector<host_group> groups;
    std::vector<std::string> group_story;  // "" for a host with an interesting rank (never merged)
    for (const auto& h : host_order) {
      host_group g;
      g.host = h;
      const auto& rs = by_host[h];
      std::vector<const row*> run;
      std::string run_story;
      bool any_interesting = false;
      auto flush = [&] {
        if (!run.empty()) g.lanes.push_back(lane_of(run));
        run.clear();
      };
      for (const auto* r : rs) {
        if (!fold || r->interesting) {
          flush();
          g.lanes.push_back(lane_of({r}));
          any_interesting = any_interesting || r->interesting;
          continue;
        }
        std::string s = story(*r, m.start, span);
        if (!run.empty() && s != run_story) flush();
        run_story = s;
        run.push_back(r);
      }
      flush();
      std::string gs;
      if (fold && !any_interesting && node_events.find(h) == node_events.end()) {
        for (const auto* r : rs) gs += story(*r, m.start, span) + ";";
        if (gs.empty()) gs = ";";
      }
      groups.push_back(std::move(g));
      group_story.push_back(gs);
    }
    // Hosts where nothing stands out and whose ranks tell one story merge into one group of one lane; when
    // that is still too many lanes, such hosts merge whatever their story.
    auto total_lanes = [&] {
      std::size_t t = 0;
      for (const auto& g : groups) t += g.lanes.size();
      return t;
    };
    for (bool by_story : {true, false}) {
      if (!fold || total_lanes() <= max_lanes) break;
      std::vector<host_group> merged;
      std::vector<std::string> merged_story;
      for (std::size_t i = 0; i < groups.size();) {
        if (group_story[i].empty()) {
          merged.push_back(std::move(groups[i]));
          merged_story.push_back(std::move(group_story[i]));
          ++i;
          continue;
        }
        std::size_t j = i + 1;
        while (j < groups.size() && !group_story[j].empty() && (!by_story || group_story[j] == group_story[i])) ++j;
        host_group g;
        std::vector<const row*> all;
        for (std::size_t k = i; k < j; ++k) {
          const auto& rs = by_host[groups[k].host];
          all.insert(all.end(), rs.begin(), rs.end());
          g.host += (k == i ? "" : " ") + groups[k].host;
        }
        if (j - i > 1) g.host = groups[i].host + " .. " + groups[j - 1].host + " (" + std::to_string(j - i) + " hosts)";
        if (!all.empty()) g.lanes.push_back(lane_of(all));
        by_host[g.host] = all;
        merged.push_back(std::move(g));
        merged_story.push_back(group_story[i]);
        i = j;
      }
      groups = std::move(merged);
      group_story = std::move(merged_story);
    }
    // Still too many (hosts with a singled-out rank keep their own group, and their other ranks may tell
    // many stories): within each group, the ranks not singled out fold by the kinds of their errors alone,
    // then into one lane. At most a third of kMaxLanes ranks are singled out, so this ends under the cap.
    for (bool by_kinds : {true, false}) {
      if (!fold || total_lanes() <= max_lanes) break;
      for (auto& g : groups) {
        std::vector<lane> lanes;
        std::map<std::string, std::vector<const row*>> by;
        std::vector<std::string> order;
        for (const auto* r : by_host[g.host]) {
          if (r->interesting) {
            lanes.push_back(lane_of({r}));
            continue;
          }
          std::string key = by_kinds ? kinds_of(*r) : std::string();
          if (!by.count(key)) order.push_back(key);
          by[key].push_back(r);
        }
        for (const auto& k : order) lanes.push_back(lane_of(by[k]));
        auto first_rank = [](const lane& l) { return l.ranks.empty() ? INT_MAX : *std::min_element(l.ranks.begin(), l.ranks.end()); };
        std::stable_sort(lanes.begin(), lanes.end(), [&](const lane& a, const lane& b) { return first_rank(a) < first_rank(b); });
        if (!lanes.empty()) g.lanes = std::move(lanes);
      }
    }
    for (auto& g : groups) {
      auto ne = node_events.find(g.host);
      if (ne != node_events.end()) {
        if (g.lanes.empty()) {
          lane l;
          l.label = "node events";
          l.node_lane = true;
          g.lanes.push_back(std::move(l));
        }
        for (auto& l : g.lanes) {
          l.events.insert(l.events.end(), ne->second.begin(), ne->second.end());
          cap_events(l.events, kMaxEventsPerLane);
        }
      }
      for (auto& l : g.lanes) {
        if (d.initiating_rank && std::find(l.ranks.begin(), l.ranks.end(), *d.initiating_rank) != l.ranks.end()) l.initiating = true;
        if (l.gap_from && l.gap_to && (*l.gap_to - *l.gap_from < std::max(0.1 * span, 30.0))) l.gap_from.reset(), l.gap_to.reset();
      }
      m.lanes += g.lanes.size();
    }
    m.hosts = std::move(groups);
  }
};

std::string esc(std::string_view s) { return text::html_escape(s); }

const char* colour(mark w) {
  switch (w) {
    case mark::root: return "#c0161b";
    case mark::cause: return "#8a1538";
    case mark::collateral: return "#e08a00";
    case mark::node: return "#6b3fa0";
  }
  return "#666";
}

std::string where(const event& e) {
  return e.source.empty() ? std::string() : e.source + ":" + std::to_string(e.line_no);
}

}  // namespace

// A run of hours that fails in its last minutes would put the failure in the last pixels: the axis starts
// at the failure window instead (from three times the time between the root cause and the end of the logs
// before the root cause, at least a minute and a twentieth of the run), and run_start keeps where the run
// began, for the axis title. Lanes that began earlier are drawn from the left edge.
void zoom_to_failure(model& m) {
  if (m.axis != axis::wall || !m.root_at) return;
  double span = m.end - m.start;
  double lead = std::max({3 * (m.end - *m.root_at), 60.0, 0.05 * span});
  double from = *m.root_at - lead;
  if (from <= m.start + 0.2 * span) return;
  m.run_start = m.start;
  m.start = from;
}

model build(const correlate::inputs& in, const correlate::diagnosis& d, const kb::library& lib, std::size_t max_lanes) {
  builder b{in, d, lib, {}, {}, {}, {}, {}, false, {}};
  b.index_sources();
  b.decide_single_node();
  b.add_activity();
  b.add_findings();
  // A rank with neither a time nor an error (lines of a local rank without times on the wall axis) has
  // nothing to draw.
  for (auto it = b.rows.begin(); it != b.rows.end();)
    it = !it->second.first && !it->second.last && it->second.events.empty() ? b.rows.erase(it) : std::next(it);
  b.set_range();
  b.m.ranks = b.rows.size();
  b.mark_interesting();
  b.make_lanes(std::max<std::size_t>(max_lanes, 4));
  zoom_to_failure(b.m);
  return std::move(b.m);
}

std::string axis_label(const model& m, double at) {
  if (m.axis == axis::position) return fmt::format("{:.0f}%", std::clamp(at, 0.0, 1.0) * 100);
  std::time_t t = static_cast<std::time_t>(std::floor(at));
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  double span = m.end - m.start;
  if (span >= 2 * 86400) std::strftime(buf, sizeof buf, "%m-%d %H:%M", &tm);
  else std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  std::string s = buf;
  if (span < 10) s += fmt::format(".{:03d}", static_cast<int>((at - std::floor(at)) * 1000));
  return s;
}

std::string tick_label(const model& m, double at) {
  if (m.axis == axis::position || at <= m.start) return axis_label(m, at);
  double d = at - m.start;
  if (d < 10) return fmt::format("+{:.2f}s", d);
  if (d < 120) return fmt::format("+{:.0f}s", d);
  if (d < 7200) return fmt::format("+{}m{:02d}s", static_cast<long>(d) / 60, static_cast<int>(static_cast<long>(d) % 60));
  return fmt::format("+{}h{:02d}m", static_cast<long>(d) / 3600, static_cast<int>((static_cast<long>(d) % 3600) / 60));
}

namespace {

std::string axis_title(const model& m) {
  if (m.axis == axis::position)
    return "position in each input (the lines carry no times): 0% first line, 100% last line";
  std::string t = "time (UTC";
  if (m.yearless) t += "; some logs give no year";
  t += ")";
  if (m.untimed) t += fmt::format("; {} error line(s) without a time are not drawn", m.untimed);
  if (m.run_start) {
    model whole = m;
    whole.start = *m.run_start;
    t += "; zoomed to the failure: the run began at " + axis_label(whole, *m.run_start) + ", " +
         tick_label(whole, m.start).substr(1) + " earlier";
  }
  return t;
}

// Where a lane's rank(s) say their first line was, for the tooltip.
std::string span_text(const model& m, const lane& l) {
  std::string s = l.label;
  if (l.first && l.last) s += ": writes from " + axis_label(m, *l.first) + " to " + axis_label(m, *l.last);
  s += fmt::format(", {} line(s)", l.lines);
  if (l.gap_from && l.gap_to) s += ", silent from " + axis_label(m, *l.gap_from) + " to " + axis_label(m, *l.gap_to);
  return s;
}

std::string event_text(const model& m, const event& e, const lane& l) {
  const char* what = e.what == mark::root ? "ROOT CAUSE" : e.what == mark::cause ? "cause" : e.what == mark::node ? "node event" : "collateral";
  std::string s = fmt::format("{} at {}: {} [{}]", what, axis_label(m, e.at), e.title, e.kind);
  if (e.seq) s += fmt::format(", SeqNum {}", *e.seq);
  if (e.count > 1) s += fmt::format(" (x{})", e.count);
  s += " on " + l.label;
  if (!e.source.empty()) s += " - " + where(e);
  return s;
}

}  // namespace

std::string to_svg(const model& m, int width) {
  const int left = 200, right = 56, top = 46, lane_h = 18, host_h = 18, legend_h = 34;
  const double plot = std::max(200, width - left - right);
  auto x = [&](double at) { return left + (std::max(at, m.start) - m.start) / (m.end - m.start) * plot; };
  int rows_h = 0;
  for (const auto& g : m.hosts) rows_h += host_h + static_cast<int>(g.lanes.size()) * lane_h;
  const int height = top + rows_h + 12 + legend_h;
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"timeline\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" "
      "aria-label=\"per-rank timeline\" font-family=\"system-ui,sans-serif\" font-size=\"11\" data-lanes=\"{}\" data-ranks=\"{}\">\n",
      width, height, width, height, m.lanes, m.ranks);
  o += fmt::format("<text x=\"{}\" y=\"14\" font-size=\"12\" fill=\"#333\">{}</text>\n", left, esc(axis_title(m)));
  // axis: 6 ticks
  for (int i = 0; i <= 5; ++i) {
    double at = m.start + (m.end - m.start) * i / 5.0;
    double px = x(at);
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#ddd\"/>", px, top - 8, px, top + rows_h);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"{}\" fill=\"#555\">{}</text>\n", px, top - 12,
                     i == 0 ? "start" : i == 5 ? "end" : "middle", esc(tick_label(m, at)));
  }
  int y = top;
  for (const auto& g : m.hosts) {
    o += fmt::format("<g class=\"host\" data-host=\"{}\">", esc(g.host));
    o += fmt::format("<rect x=\"0\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f1f3f6\"/>", y, width, host_h);
    o += fmt::format("<text x=\"6\" y=\"{}\" font-weight=\"bold\" fill=\"#223\">{}</text>\n", y + 13,
                     esc(g.host.empty() ? std::string("host not known") : g.host));
    y += host_h;
    for (const auto& l : g.lanes) {
      const int mid = y + lane_h / 2;
      o += fmt::format("<g class=\"lane{}\" data-ranks=\"{}\" data-label=\"{}\">", l.initiating ? " initiating" : "",
                       esc(text::rank_ranges(l.ranks)), esc(l.label));
      o += fmt::format("<title>{}</title>", esc(span_text(m, l)));
      o += fmt::format("<text x=\"14\" y=\"{}\" fill=\"{}\"{}>{}{}</text>", mid + 4, l.initiating ? "#c0161b" : "#222",
                       l.initiating ? " font-weight=\"bold\"" : "", l.initiating ? "&#9658; " : "", esc(l.label));
      if (l.first && l.last) {
        double x1 = x(*l.first), x2 = std::max(x(*l.last), x1 + 2);
        o += fmt::format("<rect class=\"active\" x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"8\" rx=\"2\" fill=\"{}\"/>", x1, mid - 4,
                         x2 - x1, l.folded ? "#8fa6c4" : "#5b7fae");
        if (l.gap_from && l.gap_to) {
          double g1 = x(*l.gap_from), g2 = x(*l.gap_to);
          o += fmt::format("<rect class=\"gap\" x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"8\" fill=\"#fff\" stroke=\"#5b7fae\" "
                           "stroke-dasharray=\"2 2\"><title>silent from {} to {}</title></rect>",
                           g1, mid - 4, std::max(1.0, g2 - g1), esc(axis_label(m, *l.gap_from)), esc(axis_label(m, *l.gap_to)));
        }
        if (x(m.end) - x2 > 4)  // silent until the end of the logs
          o += fmt::format("<line class=\"silent\" x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#b0b0b0\" stroke-dasharray=\"3 3\">"
                           "<title>{}: no line after {}</title></line>",
                           x2, mid, x(m.end), mid, esc(l.label), esc(axis_label(m, *l.last)));
      }
      long last_seq = -1;
      for (const auto& e : l.events) {
        double px = x(e.at);
        std::string tip = "<title>" + esc(event_text(m, e, l)) + "</title>";
        const char* c = colour(e.what);
        if (e.what == mark::root)
          o += fmt::format("<path class=\"ev root\" d=\"M{0:.1f} {1} l7 7 l-7 7 l-7 -7 z\" fill=\"{2}\" stroke=\"#fff\">{3}</path>", px,
                           mid - 7, c, tip);
        else if (e.what == mark::node)
          o += fmt::format("<path class=\"ev node\" d=\"M{0:.1f} {1} l5 9 l-10 0 z\" fill=\"{2}\">{3}</path>", px, mid - 5, c, tip);
        else if (e.what == mark::cause)
          o += fmt::format("<circle class=\"ev cause\" cx=\"{:.1f}\" cy=\"{}\" r=\"4\" fill=\"{}\">{}</circle>", px, mid, c, tip);
        else
          o += fmt::format("<rect class=\"ev collateral\" x=\"{:.1f}\" y=\"{}\" width=\"3\" height=\"12\" fill=\"{}\">{}</rect>", px - 1.5,
                           mid - 6, c, tip);
        if (e.seq && *e.seq != last_seq) {
          o += fmt::format("<text class=\"seq\" x=\"{:.1f}\" y=\"{}\" font-size=\"9\" fill=\"#7a4a00\">#{}</text>", px + 4, mid - 1, *e.seq);
          last_seq = *e.seq;
        }
      }
      o += "</g>\n";
      y += lane_h;
    }
    o += "</g>\n";
  }
  if (m.root_at)
    o += fmt::format("<line class=\"root-line\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#c0161b\" stroke-dasharray=\"4 3\"/>\n",
                     x(*m.root_at), top - 6, top + rows_h);
  // legend
  int ly = top + rows_h + 22;
  o += fmt::format(
      "<g class=\"legend\"><path d=\"M{0} {1} l6 6 l-6 6 l-6 -6 z\" fill=\"#c0161b\"/><text x=\"{2}\" y=\"{3}\">root cause</text>"
      "<circle cx=\"{4}\" cy=\"{5}\" r=\"4\" fill=\"#8a1538\"/><text x=\"{6}\" y=\"{3}\">other cause</text>"
      "<rect x=\"{7}\" y=\"{8}\" width=\"3\" height=\"12\" fill=\"#e08a00\"/><text x=\"{9}\" y=\"{3}\">collateral error (#N: SeqNum)</text>"
      "<path d=\"M{10} {8} l5 9 l-10 0 z\" fill=\"#6b3fa0\"/><text x=\"{11}\" y=\"{3}\">node event</text>"
      "<rect x=\"{12}\" y=\"{13}\" width=\"24\" height=\"8\" fill=\"#5b7fae\"/><text x=\"{14}\" y=\"{3}\">writing</text>"
      "<line x1=\"{15}\" y1=\"{5}\" x2=\"{16}\" y2=\"{5}\" stroke=\"#b0b0b0\" stroke-dasharray=\"3 3\"/><text x=\"{17}\" y=\"{3}\">silent</text></g>\n",
      left + 6, ly - 6, left + 16, ly + 4, left + 100, ly, left + 108, left + 200, ly - 6, left + 208, left + 396, left + 406, left + 490,
      ly - 4, left + 518, left + 580, left + 610, left + 616);
  o += "</svg>\n";
  return o;
}

std::string to_text(const model& m, int width, bool color) {
  std::string o;
  if (m.empty()) return o;
  width = std::clamp(width, 10, 400);
  const double span = m.end - m.start;
  auto bucket = [&](double at) {
    return std::clamp(static_cast<int>(std::floor((at - m.start) / span * width)), 0, width - 1);
  };
  std::size_t label_w = 10;
  for (const auto& g : m.hosts)
    for (const auto& l : g.lanes) label_w = std::max(label_w, l.label.size() + 3);
  label_w = std::min<std::size_t>(label_w, 28);
  o += fmt::format("TIMELINE  {} ranks in {} lane(s); {}\n", m.ranks, m.lanes, axis_title(m));
  std::string head(label_w + 1, ' ');
  std::string a = axis_label(m, m.start), b = tick_label(m, m.end);
  std::string scale = a + std::string(static_cast<std::size_t>(std::max<int>(1, width - static_cast<int>(a.size() + b.size()))), ' ') + b;
  o += head + scale + "\n";
  for (const auto& g : m.hosts) {
    o += (g.host.empty() ? std::string("(host not known)") : g.host) + "\n";
    for (const auto& l : g.lanes) {
      std::string cells(static_cast<std::size_t>(width), ' ');
      if (l.first && l.last)
        for (int i = bucket(*l.first); i <= bucket(*l.last); ++i) cells[static_cast<std::size_t>(i)] = '=';
      if (l.gap_from && l.gap_to)
        for (int i = bucket(*l.gap_from) + 1; i < bucket(*l.gap_to); ++i) cells[static_cast<std::size_t>(i)] = '.';
      // marks: the root wins a cell over a cause, a cause over a node event, a node event over collateral
      auto rank_of = [](char c) { return c == 'X' ? 4 : c == 'C' ? 3 : c == '!' ? 2 : c == 'x' ? 1 : 0; };
      for (const auto& e : l.events) {
        char c = e.what == mark::root ? 'X' : e.what == mark::cause ? 'C' : e.what == mark::node ? '!' : 'x';
        auto& cell = cells[static_cast<std::size_t>(bucket(e.at))];
        if (rank_of(c) > rank_of(cell)) cell = c;
      }
      std::string label = (l.initiating ? "> " : "  ") + l.label;
      if (label.size() > label_w) label = label.substr(0, label_w);
      label.resize(label_w, ' ');
      if (color) {
        std::string painted;
        for (char c : cells) {
          if (c == 'X') painted += "\033[1;31mX\033[0m";
          else if (c == 'x') painted += "\033[33mx\033[0m";
          else if (c == '!') painted += "\033[35m!\033[0m";
          else painted += c;
        }
        cells = painted;
      }
      o += label + "|" + cells + "|\n";
    }
  }
  o += std::string(label_w + 1, ' ') + "X root cause  C other cause  x collateral  ! node event  = writing  . silent\n";
  return o;
}

// ---- the report's "timeline" object ---------------------------------------------------------------------

namespace {

const char* mark_word(mark w) {
  switch (w) {
    case mark::root: return "root";
    case mark::cause: return "cause";
    case mark::node: return "node";
    case mark::collateral: break;
  }
  return "collateral";
}

mark mark_of(const std::string& w) {
  if (w == "root") return mark::root;
  if (w == "cause") return mark::cause;
  if (w == "node") return mark::node;
  return mark::collateral;
}

nlohmann::json opt_num(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

// A number from a stored report, or nullopt (a hand-edited or truncated entry must not throw).
std::optional<double> num(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string str(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool flag(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

const nlohmann::json& array_at(const nlohmann::json& j, const char* key) {
  static const nlohmann::json empty = nlohmann::json::array();
  auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : empty;
}

}  // namespace

nlohmann::json to_json(const model& m) {
  nlohmann::json j = {{"axis", m.axis == axis::wall ? "wall" : "position"}, {"yearless", m.yearless}, {"start", m.start},
                      {"end", m.end}, {"ranks", m.ranks}, {"lanes", m.lanes}, {"untimed", m.untimed}, {"root_at", opt_num(m.root_at)}, {"run_start", opt_num(m.run_start)}};
  j["hosts"] = nlohmann::json::array();
  for (const auto& h : m.hosts) {
    nlohmann::json hj = {{"host", h.host}, {"lanes", nlohmann::json::array()}};
    for (const auto& l : h.lanes) {
      nlohmann::json lj = {{"label", l.label}, {"ranks", l.ranks}, {"folded", l.folded}, {"initiating", l.initiating},
                           {"node_lane", l.node_lane}, {"first", opt_num(l.first)}, {"last", opt_num(l.last)},
                           {"gap_from", opt_num(l.gap_from)}, {"gap_to", opt_num(l.gap_to)}, {"lines", l.lines},
                           {"events", nlohmann::json::array()}};
      for (const auto& e : l.events)
        lj["events"].push_back({{"at", e.at}, {"mark", mark_word(e.what)}, {"kind", e.kind}, {"title", e.title},
                                {"seq", e.seq ? nlohmann::json(*e.seq) : nlohmann::json(nullptr)}, {"source", e.source},
                                {"line", e.line_no}, {"count", e.count}});
      hj["lanes"].push_back(std::move(lj));
    }
    j["hosts"].push_back(std::move(hj));
  }
  return j;
}

model from_json(const nlohmann::json& j) {
  model m;
  if (!j.is_object()) return m;
  m.axis = str(j, "axis") == "wall" ? axis::wall : axis::position;
  m.yearless = flag(j, "yearless");
  m.start = num(j, "start").value_or(0);
  m.run_start = num(j, "run_start");
  m.end = num(j, "end").value_or(1);
  if (!(m.end > m.start)) m.end = m.start + 1;  // to_svg divides by the range
  m.ranks = static_cast<std::size_t>(std::max(0.0, num(j, "ranks").value_or(0)));
  m.untimed = static_cast<std::size_t>(std::max(0.0, num(j, "untimed").value_or(0)));
  m.root_at = num(j, "root_at");
  std::size_t lanes = 0;
  for (const auto& hj : array_at(j, "hosts")) {
    if (!hj.is_object()) continue;
    host_group h;
    h.host = str(hj, "host");
    for (const auto& lj : array_at(hj, "lanes")) {
      if (!lj.is_object() || lanes >= 4 * kMaxLanes) continue;  // bounded whatever the entry says
      lane l;
      l.label = str(lj, "label");
      for (const auto& r : array_at(lj, "ranks"))
        if (r.is_number_integer()) l.ranks.push_back(r.get<int>());
      l.folded = flag(lj, "folded");
      l.initiating = flag(lj, "initiating");
      l.node_lane = flag(lj, "node_lane");
      l.first = num(lj, "first");
      l.last = num(lj, "last");
      l.gap_from = num(lj, "gap_from");
      l.gap_to = num(lj, "gap_to");
      l.lines = static_cast<std::uint64_t>(std::max(0.0, num(lj, "lines").value_or(0)));
      for (const auto& ej : array_at(lj, "events")) {
        if (!ej.is_object() || l.events.size() >= kMaxEventsPerLane) continue;
        event e;
        e.at = num(ej, "at").value_or(m.start);
        e.what = mark_of(str(ej, "mark"));
        e.kind = str(ej, "kind");
        e.title = str(ej, "title");
        if (auto s = num(ej, "seq")) e.seq = static_cast<long>(*s);
        e.source = str(ej, "source");
        e.line_no = static_cast<std::uint64_t>(std::max(0.0, num(ej, "line").value_or(0)));
        e.count = static_cast<int>(std::max(1.0, num(ej, "count").value_or(1)));
        l.events.push_back(std::move(e));
      }
      h.lanes.push_back(std::move(l));
      ++lanes;
    }
    m.hosts.push_back(std::move(h));
  }
  m.lanes = lanes;
  return m;
}

}  // namespace ff::timeline
