// firstfault/gate.hpp: the scan-first gate, one Vectorscan pass that says which raw lines can matter.
//
// A line that no gate pattern hits cannot match a fingerprint, open or continue a record the extractor
// reads, look like a failure (suspicious-line words), or change the masker's state (a host named in a
// context, a secret key, a key block). Such a line takes the pipeline's light path: prefix peel, per-rank
// facts and progress only (src/pipeline/line_path.cpp). Everything else takes the full path, as in `--exact` mode.
//
// The gate is built from:
//  - each fingerprint's required literals, computed by RE2's FilteredRE2 (the same prefilter analysis RE2
//    uses for sets of regexps: https://github.com/google/re2/blob/main/re2/filtered_re2.h). A regexp that
//    matches a text contains at least one of its atoms (lower-cased), so "any atom present" is a sound
//    gate; atoms are matched case-insensitively.
//  - the stages' own gate patterns: extract::gate_patterns() (record anchors, error words) and
//    mask::gate_patterns() (host contexts, secret keys, key blocks), both regexps.
// A fingerprint without a rare atom of at least kMinAtom bytes is put into the gate as a regexp
// (Vectorscan prefilter mode, a superset of its matches), so recall never depends on the atom choice: the
// shortest run of its top-level concatenation (top_level_elements) that holds a literal and matches no
// healthy text, else the whole fingerprint. When that run's literal is short or common but the bytes that
// can stand before it make literals healthy text lacks (left_context_literals: "inf" of INFO becomes
// ":inf", "= inf", "-inf" ...), those literals gate it instead: Vectorscan's literal matcher then does not
// stop at every INFO.
// Rare means not found in healthy text: kb/_tables/healthy_lines.tsv and the benign signatures' samples.
// The stages' patterns are gated by their literals too (down to kMinStageAtom bytes) when they have them;
// the others are narrowed the same way, to a run holding an atom of kMinAtom bytes, else kept whole.
//
//   auto g = ff::match::gate::build(lib, extra);     // result<gate>
//   ff::match::gate_scratch s(g.value());
//   bool may_matter = g.value().hit(line, s).value();
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "firstfault/kb.hpp"
#include "firstfault/result.hpp"

namespace ff::match {

/// The required literals of one RE2 pattern (lower case), as FilteredRE2 computes them with atoms of at
/// least min_len bytes. `filtered` is false when the pattern has no such atom (it can match without one).
std::vector<std::string> required_atoms(const std::string& pattern, int min_len, bool* filtered);

/// The top-level concatenation of a regexp, one element per entry with its quantifier ("\bloss",
/// "\s*", "[:=]", "(?:nan|inf)", "\b" ...); the leading inline flag group ("(?i)") goes to `flags`.
/// Empty when the pattern has a top-level alternation or syntax the splitter does not take (\Q, back
/// references). Any contiguous run of elements, with the flags, matches inside every match of the whole.
std::vector<std::string> top_level_elements(std::string_view re, std::string* flags);

/// `re` with every class that holds '\n' made not to: \s outside a class becomes [\t\x0b\x0c\r ] (inside
/// one, those bytes), \W and \D outside a class [^\w\n] and [^\d\n], a negated class [^...] gets '\n'.
/// A line holds no '\n', so on one line it matches where `re` does; in a block of lines (gate::hit_lines)
/// it cannot run from one line into the next. Other escapes, POSIX classes and '.' are kept as written.
std::string within_line(std::string_view re);

/// Literals that cover a run (a regexp of top_level_elements' kind): every match of `run` contains one of
/// them. Each is a literal of the run (a group of literal alternatives, or literal text) with the bytes
/// that can stand just before it, added one at a time over every way the elements on its left can end
/// (small byte sets with ?, *, + or no quantifier; \b ignored) until `usable` accepts it. Empty when a way
/// reaches the run's first element, needs more than `max_context` bytes, an element is of another kind,
/// or more than `max_literals` result; of several literals in the run, the one giving the fewest.
/// Under (?i) the literals are lower case. Example: `[:=]\s*[-+]?(?:nan|inf)\b` with " inf" unusable
/// gives ":inf", "=inf", "-inf", "+inf", ": inf", "  inf" ... (lower case, bytes of \s included).
std::vector<std::string> left_context_literals(const std::string& run, const std::function<bool(const std::string&)>& usable,
                                               std::size_t max_context = 3, std::size_t max_literals = 256);

class gate;

/// Per-thread gate scan state (Vectorscan scratch).
class gate_scratch {
 public:
  explicit gate_scratch(const gate& g);
  ~gate_scratch();
  gate_scratch(const gate_scratch&) = delete;
  gate_scratch& operator=(const gate_scratch&) = delete;

