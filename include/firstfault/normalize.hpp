// firstfault/normalize.hpp: peel stacked prefixes off a physical line and attribute it.
//
// Stage 2. A physical line can carry several prefixes before the message, e.g.
//   2025-11-24T03:20:21.001Z [default3]:[rank3]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog ...
// The prefixes are data (kb/_prefixes/*.yaml): each is an RE2 pattern anchored at the start of the rest
// of the line, with named groups rank, local_rank, host, task, ts, level, pid. They are peeled from the
// left repeatedly (at most kMaxLayers times); the first prefix in catalogue order wins at each layer.
// Every prefix carries sample lines with expected fields; load() fails when a sample does not give them
// (lnav's "sample does not match any patterns"). Prefixes marked `midline: true` (c10 headers, rank
// tags) are also looked for after a '[' in the middle of a line when nothing peels at its start: a
// progress bar glued onto an error hides the header otherwise.
//
//   auto cat = ff::normalize::prefix_catalog::load(files);           // files: (name, yaml text)
//   ff::normalize::line_meta m;
//   cat.value().normalize("[default3]:[rank3]: Traceback (most recent call last):", m);
//   // m.local_rank == 3, m.rank == 3, m.body == "Traceback (most recent call last):"
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "firstfault/result.hpp"

namespace ff::normalize {

/// A point in time. Clocks differ: wall-clock stamps can be compared across ranks; kernel uptime
/// stamps (dmesg "[ 1234.5]") only within one node's kernel log.
struct timestamp {
  enum class clock { wall, uptime };
  double seconds = 0;  ///< wall: seconds since the Unix epoch (UTC assumed); uptime: seconds since boot
  clock kind = clock::wall;
  bool has_date = true;  ///< false when the year was not in the line (c10/glog/syslog headers)
};

/// Parses `text` in the named format (iso, c10, glog, syslog, ctime, uptime, elastic, epoch).
/// Formats without a year take `default_year`. Returns nullopt when the text does not parse.
std::optional<timestamp> parse_timestamp(std::string_view format, std::string_view text, int default_year);

/// What normalisation learnt about one line. Views point into the line passed to normalize().
struct line_meta {
  std::optional<int> rank, local_rank, task;
  std::optional<std::string> host;
  std::optional<timestamp> ts;
  char level = 0;             ///< 'I','W','E','F' when a header gave one, else 0
  std::string_view body;      ///< the message after all peeled prefixes
  std::array<std::uint16_t, 8> prefixes{};  ///< catalogue indices (prefix_catalog::defs()) of the prefixes peeled, outermost first
  std::uint8_t n_prefixes = 0;              ///< how many of `prefixes` are set (at most prefix_catalog::kMaxLayers)
  /// The line's shape as normalize_fast() memoised it (the line with its digits zeroed, words such as "c10d"
  /// kept): unique in the process, 0 when the line took no memo. Two lines with one shape id differ only in
  /// the values of their digits, so a caller may keep anything digit-blind it computes from a line per id.
  std::uint64_t shape_id = 0;
};

namespace detail {
struct layer_fields;  // one prefix match's fields (prefix_catalog.cpp)
/// The layers one peel took: prefix id, first byte in the line, length.
struct layer_trace {
  std::size_t n = 0;
  int id[8] = {};
  std::size_t start[8] = {}, len[8] = {};
  void add(int i, std::size_t s, std::size_t l) {
    if (n < 8) id[n] = i, start[n] = s, len[n] = l, ++n;
  }
};
/// True when no atom of the RE2 regexp `re` tells one ASCII digit from another (every literal is not a
/// digit, every class holds all ten or none; repeat counts and group names may hold digits), except digits
/// in a literal word with a letter ("c10d"), which are appended to `words` (null: such a word makes it
/// false). Conservative: constructs it does not read (\x, \p, POSIX classes, backreferences, a repeated
/// digit) make it false.
bool digit_blind(const std::string& re, std::vector<std::string>* words = nullptr);
/// True when `text` is exactly "YYYY-MM-DD?HH:MM:SS" with an optional '.' or ',' and 1 to 13 fraction
/// digits: the ISO shape parse_timestamp() reads without sscanf, whole, with no UTC offset after it. Which
/// bytes are digits decides it, so a line shape (the shape memo) decides it for all its lines.
bool iso_plain_shape(std::string_view text);
/// parse_timestamp("iso", text) for a text of iso_plain_shape() (anything else: undefined), without the
/// format dispatch: the same result, sharing its per-thread memo of the last minute read.
std::optional<timestamp> parse_iso_plain(std::string_view text);
}

struct prefix_def {
  std::string name, title, regex, ts_format;
  bool midline = false;  ///< may also start in the middle of a line (after a tqdm bar glued on)
};

class prefix_catalog {
 public:
  static constexpr int kMaxLayers = 8;
  /// A prefix entry's sample line and the fields it must yield (`expect`: field -> value); load() checks them.
  struct prefix_sample {
    std::string prefix, file, line;
    std::map<std::string, std::string> expect;
  };
  /// files: (file name, YAML text). Errors name the file and the prefix.
  static result<prefix_catalog> load(const std::vector<std::pair<std::string, std::string>>& files);
  /// Peels prefixes off `line` and fills `out`. Returns true when at least one prefix was peeled.
  bool normalize(std::string_view line, line_meta& out) const;
  const std::vector<prefix_def>& defs() const { return defs_; }
  void set_default_year(int y) { default_year_ = y; }
  /// No memo of prefix captures from now on: every layer's captures come from RE2 (tests compare the two).
  void disable_shortcuts();
  /// normalize(), through a hand lexer for the commonest layers where it can: torchrun's "[rankN]:" /
  /// "[defaultN]:" tags, NCCL's "host:pid:tid [dev] " header, and the decision that a body starts with no
  /// prefix at all (which costs normalize() one RE2::Set search per line, and its mid-line search). Every
  /// lexer answer is checked against the catalogue the first time its key is seen (tag bytes; host; the
  /// body's first word and the byte after it) and used only if they agree; anything else falls back to
  /// normalize(). The lexer's rules were derived from the built-in catalogue, so it is on only for that
  /// catalogue (lexer_enabled(); a --kb prefix file turns it off). Same result as normalize()
  /// (normalize_fast test over generated lines and every corpus line). A line of at most 255 bytes whose
  /// shape (its bytes with every digit written '0') was peeled before takes that peel's layers and group
  /// spans, and its own values at those spans: exact when every prefix regexp is detail::digit_blind.
  bool normalize_fast(std::string_view line, line_meta& out) const;
  bool lexer_enabled() const;
  /// The fingerprint of the catalogue's prefixes (names and regexps) the lexer was written for.
  std::uint64_t fingerprint() const;

