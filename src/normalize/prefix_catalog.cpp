// Prefix peeling driven by kb/_prefixes/*.yaml.
#include <re2/re2.h>
#include <re2/set.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <map>
#include <unordered_map>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../base/cache.hpp"
#include "firstfault/normalize.hpp"

namespace ff::normalize {

struct prefix_catalog::impl {
  struct compiled {
    std::unique_ptr<re2::RE2> re;
    int n_groups = 0;
    int g_rank = -1, g_local_rank = -1, g_host = -1, g_task = -1, g_ts = -1, g_level = -1;
    std::string ts_format;
    // No assertion that looks past the match (\b, $, ...): then the captures of a match depend only on
    // the matched bytes, and a memo keyed by them is exact (see normalize()).
    bool memo_ok = false;
  };
  std::vector<compiled> pats;
  std::unique_ptr<re2::RE2::Set> set;
  // Distinct for every catalogue ever loaded in this process (the per-thread memo is keyed by it: a new
  // catalogue at a freed one's address must not see its entries).
  std::uint64_t generation = 0;
  // Which patterns match a prefix of `text`; false when none.
  bool set_match(re2::StringPiece text, std::vector<int>& hits) const;
  std::uint64_t fingerprint = 0;  // FNV-1a over every prefix's name and regexp, in order
  bool lexer_ok = false;          // fingerprint == kLexerCatalogue
  bool digit_blind = false;       // every prefix regexp is detail::digit_blind (the shape memo's condition)
  std::vector<std::string> digit_words;  // literal words with digits in them ("c10d"): kept in shape keys
  std::vector<std::string> zeroed_digit_words;  // the same with their digits written '0' ("c00d")
};

namespace {
// The built-in catalogue (kb/_prefixes) the lexer's rules were derived from. When a prefix file changes,
// the lexer is off and prefix_catalog.lexer_is_on_for_the_builtin_catalogue fails, until the rules of
// lex_tag, lex_nccl and lex_no_prefix are re-checked against the new catalogue and this value is set to
// the fingerprint the test prints.
constexpr std::uint64_t kLexerCatalogue = 12911261379106908036ULL;
}  // namespace

bool prefix_catalog::impl::set_match(re2::StringPiece text, std::vector<int>& hits) const {
  // (A Vectorscan copy of this set, each pattern anchored, was measured: 2.4x the instructions of RE2::Set
  // on console lines, so the set stays in RE2.)
  hits.clear();
  return set->Match(text, &hits) && !hits.empty();
}

// What one prefix match yields, kept per (prefix, matched bytes).
struct detail::layer_fields {
  std::optional<int> rank, local_rank, task;
  std::optional<std::string> host;
  char level = 0;
  bool has_ts = false;
  std::optional<timestamp> ts;
};

namespace {
using detail::layer_fields;

// Per thread: the catalogue and default year it was filled for, and (prefix index, matched bytes) -> fields.
struct layer_memo {
  std::uint64_t owner = 0;  // impl::generation of the catalogue it was filled for
  int year = 0;
  std::unordered_map<std::string, layer_fields> map;
  std::string key;
  static constexpr std::size_t kMaxEntries = 16384;  // then it starts over (a log of all-distinct prefixes)
};

bool memo_safe(const std::string& regex) {
  for (const char* a : {"\\b", "\\B", "$", "\\z", "\\Z", "\\A", "(?m", "(?s"})
    if (regex.find(a) != std::string::npos) return false;
  for (std::size_t i = regex.find('^'); i != std::string::npos; i = regex.find('^', i + 1))
    if (i == 0 || regex[i - 1] != '[') return false;
  return true;
}
}  // namespace

prefix_catalog::prefix_catalog() : impl_(std::make_unique<impl>()) {}
prefix_catalog::~prefix_catalog() = default;
prefix_catalog::prefix_catalog(prefix_catalog&&) noexcept = default;
prefix_catalog& prefix_catalog::operator=(prefix_catalog&&) noexcept = default;

namespace {
std::string fmt_meta(const line_meta& m, const std::string& key) {
  if (key == "rank") return m.rank ? std::to_string(*m.rank) : "";
  if (key == "local_rank") return m.local_rank ? std::to_string(*m.local_rank) : "";
  if (key == "task") return m.task ? std::to_string(*m.task) : "";
  if (key == "host") return m.host.value_or("");
  if (key == "body") return std::string(m.body);
  if (key == "level") return m.level ? std::string(1, m.level) : "";
  if (key == "has_ts") return m.ts ? "true" : "false";
  return "<unknown key " + key + ">";
}
}  // namespace

// The order prefixes are tried in, derived from their samples as lnav's format loader does: when prefix A
// also matches a sample of prefix B where B's layer starts in it (a sample is a whole line, B possibly
// under other layers) and B does not match any sample of A that way, B is the more specific one and is
// tried first (rsyslog "TIME HOST prog: " before kubectl's bare "TIME "). Prefixes
// with no such relation keep the order of the files and of their entries, so the file names only break
// ties. Both matching each other's samples is left to that order too (the samples check below reports
// a sample that ends up peeled by the other one).
void prefix_catalog::order_by_samples(prefix_catalog& cat, const std::vector<prefix_sample>& samples) {
  const std::size_t n = cat.defs_.size();
  auto matches_at = [&](std::size_t i, std::string_view line, std::size_t at) {
    re2::StringPiece in(line.data() + at, line.size() - at);
    return re2::RE2::Consume(&in, *cat.impl_->pats[i].re);
  };
  // (sample, where its own prefix's layer starts: the leftmost match of that prefix, one linear RE2 search)
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> of(n);
  for (std::size_t k = 0; k < samples.size(); ++k)
    for (std::size_t i = 0; i < n; ++i)
      if (cat.defs_[i].name == samples[k].prefix) {
        const auto& line = samples[k].line;
        re2::StringPiece m;
        if (cat.impl_->pats[i].re->Match(line, 0, line.size(), re2::RE2::UNANCHORED, &m, 1))
          of[i].emplace_back(k, static_cast<std::size_t>(m.data() - line.data()));
      }
  auto matches_any_sample_of = [&](std::size_t a, std::size_t b) {
    for (auto [k, at] : of[b])
      if (matches_at(a, samples[k].line, at)) return true;
    return false;
  };
  std::vector<std::vector<std::size_t>> after(n);  // after[b]: prefixes that must come after b
  std::vector<std::size_t> before_count(n, 0);
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = 0; b < n; ++b)
      if (a != b && matches_any_sample_of(a, b) && !matches_any_sample_of(b, a)) {
        after[b].push_back(a);
        ++before_count[a];
      }
  // Kahn's topological sort, always taking the earliest ready prefix in file order: the file order when it
  // already agrees with the samples. The relation is not transitive, so three prefixes can form a cycle
  // (A before B before C before A); then no prefix is ready and the earliest one left in file order is
  // taken, as if the files had been ordered by hand. The sample check below still holds every prefix to
  // peeling its own samples.
  std::vector<std::size_t> order;
  std::vector<bool> done(n, false);
  while (order.size() < n) {
    std::size_t pick = n;
    for (std::size_t i = 0; i < n && pick == n; ++i)
      if (!done[i] && before_count[i] == 0) pick = i;
    if (pick == n)
      for (std::size_t i = 0; i < n && pick == n; ++i)
        if (!done[i]) pick = i;
    done[pick] = true;
    order.push_back(pick);
    for (auto a : after[pick])
      if (before_count[a] > 0) --before_count[a];
  }
  std::vector<prefix_def> defs;
  std::vector<impl::compiled> pats;
  for (auto i : order) {
    defs.push_back(std::move(cat.defs_[i]));
    pats.push_back(std::move(cat.impl_->pats[i]));
  }
  cat.defs_ = std::move(defs);
  cat.impl_->pats = std::move(pats);
}

