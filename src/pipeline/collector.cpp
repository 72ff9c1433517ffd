// pipeline::collector: the state a run keeps (streams, per-rank state, findings, the tables the correlator
// reads) and the bookkeeping on it. Each line's road through the per-line stage is line_path.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <map>
#include <set>

#include "collector_impl.hpp"
#include "firstfault/extract.hpp"
#include "firstfault/limits.hpp"
#include "firstfault/match.hpp"
#include "firstfault/normalize.hpp"
#include "firstfault/text.hpp"

namespace ff::pipeline {

using line::rank_code;
using line::rank_key_of;

collector::collector(const engine& eng, const options& opt) : impl_(std::make_unique<impl>(eng, opt)) {
  impl_->in.max_suspicious_shown = opt.max_suspicious_shown;
}
collector::~collector() = default;
collector::collector(collector&&) noexcept = default;

status collector::check() const {
  if (auto st = impl_->scratch.ok(); !st) return st;
  if (!impl_->engine_error.empty()) return error{impl_->engine_error, errc::engine};
  return impl_->masker.check();
}
mask::masker& collector::masker() { return impl_->masker; }
bool collector::reveal() const { return impl_->opt.reveal; }
std::string collector::host_key(const std::string& real_host) const {
  return impl_->opt.host_keyer && !real_host.empty() ? impl_->opt.host_keyer(real_host) : std::string();
}
std::optional<std::int64_t> collector::recurrences(const std::string& host_key, const std::string& kind, int days) const {
  return impl_->opt.recurrences ? impl_->opt.recurrences(host_key, kind, days) : std::nullopt;
}
const correlate::inputs& collector::inputs() const { return impl_->in; }
const kb::library& collector::library() const { return *impl_->eng.lib; }
bool collector::gated() const { return impl_->light_ok; }
correlate::diagnosis collector::diagnose() const { return diagnose_inputs(impl_->in, *impl_->eng.lib); }

std::vector<std::string> collector::bound_notes() const {
  std::vector<std::string> out;
  if (impl_->rank_bound_hit) out.push_back(fmt::format("more than {} distinct ranks: the ranks past that bound share one per-rank table", impl::kMaxRanks));
  if (impl_->findings_bound_hit)
    out.push_back(fmt::format("more than {} findings: later ones are counted as repeats of their signature's first finding, their ranks are not kept", impl::kMaxFindings));
  if (impl_->pairs_bound_hit)
    out.push_back(fmt::format("more than {} host/rank or local-rank/rank pairs: later pairs are not kept for host and rank attribution", impl::kMaxPairs));
  return out;
}

void collector::remask_learnt() {
  auto& m = impl_->masker;
  auto& in = impl_->in;
  for (auto& f : in.findings) {
    m.rescan(f.text);
    m.rescan(f.source);
    for (auto& kv : f.captured) m.rescan(kv.second);
  }
  for (auto& kv : in.activity) {
    m.rescan(kv.second.last_line);
    m.rescan(kv.second.planned_line);
  }
  for (auto& s : in.source_names) m.rescan(s);
  // Records carry their input's name too (the launcher note quotes an exit record's file): a file opened
  // before a host in its path was learnt (logs/<pod>/pytorch.log, the pod named later by a prefix).
  for (auto& e : in.exits) {
    m.rescan(e.source);
    m.rescan(e.host);
  }
  for (auto& t : in.terminated) m.rescan(t.source);
  for (auto& e : in.stream_ends) {
    m.rescan(e.source);
    m.rescan(e.text);
  }
  for (auto* marked : {&in.work_lines, &in.success_ends, &in.fact_lines})
    for (auto& w : *marked) {
      m.rescan(w.source);
      m.rescan(w.text);
    }
  // a fact line's fields are shown ({ckpt_dir}: a path can name a host)
  for (auto& w : in.fact_lines)
    for (auto& kv : w.fields) m.rescan(kv.second);
  for (auto& [rank, frames] : in.stack_tops)
    for (auto& d : frames) {
      m.rescan(d.source);
      m.rescan(d.top.text);
    }
  for (auto& s : in.suspicious) {
    m.rescan(s.source);
    m.rescan(s.text);
    m.rescan(s.tmpl);
  }
}

collector::stream collector::open_stream(const ingest::source& raw_src) {
  stream st;
  impl_->masker.reset_stream();
  // user names in home paths; control characters, escapes and bidi controls in file and member names
  st.display = impl_->masker.apply_path(text::sanitize(raw_src.display));
  st.hint = raw_src.hint;
  if (!st.hint.host && !impl_->opt.default_host.empty()) st.hint.host = impl_->opt.default_host;
  if (st.hint.host && impl_->masker.masks_identity()) {  // node-b.log: the host in the file name is masked too
    std::string raw = *st.hint.host;
    st.hint.host = impl_->masker.mask_host(raw);
    for (auto pos = st.display.find(raw); pos != std::string::npos; pos = st.display.find(raw, pos + st.hint.host->size()))
      st.display.replace(pos, raw.size(), *st.hint.host);
  }
  if (st.hint.epoch_seconds) st.stream_ts = normalize::timestamp{*st.hint.epoch_seconds};
  st.attempt = st.hint.attempt;
  st.source_id = static_cast<std::uint32_t>(impl_->in.source_names.size());
  if (impl_->in.source_names.size() < UINT32_MAX) impl_->in.source_names.push_back(st.display);
  if (st.hint.host) impl_->in.hosts.insert(*st.hint.host);
  return st;
}

void collector::add_suspicious(const stream& st, std::string_view body, char level, bool exception_line, std::optional<int> rank,
                               std::optional<int> local_rank, std::optional<normalize::timestamp> own_ts, std::uint64_t line_no) {
  auto& im = *impl_;
  auto sev = extract::classify_line(body, level);
  if (exception_line && sev == extract::suspicion::none) sev = extract::suspicion::strong;
  if (sev == extract::suspicion::none) return;
  auto tmpl = extract::line_template(body);
  auto& in = im.in;
  auto it = im.suspicious_by_template.find(tmpl);
  if (it == im.suspicious_by_template.end()) {
    if (in.suspicious.size() >= im.opt.max_suspicious) return;
    it = im.suspicious_by_template.emplace(tmpl, in.suspicious.size()).first;
    correlate::suspicious_line s;
    s.source = st.display;
    s.text = std::string(text::prefix_utf8(body, limits::kSuspiciousTextBytes));
    s.line_no = line_no;
    s.rank = rank;
    s.strong = sev == extract::suspicion::strong;
    s.tmpl = std::move(tmpl);
    s.count = 0;
    in.suspicious.push_back(std::move(s));
  }
  auto& g = in.suspicious[it->second];
  ++g.count;
  // The group's latest line by its own time: the run must have gone on after it (correlate). Files are read in
  // turn, so the line read last need not be the latest; a line with no time of its own, or on another clock,
  // leaves the group unordered by time.
  if (!own_ts || (g.last_ts && g.last_ts->kind != own_ts->kind)) {
    g.untimed = true;
  } else if (!g.last_ts || own_ts->seconds >= g.last_ts->seconds) {
    g.last_source = st.display;
    g.last_line_no = line_no;
    g.last_ts = own_ts;
  }
  if (!rank && local_rank && !std::binary_search(g.local_ranks.begin(), g.local_ranks.end(), *local_rank) &&
      g.local_ranks.size() < static_cast<std::size_t>(limits::kMaxListedRanks))
    g.local_ranks.insert(std::upper_bound(g.local_ranks.begin(), g.local_ranks.end(), *local_rank), *local_rank);
  if (rank && !std::binary_search(g.ranks.begin(), g.ranks.end(), *rank) && g.ranks.size() < static_cast<std::size_t>(limits::kMaxListedRanks))
    g.ranks.insert(std::upper_bound(g.ranks.begin(), g.ranks.end(), *rank), *rank);
}

void collector::close_stream(stream& st) {
  flush_light(st);
  flush_facts();
  std::vector<stream::pending_line>().swap(st.pending);
  if (st.last_body_raw) {
    st.last_body = impl_->masker.apply(st.last_body);
    impl_->masker.reset_stream();
    st.last_body_raw = false;
  }
  if (st.lines > 0 && impl_->in.stream_ends.size() < limits::kMaxStreamEnds) impl_->in.stream_ends.push_back({st.display, st.last_body, st.last_body_line});
}

void collector::mask_deferred() {
  auto& im = *impl_;
  for (auto& [key, deferred] : im.deferred_last)
    if (auto it = im.in.activity.find(key); deferred && it != im.in.activity.end()) {
      // out of stream order (watch calls this mid-stream): the stream's masking state is left as it was
      it->second.last_line = im.masker.apply_detached(it->second.last_line);
      deferred = false;
    }
}

void collector::note_exception_facts(stream& st, const line_facts& f, const extract::line_note& note, std::size_t before) {
  auto& in = impl_->in;
  bool exception = note.exception_line || !note.user_frame.empty();
  if (exception) {
    auto add = [&](correlate::finding& x, const std::string& key, std::string_view value) {
      if (value.empty()) return;
      for (auto& [k, v] : x.captured)
        if (k == key) {
          v = std::string(value);
          return;
        }
      x.captured.emplace_back(key, std::string(value));
    };
    for (std::size_t i = before; i < in.findings.size(); ++i) {
      add(in.findings[i], "user_frame", note.user_frame);
      add(in.findings[i], "script", note.entry_script);
    }
    if (st.chain != extract::line_note::chain_kind::none && st.chain_finding < before) {
      auto& first = in.findings[st.chain_finding];
      if (first.rank == f.rank && first.local_rank == f.local_rank) {
        add(first, "user_frame", note.user_frame);
        add(first, "script", note.entry_script);
        if (st.chain == extract::line_note::chain_kind::original)
          add(first, "final_exception", text::prefix_utf8(f.body, limits::kFindingTextBytes));
      }
    }
    if (note.exception_line && st.chain == extract::line_note::chain_kind::none) st.chain_start = before;
    if (in.findings.size() > before && st.chain == extract::line_note::chain_kind::none) st.chain_finding = before;
    st.chain = extract::line_note::chain_kind::none;
  }
  if (note.chain != extract::line_note::chain_kind::none && st.chain_finding < in.findings.size()) st.chain = note.chain;
  // "terminate called after throwing" right after the exception: the exception lines of that chain (this
  // stream, this line's rank) were printed by the process that then aborted.
  if (note.aborted && st.chain_start < in.findings.size())
    for (std::size_t i = st.chain_start; i < in.findings.size(); ++i) {
      auto& x = in.findings[i];
      if (x.raised && x.source == st.display && x.rank == f.rank && x.local_rank == f.local_rank) x.aborted = true;
    }
}

// Attribution: the line's own prefixes first, then the path's hints. Never invented.
void collector::attribute(stream& st, const normalize::line_meta& meta, line_facts& f) const {
  std::optional<int> own_rank, own_local;
  attribution_of(st, meta, f.rank, f.local_rank, own_rank, own_local);
  st.prev_rank = own_rank;
  st.prev_local = own_local;
}

// attribute() without its effect on the stream: the rank and local rank of the line (`rank`, `local_rank`),
// and those before the path's hints (`own_rank`, `own_local`: what the next continuation line inherits).
void collector::attribution_of(const stream& st, const normalize::line_meta& meta, std::optional<int>& rank,
                               std::optional<int>& local_rank, std::optional<int>& own_rank, std::optional<int>& own_local) const {
  rank = meta.rank;
  local_rank = meta.local_rank;
  if (!rank && !local_rank && meta.task) rank = meta.task;
  // An indented continuation line (desync report, NVRM block, wrapped message) with no rank of
  // its own belongs to the rank of the line before it in this stream.
  bool continuation = !meta.body.empty() && (meta.body[0] == ' ' || meta.body[0] == '\t');
  if (!rank && !local_rank && continuation) {
    rank = st.prev_rank;
    local_rank = st.prev_local;
  }
  own_rank = rank;
  own_local = local_rank;
  if (!rank && st.hint.rank) rank = st.hint.rank;
  if (!local_rank && st.hint.local_rank) local_rank = st.hint.local_rank;
}

// Whether the extractor of the rank state process() would give this (peeled) line has no record open.
// False when unsure: a rank not seen yet past the rank table's bound shares the stream-level state.
bool collector::rank_idle(stream& st, const normalize::line_meta& meta) const {
  std::optional<int> rank, local, own_rank, own_local;
  attribution_of(st, meta, rank, local, own_rank, own_local);
  return code_idle(st, rank_code(rank, local));
}

bool collector::code_idle(stream& st, std::int64_t code) const {
  if (const auto* rs = find_rank(st, code)) return rs->idle;
  return impl_->in.activity.size() < impl::kMaxRanks;  // a new rank state: its extractor starts idle
}

// The stream's state of rank code `code`, or null, through the stream's direct-mapped cache
// (stream::recent_ranks), which is grown to the next power of two above the number of ranks (up to 4,096
// slots) so that a console's ranks in turn each keep a slot.
collector::stream::rank_state* collector::find_rank(stream& st, std::int64_t code) {
  constexpr std::size_t kMinSlots = 64, kMaxSlots = 4096;
  if (const auto slots = std::clamp(std::bit_ceil(st.ranks.size()), kMinSlots, kMaxSlots); st.recent_ranks.size() < slots)
    st.recent_ranks.assign(slots, {0, nullptr});
  auto& slot = st.recent_ranks[static_cast<std::size_t>(code ^ (code >> 32)) & (st.recent_ranks.size() - 1)];
  if (slot.second && slot.first == code) return slot.second;
  auto it = st.ranks.find(code);
  if (it == st.ranks.end()) return nullptr;
  slot = {code, &it->second};
  return &it->second;
}

// The line's rank state in this stream, created on first use. Per-rank tables are bounded (hostile input:
// a million distinct ranks): ranks past the bound share one stream-level entry (as a line with no rank) for
// their state and activity; their findings keep their own rank.
collector::stream::rank_state& collector::rank_state_for(stream& st, line_facts& f) {
  auto& im = *impl_;
  auto& in = im.in;
  f.code = rank_code(f.rank, f.local_rank);
  if (auto* rs = find_rank(st, f.code)) return *rs;
  // A rank's activity is kept per torchrun attempt: a restarted rank starts its record afresh.
  auto key = rank_key_of(f.rank, f.local_rank, st.attempt);
  if (key && in.activity.size() >= impl::kMaxRanks && !in.activity.count(*key)) {
    im.rank_bound_hit = true;
    f.code = 0;  // the stream-level state, as for a line with no rank
    key.reset();
    if (auto it = st.ranks.find(f.code); it != st.ranks.end()) return it->second;
  }
  auto rs_it = st.ranks.emplace(f.code, stream::rank_state{}).first;
  rs_it->second.key = std::move(key);
  rs_it->second.ex = std::make_unique<extract::extractor>(st.display);
  return rs_it->second;  // (cached by its next find_rank())
}

// Which ranks share a node (local rank -> rank, host -> rank) and the host a prefix names, masked: a host is
// masked even where no line rule knew the context. One lookup per rank while its pairing does not change.
void collector::note_host_and_pairs(stream& st, stream::rank_state& rs, normalize::line_meta& meta, line_facts& f) {
  auto& im = *impl_;
  auto& in = im.in;
  if (f.rank && f.local_rank && meta.rank && rs.paired_local != f.local_rank) {
    if (im.local_rank_pairs < impl::kMaxPairs) im.local_rank_pairs += in.local_to_rank[*f.local_rank].insert(*f.rank).second;
    else im.pairs_bound_hit = true;
    if (f.code != 0) rs.paired_local = f.local_rank;
  }
  if (meta.host) {
    const std::string& raw = *meta.host;
    auto& memo = st.hosts_seen[raw.empty() ? 0 : (raw.size() * 7 + static_cast<unsigned char>(raw.back()) +
                                                  static_cast<unsigned char>(raw[raw.size() / 2]) * 3) & 15];
    if (!memo.raw.empty() && memo.raw == raw) {
      if (memo.masked != memo.raw) im.masker.count_repeated_host();
      meta.host = memo.masked;
    } else {
      memo.raw = raw;
      meta.host = im.masker.mask_host(raw);
      in.hosts.insert(*meta.host);
      memo.masked = *meta.host;
    }
  }
  f.host = meta.host ? meta.host : st.hint.host;
  if (f.host && f.rank && (meta.rank || st.hint.rank) && (f.code == 0 || rs.paired_host != *f.host)) {
    if (im.host_rank_pairs < impl::kMaxPairs) im.host_rank_pairs += in.host_ranks[*f.host].insert(*f.rank).second;
    else im.pairs_bound_hit = true;
    if (f.code != 0) rs.paired_host = *f.host;
  }
}

// The rank's record extractor (tracebacks, agent error blocks, exit lines) sees the line; the stream counts
// ranks with a record open (stream::busy) so the light path knows when a line must take the full path.
void collector::feed_extractor(stream& st, stream::rank_state& rs, std::string_view body, std::uint64_t line_no,
                               extract::line_note& note) {
  auto& in = impl_->in;
  auto& ex = rs.ex;
  bool was_idle = ex->idle();
  std::size_t exits_before = in.exits.size();
  ex->feed(body, line_no, note, in.exits, in.terminated);
  if (st.attempt)
    for (auto i = exits_before; i < in.exits.size(); ++i) in.exits[i].attempt = st.attempt;
  rs.idle = ex->idle();
  if (was_idle != rs.idle) was_idle ? ++st.busy : --st.busy;
}

// The per-rank facts of a line with a body: the stream's and the rank's last line, its time, the line
// count, and progress (step reached, steps planned).
void collector::note_activity(stream& st, stream::rank_state& rs, const line_facts& f,
                              const std::optional<normalize::timestamp>& own_ts, bool light, bool ascii) {
  auto& im = *impl_;
  // In add_block() a light line's text is kept as a view until the block's end (flush_light): the copies of
  // the last line and the step scan are done once per rank and block instead of once per line.
  const bool defer = light && im.deferring;
  // The stream's last line is its last line with a word or a number: a frame of stars or dashes under a
  // banner (torchrun's OMP_NUM_THREADS notice) says nothing about where the stream stopped.
  if (std::any_of(f.body.begin(), f.body.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || (c & 0x80); })) {
    if (defer) {
      st.pending_body = f.body;
      st.has_pending_body = true;
    } else {
      st.last_body.assign(text::prefix_utf8(f.body, limits::kLastLineBytes));
    }
    st.last_body_line = f.line_no;
    st.last_body_raw = light;
  }
  if (!rs.key) return;
  if (!rs.act) {
    rs.act = &im.in.activity[*rs.key];
    rs.deferred = &im.deferred_last[*rs.key];
  }
  auto& act = *rs.act;
  if (++act.lines == 1) {
    act.first_source = st.source_id;
    act.first_line_no = f.line_no;
  }
  if (own_ts) {
    if (!act.first_ts) act.first_ts = own_ts;
    else if (act.last_ts && act.last_ts->kind == own_ts->kind && own_ts->seconds - act.last_ts->seconds > act.gap_seconds) {
      act.gap_seconds = own_ts->seconds - act.last_ts->seconds;
      act.gap_start = act.last_ts;
    }
    act.last_ts = own_ts;
  }
  act.last_source = st.source_id;
  act.last_line_no = f.line_no;
  *rs.deferred = light;
  std::optional<long> planned;
  if (defer) {
    if (!rs.has_pending) {
      rs.has_pending = true;
      st.pending_ranks.push_back(&rs);
    }
    st.pending.push_back({&rs, f.body, ascii, f.shape, f.body_at, f.line_no, own_ts});
    if (f.may_plan) planned = extract::read_planned(f.body);
  } else {
    act.last_line.assign(text::prefix_utf8(f.body, limits::kLastLineBytes));
    auto prog = extract::read_progress(f.body, ascii);
    if (prog.step) {
      act.last_step = prog.step;
      act.steps.note(*prog.step, own_ts);  // step times (stragglers.hpp)
      act.last_step_source = st.source_id;
      act.last_step_line_no = f.line_no;
      act.last_step_ts = own_ts;
    }
    planned = prog.planned;
  }
  if (planned && planned != act.planned_steps) {  // rare: kept as evidence for uneven plans
    act.planned_steps = planned;
    std::string line(text::prefix_utf8(f.body, limits::kLastLineBytes));
    act.planned_line = light ? im.masker.apply_detached(line) : line;
    act.planned_source = st.source_id;
    act.planned_line_no = f.line_no;
  }
}

