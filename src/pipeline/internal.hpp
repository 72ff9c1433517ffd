// What src/pipeline/'s files share beyond pipeline.hpp. Private to src/pipeline/.
#pragma once

#include <string>
#include <vector>

#include "firstfault/pipeline.hpp"
#include "firstfault/sink.hpp"

namespace ff::pipeline {

/// Reads every input into the collector; the run's input facts go to `out`, the run's events to `events`.
/// diagnose() and scan() share it (collect.cpp).
status collect(const std::vector<std::string>& paths, const engine& eng, const options& opt, collector& col, run& out, sink& events);

}  // namespace ff::pipeline
