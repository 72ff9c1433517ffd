// firstfault/sink.hpp: where a run pushes what it reads, as ripgrep's searcher pushes to its Sink.
//
// The pipeline drives; the caller receives. diagnose() and scan() call begin() as each input opens,
// progress() after each block of lines (about 256 KiB) and at the end of each input, and finish() once
// with the report. Every call but finish() returns true to go on; false stops reading, and the run ends
// with errc::cancelled and no report (finish() is then not called). Every call comes from the thread
// that called diagnose() or scan(), except finish(), which runs after both threads are done.
//
//   struct progress_sink final : ff::pipeline::sink {
//     bool progress(std::uint64_t bytes, std::size_t inputs) override { draw(bytes, inputs); return true; }
//   } s;
//   auto run = ff::pipeline::diagnose(paths, eng, opt, s);
//
// Implemented by `diagnose` (its progress line), `scan`, `serve` (excerpts masked by the run's masker),
// `lsp` (source names as read, cancellation) and `watch` (the same events for followed files). Not events:
// options::host_keyer and options::recurrences are questions the run asks the history (conclude() asks
// them with no collector and no reader at hand), so they stay configuration (docs/ARCHITECTURE.md).
#pragma once

#include <cstdint>
#include <string>

namespace ff::pipeline {

class collector;
struct run;

class sink {
 public:
  virtual ~sink() = default;
  /// An input is opened: its index in correlate::inputs::source_names and its display name as read,
  /// before masking (nothing here may be rendered or stored). false: stop before reading it.
  virtual bool begin(std::uint32_t source_id, const std::string& raw_display) {
    (void)source_id, (void)raw_display;
    return true;
  }
  /// Bytes read so far and inputs started so far, after each block of lines and each input. false: stop.
  virtual bool progress(std::uint64_t bytes, std::size_t inputs) {
    (void)bytes, (void)inputs;
    return true;
  }
  /// The run is done and its report made, with the collector that made it (its masker masks any further
  /// text the caller shows the same way: serve's log viewer).
  virtual void finish(collector& col, const run& out) {
    (void)col, (void)out;
  }
};

/// A sink that takes nothing and never stops the run.
inline sink& no_sink() {
  static sink none;
  return none;
}

}  // namespace ff::pipeline
