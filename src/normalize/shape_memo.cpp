// The fast path's shape memo (prefix_catalog::normalize_fast): lines that differ only in their digits
// share a shape, and a shape's peel is computed once; the hash over the digit-zeroed key.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "firstfault/normalize.hpp"
#include "catalog_impl.hpp"

namespace ff::normalize {

namespace {
// The shape memo's hash (std::hash<std::string>, murmur, was ~4% of a console's diagnosis: the key is the
// whole line). Defined on the key's 16-byte chunks as digits_to_zero() writes them (from byte 0 in steps of
// 16, then the last 16 bytes when the size is not a multiple of 16), so that digits_to_zero() computes it
// on the way; a key shorter than 16 bytes is one zero-padded chunk. Two 64-bit lanes take each chunk's two
// words with a shift, an xor and an add (four SSE2 instructions a chunk); the lanes are mixed at the end.
// Collisions cost a compare, never a wrong answer.
constexpr std::uint64_t kHashMul = 0x9E3779B97F4A7C15ull;
std::uint64_t hash_mix(std::uint64_t h, std::uint64_t w) {
  h = (h ^ w) * kHashMul;
  return h ^ (h >> 29);
}
std::uint64_t load64(const char* p) {
  std::uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}
struct hash_lanes {
  std::uint64_t a0 = 0, a1 = 0;
  void chunk(const char* p) {
    const std::uint64_t lo = load64(p), hi = load64(p + 8);
    const std::uint64_t n0 = a1 + (lo ^ (a0 >> 7)), n1 = a0 + (hi ^ (a1 >> 7));
    a0 = n0;
    a1 = n1;
  }
};
std::size_t hash_end(std::size_t size, std::uint64_t a0, std::uint64_t a1) {
  const std::uint64_t h = hash_mix(hash_mix(size * kHashMul, a0), a1);
  return static_cast<std::size_t>(h ^ (h >> 32));
}

std::size_t key_hash(std::string_view s) {
  hash_lanes L;
  if (s.size() < 16) {
    char pad[16] = {};
    std::memcpy(pad, s.data(), s.size());
    L.chunk(pad);
    return hash_end(s.size(), L.a0, L.a1);
  }
  std::size_t i = 0;
  for (; i + 16 <= s.size(); i += 16) L.chunk(s.data() + i);
  if (i < s.size()) L.chunk(s.data() + s.size() - 16);
  return hash_end(s.size(), L.a0, L.a1);
}

// `out` (room for line.size() bytes) = `line` with every ASCII digit written '0', and key_hash() of that:
// 16 bytes at a time with SSE2 (every x86-64 has it), which made the shape key ~10x cheaper than the byte
// loop (it ran on every line: ~9 instructions a byte).
std::size_t digits_to_zero(std::string_view line, char* out) {
  std::size_t i = 0;
#if defined(__SSE2__) && defined(__x86_64__)
  if (line.size() >= 16) {
    const __m128i below = _mm_set1_epi8('0' - 1), above = _mm_set1_epi8('9' + 1), zero = _mm_set1_epi8('0');
    __m128i acc = _mm_setzero_si128();  // hash_lanes: (a0, a1)
    auto chunk = [&](std::size_t at) {
      __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(line.data() + at));
      // signed compares: bytes >= 0x80 are negative, so never digits
      __m128i digit = _mm_and_si128(_mm_cmpgt_epi8(v, below), _mm_cmplt_epi8(v, above));
      v = _mm_or_si128(_mm_and_si128(digit, zero), _mm_andnot_si128(digit, v));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + at), v);
      // hash_lanes::chunk: (a0, a1) = (a1 + (lo ^ a0 >> 7), a0 + (hi ^ a1 >> 7))
      acc = _mm_add_epi64(_mm_shuffle_epi32(acc, _MM_SHUFFLE(1, 0, 3, 2)), _mm_xor_si128(v, _mm_srli_epi64(acc, 7)));
    };
    for (; i + 16 <= line.size(); i += 16) chunk(i);
    if (i < line.size()) chunk(line.size() - 16);  // the tail: the last 16 bytes again (zeroing is idempotent)
    return hash_end(line.size(), static_cast<std::uint64_t>(_mm_cvtsi128_si64(acc)),
                    static_cast<std::uint64_t>(_mm_cvtsi128_si64(_mm_unpackhi_epi64(acc, acc))));
  }