namespace {
// The parsed and ordered catalogue is cached (base/cache.hpp) keyed by the prefix files' names and texts:
// the YAML parse and the ordering by samples were a quarter of a small diagnosis's instructions (24M of
// 106M). Bump kPrefixCacheSchema when prefix_def, prefix_sample or the ordering changes. A hit still
// compiles every regexp and checks every sample below.
constexpr std::string_view kPrefixCacheSchema = "prefix-catalogue-1";

std::string prefix_cache_path(const std::vector<std::pair<std::string, std::string>>& files) {
  std::string dir = ff::detail::cache_dir();
  if (dir.empty()) return "";
  return dir + "/prefixes-" + ff::detail::files_hash_hex(files, kPrefixCacheSchema, [](const std::string&) { return true; }) + ".bin";
}
}  // namespace

auto cache_fields(prefix_def& d) { return std::tie(d.name, d.title, d.regex, d.ts_format, d.midline); }
auto cache_fields(prefix_catalog::prefix_sample& s) { return std::tie(s.prefix, s.file, s.line, s.expect); }

status prefix_catalog::parse_files(const std::vector<std::pair<std::string, std::string>>& files, std::vector<prefix_def>& defs,
                                   std::vector<prefix_sample>& samples) {
  for (const auto& [fname, text] : files) {
    YAML::Node doc;
    try {
      doc = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      return error{fname + ": invalid YAML: " + e.what()};
    }
    if (!doc["prefixes"] || !doc["prefixes"].IsSequence()) return error{fname + ": missing 'prefixes' list"};
    for (const auto& p : doc["prefixes"]) {
      prefix_def d;
      try {
        d.name = p["name"].as<std::string>();
        d.title = p["title"] ? p["title"].as<std::string>() : d.name;
        d.regex = p["regex"].as<std::string>();
        d.ts_format = p["ts_format"] ? p["ts_format"].as<std::string>() : "";
        d.midline = p["midline"] && p["midline"].as<bool>();
        if (!p["samples"]) return error{fname + ": prefix " + d.name + ": no samples (every prefix needs at least one)"};
        for (const auto& smp : p["samples"]) {
          prefix_sample one{d.name, fname, smp["line"].as<std::string>(), {}};
          if (smp["expect"])
            for (const auto& kv : smp["expect"]) one.expect[kv.first.as<std::string>()] = kv.second.as<std::string>();
          samples.push_back(std::move(one));
        }
      } catch (const YAML::Exception& e) {
        return error{fname + ": prefix entry: " + e.what()};
      }
      defs.push_back(std::move(d));
    }
  }
  return ok();
}

