// firstfault.events/v1: write, read, merge (see firstfault/events.hpp).
#include "firstfault/events.hpp"

#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <zstd.h>

#include <algorithm>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "firstfault/limits.hpp"
#include "firstfault/text.hpp"

#ifndef FF_VERSION
#define FF_VERSION "0"
#endif

namespace ff::events {

namespace {
using json = nlohmann::json;
namespace fs = std::filesystem;

// The collector's bounds (src/pipeline/collector_impl.hpp), applied again while a file is read and while files are merged,
// so that neither one hostile file nor many files hold more than one run's collector would.
constexpr int kMaxPerKey = 64;
constexpr std::size_t kMaxFindings = 8192;
constexpr std::size_t kMaxSuspicious = 200;
constexpr std::size_t kMaxStackTopsPerRank = 64;
constexpr std::size_t kMaxStackTopRanks = 65536;
constexpr std::size_t kMaxRanks = 16384;     // per-rank activity entries
constexpr std::size_t kMaxPairs = 65536;     // host/rank and local-rank/rank pairs, each table; hosts
constexpr std::size_t kMaxRecordsKept = 65536;  // exits, terminated pids, inputs, errors, sources: each list
constexpr std::size_t kMaxMergedSources = 1u << 20;

// Findings kept per (signature, rank, attempt) and in all; past a bound a finding only adds to the
// repeat count of one kept before it, as in the collector.
class finding_cap {
 public:
  void add(std::vector<correlate::finding>& kept, correlate::finding&& f) {
    std::tuple<int, int, int> pk{f.signature, f.rank.value_or(f.local_rank ? -2 - *f.local_rank : -1), f.attempt.value_or(-1)};
    auto it = per_key_.find(pk);
    if (it == per_key_.end() && kept.size() >= kMaxFindings) {
      bound_hit = true;
      if (auto f1 = first_of_signature_.find(f.signature); f1 != first_of_signature_.end()) add_repeats(kept[f1->second], f);
      return;
    }
    auto& slot = it != per_key_.end() ? it->second : per_key_[pk];
    if (++slot.first > kMaxPerKey) {
      add_repeats(kept[slot.second], f);
      return;
    }
    slot.second = kept.size();
    first_of_signature_.emplace(f.signature, slot.second);
    kept.push_back(std::move(f));
  }
  bool bound_hit = false;

 private:
  static void add_repeats(correlate::finding& into, const correlate::finding& f) {
    long long sum = static_cast<long long>(into.duplicates) + 1 + std::max(0, f.duplicates);
    into.duplicates = static_cast<int>(std::min<long long>(sum, std::numeric_limits<int>::max()));
  }
  std::map<std::tuple<int, int, int>, std::pair<int, std::size_t>> per_key_;
  std::map<int, std::size_t> first_of_signature_;
};

// Set-valued tables (local rank -> ranks, host -> ranks) with a bound on pairs in all.
template <class K>
void add_pairs(std::map<K, std::set<int>>& table, const K& key, const std::vector<int>& ranks, std::size_t& pairs, bool& bound_hit) {
  for (int r : ranks) {
    if (pairs >= kMaxPairs) {
      bound_hit = true;
      return;
    }
    pairs += table[key].insert(r).second;
  }
}
template <class K>
void add_pairs(std::map<K, std::set<int>>& table, const K& key, const std::set<int>& ranks, std::size_t& pairs, bool& bound_hit) {
  add_pairs(table, key, std::vector<int>(ranks.begin(), ranks.end()), pairs, bound_hit);
}
template <class V, class T>
void push_bounded(V& v, T&& x, bool& bound_hit) {
  if (v.size() < kMaxRecordsKept) v.push_back(std::forward<T>(x));
  else bound_hit = true;
}

json ts_json(const normalize::timestamp& t) {
  return {{"s", t.seconds}, {"clock", t.kind == normalize::timestamp::clock::wall ? "wall" : "uptime"}, {"date", t.has_date}};
}

// Writes JSON lines through a zstd stream into a FILE.
class zwriter {
 public:
  explicit zwriter(std::FILE* f) : f_(f), cctx_(ZSTD_createCCtx()) {
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, 6);
    out_.resize(ZSTD_CStreamOutSize());
  }
  ~zwriter() { ZSTD_freeCCtx(cctx_); }
  zwriter(const zwriter&) = delete;
  zwriter& operator=(const zwriter&) = delete;
  void line(const json& j) {
    std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
    s += '\n';
    push(s, ZSTD_e_continue);
    ++records_;
  }
  std::size_t records() const { return records_; }
  bool end() {
    push({}, ZSTD_e_end);
    return ok_;
  }
  const std::string& problem() const { return problem_; }

