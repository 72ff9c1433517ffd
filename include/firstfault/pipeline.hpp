// firstfault/pipeline.hpp: the whole diagnosis in one call (ingest -> ... -> correlate).
//
//   auto lib = ff::kb::library::load(true, {});
//   ff::pipeline::options opt;
//   auto run = ff::pipeline::diagnose({"logs/"}, lib.value(), opt);
//   if (!run) ...;                       // only when the knowledge base fails to compile
//   render(run.value().diag);            // run.value().errors lists unreadable inputs
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "firstfault/action.hpp"
#include "firstfault/correlate.hpp"
#include "firstfault/extract.hpp"
#include "firstfault/gate.hpp"
#include "firstfault/ingest.hpp"
#include "firstfault/kb.hpp"
#include "firstfault/mask.hpp"
#include "firstfault/match.hpp"
#include "firstfault/normalize.hpp"
#include "firstfault/result.hpp"
#include "firstfault/sink.hpp"
#include "firstfault/timeline_model.hpp"

namespace ff::line {
struct shape_facts;  // line_stage.hpp
}

namespace ff::pipeline {

class collector;
struct run;

struct options {
  ingest::options ingest;
  mask::options mask;                ///< masking at ingest (on by default)
  std::size_t max_suspicious = 200;  ///< unmatched error-looking lines collected
  std::size_t max_suspicious_shown = 40;  ///< of those, shown in the report
  /// Every line through the full path (sanitise, mask, peel, extract, match). Off: lines the scan gate
  /// does not hit take the light path (gate.hpp); the report is the same except for the masking
  /// numbering and counts, which cover only the lines read in full (docs/ARCHITECTURE.md, "Scan first").
  bool exact = false;
  /// Lines of each input read as a first batch (full path) so unknown prefixes are learnt before any
  /// line is matched. Tests set 0 so that the gated path is exercised from the first line.
  std::size_t learn_lines = 256;
  /// Keep the token -> real name mapping of the hosts seen (run::revealed), for `diagnose --reveal`: shown
  /// on this terminal only, never stored, rendered into a report or sent.
  bool reveal = false;
  // (The run's events, progress, each input opened, the end and a request to stop, go to a sink: sink.hpp.
  // The two questions below stay here: they are configuration the run asks, conclude() included.)
  /// The history's salted key of a real host name (history::host_key). Called with the first failing host's
  /// real name, which goes nowhere else: the run and every renderer see only masked names and this key.
  std::function<std::string(const std::string& real_host)> host_keyer;
  /// How many earlier failures of `kind` the history holds for the host with this key in the last `days`
  /// days (history::store::recurrences). finish() asks it for a failure whose first failing host has a key,
  /// so `diagnose` and `watch` fill run::recurrences the same way. Empty, or nullopt: no recurrence note.
  std::function<std::optional<std::int64_t>(const std::string& host_key, const std::string& kind, int days)> recurrences;
  /// Threads for `diagnose`: 1 reads and matches on the calling thread; 2 (the default, 0, on a machine
  /// with two cores or more) reads, cuts blocks and scans them with the gate on the calling thread while a
  /// second thread runs everything else in input order. The report is the same byte for byte (the gate's
  /// verdicts are a function of the bytes; every stateful step stays on one thread, in the same order).
  unsigned threads = 0;
  /// The host of every input whose path names none (`scan --host`: the node a plain srun console was read
  /// on). Masked like any host. Empty: none.
  std::string default_host;
};

struct input_stats {
  std::string path;
  std::uint64_t lines = 0, bytes = 0;
};

struct run {
  correlate::diagnosis diag;
  std::vector<ingest::input_error> errors;
  std::vector<input_stats> inputs;
  std::uint64_t total_lines = 0, total_bytes = 0;
  bool any_readable = false;
  bool masked = true;                             ///< masking was on
  bool redacted = false;                          ///< identity masking too (--redact): hosts, addresses, users
  std::map<std::string, std::size_t> mask_counts; ///< replacements per kind (never the values)
  std::string initiating_host_key;                ///< options::host_keyer's key of the first failing host ("" without one)
  std::vector<std::pair<std::string, std::string>> revealed;  ///< (token, real host name) with options::reveal only; never rendered
  std::optional<std::int64_t> recurrences;        ///< same kind on the same host in the last `recurrence_days`
  int recurrence_days = 7;
  timeline::model timeline;                        ///< the per-rank picture (timeline.hpp), masked like the rest
  /// What to do next (action.hpp): decided by finish()/conclude() from the diagnosis and `recurrences`.
  action::action action;
};

/// The compiled form of a library: the prefix catalogue and the matcher. Build once, diagnose many.
struct engine {
  const kb::library* lib = nullptr;
  normalize::prefix_catalog prefixes;
  match::matcher matcher;
  match::gate gate;       ///< the scan-first gate over raw lines
  /// The same gate without the fingerprints of the run-fact signatures (match::gate::run_fact_only: a
  /// tqdm bar or Megatron iteration line with its step time, a checkpoint written): a line
  /// `gate` hits and this one does not can match only those, so add_block() takes it the light way and
  /// keeps it as a fact candidate (collector::flush_facts). Not enabled when the library has none.
  match::gate fact_free_gate;
  static result<engine> build(const kb::library& lib);
  /// The stages' own patterns the gate holds beside the fingerprints' literals (extract::gate_patterns(),
  /// mask::gate_patterns()).
  static std::vector<std::string> gate_extras();
};

/// Complete lines read from one stream, kept together so the scan gate runs once per block (up to
/// kBytes of text, or kLines lines) instead of once per line.
struct line_block {
  static constexpr std::size_t kBytes = 256u << 10;
  static constexpr std::size_t kLines = 4096;
  std::string text;                     ///< the lines, each followed by '\n'
  std::vector<std::uint32_t> starts;    ///< each line's first byte in `text`
  std::vector<std::uint64_t> line_nos;  ///< each line's number in its input
  /// With scan_gate(): each line's verdict of the engine's gate (gate::hit_lines); `gated` false: not
  /// scanned yet (add_block() scans). (A gated-out line whose peel found no host is checked for a prefix
  /// host form by mask::prefix_host_form(), line by line: no second scan of the block.)
  std::vector<char> gate_hit;
  bool gated = false;
  std::vector<char> known_plain;  ///< per line: the reader found it printable ASCII (no need to look again)
  void add(std::string_view line, std::uint64_t line_no, bool plain = false);
  /// Runs the gate over the block (either thread: the verdicts are a function of the bytes). Sets
  /// `gated` only when the scan succeeds; else returns the engine's error (the reader ignores it and
  /// leaves the scan to add_block(), which reports it).
  status scan_gate(const engine& eng, match::gate_scratch& gate_scratch);
  std::string_view line(std::size_t i) const;  ///< line i, without its '\n'
  std::size_t size() const { return starts.size(); }
  bool empty() const { return starts.empty(); }
  bool full() const { return text.size() >= kBytes || starts.size() >= kLines; }
  void clear();
};

/// The state of the per-line work (line_stage.hpp: mask, peel, extract, match), feeding correlate's inputs:
/// streams, per-rank state, findings. `diagnose` runs it over files; `watch` feeds it lines as they are
/// written, read by the same ingest::line_reader. src/pipeline/collector.cpp keeps the state,
/// line_path.cpp takes each line through the stage's steps.
class collector {
  using shape_facts = line::shape_facts;  // what the light path checks of a line shape (line_stage.hpp)

