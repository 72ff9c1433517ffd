// libFuzzer target: events files (events.hpp) as a merge reads them, from arbitrary bytes.
//
// The first byte chooses the form: odd, the rest is compressed with zstd first (so the JSON-lines reader is
// reached); even, the rest is the file as it is (corrupt frames, truncation). Properties checked besides "no
// crash, no hang, bounded memory": a file that reads merges with itself and concludes; written back and read
// again, it holds the same records.
#include <unistd.h>
#include <zstd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "firstfault/events.hpp"
#include "firstfault/kb.hpp"

namespace {
const ff::kb::library& lib() {
  static const ff::kb::library l = [] {
    auto r = ff::kb::library::load(true, {});
    if (!r) std::abort();
    return std::move(r).value();
  }();
  return l;
}
std::string temp_name(const char* tag) { return "/tmp/fuzz-events-" + std::to_string(::getpid()) + tag; }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    std::string z(ZSTD_compressBound(body.size()), '\0');
    std::size_t n = ZSTD_compress(z.data(), z.size(), body.data(), body.size(), 1);
    if (ZSTD_isError(n)) return 0;
    z.resize(n);
    body = std::move(z);
  }
  std::string path = temp_name(".ffev");
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(body.data(), 1, body.size(), f);
    std::fclose(f);
  } else {
    return 0;
  }
  std::vector<std::string> notes;
  auto r = ff::events::read(path, lib(), notes);
  std::remove(path.c_str());
  if (!r) return 0;
  std::size_t findings = r.value().in.findings.size(), activity = r.value().in.activity.size();
  std::string again = temp_name(".again.ffev");
  if (!ff::events::write(again, r.value(), lib(), "k")) std::abort();
  auto back = ff::events::read(again, lib(), notes);
  std::remove(again.c_str());
  if (!back || back.value().in.findings.size() != findings || back.value().in.activity.size() != activity) std::abort();
  std::vector<ff::pipeline::scanned> parts;
  parts.push_back(std::move(r).value());
  parts.push_back(std::move(back).value());
  auto merged = ff::events::merge(std::move(parts));
  auto run = ff::pipeline::conclude(std::move(merged), lib(), {});
  (void)run;
  return 0;
}
