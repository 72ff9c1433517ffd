// The on-disk cache of compiled Vectorscan databases, shared by the matcher and the scan gate.
#pragma once

#include <hs/hs.h>

#include <string>

namespace ff::match::detail {
/// The cache file for a database identified by `key` (content hash), with the Vectorscan version in the
/// name; "" when caching is off (FIRSTFAULT_CACHE_DIR=off, or no cache directory).
std::string cache_path(const std::string& key);
/// Loads a serialised database; false when absent, too large, stale or foreign (never trusted blindly).
bool load_cached(const std::string& path, hs_database_t** db);
/// Stores a database atomically (write to a temporary file, then rename).
void store_cached(const std::string& path, const hs_database_t* db);
}  // namespace ff::match::detail
