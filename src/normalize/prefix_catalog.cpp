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
#include "catalog_impl.hpp"

namespace ff::normalize {

namespace {
// The built-in catalogue (kb/_prefixes) the lexer's rules were derived from. When a prefix file changes,
// the lexer is off and prefix_catalog.lexer_is_on_for_the_builtin_catalogue fails, until the rules of
// lex_tag, lex_nccl and lex_no_prefix are re-checked against the new catalogue and this value is set to
// the fingerprint the test prints.
constexpr std::uint64_t kLexerCatalogue = 10106071337759491330ULL;
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
  fresh.rank = detail::to_int(grp(c.g_rank));
  fresh.local_rank = detail::to_int(grp(c.g_local_rank));
  fresh.task = detail::to_int(grp(c.g_task));
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

}  // namespace ff::normalize