result<prefix_catalog> prefix_catalog::load(const std::vector<std::pair<std::string, std::string>>& files) {
  prefix_catalog cat;
  static std::atomic<std::uint64_t> generations{0};
  cat.impl_->generation = ++generations;
  re2::RE2::Options ro;
  ro.set_log_errors(false);
  cat.impl_->set = std::make_unique<re2::RE2::Set>(ro, re2::RE2::ANCHOR_START);
  std::vector<prefix_sample> samples;
  const std::string cache = prefix_cache_path(files);
  ff::detail::cache_bytes bytes;
  bool cached = false;
  if (!cache.empty() && bytes.read(cache, 16u << 20)) {
    ff::detail::byte_reader r(bytes.view());
    r.get(cat.defs_), r.get(samples);
    cached = r.ok() && r.at_end();
    if (!cached) cat.defs_.clear(), samples.clear();
  }
  if (!cached)
    if (auto st = parse_files(files, cat.defs_, samples); !st) return st.error();
  auto file_of = [&samples](const std::string& prefix) -> std::string {  // every entry has a sample (parse_files)
    for (const auto& smp : samples)
      if (smp.prefix == prefix) return smp.file + ": ";
    return "";
  };
  for (const auto& d : cat.defs_) {
    impl::compiled c;
    c.re = std::make_unique<re2::RE2>(d.regex, ro);
    if (!c.re->ok()) return error{file_of(d.name) + "prefix " + d.name + ": bad regex: " + c.re->error()};
    c.n_groups = c.re->NumberOfCapturingGroups();
    for (const auto& [gname, idx] : c.re->NamedCapturingGroups()) {
      if (gname == "rank") c.g_rank = idx;
      else if (gname == "local_rank") c.g_local_rank = idx;
      else if (gname == "host") c.g_host = idx;
      else if (gname == "task") c.g_task = idx;
      else if (gname == "ts") c.g_ts = idx;
      else if (gname == "level") c.g_level = idx;
    }
    // A prefix with a time in it matches new bytes on every line: a memo would only fill up.
    c.memo_ok = memo_safe(d.regex) && c.g_ts < 0;
    if (c.g_ts >= 0 && d.ts_format.empty()) return error{file_of(d.name) + "prefix " + d.name + ": has (?P<ts>) but no ts_format"};
    c.ts_format = d.ts_format;
    cat.impl_->pats.push_back(std::move(c));
  }
  if (!cached) {
    order_by_samples(cat, samples);
    if (!cache.empty()) {
      ff::detail::byte_writer w;
      w.put(cat.defs_), w.put(samples);
      ff::detail::store_cache_file(cache, w.out);
    }
  }
  for (const auto& d : cat.defs_) {
    std::string err;
    if (cat.impl_->set->Add(d.regex, &err) < 0) return error{"prefix " + d.name + ": " + err};
  }
  if (!cat.impl_->set->Compile()) return error{"prefix catalogue: RE2::Set failed to compile (out of memory)"};
  std::uint64_t h = 1469598103934665603ull;
  for (const auto& d : cat.defs_)
    for (const std::string* part : {&d.name, &d.regex, &d.ts_format})
      for (char ch : *part + '\n') h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  cat.impl_->fingerprint = h;
  cat.impl_->lexer_ok = h == kLexerCatalogue;
  cat.impl_->digit_blind = std::all_of(cat.defs_.begin(), cat.defs_.end(),
                                       [&](const prefix_def& d) { return detail::digit_blind(d.regex, &cat.impl_->digit_words); });
  {  // each word once: every line's shape key looks for each of them ("c10d" is in several prefixes)
    auto& w = cat.impl_->digit_words;
    std::sort(w.begin(), w.end());
    w.erase(std::unique(w.begin(), w.end()), w.end());
    for (std::string z : w) {
      for (char& c : z)
        if (c >= '0' && c <= '9') c = '0';
      cat.impl_->zeroed_digit_words.push_back(std::move(z));
    }
  }
  // Samples are checked at every load: a prefix that does not peel its own sample is a load error.
  for (const auto& s : samples) {
    line_meta m;
    cat.normalize(s.line, m);
    bool peeled_own = false;
    for (std::size_t i = 0; i < m.n_prefixes; ++i) peeled_own |= (cat.defs_[m.prefixes[i]].name == s.prefix);
    if (!peeled_own) return error{s.file + ": prefix " + s.prefix + ": sample not peeled by it: " + s.line};
    for (const auto& [k, v] : s.expect) {
      std::string got = fmt_meta(m, k);
      if (got != v) return error{s.file + ": prefix " + s.prefix + ": sample gives " + k + "='" + got + "', expected '" + v + "': " + s.line};
    }
  }
  return cat;
}

