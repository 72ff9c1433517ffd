// libFuzzer target: the signature loader, lint and example runner on an arbitrary YAML file.
#include <cstddef>
#include <cstdint>
#include <string>

#include "firstfault/kb.hpp"
#include "firstfault/kb_lint.hpp"
#include "firstfault/match.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto lib = ff::kb::library::from_files({{"fuzz/fuzz_signature.yaml", text}});
  if (!lib) return 0;
  (void)ff::kb::lint(lib.value());
  auto m = ff::match::matcher::compile(lib.value());
  if (!m) return 0;
  ff::match::scratch s(m.value());
  std::vector<ff::match::hit> hits;
  (void)m.value().scan(text, s, hits);
  return 0;
}
