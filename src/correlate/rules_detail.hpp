// Helpers the rule tables share (rules.cpp, inference_rules.cpp). Internal to the correlate stage.
#pragma once
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "firstfault/correlate_rules.hpp"

namespace ff::correlate::rules {

/// A non-negative integer of at most 9 digits, else none.
std::optional<int> to_int(const std::string& s);
/// A collective or barrier timeout: a symptom in the synchronization category, or tagged as a hang.
bool is_timeout(const kb::signature& s);
/// The line is a raised exception: the traceback's last line (extract set `raised`), or a line that starts
/// with an exception's name and a colon ("RuntimeError: ...", "torch.distributed.DistNetworkError: ...").
bool raised_exception(const finding& f);
/// Line `f` came in the run's first steps, while a dynamic loss scaler still searches for its level: no
/// progress line before it stated a step of kSettlingSteps (1000, DeepSpeed's loss_scale_window) or more
/// (outcome.cpp).
bool settling(const context& ctx, const finding& f);
/// The number a transient line carries in its signature's `transient_field` (kb transient_above: a loss scale),
/// when the whole field is a number; else none (outcome.cpp).
std::optional<double> transient_value(const context& ctx, const finding& f);
/// The ranks of the other failures torchelastic stamped with the same second as its Root Cause entry `root`
/// (they are not ordered by it), and the note a rank taken from such an entry gets (outcome.cpp).
std::set<int> same_second_failures(const context& ctx, const extract::exit_record& root);
std::string tie_note(const extract::exit_record& root, std::set<int> tied);

/// Timeouts by rank: the ranks that timed out (survived ones aside), their lines, and the known ranks that
/// never timed out (every rank below the highest seen exists).
struct timeout_view {
  std::set<int> timed_out;
  std::vector<const finding*> lines;
  std::vector<int> absent;
};
timeout_view timeouts(const context& ctx);

/// A rank's last line, and the line that stated its planned steps, as evidence with file and line.
std::optional<evidence> last_line_evidence(const context& ctx, int r);
std::optional<evidence> planned_evidence(const context& ctx, int r);

/// The rank a work line (inputs::work_lines) belongs to: its prefix's, resolved to a global rank; else the rank
/// its own text names (the work signature's `rank` field: a log record glued after a progress bar that ended
/// without a newline, "...| 4/20 [00:01<00:03]2026-12-06 ... [rank0] saving ...", or a bar's label "on rank=0").
std::optional<int> work_rank(const context& ctx, const inputs::marked_line& w);
/// True when work_rank() read the rank from the line's text rather than its prefix.
bool work_rank_from_text(const context& ctx, const inputs::marked_line& w);

/// The inference rule of the same name (inference_rules.cpp): a collective timeout whose last preceding work line
/// or progress bar shows one rank's own work spanning the wait.
std::optional<inference> work_spans_timeout(const context& ctx);
std::optional<inference> store_key_never_set(const context& ctx);
std::optional<inference> loss_scale_collapsed(const context& ctx);

/// The inference rule of the same name (inference_rules.cpp): one node's ranks and launcher fell silent while the
/// other nodes' ranks lost their connection to a peer.
std::optional<inference> node_went_silent(const context& ctx);

/// gloo's size check (op.preamble.length <= op.nbytes): the bytes that arrived and the bytes of the buffer posted
/// for them, from torch_gloo_message_size_mismatch's fields; none unless both are positive (rules.cpp).
std::optional<std::pair<int, int>> gloo_sizes(const finding& f);
/// The kb/_tables/collective_calls.tsv row a torch.distributed function belongs to, or empty (rules.cpp).
std::string collective_row(const std::string& fn);

/// The first finding of `list` whose signature names an initiator, as a rank decision with its reason.
std::optional<rank_decision> culprit_from(const context& ctx, const std::vector<const finding*>& list);
/// How the launcher that printed an exit report calls its first failure.
std::string first_failure_phrase(const extract::exit_record& e);

}  // namespace ff::correlate::rules