 private:
  void push(std::string_view data, ZSTD_EndDirective mode) {
    ZSTD_inBuffer in{data.data(), data.size(), 0};
    for (;;) {
      ZSTD_outBuffer out{out_.data(), out_.size(), 0};
      std::size_t rem = ZSTD_compressStream2(cctx_, &out, &in, mode);
      if (ZSTD_isError(rem)) {
        fail(std::string("zstd: ") + ZSTD_getErrorName(rem));
        return;
      }
      if (out.pos && std::fwrite(out_.data(), 1, out.pos, f_) != out.pos) fail(std::strerror(errno));
      if (mode == ZSTD_e_end ? rem == 0 : in.pos == in.size) return;
    }
  }
  void fail(const std::string& why) {
    if (ok_) problem_ = why;
    ok_ = false;
  }
  std::FILE* f_;
  ZSTD_CCtx* cctx_;
  std::string out_;
  std::size_t records_ = 0;
  bool ok_ = true;
  std::string problem_;
};

// --- reading: every field checked, strings sanitised -------------------------------------------------

struct bad_record {
  std::string why;
};

std::string str(const json& j, const char* k) {
  auto it = j.find(k);
  if (it == j.end() || it->is_null()) return "";
  if (!it->is_string()) throw bad_record{std::string("field \"") + k + "\" is not a string"};
  return text::sanitize(it->get_ref<const std::string&>());
}
std::optional<std::string> ostr(const json& j, const char* k) {
  if (!j.contains(k) || j[k].is_null()) return std::nullopt;
  return str(j, k);
}
template <class T>
T num(const json& j, const char* k, T fallback = T{}) {
  auto it = j.find(k);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) throw bad_record{std::string("field \"") + k + "\" is not a number"};
  if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer()) throw bad_record{std::string("field \"") + k + "\" is not an integer"};
    if (it->is_number_unsigned()) {
      auto v = it->get<std::uint64_t>();
      if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) throw bad_record{std::string("field \"") + k + "\" is out of range"};
      return static_cast<T>(v);
    }
    auto v = it->get<std::int64_t>();
    if (v < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
        (v > 0 && static_cast<std::uint64_t>(v) > static_cast<std::uint64_t>(std::numeric_limits<T>::max())))
      throw bad_record{std::string("field \"") + k + "\" is out of range"};
    return static_cast<T>(v);
  } else {
    return it->get<T>();
  }
}
template <class T>
std::optional<T> onum(const json& j, const char* k) {
  if (!j.contains(k) || j[k].is_null()) return std::nullopt;
  return num<T>(j, k);
}
bool boolean(const json& j, const char* k) {
  auto it = j.find(k);
  if (it == j.end() || it->is_null()) return false;
  if (!it->is_boolean()) throw bad_record{std::string("field \"") + k + "\" is not true or false"};
  return it->get<bool>();
}
std::optional<normalize::timestamp> ots(const json& j, const char* k) {
  auto it = j.find(k);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) throw bad_record{std::string("field \"") + k + "\" is not a time"};
  normalize::timestamp t;
  t.seconds = num<double>(*it, "s");
  auto c = str(*it, "clock");
  if (c != "wall" && c != "uptime") throw bad_record{std::string("field \"") + k + "\" has an unknown clock"};
  t.kind = c == "wall" ? normalize::timestamp::clock::wall : normalize::timestamp::clock::uptime;
  t.has_date = it->contains("date") ? boolean(*it, "date") : true;
  return t;
}
std::vector<int> int_list(const json& j, const char* k, std::size_t max) {
  std::vector<int> out;
  auto it = j.find(k);
  if (it == j.end() || it->is_null()) return out;
  if (!it->is_array()) throw bad_record{std::string("field \"") + k + "\" is not a list"};
  for (const auto& v : *it) {
    if (!v.is_number_integer()) throw bad_record{std::string("field \"") + k + "\" holds a non-integer"};
    auto x = v.get<std::int64_t>();
    if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max()) throw bad_record{std::string("field \"") + k + "\" is out of range"};
    if (out.size() < max) out.push_back(static_cast<int>(x));
  }
  return out;
}

// Reads a zstd stream of JSON lines; calls `on_line` for each line. Returns "" or the reason it stopped.
template <class F>
std::string read_lines(std::FILE* f, F&& on_line) {
  std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> dctx(ZSTD_createDCtx(), &ZSTD_freeDCtx);
  std::string in(ZSTD_DStreamInSize(), '\0'), out(ZSTD_DStreamOutSize(), '\0'), pending;
  std::uint64_t total = 0;
  std::size_t last_ret = 0;
  bool any_input = false;
  for (;;) {
    std::size_t n = std::fread(in.data(), 1, in.size(), f);
    if (n == 0) {
      if (std::ferror(f)) return std::strerror(errno);
      break;
    }
    any_input = true;
    ZSTD_inBuffer ib{in.data(), n, 0};
    while (ib.pos < ib.size) {
      ZSTD_outBuffer ob{out.data(), out.size(), 0};
      std::size_t ret = ZSTD_decompressStream(dctx.get(), &ob, &ib);
      if (ZSTD_isError(ret)) return std::string("not a valid zstd stream (") + ZSTD_getErrorName(ret) + ")";
      last_ret = ret;
      total += ob.pos;
      if (total > kMaxDecompressedBytes) return "larger than 1 GiB decompressed";
      std::string_view chunk(out.data(), ob.pos);
      while (!chunk.empty()) {
        auto nl = chunk.find('\n');
        if (nl == std::string_view::npos) {
          pending.append(chunk);
          if (pending.size() > kMaxRecordBytes) return "a record is longer than 4 MiB";
          break;
        }
        pending.append(chunk.substr(0, nl));
        if (pending.size() > kMaxRecordBytes) return "a record is longer than 4 MiB";
        if (auto why = on_line(pending); !why.empty()) return why;
        pending.clear();
        chunk.remove_prefix(nl + 1);
      }
    }
  }
  if (!any_input) return "empty file";
  if (last_ret != 0) return "cut short (the zstd stream ends mid-frame)";
  if (!pending.empty()) return "cut short (the last record has no end of line)";
  return "";
}


