// libFuzzer target: prefix peeling and sanitising of one arbitrary line.
#include <cstddef>
#include <cstdint>
#include <string>

#include "firstfault/kb.hpp"
#include "firstfault/normalize.hpp"
#include "firstfault/text.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ff::normalize::prefix_catalog cat = [] {
    auto lib = ff::kb::library::load(true, {});
    return std::move(ff::normalize::prefix_catalog::load(lib.value().prefix_files)).value();
  }();
  std::string clean = ff::text::sanitize(std::string_view(reinterpret_cast<const char*>(data), size));
  ff::normalize::line_meta m;
  cat.normalize(clean, m);
  if (m.body.size() > clean.size()) __builtin_trap();
  for (const char* fmt : {"iso", "c10", "glog", "syslog", "ctime", "uptime", "uptime_us", "elastic", "epoch"})
    (void)ff::normalize::parse_timestamp(fmt, clean, 2026);
  return 0;
}
