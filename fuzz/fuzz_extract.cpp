// libFuzzer target: record extraction over arbitrary lines (tracebacks, ChildFailedError blocks, frames).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "firstfault/extract.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  ff::extract::extractor ex("fuzz");
  std::vector<ff::extract::exit_record> exits;
  std::vector<ff::extract::terminated_pid> terms;
  std::uint64_t n = 0;
  while (!in.empty()) {
    auto nl = in.find('\n');
    auto line = in.substr(0, nl);
    ff::extract::line_note note;
    ex.feed(line, ++n, note, exits, terms);
    if (nl == std::string_view::npos) break;
    in.remove_prefix(nl + 1);
  }
  return 0;
}
