// firstfault/correlate.hpp: from per-line findings to one diagnosis.
//
// Stage 5. The correlator receives every finding (a signature that matched a line, with the line's
// rank, host and time), the torchelastic exit records and per-rank activity, and decides:
//  - the verdict: failure, healthy, or undetermined;
//  - the root cause: cause-role findings beat symptom-role findings; among causes the highest
//    `priority` wins, then the earliest time; with no cause, cross-rank rules may infer one
//    (see docs/ARCHITECTURE.md, "Correlation rules");
//  - the initiating rank, and the rule that decided it (or null);
//  - collateral groups: every other finding folded by signature with its ranks.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "firstfault/extract.hpp"
#include "firstfault/kb.hpp"
#include "firstfault/limits.hpp"
#include "firstfault/match.hpp"
#include "firstfault/normalize.hpp"
#include "firstfault/stragglers.hpp"

namespace ff::correlate {

/// A signature that matched one line.
struct finding {
  int signature = -1;
  match::fields captured;
  std::optional<int> rank, local_rank;  ///< rank as attributed by prefixes or path (local_rank when only that)
  std::optional<std::string> host;
  std::optional<normalize::timestamp> ts;
  bool ts_inherited = false;  ///< the time came from an earlier line of the same stream
  std::string source;
  std::uint64_t line_no = 0;
  std::string text;           ///< the line body, sanitised
  int duplicates = 0;         ///< the same line seen again (console log and per-rank file)
  std::optional<int> attempt;  ///< torchrun restart attempt (attempt_N of a --log-dir tree); none when not known
  /// The rank's last progress step ("step N", "iteration N", extract::read_progress) when this line was read,
  /// the line's own included; none when the rank had printed none. A later, different step of the same rank
  /// means the rank went on training after this line (correlate: survived errors).
  std::optional<long> step_at;
  bool raised = false;  ///< the exception line that ends a Python traceback (extract::line_note::exception_line)
  /// Its traceback came right after a line that said the error was handled ("failed (attempt 1/3),
  /// retrying in 0.1 s": a benign signature tagged event.handled): logged and retried, not raised.
  bool handled = false;
  /// Its traceback was followed by libstdc++'s "terminate called after throwing" (extract::line_note::aborted):
  /// the process that printed it then aborted (SIGABRT), so it is the worker whose exit was signal 6.
  bool aborted = false;
};

/// Whose per-rank record a line belongs to, as the lines named it: a global rank, or only a local rank
/// (LOCAL_RANK, torchrun's [defaultN]: prefix; the correlator maps it to a global rank when the job's
/// layout allows), and the torchrun restart attempt when known (attempt_N of a --log-dir tree, or counted
/// in a stream). Ordered local before global, then number, then attempt (none before 0).
struct rank_key {
  enum class scope : std::uint8_t { local, global };
  scope kind = scope::global;
  int number = 0;
  std::optional<int> attempt;
  auto operator<=>(const rank_key&) const = default;
  static rank_key global_rank(int r, std::optional<int> attempt = std::nullopt) { return {scope::global, r, attempt}; }
  static rank_key local_rank(int l, std::optional<int> attempt = std::nullopt) { return {scope::local, l, attempt}; }
};

/// Last activity of one rank (for silence and straggler reasoning).
struct rank_activity {
  std::uint64_t lines = 0;
  std::optional<normalize::timestamp> last_ts;
  std::string last_line;
  std::uint32_t last_source = 0;    ///< file of `last_line` (an index into inputs::source_names) and its line
  std::uint64_t last_line_no = 0;
  std::optional<long> last_step;  ///< last "step N" / "iteration N" number seen
  /// Where `last_step` was read: its file (inputs::source_names), line, and the line's own time (none when the
  /// line had no time of its own). Errors the run survived are those this position comes after.
  std::uint32_t last_step_source = 0;
  std::uint64_t last_step_line_no = 0;
  std::optional<normalize::timestamp> last_step_ts;
  /// Takes `o`'s last step and where it was read (the four fields together).
  void take_step_of(const rank_activity& o) {
    last_step = o.last_step;
    last_step_source = o.last_step_source;
    last_step_line_no = o.last_step_line_no;
    last_step_ts = o.last_step_ts;
  }
  std::optional<long> planned_steps;  ///< "iter i/N", "N batches": how many steps this rank planned
  std::string planned_line;           ///< the line that first stated the current `planned_steps` (masked)
  std::uint32_t planned_source = 0;   ///< its file (inputs::source_names) and line
  std::uint64_t planned_line_no = 0;
  // For the timeline (timeline.hpp): the rank's first line and its longest silence between two timed lines.
  std::optional<normalize::timestamp> first_ts;
  std::uint32_t first_source = 0;
  std::uint64_t first_line_no = 0;
  std::optional<normalize::timestamp> gap_start;  ///< time of the line before the longest silence
  double gap_seconds = 0;                         ///< its length (same clock only)
  step_clock steps;  ///< step-time samples from the rank's timed progress lines (stragglers.hpp)
};

/// Lines that look wrong (error level, "Error"/"FAILED" text, an exception) but matched no signature,
/// grouped by their template (extract::line_template): the same message on many ranks is one entry.
struct suspicious_line {
  std::string source, text;  ///< the first line of the group, as an example
  std::uint64_t line_no = 0;
  std::optional<int> rank;   ///< rank of the example line
  bool strong = false;  ///< an exception line, a fatal-level line, a crash message, an NCCL WARN
  std::string tmpl;     ///< the template: variables replaced by <*>
  int count = 1;        ///< lines in the group
  std::vector<int> ranks;  ///< distinct ranks of the group's lines, sorted
  /// Local ranks of the group's lines that carried no global rank (torchrun's [defaultN]: prefix), sorted.
  std::vector<int> local_ranks;
  /// The group's latest line by its own time (where and when); `untimed`: some line of the group had no time of
  /// its own, or times on another clock, so the group is not ordered against progress by time. A group is
  /// survived only when the run went on after its latest line.
  std::string last_source;
  std::uint64_t last_line_no = 0;
  std::optional<normalize::timestamp> last_ts;
  bool untimed = false;
  /// Set by the correlator: why the run is known to have gone on after the group's last line (a rank trained
  /// after it, the run ended well after it); empty when it was not survived.
  std::string survived;
};

struct evidence {
  std::string source, text, ts;
  std::uint64_t line_no = 0;
  std::optional<int> rank;
  std::optional<std::string> host;
};

struct collateral_group {
  std::string signature, kind, title, explanation;
  kb::role role = kb::role::unknown;
  std::vector<int> ranks;
  int count = 0;
  evidence example;
};

struct alternative {
  std::string signature, kind, title;
  int priority = 0;
  evidence example;
};

/// diagnosis::initiating_rule of an undetermined verdict where nothing looked wrong but the log stops in the
/// job's start-up (a launcher banner or NCCL set-up line last), with no progress and no end: it may have hung
/// there. The report says so and names the line where the log stops.
inline constexpr std::string_view kLogStopsInStartup =
    "the log stops in the job's start-up (launcher or NCCL set-up), with no progress and no end";

/// The answer of a diagnosis. healthy: nothing looks like a failure (no finding, no suspicious line, no
/// failed worker); failure: a cause line or an inference rule explains it; undetermined: something looks
/// wrong and nothing explains it (the report lists the lines).
enum class verdict { healthy, failure, undetermined };
/// How sure the root cause is: high (a strong cause, priority >= kb::kStrongCausePriority, with one clear
/// rank), medium, low (an inference rule, no cause line).
enum class confidence { none, low, medium, high };
std::string_view to_string(verdict v);
std::string_view to_string(confidence c);  ///< "" for none

/// One rank's story (issue 43, "a story per rank"): its first and last line, its last progress step, its
/// errors and how its process ended, each where it was read and at the line's own time. `clock` names the
/// clock of the rank's times ("wall", "uptime"); empty when its lines carry none, and then its times are not
/// ordered against other ranks'.
struct rank_story {
  int rank = 0;
  std::optional<std::string> host;      ///< the host its lines or file named, when exactly one
  std::uint64_t lines = 0;              ///< lines read from this rank (all attempts)
  std::optional<evidence> first, last;  ///< its first line (file, line; no text) and its last line (no time:
                                        ///< either may have none of its own)
  std::string first_time, last_time;    ///< the times of its first and last lines that had a time of their own
  std::optional<long> last_step;        ///< its last progress step ("step N", "iteration N"), and where
  std::optional<evidence> last_step_at;
  std::optional<evidence> first_error;  ///< its first error line (a cause or symptom signature) not survived
  int errors = 0;                       ///< how many such lines (a line that matched two signatures once)
  std::string exit;                     ///< how its process ended as a launcher said ("exit code 1 (torchelastic)"), or ""
  std::string clock;
};

/// How the run ended (issue 43, "an outcome per run"), from the launchers' and schedulers' lines.
struct run_outcome {
  enum class state { ended_well, failed, unknown };
  state what = state::unknown;
  std::string how;                ///< in words: "torchelastic: rank 1 exited with exit code 1"
  std::optional<evidence> line;   ///< the line that says so, when one does
  /// Empty when every rank's times are on one clock; else which ranks' times cannot be compared.
  std::string clocks;
};
std::string_view to_string(run_outcome::state s);

struct diagnosis {
  correlate::verdict verdict = correlate::verdict::healthy;
  // root cause (empty signature when undetermined/healthy)
  std::string signature, signature_id, kind, category, title, summary;
  correlate::confidence confidence = correlate::confidence::none;
  int priority = 0;
  std::vector<evidence> evidence_lines;
  std::optional<int> initiating_rank;
  std::optional<std::string> initiating_host;
  std::string initiating_rule;  ///< which rule decided the rank, or why none could
  std::string launcher_note;    ///< when torchrun's own Root Cause names another rank: which, and why it is not the answer
  std::string rule;             ///< the named rule that decided the verdict (correlate_rules.hpp), or empty
  std::string kind_reason;      ///< why a kind rule changed the kind, or empty
  /// Facts of the root-cause line's record that make it concrete: the exception at the end of a chained
  /// traceback ("the exception behind it: KeyError: 'label'") and the deepest frame of the user's code
  /// ("raised at train.py:39 in __getitem__: ..."). Empty when the line has none.
  std::vector<std::string> facts;
  std::vector<collateral_group> collateral;
  std::vector<alternative> alternatives;
  std::vector<std::string> fix, verify, confirm, references;
  std::vector<std::string> verify_where;  ///< "$VAR: what to set it to" for each variable the verify commands use
  /// An undetermined verdict's next steps: the line to read first, and the commands that capture the evidence
  /// the logs lack (the flight recorder for collective timeouts, NCCL_DEBUG for NCCL set-up, py-spy for a
  /// hang). Empty for other verdicts.
  std::vector<std::string> next_steps;
  std::vector<kb::code_fix> fix_code;
  std::vector<suspicious_line> suspicious;
  std::vector<extract::exit_record> exits;
  /// One entry per torchrun restart attempt when the inputs hold two or more (attempt_0, attempt_1, ... of a
  /// --log-dir tree), in attempt order; the report's verdict is the last attempt's, the one that ended the job.
  struct attempt_summary {
    int attempt = 0;
    correlate::verdict verdict = correlate::verdict::healthy;
    std::string kind, title, signature, rank_rule;
    std::optional<int> initiating_rank;
    std::optional<evidence> first;  ///< the attempt's first root-cause line
  };
  std::vector<attempt_summary> attempts;  ///< at most the first 8 and the last 8 when there are more
  std::size_t attempts_total = 0;         ///< attempts seen in the inputs (0: one attempt, or not known)
  /// Ranks whose step time exceeds the other ranks' by a margin (stragglers.hpp), slowest first. A fact,
  /// not a verdict: a healthy run with a slow rank stays healthy.
  std::vector<slow_rank> slow_ranks;
  run_outcome outcome;
  /// Every rank's story in rank order, at most limits::kMaxRankStories with the first failing rank always
  /// among them (ranks_total says how many ranks the run had).
  std::vector<rank_story> ranks;
  std::size_t ranks_total = 0;
};

struct inputs {
  std::vector<finding> findings;
  std::vector<extract::exit_record> exits;
  std::vector<extract::terminated_pid> terminated;
  std::map<rank_key, rank_activity> activity;  ///< per rank (or local rank) and attempt
  std::vector<suspicious_line> suspicious;  ///< one entry per template, in order of first appearance
  std::uint64_t benign_lines = 0;  ///< lines a benign signature explained (known harmless warnings)
  std::map<int, std::set<int>> local_to_rank;  ///< learnt from lines that carry both; >1 rank = ambiguous (several nodes)
  std::set<std::string> hosts;       ///< hosts seen in prefixes and paths
  std::map<std::string, std::set<int>> host_ranks;
  /// Each input's last non-empty line (masked), in input order: a log that ends in the launcher's
  /// start-up banner never got as far as training.
  struct stream_end {
    std::string source, text;
    std::uint64_t line_no = 0;
  };
  std::vector<stream_end> stream_ends;

