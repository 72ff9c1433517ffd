// firstfault/match.hpp: match line bodies against every signature at once.
//
// Stage 4. All fingerprints of all signatures are compiled into one Vectorscan database
// (HS_FLAG_PREFILTER | HS_FLAG_SINGLEMATCH, id = fingerprint index). A Vectorscan hit is confirmed
// with RE2 (linear time), and the signature's `extract` patterns fill its named fields. Signatures
// with `inferred_by` (verdicts reasoned across ranks) have no fingerprints and never match a line.
//
//   auto m = ff::match::matcher::compile(lib);
//   ff::match::scratch s(m.value());
//   std::vector<ff::match::hit> hits;
//   if (auto st = m.value().scan("CUDA out of memory. Tried to allocate 2.00 MiB", s, hits); !st) ...;
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "firstfault/kb.hpp"
#include "firstfault/result.hpp"

namespace ff::match {

using fields = std::vector<std::pair<std::string, std::string>>;

struct hit {
  int signature = -1;  ///< index into library::signatures
  fields captured;     ///< extract groups that matched, in pattern order
};

class matcher;

/// Per-thread scan state (Vectorscan scratch). Not copyable; one per worker thread.
class scratch {
 public:
  explicit scratch(const matcher& m);
  ~scratch();
  /// Whether Vectorscan could allocate the scratch (an error names the engine's return code).
  status ok() const;
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;

 private:
  friend class matcher;
  void* hs_ = nullptr;
  int alloc_rc_ = 0;  ///< hs_alloc_scratch's return value (HS_SUCCESS = 0)
  std::vector<int> ids_;
};

class matcher {
 public:
  /// Compiles every fingerprint. Errors name the signature and the pattern that failed.
  static result<matcher> compile(const kb::library& lib);
  /// Appends one hit per signature whose fingerprint matches `body` (confirmed by RE2). An engine error
  /// (no scratch, hs_scan failing) is an error, never "no match".
  status scan(std::string_view body, scratch& s, std::vector<hit>& out) const;
  /// Runs the extract patterns of one signature on `body`.
  fields extract(int signature, std::string_view body) const;
  const kb::library& library() const { return *lib_; }

  matcher();
  ~matcher();
  matcher(matcher&&) noexcept;
  matcher& operator=(matcher&&) noexcept;

 private:
  friend class scratch;
  struct impl;
  const kb::library* lib_ = nullptr;
  std::unique_ptr<impl> impl_;
};

/// Checks one pattern in both engines (used by `kb lint`). Returns an empty string when it compiles.
std::string check_pattern(const std::string& pattern, bool need_vectorscan);

}  // namespace ff::match
