// Ingest: discovery of inputs, libarchive-backed byte sources, and the line splitter.
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>
#include <nlohmann/json.hpp>
#include <re2/re2.h>

#include "firstfault/ingest.hpp"

#include "../base/dl.hpp"
#include "journal.hpp"
#include "kb_data/tables.hpp"
#include "firstfault/text.hpp"

namespace fs = std::filesystem;

namespace ff::ingest {

line_reader::line_reader(byte_source& src, const options& opt) : src_(src), opt_(opt), buf_(1 << 16) {}

bool line_reader::fill() {
  if (eof_) return false;
  if (begin_ > 0) {
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  long n = src_.read(buf_.data() + end_, buf_.size() - end_, &error_);
  if (n <= 0) {
    if (n == 0 && follow_ && !finished_) return false;  // a followed file: nothing more yet
    eof_ = true;
    return false;
  }
  bytes_ += static_cast<std::uint64_t>(n);
  end_ += static_cast<std::size_t>(n);
  return true;
}

// A record of the CRI container log format (containerd, CRI-O: /var/log/pods/...):
// "RFC3339NANO stdout|stderr P|F message". The runtime splits a line longer than its limit (containerd's
// max_container_log_line_size, 16 KiB by default) into P records ended by an F record
// (https://github.com/kubernetes/design-proposals-archive/blob/main/node/kubelet-cri-logging.md).
// Returns the offset of the message and sets stream ('o' or 'e') and tag ('P' or 'F'); 0 when not a record.
std::size_t cri_record(std::string_view l, char* stream, char* tag) {
  if (l.size() < 30 || l[4] != '-' || l[7] != '-' || l[10] != 'T' || l[0] < '0' || l[0] > '9') return 0;
  auto sp = l.find(' ', 19);
  if (sp == std::string_view::npos || sp > 40 || l.size() < sp + 10) return 0;
  std::string_view rest = l.substr(sp + 1);
  if (rest.substr(0, 7) != "stdout " && rest.substr(0, 7) != "stderr ") return 0;
  if ((rest[7] != 'P' && rest[7] != 'F') || rest[8] != ' ') return 0;
  *stream = rest[4];
  *tag = rest[7];
  return sp + 10;
}

std::vector<std::string> json_record_lines(std::string_view line) {
  std::vector<std::string> out;
  if (line.size() < 2 || line.front() != '{' || line.back() != '}') return out;
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (!j.is_object()) return out;
  auto str = [&](std::initializer_list<const char*> keys) -> std::string {
    for (const char* k : keys)
      if (auto it = j.find(k); it != j.end()) {
        if (it->is_string()) return it->get<std::string>();
        if (it->is_number_integer()) return std::to_string(it->get<long long>());
      }
    return {};
  };
  std::string message = str({"message", "msg", "event"});
  if (message.empty()) return out;
  std::string time = str({"time", "timestamp", "asctime", "@timestamp", "ts"});
  // ISO 8601 as a logging formatter writes it: "2026-12-06T16:41:05.341Z" -> "2026-12-06 16:41:05.341"
  if (time.size() >= 19 && time[10] == 'T') time[10] = ' ';
  if (!time.empty() && (time.back() == 'Z' || time.back() == 'z')) time.pop_back();
  std::string level = str({"level", "levelname", "severity", "log.level"});
  for (auto& c : level) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string rank = str({"rank", "global_rank", "RANK"});
  // A rank is a small number (at most 7 digits); anything else is not one and is left out.
  if (rank.size() > 7 || !std::all_of(rank.begin(), rank.end(), [](char c) { return c >= '0' && c <= '9'; })) rank.clear();
  std::string head;
  if (!time.empty()) head += time + " ";
  if (!level.empty()) head += level + " ";
  if (!rank.empty()) head += "[rank" + rank + "] ";
  std::string first = head + message;
  std::replace(first.begin(), first.end(), '\n', ' ');
  out.push_back(std::move(first));
  std::string exc = str({"exc_info", "exception", "stack_trace", "exc_text", "error.stack_trace"});
  // Bounded: the record is at most one line's bytes; at most kMaxTracebackLines lines come out of it.
  constexpr std::size_t kMaxTracebackLines = 4096;
  for (std::size_t at = 0; at < exc.size() && out.size() <= kMaxTracebackLines;) {
    auto nl = exc.find('\n', at);
    std::string part = exc.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    // the record's rank on each traceback line too, as a launcher's prefix would have put it
    if (!part.empty()) out.push_back(rank.empty() ? part : "[rank" + rank + "]:" + part);
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  return out;
}

bool line_reader::next(raw_line& out) {
  if (!json_pending_.empty()) {
    json_line_ = std::move(json_pending_.front());
    json_pending_.pop_front();
    out.text = json_line_;
    out.line_no = json_line_no_;
    out.truncated = false;
    out.plain = false;
    return true;
  }
  if (!joining_) {  // (a join that waits for its next record, follow(), goes on below)
    if (!physical(out)) return false;
    if (!out.text.empty() && out.text.front() == '{' && out.text.back() == '}') {
      auto lines = json_record_lines(out.text);
      if (!lines.empty()) {
        json_line_ = std::move(lines.front());
        for (std::size_t i = 1; i < lines.size(); ++i) json_pending_.push_back(std::move(lines[i]));
        json_line_no_ = out.line_no;
        out.text = json_line_;
        out.plain = false;
        return true;
      }
    }
    char stream = 0, tag = 0;
    if (cri_record(out.text, &stream, &tag) == 0 || tag != 'P') return true;
    // A partial record: the records of the same stream that continue it are joined into one line (its
    // first record's header and line number), up to the line bound; another stream's record or a line of
    // another shape ends the join and is returned next.
    join_.assign(out.text);
    join_first_ = out.line_no;
    join_truncated_ = out.truncated;
    join_cut_ = false;
    join_stream_ = stream;
    joining_ = true;
  }
  raw_line nx;
  bool more = false;
  while ((more = physical(nx))) {
    char s2 = 0, t2 = 0;
    std::size_t msg = cri_record(nx.text, &s2, &t2);
    if (msg == 0 || s2 != join_stream_) {
      held_.assign(nx.text);
      held_line_no_ = nx.line_no;
      held_truncated_ = nx.truncated;
      has_held_ = true;
      break;
    }
    std::string_view part = nx.text.substr(msg);
    std::size_t room = opt_.max_line_bytes > join_.size() ? opt_.max_line_bytes - join_.size() : 0;
    if (part.size() > room) join_cut_ = true;
    join_.append(part.substr(0, std::min(part.size(), room)));
    join_truncated_ |= nx.truncated;
    if (t2 == 'F') break;
  }
  if (!more && follow_ && !eof_) return false;  // a followed file: the join waits for its next record
  joining_ = false;
  if (join_cut_ && !join_truncated_) ++cut_;
  out.text = join_;
  out.line_no = join_first_;
  out.truncated = join_truncated_ || join_cut_;
  out.plain = false;
  return true;
}

void line_reader::drop_partial() {
  begin_ = end_ = 0;
  line_.clear();
  partial_ = partial_cut_ = skip_lf_ = false;
}

bool line_reader::physical(raw_line& out) {
  if (has_held_) {
    has_held_ = false;
    line_.swap(held_);
    out.text = line_;
    out.line_no = held_line_no_;
    out.truncated = held_truncated_;
    out.plain = false;
    return true;
  }
  // follow(): the start of a line read before, waiting for its rest
  const bool resumed = std::exchange(partial_, false);
  bool cut = resumed && partial_cut_;
  if (!resumed) line_.clear();
  // The common case: the whole line is in the buffer, short enough and without NUL: a view into the
  // buffer, no copy (raw_line::text is only valid until the next call).
  if (skip_lf_ && begin_ < end_) {  // "\r\n" is one line end
    skip_lf_ = false;
    if (buf_[begin_] == '\n') ++begin_;
  }
  if (!resumed && begin_ < end_ && !skip_lf_) {
    const char* start = buf_.data() + begin_;
    std::size_t avail = end_ - begin_;
    // One pass for the line's end; a '\r' or NUL first (rare) takes the general code below.
    bool plain = false;
    std::size_t e = text::find_line_end(std::string_view(start, avail), plain);
    if (e != std::string_view::npos && start[e] == '\n' && e <= opt_.max_line_bytes) {
      begin_ += e + 1;
      out.text = std::string_view(start, e);
      out.line_no = ++line_no_;
      out.truncated = false;
      out.plain = plain;
      return true;
    }
    const char* nl = e == std::string_view::npos ? nullptr : static_cast<const char*>(std::memchr(start + e, '\n', avail - e));
    if (nl) {
      std::size_t take = static_cast<std::size_t>(nl - start);
      // No '\r' or NUL before `e` (find_line_end stopped there).
      const char* cr = static_cast<const char*>(std::memchr(start + e, '\r', take - e));
      if (cr) take = static_cast<std::size_t>(cr - start);
      if (take <= opt_.max_line_bytes && !std::memchr(start + e, '\0', take - e)) {
        begin_ += take + 1;
        if (cr) skip_lf_ = true;
        out.text = std::string_view(start, take);
        out.line_no = ++line_no_;
        out.truncated = false;
        out.plain = false;
        return true;
      }
    }
  }
  for (;;) {
    if (begin_ == end_ && !fill()) {
      if (follow_ && !eof_) {  // a followed file: the rest of the line is not written yet
        partial_ = !line_.empty() || cut;
        partial_cut_ = cut;
        return false;
      }
      if (line_.empty() && !cut) return false;
      break;  // last line without a terminator
    }
    if (skip_lf_) {  // "\r\n" is one line end
      skip_lf_ = false;
      if (buf_[begin_] == '\n') {
        ++begin_;
        continue;
      }
    }
    const char* start = buf_.data() + begin_;
    std::size_t avail = end_ - begin_;
    const char* nl = static_cast<const char*>(std::memchr(start, '\n', avail));
    const char* cr = static_cast<const char*>(std::memchr(start, '\r', nl ? static_cast<std::size_t>(nl - start) : avail));
    const char* stop = cr ? cr : nl;
    std::size_t take = stop ? static_cast<std::size_t>(stop - start) : avail;
    std::size_t room = opt_.max_line_bytes > line_.size() ? opt_.max_line_bytes - line_.size() : 0;
    if (take > room) cut = true;
    line_.append(start, std::min(take, room));
    begin_ += take;
    if (stop) {
      ++begin_;
      if (stop == cr) skip_lf_ = true;
      break;
    }
  }
  if (cut) ++cut_;
  // NUL runs are a gap in the text (pre-allocated or crashed writes), not data: removed and counted.
  if (std::memchr(line_.data(), '\0', line_.size())) {
    std::string kept;
    kept.reserve(line_.size());
    for (std::size_t i = 0; i < line_.size();) {
      if (line_[i] != '\0') {
        kept += line_[i++];
        continue;
      }
      std::size_t j = i;
      while (j < line_.size() && line_[j] == '\0') ++j;
      ++nul_runs_;
      nul_bytes_ += j - i;
      i = j;
    }
    line_ = std::move(kept);
  }
  out.text = line_;
  out.line_no = ++line_no_;
  out.truncated = cut;
  out.plain = false;
  return true;
}

namespace {

// libarchive is opened at first use (base/dl.hpp): a plain log never needs it. The functions called:
#define FF_ARCHIVE_FUNCTIONS(X)                                                                                        \
  X(archive_entry_filetype) X(archive_entry_pathname) X(archive_error_string) X(archive_filter_bytes)                  \
  X(archive_filter_count) X(archive_format) X(archive_read_data) X(archive_read_free) X(archive_read_new)              \
  X(archive_read_next_header) X(archive_read_open) X(archive_read_open_fd) X(archive_read_open_filename)               \
  X(archive_read_support_filter_all) X(archive_read_support_format_raw) X(archive_read_support_format_tar)             \
  X(archive_read_support_format_zip)
struct archive_api {
  FF_ARCHIVE_FUNCTIONS(FF_DL_FIELD)
};
const archive_api* la = nullptr;  // set by load_archive()

// libarchive of the Debian package libarchive13, once per process: "" or why it could not be loaded.
std::string load_archive() {
  return ff::detail::load_library_once(la, "libarchive.so.13", "libarchive (Debian package libarchive13)", [](void* h, archive_api& api) {
    bool ok = true;
    FF_ARCHIVE_FUNCTIONS(FF_DL_BIND)
    return ok;
  });
}
#undef FF_ARCHIVE_FUNCTIONS

std::string lower(std::string_view s) {
  std::string o(s);
  std::transform(o.begin(), o.end(), o.begin(), [](unsigned char c) { return std::tolower(c); });
  return o;
}

bool ends_with(std::string_view s, std::string_view suf) {
  return s.size() >= suf.size() && s.substr(s.size() - suf.size()) == suf;
}

bool is_archive_name(std::string_view name) {
  std::string n = lower(name);
  for (auto suf : {".tar", ".tar.gz", ".tgz", ".tar.zst", ".tzst", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".zip"})
    if (ends_with(n, suf)) return true;
  return false;
}

// libarchive's messages, made to say what happened to the user's data.
std::string explain_read_error(const std::string& msg) {
  if (msg.find("runcated") != std::string::npos || msg.find("corrupt") != std::string::npos ||
      msg.find("Damaged") != std::string::npos)
    return "truncated or corrupt compressed data (" + msg + "); lines before the damage were read";
  return msg;
}

// Reads the current entry of an open libarchive handle, guarding against decompression bombs: the
// decompressed bytes and lines are bounded relative to the compressed bytes this entry has consumed so far
// (archive_filter_bytes of the lowest filter), so stdin, plain files and nested members are all covered.
class archive_entry_source final : public line_reader::byte_source {
 public:
  /// `whole_stream`: the entry is the whole (raw) stream, so its compressed bytes count from 0; a bundle's
  /// member counts from where the member began (libarchive reads ahead, so that count runs a block late).
  archive_entry_source(archive* a, const options& opt, bool whole_stream)
      : a_(a), opt_(opt), start_(whole_stream ? 0 : la->archive_filter_bytes(a, -1)) {}
  long read(char* buf, std::size_t n, std::string* err) override {
    la_ssize_t got = la->archive_read_data(a_, buf, n);
    if (got < 0) {
      const char* msg = la->archive_error_string(a_);
      *err = explain_read_error(msg ? msg : "read error");
      return -1;
    }
    total_ += static_cast<std::uint64_t>(got);
    // Lines only matter to the bomb test below, which only runs under a compression filter.
    if (la->archive_filter_count(a_) > 1) lines_ += static_cast<std::uint64_t>(std::count(buf, buf + got, '\n'));
    if (total_ > opt_.max_stream_bytes) {
      *err = "stopped after " + std::to_string(opt_.max_stream_bytes >> 20) + " MiB of decompressed data (limit); the input was cut short";
      cut_short = true;
      return -1;
    }
    la_int64_t now = la->archive_filter_bytes(a_, -1);
    std::uint64_t compressed = now > start_ ? static_cast<std::uint64_t>(now - start_) : 1;
    if (la->archive_filter_count(a_) > 1 &&  // a compression filter is in use (the raw "none" filter counts one)
        ((total_ > opt_.bomb_min_bytes && total_ / compressed > opt_.bomb_ratio) ||
         (lines_ > opt_.bomb_min_lines && lines_ / compressed > opt_.bomb_line_ratio))) {
      *err = "decompression bomb: " + std::to_string(total_ >> 20) + " MiB and " + std::to_string(lines_) +
             " lines out of " + std::to_string(compressed) + " compressed bytes; stopped, the input was cut short";
      cut_short = true;
      return -1;
    }
    return static_cast<long>(got);
  }
  bool cut_short = false;

 private:
  archive* a_;
  const options& opt_;
  la_int64_t start_;
  std::uint64_t total_ = 0, lines_ = 0;
};

class memory_source final : public line_reader::byte_source {
 public:
  explicit memory_source(std::string s) : s_(std::move(s)) {}
  long read(char* buf, std::size_t n, std::string*) override {
    std::size_t k = std::min(n, s_.size() - pos_);
    std::memcpy(buf, s_.data() + pos_, k);
    pos_ += k;
    return static_cast<long>(k);
  }

 private:
  std::string s_;
  std::size_t pos_ = 0;
};

// Binary check on the first bytes of a stream: many NULs, control bytes or invalid UTF-8. A stray NUL
// or a few bad bytes in a text log (seen in real console captures) do not make it binary.
// Runs of NUL bytes (what a crashed node leaves in its log) are a gap, not binary: only the other bytes
// are judged, and scattered NULs (binary formats interleave them with data) still count.
bool looks_binary(const char* p, std::size_t n) {
  if (n == 0) return false;
  std::size_t bad = 0, scattered_nul = 0, in_runs = 0;
  std::string rest;
  rest.reserve(n);
  for (std::size_t i = 0; i < n;) {
    auto c = static_cast<unsigned char>(p[i]);
    if (c == 0) {
      std::size_t j = i;
      while (j < n && p[j] == '\0') ++j;
      if (j - i >= 64) in_runs += j - i;
      else scattered_nul += j - i;
      i = j;
      continue;
    }
    if ((c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != 0x1B) || c == 0x7F) ++bad;
    rest += p[i++];
  }
  std::size_t m = n - in_runs;  // the bytes that are not part of a NUL gap
  if (m == 0) return false;     // only a gap so far: read on
  std::size_t invalid = 0;
  // the last 3 bytes may be a UTF-8 sequence cut by the peek window
  text::sanitize(std::string_view(rest.data(), rest.size() > 3 ? rest.size() - 3 : rest.size()), &invalid);
  return scattered_nul * 100 > m || bad * 10 > m || invalid * 10 > m;
}


// A source that peeks the first block to refuse binary data, then streams.
class peeking_source final : public line_reader::byte_source {
 public:
  explicit peeking_source(line_reader::byte_source& inner) : inner_(inner) {}
  // Returns false when the stream is binary; the peeked bytes are replayed by read().
  bool check(std::string* err) {
    head_.resize(8192);
    std::size_t have = 0;
    while (have < head_.size()) {
      long n = inner_.read(head_.data() + have, head_.size() - have, err);
      if (n < 0) { failed_ = true; break; }
      if (n == 0) break;
      have += static_cast<std::size_t>(n);
    }
    head_.resize(have);
    empty_ = have == 0 && !failed_;
    return !looks_binary(head_.data(), head_.size());
  }
  bool empty() const { return empty_; }
  long read(char* buf, std::size_t n, std::string* err) override {
    if (pos_ < head_.size()) {
      std::size_t k = std::min(n, head_.size() - pos_);
      std::memcpy(buf, head_.data() + pos_, k);
      pos_ += k;
      return static_cast<long>(k);
    }
    if (failed_) return -1;
    return inner_.read(buf, n, err);
  }

 private:
  line_reader::byte_source& inner_;
  std::string head_;
  std::size_t pos_ = 0;
  bool failed_ = false, empty_ = false;
};

// torchelastic error.json -> text lines (message, then the recorded Python call stack).
std::optional<std::string> error_json_text(line_reader::byte_source& src, source_hint& hint) {
  std::string all, err;
  char buf[65536];
  for (;;) {
    long n = src.read(buf, sizeof buf, &err);
    if (n <= 0) break;
    all.append(buf, static_cast<std::size_t>(n));
    if (all.size() > (8u << 20)) return std::nullopt;
  }
  auto j = nlohmann::json::parse(all, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("message")) return std::nullopt;
  std::string out;
  const auto& m = j["message"];
  if (m.is_object()) {
    if (m.contains("message") && m["message"].is_string()) out += m["message"].get<std::string>() + "\n";
    if (m.contains("extraInfo") && m["extraInfo"].is_object()) {
      const auto& x = m["extraInfo"];
      if (x.contains("py_callstack") && x["py_callstack"].is_string()) out += x["py_callstack"].get<std::string>() + "\n";
      if (x.contains("timestamp") && x["timestamp"].is_string()) {
        try { hint.epoch_seconds = std::stod(x["timestamp"].get<std::string>()); } catch (...) {}
      }
    }
  } else if (m.is_string()) {
    out += m.get<std::string>() + "\n";
  }
  return out;
}

struct reader_ctx {
  const options& opt;
  const visit_fn& visit;
  std::vector<input_error>& errors;
  bool stop = false;
  std::string root;  ///< the input argument being read (its subpaths may name ranks, its ancestors may not)

  std::string below(const std::string& path) const {
    if (!root.empty() && path.size() > root.size() + 1 && path.compare(0, root.size(), root) == 0 &&
        (path[root.size()] == '/' || root.back() == '/'))
      return path.substr(root.size() + (path[root.size()] == '/' ? 1 : 0));
    auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);  // a file argument: its own name
  }
};

// Reads one stream (already positioned) with binary/empty checks and the visitor.
void read_stream(reader_ctx& ctx, line_reader::byte_source& raw, source src) {
  if (src.hint.error_json) {
    auto text = error_json_text(raw, src.hint);
    if (!text) {
      ctx.errors.push_back({src.display, "not a torchelastic error file (no \"message\" in the JSON); skipped"});
      return;
    }
    memory_source mem(std::move(*text));
    line_reader r(mem, ctx.opt);
    if (!ctx.visit(src, r)) ctx.stop = true;
    return;
  }
  peeking_source peek(raw);
  std::string err;
  if (!peek.check(&err)) {
    ctx.errors.push_back({src.display, "binary data, not a text log; skipped"});
    return;
  }
  if (peek.empty()) {
    ctx.errors.push_back({src.display, "empty file", false});
    return;
  }
  line_reader r(peek, ctx.opt);
  if (!ctx.visit(src, r)) ctx.stop = true;
  if (!r.error().empty()) ctx.errors.push_back({src.display, r.error()});
  else if (!err.empty()) ctx.errors.push_back({src.display, err});
  if (r.nul_runs() > 0)
    ctx.errors.push_back({src.display,
                          std::to_string(r.nul_runs()) + " run(s) of NUL bytes (" + std::to_string(r.nul_bytes()) +
                              " bytes, as a crashed writer leaves) treated as a gap; the rest was read",
                          false});
  if (r.lines_cut() > 0)
    ctx.errors.push_back({src.display,
                          std::to_string(r.lines_cut()) + " line(s) longer than " +
                              std::to_string(ctx.opt.max_line_bytes >> 10) + " KiB were cut; the rest was read",
                          false});
}

bool is_compressed_name(std::string_view name) {
  std::string n = lower(name);
  for (auto suf : {".gz", ".zst", ".xz", ".bz2"})
    if (ends_with(n, suf)) return true;
  return false;
}

// The bound's message (added by read_stream from the reader's error) marks its input as cut short.
void mark_cut_short(reader_ctx& ctx, std::size_t from, bool cut) {
  for (std::size_t i = from; i < ctx.errors.size(); ++i)
    if (cut || ctx.errors[i].reason.find("cut short") != std::string::npos) ctx.errors[i].cut_short = ctx.errors[i].fatal_for_input;
}

// A compressed member inside a bundle (node.tar!kern.log.gz): a second libarchive reader pulls its
// bytes from the outer member, so nothing is extracted to disk.
void read_nested(reader_ctx& ctx, line_reader::byte_source& outer, const source& src) {
  struct pump {
    line_reader::byte_source* outer;
    char buf[1 << 16];
    std::string err;
  } p{&outer, {}, {}};
  if (auto why = load_archive(); !why.empty()) {
    ctx.errors.push_back({src.display, why});
    return;
  }
  archive* in = la->archive_read_new();
  la->archive_read_support_filter_all(in);
  la->archive_read_support_format_raw(in);
  auto read_cb = [](archive*, void* ud, const void** out) -> la_ssize_t {
    auto* pp = static_cast<pump*>(ud);
    long n = pp->outer->read(pp->buf, sizeof pp->buf, &pp->err);
    *out = pp->buf;
    return n < 0 ? -1 : n;
  };
  if (la->archive_read_open(in, &p, nullptr, read_cb, nullptr) != ARCHIVE_OK) {
    const char* msg = la->archive_error_string(in);
    ctx.errors.push_back({src.display, std::string("cannot decompress: ") + (msg ? msg : "unknown format")});
    la->archive_read_free(in);
    return;
  }
  archive_entry* e = nullptr;
  if (la->archive_read_next_header(in, &e) == ARCHIVE_OK) {
    archive_entry_source es(in, ctx.opt, true);
    std::size_t before = ctx.errors.size();
    read_stream(ctx, es, src);
    mark_cut_short(ctx, before, es.cut_short);
  }
  la->archive_read_free(in);
}

// Opens a file or stdin through libarchive: archives are walked member by member, anything else is
// read as one raw (possibly compressed) stream.
void read_with_libarchive(reader_ctx& ctx, const std::string& path, bool is_stdin, std::uint64_t size) {
  if (auto why = load_archive(); !why.empty()) {
    ctx.errors.push_back({is_stdin ? "<stdin>" : path, why});
    return;
  }
  archive* a = la->archive_read_new();
  la->archive_read_support_filter_all(a);
  bool bundle = !is_stdin && is_archive_name(path);
  if (bundle || is_stdin) {
    la->archive_read_support_format_tar(a);
    la->archive_read_support_format_zip(a);
  }
  la->archive_read_support_format_raw(a);
  int rc = is_stdin ? la->archive_read_open_fd(a, 0, 1 << 16) : la->archive_read_open_filename(a, path.c_str(), 1 << 16);
  if (rc != ARCHIVE_OK) {
    const char* msg = la->archive_error_string(a);
    std::string m = msg ? msg : "cannot open";
    // libarchive cannot tell an empty decompressed stream from an unknown format
    if (m.find("Unrecognized archive format") != std::string::npos && is_compressed_name(path))
      ctx.errors.push_back({path, "empty file", false});
    else
      ctx.errors.push_back({path, m});
    la->archive_read_free(a);
    return;
  }
  archive_entry* entry = nullptr;
  bool any = false;
  for (;;) {
    rc = la->archive_read_next_header(a, &entry);
    if (rc == ARCHIVE_EOF) break;
    if (rc < ARCHIVE_WARN) {
      const char* msg = la->archive_error_string(a);
      ctx.errors.push_back({path, std::string("corrupt archive: ") + (msg ? msg : "bad header")});
      break;
    }
    bool raw = la->archive_format(a) == ARCHIVE_FORMAT_RAW;
    source src;
    if (raw) {
      src.display = is_stdin ? "<stdin>" : path;
      src.hint = hints_from_path(path, ctx.below(path));
    } else {
      const char* name = la->archive_entry_pathname(entry);
      std::string member = name ? name : "?";
      if (la->archive_entry_filetype(entry) != AE_IFREG) continue;  // links, dirs, devices: never followed
      if (!looks_like_log_name(member)) continue;
      src.display = path + "!" + member;
      src.hint = hints_from_path(member);
    }
    any = true;
    archive_entry_source es(a, ctx.opt, raw);
    std::size_t before = ctx.errors.size();
    if (!raw && is_compressed_name(src.display)) read_nested(ctx, es, src);
    else read_stream(ctx, es, src);
    mark_cut_short(ctx, before, es.cut_short);
    if (ctx.stop || raw) break;
  }
  if (!any && rc == ARCHIVE_EOF && !is_stdin && size == 0) ctx.errors.push_back({path, "empty file", false});
  la->archive_read_free(a);
}

// A plain (uncompressed, not archived) file, read with read(2) straight into the line reader's buffer:
// libarchive's raw format copied every block once more and sat in the way of the scan (and linking it
// loads 11 libraries, ~5 ms of every start, for an input that is plain text nearly always).
class plain_file_source final : public line_reader::byte_source {
 public:
  plain_file_source(int fd, const options& opt) : fd_(fd), opt_(opt) {}
  long read(char* buf, std::size_t n, std::string* err) override {
    for (;;) {
      ssize_t got = ::read(fd_, buf, n);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        *err = std::string("read error: ") + std::strerror(errno);
        return -1;
      }
      total_ += static_cast<std::uint64_t>(got);
      if (total_ > opt_.max_stream_bytes) {
        *err = "stopped after " + std::to_string(opt_.max_stream_bytes >> 20) + " MiB of data (limit); the input was cut short";
        cut_short = true;
        return -1;
      }
      return static_cast<long>(got);
    }
  }
  bool cut_short = false;

 private:
  int fd_;
  const options& opt_;
  std::uint64_t total_ = 0;
};

// Whether a file that starts with `head` may be something libarchive's filters decode (so it must go
// through libarchive, as before): the first two bytes of any of their signatures. gzip 1f 8b, compress
// 1f 9d, bzip2 "BZh", xz fd 37 7a 58 5a, lzma 5d 00 (the usual properties byte, then the dictionary size),
// zstd 28 b5 2f fd, lz4 04 22 4d 18 (legacy 02 21 4c 18), lzip "LZIP", lzop 89 4c 5a 4f, uuencode "begin",
// rpm ed ab ee db, grzip "GRZipII", lrzip "LRZI" (libarchive's archive_read_support_filter_*.c bidders).
// A plain log starting with one of these pairs just takes the libarchive path.
bool may_be_filtered(std::string_view head) {
  if (head.size() < 2) return true;
  using namespace std::string_view_literals;  // ""sv keeps the NUL in "\x5d\x00"
  static constexpr std::string_view kPairs[] = {"\x1f\x8b"sv, "\x1f\x9d"sv, "BZ"sv, "\xfd\x37"sv, "\x5d\x00"sv, "\x28\xb5"sv, "\x04\x22"sv,
                                                "\x02\x21"sv, "LZ"sv, "\x89\x4c"sv, "be"sv, "\xed\xab"sv, "GR"sv, "LR"sv};
  for (auto p : kPairs)
    if (head.substr(0, 2) == p) return true;
  return false;
}

// A regular file that is neither a bundle by name nor compressed by its first bytes is read directly;
// anything else through libarchive. false: not read here (the caller uses libarchive).
bool read_plain_file(reader_ctx& ctx, const std::string& path) {
  if (is_archive_name(path) || is_compressed_name(path)) return false;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // libarchive reports it in its words
  char head[2];
  ssize_t n = ::pread(fd, head, sizeof head, 0);
  if (n < 0 || may_be_filtered(std::string_view(head, static_cast<std::size_t>(n)))) {
    ::close(fd);
    return false;
  }
  source src;
  src.display = path;
  src.hint = hints_from_path(path, ctx.below(path));
  plain_file_source fs_src(fd, ctx.opt);
  std::size_t before = ctx.errors.size();
  read_stream(ctx, fs_src, src);
  mark_cut_short(ctx, before, fs_src.cut_short);
  ::close(fd);
  return true;
}

void read_path(reader_ctx& ctx, const fs::path& p, bool explicit_arg);


void read_dir(reader_ctx& ctx, const fs::path& dir) {
  std::vector<fs::path> entries;
  std::error_code ec;
  fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  if (ec) {
    ctx.errors.push_back({dir.string(), ec.message()});
    return;
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    entries.push_back(it->path());
  }
  std::sort(entries.begin(), entries.end());
  for (auto& e : entries) {
    if (ctx.stop) return;
    std::error_code sec;
    auto st = fs::symlink_status(e, sec);
    if (fs::is_symlink(st)) continue;  // symlinks inside a tree are not followed (loops, escapes)
    if (fs::is_directory(st)) {
      read_dir(ctx, e);
    } else if (fs::is_regular_file(st)) {
      if (looks_like_log_name(e.filename().string())) read_path(ctx, e, false);
    }
  }
}

void read_path(reader_ctx& ctx, const fs::path& p, bool explicit_arg) {
  std::string ps = p.string();
  if (ps == "-") {
    read_with_libarchive(ctx, ps, true, 0);
    return;
  }
  std::error_code ec;
  auto st = fs::status(p, ec);
  if (ec) {
    ctx.errors.push_back({ps, ec == std::errc::no_such_file_or_directory ? "no such file or directory" : ec.message()});
    return;
  }
  if (fs::is_directory(st)) {
    read_dir(ctx, p);
    return;
  }
  if (!fs::is_regular_file(st)) {
    ctx.errors.push_back({ps, "not a regular file (FIFO, socket or device); skipped"});
    return;
  }
  if (::access(ps.c_str(), R_OK) != 0) {
    ctx.errors.push_back({ps, std::strerror(errno)});
    return;
  }
  (void)explicit_arg;
  auto size = fs::file_size(p, ec);
  if (!ec && size == 0) {
    ctx.errors.push_back({ps, "empty file", false});
    return;
  }
  if (!read_plain_file(ctx, ps)) read_with_libarchive(ctx, ps, false, ec ? 0 : size);
}

}  // namespace

bool looks_like_log_name(std::string_view name_in) {
  std::string name = lower(name_in);
  auto slash = name.rfind('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  if (name.empty() || name[0] == '.') return false;
  for (auto suf : {".gz", ".zst", ".xz", ".bz2"})
    if (ends_with(name, suf)) name = name.substr(0, name.size() - std::string_view(suf).size());
  if (is_archive_name(name)) return true;
  auto dot = name.rfind('.');
  if (dot == std::string::npos) return true;
  std::string ext = name.substr(dot + 1);
  static const char* ok[] = {"log", "txt", "out", "err", "json", "jsonl", "stdout", "stderr", "dmesg", "syslog",
                             "messages", "trace", "md"};
  for (auto e : ok)
    if (ext == e) return true;
  // rotated logs: foo.log.1, kern.log.2
  if (std::all_of(ext.begin(), ext.end(), ::isdigit)) return looks_like_log_name(name.substr(0, dot));
  return false;
}

namespace {
// The regex of the row `name` of kb/_tables/path_hints.tsv (a regexp that matches nothing when it has none).
std::string path_hint(std::string_view name) {
  std::string re = kb::detail::cell_where(kb::detail::embedded_table("path_hints"), "name", name, "regex");
  return re.empty() ? R"([^\s\S])" : re;
}
}  // namespace

source_hint hints_from_path(std::string_view path, std::string_view below) {
  source_hint h;
  // torchrun's attempt_N/<local_rank>/ files; rank3.log, rank_3/, Open MPI's rank.3/ (kb/_tables/path_hints.tsv)
  static const re2::RE2 torchrun(path_hint("torchrun_log"));
  static const re2::RE2 errjson(path_hint("torchrun_error_json"));
  static const re2::RE2 rank(path_hint("rank"));
  // the host words are data: kb/_tables/host_words.tsv, column path
  static const re2::RE2 host(R"((?i)(?:^|/)((?:[a-z0-9]+-)*(?:)" + kb::detail::words_where(kb::detail::embedded_table("host_words"), "path") +
                             R"()[-_]?[a-z0-9]+)(?:\.[a-z]+)*$)");
  re2::StringPiece sp(path.data(), path.size());
  int a = 0, lr = 0;
  if (re2::RE2::PartialMatch(sp, torchrun, &a, &lr)) {
    h.attempt = a;
    h.local_rank = lr;
  } else if (re2::RE2::PartialMatch(sp, errjson, &a, &lr)) {
    h.attempt = a;
    h.local_rank = lr;
    h.error_json = true;
  }
  int r = 0;
  re2::StringPiece scope = below.empty() ? sp : re2::StringPiece(below.data(), below.size());
  if (re2::RE2::PartialMatch(scope, rank, &r)) h.rank = r;
  std::string hs;
  if (!h.rank && re2::RE2::PartialMatch(sp, host, &hs)) h.host = hs;
  return h;
}

std::vector<input_error> read_inputs(const std::vector<std::string>& paths, const options& opt,
                                     const visit_fn& visit) {
  std::vector<input_error> errors;
  const std::string& root = opt.display_root;
  auto strip = [&root](std::string& s) {
    if (!root.empty() && s.compare(0, root.size(), root) == 0) s.erase(0, root.size());
  };
  visit_fn rooted = [&](const source& src, line_reader& r) {
    source shown = src;
    strip(shown.display);
    return visit(shown, r);
  };
  reader_ctx ctx{opt, root.empty() ? visit : rooted, errors};
  for (const auto& p : paths) {
    if (ctx.stop) break;
    ctx.root = p;
    read_path(ctx, fs::path(p), true);
  }
  for (const auto& d : opt.journal_dirs) {
    if (ctx.stop) break;
    std::string err;
    source src{d + " (journal)", source_hint{}};
    auto js = detail::open_journal(d, &err);
    if (!js) {
      errors.push_back({src.display, err});
      continue;
    }
    read_stream(ctx, *js, src);
  }
  for (auto& e : errors) strip(e.path);
  return errors;
}

}  // namespace ff::ingest
