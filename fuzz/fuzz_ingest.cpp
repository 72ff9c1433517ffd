// libFuzzer target: ingest of compressed inputs and bundles (gzip, zstd, xz, bzip2, tar, zip, nested),
// with the decompression bounds lowered so that a bomb is reachable within libFuzzer's input size.
//
// Checks the bounds hold: no stream yields more decompressed bytes than max_stream_bytes (plus one
// buffer), and an input stopped by a bound is reported with cut_short set, never silently.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "firstfault/ingest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // The first byte picks the file name (libarchive detects formats by content; the name picks the path
  // through ingest: plain log, compressed log, or bundle).
  static const char* names[] = {"x.log", "x.log.gz", "x.log.zst", "x.log.xz", "x.log.bz2", "x.tar", "x.tar.gz", "x.zip"};
  const std::string path = "/tmp/ff-fuzz-ingest-" + std::to_string(::getpid()) + "-" + names[data[0] % 8];
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data + 1, 1, size - 1, f);
  std::fclose(f);

  ff::ingest::options opt;
  opt.max_line_bytes = 4096;
  opt.max_stream_bytes = 8ull << 20;
  opt.bomb_min_bytes = 1ull << 20;
  opt.bomb_min_lines = 1ull << 16;
  std::uint64_t most = 0;
  auto errors = ff::ingest::read_inputs({path}, opt, [&](const ff::ingest::source&, ff::ingest::line_reader& r) {
    ff::ingest::raw_line line;
    while (r.next(line)) {
      if (line.text.size() > opt.max_line_bytes) std::abort();
    }
    if (r.bytes_read() > most) most = r.bytes_read();
    return true;
  });
  std::remove(path.c_str());
  if (most > opt.max_stream_bytes + (1u << 20)) {
    std::fprintf(stderr, "BOUND: %llu decompressed bytes read from one stream\n", static_cast<unsigned long long>(most));
    std::abort();
  }
  if (most > opt.max_stream_bytes) {
    bool said = false;
    for (const auto& e : errors) said = said || e.cut_short;
    if (!said) {
      std::fprintf(stderr, "BOUND: stream over the limit without a cut-short error\n");
      std::abort();
    }
  }
  return 0;
}