#endif
  for (; i < line.size(); ++i) out[i] = line[i] >= '0' && line[i] <= '9' ? '0' : line[i];
  return key_hash(std::string_view(out, line.size()));
}

// Were the hash digits_to_zero() computes on the way ever different from key_hash() (it is the same
// function by construction), the memo would miss on every line: then key_hash() serves the probes.
std::atomic<bool> fused_hash_ok{true};

// Per thread: the peel of each line shape seen (the line with every ASCII digit written '0'), as layers
// and group spans; a line of a known shape takes its fields from its own bytes at those spans.
std::atomic<std::uint64_t> next_shape_id{1};

struct shape_memo {
  static constexpr std::size_t kMaxLine = 255;  // offsets fit a byte
  static constexpr std::uint8_t kNone = 0xFF;
  struct layer {
    std::uint8_t id = 0, start = 0, len = 0;
    std::uint8_t span[6][2];  // rank, local_rank, task, host, ts, level: (offset, length) or kNone
  };
  struct entry {
    std::uint64_t id = 0;  // line_meta::shape_id: from one counter for every thread, never reused
    std::uint8_t n = 0, body = 0;
    bool any = false;
    bool word_sites = true;  // the key holds a digit word zeroed ("c00d"): a line of it may hold the word
    layer layers[prefix_catalog::kMaxLayers];
    // apply()'s "inner layer wins" resolved once: whether a span gives a value (to_int succeeds, a host or
    // level is not empty) depends only on which bytes are digits, which the shape fixes. Per field (rank,
    // local_rank, task, host, level) the span the last layer giving one set, or kNone; the layers with a
    // time, in order (the first whose text parses gives the line's time).
    std::uint8_t final_span[5][2];
    std::array<std::uint16_t, 8> prefixes{};  // line_meta::prefixes of every line of the shape
    std::uint8_t ts_layer[prefix_catalog::kMaxLayers];
    bool ts_iso_plain[prefix_catalog::kMaxLayers];  // that layer's time: iso or elastic, of iso_plain_shape()
    std::uint8_t n_ts = 0;
  };
  std::uint64_t owner = 0;
  int year = 0;
  // Open addressing, linear probing: a slot holds its key's hash and its entry's index + 1 (0: empty); the
  // keys sit end to end in `keys`. (A std::unordered_map<std::string, entry> walked nodes and compared
  // std::strings per probe.) Cleared, never grown, when kMaxEntries are in: the load stays <= 1/2.
  static constexpr std::size_t kMaxEntries = 8192;
  struct slot {
    std::uint64_t hash = 0;
    std::uint32_t entry = 0;
  };
  std::vector<slot> slots = std::vector<slot>(2 * kMaxEntries);
  std::vector<entry> entries;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> key_at;  // per entry: where its key starts in keys, its length
  std::string keys;
  char key[kMaxLine + 1] = {};  // the probe key
  void clear() {
    std::fill(slots.begin(), slots.end(), slot{});
    entries.clear();
    key_at.clear();
    keys.clear();
  }
  // The entry of key `k` whose hash is `h`, or null.
  const entry* find(std::string_view k, std::uint64_t h) const {
    for (std::size_t i = h & (slots.size() - 1);; i = (i + 1) & (slots.size() - 1)) {
      const slot& s = slots[i];
      if (s.entry == 0) return nullptr;
      if (s.hash != h) continue;
      const auto& [at, len] = key_at[s.entry - 1];
      if (len == k.size() && std::memcmp(keys.data() + at, k.data(), len) == 0) return &entries[s.entry - 1];
    }
  }
  void add(std::string_view k, std::uint64_t h, const entry& e) {
    std::size_t i = h & (slots.size() - 1);
    while (slots[i].entry != 0) i = (i + 1) & (slots.size() - 1);
    key_at.emplace_back(static_cast<std::uint32_t>(keys.size()), static_cast<std::uint32_t>(k.size()));
    keys.append(k);
    entries.push_back(e);
    slots[i] = {h, static_cast<std::uint32_t>(entries.size())};
  }
  // Shapes seen once, by key hash (direct-mapped): an entry is built on a shape's second line. A shape that
  // never comes back (NCCL's "comm 0x7f3a..." and "commId 0x..." lines: hex has letters, so each line is
  // a shape of its own) then costs one plain peel, not the capturing matches that build an entry, and it
  // does not fill the map, which is cleared when full. A collision only builds an entry one line early.
  std::array<std::uint64_t, 4096> seen{};
};
}  // namespace