// --- one field list per record type ------------------------------------------------------------------
// Each record type's fields are listed once, for both directions: `fields(v, x)` calls v(key, member, how)
// for every field, in the order the reader checks them (so a record with two bad fields is reported the same
// way whatever changes elsewhere). The writer visits a const record, the reader a fresh one; an optional
// member is written only when it holds a value. `how` says what the format does beyond the member's type.
struct how {
  bool omit_default = false;  ///< written only when not false / 0 (read as false / 0 when absent)
  std::size_t cap = 0;        ///< a string read back cut to this many bytes (the collector's bound); a list: items
  int fallback = 0;           ///< a number's value when the key is absent (a file from before the field)
};
constexpr how kOmitDefault{true, 0, 0};
constexpr how capped(std::size_t n) { return how{false, n, 0}; }

// The list of record type T (const for the writer).
template <class R, class T>
using only = std::enable_if_t<std::is_same_v<std::remove_const_t<R>, T>>;

template <class V, class R>
only<R, pipeline::input_stats> fields(V&& v, R& x) {  // pipeline::input_stats
  v("path", x.path), v("lines", x.lines), v("bytes", x.bytes);
}
template <class V, class R>
only<R, ingest::input_error> fields(V&& v, R& x) {  // ingest::input_error
  v("path", x.path), v("reason", x.reason), v("fatal", x.fatal_for_input), v("cut_short", x.cut_short);
}
template <class V, class R>
only<R, correlate::finding> fields(V&& v, R& x) {  // correlate::finding, but its signature ("sig") and captures ("cap")
  v("rank", x.rank), v("local_rank", x.local_rank), v("host", x.host), v("ts", x.ts), v("ts_inherited", x.ts_inherited, kOmitDefault);
  v("step_at", x.step_at), v("raised", x.raised, kOmitDefault), v("handled", x.handled, kOmitDefault);
  v("aborted", x.aborted, kOmitDefault);
  v("source", x.source), v("line", x.line_no), v("text", x.text, capped(limits::kFindingTextBytes));
  v("dup", x.duplicates, kOmitDefault), v("attempt", x.attempt);
}
template <class V, class R>
only<R, extract::exit_record> fields(V&& v, R& x) {  // extract::exit_record
  v("rank", x.rank), v("local_rank", x.local_rank), v("exitcode", x.exitcode), v("pid", x.pid);
  v("host", x.host), v("time", x.time), v("signal", x.signal), v("root_cause", x.root_cause), v("agent_line", x.from_agent_line);
  v("launcher", x.launcher), v("source", x.source), v("line", x.line_no), v("attempt", x.attempt);
}
template <class V, class R>
only<R, extract::terminated_pid> fields(V&& v, R& x) {  // extract::terminated_pid
  v("pid", x.pid), v("source", x.source), v("line", x.line_no);
}
template <class V, class R>
only<R, correlate::rank_activity> fields(V&& v, R& x) {  // correlate::rank_activity, but its key (scope, number, attempt)
  v("lines", x.lines), v("last_ts", x.last_ts), v("last_line", x.last_line, capped(limits::kLastLineBytes));
  v("last_source", x.last_source), v("last_line_no", x.last_line_no), v("last_step", x.last_step);
  if (x.last_step) v("last_step_source", x.last_step_source), v("last_step_line_no", x.last_step_line_no), v("last_step_ts", x.last_step_ts);
  v("planned_steps", x.planned_steps), v("planned_line", x.planned_line, capped(limits::kLastLineBytes));
  v("planned_source", x.planned_source), v("planned_line_no", x.planned_line_no);
  v("first_ts", x.first_ts), v("first_source", x.first_source), v("first_line_no", x.first_line_no);
  v("gap_start", x.gap_start), v("gap_seconds", x.gap_seconds);
}
template <class V, class R>
only<R, correlate::suspicious_line> fields(V&& v, R& x) {  // correlate::suspicious_line
  v("source", x.source), v("text", x.text, capped(limits::kSuspiciousTextBytes)), v("line", x.line_no), v("rank", x.rank);
  v("strong", x.strong), v("tmpl", x.tmpl), v("count", x.count, how{false, 0, 1});
  v("ranks", x.ranks, capped(static_cast<std::size_t>(limits::kMaxListedRanks)));
  v("last_source", x.last_source, kOmitDefault), v("last_line", x.last_line_no, kOmitDefault), v("last_ts", x.last_ts, kOmitDefault);
  v("local_ranks", x.local_ranks, capped(static_cast<std::size_t>(limits::kMaxListedRanks))), v("untimed", x.untimed, kOmitDefault);
}
template <class V, class R>
only<R, correlate::inputs::marked_line> fields(V&& v, R& x) {  // correlate::inputs::marked_line
  v("source", x.source), v("text", x.text, capped(limits::kLastLineBytes)), v("line", x.line_no);
  v("rank", x.rank), v("local_rank", x.local_rank), v("ts", x.ts), v("ts_inherited", x.ts_inherited, kOmitDefault);
  v("job", x.job, kOmitDefault), v("fields", x.fields, kOmitDefault);
}
template <class V, class R>
only<R, correlate::inputs::stream_end> fields(V&& v, R& x) {  // correlate::inputs::stream_end
  v("source", x.source), v("text", x.text, capped(limits::kLastLineBytes)), v("line", x.line_no);
}
template <class V, class R>
only<R, correlate::inputs::dump_frame> fields(V&& v, R& x) {  // correlate::inputs::dump_frame, but its rank (the key of its list)
  v("function", x.top.function), v("file", x.top.file), v("main", x.top.main_thread), v("text", x.top.text);
  v("source", x.source), v("line", x.line_no);
}

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

