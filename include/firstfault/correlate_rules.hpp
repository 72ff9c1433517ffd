// firstfault/correlate_rules.hpp: the correlator's rules, one named function each.
//
// correlate() (correlate.hpp) runs three tables in order, and every decision it reports names the
// rule that made it:
//  1. root rules choose the root-cause finding among cause-role findings (strongest first);
//  2. rank rules find the initiating rank for a root cause that lines report;
//  3. kind rules may refine the root cause's kind with evidence across lines (a repeated Xid);
//  4. inference rules reason across ranks when no line names a cause (a rank that never reached the
//     collective, sizes that differ at one SeqNum); each produces knowledge-base entries whose
//     `inferred_by` names it, and `kb lint` checks both directions (kb::lint_rules).
// Rules are pure functions of a `context` built once from the correlator's inputs, so each can be
// unit-tested on hand-built findings:
//
//   ff::correlate::inputs in;  in.findings.push_back(...);
//   auto ctx = ff::correlate::rules::make_context(in, lib);
//   for (const auto& r : ff::correlate::rules::inference_rules())
//     if (auto inf = r.fn(ctx)) ...;            // inf->rule names the KB entry, inf->rank the culprit
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "firstfault/correlate.hpp"

namespace ff::correlate::rules {

/// Maps local ranks to global ranks with the evidence of the run (lines that carry both, torchelastic's
/// `rank : R (local_rank: L)`). A local rank seen with several global ranks (several nodes) maps to none;
/// on a single node a local rank is the rank.
struct rank_resolver {
  std::map<int, std::set<int>> local_to_rank;
  std::map<std::string, std::set<int>> host_ranks;  ///< inputs::host_ranks
  bool single_node = false;
  std::optional<int> operator()(const std::optional<int>& rank, const std::optional<int>& local) const;
  /// With the line's host too: a local rank seen on several nodes is the one of its global ranks that ran on
  /// that host (two agents on one machine, each node's file named by its host).
  std::optional<int> on_host(const std::optional<int>& rank, const std::optional<int>& local, const std::optional<std::string>& host) const;
};

/// Everything the rules read. Built once by make_context(); rules never modify it.
struct context {
  const inputs* in = nullptr;
  const kb::library* lib = nullptr;
  std::vector<finding> fs;        ///< findings de-duplicated (console + per-rank files), ranks resolved
  std::vector<extract::exit_record> exits;  ///< with ranks resolved where possible
  std::set<int> all_ranks;        ///< every rank with activity, exits or findings
  std::map<int, rank_activity> activity;    ///< by resolved rank
  rank_resolver resolve;
  std::optional<int> year;        ///< the year of the run's dated stamps (year-less stamps were rebased to it)
  /// Cause lines the run survived (survived_errors()), with the one-line reason the report shows: such a line is
  /// never the root cause, and is listed as "also seen, survived".
  std::map<const finding*, std::string> survived;
  /// The line that says the run ended well (ended_well()), or none.
  const inputs::marked_line* ended_well = nullptr;
  const kb::signature& sig(const finding& f) const { return lib->signatures[static_cast<std::size_t>(f.signature)]; }
};

/// Resolves ranks, merges duplicates, rebases year-less timestamps (c10, glog, syslog headers) to the
/// year of the run's dated stamps (the nearest of that year, the year before and after, so a
/// 31 Dec/1 Jan rollover lands right); with no dated stamp they stay as parsed and are marked undated.
context make_context(const inputs& in, const kb::library& lib);

/// Errors the run survived: a cause line whose rank went on to a later, different progress step (its own
/// step when the line was read, finding::step_at, against the rank's last one), or a start-up (launch
/// category) line with no rank after which some rank trained. Non-finite metrics (numerics) and the
/// scheduler's end of the job are never survived: training on NaN is the failure, and nothing follows the end.
/// Source: on-call practice; PyTorch's own elastic agent treats only a worker's exit as its failure
/// (https://pytorch.org/docs/stable/elastic/errors.html), so a logged and caught exception is not one.
std::map<const finding*, std::string> survived_errors(const context& ctx);

/// A group of lines that look wrong (no signature explains them) was survived: the run ended well after the
/// group's latest line (as ended_well()), or, by the lines' own times on one clock, a rank trained to a later
/// step a second or more after it: each of the group's ranks (global, or local when the lines named only a
/// local rank) when its lines carry ranks, any rank when they carry none (start-up and helper chatter). A group
/// with any untimed line is never ordered against progress (print()'s progress lines reach a piped file late:
/// step_after). Returns the reason the report shows, or "".
/// Source: on-call practice, as survived_errors (issue 43, "errors the run survived").
std::string suspicious_survived(const context& ctx, const suspicious_line& s);

/// The run ended well: no worker failed, and a line says the job or a node's workers finished (a signature
/// tagged outcome.success), or every rank record that wrote a line said it finished (outcome.rank_done).
/// Returns that line (the last such), or none.
const inputs::marked_line* ended_well(const context& ctx);

/// Each rank's story (diagnosis::ranks), in rank order, at most limits::kMaxRankStories of them with `keep`
/// (the first failing rank) always among them; `total` (if given) gets how many ranks the run had. A rank's
/// errors are its lines of cause or symptom signatures that were not survived; its exit is the first launcher
/// record that says it failed, else its first record.
std::vector<rank_story> rank_stories(const context& ctx, std::optional<int> keep, std::size_t* total);

/// How the run ended: well (ended_well()), failed (a launcher's record of a failed worker, torchrun's Root
/// Cause first), or not seen; and which ranks' times are on other clocks (or none) and so are not compared.
run_outcome outcome_of(const context& ctx, const std::vector<rank_story>& stories);


bool any_worker_failed(const context& ctx);

/// The rank a line names as the one it waited for (its `peer_rank` field), as a global rank. A line that
/// prints its own rank (`rank` field: ProcessGroupNCCL's "[R] is setting up NCCL communicator and retrieving
/// ncclUniqueId from [S]") prints both in its process group's numbering, which is the global one only when R is
/// the line's global rank, and whose store key is a collective's counter, not a point-to-point pair's "a:b";
/// otherwise (a subgroup, a pair) no rank is named (ProcessGroupNCCL::broadcastUniqueNCCLID prints "[0]" for the
/// group's or the pair's first rank).
std::optional<int> named_peer(const finding& f);

/// When no cause line and no inference rule explains a run: its symptom lines, when every one of them points
/// at the same kind and none is a timeout, stand for that kind (the earliest such line). Not when a worker
/// failed (the launcher's record names the victim), nor when the run ended well or a symptom was survived.
/// A symptom's kind is the failure it shows when nothing else is wrong (kb: symptom `kind`): a connection
/// reset by a named peer with no crash anywhere is that peer's network (on-call practice; NCCL's
/// ncclRemoteError text: "remote process exited or there was a network error",
/// https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html).
const finding* orphan_symptom(const context& ctx);

/// Every input ends in the job's start-up (the launcher's banner and rendezvous lines; with `with_nccl_init`,
/// NCCL's communicator set-up INFO lines too) and no rank reported a progress step.
bool ends_in_startup(const context& ctx, bool with_nccl_init);

/// A decision about the initiating rank (a decision may be that no rank can be named: rank empty).
struct rank_decision {
  std::optional<int> rank;
  std::optional<std::string> host;
  std::string why;  ///< shown as "decided by"
};

/// The result of an inference rule.
struct inference {
  std::string entry;  ///< the `inferred_by` value of the knowledge-base entry that gives the verdict
  std::optional<int> rank;
  std::string why;
  std::vector<const finding*> findings;  ///< the lines the inference rests on (evidence)
  std::vector<evidence> extra;           ///< evidence that is not a finding (a silent rank's last line)
};

struct root_rule {
  std::string_view name, summary, source;
  /// Given the current root candidate (strongest cause), may pick another finding; returns nullptr to keep it.
  std::function<const finding*(const context&, const finding& root)> fn;
};
struct rank_rule {
  std::string_view name, summary, source;
  std::function<std::optional<rank_decision>(const context&, const std::vector<const finding*>& root_findings)> fn;
};
struct kind_rule {
  std::string_view name, summary, source;
  /// Given the root findings and the kind so far, may give another kind (and why).
  std::function<std::optional<std::pair<std::string, std::string>>(const context&, const std::vector<const finding*>& root,
                                                                     const std::string& kind)>
      fn;
  bool weak = false;  ///< the kind it gives is a reading of numbers that fit another kind too: confidence low
};
struct inference_rule {
  std::string_view name, summary, source;
  std::vector<std::string_view> produces;  ///< the `inferred_by` values it can give
  std::function<std::optional<inference>(const context&)> fn;
};

/// The frame where multiprocessing creates a SemLock (kb data_semlock_dev_shm) right above `root`, when `root` is
/// an errno-28 "No space left on device" line of the disk-full kind: the space that ran out is /dev/shm (root rule
/// errno28_from_semlock). Else nullptr.
const finding* semlock_frame_of(const context& ctx, const finding& root);
/// The strongest cause-role finding: highest priority, then earliest time (same clock only).
const finding* strongest_cause(const context& ctx);
const std::vector<root_rule>& root_rules();
const std::vector<rank_rule>& rank_rules();
const std::vector<inference_rule>& inference_rules();
const std::vector<kind_rule>& kind_rules();

/// The rank a matching line names as the initiator, per its signature's `initiator` field.
std::optional<int> initiator_of(const context& ctx, const finding& f);

/// a strictly before b; false when either is missing or they are on different clocks.
bool before(const std::optional<normalize::timestamp>& a, const std::optional<normalize::timestamp>& b);
/// "2026-01-01 10:00:05.000", "+12.500s since boot", "01-01 10:00:05.000" (no year known).
std::string format_time(const std::optional<normalize::timestamp>& ts);
/// A captured field of a finding, or "".
std::string field(const finding& f, const std::string& name);

}  // namespace ff::correlate::rules