 public:
  struct stream {  // per-stream state: attribution carries from line to line
    std::string display;
    ingest::source_hint hint;
    struct rank_state {  // one rank key's state in this stream: ranks interleave in a console
      std::optional<correlate::rank_key> key;  ///< none for lines without a rank (the stream-level state)
      std::unique_ptr<extract::extractor> ex;
      std::optional<normalize::timestamp> last_ts;
      correlate::rank_activity* act = nullptr;  ///< the run's activity entry for `key` (std::map node, stable)
      bool* deferred = nullptr;                 ///< its "last_line still unmasked" flag (collector-owned)
      std::string paired_host;                  ///< a host already in host_ranks with this rank
      std::optional<int> paired_local;          ///< a local rank already in local_to_rank with this rank
      bool has_pending = false;  ///< has light lines in stream::pending (flush_light() clears it)
      bool step_found = false;  ///< flush_light(): the newest of its pending lines with a step was read
      bool idle = true;  ///< ex->idle(), kept by feed_extractor(): the light path asks it of most lines
    };
    std::unordered_map<std::int64_t, rank_state> ranks;  ///< by rank_code()
    /// A direct-mapped cache in front of `ranks` (nodes are stable and never erased): a console's lines
    /// come from its ranks in turn. Slots by rank code, at least as many as the stream has ranks (64 to
    /// 4,096, grown by collector::find_rank): a console of 1,024 ranks missed a 64-slot table on nearly
    /// every line, and each miss was a hash lookup into cold nodes (~6% of its time).
    std::vector<std::pair<std::int64_t, rank_state*>> recent_ranks;
    std::optional<normalize::timestamp> stream_ts;
    std::optional<int> prev_rank, prev_local;
    std::uint64_t lines = 0;
    std::string last_body;  ///< the last line's body, masked (watch shows it for silent ranks)
    std::uint64_t last_body_line = 0;  ///< its line number
    std::uint64_t handled_at = 0;      ///< line of the last "…, retrying" notice (a benign signature tagged event.handled)
    std::optional<int> handled_rank, handled_local;  ///< the notice's ranks: a traceback of another rank is not its
    bool handled_traceback = false;    ///< the traceback being read began right after that notice
    /// The finding of the last exception line of this stream, and the chained traceback begun since, if any:
    /// its user frame (and for a worker's "Original Traceback" its exception) are added to that finding
    /// (collector::note_exception_facts).
    std::size_t chain_finding = SIZE_MAX;
    extract::line_note::chain_kind chain = extract::line_note::chain_kind::none;
    /// The first finding (an index into the findings) of the last exception line of this stream that began a
    /// chain, kept even when that line matched nothing: a later "terminate called" marks the findings from
    /// here on as the aborted process's (finding::aborted).
    std::size_t chain_start = SIZE_MAX;
    std::uint32_t source_id = 0;       ///< index of `display` in the inputs' source_names
    std::optional<int> attempt;  ///< torchrun attempt of the lines read now: attempt_N of the path, or counted from restart lines
    bool last_body_raw = false;  ///< last_body came from a light-path line: masked when the stream closes
    /// Hosts prefixes named in this stream, as read and masked (each in the run's host set), direct-mapped:
    /// an interleaved console names its node's host on nearly every line, 8 or more hosts in turn.
    struct host_memo {
      std::string raw, masked;
    };
    std::array<host_memo, 16> hosts_seen;
    std::size_t busy = 0;  ///< extractors of this stream with an open record (their lines take the full path)
    normalize::prefix_learner learner;  ///< prefixes no catalogue entry lists, learnt from this stream
    std::vector<rank_state*> pending_ranks;  ///< rank states with pending light lines (std::unordered_map nodes are stable)
    /// Light lines of the block being read (add_block), views into its text, oldest first, each with its
    /// rank state and whether it is printable ASCII: a rank's last one is its last line, and its newest one
    /// with a step gives its step (flush_light()). One list per stream, not one per rank: per-rank lists
    /// were freed and regrown every block (a 64-rank console: ~27,000 allocations per 140,000 lines).
    struct pending_line {
      rank_state* rank;
      std::string_view body;
      bool ascii;
      std::uint64_t shape = 0;  ///< the line's normalize::line_meta::shape_id when `ascii` (0: none)
      std::uint8_t body_at = 0;  ///< where `body` starts in the line, with `shape`
      std::uint64_t line_no = 0;  ///< for rank_activity::last_step_line_no
      std::optional<normalize::timestamp> ts;  ///< the line's own time (rank_activity::last_step_ts)
    };
    std::vector<pending_line> pending;
    std::string_view pending_body;           ///< last_body as a view into the current block, while one is pending
    bool has_pending_body = false;
  };
  collector(const engine& eng, const options& opt);
  ~collector();
  collector(collector&&) noexcept;
  status check() const;
  stream open_stream(const ingest::source& src);
  /// Processes one raw line; returns how many findings it added.
  std::size_t add_line(stream& st, std::string_view raw_text, std::uint64_t line_no);
  /// Like add_line, but a line the scan gate does not hit takes the light path (per-rank facts only).
  std::size_t add_line_gated(stream& st, std::string_view raw_text, std::uint64_t line_no);
  /// add_line_gated() for each line of a block, with one gate scan for the whole block.
  std::size_t add_block(stream& st, line_block& blk);
  /// Processes a batch of raw lines (text, line number), learning unknown prefixes from all of them
  /// before the first is matched (diagnose reads each input's first lines this way).
  std::size_t add_lines(stream& st, const std::vector<std::pair<std::string, std::uint64_t>>& raw);
  /// Records the end of a stream (its last line) for the correlator.
  void close_stream(stream& st);
  const correlate::inputs& inputs() const;
  const kb::library& library() const;  ///< the library the engine was built from
  bool gated() const;  ///< lines the scan gate does not hit take the light path (not --exact, a gate, no custom mask rules)
  correlate::diagnosis diagnose() const;  ///< correlate over everything so far (does not consume)
  /// The second masking pass over everything kept for the report: host names learnt after a line was
  /// kept (a later SLURM_JOB_NODELIST, MASTER_ADDR, pod/NAME) are replaced there too.
  void remask_learnt();
  /// Masks the per-rank last lines kept from light-path lines (finish() calls it before the second pass).
  void mask_deferred();
  /// One line per table bound that was hit (ranks 16384, findings 8192, host/rank pairs 65536), for the
  /// report's notes; empty when none was.
  std::vector<std::string> bound_notes() const;
  mask::masker& masker();
  bool reveal() const;  ///< options::reveal
  std::string host_key(const std::string& real_host) const;  ///< options::host_keyer, or "" without one
  /// options::recurrences, or nullopt without one.
  std::optional<std::int64_t> recurrences(const std::string& host_key, const std::string& kind, int days) const;