void prefix_catalog::disable_shortcuts() {
  if (!impl_) return;
  for (auto& c : impl_->pats) c.memo_ok = false;
}

namespace {
std::optional<int> to_int(std::string_view v) {
  if (v.empty() || v.size() > 9) return std::nullopt;
  int n = 0;
  for (char ch : v) {
    if (ch < '0' || ch > '9') return std::nullopt;
    n = n * 10 + (ch - '0');
  }
  return n;
}

void apply(line_meta& out, const layer_fields& f, int id, std::size_t len) {
  // Inner layers are more specific (a [rankN] tag beats a launcher's task label), so later wins.
  if (f.rank) out.rank = f.rank;
  if (f.local_rank) out.local_rank = f.local_rank;
  if (f.task) out.task = f.task;
  if (f.host) out.host = f.host;
  if (f.level) out.level = f.level;
  if (f.has_ts && !out.ts) out.ts = f.ts;
  out.prefixes[out.n_prefixes++] = static_cast<std::uint16_t>(id);
  out.body.remove_prefix(len);
}

layer_memo& thread_memo(std::uint64_t generation, int year) {
  thread_local layer_memo memo;
  if (memo.owner != generation || memo.year != year || memo.map.size() >= layer_memo::kMaxEntries) {
    memo.map.clear();
    memo.owner = generation;
    memo.year = year;
  }
  return memo;
}
}  // namespace

