// firstfault/ingest.hpp: turn the paths a user gives into streams of raw lines.
//
// Stage 1 of the pipeline (ingest -> normalize -> extract -> match -> correlate -> report).
// Reads files, directories (recursive, sorted, non-log files skipped), stdin ("-"), .gz/.zst/.xz/.bz2
// files and .tar/.tar.gz/.tgz/.zip bundles, all through libarchive and read in place (never extracted).
// Memory is bounded: a stream is pulled through a fixed buffer; a line longer than
// options::max_line_bytes is cut there (the rest of it is skipped and counted).
//
//   ff::ingest::options opt;
//   auto errors = ff::ingest::read_inputs({"logs/"}, opt, [](const ff::ingest::source& s, ff::ingest::line_reader& r) {
//     ff::ingest::raw_line line;
//     while (r.next(line)) use(s.display, line.line_no, line.text);
//     return true;   // false stops reading further inputs
//   });
//   for (auto& e : errors) std::fprintf(stderr, "%s: %s\n", e.path.c_str(), e.reason.c_str());
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace ff::ingest {

/// What the path of a stream says about who wrote it. Nothing here is guessed: each field is set only
/// when the path has the matching shape (see hints_from_path()).
struct source_hint {
  std::optional<int> rank;        ///< from names like rank3.log, rank-3, rank_3
  std::optional<int> local_rank;  ///< from torchrun --log-dir trees: .../attempt_N/<local_rank>/stdout.log
  std::optional<std::string> host;  ///< from names like node-b.log, job-worker-2.log
  std::optional<int> attempt;     ///< torchrun restart attempt (attempt_N)
  bool error_json = false;        ///< a torchelastic error.json (its call stack is read as lines)
  std::optional<double> epoch_seconds;  ///< error.json "timestamp": when the worker failed (s)
};

/// One readable stream: a file, an archive member, or stdin.
struct source {
  std::string display;  ///< path as given, or "bundle.tar.gz!member/path" for archive members
  source_hint hint;
};

/// A problem with one input. The rest of the input is still read.
struct input_error {
  std::string path;
  std::string reason;
  bool fatal_for_input = true;  ///< false for warnings such as "empty file"
  bool cut_short = false;       ///< the input was stopped early (a bound): its run is never "healthy"
};

struct options {
  std::size_t max_line_bytes = 1 << 20;            ///< longer lines are cut here (bytes)
  std::uint64_t max_stream_bytes = 16ull << 30;    ///< decompressed bytes read from one input at most
  // Decompression bounds, checked at every nesting level (a .gz inside a tar too) against the compressed
  // bytes consumed so far: real logs compress 5-50x and hold one line per 20-200 bytes.
  std::uint64_t bomb_ratio = 1000;                 ///< decompressed/compressed ratio that counts as a bomb...
  std::uint64_t bomb_min_bytes = 16ull << 20;      ///< ...once this many bytes have come out
  std::uint64_t bomb_line_ratio = 16;              ///< lines per compressed byte that count as a bomb...
  std::uint64_t bomb_min_lines = 1ull << 20;       ///< ...once this many lines have come out
  /// A directory prefix left out of every display name and error path ("/tmp/ff-upload-1/" + "rank3.log"
  /// shows as "rank3.log"): `serve` diagnoses uploads from a private temporary directory. Empty: none.
  std::string display_root;
  /// Directories of systemd journal files (a node's /var/log/journal, or what systemd-journal-remote wrote),
  /// read after `paths` through sd-journal, one input per directory: node faults (Xid, OOM killer, link
  /// flaps) join the diagnosis without exporting text first. Shown as "DIR (journal)".
  std::vector<std::string> journal_dirs;
};

struct raw_line {
  std::string_view text;      ///< valid until the next call to next(); no line terminator
  std::uint64_t line_no = 0;  ///< 1-based physical line number ('\r' also ends a line)
  bool truncated = false;     ///< the line was longer than max_line_bytes
  bool plain = false;         ///< known to be printable ASCII and tabs only (text::is_plain); false: not known
};

/// Pulls lines from one stream. '\n', '\r' and "\r\n" all end a line (tqdm bars glue text with '\r').
/// The records of a line that a container runtime split (CRI format: "TIME stdout P msg" ... "TIME stdout F
/// msg") come out as one line, with the first record's header and line number.
///
/// The one line source: `diagnose`, `scan`, `serve` and `lsp` read files, stdin, archives and journals
/// through it (read_inputs), and `watch` reads followed files through it (follow()), so the same bytes
/// give the same lines whichever command reads them.
class line_reader {
 public:
  class byte_source {
   public:
    virtual ~byte_source() = default;
    /// Fills buf; returns bytes read, 0 at end, -1 on error (message in *err).
    virtual long read(char* buf, std::size_t n, std::string* err) = 0;
  };
  line_reader(byte_source& src, const options& opt);
  /// false at end of stream or on error. A JSON log record (one object per line with a message: Python's
  /// JSON formatters, structlog, Kubernetes' JSON logs) comes out as text lines: "TIME LEVEL [rankN] message",
  /// then its exception's traceback line by line, all with the record's line number (json_record_lines).
  bool next(raw_line& out);
  /// A followed file (`watch`): the source's 0 means "nothing more yet", not the end. next() then returns
  /// false with the part of a line read so far, and a CRI record being joined, kept until the bytes that
  /// complete them arrive (another next() call).
  void follow(bool on) { follow_ = on; }
  /// A followed file ended (rotated away): the source's next 0 is its end, and what waits is returned
  /// as its last line. resume() follows again (a new file under the same name); line numbers go on.
  void end_of_input() { finished_ = true; }
  void resume() { finished_ = eof_ = false; }
  /// A followed file was cut in place (copytruncate): the part of a line waiting is dropped.
  void drop_partial();
  const std::string& error() const { return error_; }
  std::uint64_t bytes_read() const { return bytes_; }
  std::uint64_t lines_cut() const { return cut_; }
  /// Runs of NUL bytes removed from lines (a crashed node leaves a block of them in its log), and their bytes.
  std::uint64_t nul_runs() const { return nul_runs_; }
  std::uint64_t nul_bytes() const { return nul_bytes_; }

 private:
  bool fill();
  bool physical(raw_line& out);  ///< one line as the bytes have it (next() joins CRI partial records)
  byte_source& src_;
  const options& opt_;
  std::vector<char> buf_;
  std::size_t begin_ = 0, end_ = 0;
  std::string line_, join_, held_;
  std::string json_line_;                 ///< the current line decoded from a JSON log record
  std::deque<std::string> json_pending_;  ///< the record's further lines (its traceback), returned next
  std::uint64_t json_line_no_ = 0;
  std::uint64_t held_line_no_ = 0;
  bool has_held_ = false, held_truncated_ = false;
  std::uint64_t line_no_ = 0, bytes_ = 0, cut_ = 0, nul_runs_ = 0, nul_bytes_ = 0;
  bool eof_ = false, skip_lf_ = false;
  bool follow_ = false, finished_ = false;  // follow(), end_of_input()
  bool partial_ = false, partial_cut_ = false;  // follow(): line_ holds the start of a line (and it was cut)
  bool joining_ = false, join_truncated_ = false, join_cut_ = false;  // a CRI partial record being joined
  char join_stream_ = 0;
  std::uint64_t join_first_ = 0;
  std::string error_;
};

/// A record of the CRI container log format (containerd, CRI-O on Kubernetes nodes, /var/log/pods):
/// "RFC3339NANO stdout|stderr P|F message" (https://github.com/kubernetes/design-proposals-archive/blob/main/node/kubelet-cri-logging.md).
/// Returns the offset of the message (0 when `line` is not such a record) and sets `stream` ('o' for
/// stdout, 'e' for stderr) and `tag` ('P': partial, continued by the next record of the stream; 'F': full).
std::size_t cri_record(std::string_view line, char* stream, char* tag);

/// A JSON log record as the text lines a plain formatter would have written: its time, level, rank and
/// message on one line, then its exception text (exc_info, exception, stack_trace, exc_text) split at line
/// ends, each prefixed "[rankN]:" when the record names its rank (as a launcher's prefix would be), at most
/// 4,096 of them. A rank is kept only when it is a number of at most 7 digits. Empty when `line` is not a
/// JSON object with a message (message, msg, event). Fields by the names of
/// python-json-logger, structlog and ECS logging (https://github.com/madzak/python-json-logger,
/// https://www.structlog.org/en/stable/api.html, https://www.elastic.co/guide/en/ecs/current/ecs-log.html).
std::vector<std::string> json_record_lines(std::string_view line);

/// Derives rank/local rank/host hints from a path (torchrun layout, rankN, node/worker names).
/// `below` is the part of the path under the input the user named (a directory argument's subpath, or a
/// file argument's own name): only there can a "rank3" name a rank, so a job directory called
/// "test-rank1/" above the logs does not make every file rank 1's. Empty: the whole path.
source_hint hints_from_path(std::string_view path, std::string_view below = {});

/// True for names that look like logs (.log .txt .out .err .json, no extension, dmesg/syslog/messages,
/// and compressed or archived forms of these). Used when walking directories and archives.
bool looks_like_log_name(std::string_view name);

/// Called once per readable stream; return false to stop.
using visit_fn = std::function<bool(const source&, line_reader&)>;

/// Reads every input in order. Returns every problem found (unreadable, binary, empty, truncated,
/// decompression bomb, skipped special files), each naming the path and the reason.
std::vector<input_error> read_inputs(const std::vector<std::string>& paths, const options& opt,
                                     const visit_fn& visit);

}  // namespace ff::ingest
