// libFuzzer target: prefix peeling and sanitising of one arbitrary line.
#include <cstddef>
#include <cstdint>
#include <string>

#include "firstfault/kb.hpp"
#include "firstfault/normalize.hpp"
#include "firstfault/text.hpp"

namespace {
const ff::normalize::prefix_catalog* g_cat = nullptr;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  auto lib = ff::kb::library::load(true, {});
  g_cat = new ff::normalize::prefix_catalog(std::move(ff::normalize::prefix_catalog::load(lib.value().prefix_files)).value());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& cat = *g_cat;
  std::string clean = ff::text::sanitize(std::string_view(reinterpret_cast<const char*>(data), size));
  ff::normalize::line_meta m;
  cat.normalize(clean, m);
  if (m.body.size() > clean.size()) __builtin_trap();
  for (const char* fmt : {"iso", "c10", "glog", "syslog", "ctime", "uptime", "uptime_us", "elastic", "epoch"})
    (void)ff::normalize::parse_timestamp(fmt, clean, 2026);
  return 0;
}