// A light line that only a run-fact signature's gate literals hit (add_block): what the full path would
// keep of it, its body still raw.
void collector::keep_fact_candidate(const stream& st, const line_facts& f) {
  auto& im = *impl_;
  im.facts.push_back({std::string(f.body), st.display, f.line_no, f.rank, f.local_rank, f.ts, f.ts_inherited});
  im.fact_bytes += f.body.size() + st.display.size();
  if (im.facts.size() >= impl::kFactsKept || im.fact_bytes >= impl::kFactBytes) flush_facts();
}

// The fact candidates, newest first, each masked and matched as the full path would (match_line): a line
// a run-fact fingerprint confirms is a fact line with that signature's fields; the newest kMaxWorkLines
// of those go to inputs::fact_lines in line order (it keeps no more), the older are dropped unread.
void collector::flush_facts() {
  auto& im = *impl_;
  if (im.facts.empty()) return;
  const auto& lib = *im.eng.lib;
  std::vector<correlate::inputs::marked_line> kept;
  for (auto it = im.facts.rbegin(); it != im.facts.rend() && kept.size() < limits::kMaxWorkLines; ++it) {
    // (the body alone, as a light line's kept last line is: no mask rule the gate holds hit the line)
    std::string body = im.masker.apply_detached(it->body);
    thread_local std::vector<match::hit> hits;  // (not im.hits: match_line() calls this with its hits in hand)
    hits.clear();
    if (auto scanned = im.eng.matcher.scan(body, im.scratch, hits); !scanned) {
      if (im.engine_error.empty()) im.engine_error = scanned.error().message;
      break;
    }
    match::fields fields;
    bool fact = false;
    for (const auto& h : hits)
      if (match::gate::run_fact_only(lib.signatures[static_cast<std::size_t>(h.signature)])) {
        fact = true;
        fields.insert(fields.end(), h.captured.begin(), h.captured.end());
      }
    if (!fact) continue;
    kept.push_back({std::move(it->source), std::string(text::prefix_utf8(body, limits::kLastLineBytes)), it->line_no, it->rank,
                    it->local_rank, it->ts, it->ts_inherited, false, std::move(fields)});
  }
  for (auto k = kept.rbegin(); k != kept.rend(); ++k) im.in.keep_fact_line(std::move(*k));
  im.facts.clear();
  if (im.facts.capacity() > impl::kFactsKept) std::vector<impl::fact_candidate>().swap(im.facts);
  im.fact_bytes = 0;
}

