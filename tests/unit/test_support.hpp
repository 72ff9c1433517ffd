// Shared fixtures for the unit tests: the built-in knowledge base and its compiled engine, built once.
#pragma once

#include <algorithm>

#include <unistd.h>

#include <cstdint>
#include <optional>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "firstfault/kb.hpp"
#include "firstfault/pipeline.hpp"

namespace ff::testing {

inline const kb::library& builtin() {
  static const kb::library lib = [] {
    auto l = kb::library::load(true, {});
    if (!l) throw std::runtime_error(l.error().message);
    return std::move(l).value();
  }();
  return lib;
}

/// The index of the built-in signature `name` (finding::signature), or throws when there is none.
inline int signature_index(const std::string& name) {
  const auto& s = builtin().signatures;
  auto it = std::find_if(s.begin(), s.end(), [&](const kb::signature& x) { return x.name == name; });
  if (it == s.end()) throw std::runtime_error("no signature " + name);
  return static_cast<int>(it - s.begin());
}

/// A finding of the built-in signature `name`, for rules tested on hand-built findings.
inline correlate::finding make_finding(const std::string& name, std::uint64_t line_no, std::string text, std::optional<int> rank,
                                       match::fields captured, std::string source) {
  correlate::finding f;
  f.signature = signature_index(name);
  f.rank = rank;
  f.captured = std::move(captured);
  f.text = std::move(text);
  f.source = std::move(source);
  f.line_no = line_no;
  return f;
}

inline const pipeline::engine& engine() {
  static const pipeline::engine eng = [] {
    auto e = pipeline::engine::build(builtin());
    if (!e) throw std::runtime_error(e.error().message);
    return std::move(e).value();
  }();
  return eng;
}

/// Diagnoses one log file (console.log in a fresh temporary directory named after `name`) holding `text`.
inline pipeline::run diagnose_text(const std::string& name, const std::string& text) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("ff-unit-" + std::to_string(::getpid()) + "-" + name);
  fs::create_directories(dir);
  std::ofstream(dir / "console.log") << text;
  auto r = pipeline::diagnose({(dir / "console.log").string()}, engine(), {});
  fs::remove_all(dir);
  if (!r) throw std::runtime_error(r.error().message);
  return std::move(r).value();
}

/// A small deterministic generator for the differential tests (PCG's LCG step, the high bits): the same
/// seed gives the same inputs on every machine.
class lcg {
 public:
  explicit lcg(std::uint64_t seed) : state_(seed) {}
  std::size_t operator()() {
    state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<std::size_t>(state_ >> 33);
  }

 private:
  std::uint64_t state_;
};

}  // namespace ff::testing