  /// Lines that say a rank started work of its own (benign signatures tagged `activity.work`: saving a
  /// checkpoint, evaluating, tokenizing), masked, the last kMaxWorkLines of the run in order. With a collective
  /// timeout, a silent rank whose last sign of life is such a line, at the moment the collective began, was
  /// doing that work alone (correlate: timeout_absent_rank).
  struct marked_line {
    std::string source, text;
    std::uint64_t line_no = 0;
    std::optional<int> rank, local_rank;
    std::optional<normalize::timestamp> ts;
    bool ts_inherited = false;
    bool job = false;  ///< success_ends: the job or node ended well (outcome.success), not only this rank (outcome.rank_done)
    match::fields fields;  ///< what the benign signature's `extract` read from the line (fact lines: step, ckpt_path, ...)
  };
  std::vector<marked_line> work_lines;
  /// Lines that say the run, a node's workers or a rank ended well, masked, the first kMaxSuccessEnds: benign
  /// signatures tagged `outcome.success` (the job or node: torchelastic's "worker group successfully
  /// finished", a benchmark's result, a trainer's end; `job`) or `outcome.rank_done` (one rank: "training
  /// finished"). The run ended well when one of the first kind, or one of the second from every rank, was
  /// printed and no worker failed (correlate: survived errors).
  std::vector<marked_line> success_ends;
  /// Lines that state a fact of the run in fields (benign signatures tagged `fact.run`: a progress line with
  /// its step, planned steps and time per step; a checkpoint written and its path), masked, the last
  /// kMaxWorkLines of the run in order. They make a fix concrete (the directory to check, the hours the
  /// run needed). They decide two things: whether a transient came in the run's first steps (correlate:
  /// survived errors), and, with a collective timeout, whether a rank's own work or a progress bar spans the
  /// wait (inference rule work_spans_timeout).
  std::vector<marked_line> fact_lines;
  void keep_fact_line(marked_line m) {
    if (fact_lines.size() >= limits::kMaxWorkLines) fact_lines.erase(fact_lines.begin());
    fact_lines.push_back(std::move(m));
  }
  /// The bounds of the two lists: work lines keep the last kMaxWorkLines, success ends the first kMaxSuccessEnds.
  void keep_work_line(marked_line m) {
    if (work_lines.size() >= limits::kMaxWorkLines) work_lines.erase(work_lines.begin());
    work_lines.push_back(std::move(m));
  }
  void keep_success_end(marked_line m) {
    if (success_ends.size() < limits::kMaxSuccessEnds) success_ends.push_back(std::move(m));
  }
  /// Innermost frames of stack dumps by rank (py-spy, faulthandler), capped per rank.
  struct dump_frame {
    extract::stack_top top;
    std::string source;
    std::uint64_t line_no = 0;
  };
  std::map<int, std::vector<dump_frame>> stack_tops;  ///< ranks seen on lines that also name their host (capped)
  std::size_t max_suspicious_shown = 40;  ///< lines that look wrong, kept in the report at most
  /// Diagnose one restart attempt only: findings and exits of other attempts are set aside (after the
  /// console's copies took the attempt of the per-rank file line they repeat). Lines of no attempt stay.
  std::optional<int> only_attempt;
  /// Display names of the inputs, in the order they were opened (rank_activity refers to them by index).
  std::vector<std::string> source_names;
  const std::string& source_name(std::uint32_t id) const {
    static const std::string none;
    return id < source_names.size() ? source_names[id] : none;
  }
};

/// Decides the diagnosis. Pure: no I/O.
/// Pure: reads `in` (no copy; the caller must not change it meanwhile, which one thread guarantees).
diagnosis correlate(const inputs& in, const kb::library& lib);

}  // namespace ff::correlate
