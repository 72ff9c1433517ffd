// Shared fixtures for the unit tests: the built-in knowledge base and its compiled engine, built once.
#pragma once

#include <stdexcept>

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

inline const pipeline::engine& engine() {
  static const pipeline::engine eng = [] {
    auto e = pipeline::engine::build(builtin());
    if (!e) throw std::runtime_error(e.error().message);
    return std::move(e).value();
  }();
  return eng;
}

}  // namespace ff::testing