 private:
  std::string prepare(std::string_view raw_text);           // line::mask_line with the collector's masker
  std::size_t process(stream& st, std::string_view clean, std::uint64_t line_no);
  // gate_hit: the gate's verdict when a block scan has it (0 or 1), -1 to scan the line here; plain: 1 when
  // the reader found the line printable ASCII, -1 to look here (text::is_plain, then text::is_clean: 2)
  // sanitized: (add_block) the line's sanitised text when sanitising changes it, gated already (gate_hit is
  // its verdict); fact_free_hit: engine::fact_free_gate's verdict when known (0 or 1), -1 to ask it here
  std::size_t add_line_gated(stream& st, std::string_view raw_text, std::uint64_t line_no, int gate_hit, int plain,
                             const std::string* sanitized = nullptr, int fact_free_hit = -1);
  // add_block(): the second gate scans of a block, one per block (line_path.cpp); false on an engine error
  bool second_scans(const line_block& blk);
  // `masked`: the line masked already, learnt from and fully peeled; `observed`: (without `masked`) the
  // learner has seen the raw line and `meta` is its full peel (add_lines' first batch, a line no gate hits).
  // host_hit: mask::prefix_host_form() of the line when known (0 or 1), -1 to ask it when needed; facts:
  // the line shape's cached answers (add_line_gated), nullptr to compute them here.
  std::size_t add_light(stream& st, std::string_view raw_text, std::uint64_t line_no, normalize::line_meta& meta, int plain,
                        const std::string* masked, int host_hit = -1, bool observed = false, const shape_facts* facts = nullptr);
  // `meta`: the line already peeled (peel()); its body points into the caller's text.
  // `raw`: a light line's text is not masked yet (its kept last line is masked later).
  // `line`: the raw line `meta` was peeled from (a light line's step is then kept per line shape)
  std::size_t process(stream& st, normalize::line_meta& meta, std::uint64_t line_no, bool light, bool ascii = false, bool raw = true,
                      bool may_plan = true, const char* line = nullptr);
  // the learner sees meta.body, then line::peel_learnt; `facts`: the body's token known already (its line shape's)
  void observe_and_peel(stream& st, normalize::line_meta& meta, const shape_facts* facts = nullptr) const;
  /// Whether masking could change the learner's token of `meta`'s body (its shape's, when known): the
  /// learner then reads the line masked, as --exact does.
  bool token_may_mask(const normalize::line_meta& meta, const shape_facts* facts, std::size_t& token_len,
                      const std::string*& token_shape) const;
  void add_suspicious(const stream& st, std::string_view body, char level, bool exception_line, std::optional<int> rank, std::optional<int> local_rank,
                      std::optional<normalize::timestamp> own_ts,
                      std::uint64_t line_no);
  // What process() learns about one line, step by step (attribute, rank_state_for, note_host_and_pairs, ...).
  struct line_facts {
    std::optional<int> rank, local_rank;
    std::int64_t code = 0;                        // the rank state's key in stream::ranks (0: stream-level)
    std::optional<std::string> host;              // masked
    std::optional<normalize::timestamp> ts;       // the line's own, else inherited from its rank or stream
    bool ts_inherited = false;
    std::string_view body;                        // trimmed
    std::uint64_t line_no = 0;
    bool may_plan = true;                         // false: extract::may_plan() said no for the line's shape
    std::uint64_t shape = 0;                      // a light line's shape id (0: none), and where its body starts
    std::uint8_t body_at = 0;
    std::optional<long> step_at;                  // the rank's last step once this line was noted (finding::step_at)
    bool handled = false;                         // the exception line of a traceback announced as handled (finding::handled)
  };
  void attribute(stream& st, const normalize::line_meta& meta, line_facts& f) const;
  void attribution_of(const stream& st, const normalize::line_meta& meta, std::optional<int>& rank, std::optional<int>& local_rank,
                      std::optional<int>& own_rank, std::optional<int>& own_local) const;
  bool rank_idle(stream& st, const normalize::line_meta& meta) const;
  bool code_idle(stream& st, std::int64_t code) const;  // rank_idle() for a known rank code
  static stream::rank_state* find_rank(stream& st, std::int64_t code);
  bool prefix_names_other_host(std::string_view line, const normalize::line_meta& meta, const shape_facts* facts) const;
  stream::rank_state& rank_state_for(stream& st, line_facts& f);
  void learn_other_hosts(std::string_view line, const std::string& peeled, const shape_facts* facts);
  void note_host_and_pairs(stream& st, stream::rank_state& rs, normalize::line_meta& meta, line_facts& f);
  void feed_extractor(stream& st, stream::rank_state& rs, std::string_view body, std::uint64_t line_no, extract::line_note& note);
  void note_activity(stream& st, stream::rank_state& rs, const line_facts& f, const std::optional<normalize::timestamp>& own_ts,
                     bool light, bool ascii);
  std::optional<int> match_line(stream& st, const line_facts& f, char level, extract::line_note& note);
  std::optional<int> restart_attempt(const stream& st, const std::vector<match::hit>& hits) const;
  void keep_finding(const stream& st, const line_facts& f, match::hit& h, const extract::line_note& note);
  void note_exception_facts(stream& st, const line_facts& f, const extract::line_note& note, std::size_t before);
  void start_attempt(stream& st, int to);
  // The per-rank facts add_block() left pending for the block's light lines: last lines copied, steps
  // read walking back. Called at the end of each block and before any line of the stream takes the full path.
  void flush_light(stream& st);
  // Run-fact candidates (engine::fact_free_gate): kept by a light line of add_block(), read in full by
  // flush_facts() (the newest only) at the stream's end and before any full-path fact line is kept.
  void keep_fact_candidate(const stream& st, const line_facts& f);
  void flush_facts();
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Reads, collects and correlates `paths`; the run's events go to `events` (sink.hpp). Errors: the knowledge
/// base's engine failed, or errc::cancelled when the sink said stop.
result<run> diagnose(const std::vector<std::string>& paths, const engine& eng, const options& opt, sink& events);
result<run> diagnose(const std::vector<std::string>& paths, const engine& eng, const options& opt);  ///< no sink
/// The terminal width a paste was hard-wrapped at, judged from its first lines (text, line number), or 0
/// when no fixed wrap width is evident. diagnose() rejoins lines cut at that width. With `prefixes`, a log
/// whose W-long lines are followed by lines with the same prefix (fixed-width lines of one format) is
/// not taken for a wrapped paste.
std::size_t wrap_width(const std::vector<std::pair<std::string, std::uint64_t>>& head,
                       const normalize::prefix_catalog* prefixes = nullptr);
/// Fills the run's diagnosis and masking summary from a collector.
void finish(collector& col, run& out);
/// Convenience: builds the engine, then diagnoses.
result<run> diagnose(const std::vector<std::string>& paths, const kb::library& lib, const options& opt, sink& events = no_sink());

/// The correlator's verdict over a collector's inputs, torchrun restart attempts diagnosed one by one (the
/// report's verdict is the last attempt's). collector::diagnose() and conclude() call it. Each attempt is
/// correlated on `in` itself with inputs::only_attempt set (no copy of the inputs per attempt), which is
/// restored before it returns: `in` is as it was given.
correlate::diagnosis diagnose_inputs(correlate::inputs& in, const kb::library& lib);

/// What `firstfault scan` keeps of one node's logs (events.hpp writes and reads it): the correlator's inputs
/// and the run's facts about its inputs, all masked as a report is (a second masking pass has run).
struct scanned {
  correlate::inputs in;
  std::vector<ingest::input_error> errors;  ///< unreadable inputs and bound notes, masked
  std::vector<input_stats> inputs;
  std::uint64_t total_lines = 0, total_bytes = 0;
  bool any_readable = false;
  bool masked = true;
  bool redacted = false;  ///< identity masking too (--redact)
  std::map<std::string, std::size_t> mask_counts;
};
/// Reads and collects like diagnose(), and stops before the correlation. Errors as diagnose().
result<scanned> scan(const std::vector<std::string>& paths, const engine& eng, const options& opt, sink& events);
result<scanned> scan(const std::vector<std::string>& paths, const engine& eng, const options& opt);  ///< no sink
/// The report of scanned inputs (one scan, or several merged by events::merge()): the diagnosis, the
/// timeline and the notes diagnose() would make. No masker is at hand here, so options::reveal has no
/// effect, and options::host_keyer is given the masked token of the first failing host (stable across
/// jobs when the mask key is: docs/cluster.md).
run conclude(scanned s, const kb::library& lib, const options& opt);

/// Sigma's "goodlog" test for `kb test --healthy DIR`: each directory holds logs of a healthy run, and any
/// verdict other than healthy is one failure naming the directory and the signature that fired.
std::vector<kb::example_failure> check_healthy_baselines(const std::vector<std::string>& dirs, const kb::library& lib);

}  // namespace ff::pipeline