// Writes the visited fields into a JSON object.
struct to_record {
  json& j;
  template <class T>
  void operator()(const char* k, const T& x, how h = {}) const {
    if constexpr (is_optional<T>::value) {
      if (x) put(*x, k);
    } else {
      if (h.omit_default && x == T{}) return;
      put(x, k);
    }
  }
  void put(const normalize::timestamp& t, const char* k) const { j[k] = ts_json(t); }
  template <class T>
  void put(const T& x, const char* k) const { j[k] = x; }
};

// Reads the visited fields from a JSON object: every value checked, strings sanitised (bad_record).
struct from_record {
  const json& j;
  void operator()(const char* k, std::string& x, how h = {}) const {
    x = str(j, k);
    if (h.cap) x = std::string(text::prefix_utf8(x, h.cap));
  }
  void operator()(const char* k, std::optional<std::string>& x, how = {}) const { x = ostr(j, k); }
  void operator()(const char* k, bool& x, how = {}) const { x = boolean(j, k); }
  void operator()(const char* k, std::optional<normalize::timestamp>& x, how = {}) const { x = ots(j, k); }
  void operator()(const char* k, std::vector<int>& x, how h = {}) const { x = int_list(j, k, h.cap); }
  // A signature's captured fields: [[name, value], ...], at most kMaxFields pairs.
  void operator()(const char* k, match::fields& x, how = {}) const {
    x.clear();
    if (!j.contains(k)) return;
    if (!j[k].is_array()) throw bad_record{std::string("field \"") + k + "\" is not a list"};
    for (const auto& kv : j[k]) {
      if (!kv.is_array() || kv.size() != 2 || !kv[0].is_string() || !kv[1].is_string())
        throw bad_record{std::string("field \"") + k + "\" holds a non-pair"};
      if (x.size() >= kMaxFields) break;
      x.emplace_back(text::sanitize(kv[0].get_ref<const std::string&>()),
                     std::string(text::prefix_utf8(text::sanitize(kv[1].get_ref<const std::string&>()), limits::kLastLineBytes)));
    }
  }
  static constexpr std::size_t kMaxFields = 16;
  template <class T>
  void operator()(const char* k, std::optional<T>& x, how = {}) const { x = onum<T>(j, k); }
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
  void operator()(const char* k, T& x, how h = {}) const { x = num<T>(j, k, static_cast<T>(h.fallback)); }
};

// One record: {"t": type} and the fields of x's list; and a record read back.
template <class R>
json record(const char* type, const R& x) {
  json j{{"t", type}};
  fields(to_record{j}, x);
  return j;
}
template <class R>
R parsed(const json& j) {
  R x;
  fields(from_record{j}, x);
  return x;
}
}  // namespace

