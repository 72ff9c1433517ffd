// The on-disk cache directory shared by the compiled Vectorscan databases (match/db_cache.hpp) and the
// parsed knowledge base (kb/library.cpp). Everything in it is derived data: deleting it only costs time.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ff::detail {
/// $FIRSTFAULT_CACHE_DIR, else $XDG_CACHE_HOME/firstfault, else ~/.cache/firstfault; "" when caching is
/// off (FIRSTFAULT_CACHE_DIR=off, or no home directory).
std::string cache_dir();
/// The whole file in `out`; false when absent, unreadable, empty or larger than `max_bytes`.
bool read_cache_file(const std::string& path, std::size_t max_bytes, std::string& out);
/// Writes `bytes` atomically (a temporary file, then rename): concurrent runs never see a partial
/// file. Failures are silent (the cache is an optimisation).
void store_cache_file(const std::string& path, std::string_view bytes);
}  // namespace ff::detail
