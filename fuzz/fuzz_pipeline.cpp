// libFuzzer target: the whole diagnosis (ingest from a file, normalize, extract, match, correlate, render).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "firstfault/kb.hpp"
#include "firstfault/pipeline.hpp"
#include "firstfault/report.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ff::kb::library lib = std::move(ff::kb::library::load(true, {})).value();
  static const ff::pipeline::engine eng = std::move(ff::pipeline::engine::build(lib)).value();
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
