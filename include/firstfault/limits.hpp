// Bounds shared by several stages: how much text is kept from a line, and how many ranks a list holds.
// Logs are untrusted (docs/security.md): every table that grows with the input has a bound, and every
// text that reaches a report has a cap. Units: bytes of UTF-8 (cut on a character boundary by
// text::prefix_utf8), or counts.
#pragma once

#include <cstddef>

namespace ff::limits {

/// A finding's line as kept for the report and the history. The longest real cause lines are CUDA OOM
/// messages with the allocator's advice (~700 bytes) and NCCL WARN lines with a transport error chain
/// (~1 KB); 2,000 keeps them whole while a hostile 1 MiB line costs 2 KB per finding.
constexpr std::size_t kFindingTextBytes = 2000;
/// A suspicious line's example (lines that look wrong but match no signature): shown as one report line.
constexpr std::size_t kSuspiciousTextBytes = 500;
/// A rank's or a stream's last line, and a stack's top source line: evidence of where a rank stopped.
constexpr std::size_t kLastLineBytes = 300;
/// A line quoted inside a one-line reason ("the rank that printed: \"...\"").
constexpr std::size_t kQuoteBytes = 160;

/// Ranks listed per group (suspicious templates) and the highest rank number from which absent ranks are
/// filled in (0..highest): 4,096 covers the largest jobs in the corpus (1,024 ranks) four times over,
/// and a hostile "rank 2000000000" line cannot make the correlator enumerate two billion ranks.
constexpr int kMaxListedRanks = 4096;
/// Rank stories a report carries (correlate::diagnosis::ranks): every rank of a 1,024-rank job; beyond, the
/// lowest-numbered ranks and the first failing one. A story holds the rank's last line (kLastLineBytes) and its
/// first error clipped to kQuoteBytes, so 1,024 of them are under 1 MB of text.
constexpr std::size_t kMaxRankStories = 1024;
/// Streams whose last line is kept for the end-of-input evidence.
constexpr std::size_t kMaxStreamEnds = 4096;
/// Lines that say the run ended well (inputs::success_ends): a few are evidence enough; one per node's agent.
constexpr std::size_t kMaxSuccessEnds = 64;
/// Work lines kept (inputs::work_lines): the last ones are those a timeout is compared with.
constexpr std::size_t kMaxWorkLines = 64;
/// Longest line body the exception-type regex is run on (a real exception line is far shorter).
constexpr std::size_t kMaxExceptionLineBytes = 4096;
/// Hosts one Slurm hostlist ("node[001-128]") expands to when masked.
constexpr std::size_t kMaxHostlistHosts = 4096;

/// Root-cause evidence lines in a report: one per rank, earliest first. Six shows the pattern (the first
/// failing rank and a few that followed) and keeps the report on one screen.
constexpr std::size_t kEvidenceLines = 6;

}  // namespace ff::limits
