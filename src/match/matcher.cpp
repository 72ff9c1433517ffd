// One Vectorscan database for all fingerprints; RE2 confirms and extracts.
#include <hs/hs.h>
#include <re2/re2.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>

#include "firstfault/match.hpp"
#include "../base/cache.hpp"
#include "db_cache.hpp"

namespace ff::match {

namespace {
re2::RE2::Options re2_options();

// An RE2 compiled on first use: a run confirms a few dozen of ~1,000 patterns, and compiling all of them
// was a third of a small run's start-up. Every pattern was compiled once when the database was built
// (compile() refuses a knowledge base with a pattern RE2 rejects, and only then stores the database).
class lazy_re {
 public:
  explicit lazy_re(std::string pattern) : pattern_(std::move(pattern)) {}
  const re2::RE2& get() const {
    std::call_once(once_, [this] { re_ = std::make_unique<re2::RE2>(pattern_, re2_options()); });
    return *re_;
  }

 private:
  std::string pattern_;
  mutable std::once_flag once_;
  mutable std::unique_ptr<re2::RE2> re_;
};
}  // namespace

struct matcher::impl {
  hs_database_t* db = nullptr;
  std::vector<int> fp_sig;                          // fingerprint index -> signature index
  std::vector<std::unique_ptr<lazy_re>> fp_re;      // fingerprint index -> RE2 for confirmation
  std::vector<std::vector<std::unique_ptr<lazy_re>>> extract;  // signature -> extract patterns
  ~impl() {
    if (db) hs_free_database(db);
  }
};

matcher::matcher() = default;
matcher::~matcher() = default;
matcher::matcher(matcher&&) noexcept = default;
matcher& matcher::operator=(matcher&&) noexcept = default;

namespace {
re2::RE2::Options re2_options() {
  re2::RE2::Options o;
  o.set_log_errors(false);
  o.set_max_mem(64 << 20);
  return o;
}
}  // namespace

namespace detail {
std::string cache_path(const std::string& key) {
  std::string dir = ff::detail::cache_dir();
  if (dir.empty()) return "";
  std::string ver = hs_version();
  for (auto& c : ver)
    if (!isalnum(static_cast<unsigned char>(c)) && c != '.') c = '_';
  return dir + "/hs-" + key + "-" + ver + ".db";
}

bool load_cached(const std::string& path, hs_database_t** db) {
  ff::detail::cache_bytes bytes;
  if (!bytes.read(path, 256u << 20)) return false;
  // hs_deserialize_database checks the platform and version; a stale or foreign file just fails.
  return hs_deserialize_database(bytes.view().data(), bytes.view().size(), db) == HS_SUCCESS;
}

void store_cached(const std::string& path, const hs_database_t* db) {
  char* bytes = nullptr;
  size_t len = 0;
  if (hs_serialize_database(db, &bytes, &len) != HS_SUCCESS) return;
  ff::detail::store_cache_file(path, std::string_view(bytes, len));
  std::free(bytes);
}
}  // namespace detail

namespace {
using detail::load_cached;
using detail::store_cached;
std::string cache_path(const kb::library& lib) { return detail::cache_path(lib.content_hash); }
}  // namespace

std::string check_pattern(const std::string& pattern, bool need_vectorscan) {
  re2::RE2 re(pattern, re2_options());
  if (!re.ok()) return "RE2: " + re.error();
  if (need_vectorscan) {
    hs_database_t* db = nullptr;
    hs_compile_error_t* err = nullptr;
    if (hs_compile(pattern.c_str(), HS_FLAG_PREFILTER | HS_FLAG_SINGLEMATCH, HS_MODE_BLOCK, nullptr, &db, &err) !=
        HS_SUCCESS) {
      std::string msg = std::string("Vectorscan: ") + (err && err->message ? err->message : "compile failed");
      hs_free_compile_error(err);
      return msg;
    }
    hs_free_database(db);
  }
  return {};
}

result<matcher> matcher::compile(const kb::library& lib) {
  matcher m;
  m.lib_ = &lib;
  m.impl_ = std::make_unique<impl>();
  auto& im = *m.impl_;
  std::vector<std::string> exprs;
  std::vector<unsigned> flags, ids;
  im.extract.resize(lib.signatures.size());
  for (std::size_t si = 0; si < lib.signatures.size(); ++si) {
    const auto& s = lib.signatures[si];
    for (const auto& fp : s.fingerprints) {
      ids.push_back(static_cast<unsigned>(exprs.size()));
      exprs.push_back(fp);
      flags.push_back(HS_FLAG_PREFILTER | HS_FLAG_SINGLEMATCH);
      im.fp_sig.push_back(static_cast<int>(si));
      im.fp_re.push_back(std::make_unique<lazy_re>(fp));
    }
    for (const auto& ex : s.extract) im.extract[si].push_back(std::make_unique<lazy_re>(ex));
  }
  // The compiled database is cached on disk, keyed by the knowledge base's content hash and the
  // Vectorscan version, so start-up costs a file read instead of a compile.
  std::string cache = exprs.empty() ? "" : cache_path(lib);
  if (!cache.empty() && load_cached(cache, &im.db)) return m;
  // Not cached: every pattern is checked in RE2 now, before the database is built (and stored).
  std::size_t fi = 0;
  for (const auto& s : lib.signatures) {
    for (const auto& fp : s.fingerprints)
      if (const auto& re = im.fp_re[fi++]->get(); !re.ok())
        return error{s.file + ": " + s.name + ": fingerprint does not compile in RE2: " + re.error() + ": " + fp, errc::knowledge_base};
    const auto& exs = im.extract[static_cast<std::size_t>(&s - lib.signatures.data())];
    for (std::size_t k = 0; k < exs.size(); ++k)
      if (const auto& re = exs[k]->get(); !re.ok())
        return error{s.file + ": " + s.name + ": extract pattern does not compile in RE2: " + re.error() + ": " + s.extract[k], errc::knowledge_base};
  }
  if (exprs.empty()) return m;
  std::vector<const char*> cexprs;
  for (auto& e : exprs) cexprs.push_back(e.c_str());
  hs_compile_error_t* err = nullptr;
  if (hs_compile_multi(cexprs.data(), flags.data(), ids.data(), static_cast<unsigned>(cexprs.size()), HS_MODE_BLOCK,
                       nullptr, &im.db, &err) != HS_SUCCESS) {
    std::string msg = err && err->message ? err->message : "compile failed";
    std::string where;
    if (err && err->expression >= 0 && static_cast<std::size_t>(err->expression) < exprs.size()) {
      const auto& s = lib.signatures[static_cast<std::size_t>(im.fp_sig[static_cast<std::size_t>(err->expression)])];
      where = s.file + ": " + s.name + ": ";
    }
    hs_free_compile_error(err);
    return error{where + "fingerprint does not compile in Vectorscan: " + msg, errc::knowledge_base};
  }
  if (!cache.empty()) store_cached(cache, im.db);
  return m;
}

scratch::scratch(const matcher& m) {
  if (m.impl_ && m.impl_->db) {
    hs_scratch_t* s = nullptr;
    alloc_rc_ = hs_alloc_scratch(m.impl_->db, &s);
    hs_ = alloc_rc_ == HS_SUCCESS ? s : nullptr;
  }
}

status scratch::ok() const {
  if (alloc_rc_ != HS_SUCCESS) return error{"Vectorscan could not allocate scratch space (hs_alloc_scratch returned " + std::to_string(alloc_rc_) + ")", errc::engine};
  return ff::ok();
}

scratch::~scratch() {
  if (hs_) hs_free_scratch(static_cast<hs_scratch_t*>(hs_));
}

fields matcher::extract(int signature, std::string_view body) const {
  fields out;
  re2::StringPiece sp(body.data(), body.size());
  for (const auto& lazy : impl_->extract[static_cast<std::size_t>(signature)]) {
    const re2::RE2* re = &lazy->get();
    if (!re->ok()) continue;
    int n = re->NumberOfCapturingGroups();
    std::vector<re2::StringPiece> g(static_cast<std::size_t>(n) + 1);
    if (!re->Match(sp, 0, sp.size(), re2::RE2::UNANCHORED, g.data(), n + 1)) continue;
    for (const auto& group : re->NamedCapturingGroups()) {
      const std::string& name = group.first;
      const int idx = group.second;
      const auto& v = g[static_cast<std::size_t>(idx)];
      if (v.data() == nullptr) continue;
      bool have = std::any_of(out.begin(), out.end(), [&](const auto& kv) { return kv.first == name; });
      if (!have) out.emplace_back(name, std::string(v.data(), v.size()));
    }
  }
  return out;
}

status matcher::scan(std::string_view body, scratch& s, std::vector<hit>& out) const {
  if (!impl_ || !impl_->db || body.empty()) return ok();
  if (auto st = s.ok(); !st) return st;
  s.ids_.clear();
  auto on_match = [](unsigned id, unsigned long long, unsigned long long, unsigned, void* ctx) -> int {
    static_cast<std::vector<int>*>(ctx)->push_back(static_cast<int>(id));
    return 0;
  };
  hs_error_t rc = hs_scan(impl_->db, body.data(), static_cast<unsigned>(std::min<std::size_t>(body.size(), 0xFFFFFFFFu)),
                          0, static_cast<hs_scratch_t*>(s.hs_), on_match, &s.ids_);
  if (rc != HS_SUCCESS) return error{"Vectorscan scan failed (hs_scan returned " + std::to_string(rc) + ")", errc::engine};
  std::sort(s.ids_.begin(), s.ids_.end());
  re2::StringPiece sp(body.data(), body.size());
  int last_sig = -1;
  for (int id : s.ids_) {
    if (id < 0 || static_cast<std::size_t>(id) >= impl_->fp_sig.size()) continue;  // never trust a cached database
    int sig = impl_->fp_sig[static_cast<std::size_t>(id)];
    if (sig == last_sig) continue;  // one hit per signature
    const auto& re = impl_->fp_re[static_cast<std::size_t>(id)]->get();
    if (!re.ok() || !re2::RE2::PartialMatch(sp, re)) continue;  // prefilter confirm
    last_sig = sig;
    out.push_back({sig, extract(sig, body)});
  }
  return ok();
}

}  // namespace ff::match