namespace {
// Room for pending light lines a stream keeps between blocks: a block holds up to 4,096 lines (128 KiB of
// entries; a stream's list is freed when it closes, and watch, line by line, never defers).
constexpr std::size_t kPendingKept = 4096;
}  // namespace

void collector::flush_light(stream& st) {
  if (st.has_pending_body) {
    st.last_body.assign(text::prefix_utf8(st.pending_body, limits::kLastLineBytes));
    st.has_pending_body = false;
  }
  if (st.pending.empty()) return;
  // Newest first: a rank's first line met is its last line; its step is the newest line's with one
  // (read_progress(line).step in line order, walked back), read until found.
  std::size_t open = st.pending_ranks.size();  // ranks whose step is still looked for
  for (auto it = st.pending.rbegin(); it != st.pending.rend() && open > 0; ++it) {
    auto* rs = it->rank;
    if (rs->has_pending) {
      rs->has_pending = false;
      rs->act->last_line.assign(text::prefix_utf8(it->body, limits::kLastLineBytes));
    }
    if (rs->step_found) continue;
    if (auto step = it->shape ? impl_->steps.step_of(it->shape, it->body_at, it->body) : extract::read_step(it->body, it->ascii)) {
      rs->act->last_step = step;
      rs->act->last_step_source = st.source_id;
      rs->act->last_step_line_no = it->line_no;
      rs->act->last_step_ts = it->ts;
      rs->step_found = true;
      --open;
    }
  }
  // (The walk stops early only when every rank's step was found, each after its last line.)
  // Step times (stragglers.hpp): each timed line's step, in line order (a line without a time gives none).
  for (const auto& p : st.pending)
    if (p.ts)
      if (auto step = p.shape ? impl_->steps.step_of(p.shape, p.body_at, p.body) : extract::read_step(p.body, p.ascii))
        p.rank->act->steps.note(*step, p.ts);
  for (auto* rs : st.pending_ranks) rs->has_pending = rs->step_found = false;
  // Bounded memory: the list keeps at most kPendingKept entries of room between blocks.
  if (st.pending.capacity() > kPendingKept) std::vector<stream::pending_line>().swap(st.pending);
  else st.pending.clear();
  st.pending_ranks.clear();
}