// Prefix `id` at the start of `rest`: its extent and captures, from the memo when the same prefix matched
// the same bytes before. Exact: with no assertion past the match, the leftmost-first path that ends at the
// match's end is the same for any text that starts with those bytes (RE2 finds the extent with its DFA,
// cheaply). False when it yields no extent (normalize() stops peeling there).
bool prefix_catalog::take(int id, std::string_view rest_v, layer_fields& fresh, const layer_fields*& f, std::size_t& len) const {
  thread_local std::vector<re2::StringPiece> groups;
  re2::StringPiece rest(rest_v.data(), rest_v.size());
  const auto& c = impl_->pats[static_cast<std::size_t>(id)];
  f = nullptr;
  len = 0;
  layer_memo* memo = nullptr;
  if (c.memo_ok) {
    re2::StringPiece whole;
    if (!c.re->Match(rest, 0, rest.size(), re2::RE2::ANCHOR_START, &whole, 1)) return false;
    len = whole.size();
    if (len == 0) return false;  // a prefix must consume something
    memo = &thread_memo(impl_->generation, default_year_);
    memo->key.assign(reinterpret_cast<const char*>(&id), sizeof id);
    memo->key.append(rest.data(), len);
    if (auto it = memo->map.find(memo->key); it != memo->map.end()) {
      f = &it->second;
      return true;
    }
  }
  groups.assign(static_cast<std::size_t>(c.n_groups) + 1, re2::StringPiece());
  if (!c.re->Match(rest, 0, rest.size(), re2::RE2::ANCHOR_START, groups.data(), static_cast<int>(groups.size()))) return false;
  if (groups[0].size() == 0 || (c.memo_ok && groups[0].size() != len)) return false;  // a prefix must consume something
  len = groups[0].size();
  auto grp = [&](int g) -> std::string_view {
    if (g < 0 || groups[static_cast<std::size_t>(g)].data() == nullptr) return {};
    auto& sp = groups[static_cast<std::size_t>(g)];
    return {sp.data(), sp.size()};
  };
  fresh = layer_fields{};
  fresh.rank = to_int(grp(c.g_rank));
  fresh.local_rank = to_int(grp(c.g_local_rank));
  fresh.task = to_int(grp(c.g_task));
  if (auto h = grp(c.g_host); !h.empty()) fresh.host = std::string(h);
  if (auto l = grp(c.g_level); !l.empty()) fresh.level = l[0];
  if (auto t = grp(c.g_ts); !t.empty()) {
    fresh.has_ts = true;
    fresh.ts = parse_timestamp(c.ts_format, t, default_year_);
  }
  f = memo ? &memo->map.emplace(memo->key, fresh).first->second : &fresh;
  return true;
}

bool prefix_catalog::normalize(std::string_view line, line_meta& out) const { return normalize_impl(line, out, nullptr); }

bool prefix_catalog::normalize_impl(std::string_view line, line_meta& out, detail::layer_trace* tr) const {
  out.body = line;
  bool any = false;
  // scratch reused across calls (one allocation per thread, not per line)
  thread_local std::vector<int> hits;
  bool jumped = false;
  for (int layer = 0; layer < kMaxLayers && !out.body.empty(); ++layer) {
    re2::StringPiece rest(out.body.data(), out.body.size());
    hits.clear();
    if (!impl_->set_match(rest, hits)) {
      // Nothing peels here: look once for a mid-line header after a '[' (a progress bar glued on).
      if (jumped) break;
      jumped = true;
      bool found = false;
      std::size_t from = 1;
      for (int tries = 0; tries < 16 && !found; ++tries) {
        auto pos = out.body.find('[', from);
        if (pos == std::string_view::npos) break;
        from = pos + 1;
        // mid-line headers start "[E1206 ...", "[W ...", "[rank3]:": skip every other '[' cheaply
        char next = pos + 1 < out.body.size() ? out.body[pos + 1] : '\0';
        if (next != 'I' && next != 'W' && next != 'E' && next != 'F' && next != 'r') continue;
        re2::StringPiece at(out.body.data() + pos, out.body.size() - pos);
        if (!impl_->set_match(at, hits)) continue;
        hits.erase(std::remove_if(hits.begin(), hits.end(), [&](int h) { return !defs_[static_cast<std::size_t>(h)].midline; }), hits.end());
        if (hits.empty()) continue;
        out.body.remove_prefix(pos);
        rest = at;
        found = true;
      }
      if (!found) break;
    }
    int id = *std::min_element(hits.begin(), hits.end());
    layer_fields fresh;
    const layer_fields* f = nullptr;
    std::size_t len = 0;
    if (!take(id, std::string_view(rest.data(), rest.size()), fresh, f, len)) break;
    if (tr) tr->add(id, static_cast<std::size_t>(rest.data() - line.data()), len);
    apply(out, *f, id, len);
    any = true;
  }
  return any;
}

std::uint64_t prefix_catalog::fingerprint() const { return impl_ ? impl_->fingerprint : 0; }
bool prefix_catalog::lexer_enabled() const { return impl_ && impl_->lexer_ok; }