std::string key_id(const std::string& mask_key) {
  if (mask_key.empty()) return "";
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  static const char msg[] = "firstfault-key-id";
  if (!HMAC(EVP_sha256(), mask_key.data(), static_cast<int>(mask_key.size()), reinterpret_cast<const unsigned char*>(msg),
            sizeof msg - 1, md, &len))
    return "";
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < 8 && i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

status write(const std::string& path, const pipeline::scanned& s, const kb::library& lib, const std::string& mask_key) {
  fs::path target(path);
  fs::path tmp = target;
  tmp += ".tmp-" + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return error{path + ": cannot create the events file: " + std::strerror(errno)};
  zwriter w(f);
  const auto& in = s.in;
  auto sig_name = [&](int i) -> std::string {
    return i >= 0 && static_cast<std::size_t>(i) < lib.signatures.size() ? lib.signatures[static_cast<std::size_t>(i)].name : "";
  };
  auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  w.line({{"t", "header"}, {"format", kFormat}, {"tool", std::string("firstfault ") + FF_VERSION}, {"kb", lib.content_hash},
          {"masked", s.masked}, {"redacted", s.redacted}, {"key_id", key_id(mask_key)}, {"created", now}});
  for (const auto& n : in.source_names) w.line({{"t", "source"}, {"name", n}});
  for (const auto& i : s.inputs) w.line(record("input", i));
  for (const auto& e : s.errors) w.line(record("error", e));
  for (const auto& f1 : in.findings) {
    json j = record("finding", f1);
    j["sig"] = sig_name(f1.signature);
    json cap = json::array();
    for (const auto& [k, v] : f1.captured) cap.push_back({k, v});
    j["cap"] = std::move(cap);
    w.line(j);
  }
  for (const auto& e : in.exits) w.line(record("exit", e));
  for (const auto& t : in.terminated) w.line(record("terminated", t));
  for (const auto& [key, a] : in.activity) {
    json j = record("activity", a);
    j["scope"] = key.kind == correlate::rank_key::scope::global ? "global" : "local";
    j["number"] = key.number;
    if (key.attempt) j["attempt"] = *key.attempt;
    w.line(j);
  }
  for (const auto& x : in.suspicious) w.line(record("suspicious", x));
  for (const auto& [l, ranks] : in.local_to_rank) w.line({{"t", "local_ranks"}, {"local", l}, {"ranks", ranks}});
  for (const auto& h : in.hosts) w.line({{"t", "host"}, {"name", h}});
  for (const auto& [h, ranks] : in.host_ranks) w.line({{"t", "host_ranks"}, {"host", h}, {"ranks", ranks}});
  for (const auto& e : in.stream_ends) w.line(record("stream_end", e));
  for (const auto& x : in.work_lines) w.line(record("work_line", x));
  for (const auto& x : in.fact_lines) w.line(record("fact_line", x));
  for (const auto& x : in.success_ends) w.line(record("success_end", x));
  for (const auto& [rank, frames] : in.stack_tops)
    for (const auto& d : frames) {
      json j = record("stack_top", d);
      j["rank"] = rank;
      w.line(j);
    }
  w.line({{"t", "summary"}, {"benign_lines", in.benign_lines}, {"lines", s.total_lines}, {"bytes", s.total_bytes},
          {"readable", s.any_readable}, {"mask_counts", s.mask_counts}});
  std::size_t records = w.records();
  w.line({{"t", "end"}, {"records", records}});
  bool good = w.end();
  std::string problem = w.problem();
  if (std::fclose(f) != 0 && good) {
    good = false;
    problem = std::strerror(errno);
  }
  std::error_code ec;
  if (good) fs::rename(tmp, target, ec);
  if (!good || ec) {
    fs::remove(tmp, ec);
    return error{path + ": cannot write the events file: " + (good ? ec.message() : problem)};
  }
  return ok();
}

namespace {
// Reads the records of one events file into a scan (read()): the header first, then any record type in any
// order, the collector's bounds applied as records come; an unknown record type (a later minor version's) is
// skipped.
class record_reader {
 public:
  record_reader(const kb::library& lib, const std::string& shown, std::vector<std::string>& notes, std::string* key_id_out)
      : lib_(lib), shown_(shown), notes_(notes), key_id_out_(key_id_out) {
    for (std::size_t i = 0; i < lib.signatures.size(); ++i) by_name_.emplace(lib.signatures[i].name, static_cast<int>(i));
  }

  // One line of the file: "" or why the file cannot be read.
  std::string line(const std::string& line) {
    if (ended_) return "records after the end record";
    if (++records_ > kMaxRecords) return "more than 4,000,000 records";
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) return "record " + std::to_string(records_) + " is not valid JSON";
    if (!j.is_object()) return "record " + std::to_string(records_) + " is not a JSON object";
    try {
      std::string t = str(j, "t");
      if (!header_) return header(t, j);
      if (t.empty()) throw bad_record{"no record type (field \"t\")"};
      return body(t, j);
    } catch (const bad_record& b) {
      return "record " + std::to_string(records_) + ": " + b.why;
    } catch (const json::exception& e) {
      return "record " + std::to_string(records_) + ": " + e.what();
    }
  }

  // After the last line: the scan, or why the file is not a whole one.
  result<pipeline::scanned> finish() {
    if (!header_) return error{shown_ + ": no records: not a firstfault events file"};
    if (!ended_) return error{shown_ + ": cut short (no end record)"};
    if (!summary_) return error{shown_ + ": no summary record (the scan did not finish writing it)"};
    // Indices into this file's sources must point at one (an activity record comes from a source's lines).
    for (const auto& [k, a] : in_.activity)
      if (a.last_source >= in_.source_names.size() || a.first_source >= in_.source_names.size() ||
          (a.last_step && a.last_step_source >= in_.source_names.size()) ||
          (a.planned_steps && a.planned_source >= in_.source_names.size()))
        return error{shown_ + ": an activity record names a source the file does not list"};
    if (findings_.bound_hit || bound_hit_)
      s_.errors.push_back({shown_, "holds more records than one run's collector keeps (8192 findings, 64 per signature and rank, 16384 ranks, 65536 of each other kind): the rest were counted as repeats or left out", false, false});
    if (unknown_sigs_)
      notes_.push_back(shown_ + ": " + std::to_string(unknown_sigs_) + " finding(s) of signatures this knowledge base does not have (first: " +
                       first_unknown_ + ") were left out");
    return std::move(s_);
  }

 private:
  std::string header(const std::string& t, const json& j) {
    if (t != "header") return "does not start with a header record: not a firstfault events file";
    std::string format = str(j, "format");
    if (format != kFormat) return "format \"" + format + "\" is not " + kFormat;
    header_ = true;
    s_.masked = boolean(j, "masked");
    // (a file written before --redact existed masked identity whenever it masked)
    s_.redacted = j.contains("redacted") ? boolean(j, "redacted") : s_.masked;
    if (str(j, "kb") != lib_.content_hash)
      notes_.push_back(shown_ + ": made with another knowledge base (" + str(j, "kb") + "); signatures are matched by name");
    if (key_id_out_) *key_id_out_ = str(j, "key_id");
    return "";
  }

  std::string body(const std::string& t, const json& j) {
    if (t == "source") {
      // Activity records point at sources by index, so sources cannot be dropped: too many is an error.
      if (in_.source_names.size() >= kMaxRecordsKept) return "more than 65,536 source records";
      in_.source_names.push_back(str(j, "name"));
    } else if (t == "input") {
      push_bounded(s_.inputs, parsed<pipeline::input_stats>(j), bound_hit_);
    } else if (t == "error") {
      push_bounded(s_.errors, parsed<ingest::input_error>(j), bound_hit_);
    } else if (t == "finding") {
      finding(j);
    } else if (t == "exit") {
      push_bounded(in_.exits, parsed<extract::exit_record>(j), bound_hit_);
    } else if (t == "terminated") {
      push_bounded(in_.terminated, parsed<extract::terminated_pid>(j), bound_hit_);
    } else if (t == "activity") {
      activity(j);
    } else if (t == "suspicious") {
      auto x = parsed<correlate::suspicious_line>(j);
      std::sort(x.ranks.begin(), x.ranks.end());
      x.ranks.erase(std::unique(x.ranks.begin(), x.ranks.end()), x.ranks.end());
      if (in_.suspicious.size() < kMaxSuspicious) in_.suspicious.push_back(std::move(x));
    } else if (t == "local_ranks") {
      add_pairs(in_.local_to_rank, num<int>(j, "local"), int_list(j, "ranks", kMaxPairs), local_pairs_, bound_hit_);
    } else if (t == "host") {
      if (in_.hosts.size() < kMaxPairs) in_.hosts.insert(str(j, "name"));
      else bound_hit_ = true;
    } else if (t == "host_ranks") {
      add_pairs(in_.host_ranks, str(j, "host"), int_list(j, "ranks", kMaxPairs), host_pairs_, bound_hit_);
    } else if (t == "work_line" || t == "success_end" || t == "fact_line") {
      auto x = parsed<correlate::inputs::marked_line>(j);
      if (t == "success_end") in_.keep_success_end(std::move(x));
      else if (t == "fact_line") in_.keep_fact_line(std::move(x));
      else in_.keep_work_line(std::move(x));
    } else if (t == "stream_end") {
      if (in_.stream_ends.size() < limits::kMaxStreamEnds) in_.stream_ends.push_back(parsed<correlate::inputs::stream_end>(j));
    } else if (t == "stack_top") {
      stack_top(j);
    } else if (t == "summary") {
      summary(j);
    } else if (t == "end") {
      if (num<std::uint64_t>(j, "records") != records_ - 1) return "the end record counts another number of records: the file was changed";
      ended_ = true;
    }  // other record types: a later minor version's, ignored
    return "";
  }

  void finding(const json& j) {
    std::string name = str(j, "sig");
    auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      if (unknown_sigs_++ == 0) first_unknown_ = name;
      return;
    }
    correlate::finding x;
    x.signature = it->second;
    if (j.contains("cap")) {
      if (!j["cap"].is_array()) throw bad_record{"field \"cap\" is not a list"};
      for (const auto& kv : j["cap"]) {
        if (!kv.is_array() || kv.size() != 2 || !kv[0].is_string() || !kv[1].is_string()) throw bad_record{"field \"cap\" holds a non-pair"};
        x.captured.emplace_back(text::sanitize(kv[0].get_ref<const std::string&>()), text::sanitize(kv[1].get_ref<const std::string&>()));
      }
    }
    fields(from_record{j}, x);
    findings_.add(in_.findings, std::move(x));
  }

  void activity(const json& j) {
    auto scope = str(j, "scope");
    if (scope != "global" && scope != "local") throw bad_record{"field \"scope\" is neither global nor local"};
    correlate::rank_key key{scope == "global" ? correlate::rank_key::scope::global : correlate::rank_key::scope::local,
                            num<int>(j, "number"), onum<int>(j, "attempt")};
    auto a = parsed<correlate::rank_activity>(j);
    if (in_.activity.size() >= kMaxRanks && !in_.activity.count(key)) bound_hit_ = true;
    else in_.activity[key] = std::move(a);
  }

  void stack_top(const json& j) {
    auto d = parsed<correlate::inputs::dump_frame>(j);
    int rank = num<int>(j, "rank");
    if (in_.stack_tops.size() >= kMaxStackTopRanks && !in_.stack_tops.count(rank)) {
      bound_hit_ = true;
      return;
    }
    auto& v = in_.stack_tops[rank];
    if (v.size() < kMaxStackTopsPerRank) v.push_back(std::move(d));
  }

  void summary(const json& j) {
    if (summary_) throw bad_record{"a second summary record"};
    summary_ = true;
    in_.benign_lines = num<std::uint64_t>(j, "benign_lines");
    s_.total_lines = num<std::uint64_t>(j, "lines");
    s_.total_bytes = num<std::uint64_t>(j, "bytes");
    s_.any_readable = boolean(j, "readable");
    if (j.contains("mask_counts")) {
      if (!j["mask_counts"].is_object()) throw bad_record{"field \"mask_counts\" is not an object"};
      for (const auto& [k, v] : j["mask_counts"].items()) {
        if (!v.is_number_unsigned()) throw bad_record{"field \"mask_counts\" holds a non-count"};
        s_.mask_counts[text::sanitize(k)] = v.get<std::size_t>();
      }
    }
  }

  const kb::library& lib_;
  const std::string& shown_;
  std::vector<std::string>& notes_;
  std::string* key_id_out_;
  std::map<std::string, int> by_name_;
  pipeline::scanned s_;
  correlate::inputs& in_ = s_.in;
  std::size_t records_ = 0, unknown_sigs_ = 0, local_pairs_ = 0, host_pairs_ = 0;
  bool header_ = false, ended_ = false, summary_ = false, bound_hit_ = false;
  finding_cap findings_;
  std::string first_unknown_;
};
}  // namespace