// Matching: the full database on the body, then which hits the line keeps as findings. Returns the attempt a
// restart line (a signature tagged event.restart) starts, if the line is one.
std::optional<int> collector::match_line(stream& st, const line_facts& f, char level, extract::line_note& note) {
  auto& im = *impl_;
  auto& in = im.in;
  const auto& lib = *im.eng.lib;
  auto sig_of = [&](const match::hit& h) -> const kb::signature& { return lib.signatures[static_cast<std::size_t>(h.signature)]; };
  auto& hits = im.hits;
  hits.clear();
  if (auto scanned = im.eng.matcher.scan(f.body, im.scratch, hits); !scanned) {
    if (im.engine_error.empty()) im.engine_error = scanned.error().message;
    return std::nullopt;
  }
  if (note.skip_match) {  // inside a stack: only signatures written for stack lines count
    std::erase_if(hits, [&](const match::hit& h) { return !sig_of(h).match_in_stack; });
    if (hits.empty()) return std::nullopt;
  }
  // A work line (a benign signature tagged activity.work: saving a checkpoint, evaluating) is kept as the
  // rank's sign of what it was doing; it explains nothing else on the line ("saving checkpoint failed: ...").
  auto marked = [&](bool job, match::fields fields = {}) {
    return correlate::inputs::marked_line{st.display, std::string(text::prefix_utf8(f.body, limits::kLastLineBytes)), f.line_no, f.rank,
                                          f.local_rank, f.ts, f.ts_inherited, job, std::move(fields)};
  };
  auto fields_of = [&](auto is) {
    match::fields out;
    for (const auto& h : hits)
      if (is(h)) out.insert(out.end(), h.captured.begin(), h.captured.end());
    return out;
  };
  {
    auto is_work = [&](const match::hit& h) { return sig_of(h).is_benign() && sig_of(h).has_tag("activity.work"); };
    if (std::any_of(hits.begin(), hits.end(), is_work)) {
      in.keep_work_line(marked(false, fields_of(is_work)));
      std::erase_if(hits, is_work);  // with nothing left the line is tested as one no signature matched
    }
    // A fact line (a progress line, a checkpoint written) is kept with its fields and, like a work line,
    // explains nothing else on it (a Megatron iteration line may also be a divergence's evidence).
    auto is_fact = [&](const match::hit& h) { return sig_of(h).is_benign() && sig_of(h).has_tag("fact.run"); };
    if (std::any_of(hits.begin(), hits.end(), is_fact)) {
      flush_facts();  // the fact candidates before it first: inputs::fact_lines is in line order
      in.keep_fact_line(marked(false, fields_of(is_fact)));
      std::erase_if(hits, is_fact);
    }
  }
  // A benign signature (a message known from healthy runs) explains the whole line; a family or generic one
  // ("training finished", "retrying in") only when no cause or symptom matches it too.
  const bool other_hit = std::any_of(hits.begin(), hits.end(), [&](const match::hit& h) { return !sig_of(h).is_benign(); });
  std::erase_if(hits, [&](const match::hit& h) { return other_hit && sig_of(h).is_benign() && sig_of(h).layer_rank() > 0; });
  if (std::any_of(hits.begin(), hits.end(), [&](const match::hit& h) { return sig_of(h).is_benign(); })) {
    ++in.benign_lines;
    if (std::any_of(hits.begin(), hits.end(), [&](const match::hit& h) { return sig_of(h).has_tag("event.handled"); })) {
      st.handled_at = f.line_no;
      st.handled_rank = f.rank;
      st.handled_local = f.local_rank;
    }
    bool job = std::any_of(hits.begin(), hits.end(), [&](const match::hit& h) { return sig_of(h).has_tag("outcome.success"); });
    bool rank_done = std::any_of(hits.begin(), hits.end(), [&](const match::hit& h) { return sig_of(h).has_tag("outcome.rank_done"); });
    if (job || rank_done) in.keep_success_end(marked(job));
    return std::nullopt;
  }
  // Specific > family > generic: a less specific signature on a line that a more specific one
  // explains describes the same event less precisely.
  int best_layer = 2;
  for (const auto& h : hits) best_layer = std::min(best_layer, sig_of(h).layer_rank());
  std::erase_if(hits, [&](const match::hit& h) { return sig_of(h).layer_rank() > best_layer; });
  bool symptom_on_line = false, specific_cause_on_line = false;
  int top_cause = 0;
  for (const auto& h : hits) {
    const auto& hs = sig_of(h);
    symptom_on_line |= !hs.is_cause();
    specific_cause_on_line |= hs.is_cause() && hs.priority > kb::kCatchAllCausePriority;
    if (hs.is_cause()) top_cause = std::max(top_cause, hs.priority);
  }
  auto restart_to = restart_attempt(st, hits);
  bool kept_any = false;
  for (auto& h : hits) {
    const auto& sig = sig_of(h);
    // A catch-all cause on a line that a symptom or a specific cause explains adds nothing: the line is that
    // symptom or that cause.
    if (sig.is_cause() && sig.layer_rank() > 0 && sig.priority <= kb::kCatchAllCausePriority && (symptom_on_line || specific_cause_on_line))
      continue;
    // One line is one event: a weaker cause on the same line (a generic Xid rule beside the Xid 79
    // rule) describes the same event less precisely.
    if (sig.is_cause() && sig.priority < top_cause) continue;
    keep_finding(st, f, h, note);
    kept_any = true;
  }
  if (!kept_any) add_suspicious(st, f.body, level, note.exception_line, f.rank, f.local_rank, f.ts_inherited ? std::nullopt : f.ts, f.line_no);
  return restart_to;
}

