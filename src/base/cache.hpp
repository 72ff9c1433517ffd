// The on-disk cache directory shared by the compiled Vectorscan databases (match/db_cache.hpp) and the
// parsed knowledge base (kb/library.cpp). Everything in it is derived data: deleting it only costs time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

namespace ff::detail {
/// $FIRSTFAULT_CACHE_DIR, else $XDG_CACHE_HOME/firstfault, else ~/.cache/firstfault; "" when caching is
/// off (FIRSTFAULT_CACHE_DIR=off, or no home directory).
std::string cache_dir();
/// A cache file's bytes, in memory mapped populated: one mmap(MAP_POPULATE) instead of a page fault for each
/// 4 KiB a resized std::string and read() touch (the knowledge base's and the fingerprints' caches are
/// 0.7-0.9 MB each: 390 of a small diagnosis's 2,350 page faults, at ~8 us each on a paravirtualised VM).
class cache_bytes {
 public:
  cache_bytes() = default;
  ~cache_bytes();
  cache_bytes(const cache_bytes&) = delete;
  cache_bytes& operator=(const cache_bytes&) = delete;
  /// The whole file; false when absent, unreadable, empty, larger than `max_bytes` or short.
  bool read(const std::string& path, std::size_t max_bytes);
  std::string_view view() const { return {data_, size_}; }

 private:
  char* data_ = nullptr;
  std::size_t size_ = 0;
};
/// Writes `bytes` atomically (a temporary file, then rename): concurrent runs never see a partial
/// file. Failures are silent (the cache is an optimisation).
void store_cache_file(const std::string& path, std::string_view bytes);

/// A 64-bit hash of (name, text) pairs, hex: FNV-1a's prime over 8-byte words, each step folded (h ^= h >> 32)
/// so that a word's high bytes reach the low bits, then the tail bytes and a NUL after each text. Only
/// `pred(name)` files count. The key of the caches of derived data, and library::content_hash. (Bytewise
/// FNV-1a over the 0.8 MB of built-in texts, twice, was 9M instructions of every start.)
template <class Pred>
inline std::string files_hash_hex(const std::vector<std::pair<std::string, std::string>>& files, std::string_view seed, Pred pred) {
  constexpr std::uint64_t kPrime = 1099511628211ull;
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::string_view t) {
    std::size_t i = 0;
    for (; i + 8 <= t.size(); i += 8) {
      std::uint64_t w;
      std::memcpy(&w, t.data() + i, 8);
      h = (h ^ w) * kPrime;
      h ^= h >> 32;
    }
    for (; i < t.size(); ++i) h = (h ^ static_cast<unsigned char>(t[i])) * kPrime;
    h *= kPrime;  // the NUL after each text
  };
  mix(seed);
  for (const auto& [n, t] : files)
    if (pred(n)) mix(n), mix(t);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(h));
  return hex;
}

/// A flat byte image of derived data (the parsed knowledge base, the ordered prefix catalogue), so that a
/// cache hit is copying strings instead of parsing YAML or building a JSON DOM. Integers, bools and enums
/// are 4 bytes little-endian; a string, vector or map is its 4-byte count, then its items (a map's as key,
/// value). A struct is its fields in the order `cache_fields(T&)` (found by argument-dependent lookup)
/// returns them as a std::tie. The layout is not versioned here: the cache key must change with the
/// structs (each user puts a schema string into its key).
template <class T> struct is_vector : std::false_type {};
template <class T> struct is_vector<std::vector<T>> : std::true_type {};
template <class T> struct is_string_map : std::false_type {};
template <class V> struct is_string_map<std::map<std::string, V>> : std::true_type {};

class byte_writer {
 public:
  std::string out;
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
  template <class T>
  void put(const T& v) {
    if constexpr (std::is_same_v<T, std::string>) {
      u32(static_cast<std::uint32_t>(v.size()));
      out.append(v);
    } else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
      u32(static_cast<std::uint32_t>(v));
    } else if constexpr (is_vector<T>::value) {
      u32(static_cast<std::uint32_t>(v.size()));
      for (const auto& x : v) put(x);
    } else if constexpr (is_string_map<T>::value) {
      u32(static_cast<std::uint32_t>(v.size()));
      for (const auto& [k, x] : v) put(k), put(x);
    } else {
      std::apply([&](const auto&... f) { (put(f), ...); }, cache_fields(const_cast<T&>(v)));
    }
  }
};

/// Reads what byte_writer wrote. Every read is bounds-checked: on a short, stale or foreign image `ok`
/// turns false and the rest reads as empty (the caller then ignores the cache); no huge allocation either
/// (a count larger than the bytes left could hold is refused).
class byte_reader {
 public:
  explicit byte_reader(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  bool at_end() const { return in_.empty(); }
  std::uint32_t u32() {
    if (!ok_ || in_.size() < 4) {
      ok_ = false;
      return 0;
    }
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(in_[i])) << (8 * i);
    in_.remove_prefix(4);
    return v;
  }
  template <class T>
  void get(T& v) {
    if (!ok_) return;
    if constexpr (std::is_same_v<T, std::string>) {
      auto n = u32();
      if (!ok_ || n > in_.size()) {
        ok_ = false;
        return;
      }
      v.assign(in_.substr(0, n));
      in_.remove_prefix(n);
    } else if constexpr (std::is_same_v<T, bool>) {
      v = u32() != 0;
    } else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
      v = static_cast<T>(u32());
    } else if constexpr (is_vector<T>::value) {
      v.resize(count());
      for (auto& x : v) get(x);
    } else if constexpr (is_string_map<T>::value) {
      for (auto n = count(); ok_ && n > 0; --n) {
        std::string k;
        typename T::mapped_type x{};
        get(k), get(x);
        v.emplace(std::move(k), std::move(x));
      }
    } else {
      std::apply([&](auto&... f) { (get(f), ...); }, cache_fields(v));
    }
  }

 private:
  // every item takes at least 4 bytes
  std::uint32_t count() {
    auto n = u32();
    if (n > in_.size() / 4) ok_ = false;
    return ok_ ? n : 0;
  }
  std::string_view in_;
  bool ok_ = true;
};
}  // namespace ff::detail
