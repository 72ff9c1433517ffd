// The per-rank timeline's model (timeline_model.hpp): built from the correlator's inputs and the diagnosis.
// Drawing it (SVG, text rows) and its JSON form are src/report/timeline.cpp.
#include "firstfault/timeline_model.hpp"

#include <climits>

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

}  // namespace ff::timeline