 private:
  friend class gate;
  void* hs_ = nullptr;
  int alloc_rc_ = 0;
};

class gate {
 public:
  static constexpr int kMinAtom = 4;  ///< shortest literal the gate accepts for a fingerprint (bytes)
  static constexpr int kMinStageAtom = 3;  ///< the same for the stages' own patterns (secret prefixes: "hf_")
  /// Builds the gate from the library's fingerprints and extra regexps (the stages' gate patterns), or
  /// loads it from the on-disk cache (then literal_count() and regex_gated() are not known: 0 and empty;
  /// `use_cache` false always builds, about a second, and stores nothing).
  static result<gate> build(const kb::library& lib, const std::vector<std::string>& extra, bool use_cache = true);
  /// A run-fact signature: benign, tagged fact.run, and no activity./event./outcome. tag. Its lines only
  /// feed the run's fact lines (correlate::inputs::fact_lines); they are common by design, so its
  /// fingerprints are gated by their own atoms even when healthy text holds them.
  static bool run_fact_only(const kb::signature& s);
  /// True when `line` (raw, unpeeled) may matter. With no patterns at all, always true. An engine error
  /// (scratch, scan) is an error, never "does not matter".
  result<bool> hit(std::string_view line, gate_scratch& s) const;
  /// One scan over a block of lines: `starts` holds each line's first byte offset in `block`, ascending
  /// (a line runs to the next start, or to the block's end, its '\n' included). Sets hit[i] (resized to
  /// starts.size()) for each line where a gate pattern ends: the lines hit() accepts (the regexps are
  /// compiled within_line(), so none runs across a '\n'; only a class within_line() keeps as written, a
  /// '\W' or '\D' inside brackets or (?s)'s '.', could still hit one more line). Patterns are compiled
  /// MULTILINE, so ^ and $ mean a line's start and end, as in hit(). Errors as hit(); with no patterns
  /// every line is hit.
  status hit_lines(std::string_view block, const std::vector<std::uint32_t>& starts, std::vector<char>& hit,
                   gate_scratch& s) const;
  bool enabled() const { return db_ != nullptr; }
  /// "signature: fingerprint" of each fingerprint gated by its own regexp (Vectorscan prefilter) because
  /// it has no literal of kMinAtom bytes that is rare: none at all, or one found in healthy text
  /// (kb/_tables/healthy_lines.tsv, another benign signature's samples). `kb lint` lists them.
  const std::vector<std::string>& regex_gated() const { return unfiltered_; }
  /// The stages' patterns that stay regexps in the gate, each as compiled: the whole pattern, or the run
  /// of it chosen as for a fingerprint when that run holds an atom of kMinAtom bytes (a command-line
  /// secret rule `--[-\w.]*(?:token|...)(?:\s+|=)...` is gated by `(?:token|...)(?:\s+|=)`). Empty when
  /// loaded from the cache.
  const std::vector<std::string>& stage_regexps() const { return stage_regexps_; }
  std::size_t literal_count() const { return literals_; }
  /// Every expression compiled into the gate's database with its Vectorscan flags (HS_FLAG_*), in database
  /// order: the fingerprints' regexps (prefilter mode), the caseless literals, the stages' regexps. Empty when loaded from the cache
  /// (build with use_cache false). `kb export --gate` prints them for bench/floor.cpp.
  const std::vector<std::pair<std::string, unsigned>>& expressions() const { return expressions_; }
  bool from_cache() const { return from_cache_; }

  gate();
  ~gate();
  gate(gate&&) noexcept;
  gate& operator=(gate&&) noexcept;

 private:
  friend class gate_scratch;
  void* db_ = nullptr;
  std::vector<std::string> unfiltered_;
  std::vector<std::string> stage_regexps_;
  std::vector<std::pair<std::string, unsigned>> expressions_;
  std::size_t literals_ = 0;
  bool from_cache_ = false;
};

}  // namespace ff::match
