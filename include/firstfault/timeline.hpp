// firstfault/timeline.hpp: the per-rank picture of a run, drawn: SVG, text rows, and its JSON form. The model
// and its builder are firstfault/timeline_model.hpp (the correlate layer, which the pipeline uses).
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

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "firstfault/timeline_model.hpp"

namespace ff::timeline {

/// An inline <svg> element (width in CSS pixels; the height follows the lanes). Every log text is
/// escaped; no script, no style attribute, no external reference (a page with a strict CSP shows it).
/// Each lane is a <g class="lane" data-ranks="..."> for tests; tooltips are <title> elements.
std::string to_svg(const model& m, int width = 1100);

/// The terminal form: one row per lane, `width` buckets wide. '=' the rank is writing, ' ' before its
/// first or after its last line, '.' inside its longest silence, 'x' a collateral error, '!' a node event,
/// 'X' the root cause (with colour: red). A header row names the axis and its ends.
std::string to_text(const model& m, int width = 60, bool color = false);

/// The model as the JSON report's "timeline" object (schemas/report-v1.schema.json), and back: a stored
/// report (history) draws the same picture. from_json ignores what it does not know and returns an empty
/// model for a report written before the timeline was stored (or for a value that is not an object).
nlohmann::json to_json(const model& m);
model from_json(const nlohmann::json& j);

/// "14:03:07" (UTC) for a wall time, "37%" for a position: how the axis is labelled.
std::string axis_label(const model& m, double at);
/// A tick's label: the start as axis_label(), later ticks as the time since the start ("+45s", "+12m30s").
std::string tick_label(const model& m, double at);

}  // namespace ff::timeline
