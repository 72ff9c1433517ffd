// libFuzzer target: the whole diagnosis (ingest from a file, normalize, extract, match, correlate, render).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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
  opt.learn_lines = 0;  // the scan gate decides from the first line (inputs are short)
  auto run = ff::pipeline::diagnose({path}, eng, opt);
  if (run) {
    (void)ff::report::to_json(run.value()).dump();
    (void)ff::report::to_terminal(run.value(), {true});
    (void)ff::report::to_markdown(run.value());
  }
  // Differential check of the scan-first path: --exact must reach the same verdict, cause, rank and
  // findings (texts may differ only in masking token numbers, so they are not compared here).
  opt.exact = true;
  auto exact = ff::pipeline::diagnose({path}, eng, opt);
  if (run && exact) {
    const auto &a = run.value(), &b = exact.value();
    bool same = a.diag.verdict == b.diag.verdict && a.diag.signature == b.diag.signature &&
                a.diag.initiating_rank == b.diag.initiating_rank && a.diag.collateral.size() == b.diag.collateral.size() &&
                a.diag.suspicious.size() == b.diag.suspicious.size() && a.total_lines == b.total_lines;
    if (!same) {
      std::fprintf(stderr, "DIFF: gated %s/%s vs exact %s/%s\n", std::string(ff::correlate::to_string(a.diag.verdict)).c_str(), a.diag.signature.c_str(),
                   std::string(ff::correlate::to_string(b.diag.verdict)).c_str(), b.diag.signature.c_str());
      std::abort();
    }
  }
  return 0;
}