  prefix_catalog();
  ~prefix_catalog();
  prefix_catalog(prefix_catalog&&) noexcept;
  prefix_catalog& operator=(prefix_catalog&&) noexcept;

 private:
  struct impl;
  bool take(int id, std::string_view rest, detail::layer_fields& fresh, const detail::layer_fields*& f, std::size_t& len) const;
  bool normalize_impl(std::string_view line, line_meta& out, detail::layer_trace* tr) const;
  bool normalize_fast_impl(std::string_view line, line_meta& out, detail::layer_trace* tr) const;
  static void order_by_samples(prefix_catalog& cat, const std::vector<prefix_sample>& samples);
  /// The entries and samples of the prefix files, in file order (YAML; errors name the file and prefix).
  static status parse_files(const std::vector<std::pair<std::string, std::string>>& files, std::vector<prefix_def>& defs,
                            std::vector<prefix_sample>& samples);
  std::vector<prefix_def> defs_;
  std::unique_ptr<impl> impl_;
  int default_year_ = 2026;
};

/// Learns line prefixes that no catalogue entry describes, per stream (one file or console).
///
/// A token at the start of many lines that has the same shape once its digits are ignored
/// (`[host1:0]`, `12: `, `node3 | `, `[7]<stdout> `) is a prefix some tool added: a `--tag-output`
/// or `--tee` style wrapper, a pdsh/clush host label, a pasted console's line numbers. It is peeled
/// so that signatures anchored at the message start still see the message. Its number is taken as
/// the rank only when it is consistent: it varies across lines, it is the only number that varies
/// in the token, it stays below 65536 and starts near 0 (not pids or ports), and no catalogue prefix attributed the line. A token holding an error or level word ("Error:",
/// "WARNING:") is never learnt.
///
///   prefix_learner pl;
///   for (auto l : first_lines) pl.observe(l);      // diagnose: the first lines; watch: every line
///   line_meta m; std::string_view rest;
///   if (pl.peel(line, m, rest)) ...                // rest: the line without the learnt token
class prefix_learner {
 public:
  static constexpr int kMinLines = 3;         ///< a shape must start at least this many lines
  static constexpr double kMinShare = 0.2;    ///< and this share of the lines observed
  void observe(std::string_view line);
  /// When `line` starts with a learnt token: sets out.rank (when consistent), `rest` to the remainder
  /// and returns true.
  bool peel(std::string_view line, line_meta& out, std::string_view& rest) const;
  /// observe(line), then peel(line, out, rest), reading the line's token once.
  bool observe_and_peel(std::string_view line, line_meta& out, std::string_view& rest);
  /// The same with the line's token known: its length and shape as leading_token(line) gives them.
  bool observe_and_peel(std::string_view line, std::size_t token_len, const std::string& shape, line_meta& out,
                        std::string_view& rest);
  std::size_t observed() const { return lines_; }
  /// Whether observe_and_peel() of a line whose token has this length and shape would peel it: once counted,
  /// would the shape pass kMinLines and kMinShare. Nothing is counted.
  bool would_peel(std::size_t token_len, const std::string& shape) const;
  /// kMinLines and kMinShare: a shape that starts `shape_lines` of `all_lines` observed lines is learnt.
  static bool frequent(std::size_t shape_lines, std::size_t all_lines);
  static constexpr std::size_t kTokenWindow = 96;  ///< bytes of a line its leading token is looked for in

 private:
  void count(std::string_view t, const std::string& shape);
  bool peel_token(std::string_view line, std::string_view t, const std::string& shape, line_meta& out, std::string_view& rest) const;
  struct shape_stats {
    std::size_t lines = 0;
    int numbers = 0;              ///< digit runs in the token
    std::vector<std::set<long>> values;  ///< distinct values per digit run (capped)
  };
  shape_stats* count_stats(std::string_view t, const std::string& shape);  ///< count(); the shape's entry or nullptr
  bool peel_stats(std::string_view line, std::string_view t, const shape_stats& st, line_meta& out, std::string_view& rest) const;
  std::map<std::string, shape_stats> shapes_;
  std::size_t lines_ = 0;
};

/// The learnable token at the start of `line` and its shape (digit runs as '#'); empty when none.
/// Exposed for tests.
std::pair<std::string_view, std::string> leading_token(std::string_view line);
namespace detail {
/// Bytes of the token's raw extent (before the message-word and digit checks), by a hand scan on ASCII
/// text or by the regexp (`by_regex`, or when the first 96 bytes hold a non-ASCII byte). Tests compare.
std::size_t leading_token_extent(std::string_view line, bool by_regex);
}  // namespace detail

}  // namespace ff::normalize