bool prefix_catalog::normalize_fast(std::string_view line, line_meta& out) const {
  if (!lexer_enabled()) return normalize(line, out);
  if (!impl_->digit_blind || line.size() > shape_memo::kMaxLine) return normalize_fast_impl(line, out, nullptr);
  thread_local shape_memo memo;
  if (memo.owner != impl_->generation || memo.year != default_year_ || memo.entries.size() >= shape_memo::kMaxEntries) {
    memo.clear();
    memo.owner = impl_->generation;
    memo.year = default_year_;
  }
  // The shape key: every digit written '0', except inside an occurrence of a prefix's literal word with
  // digits ("c10d"), which a prefix reads as it is.
  std::size_t hash = digits_to_zero(line, memo.key);
  const std::string_view key(memo.key, line.size());
  std::size_t probe_hash = fused_hash_ok.load(std::memory_order_relaxed) ? hash : key_hash(key);
  const shape_memo::entry* found = memo.find(key, probe_hash);
  // A line can hold a digit word only where its zeroed key holds the word zeroed ("c00d"): the entry of a
  // key with no such place spares the search (a search of every line was ~100 instructions).
  if (!found || found->word_sites) {
    bool rewritten = false;
    for (const auto& w : impl_->digit_words)
      for (auto p = line.find(w); p != std::string_view::npos; p = line.find(w, p + 1)) {
        std::memcpy(memo.key + p, w.data(), w.size());
        rewritten = true;
      }
    if (rewritten) {
      probe_hash = key_hash(key);
      found = memo.find(key, probe_hash);
    }
  }
  if (!found) {
    auto& once = memo.seen[probe_hash & (memo.seen.size() - 1)];
    if (once != (probe_hash | 1)) {
      once = probe_hash | 1;
      return normalize_fast_impl(line, out, nullptr);
    }
    detail::layer_trace tr;
    bool any = normalize_fast_impl(line, out, &tr);
    // Record the spans of every group of every layer (one capturing match each, on this first line).
    shape_memo::entry e;
    e.id = next_shape_id.fetch_add(1, std::memory_order_relaxed);
    e.any = any;
    e.n = static_cast<std::uint8_t>(tr.n);
    e.body = static_cast<std::uint8_t>(out.body.data() - line.data());
    thread_local std::vector<re2::StringPiece> groups;
    for (std::size_t k = 0; k < tr.n; ++k) {
      const auto& c = impl_->pats[static_cast<std::size_t>(tr.id[k])];
      auto& L = e.layers[k];
      L.id = static_cast<std::uint8_t>(tr.id[k]);
      L.start = static_cast<std::uint8_t>(tr.start[k]);
      L.len = static_cast<std::uint8_t>(tr.len[k]);
      groups.assign(static_cast<std::size_t>(c.n_groups) + 1, re2::StringPiece());
      re2::StringPiece rest(line.data() + tr.start[k], line.size() - tr.start[k]);
      if (!c.re->Match(rest, 0, rest.size(), re2::RE2::ANCHOR_START, groups.data(), static_cast<int>(groups.size())) ||
          groups[0].size() != tr.len[k])
        return any;  // not what the peel found: this shape is not memoised
      const int g[6] = {c.g_rank, c.g_local_rank, c.g_task, c.g_host, c.g_ts, c.g_level};
      for (int q = 0; q < 6; ++q) {
        L.span[q][0] = L.span[q][1] = shape_memo::kNone;
        if (g[q] < 0 || groups[static_cast<std::size_t>(g[q])].data() == nullptr) continue;
        const auto& sp = groups[static_cast<std::size_t>(g[q])];
        L.span[q][0] = static_cast<std::uint8_t>(sp.data() - line.data());
        L.span[q][1] = static_cast<std::uint8_t>(sp.size());
      }
    }
    // Resolve the fields (see entry): the same steps as apply() on this first line.
    for (int q = 0; q < 5; ++q) e.final_span[q][0] = e.final_span[q][1] = shape_memo::kNone;
    for (std::size_t k = 0; k < e.n; ++k) {
      const auto& L = e.layers[k];
      for (int q = 0; q < 5; ++q) {
        const int slot = q < 4 ? q : 5;  // span index: level is the sixth
        if (L.span[slot][0] == shape_memo::kNone) continue;
        std::string_view v = line.substr(L.span[slot][0], L.span[slot][1]);
        const bool gives = q < 3 ? detail::to_int(v).has_value() : q == 3 ? !v.empty() : !v.empty() && v[0] != '\0';
        if (gives) e.final_span[q][0] = L.span[slot][0], e.final_span[q][1] = L.span[slot][1];
      }
      e.prefixes[k] = L.id;
      if (L.span[4][0] != shape_memo::kNone && L.span[4][1] > 0) {
        const auto& fmt = impl_->pats[L.id].ts_format;
        e.ts_iso_plain[e.n_ts] = (fmt == "iso" || fmt == "elastic") && detail::iso_plain_shape(line.substr(L.span[4][0], L.span[4][1]));
        e.ts_layer[e.n_ts++] = static_cast<std::uint8_t>(k);
      }
    }
    // The node's copy of the key is hashed by key_hash(): were the hash digits_to_zero() computes on the
    // way ever different (it is the same function by construction), every later find() would miss; then
    // key_hash() serves the probes too.
    if (key_hash(key) != probe_hash) fused_hash_ok.store(false, std::memory_order_relaxed);
    e.word_sites = std::any_of(impl_->zeroed_digit_words.begin(), impl_->zeroed_digit_words.end(),
                               [&](const std::string& z) { return key.find(z) != std::string_view::npos; });
    memo.add(key, probe_hash, e);
    out.shape_id = e.id;
    return any;
  }
  // A known shape: the same layers at the same places (digit_blind), this line's own values.
  const auto& e = *found;
  out = line_meta{};
  auto part = [&](const std::uint8_t* sp) -> std::string_view { return line.substr(sp[0], sp[1]); };
  // A number span gave to_int() a value on the shape's first line: 1 to 9 bytes, all digits, and so on
  // every line of the shape (the same bytes are digits).
  auto number = [&](const std::uint8_t* sp) {
    int n = 0;
    for (const char* p = line.data() + sp[0], *end = p + sp[1]; p != end; ++p) n = n * 10 + (*p - '0');
    return n;
  };
  if (e.final_span[0][0] != shape_memo::kNone) out.rank = number(e.final_span[0]);
  if (e.final_span[1][0] != shape_memo::kNone) out.local_rank = number(e.final_span[1]);
  if (e.final_span[2][0] != shape_memo::kNone) out.task = number(e.final_span[2]);
  if (e.final_span[3][0] != shape_memo::kNone) out.host.emplace(part(e.final_span[3]));
  if (e.final_span[4][0] != shape_memo::kNone) out.level = line[e.final_span[4][0]];
  for (std::size_t k = 0; k < e.n_ts && !out.ts; ++k) {
    const auto& L = e.layers[e.ts_layer[k]];
    const std::string_view t = line.substr(L.span[4][0], L.span[4][1]);
    out.ts = e.ts_iso_plain[k] ? detail::parse_iso_plain(t) : parse_timestamp(impl_->pats[L.id].ts_format, t, default_year_);
  }
  out.prefixes = e.prefixes;
  out.n_prefixes = e.n;
  out.body = line.substr(e.body);
  out.shape_id = e.id;
  return e.any;
}

}  // namespace ff::normalize
