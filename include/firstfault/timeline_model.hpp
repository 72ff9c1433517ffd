// firstfault/timeline_model.hpp: the per-rank picture of a run, built from the diagnosis (the data; drawing it
// is firstfault/timeline.hpp, in the report layer).
//
// One lane per rank, grouped by host: when the rank's first and last lines were written, its longest
// silence, and the findings on it placed in time (the root cause marked, collateral errors, collective
// SeqNum markers where a line names one). Node events (Xid, the kernel's OOM killer, link flaps: findings
// that name a host and no rank) are drawn on their host's lanes. Large jobs are folded: ranks whose story
// is the same (same errors, ending together) share one lane "ranks 8-15", and the interesting ranks (the
// initiating rank, ranks with a cause line, ranks that went silent early, a rank missing from an error
// every other rank printed) keep a lane of their own.
//
// The clock: wall time (seconds since the Unix epoch, UTC assumed, as normalize::timestamp) when the
// lines carry times; otherwise the position in each input (line number / lines of that input), which
// orders the lines of one console but not of two files. Which one is used is in model::axis and is
// printed on the axis.
//
//   auto m = ff::timeline::build(run_inputs, diag, lib);   // pipeline::finish() does this: run::timeline
//   std::string svg = ff::timeline::to_svg(m);             // inline SVG (no script, no external asset)
//   std::string txt = ff::timeline::to_text(m, 60, false); // diagnose --timeline
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "firstfault/correlate.hpp"
#include "firstfault/kb.hpp"

namespace ff::timeline {

/// What the horizontal axis measures: wall seconds, or the position (0..1) of a line in its input.
enum class axis { wall, position };

/// What a mark on a lane is.
enum class mark {
  root,        ///< the root-cause line (the diagnosis' first evidence line)
  cause,       ///< another cause-role finding (an alternative)
  collateral,  ///< a symptom-role finding: an error that followed from the root cause
  node,        ///< a node event (no rank on the line, a host): drawn on every lane of that host
};

struct event {
  double at = 0;         ///< on the axis (wall seconds, or 0..1)
  mark what = mark::collateral;
  std::string kind, title;
  std::optional<long> seq;  ///< the collective's SeqNum when the line names one (watchdog timeouts)
  std::string source;       ///< masked input name and line, for the tooltip and the link
  std::uint64_t line_no = 0;
  int count = 1;            ///< events folded into this one (the same kind on a folded lane)
};

struct lane {
  std::string label;        ///< "rank 3", "ranks 8-15 (8)", "local rank 1", "node events"
  std::vector<int> ranks;   ///< the global ranks shown by this lane (empty: a local rank or the node lane)
  bool folded = false;      ///< more than one rank
  bool initiating = false;  ///< holds the diagnosis' initiating rank
  bool node_lane = false;   ///< the host's node events, for a host with no rank lane
  std::optional<double> first, last;  ///< first and last line of the rank(s) on the axis
  std::optional<double> gap_from, gap_to;  ///< the longest silence inside [first, last], when it is notable
  std::uint64_t lines = 0;
  std::vector<event> events;  ///< in time order, at most kMaxEventsPerLane (folded by kind past that)
};

struct host_group {
  std::string host;  ///< masked host name, or "" when the ranks' host is not known
  std::vector<lane> lanes;
};

struct model {
  timeline::axis axis = timeline::axis::position;
  bool yearless = false;       ///< some times had no year in the log (c10, glog, syslog headers)
  double start = 0, end = 1;   ///< the axis range
  std::vector<host_group> hosts;
  std::size_t ranks = 0;       ///< distinct ranks and local ranks seen
  std::size_t lanes = 0;       ///< lanes drawn (rank lanes and node lanes)
  std::size_t untimed = 0;     ///< findings that could not be placed (no time on the wall axis)
  std::optional<double> root_at;  ///< where the root cause is on the axis
  /// Set when the axis is zoomed to the failure window (wall axis, a failure late in a long run): where the
  /// whole run began; `start` is then the window's start, and lanes that began earlier start at the edge.
  std::optional<double> run_start;
  bool empty() const { return lanes == 0; }
};

/// Lanes at most (beyond it ranks are folded), events kept per lane.
constexpr std::size_t kMaxLanes = 40;
constexpr std::size_t kMaxEventsPerLane = 24;

/// Builds the picture from what the correlator read and decided. Pure.
model build(const correlate::inputs& in, const correlate::diagnosis& d, const kb::library& lib,
            std::size_t max_lanes = kMaxLanes);

}  // namespace ff::timeline
