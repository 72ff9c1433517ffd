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

template <class T>
void put(json& j, const char* k, const std::optional<T>& v) {
  if (v) j[k] = *v;
}
void put_ts(json& j, const char* k, const std::optional<normalize::timestamp>& v) {
  if (v) j[k] = ts_json(*v);
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
  for (const auto& i : s.inputs) w.line({{"t", "input"}, {"path", i.path}, {"lines", i.lines}, {"bytes", i.bytes}});
  for (const auto& e : s.errors)
    w.line({{"t", "error"}, {"path", e.path}, {"reason", e.reason}, {"fatal", e.fatal_for_input}, {"cut_short", e.cut_short}});
  for (const auto& f1 : in.findings) {
    json j{{"t", "finding"}, {"sig", sig_name(f1.signature)}, {"source", f1.source}, {"line", f1.line_no}, {"text", f1.text}};
    json cap = json::array();
    for (const auto& [k, v] : f1.captured) cap.push_back({k, v});
    j["cap"] = std::move(cap);
    put(j, "rank", f1.rank);
    put(j, "local_rank", f1.local_rank);
    put(j, "host", f1.host);
    put_ts(j, "ts", f1.ts);
    if (f1.ts_inherited) j["ts_inherited"] = true;
    if (f1.duplicates) j["dup"] = f1.duplicates;
    put(j, "attempt", f1.attempt);
    put(j, "step_at", f1.step_at);
    if (f1.raised) j["raised"] = true;
    if (f1.handled) j["handled"] = true;
    w.line(j);
  }
  for (const auto& e : in.exits) {
    json j{{"t", "exit"}, {"host", e.host}, {"time", e.time}, {"signal", e.signal}, {"root_cause", e.root_cause},
           {"agent_line", e.from_agent_line}, {"launcher", e.launcher}, {"source", e.source}, {"line", e.line_no}};
    put(j, "rank", e.rank);
    put(j, "local_rank", e.local_rank);
    put(j, "exitcode", e.exitcode);
    put(j, "pid", e.pid);
    put(j, "attempt", e.attempt);
    w.line(j);
  }
  for (const auto& t : in.terminated) w.line({{"t", "terminated"}, {"pid", t.pid}, {"source", t.source}, {"line", t.line_no}});
  for (const auto& [key, a] : in.activity) {
    json j{{"t", "activity"}, {"scope", key.kind == correlate::rank_key::scope::global ? "global" : "local"}, {"number", key.number},
           {"lines", a.lines}, {"last_line", a.last_line}, {"last_source", a.last_source}, {"last_line_no", a.last_line_no},
           {"planned_line", a.planned_line}, {"planned_source", a.planned_source}, {"planned_line_no", a.planned_line_no},
           {"first_source", a.first_source}, {"first_line_no", a.first_line_no}, {"gap_seconds", a.gap_seconds}};
    put(j, "attempt", key.attempt);
    put_ts(j, "last_ts", a.last_ts);
    put(j, "last_step", a.last_step);
    if (a.last_step) {
      j["last_step_source"] = a.last_step_source;
      j["last_step_line_no"] = a.last_step_line_no;
      put_ts(j, "last_step_ts", a.last_step_ts);
    }
    put(j, "planned_steps", a.planned_steps);
    put_ts(j, "first_ts", a.first_ts);
    put_ts(j, "gap_start", a.gap_start);
    w.line(j);
  }
  for (const auto& x : in.suspicious) {
    json j{{"t", "suspicious"}, {"source", x.source}, {"text", x.text}, {"line", x.line_no}, {"strong", x.strong},
           {"tmpl", x.tmpl}, {"count", x.count}, {"ranks", x.ranks}};
    put(j, "rank", x.rank);
    w.line(j);
  }
  for (const auto& [l, ranks] : in.local_to_rank) w.line({{"t", "local_ranks"}, {"local", l}, {"ranks", ranks}});
  for (const auto& h : in.hosts) w.line({{"t", "host"}, {"name", h}});
  for (const auto& [h, ranks] : in.host_ranks) w.line({{"t", "host_ranks"}, {"host", h}, {"ranks", ranks}});
  for (const auto& e : in.stream_ends) w.line({{"t", "stream_end"}, {"source", e.source}, {"text", e.text}, {"line", e.line_no}});
  for (const auto* marked : {&in.work_lines, &in.success_ends})
  for (const auto& x : *marked) {
    json j{{"t", marked == &in.work_lines ? "work_line" : "success_end"}, {"source", x.source}, {"text", x.text}, {"line", x.line_no}};
    if (x.job) j["job"] = true;
    put(j, "rank", x.rank);
    put(j, "local_rank", x.local_rank);
    put_ts(j, "ts", x.ts);
    if (x.ts_inherited) j["ts_inherited"] = true;
    w.line(j);
  }
  for (const auto& [rank, frames] : in.stack_tops)
    for (const auto& d : frames)
      w.line({{"t", "stack_top"}, {"rank", rank}, {"function", d.top.function}, {"file", d.top.file}, {"main", d.top.main_thread},
              {"text", d.top.text}, {"source", d.source}, {"line", d.line_no}});
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
  std::map<std::string, int> by_name;
  for (std::size_t i = 0; i < lib.signatures.size(); ++i) by_name.emplace(lib.signatures[i].name, static_cast<int>(i));
  pipeline::scanned s;
  auto& in = s.in;
  std::size_t records = 0, unknown_sigs = 0, local_pairs = 0, host_pairs = 0;
  bool header = false, ended = false, summary = false, bound_hit = false;
  finding_cap findings;
  std::string first_unknown;
  auto on_line = [&](const std::string& line) -> std::string {
    if (ended) return "records after the end record";
    if (++records > kMaxRecords) return "more than 4,000,000 records";
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) return "record " + std::to_string(records) + " is not valid JSON";
    if (!j.is_object()) return "record " + std::to_string(records) + " is not a JSON object";
    try {
      std::string t = str(j, "t");
      if (!header) {
        if (t != "header") return "does not start with a header record: not a firstfault events file";
        std::string format = str(j, "format");
        if (format != kFormat) return "format \"" + format + "\" is not " + kFormat;
        header = true;
        s.masked = boolean(j, "masked");
        // (a file written before --redact existed masked identity whenever it masked)
        s.redacted = j.contains("redacted") ? boolean(j, "redacted") : s.masked;
        if (str(j, "kb") != lib.content_hash)
          notes.push_back(shown + ": made with another knowledge base (" + str(j, "kb") + "); signatures are matched by name");
        if (key_id_out) *key_id_out = str(j, "key_id");
        return "";
      }
      if (t.empty()) throw bad_record{"no record type (field \"t\")"};
      if (t == "source") {
        // Activity records point at sources by index, so sources cannot be dropped: too many is an error.
        if (in.source_names.size() >= kMaxRecordsKept) return "more than 65,536 source records";
        in.source_names.push_back(str(j, "name"));
      } else if (t == "input") {
        push_bounded(s.inputs, pipeline::input_stats{str(j, "path"), num<std::uint64_t>(j, "lines"), num<std::uint64_t>(j, "bytes")}, bound_hit);
      } else if (t == "error") {
        push_bounded(s.errors, ingest::input_error{str(j, "path"), str(j, "reason"), boolean(j, "fatal"), boolean(j, "cut_short")}, bound_hit);
      } else if (t == "finding") {
        std::string name = str(j, "sig");
        auto it = by_name.find(name);
        if (it == by_name.end()) {
          if (unknown_sigs++ == 0) first_unknown = name;
          return "";
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
        x.rank = onum<int>(j, "rank");
        x.local_rank = onum<int>(j, "local_rank");
        x.host = ostr(j, "host");
        x.ts = ots(j, "ts");
        x.ts_inherited = boolean(j, "ts_inherited");
        x.step_at = onum<long>(j, "step_at");
        x.raised = boolean(j, "raised");
        x.handled = boolean(j, "handled");
        x.source = str(j, "source");
        x.line_no = num<std::uint64_t>(j, "line");
        x.text = std::string(text::prefix_utf8(str(j, "text"), limits::kFindingTextBytes));
        x.duplicates = num<int>(j, "dup");
        x.attempt = onum<int>(j, "attempt");
        findings.add(in.findings, std::move(x));
      } else if (t == "exit") {
        extract::exit_record e;
        e.rank = onum<int>(j, "rank");
        e.local_rank = onum<int>(j, "local_rank");
        e.exitcode = onum<int>(j, "exitcode");
        e.pid = onum<int>(j, "pid");
        e.host = str(j, "host");
        e.time = str(j, "time");
        e.signal = str(j, "signal");
        e.root_cause = boolean(j, "root_cause");
        e.from_agent_line = boolean(j, "agent_line");
        e.launcher = str(j, "launcher");
        e.source = str(j, "source");
        e.line_no = num<std::uint64_t>(j, "line");
        e.attempt = onum<int>(j, "attempt");
        push_bounded(in.exits, std::move(e), bound_hit);
      } else if (t == "terminated") {
        push_bounded(in.terminated, extract::terminated_pid{num<int>(j, "pid"), str(j, "source"), num<std::uint64_t>(j, "line")}, bound_hit);
      } else if (t == "activity") {
        auto scope = str(j, "scope");
        if (scope != "global" && scope != "local") throw bad_record{"field \"scope\" is neither global nor local"};
        correlate::rank_key key{scope == "global" ? correlate::rank_key::scope::global : correlate::rank_key::scope::local,
                                num<int>(j, "number"), onum<int>(j, "attempt")};
        correlate::rank_activity a;
        a.lines = num<std::uint64_t>(j, "lines");
        a.last_ts = ots(j, "last_ts");
        a.last_line = std::string(text::prefix_utf8(str(j, "last_line"), limits::kLastLineBytes));
        a.last_source = num<std::uint32_t>(j, "last_source");
        a.last_line_no = num<std::uint64_t>(j, "last_line_no");
        a.last_step = onum<long>(j, "last_step");
        if (a.last_step) {
          a.last_step_source = num<std::uint32_t>(j, "last_step_source");
          a.last_step_line_no = num<std::uint64_t>(j, "last_step_line_no");
          a.last_step_ts = ots(j, "last_step_ts");
        }
        a.planned_steps = onum<long>(j, "planned_steps");
        a.planned_line = std::string(text::prefix_utf8(str(j, "planned_line"), limits::kLastLineBytes));
        a.planned_source = num<std::uint32_t>(j, "planned_source");
        a.planned_line_no = num<std::uint64_t>(j, "planned_line_no");
        a.first_ts = ots(j, "first_ts");
        a.first_source = num<std::uint32_t>(j, "first_source");
        a.first_line_no = num<std::uint64_t>(j, "first_line_no");
        a.gap_start = ots(j, "gap_start");
        a.gap_seconds = num<double>(j, "gap_seconds");
        if (in.activity.size() >= kMaxRanks && !in.activity.count(key)) bound_hit = true;
        else in.activity[key] = std::move(a);
      } else if (t == "suspicious") {
        correlate::suspicious_line x;
        x.source = str(j, "source");
        x.text = std::string(text::prefix_utf8(str(j, "text"), limits::kSuspiciousTextBytes));
        x.line_no = num<std::uint64_t>(j, "line");
        x.rank = onum<int>(j, "rank");
        x.strong = boolean(j, "strong");
        x.tmpl = str(j, "tmpl");
        x.count = num<int>(j, "count", 1);
        x.ranks = int_list(j, "ranks", static_cast<std::size_t>(limits::kMaxListedRanks));
        std::sort(x.ranks.begin(), x.ranks.end());
        x.ranks.erase(std::unique(x.ranks.begin(), x.ranks.end()), x.ranks.end());
        if (in.suspicious.size() < kMaxSuspicious) in.suspicious.push_back(std::move(x));
      } else if (t == "local_ranks") {
        add_pairs(in.local_to_rank, num<int>(j, "local"), int_list(j, "ranks", kMaxPairs), local_pairs, bound_hit);
      } else if (t == "host") {
        if (in.hosts.size() < kMaxPairs) in.hosts.insert(str(j, "name"));
        else bound_hit = true;
      } else if (t == "host_ranks") {
        add_pairs(in.host_ranks, str(j, "host"), int_list(j, "ranks", kMaxPairs), host_pairs, bound_hit);
      } else if (t == "work_line" || t == "success_end") {
        correlate::inputs::marked_line x{str(j, "source"), std::string(text::prefix_utf8(str(j, "text"), limits::kLastLineBytes)),
                                         num<std::uint64_t>(j, "line"), onum<int>(j, "rank"), onum<int>(j, "local_rank"), ots(j, "ts"),
                                         boolean(j, "ts_inherited"), boolean(j, "job")};
        if (t == "success_end") in.keep_success_end(std::move(x));
        else in.keep_work_line(std::move(x));
      } else if (t == "stream_end") {
        if (in.stream_ends.size() < limits::kMaxStreamEnds)
          in.stream_ends.push_back({str(j, "source"), std::string(text::prefix_utf8(str(j, "text"), limits::kLastLineBytes)), num<std::uint64_t>(j, "line")});
      } else if (t == "stack_top") {
        correlate::inputs::dump_frame d;
        d.top.function = str(j, "function");
        d.top.file = str(j, "file");
        d.top.main_thread = boolean(j, "main");
        d.top.text = str(j, "text");
        d.source = str(j, "source");
        d.line_no = num<std::uint64_t>(j, "line");
        int rank = num<int>(j, "rank");
        if (in.stack_tops.size() >= kMaxStackTopRanks && !in.stack_tops.count(rank)) {
          bound_hit = true;
          return "";
        }
        auto& v = in.stack_tops[rank];
        if (v.size() < kMaxStackTopsPerRank) v.push_back(std::move(d));
      } else if (t == "summary") {
        if (summary) throw bad_record{"a second summary record"};
        summary = true;
        in.benign_lines = num<std::uint64_t>(j, "benign_lines");
        s.total_lines = num<std::uint64_t>(j, "lines");
        s.total_bytes = num<std::uint64_t>(j, "bytes");
        s.any_readable = boolean(j, "readable");
        if (j.contains("mask_counts")) {
          if (!j["mask_counts"].is_object()) throw bad_record{"field \"mask_counts\" is not an object"};
          for (const auto& [k, v] : j["mask_counts"].items()) {
            if (!v.is_number_unsigned()) throw bad_record{"field \"mask_counts\" holds a non-count"};
            s.mask_counts[text::sanitize(k)] = v.get<std::size_t>();
          }
        }
      } else if (t == "end") {
        if (num<std::uint64_t>(j, "records") != records - 1) return "the end record counts another number of records: the file was changed";
        ended = true;
      }  // other record types: a later minor version's, ignored
    } catch (const bad_record& b) {
      return "record " + std::to_string(records) + ": " + b.why;
    } catch (const json::exception& e) {
      return "record " + std::to_string(records) + ": " + e.what();
    }
    return "";
  };
  if (auto why = read_lines(f, on_line); !why.empty()) return error{shown + ": " + why};
  if (!header) return error{shown + ": no records: not a firstfault events file"};
  if (!ended) return error{shown + ": cut short (no end record)"};
  if (!summary) return error{shown + ": no summary record (the scan did not finish writing it)"};
  // Indices into this file's sources must point at one (an activity record comes from a source's lines).
  for (const auto& [k, a] : in.activity)
    if (a.last_source >= in.source_names.size() || a.first_source >= in.source_names.size() ||
        (a.last_step && a.last_step_source >= in.source_names.size()) ||
        (a.planned_steps && a.planned_source >= in.source_names.size()))
      return error{shown + ": an activity record names a source the file does not list"};
  if (findings.bound_hit || bound_hit)
    s.errors.push_back({shown, "holds more records than one run's collector keeps (8192 findings, 64 per signature and rank, 16384 ranks, 65536 of each other kind): the rest were counted as repeats or left out", false, false});
  if (unknown_sigs)
    notes.push_back(shown + ": " + std::to_string(unknown_sigs) + " finding(s) of signatures this knowledge base does not have (first: " +
                    first_unknown + ") were left out");
  return s;
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
