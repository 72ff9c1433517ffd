// firstfault/pipeline.hpp: the whole diagnosis in one call (ingest -> ... -> correlate).
//
//   auto lib = ff::kb::library::load(true, {});
//   ff::pipeline::options opt;
//   auto run = ff::pipeline::diagnose({"logs/"}, lib.value(), opt);
//   if (!run) ...;                       // only when the knowledge base fails to compile
//   render(run.value().diag);            // run.value().errors lists unreadable inputs
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "firstfault/correlate.hpp"
#include "firstfault/ingest.hpp"
#include "firstfault/kb.hpp"
#include "firstfault/mask.hpp"
#include "firstfault/match.hpp"
#include "firstfault/normalize.hpp"
#include "firstfault/result.hpp"

namespace ff::pipeline {

struct options {
  ingest::options ingest;
  mask::options mask;                ///< masking at ingest (on by default)
  std::size_t max_suspicious = 200;  ///< unmatched error-looking lines collected
  std::size_t max_suspicious_shown = 40;  ///< of those, shown in the report
};

struct input_stats {
  std::string path;
  std::uint64_t lines = 0, bytes = 0;
};

struct run {
  correlate::diagnosis diag;
  std::vector<ingest::input_error> errors;
  std::vector<input_stats> inputs;
  std::uint64_t total_lines = 0, total_bytes = 0;
  bool any_readable = false;
  bool masked = true;                             ///< masking was on
  std::map<std::string, std::size_t> mask_counts; ///< replacements per kind (never the values)
  std::string initiating_host_real;               ///< for salted history keys only; never rendered
  std::optional<std::int64_t> recurrences;        ///< same kind on the same host in the last `recurrence_days`
  int recurrence_days = 7;
};

/// The compiled form of a library: the prefix catalogue and the matcher. Build once, diagnose many.
struct engine {
  const kb::library* lib = nullptr;
  normalize::prefix_catalog prefixes;
  match::matcher matcher;
  static result<engine> build(const kb::library& lib);
};

result<run> diagnose(const std::vector<std::string>& paths, const engine& eng, const options& opt);
/// Convenience: builds the engine, then diagnoses.
result<run> diagnose(const std::vector<std::string>& paths, const kb::library& lib, const options& opt);

}  // namespace ff::pipeline
