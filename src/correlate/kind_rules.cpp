// The kind rules (correlate_rules.hpp kind_rule): readings that change the root cause's kind from facts of the
// run, tried in order after the root is chosen. Split from rules.cpp (the rank and root tables) to keep each file
// under the 1,000-line bound (issue 47).
#include <algorithm>
#include <set>

#include <re2/re2.h>

#include "firstfault/correlate_rules.hpp"
#include "correlate/rules_detail.hpp"

namespace ff::correlate::rules {

const std::vector<kind_rule>& kind_rules() {
  static const std::vector<kind_rule> rules = {
      {"repeated_xid_same_device", "an application-level Xid that recurs on the same GPU (PCI device) is a faulty GPU",
       "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html (repeated Xids on one GPU: run diagnostics)",
       [](const context& ctx, const std::vector<const finding*>& root,
          const std::string& kind) -> std::optional<std::pair<std::string, std::string>> {
         if (kind != "gpu_xid_application" || root.empty()) return std::nullopt;
         std::string pci = field(*root.front(), "pci");
         if (pci.empty()) return std::nullopt;
         // Count events, not lines: one fault prints a burst of Xid lines within milliseconds. Events are
         // distinct processes (pid=N) or bursts more than a minute apart.
         std::set<std::string> xids, pids;
         std::vector<double> times;
         for (const auto& f : ctx.fs)
           if (field(f, "pci") == pci && !field(f, "xid").empty()) {
             xids.insert(field(f, "xid"));
             if (auto pid = to_int(field(f, "pid"))) pids.insert(std::to_string(*pid));
             if (f.ts && !f.ts_inherited) times.push_back(f.ts->seconds);
           }
         std::sort(times.begin(), times.end());
         std::size_t bursts = times.empty() ? 0 : 1;
         for (std::size_t i = 1; i < times.size(); ++i)
           if (times[i] - times[i - 1] > 60.0) ++bursts;
         std::size_t n = std::max(pids.size(), bursts);
         if (n < 3) return std::nullopt;
         std::string list;
         for (const auto& x : xids) list += (list.empty() ? "" : ", ") + x;
         return std::make_pair(std::string("gpu_xid_hardware"),
                               "Xid " + list + " recurred in " + std::to_string(n) + " separate events on the same GPU (PCI " + pci +
                                   "): a faulty GPU, not one bad kernel");
       }},
      {"ib_timeout_on_every_host", "InfiniBand completion error 12 (transport retry counter exceeded) on every host of the run "
                                   "before any rank made progress: not one bad link, the fabric's set-up (RoCE GID index, "
                                   "traffic class, switch filtering)",
       "NCCL maintainer in https://github.com/NVIDIA/nccl/issues/426 (error 12 is a retry timeout; right away it means the NICs "
       "cannot talk over RoCE: GID index, traffic class); ibv_wc_status IBV_WC_RETRY_EXC_ERR = 12 (rdma-core verbs.h)",
       [](const context& ctx, const std::vector<const finding*>& root,
          const std::string& kind) -> std::optional<std::pair<std::string, std::string>> {
         if (kind != "network_hardware" || root.empty()) return std::nullopt;
         static const re2::RE2 err12(R"(NET/IB ?: Got completion (?:from peer \S+ )?with (?:error |status=)12\b)");
         std::set<std::string> with;
         for (const auto& f : ctx.fs)
           if (f.host && re2::RE2::PartialMatch(f.text, err12)) with.insert(*f.host);
         if (with.size() < 2) return std::nullopt;
         for (const auto& h : ctx.in->hosts)
           if (!with.count(h)) return std::nullopt;  // a host without it: a link or a node, the hardware reading stands
         for (const auto& [_, act] : ctx.in->activity)
           if (act.last_step) return std::nullopt;  // the fabric carried training first: a link that failed later
         std::string list;
         for (const auto& h : with) list += (list.empty() ? "" : ", ") + h;
         return std::make_pair(std::string("nccl_env_misconfig"),
                               "every host (" + list + ") got InfiniBand completion error 12 before any progress: the NICs "
                               "cannot reach each other as configured (on RoCE: NCCL_IB_GID_INDEX, traffic class), not one bad link");
       }},
      {"size_ratio_is_an_element_width", "gloo received a message of exactly 2, 4 or 8 times the buffer's bytes, or a half, "
                                         "quarter or eighth of them: the ratio of two element widths (1, 2, 4, 8 bytes), so "
                                         "the same number of elements in different dtypes",
       "gloo/transport/tcp/pair.cc (enforce op.preamble.length <= op.nbytes); element sizes: "
       "https://pytorch.org/docs/stable/tensor_attributes.html#torch.dtype",
       [](const context&, const std::vector<const finding*>& root,
          const std::string& kind) -> std::optional<std::pair<std::string, std::string>> {
         if (kind != "collective_shape_mismatch") return std::nullopt;
         for (const auto* f : root) {
           auto sizes = gloo_sizes(*f);
           if (!sizes || sizes->first == sizes->second) continue;
           int hi = std::max(sizes->first, sizes->second), lo = std::min(sizes->first, sizes->second);
           if (hi % lo != 0) continue;
           int ratio = hi / lo;
           if (ratio != 2 && ratio != 4 && ratio != 8) continue;
           return std::make_pair(std::string("collective_dtype_mismatch"),
                                 field(*f, "bytes") + " bytes against a " + field(*f, "buffer_bytes") + "-byte buffer, exactly " +
                                     std::to_string(ratio) + " times: the same element count in dtypes of different widths "
                                     "(float64 and float32, float32 and float16); a shape " + std::to_string(ratio) +
                                     " times larger would read the same");
         }
         return std::nullopt;
       },
       true},
      {"buffer_of_one_element", "gloo received a message of many elements into a buffer of one element (1 to 8 bytes): "
                                "the two ranks are in different collectives (a scalar reduce on one, a tensor on the other), "
                                "the mark of a collective that only some ranks call",
       "gloo/transport/tcp/pair.cc (enforce op.preamble.length <= op.nbytes: the posted buffer is the receiver's own "
       "tensor); https://pytorch.org/docs/stable/distributed.html (every rank must call collectives in the same order)",
       [](const context&, const std::vector<const finding*>& root,
          const std::string& kind) -> std::optional<std::pair<std::string, std::string>> {
         if (kind != "collective_shape_mismatch") return std::nullopt;
         for (const auto* f : root) {
           auto sizes = gloo_sizes(*f);
           if (!sizes || sizes->second > 8 || sizes->first <= 8 * sizes->second) continue;
           // One element of any dtype is at most 8 bytes; a message over 8 times larger is not the same
           // tensor in a wider dtype (size_ratio_is_an_element_width) and not a tensor one row longer.
           return std::make_pair(std::string("collective_count_mismatch"),
                                 field(*f, "bytes") + " bytes arrived for a " + field(*f, "buffer_bytes") +
                                     "-byte buffer, one element: this rank was in a scalar collective (a loss, a flag, a "
                                     "count) while its peer sent a whole tensor, so the ranks are at different collectives: "
                                     "one rank called a collective the others skipped");
         }
         return std::nullopt;
       },
       true},
      {"different_calls_in_tracebacks",
       "the collective-mismatch report is cut before the other rank's fingerprint, but the tracebacks printed with it "
       "stand in two different torch.distributed calls (each rank's own, interleaved on one console): ranks in different "
       "collectives; a barrier or DDP's backward against an explicit call means one rank issued a collective the other "
       "did not (a count mismatch), else different collectives at the same point (a type mismatch)",
       "torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp (CollectiveFingerPrint::verify: 'Detected mismatch between "
       "collectives on ranks. Rank N is running collective: ..., but Rank M is running collective: ...'); "
       "https://pytorch.org/docs/stable/distributed.html#torch-distributed-debug",
       [](const context&, const std::vector<const finding*>& root,
          const std::string& kind) -> std::optional<std::pair<std::string, std::string>> {
         if (kind != "collective_shape_mismatch") return std::nullopt;
         for (const auto* f : root) {
           // Only when the report itself does not say what the peer ran: a whole report decides by its own fields.
           if (!field(*f, "peer_op").empty() || !field(*f, "peer_shape").empty()) continue;
           std::vector<std::string> rows;
           std::string list = field(*f, "calls");
           for (std::size_t at = 0; at <= list.size();) {
             auto comma = list.find(',', at);
             auto fn = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
             auto row = collective_row(fn);
             if (!row.empty() && std::find(rows.begin(), rows.end(), row) == rows.end()) rows.push_back(row);
             if (comma == std::string::npos) break;
             at = comma + 1;
           }
           if (rows.size() < 2) continue;
           auto unconditional = [](const std::string& r) { return r == "barrier" || r == "backward"; };
           auto n = std::count_if(rows.begin(), rows.end(), unconditional);
           std::string named;
           for (const auto& r : rows) named += (named.empty() ? "" : " and ") + r;
           bool count = n > 0 && n < static_cast<long>(rows.size());
           return std::make_pair(std::string(count ? "collective_count_mismatch" : "collective_type_mismatch"),
                                 "the tracebacks with the report stand in " + named + ": the ranks were in different collectives" +
                                     (count ? "; a barrier or backward, which every rank issues, against an explicit call: one "
                                              "rank issued a collective the other did not"
                                            : ", not the same one with different shapes"));
         }
         return std::nullopt;
       },
       true},
  };
  return rules;
}

}  // namespace ff::correlate::rules
