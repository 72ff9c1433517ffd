// firstfault/events.hpp: one node's scan as a small file, and the merge of many (map and reduce).
//
// `firstfault scan LOGS... -o node.ffev` runs the pipeline up to the correlator and writes what the
// diagnosis needs (pipeline::scanned: the hit lines as findings, records, per-rank facts, host-rank pairs,
// lines that look wrong, input errors), masked, in the format below. `firstfault diagnose --events a.ffev
// b.ffev ...` reads them, merges them in the order given and correlates once: the same report as
// diagnosing every log in one run, for the same inputs in the same order and the same mask key
// (docs/cluster.md says where the two can differ).
//
// Format firstfault.events/v1: a zstd stream (https://github.com/facebook/zstd, one or more frames) of
// JSON lines, one object per line, each with its record type in "t":
//   header      {"t":"header","format":"firstfault.events/v1","tool":VERSION,"kb":KB_HASH,"masked":BOOL,
//                "redacted":BOOL (hosts, addresses and users masked too: scan --redact; absent in files of
//                older versions, read as "masked"),
//                "key_id":HEX|"" (HMAC-SHA256(key,"firstfault-key-id"), 16 hex: tells scans made with
//                different keys apart without revealing the key),"created":UNIX_SECONDS}
//   source      {"t":"source","name":S}            display names, in the order the inputs were opened
//   input       {"t":"input","path":S,"lines":N,"bytes":N}
//   error       {"t":"error","path":S,"reason":S,"fatal":B,"cut_short":B}
//   finding     {"t":"finding","sig":NAME,"cap":[[K,V],...],"rank":N,"local_rank":N,"host":S,"ts":TS,
//                "ts_inherited":B,"source":S,"line":N,"text":S,"dup":N,"attempt":N}
//   exit        {"t":"exit","rank":N,"local_rank":N,"exitcode":N,"pid":N,"host":S,"time":S,"signal":S,
//                "root_cause":B,"agent_line":B,"launcher":S,"source":S,"line":N,"attempt":N}
//   terminated  {"t":"terminated","pid":N,"source":S,"line":N}
//   activity    {"t":"activity","scope":"global"|"local","number":N,"attempt":N,"lines":N,...} (rank_activity;
//                its *_source fields are indices into this file's source records)
//   suspicious  {"t":"suspicious","source":S,"text":S,"line":N,"rank":N,"strong":B,"tmpl":S,"count":N,"ranks":[N]}
//   local_ranks {"t":"local_ranks","local":N,"ranks":[N]}
//   host        {"t":"host","name":S}
//   host_ranks  {"t":"host_ranks","host":S,"ranks":[N]}
//   stream_end  {"t":"stream_end","source":S,"text":S,"line":N}
//   stack_top   {"t":"stack_top","rank":N,"function":S,"file":S,"main":B,"text":S,"source":S,"line":N}
//   summary     {"t":"summary","benign_lines":N,"lines":N,"bytes":N,"readable":B,"mask_counts":{KIND:N}}
//   end         {"t":"end","records":N}   the number of records before it: a file without it was cut short
// TS is {"s":SECONDS,"clock":"wall"|"uptime","date":B}. Optional fields are left out when unknown. Readers
// ignore fields and record types they do not know (later minor versions add them); a new major version
// changes the "format" string.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "firstfault/kb.hpp"
#include "firstfault/pipeline.hpp"
#include "firstfault/result.hpp"

namespace ff::events {

inline constexpr const char* kFormat = "firstfault.events/v1";
/// Bounds on reading an events file (they are untrusted input like any log).
inline constexpr std::size_t kMaxRecordBytes = 4u << 20;         ///< one JSON line
inline constexpr std::uint64_t kMaxDecompressedBytes = 1ull << 30;  ///< one file, decompressed
inline constexpr std::size_t kMaxRecords = 4'000'000;            ///< one file

/// The 16-hex id of a mask key ("" for none), written into the header.
std::string key_id(const std::string& mask_key);

/// Writes `s` to `path` (through a temporary file in the same directory, renamed at the end, so a reader
/// never sees half a file). `lib` names the signatures; `mask_key` gives the header's key id.
/// Errors: the file cannot be created or written (errno's words), zstd fails.
status write(const std::string& path, const pipeline::scanned& s, const kb::library& lib, const std::string& mask_key);

/// Reads one events file. Signatures are looked up by name in `lib`; findings of a signature `lib` does
/// not have are dropped and counted in a note. Every string is sanitised (no escapes or bidi controls).
/// Errors, each naming the file: not a zstd stream, corrupt or truncated (no end record), not
/// firstfault.events/v1, a record that is not JSON or has a wrong type, a bound above exceeded, not a
/// regular non-empty file (FIFOs and devices are refused before a read could block). What is kept is bounded
/// as one run's collector (8192 findings, 64 per signature, rank and attempt; 16384 ranks of activity;
/// 65536 host or local-rank pairs and 65536 records of each other kind): past a bound, findings count as
/// repeats and the rest is left out, with an input error (not fatal) naming the file.
/// `notes` gets warnings that do not stop the read (another knowledge base, another mask key than `expect_key_id`).
result<pipeline::scanned> read(const std::string& path, const kb::library& lib, std::vector<std::string>& notes,
                               std::string* key_id_out = nullptr);

/// Merges scans in the order given, as if their inputs had been read in that order in one run: sources
/// and records concatenated, per-rank activity combined (line counts added, first facts from the first
/// scan that has the rank, last facts from the last, the silence between scans counted as a gap), host and
/// local-rank pairs united, lines that look wrong grouped by template again, and the collector's bounds
/// (64 findings per signature, rank and attempt; 8,192 in all) applied again.
pipeline::scanned merge(std::vector<pipeline::scanned> parts);

/// merge() one scan at a time: memory is the merged scan (bounded as one run's collector is) plus the one
/// being added, however many files. A scan whose sources would take the merged list past 2^20 is left
/// out with an input error naming its first input.
class merger {
 public:
  merger();
  ~merger();
  merger(const merger&) = delete;
  merger& operator=(const merger&) = delete;
  void add(pipeline::scanned part);
  /// The merged scan; the merger is spent afterwards.
  pipeline::scanned take();

 private:
  struct state;
  std::unique_ptr<state> s_;
};

}  // namespace ff::events
