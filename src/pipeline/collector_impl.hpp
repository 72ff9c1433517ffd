// The collector's state (pipeline.hpp: collector), shared by the files that implement it: collector.cpp
// (streams, ranks, findings, the second masking pass) and line_path.cpp (each line through the per-line
// stage, line_stage.hpp). Private to src/pipeline/.
#pragma once

#include <array>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>

#include "firstfault/line_stage.hpp"
#include "firstfault/pipeline.hpp"

namespace ff::pipeline {

struct collector::impl {
  const engine& eng;
  const options opt;  // a copy: callers (tests) pass a temporary
  match::scratch scratch;
  match::gate_scratch gate_scratch;
  mask::masker masker;
  // The light path is off in exact mode, without a usable gate, and with custom mask rules (their
  // patterns are not in the engine's gate).
  bool light_ok;
  std::map<correlate::rank_key, bool> deferred_last;  // its activity.last_line is still unmasked
  correlate::inputs in;
  std::vector<match::hit> hits;
  line_block head;  // add_lines' batch, for one gate scan of all of it
  // Memory stays bounded however long the input: after kMaxPerKey findings of one signature on one
  // rank, further ones only count as repeats of the last one kept.
  static constexpr int kMaxPerKey = 64;
  std::map<std::tuple<int, int, int>, std::pair<int, std::size_t>> per_key;  // (signature, rank, attempt) -> (count, last index)
  std::map<std::string, std::size_t> suspicious_by_template;  // template -> index in in.suspicious
  static constexpr std::size_t kMaxRanks = 16384;  // distinct ranks with their own per-rank state
  // Findings kept in all (each holds up to ~2.3 KB: line, captures, source): past the bound a finding only
  // counts as a repeat of the first one of its signature. With the pair budgets below, the collector's
  // tables stay under ~40 MiB whatever the input (the masker's own tables: mask.hpp).
  static constexpr std::size_t kMaxFindings = 8192;
  static constexpr std::size_t kMaxPairs = 65536;  // host -> rank and local rank -> rank pairs, each table
  // Stack tops (the innermost frame of each traceback or py-spy dump) kept per rank and ranks with any: the
  // odd-rank-out rule needs a few dumps per rank, not every one of a hang that was dumped every second.
  static constexpr std::size_t kMaxStackTopRanks = 65536, kMaxStackTopsPerRank = 64;
  // A restart line's "K/M attempts left" spans at most this many attempts (a larger M is a garbled line).
  static constexpr long kMaxRestartSpan = 100000;
  std::size_t host_rank_pairs = 0, local_rank_pairs = 0;
  std::map<int, std::size_t> first_of_signature;  // signature -> index of its first finding
  bool rank_bound_hit = false, findings_bound_hit = false, pairs_bound_hit = false;
  std::string engine_error;  // the first matching-engine error: the run is an error, never "healthy"
  bool deferring = false;    // in add_block(): a light line's text stays valid until flush_light() at the block's end
  // What the light path asks of a line that depends only on its shape (normalize::line_meta::shape_id: the
  // line with its digits zeroed), kept per shape (line::shape_memo), and where a light line's step is, kept
  // per shape and body start (line::step_memo). A unit test checks each of these gives the same answer when
  // a line's digits change.
  line::shape_memo shape_memo;
  line::step_memo steps;
  // Run-fact candidates (engine::fact_free_gate): lines of add_block() that only a run-fact signature's
  // gate literals hit, taken the light way. Each is kept raw with what the full path would have put in its
  // inputs::marked_line; collector::flush_facts() masks and matches the newest until kMaxWorkLines are
  // confirmed (inputs::fact_lines keeps no more), at a stream's end, before a full-path fact line is kept,
  // and when kFactsKept lines or kFactBytes wait. A console's tqdm bars (21,420 lines of ~840 bytes in the
  // 200 MB bench console) read in full had tripled the CPU of a diagnosis.
  struct fact_candidate {
    std::string body;  // trimmed, raw (not masked yet)
    std::string source;
    std::uint64_t line_no = 0;
    std::optional<int> rank, local_rank;
    std::optional<normalize::timestamp> ts;
    bool ts_inherited = false;
  };
  static constexpr std::size_t kFactsKept = 2048, kFactBytes = 4u << 20;
  std::vector<fact_candidate> facts;
  std::size_t fact_bytes = 0;
  match::gate_scratch fact_gate_scratch;
  bool fact_line = false;
  // add_block(): the sanitised text of its lines that sanitising changes, read the light way
  // (add_line_gated); views into them are pending until the block's end.
  std::deque<std::string> sanitized;
  // add_block(): each line's verdicts for add_line_gated (collector::second_scans), and the block of the
  // lines a second scan reads (with their indices in the block)
  struct line_verdicts {
    int gate_hit = 0, plain = 1, fact_free_hit = -1;
    const std::string* sanitized = nullptr;  // into `sanitized`
  };
  std::vector<line_verdicts> lines;
  line_block regate;
  std::vector<std::size_t> regate_of;  // add_block(): the line being added is a fact candidate (process() keeps it if it stays light)
  impl(const engine& e, const options& o)
      : eng(e), opt(o), scratch(e.matcher), gate_scratch(e.gate), masker(o.mask),
        // (--redact reads every line in full: the gate holds no host context, so a host named on a line
        // it lets through would not be learnt; identity masking is the rare, thorough mode)
        light_ok(!o.exact && e.gate.enabled() && o.mask.extra.empty() && !(o.mask.enabled && o.mask.redact)),
        fact_gate_scratch(e.fact_free_gate) {}
};

}  // namespace ff::pipeline