result<pipeline::scanned> read(const std::string& path, const kb::library& lib, std::vector<std::string>& notes,
                               std::string* key_id_out) {
  std::string shown = text::sanitize(path);
  // O_NONBLOCK: a FIFO or a device given as an events file must not block the run before fstat refuses it.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return error{shown + ": cannot open the events file: " + std::strerror(errno)};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return error{shown + ": not a regular file (an events file is what `firstfault scan -o` writes)"};
  }
  if (st.st_size == 0) {  // also /proc files, whose size is 0 and whose reads can block (/proc/kmsg)
    ::close(fd);
    return error{shown + ": empty file"};
  }
  std::FILE* f = ::fdopen(fd, "rb");
  if (!f) {
    ::close(fd);
    return error{shown + ": cannot open the events file: " + std::strerror(errno)};
  }
  std::unique_ptr<std::FILE, decltype(&std::fclose)> guard(f, &std::fclose);
  record_reader r(lib, shown, notes, key_id_out);
  if (auto why = read_lines(f, [&](const std::string& line) { return r.line(line); }); !why.empty()) return error{shown + ": " + why};
  return r.finish();
}

namespace {
// Two records of one rank, read one after the other in one run (collector::note_activity): `b` continues `a`.
void continue_activity(correlate::rank_activity& a, const correlate::rank_activity& b) {
  if (b.lines == 0) return;
  if (a.lines == 0) {
    a = b;
    return;
  }
  a.lines += b.lines;
  if (b.first_ts) {
    if (!a.first_ts) a.first_ts = b.first_ts;
    else if (a.last_ts && a.last_ts->kind == b.first_ts->kind && b.first_ts->seconds - a.last_ts->seconds > a.gap_seconds) {
      a.gap_seconds = b.first_ts->seconds - a.last_ts->seconds;  // the silence between the two scans
      a.gap_start = a.last_ts;
    }
  }
  if (b.gap_seconds > a.gap_seconds) {
    a.gap_seconds = b.gap_seconds;
    a.gap_start = b.gap_start;
  }
  if (b.last_ts) a.last_ts = b.last_ts;
  a.last_line = b.last_line;
  a.last_source = b.last_source;
  a.last_line_no = b.last_line_no;
  if (b.last_step) a.take_step_of(b);
  if (b.planned_steps && b.planned_steps != a.planned_steps) {
    a.planned_steps = b.planned_steps;
    a.planned_line = b.planned_line;
    a.planned_source = b.planned_source;
    a.planned_line_no = b.planned_line_no;
  }
}
}  // namespace

