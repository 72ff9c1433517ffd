// The history record of a run, and the helpers `history list` prints with. One builder for `diagnose`
// and `watch`, from the run itself (never by re-reading its rendered JSON).
#pragma once

#include <cstdint>
#include <string>

#include "firstfault/history.hpp"
#include "firstfault/pipeline.hpp"

namespace ff::history {

/// The entry to store for a run: inputs (masked paths, "; "-separated, in input order), verdict,
/// signature, kind, first failing rank, masked host and the host's salted key, and `report_json`
/// (report::to_json of the run, compact) unless the caller passes the JSON it already rendered (a watch
/// alert's report, which carries the "alert" member).
entry entry_of(const pipeline::run& r, std::string source, std::string report_json = {});

/// "2026-12-02 11:22:33Z" for Unix seconds (UTC).
std::string format_utc(std::int64_t unix_seconds);

/// `history list`'s INPUTS column: the first path (its last `max_chars` characters when longer, after
/// "...") and "(+N more)" for the others of a "; "-separated list.
std::string summarize_inputs(const std::string& inputs, std::size_t max_chars = 60);

}  // namespace ff::history