// A restart line (a signature tagged event.restart: torchelastic's "Worker group FAILED. K/M attempts
// left; will restart worker group") ends an attempt: this stream's later lines belong to attempt M-K+1
// (every node's agent prints the same numbers, so a combined srun output counts each restart once).
std::optional<int> collector::restart_attempt(const stream& st, const std::vector<match::hit>& hits) const {
  const auto& lib = *impl_->eng.lib;
  for (const auto& h : hits) {
    const auto& tags = lib.signatures[static_cast<std::size_t>(h.signature)].tags;
    if (std::find(tags.begin(), tags.end(), "event.restart") == tags.end()) continue;
    std::string left, max;
    for (const auto& [k, v] : h.captured) {
      if (k == "left") left = v;
      if (k == "max_restarts") max = v;
    }
    long l = std::strtol(left.c_str(), nullptr, 10), m = std::strtol(max.c_str(), nullptr, 10);
    return !left.empty() && !max.empty() && m >= l && m - l < impl::kMaxRestartSpan ? static_cast<int>(m - l + 1) : st.attempt.value_or(0) + 1;
  }
  return std::nullopt;
}

// One hit becomes a finding, within the bounds: at most kMaxPerKey per (signature, rank, attempt) (the rest
// count as duplicates of the last one) and kMaxFindings in all.
void collector::keep_finding(const stream& st, const line_facts& f, match::hit& h, const extract::line_note& note) {
  auto& im = *impl_;
  auto& in = im.in;
  std::tuple<int, int, int> pk{h.signature, f.rank.value_or(f.local_rank ? -2 - *f.local_rank : -1), st.attempt.value_or(-1)};
  auto pit = im.per_key.find(pk);
  if (pit == im.per_key.end() && in.findings.size() >= impl::kMaxFindings) {
    im.findings_bound_hit = true;
    if (auto f1 = im.first_of_signature.find(h.signature); f1 != im.first_of_signature.end()) ++in.findings[f1->second].duplicates;
    return;
  }
  auto& slot = pit != im.per_key.end() ? pit->second : im.per_key[pk];
  if (++slot.first > impl::kMaxPerKey) {
    ++in.findings[slot.second].duplicates;
    return;
  }
  slot.second = in.findings.size();
  im.first_of_signature.emplace(h.signature, slot.second);
  correlate::finding out;
  out.signature = h.signature;
  out.captured = std::move(h.captured);
  out.rank = f.rank;
  out.local_rank = f.local_rank;
  out.host = f.host;
  out.ts = f.ts;
  out.ts_inherited = f.ts_inherited;
  out.source = st.display;
  out.line_no = f.line_no;
  out.attempt = st.attempt;
  out.step_at = f.step_at;
  out.raised = note.exception_line;
  out.handled = f.handled;
  out.text = std::string(text::prefix_utf8(f.body, limits::kFindingTextBytes));
  if (!note.collective.empty()) out.captured.emplace_back("collective", note.collective);
  if (!note.calls.empty()) out.captured.emplace_back("calls", note.calls);
  if (!out.ts || out.ts_inherited)
    if (auto own = line::time_in_message(out.text)) {
      out.ts = own;
      out.ts_inherited = false;
    }
  in.findings.push_back(std::move(out));
}

