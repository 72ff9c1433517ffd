// firstfault/line_stage.hpp: the per-line stage, one job per step.
//
// A line goes: read (ingest::line_reader: files, stdin, archives, journals, followed files) -> cut into
// blocks (pipeline::line_block) -> gate (match::gate over the block) -> mask (mask_line) -> peel
// (peel / observe_and_peel: the catalogue's layers, then a prefix the stream's learner knows) -> extract
// (extract::extractor, per rank) -> match (match::matcher). The functions here are those steps with no
// state of their own: the state (per stream, per rank, the findings) is pipeline::collector's, which
// calls them in that order (src/pipeline/line_path.cpp) and keeps what they give.
//
//   ff::normalize::line_meta meta;
//   std::string clean = ff::line::mask_line(masker, raw);       // sanitise, then mask: nothing raw after this
//   ff::line::peel(catalogue, learner, clean, meta);             // meta.body: the message; rank, host, time
//
// The light path's memos (shape_memo, step_memo) hold what a line's shape decides (normalize::line_meta::
// shape_id: the line with its digits zeroed); every answer they keep is digit-blind, which
// tests/unit/mask_test.cpp (mask_gate.light_path_checks_are_digit_blind) checks.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "firstfault/correlate.hpp"
#include "firstfault/extract.hpp"
#include "firstfault/mask.hpp"
#include "firstfault/normalize.hpp"

namespace ff::line {

// ---------------------------------------------------------------------------------------------- mask
/// Sanitises (control characters, escapes, bidi controls) and masks one raw line, in stream order (the
/// masker's line state: a key block, a secret running on). Before anything else sees the line: no output
/// can carry the raw value.
std::string mask_line(mask::masker& masker, std::string_view raw);

// ---------------------------------------------------------------------------------------------- peel
/// A prefix no catalogue entry lists, learnt from the stream (`learnt`, with `rest` the text after it),
/// applied to `meta`: the catalogue again on the rest; the learnt number is a rank only where no
/// catalogue prefix attributed the line.
void apply_learnt(const normalize::prefix_catalog& cat, normalize::line_meta& meta, const normalize::line_meta& learnt,
                  std::string_view rest);
/// A learnt prefix left on meta.body, peeled (the learner is not told of the line).
void peel_learnt(const normalize::prefix_catalog& cat, const normalize::prefix_learner& learner, normalize::line_meta& meta);
/// The catalogue's layers on `text`, then a learnt prefix: the whole peel of a line the learner has seen.
void peel(const normalize::prefix_catalog& cat, const normalize::prefix_learner& learner, std::string_view text,
          normalize::line_meta& meta);
/// The learner sees meta.body (the catalogue's body), then its prefix is peeled. `token_len`/`token_shape`:
/// the body's leading token when its line shape knows it already (nullptr: read here).
void observe_and_peel(const normalize::prefix_catalog& cat, normalize::prefix_learner& learner, normalize::line_meta& meta,
                      const std::size_t* token_len = nullptr, const std::string* token_shape = nullptr);

// ----------------------------------------------------------------------------------------- attribute
/// The rank and local rank as one number, for a stream's rank table (0: neither, the stream-level state).
std::int64_t rank_code(const std::optional<int>& rank, const std::optional<int>& local_rank);
/// The activity key of a line's rank in a torchrun attempt; none without a rank or a local rank.
std::optional<correlate::rank_key> rank_key_of(const std::optional<int>& rank, const std::optional<int>& local_rank,
                                               const std::optional<int>& attempt);
/// A line with no time of its own in its prefix may print one in its message: slurmstepd's "*** STEP 4.0 ON
/// node CANCELLED AT 2021-05-27T21:42:11 ***". Only the "AT <ISO time>" form is read.
std::optional<normalize::timestamp> time_in_message(std::string_view text);
/// True when, by hand scans, every prefix host form on `line` names `host`: none at the line's start (a pdsh
/// or syslog host there, around an NCCL header, is a second host) and every NCCL header names `host`.
/// False: maybe another host (mask::prefix_host_spans).
bool host_forms_name_only(std::string_view line, std::string_view host);

// ------------------------------------------------------------------------------- light path, per shape
/// What the light path asks of a line that depends only on its shape.
struct shape_facts {
  bool bracket_host_port = false, may_plan = true;
  // mask::prefix_host_spans of the line: how many (0: mask::prefix_host_form is false), and the first
  // (offset, length); digit-blind like the rest
  std::size_t host_forms = 0, host_at = 0, host_len = 0;
  std::size_t token_len = 0;
  std::string token_shape;
  // The words of the catalogue's prefixes of a line of this shape that can be a learnt host
  // (masker::words_that_may_be_learnt_hosts), as of `hosts_seen` learnt hosts (prefix_names_other_host)
  mutable std::size_t hosts_seen = SIZE_MAX;
  mutable std::vector<std::pair<std::size_t, std::size_t>> prefix_host_words;
};

/// shape_facts kept per shape id: the host rules' and "[host]:port" checks (their regexps tell no digit
/// from another), the learner's token of the catalogue's body (the body starts at the same byte for every
/// line of a shape; the token's classes treat all digits alike) and whether the body can name a planned
/// step count (extract::may_plan). Bounded: cleared past kMaxShapes.
class shape_memo {
 public:
  static constexpr std::size_t kMaxShapes = 16384;
  /// The facts of shape `id`, computed from `line` (and its catalogue body `body`) the first time.
  const shape_facts& facts_of(std::uint64_t id, std::string_view line, std::string_view body);

 private:
  std::unordered_map<std::uint64_t, shape_facts> shapes_;
  // A direct-mapped cache in front of the map (ids are consecutive per thread; a console has a few dozen
  // shapes): node pointers stay valid until the map is cleared, which clears this too.
  struct recent {
    std::uint64_t id = 0;
    const shape_facts* facts = nullptr;
  };
  std::array<recent, 256> recent_{};
};

/// The step of a light line, as extract::read_step(body, true) reads it, with the digits' place kept per
/// (line shape, body start): find_step() is digit-blind, so every line of a shape with its body at the
/// same byte has its step (or none) at the same place. Direct mapped, the whole key kept: a slot taken by
/// another shape is only asked again.
class step_memo {
 public:
  std::optional<long> step_of(std::uint64_t shape, std::uint8_t body_at, std::string_view body);

 private:
  struct slot {
    std::uint64_t key = 0;  // shape id << 8 | body start; 0: empty (shape ids start at 1)
    extract::step_span span;
  };
  std::array<slot, 1024> slots_{};
};

}  // namespace ff::line