namespace {
bool ascii_letter(char c) {
  char l = static_cast<char>(c | 0x20);
  return l >= 'a' && l <= 'z';
}
bool ascii_digit(char c) { return c >= '0' && c <= '9'; }
bool word_byte(char c) { return ascii_letter(c) || ascii_digit(c) || c == '_'; }  // RE2's \w
bool space_byte(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' || c == '\v'; }
std::size_t digits_at(std::string_view s, std::size_t i) {
  std::size_t j = i;
  while (j < s.size() && ascii_digit(s[j])) ++j;
  return j - i;
}

// What the lexer checked once against the catalogue, per key (per thread, like layer_memo).
struct lexer_memo {
  struct entry {
    bool agrees = false;  // the catalogue gave what the lexer said; false: always ask the catalogue
    int id = -1;
    std::size_t len = 0;  // tags: the catalogue's extent (the key holds every byte it depends on)
    layer_fields fields;
  };
  std::uint64_t owner = 0;
  int year = 0;
  std::unordered_map<std::string, entry> map;
  std::string key;
  static constexpr std::size_t kMaxEntries = 16384;
};

// torchrun's tee tags: '[' letters/'_'/'-' digits "]:" and an optional space (kept in the key: whether
// the catalogue's pattern takes it is its business). The bytes of the key, or 0.
std::size_t lex_tag(std::string_view r) {
  if (r.empty() || r[0] != '[') return 0;
  std::size_t i = 1;
  while (i < r.size() && i < 48 && (ascii_letter(r[i]) || r[i] == '_' || r[i] == '-')) ++i;
  std::size_t d = digits_at(r, i);
  if (d == 0 || d > 9) return 0;
  i += d;
  if (i + 1 >= r.size() || r[i] != ']' || r[i + 1] != ':') return 0;
  i += 2;
  if (i < r.size() && r[i] == ' ') ++i;
  return i;
}

// NCCL's header "host:pid:tid [dev] ": the extent, and the host's length (a letter first: a host of digits
// could be a time another prefix reads). 0 when not this form. `has_file`: a "file.cc:line " follows, which
// stays in the body (the nccl_warn_family_* signatures read the source file there).
std::size_t lex_nccl(std::string_view r, std::size_t& host_len, bool& has_file) {
  if (r.empty() || !ascii_letter(r[0])) return 0;
  std::size_t i = 0;
  while (i < r.size() && i < 128 && (word_byte(r[i]) || r[i] == '.' || r[i] == '-')) ++i;
  host_len = i;
  for (int k = 0; k < 2; ++k) {  // ":pid" ":tid"
    if (i >= r.size() || r[i] != ':') return 0;
    std::size_t d = digits_at(r, i + 1);
    if (d == 0) return 0;
    i += 1 + d;
  }
  if (i + 1 >= r.size() || r[i] != ' ' || r[i + 1] != '[') return 0;
  std::size_t d = digits_at(r, i + 2);
  if (d == 0) return 0;
  i += 2 + d;
  if (i + 1 >= r.size() || r[i] != ']' || r[i + 1] != ' ') return 0;
  i += 2;
  // A run of [\w./-] ending in ".cc", ".c", ".h" or ".cpp" after at least one byte, then ':', digits, ' '.
  has_file = false;
  std::size_t j = i;
  while (j < r.size() && (word_byte(r[j]) || r[j] == '.' || r[j] == '/' || r[j] == '-')) ++j;
  std::string_view t = r.substr(i, j - i);
  auto ends = [&](std::string_view ext) { return t.size() > ext.size() && t.substr(t.size() - ext.size()) == ext; };
  if ((ends(".cc") || ends(".c") || ends(".h") || ends(".cpp")) && j < r.size() && r[j] == ':') {
    std::size_t dd = digits_at(r, j + 1);
    has_file = dd > 0 && j + 1 + dd < r.size() && r[j + 1 + dd] == ' ';
  }
  return i;
}

// A body no built-in prefix can start: a letter first (every other built-in prefix starts with '[', '(',
// a digit or ':'), not a glog level and digit ("I1206"), not a month or weekday name (syslog and ctime
// dates), and a first word not followed by ':' (host, facility and NCCL forms: "node-1: ", "kern  :")
// or '/' (a pod/container tag). The key's length (first word and the byte after it), or 0 when unsure.
std::size_t lex_no_prefix(std::string_view r) {
  if (r.empty() || !ascii_letter(r[0])) return 0;
  if ((r[0] == 'I' || r[0] == 'W' || r[0] == 'E' || r[0] == 'F') && r.size() > 1 && ascii_digit(r[1])) return 0;
  std::size_t i = 0;
  while (i < r.size() && (word_byte(r[i]) || r[i] == '.' || r[i] == '-')) ++i;
  if (i > 48) return 0;
  std::string_view word = r.substr(0, i);
  static constexpr std::string_view kDates[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                                                "Dec", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
  for (auto d : kDates)
    if (word.substr(0, 3) == d) return 0;
  if (i < r.size() && (r[i] == ':' || r[i] == '/')) return 0;
  std::size_t j = i;
  while (j < r.size() && space_byte(r[j])) ++j;
  if (j < r.size() && r[j] == ':') return 0;
  return i < r.size() ? i + 1 : i;
}

// normalize()'s mid-line search would look at this body ('[' then I, W, E, F or r).
bool midline_candidate(std::string_view body) {
  for (std::size_t p = body.find('[', 1); p != std::string_view::npos; p = body.find('[', p + 1)) {
    char n = p + 1 < body.size() ? body[p + 1] : '\0';
    if (n == 'I' || n == 'W' || n == 'E' || n == 'F' || n == 'r') return true;
  }
  return false;
}
}  // namespace

bool prefix_catalog::normalize_fast_impl(std::string_view line, line_meta& out, detail::layer_trace* tr) const {
  thread_local lexer_memo memo;
  if (memo.owner != impl_->generation || memo.year != default_year_ || memo.map.size() >= lexer_memo::kMaxEntries) {
    memo.map.clear();
    memo.owner = impl_->generation;
    memo.year = default_year_;
  }
  thread_local std::vector<int> hits;
  out = line_meta{};
  out.body = line;
  bool any = false;
  // The catalogue's own answer for one layer: 1 a prefix (id, len, f), 0 none matches, -1 normalize()
  // would stop here without a mid-line search.
  layer_fields fresh;
  auto catalogue = [&](std::string_view rest, int& id, std::size_t& len, const layer_fields*& f) {
    hits.clear();
    if (!impl_->set_match(re2::StringPiece(rest.data(), rest.size()), hits)) return 0;
    id = *std::min_element(hits.begin(), hits.end());
    return take(id, rest, fresh, f, len) ? 1 : -1;
  };
  auto fallback = [&] {
    out = line_meta{};
    if (tr) tr->n = 0;
    return normalize_impl(line, out, tr);
  };
  auto record = [&](int id, std::size_t len) {
    if (tr) tr->add(id, static_cast<std::size_t>(out.body.data() - line.data()), len);
  };
  for (int layer = 0; layer < kMaxLayers && !out.body.empty(); ++layer) {
    std::string_view rest = out.body;
    std::size_t k = lex_tag(rest), host_len = 0;
    bool has_file = false;
    std::size_t nccl = k ? 0 : lex_nccl(rest, host_len, has_file);
    std::size_t none = k || nccl ? 0 : lex_no_prefix(rest);
    if (k || nccl || none) {
      if (k) memo.key.assign("T").append(rest.substr(0, k));
      else if (nccl) memo.key.assign(has_file ? "F" : "N").append(rest.substr(0, host_len));
      else memo.key.assign("0").append(rest.substr(0, none));
      auto it = memo.map.find(memo.key);
      if (it == memo.map.end()) {  // first sight: ask the catalogue, keep the answer if the lexer agrees
        lexer_memo::entry e;
        int id = -1;
        std::size_t len = 0;
        const layer_fields* f = nullptr;
        int r = catalogue(rest, id, len, f);
        if (k) e.agrees = r == 1 && (len == k || (rest[k - 1] == ' ' && len == k - 1));
        else if (nccl) e.agrees = r == 1 && len == nccl && f->host && f->host->size() == host_len && !f->has_ts;
        else e.agrees = r == 0;
        if (e.agrees && r == 1) {
          e.id = id;
          e.len = len;
          e.fields = *f;
        }
        it = memo.map.emplace(memo.key, std::move(e)).first;
      }
      const auto& e = it->second;
      if (!e.agrees) return fallback();
      if (none) {
        // No prefix here: normalize() would now search mid-line once; when it would find a candidate,
        // it decides.
        if (midline_candidate(out.body)) return fallback();
        break;
      }
      if (nccl) {
        layer_fields f = e.fields;
        f.host = std::string(rest.substr(0, host_len));
        record(e.id, nccl);
        apply(out, f, e.id, nccl);
      } else {
        record(e.id, e.len);
        apply(out, e.fields, e.id, e.len);
      }
      any = true;
      continue;
    }
    // A layer the lexer does not know (a timestamp header, a launcher label): the catalogue peels it.
    int id = -1;
    std::size_t len = 0;
    const layer_fields* f = nullptr;
    int r = catalogue(rest, id, len, f);
    if (r == 0) return fallback();  // normalize() would search mid-line here
    if (r < 0) break;
    record(id, len);
    apply(out, *f, id, len);
    any = true;
  }
  return any;
}

namespace {
// The digits ASCII a regexp's character class holds (bit i: digit i), from its text between '[' and ']'.
// -1 when the class uses a construct this does not read (POSIX classes, \p, \x): treated as not blind.
int class_digits(const std::string& cls) {
  std::size_t i = 0;
  if (i < cls.size() && cls[i] == '^') ++i;  // negation keeps "all" and "none" as they are
  int bits = 0;
  auto lit = [](char c) { return c >= '0' && c <= '9' ? 1 << (c - '0') : 0; };
  while (i < cls.size()) {
    int lo_bits = 0;
    char lo = 0;
    bool single = true;
    if (cls[i] == '\\') {
      if (i + 1 >= cls.size()) return -1;
      char e = cls[i + 1];
      i += 2;
      if (e == 'd' || e == 'w' || e == 'S') { bits |= 0x3FF; continue; }
      if (e == 'D' || e == 'W' || e == 's') continue;
      if (e == 'p' || e == 'P' || e == 'x' || (e >= '0' && e <= '9')) return -1;
      lo = e;  // an escaped punctuation byte ("\]", "\.", "\-")
    } else if (cls[i] == '[' && i + 1 < cls.size() && cls[i + 1] == ':') {
      return -1;
    } else {
      lo = cls[i++];
    }
    if (i + 1 < cls.size() && cls[i] == '-' && cls[i + 1] != ']') {  // a range lo-hi
      char hi = cls[i + 1];
      if (hi == '\\') return -1;
      i += 2;
      single = false;
      for (char c = '0'; c <= '9'; ++c)
        if (c >= lo && c <= hi) lo_bits |= lit(c);
    }
    bits |= single ? lit(lo) : lo_bits;
  }
  return bits;
}
}  // namespace

bool detail::digit_blind(const std::string& re, std::vector<std::string>* words) {
  // Every atom must match all ASCII digits or none, except literal digits inside a literal word ("c10d"),
  // which the shape key keeps as they are (shape_key): then putting other digits in a text, outside such
  // words, changes no match's structure (which prefix wins, its extent, each group's span), only the
  // values captured.
  auto is_alnum = [](char c) { return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'); };
  for (std::size_t i = 0; i < re.size(); ++i) {
    char c = re[i];
    if (c == '\\') {
      if (i + 1 >= re.size()) return false;
      char e = re[++i];
      if ((e >= '0' && e <= '9') || e == 'x' || e == 'p' || e == 'P' || e == 'Q' || e == 'C') return false;
      continue;  // \d \w \s \b \. ...
    }
    if (c == '[') {
      std::size_t j = i + 1;
      if (j < re.size() && re[j] == '^') ++j;
      if (j < re.size() && re[j] == ']') ++j;  // a leading ']' is a literal
      for (; j < re.size() && re[j] != ']'; ++j)
        if (re[j] == '\\') ++j;
      if (j >= re.size()) return false;
      int bits = class_digits(re.substr(i + 1, j - i - 1));
      if (bits != 0 && bits != 0x3FF) return false;
      i = j;
      continue;
    }
    if (c == '{') {  // a repeat count {n}, {n,}, {n,m}
      std::size_t j = i + 1;
      while (j < re.size() && ((re[j] >= '0' && re[j] <= '9') || re[j] == ',')) ++j;
      if (j < re.size() && re[j] == '}' && j > i + 1) i = j;
      continue;
    }
    if (c == '(' && i + 3 < re.size() && re[i + 1] == '?' && re[i + 2] == 'P' && re[i + 3] == '<') {
      std::size_t j = re.find('>', i);  // a group name may hold digits
      if (j == std::string::npos) return false;
      i = j;
      continue;
    }
    if (c >= '0' && c <= '9') {
      // A literal word holding digits: its letters and digits around this one, none of them repeated.
      std::size_t b = i, e = i;
      while (b > 0 && is_alnum(re[b - 1]) && (b < 2 || re[b - 2] != '\\')) --b;
      while (e + 1 < re.size() && is_alnum(re[e + 1])) ++e;
      if (e + 1 < re.size() && (re[e + 1] == '*' || re[e + 1] == '+' || re[e + 1] == '?' || re[e + 1] == '{')) return false;
      bool letter = false;
      for (std::size_t k = b; k <= e; ++k) letter |= !(re[k] >= '0' && re[k] <= '9');
      if (!letter || !words) return false;  // a bare number: the shape key would not keep it
      words->push_back(re.substr(b, e - b + 1));
      i = e;
    }
  }
  return true;
}

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
        const bool gives = q < 3 ? to_int(v).has_value() : q == 3 ? !v.empty() : !v.empty() && v[0] != '\0';
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
