// libFuzzer target: the whole diagnosis (ingest from a file, normalize, extract, match, correlate, render).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "firstfault/kb.hpp"
#include "firstfault/pipeline.hpp"
#include "firstfault/report.hpp"

namespace {
const ff::kb::library* g_lib = nullptr;
const ff::pipeline::engine* g_eng = nullptr;
}  // namespace

// Compiling the knowledge base takes seconds under the sanitizers: do it once, before the first input,
// so that it is not billed to (and reported as a timeout of) whatever input comes first.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_lib = new ff::kb::library(std::move(ff::kb::library::load(true, {})).value());
  g_eng = new ff::pipeline::engine(std::move(ff::pipeline::engine::build(*g_lib)).value());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& eng = *g_eng;
  static const std::string path = "/tmp/ff-fuzz-" + std::to_string(::getpid()) + ".log";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  ff::pipeline::options opt;
  opt.ingest.max_line_bytes = 4096;
  auto run = ff::pipeline::diagnose({path}, eng, opt);
  if (run) {
    (void)ff::report::to_json(run.value()).dump();
    (void)ff::report::to_terminal(run.value(), {true});
    (void)ff::report::to_markdown(run.value());
  }
  return 0;
}