// The stream's later lines belong to attempt `to`; its earlier lines are attempt 0's when nothing said
// otherwise, and every rank's activity record starts afresh.
void collector::start_attempt(stream& st, int to) {
  auto& im = *impl_;
  auto& in = im.in;
  if (!st.attempt) {
    for (auto& f : in.findings)
      if (!f.attempt && f.source == st.display) f.attempt = 0;
    for (auto& e : in.exits)
      if (!e.attempt && e.source == st.display) e.attempt = 0;
  }
  const bool was_known = st.attempt.has_value();
  st.attempt = to;
  for (auto& [code, rs] : st.ranks) {
    if (!rs.key) continue;
    if (!was_known && !rs.key->attempt) {  // what this rank wrote so far was attempt 0
      // Moved, not erased: another stream's rank state may point at the entry (std::map nodes are stable).
      auto at0 = *rs.key;
      at0.attempt = 0;
      auto it = in.activity.find(*rs.key);
      if (it != in.activity.end() && !in.activity.count(at0)) {
        in.activity.emplace(at0, std::move(it->second));
        it->second = correlate::rank_activity{};
        if (auto d = im.deferred_last.find(*rs.key); d != im.deferred_last.end()) {
          im.deferred_last[at0] = d->second;
          d->second = false;
        }
      }
    }
    rs.key->attempt = st.attempt;
    rs.act = nullptr;
    rs.deferred = nullptr;
  }
}

}  // namespace ff::pipeline