struct merger::state {
  pipeline::scanned out, first;
  std::size_t parts = 0;
  finding_cap findings;
  std::map<std::string, std::size_t> suspicious_by_template;
  std::size_t local_pairs = 0, host_pairs = 0;
  bool bound_hit = false, sources_bound = false;

  void fold(pipeline::scanned& p) {
    auto& in = out.in;
    auto& pin = p.in;
    if (in.source_names.size() + pin.source_names.size() > kMaxMergedSources) {
      sources_bound = true;
      out.errors.push_back({p.inputs.empty() ? "(events)" : p.inputs.front().path,
                            "left out of the merge: more than 1,048,576 sources in all", true, false});
      return;
    }
    const auto offset = static_cast<std::uint32_t>(in.source_names.size());
    for (auto& n : pin.source_names) in.source_names.push_back(std::move(n));
    for (auto& i : p.inputs) push_bounded(out.inputs, std::move(i), bound_hit);
    for (auto& e : p.errors) push_bounded(out.errors, std::move(e), bound_hit);
    out.total_lines += p.total_lines;
    out.total_bytes += p.total_bytes;
    out.any_readable |= p.any_readable;
    out.masked &= p.masked;
    out.redacted &= p.redacted;
    for (const auto& [k, v] : p.mask_counts) out.mask_counts[k] += v;
    in.benign_lines += pin.benign_lines;
    for (auto& f : pin.findings) findings.add(in.findings, std::move(f));
    for (auto& e : pin.exits) push_bounded(in.exits, std::move(e), bound_hit);
    for (auto& t : pin.terminated) push_bounded(in.terminated, std::move(t), bound_hit);
    for (auto& [key, a] : pin.activity) {
      if (in.activity.size() >= kMaxRanks && !in.activity.count(key)) {
        bound_hit = true;
        continue;
      }
      a.last_source += offset;
      a.last_step_source += offset;
      a.first_source += offset;
      a.planned_source += offset;
      continue_activity(in.activity[key], a);
    }
    for (auto& x : pin.suspicious) {
      auto it = suspicious_by_template.find(x.tmpl);
      if (it == suspicious_by_template.end()) {
        if (in.suspicious.size() >= kMaxSuspicious) continue;
        suspicious_by_template.emplace(x.tmpl, in.suspicious.size());
        in.suspicious.push_back(std::move(x));
        continue;
      }
      auto& g = in.suspicious[it->second];
      g.count += x.count;
      // the group's latest line: the later of the two by time, as the collector keeps it (a file's own order
      // does not span nodes); untimed when either was, or their clocks differ
      g.untimed = g.untimed || x.untimed || (g.last_ts && x.last_ts && g.last_ts->kind != x.last_ts->kind);
      if (x.last_ts && (!g.last_ts || (g.last_ts->kind == x.last_ts->kind && x.last_ts->seconds > g.last_ts->seconds))) {
        g.last_source = x.last_source;
        g.last_line_no = x.last_line_no;
        g.last_ts = x.last_ts;
      }
      std::vector<int> lu;
      std::set_union(g.local_ranks.begin(), g.local_ranks.end(), x.local_ranks.begin(), x.local_ranks.end(), std::back_inserter(lu));
      if (lu.size() > static_cast<std::size_t>(limits::kMaxListedRanks)) lu.resize(static_cast<std::size_t>(limits::kMaxListedRanks));
      g.local_ranks = std::move(lu);
      std::vector<int> u;
      std::set_union(g.ranks.begin(), g.ranks.end(), x.ranks.begin(), x.ranks.end(), std::back_inserter(u));
      if (u.size() > static_cast<std::size_t>(limits::kMaxListedRanks)) u.resize(static_cast<std::size_t>(limits::kMaxListedRanks));
      g.ranks = std::move(u);
    }
    for (auto& [l, ranks] : pin.local_to_rank) add_pairs(in.local_to_rank, l, ranks, local_pairs, bound_hit);
    for (const auto& h : pin.hosts) {
      if (in.hosts.size() >= kMaxPairs) {
        bound_hit = true;
        break;
      }
      in.hosts.insert(h);
    }
    for (auto& [h, ranks] : pin.host_ranks) add_pairs(in.host_ranks, h, ranks, host_pairs, bound_hit);
    for (auto& e : pin.stream_ends)
      if (in.stream_ends.size() < limits::kMaxStreamEnds) in.stream_ends.push_back(std::move(e));
    for (auto& e : pin.success_ends) in.keep_success_end(std::move(e));
    for (auto& x : pin.work_lines) in.keep_work_line(std::move(x));
    for (auto& x : pin.fact_lines) in.keep_fact_line(std::move(x));
    for (auto& [rank, frames] : pin.stack_tops) {
      if (in.stack_tops.size() >= kMaxStackTopRanks && !in.stack_tops.count(rank)) {
        bound_hit = true;
        continue;
      }
      auto& v = in.stack_tops[rank];
      for (auto& d : frames)
        if (v.size() < kMaxStackTopsPerRank) v.push_back(std::move(d));
    }
    p = pipeline::scanned{};  // its memory goes now, not when the caller's copy goes
  }
};

merger::merger() : s_(std::make_unique<state>()) {}
merger::~merger() = default;

void merger::add(pipeline::scanned part) {
  // One part is returned as it is; the fold starts with the second.
  if (s_->parts++ == 0) {
    s_->first = std::move(part);
    return;
  }
  if (s_->parts == 2) {
    s_->out.redacted = s_->first.redacted;  // (the fold ANDs each part's in)
    s_->fold(s_->first);
  }
  s_->fold(part);
}

pipeline::scanned merger::take() {
  if (s_->parts <= 1) return std::move(s_->first);
  if (s_->findings.bound_hit)
    s_->out.errors.push_back({"(all inputs)", "more than 8192 findings: later ones are counted as repeats of their signature's first finding, their ranks are not kept", false});
  if (s_->bound_hit)
    s_->out.errors.push_back({"(all inputs)", "the merged scans hold more than one run's collector keeps (16384 ranks, 65536 host or local-rank pairs, 65536 of each record kind): the rest were left out", false});
  return std::move(s_->out);
}

pipeline::scanned merge(std::vector<pipeline::scanned> parts) {
  merger m;
  for (auto& p : parts) m.add(std::move(p));
  return m.take();
}

}  // namespace ff::events
