// Wires the stages together for `firstfault diagnose`. No printing here.
#include "firstfault/pipeline.hpp"

#include <fmt/format.h>
#include <re2/re2.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "firstfault/extract.hpp"
#include "firstfault/limits.hpp"
#include "firstfault/match.hpp"
#include "firstfault/normalize.hpp"
#include "firstfault/text.hpp"

namespace ff::pipeline {

namespace {

// A line with no time of its own in its prefix may print one in its message: slurmstepd's "*** STEP 4.0 ON
// node CANCELLED AT 2021-05-27T21:42:11 ***" (src/slurmd/slurmstepd/req.c, "%s ON %s CANCELLED AT %s").
// That is the line's own time, not the earlier line's it would inherit. Only the "AT <ISO time>" form is
// read: a date elsewhere in a message (a checkpoint's name) is not the time of the line.
std::optional<normalize::timestamp> time_in_message(std::string_view text) {
  for (auto at = text.find(" AT "); at != std::string_view::npos; at = text.find(" AT ", at + 1)) {
    auto t = text.substr(at + 4, 19);
    if (t.size() == 19 && normalize::detail::iso_plain_shape(t)) return normalize::detail::parse_iso_plain(t);
  }
  return std::nullopt;
}
std::optional<correlate::rank_key> rank_key_of(const std::optional<int>& rank, const std::optional<int>& local_rank,
                                               const std::optional<int>& attempt) {
  if (rank) return correlate::rank_key::global_rank(*rank, attempt);
  if (local_rank) return correlate::rank_key::local_rank(*local_rank, attempt);
  return std::nullopt;
}

// The rank and local rank as one number, for the per-stream table (no map node built per line)
std::int64_t rank_code(const std::optional<int>& rank, const std::optional<int>& local_rank) {
  if (rank) return (std::int64_t{1} << 32) | static_cast<std::uint32_t>(*rank);
  if (local_rank) return (std::int64_t{2} << 32) | static_cast<std::uint32_t>(*local_rank);
  return 0;
}
}  // namespace

result<engine> engine::build(const kb::library& lib) {
  auto cat_r = normalize::prefix_catalog::load(lib.prefix_files);
  if (!cat_r) return cat_r.error();
  auto m_r = match::matcher::compile(lib);
  if (!m_r) return m_r.error();
  auto g_r = match::gate::build(lib, gate_extras());
  if (!g_r) return g_r.error();
  engine e;
  e.gate = std::move(g_r).value();
  e.lib = &lib;
  e.prefixes = std::move(cat_r).value();
  e.matcher = std::move(m_r).value();
  return e;
}

std::vector<std::string> engine::gate_extras() {
  std::vector<std::string> extra = extract::gate_patterns();
  for (auto& g : mask::gate_patterns({})) extra.push_back(std::move(g));
  return extra;
}

result<run> diagnose(const std::vector<std::string>& paths, const kb::library& lib, const options& opt) {
  auto e = engine::build(lib);
  if (!e) return e.error();
  return diagnose(paths, e.value(), opt);
}

namespace {
// True when, by hand scans, every prefix host form on `line` names `host`: none at the line's start (a pdsh
// or syslog host there, around an NCCL header, is a second host) and every NCCL header names `host` (two
// headers in a row: the peel keeps the inner one). False: maybe another host (mask::prefix_host_spans).
bool host_forms_name_only(std::string_view line, std::string_view host) {
  return !mask::prefix_host_form(line, true) && mask::nccl_header_hosts_are(line, host);
}
}  // namespace

struct collector::shape_facts {
  bool bracket_host_port = false, may_plan = true;
  // mask::prefix_host_spans of the line: how many (0: mask::prefix_host_form is false), and the first
  // (offset, length); digit-blind like the rest
  std::size_t host_forms = 0, host_at = 0, host_len = 0;
  std::size_t token_len = 0;
  std::string token_shape;
  // The words of the catalogue's prefixes of a line of this shape that can be a learnt host
  // (masker::words_that_may_be_learnt_hosts), as of `hosts_seen` learnt hosts (prefix_names_other_host)
  mutable std::size_t hosts_seen = SIZE_MAX;
  mutable std::vector<std::pair<std::size_t, std::size_t>> prefix_host_words;
};

struct collector::impl {
  const engine& eng;
  const options opt;  // a copy: callers (tests) pass a temporary
  match::scratch scratch;
  match::gate_scratch gate_scratch;
  mask::masker masker;
  // The light path is off in exact mode, without a usable gate, and with custom mask rules (their
  // patterns are not in the engine's gate).
  bool light_ok;
  std::map<correlate::rank_key, bool> deferred_last;  // its activity.last_line is still unmasked
  correlate::inputs in;
  std::vector<match::hit> hits;
  line_block head;  // add_lines' batch, for one gate scan of all of it
  // Memory stays bounded however long the input: after kMaxPerKey findings of one signature on one
  // rank, further ones only count as repeats of the last one kept.
  static constexpr int kMaxPerKey = 64;
  std::map<std::tuple<int, int, int>, std::pair<int, std::size_t>> per_key;  // (signature, rank, attempt) -> (count, last index)
  std::map<std::string, std::size_t> suspicious_by_template;  // template -> index in in.suspicious
  static constexpr std::size_t kMaxRanks = 16384;  // distinct ranks with their own per-rank state
  // Findings kept in all (each holds up to ~2.3 KB: line, captures, source): past the bound a finding only
  // counts as a repeat of the first one of its signature. With the pair budgets below, the collector's
  // tables stay under ~40 MiB whatever the input (the masker's own tables: mask.hpp).
  static constexpr std::size_t kMaxFindings = 8192;
  static constexpr std::size_t kMaxPairs = 65536;  // host -> rank and local rank -> rank pairs, each table
  // Stack tops (the innermost frame of each traceback or py-spy dump) kept per rank and ranks with any: the
  // odd-rank-out rule needs a few dumps per rank, not every one of a hang that was dumped every second.
  static constexpr std::size_t kMaxStackTopRanks = 65536, kMaxStackTopsPerRank = 64;
  // A restart line's "K/M attempts left" spans at most this many attempts (a larger M is a garbled line).
  static constexpr long kMaxRestartSpan = 100000;
  std::size_t host_rank_pairs = 0, local_rank_pairs = 0;
  std::map<int, std::size_t> first_of_signature;  // signature -> index of its first finding
  bool rank_bound_hit = false, findings_bound_hit = false, pairs_bound_hit = false;
  std::string engine_error;  // the first matching-engine error: the run is an error, never "healthy"
  bool deferring = false;    // in add_block(): a light line's text stays valid until flush_light() at the block's end
  // What the light path asks of a line that depends only on its shape (normalize::line_meta::shape_id: the
  // line with its digits zeroed), kept per shape: the host rules' and "[host]:port" checks (their regexps
  // tell no digit from another), the learner's token of the catalogue's body (the body starts at the
  // same byte for every line of a shape; the token's classes treat all digits alike) and whether the body
  // can name a planned step count (extract::may_plan). A unit test checks
  // each of these gives the same answer when a line's digits change. Bounded: cleared past kMaxShapes.
  static constexpr std::size_t kMaxShapes = 16384;
  std::unordered_map<std::uint64_t, shape_facts> shapes;
  // A direct-mapped cache in front of the map (ids are consecutive per thread; a console has a few dozen
  // shapes): node pointers stay valid until the map is cleared, which clears this too.
  struct recent {
    std::uint64_t id = 0;
    const shape_facts* facts = nullptr;
  };
  std::array<recent, 256> recent_shapes{};
  const shape_facts& facts_of(std::uint64_t id, std::string_view line, std::string_view body) {
    auto& slot = recent_shapes[id & 255];
    if (slot.id == id) return *slot.facts;
    auto it = shapes.find(id);
    if (it != shapes.end()) {
      slot = {id, &it->second};
      return it->second;
    }
    if (shapes.size() >= kMaxShapes) {
      shapes.clear();
      recent_shapes.fill(recent{});
    }
    shape_facts f;
    f.bracket_host_port = mask::bracket_host_port_candidate(line);
    thread_local std::vector<std::pair<std::size_t, std::size_t>> spans;
    mask::prefix_host_spans(line, spans);
    f.host_forms = spans.size();
    if (!spans.empty()) f.host_at = spans[0].first, f.host_len = spans[0].second;
    auto tok = normalize::leading_token(body);
    f.token_len = tok.first.size();
    f.token_shape = std::move(tok.second);
    f.may_plan = extract::may_plan(body);  // of the catalogue's body: true for it when true for any part of it
    const shape_facts& kept = shapes.emplace(id, std::move(f)).first->second;
    slot = {id, &kept};
    return kept;
  }
  // The step of a light line, as extract::read_step(body, true) reads it, with the digits' place kept per
  // (line shape, body start): find_step() is digit-blind, so every line of a shape with its body at the
  // same byte has its step (or none) at the same place. (read_step() on a console of 1,024 interleaved
  // ranks ran for nearly every line, its rank's newest in a block: ~10% of the instructions.) Direct
  // mapped, the whole key kept: a slot taken by another shape is only asked again.
  struct step_slot {
    std::uint64_t key = 0;  // shape id << 8 | body start; 0: empty (shape ids start at 1)
    extract::step_span span;
  };
  std::array<step_slot, 1024> step_slots{};
  std::optional<long> step_of(std::uint64_t shape, std::uint8_t body_at, std::string_view body) {
    const std::uint64_t key = shape << 8 | body_at;
    auto& slot = step_slots[(key ^ (key >> 10)) & (step_slots.size() - 1)];
    if (slot.key != key) slot = {key, extract::find_step(body)};
    const auto& sp = slot.span;
    if (!sp.found) return std::nullopt;
    if (sp.at + sp.len > body.size()) return extract::read_step(body, true);  // (cannot happen: same shape, same body)
    return extract::step_value(body.substr(sp.at, sp.len));
  }
  impl(const engine& e, const options& o)
      : eng(e), opt(o), scratch(e.matcher), gate_scratch(e.gate), masker(o.mask),
        // (--redact reads every line in full: the gate holds no host context, so a host named on a line
        // it lets through would not be learnt; identity masking is the rare, thorough mode)
        light_ok(!o.exact && e.gate.enabled() && o.mask.extra.empty() && !(o.mask.enabled && o.mask.redact)) {}
};

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

correlate::diagnosis diagnose_inputs(const correlate::inputs& in, const kb::library& lib) {
  // torchrun restarts: each attempt is diagnosed on its own, and the verdict is the last attempt's (the one
  // that ended the job); the others are listed with their own cause and rank.
  // https://pytorch.org/docs/stable/elastic/run.html (--max-restarts; --log-dir keeps attempt_N per restart)
  std::set<int> attempts;
  for (const auto& f : in.findings)
    if (f.attempt) attempts.insert(*f.attempt);
  for (const auto& e : in.exits)
    if (e.attempt) attempts.insert(*e.attempt);
  if (attempts.size() < 2) return correlate::correlate(in, lib);
  // Bounded work and output: the first and the last attempts are diagnosed (a job restarted thousands of
  // times repeats itself); the report says how many there were.
  constexpr std::size_t kEnds = 8;
  std::vector<int> chosen(attempts.begin(), attempts.end());
  if (chosen.size() > 2 * kEnds) chosen.erase(chosen.begin() + kEnds, chosen.end() - kEnds);
  correlate::diagnosis last;
  std::vector<correlate::diagnosis::attempt_summary> list;
  for (int a : chosen) {
    auto one = in;
    one.only_attempt = a;
    auto d = correlate::correlate(std::move(one), lib);
    correlate::diagnosis::attempt_summary s;
    s.attempt = a;
    s.verdict = d.verdict;
    s.kind = d.kind;
    s.title = d.title;
    s.signature = d.signature;
    s.rank_rule = d.initiating_rule;
    s.initiating_rank = d.initiating_rank;
    if (!d.evidence_lines.empty()) s.first = d.evidence_lines.front();
    list.push_back(std::move(s));
    last = std::move(d);
  }
  last.attempts = std::move(list);
  last.attempts_total = attempts.size();
  return last;
}

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
  for (auto* marked : {&in.work_lines, &in.success_ends})
    for (auto& w : *marked) {
      m.rescan(w.source);
      m.rescan(w.text);
    }
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

void collector::add_suspicious(const stream& st, std::string_view body, char level, bool exception_line,
                               std::optional<int> rank, std::uint64_t line_no) {
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
  if (rank && !std::binary_search(g.ranks.begin(), g.ranks.end(), *rank) && g.ranks.size() < static_cast<std::size_t>(limits::kMaxListedRanks))
    g.ranks.insert(std::upper_bound(g.ranks.begin(), g.ranks.end(), *rank), *rank);
}

std::size_t collector::add_line(stream& st, std::string_view raw_text, std::uint64_t line_no) {
  std::string clean = prepare(raw_text);
  normalize::line_meta meta;  // peeled once: the learner observes the catalogue's body, then adds its own layer
  impl_->eng.prefixes.normalize_fast(clean, meta);
  observe_and_peel(st, meta);
  return process(st, meta, line_no, false);
}

std::string collector::prepare(std::string_view raw_text) {
  // Masking happens here, before anything else sees the line: no output can carry the raw value.
  return impl_->masker.apply(text::sanitize(raw_text));
}

void collector::close_stream(stream& st) {
  flush_light(st);
  std::vector<stream::pending_line>().swap(st.pending);
  if (st.last_body_raw) {
    st.last_body = impl_->masker.apply(st.last_body);
    impl_->masker.reset_stream();
    st.last_body_raw = false;
  }
  if (st.lines > 0 && impl_->in.stream_ends.size() < limits::kMaxStreamEnds) impl_->in.stream_ends.push_back({st.display, st.last_body, st.last_body_line});
}

std::size_t collector::add_line_gated(stream& st, std::string_view raw_text, std::uint64_t line_no) {
  return add_line_gated(st, raw_text, line_no, -1, -1);
}

void line_block::add(std::string_view line, std::uint64_t line_no, bool plain) {
  starts.push_back(static_cast<std::uint32_t>(text.size()));
  line_nos.push_back(line_no);
  known_plain.push_back(plain ? 1 : 0);
  text.append(line);
  text.push_back('\n');
}

std::string_view line_block::line(std::size_t i) const {
  std::size_t b = starts[i], e = (i + 1 < starts.size() ? starts[i + 1] : text.size()) - 1;  // without its '\n'
  return std::string_view(text).substr(b, e - b);
}

void line_block::clear() {
  text.clear();
  starts.clear();
  line_nos.clear();
  known_plain.clear();
  gated = false;
}

status line_block::scan_gate(const engine& eng, match::gate_scratch& gate_scratch) {
  auto g = eng.gate.hit_lines(text, starts, gate_hit, gate_scratch);
  gated = static_cast<bool>(g);
  return g;
}

std::size_t collector::add_block(stream& st, line_block& blk) {
  auto& im = *impl_;
  std::size_t n = 0;
  if (blk.empty()) return 0;
  if (!im.light_ok) {
    for (std::size_t i = 0; i < blk.size(); ++i) n += add_line(st, blk.line(i), blk.line_nos[i]);
    return n;
  }
  // One gate scan per block instead of one per line (unless the reader ran it: collect()); each line then
  // takes the path add_line_gated() would.
  if (!blk.gated)
    if (auto s = blk.scan_gate(im.eng, im.gate_scratch); !s) {
      if (im.engine_error.empty()) im.engine_error = s.error().message;
      return 0;
    }
  im.deferring = true;
  // (The reader found most lines printable ASCII on its way to their ends; add_line_gated looks at the others.)
  for (std::size_t i = 0; i < blk.size(); ++i)
    n += add_line_gated(st, blk.line(i), blk.line_nos[i], blk.gate_hit[i], blk.known_plain[i] ? 1 : -1);
  im.deferring = false;
  flush_light(st);
  return n;
}

std::size_t collector::add_line_gated(stream& st, std::string_view raw_text, std::uint64_t line_no, int gate_hit, int plain) {
  auto& im = *impl_;
  // The full path when the line can matter: the masker's next line depends on this one, the line holds
  // bytes that sanitising would change, the gate hits it, or (add_light) its rank has a record open.
  if (plain < 0) plain = text::is_plain(raw_text) ? 1 : text::is_clean(raw_text) ? 2 : 0;
  if (!im.light_ok || im.masker.line_state_open() || !plain) return add_line(st, raw_text, line_no);
  if (gate_hit < 0) {
    auto hit = im.eng.gate.hit(raw_text, im.gate_scratch);
    if (!hit) {
      if (im.engine_error.empty()) im.engine_error = hit.error().message;
      return 0;
    }
    gate_hit = hit.value();
  }
  if (gate_hit) return add_line(st, raw_text, line_no);
  // Peeled here, by the thread that uses the peel. (The reader thread peeled whole blocks ahead until
  // stop 40: 160 bytes of line_meta per line, 655 KB a block, written on one core and read on the other,
  // cost more than the peel it moved: the 210 MB console took 0.85 s CPU / 0.58 s wall with two threads,
  // 0.77 / 0.49 without; one thread, 1,024 rank files 1.79 -> 1.60 s.)
  normalize::line_meta meta;
  im.eng.prefixes.normalize_fast(raw_text, meta);
  const shape_facts* facts = meta.shape_id ? &im.facts_of(meta.shape_id, raw_text, meta.body) : nullptr;
  // (the host checks here and in add_light/add_lines serve identity masking: without --redact no host is
  // learnt, so they are skipped; with it, light_ok is false and every line takes the full path)
  if (im.masker.masks_identity() && (facts ? facts->bracket_host_port : mask::bracket_host_port_candidate(raw_text)))
    return add_line(st, raw_text, line_no);
  return add_light(st, raw_text, line_no, meta, plain, nullptr, -1, false, facts);
}

// A line the gate let through (plain, no gate hit, no masker state open), peeled by the catalogue into
// `meta`: the light path unless its rank has a record open, its prefix has an error level or it names a
// host the masker learns from. `masked`: the line masked already (add_lines' first batch: the learner has
// seen it, and `meta` is its full peel); nullptr: `meta` is the raw line's catalogue peel.
std::size_t collector::add_light(stream& st, std::string_view raw_text, std::uint64_t line_no, normalize::line_meta& meta,
                                 int plain, const std::string* masked, int host_hit, bool observed, const shape_facts* facts) {
  auto& im = *impl_;
  // The full path for a line the learner has seen raw (add_lines' batch): masked out of stream order, so
  // the masker's line state (a secret running on, a key block) is left to the line after the batch's
  // last; peeled again from the masked text, without a second observation.
  auto full = [&]() -> std::size_t {  // (masked or observed)
    return masked ? process(st, *masked, line_no) : process(st, im.masker.apply_detached(text::sanitize(raw_text)), line_no);
  };
  // A record (traceback, agent error block) is open in this stream: its lines must reach its extractor.
  // That is the extractor of the line's rank (process()), so only the lines of a rank with an open record
  // need the full path; before, every line of the stream did, and a rank that died mid-console (its
  // traceback never closed) sent the rest of the console through the full path (the 210 MB bench console
  // read 5x slower per byte than the 105 MB one). Decided here only when the catalogue names the rank
  // (the learner's layer cannot change it then); otherwise, or past the rank table's bound, any open
  // record in the stream sends the line the full way.
  // Decided with the rank attribute() will give the line (collector::rank_idle): before, a line whose
  // catalogue peel named no rank took the full path whenever any record in the stream was open (a console
  // whose ranks print "[default3]:... [rank579] ..." read half of itself in full after the agent's error
  // block, 41% of its instructions). A line the learner would peel takes the full path as before: that path
  // masks first, and the learner's token in the masked text can give another rank (a host in it masked to
  // "node-3" reads as rank 3; found by review), so its rank is known only there.
  if (st.busy > 0 && (masked || observed)) {  // add_lines' batch, peeled by the learner already: its catalogue rank only
    if (!meta.rank || !code_idle(st, rank_code(meta.rank, meta.local_rank))) return full();
  }
  if (!masked && !observed) {
    // A line whose learner token masking could change takes the full path: the learner would count the raw
    // token where the full path (and --exact) counts the masked one ("gpu0 | " against "node-1 | "), and
    // could peel it into another rank (found by review).
    std::size_t tok_len = 0;
    const std::string* tok_shape = nullptr;
    if (token_may_mask(meta, facts, tok_len, tok_shape) || (im.masker.masks_identity() && prefix_names_other_host(raw_text, meta, facts)))
      return add_line(st, raw_text, line_no);
    if (st.busy > 0 && (st.learner.would_peel(tok_len, *tok_shape) || !rank_idle(st, meta))) return add_line(st, raw_text, line_no);
    observe_and_peel(st, meta, facts);  // the catalogue's layers again would peel the same: only what the learner adds
  }
  // An error level in the prefix makes the line suspicious whatever its words: full path (the learner
  // has seen it already).
  bool escalate = meta.level == 'E' || meta.level == 'F' || meta.level == 'C';
  // A host form the masker learns from (NCCL header, syslog, pdsh) that no prefix peeled: full path.
  if (!im.masker.masks_identity()) {
    // no host to learn
  } else if (!escalate && !meta.host) {
    escalate = host_hit >= 0 ? host_hit != 0 : facts ? facts->host_forms != 0 : mask::prefix_host_form(raw_text);
  } else if (!escalate && host_hit < 0) {  // (add_lines decided its lines' host forms: host_hit >= 0)
    learn_other_hosts(raw_text, *meta.host, facts);
  }
  if (escalate) return masked || observed ? full() : process(st, prepare(raw_text), line_no);
  return process(st, meta, line_no, true, plain == 1, masked == nullptr, facts ? facts->may_plan : true,
                 masked ? nullptr : raw_text.data());
}

// A line whose peel found a host can hold other prefix host forms: a pdsh name or a syslog host around an
// NCCL header (the peel keeps the innermost host). Masking the line would learn each of them, so the light
// path learns them here, in line order; a host named elsewhere later is then masked. Per line shape, the
// usual case (no form, or one naming the peeled host) costs a compare; a line of no shape (the first of its
// shape) with no form at its start, whose NCCL headers all name the peeled host, a hand scan.
void collector::learn_other_hosts(std::string_view line, const std::string& peeled, const shape_facts* facts) {
  if (facts ? facts->host_forms == 0 || (facts->host_forms == 1 && line.substr(facts->host_at, facts->host_len) == peeled)
            : host_forms_name_only(line, peeled))
    return;
  thread_local std::vector<std::pair<std::size_t, std::size_t>> spans;
  mask::prefix_host_spans(line, spans);
  for (const auto& [at, len] : spans)
    if (line.substr(at, len) != peeled) impl_->masker.mask_host(std::string(line.substr(at, len)));
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

std::size_t collector::add_lines(stream& st, const std::vector<std::pair<std::string, std::uint64_t>>& raw) {
  auto& im = *impl_;
  // Learn unknown prefixes from the whole batch first, so that its first lines are peeled too. A line the
  // gate lets through then takes the light path: no extractor, matching or suspicious-line test. (All of
  // them the full way cost 27% of the CPU time of 1,024 per-rank files: 256 lines of each.) A line that
  // neither gate hits cannot change the masker's state, and what masking would change in it (a learnt
  // host, an address) is not what the learner reads: it is learnt from raw, as every line after the batch
  // is, and masked only if it is kept or takes the full path. The others are masked first and learnt from
  // masked, as --exact does. (Masking all of them was 12% of the instructions on 24 per-rank files: about
  // 15,000 per line.)
  std::vector<std::string> clean;
  clean.reserve(raw.size());
  std::vector<normalize::line_meta> metas(raw.size());
  std::vector<char> plain(raw.size(), 0), host(raw.size(), 1), unmasked(raw.size(), 0);
  // The gate scans the batch once, as add_block does (a scan per line cost about 1,300 instructions of
  // Vectorscan's set-up each: 2% of 24 per-rank files), when the batch is no larger than a block: its copy
  // must not add much memory to a batch of long lines (256 lines of up to 1 MiB each). Else line by line.
  std::size_t batch_bytes = 0;
  for (const auto& r : raw) batch_bytes += r.first.size() + 1;
  const bool batch_scan = im.light_ok && batch_bytes <= line_block::kBytes;
  if (batch_scan) {
    im.head.clear();
    for (const auto& [line, no] : raw) im.head.add(line, no);
    if (auto s = im.head.scan_gate(im.eng, im.gate_scratch); !s) {
      if (im.engine_error.empty()) im.engine_error = s.error().message;
      return 0;
    }
  }
  for (std::size_t i = 0; i < raw.size(); ++i) {
    std::string_view text = raw[i].first;
    if (im.light_ok && !im.masker.line_state_open()) {
      plain[i] = text::is_plain(text) ? 1 : text::is_clean(text) ? 2 : 0;
      if (plain[i]) {
        bool gate_hit = false;
        if (batch_scan) {
          gate_hit = im.head.gate_hit[i];
        } else {
          auto g = im.eng.gate.hit(text, im.gate_scratch);
          if (!g) {
            if (im.engine_error.empty()) im.engine_error = g.error().message;
            return 0;
          }
          gate_hit = g.value();
        }
        // The raw line's peel: its shape's facts answer the host checks, and a line left raw keeps it.
        if (!gate_hit) im.eng.prefixes.normalize_fast(text, metas[i]);
        const shape_facts* facts = !gate_hit && metas[i].shape_id ? &im.facts_of(metas[i].shape_id, text, metas[i].body) : nullptr;
        const bool identity = im.masker.masks_identity();
        if (gate_hit || (identity && (facts ? facts->bracket_host_port : mask::bracket_host_port_candidate(text)))) {
          plain[i] = 0;
        } else {
          const bool host_hit = identity && (facts ? facts->host_forms != 0 : mask::prefix_host_form(text));
          host[i] = host_hit, unmasked[i] = !host_hit;
          // An NCCL "host:pid:tid [dev]" header the catalogue peels (most lines of a per-rank file's start),
          // and no other host form: none at the line's start (a pdsh "name: " or syslog host around the
          // header is a second host, which masking the line would learn too), and every NCCL header on the
          // line names the peeled host (two headers in a row: the peel keeps the inner one). Then the peeled
          // host is what masking the line would learn (the gate hit no other context), so it is learnt
          // here, in line order, and the line stays raw like the others; it is counted when the light path
          // masks the peeled host (note_host_and_pairs). Masked whole, such a line cost ~14,000
          // instructions (RE2's rule set and the header rule's submatches).
          if (host_hit && metas[i].host && host_forms_name_only(text, *metas[i].host)) {
            im.masker.mask_host(*metas[i].host, false);
            unmasked[i] = 1;
          }
          // The learner reads a raw line's token: one that masking could change (a learnt host in it) is
          // read masked, as --exact reads it (add_light does the same after the batch).
          std::size_t tok_len = 0;
          const std::string* tok_shape = nullptr;
          if (unmasked[i] && (token_may_mask(metas[i], facts, tok_len, tok_shape) || (identity && prefix_names_other_host(text, metas[i], facts))))
            unmasked[i] = 0;
        }
      }
    }
    clean.push_back(unmasked[i] ? std::string() : prepare(text));
    // bodies point into `clean` (reserved: never moves) or into `raw` (a line left raw was peeled above; a
    // masked one is peeled afresh: normalize(), the catalogue without the lexer, adds to what `out` holds)
    if (!unmasked[i]) {
      metas[i] = normalize::line_meta{};
      im.eng.prefixes.normalize_fast(clean.back(), metas[i]);
    }
    st.learner.observe(metas[i].body);
  }
  std::size_t n = 0;
  // The light lines' texts (in `raw` and `clean`) stay valid to the end: as in add_block(), their per-rank
  // facts wait in the pending list and are read once per rank (a rank's step walking back), not per line.
  im.deferring = true;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    peel_learnt(st, metas[i]);
    if (!plain[i]) n += process(st, metas[i], raw[i].second, false);
    else if (unmasked[i]) n += add_light(st, raw[i].first, raw[i].second, metas[i], plain[i], nullptr, host[i], true);
    else n += add_light(st, raw[i].first, raw[i].second, metas[i], plain[i], &clean[i], host[i]);
  }
  im.deferring = false;
  flush_light(st);
  return n;
}

void collector::peel(const stream& st, std::string_view text, normalize::line_meta& meta) const {
  impl_->eng.prefixes.normalize_fast(text, meta);
  peel_learnt(st, meta);
}

void collector::peel_learnt(const stream& st, normalize::line_meta& meta) const {
  std::string_view rest;
  normalize::line_meta learnt;
  if (st.learner.peel(meta.body, learnt, rest)) apply_learnt(meta, learnt, rest);
}

void collector::observe_and_peel(stream& st, normalize::line_meta& meta, const shape_facts* facts) const {
  std::string_view rest;
  // The learner writes only the rank (when it is empty) of its output: a per-thread one, its rank reset.
  thread_local normalize::line_meta learnt;
  learnt.rank.reset();
  const bool peeled = facts ? st.learner.observe_and_peel(meta.body, facts->token_len, facts->token_shape, learnt, rest)
                            : st.learner.observe_and_peel(meta.body, learnt, rest);
  if (peeled) apply_learnt(meta, learnt, rest);
}

bool collector::token_may_mask(const normalize::line_meta& meta, const shape_facts* facts, std::size_t& token_len,
                               const std::string*& token_shape) const {
  thread_local std::pair<std::string_view, std::string> tok;
  if (!facts) tok = normalize::leading_token(meta.body);
  token_len = facts ? facts->token_len : tok.first.size();
  token_shape = facts ? &facts->token_shape : &tok.second;
  return token_len > 0 && impl_->masker.may_change(meta.body.substr(0, token_len));
}

// Whether the prefixes the catalogue peeled from `line` (before meta.body) name a learnt host other than the
// one the peel found: masking would replace it, and the masked line can peel another way (found by review:
// "[rank1504]:1996" teaches "rank1504" as a host:port host, and the next "[rank1504]:..." line peeled raw
// gave rank 1504 where --exact, peeling "[node-1]:...", gave none). The peeled host itself is masked after
// the peel, the same in both paths.
// Per line shape, the words that could be one (a learnt host's length and first character) are found once
// for each size of the learnt host set (the catalogue's body start and the word bounds are the same for
// every line of a shape); each line then asks only those: a console's NCCL header, "node-3:1031:2031 [7]",
// has one such word, its peeled host.
bool collector::prefix_names_other_host(std::string_view line, const normalize::line_meta& meta, const shape_facts* facts) const {
  if (meta.body.data() < line.data() || meta.body.data() > line.data() + line.size()) return false;
  const std::string_view prefix = line.substr(0, static_cast<std::size_t>(meta.body.data() - line.data()));
  if (prefix.empty()) return false;
  const auto& masker = impl_->masker;
  const std::string_view host = meta.host ? std::string_view(*meta.host) : std::string_view();
  if (!facts) return masker.names_other_learnt_host(prefix, host);
  if (facts->hosts_seen != masker.learnt_host_count()) {
    facts->hosts_seen = masker.learnt_host_count();
    masker.words_that_may_be_learnt_hosts(prefix, facts->prefix_host_words);
  }
  return std::any_of(facts->prefix_host_words.begin(), facts->prefix_host_words.end(),
                     [&](const auto& w) { return masker.names_other_learnt_host(prefix.substr(w.first, w.second), host); });
}

// A prefix no catalogue entry lists, learnt from this stream, peeled: the catalogue again on the rest.
void collector::apply_learnt(normalize::line_meta& meta, const normalize::line_meta& learnt, std::string_view rest) const {
  normalize::line_meta inner;
  impl_->eng.prefixes.normalize_fast(rest, inner);
  meta.body = inner.body;
  // The learnt number is a rank only where no catalogue prefix attributed the line.
  if (!meta.rank) meta.rank = inner.rank ? inner.rank : (meta.local_rank || meta.task ? std::nullopt : learnt.rank);
  if (!meta.local_rank) meta.local_rank = inner.local_rank;
  if (!meta.task) meta.task = inner.task;
  if (!meta.host) meta.host = std::move(inner.host);
  if (!meta.ts) meta.ts = inner.ts;
  if (!meta.level) meta.level = inner.level;
}

std::size_t collector::process(stream& st, std::string_view clean, std::uint64_t line_no) {
  normalize::line_meta meta;
  peel(st, clean, meta);
  return process(st, meta, line_no, false);
}

// `light`: a line the scan gate did not hit (add_line_gated), one sanitize() leaves unchanged (`ascii`:
// printable ASCII, else clean UTF-8 such as a tqdm bar): it cannot match, open a record or look
// like a failure, so only the per-rank facts are kept, and its text is masked only if it is kept.
std::size_t collector::process(stream& st, normalize::line_meta& meta, std::uint64_t line_no, bool light, bool ascii, bool raw,
                               bool may_plan, const char* line) {
  auto& in = impl_->in;
  // In order: what earlier light lines left pending first. Only a raw light line is itself kept pending
  // (note_activity); a masked one (add_lines' first batch) writes its facts now, after the older ones.
  if (!(light && raw && impl_->deferring)) flush_light(st);
  ++st.lines;
  std::size_t before = in.findings.size();
  line_facts f;
  f.line_no = line_no;
  f.may_plan = may_plan;
  attribute(st, meta, f);
  auto& rs = rank_state_for(st, f);
  note_host_and_pairs(st, rs, meta, f);
  f.ts = meta.ts;
  if (f.ts) {
    rs.last_ts = *f.ts;
    if (f.ts->kind == normalize::timestamp::clock::wall) st.stream_ts = f.ts;
  } else if (rs.last_ts) {
    f.ts = rs.last_ts;
    f.ts_inherited = true;
  } else if (st.stream_ts) {
    f.ts = st.stream_ts;
    f.ts_inherited = true;
  }
  if (light) {  // no extractor, no match: the per-rank facts only
    f.body = text::trim(meta.body);
    if (line && ascii && meta.shape_id && f.body.data() >= line && f.body.data() - line <= 255) {
      f.shape = meta.shape_id;
      f.body_at = static_cast<std::uint8_t>(f.body.data() - line);
    }
    if (!f.body.empty()) note_activity(st, rs, f, meta.ts, raw, ascii);
    return 0;
  }
  extract::line_note note;
  feed_extractor(st, rs, meta.body, line_no, note);
  if (!f.rank && note.rank) f.rank = note.rank;
  if (note.top) {
    auto r = f.rank ? f.rank : (f.local_rank && in.hosts.size() <= 1 ? f.local_rank : std::nullopt);
    if (r && in.stack_tops.size() < impl::kMaxStackTopRanks) {
      auto& v = in.stack_tops[*r];
      if (v.size() < impl::kMaxStackTopsPerRank) v.push_back({*note.top, st.display, line_no});
    }
  }
  f.body = text::trim(meta.body);
  if (!f.body.empty()) note_activity(st, rs, f, meta.ts, false, ascii);
  if (f.body.empty()) return 0;
  if (rs.act) f.step_at = rs.act->last_step;  // earlier light lines were flushed above: the step is current
  // A traceback right after a "…, retrying" notice is the logged, handled exception (logging.exception).
  if (text::trim(meta.body).starts_with("Traceback (most recent call last):"))
    // the next line, or the same JSON record; the same rank, or a traceback with no rank of its own
    st.handled_traceback = st.handled_at && line_no <= st.handled_at + 1 &&
                           (f.rank ? f.rank == st.handled_rank : f.local_rank ? f.local_rank == st.handled_local : true);
  if (note.exception_line) {
    f.handled = st.handled_traceback;
    st.handled_traceback = false;
  }
  // A line named only by its local rank ([default1]: a traceback) while the rank's progress lines name its
  // global rank too ([default1]:... [rank1] step 8): the global record's step, when the local rank maps to one.
  if (!f.step_at && f.local_rank && !f.rank)
    if (auto m = in.local_to_rank.find(*f.local_rank); m != in.local_to_rank.end() && m->second.size() == 1)
      if (auto a = in.activity.find(correlate::rank_key::global_rank(*m->second.begin(), st.attempt)); a != in.activity.end())
        f.step_at = a->second.last_step;
  auto restart_to = match_line(st, f, meta.level, note);
  note_exception_facts(st, f, note, before);
  // After a restart line the stream's lines are the next attempt's.
  if (restart_to && *restart_to > st.attempt.value_or(0)) start_attempt(st, *restart_to);
  return in.findings.size() - before;
}

// What an on-call engineer reads under an exception: the deepest frame of the user's code ("user_frame") and,
// for a DataLoader worker's exception re-raised in the main process ("Original Traceback"), the worker's own
// exception ("final_exception": "KeyError: 'label'" under "Caught KeyError in DataLoader worker process 1"). Added to the findings of the exception line, and to the finding of the
// exception that began the chain, as captured fields (the report shows them; fix templates may use them).
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
    if (in.findings.size() > before && st.chain == extract::line_note::chain_kind::none) st.chain_finding = before;
    st.chain = extract::line_note::chain_kind::none;
  }
  if (note.chain != extract::line_note::chain_kind::none && st.chain_finding < in.findings.size()) st.chain = note.chain;
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
      act.steps.note(*prog.step, own_ts);  // step times (stragglers.hpp)
      act.last_step = prog.step;
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
  // Step times (stragglers.hpp): each timed line's step, in line order (a line without a time gives none).
  for (const auto& p : st.pending)
    if (p.ts)
      if (auto step = p.shape ? impl_->step_of(p.shape, p.body_at, p.body) : extract::read_step(p.body, p.ascii))
        p.rank->act->steps.note(*step, p.ts);
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
    if (auto step = it->shape ? impl_->step_of(it->shape, it->body_at, it->body) : extract::read_step(it->body, it->ascii)) {
      rs->act->last_step = step;
      rs->act->last_step_source = st.source_id;
      rs->act->last_step_line_no = it->line_no;
      rs->act->last_step_ts = it->ts;
      rs->step_found = true;
      --open;
    }
  }
  // (The walk stops early only when every rank's step was found, each after its last line.)
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
  if (!kept_any) add_suspicious(st, f.body, level, note.exception_line, f.rank, f.line_no);
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
  if (!out.ts || out.ts_inherited)
    if (auto own = time_in_message(out.text)) {
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

std::size_t wrap_width(const std::vector<std::pair<std::string, std::uint64_t>>& head, const normalize::prefix_catalog* prefixes) {
  // Evident only when no line is longer than some width W >= 60, at least 5 lines (and 5%) are exactly W
  // long, and those are not rules of one repeated character ("-----", "=====").
  std::size_t longest = 0;
  for (const auto& [t, _] : head) longest = std::max(longest, t.size());
  if (longest < 60 || longest > 1000) return 0;
  std::size_t at_width = 0, next_starts_alike = 0;
  for (std::size_t i = 0; i < head.size(); ++i) {
    const auto& t = head[i].first;
    if (t.size() != longest || t.find_first_not_of(t[0]) == std::string::npos || t.back() == ' ') continue;
    ++at_width;
    // A log of fixed-width lines (one format, numbers of one width) is not a wrapped paste: the line after
    // a W-long line starts with the same prefix as it, where a wrapped line's rest starts mid-message.
    if (prefixes && i + 1 < head.size()) {
      normalize::line_meta a, b;
      if (prefixes->normalize(t, a) && prefixes->normalize(head[i + 1].first, b) && a.prefixes[0] == b.prefixes[0]) ++next_starts_alike;
    }
  }
  if (next_starts_alike * 2 >= at_width && at_width > 0) return 0;
  return at_width >= 5 && at_width * 20 >= head.size() ? longest : 0;
}

namespace {
// Runs posted tasks in the order posted, on one thread of its own, or inline on the caller's thread
// (`threaded` false). Bounded (see post()). A task's exception stops the tasks after it; finish() rethrows it
// on the caller's thread.
class serial_worker {
 public:
  explicit serial_worker(bool threaded) {
    if (threaded) thread_ = std::thread([this] { loop(); });
  }
  serial_worker(const serial_worker&) = delete;
  serial_worker& operator=(const serial_worker&) = delete;
  ~serial_worker() { stop(false); }
  // `bytes`: the text the task holds (a block's, a stream's first lines'). The queue takes it when fewer
  // than kAlways tasks wait, whatever their size (the bound before stop 40), or when fewer than kMaxQueued
  // wait and their text with this one's stays within kMaxBytes: many small tasks (1,024 rank files, each
  // opened, its first lines, a block or two, closed) queue deep, large ones (a first batch of long lines:
  // 256 lines of up to --max-line-kib each) no deeper than before.
  void post(std::function<void()> task, std::size_t bytes = 0) {
    if (!thread_.joinable()) {
      task();
      return;
    }
    std::unique_lock lk(m_);
    space_.wait(lk, [&] {
      return error_ || q_.size() < kAlways || (q_.size() < kMaxQueued && queued_bytes_ + bytes <= kMaxBytes);
    });
    if (error_) return;  // a task failed: finish() reports it, the rest would build on a broken state
    q_.push_back({std::move(task), bytes});
    queued_bytes_ += bytes;
    ready_.notify_one();
  }
  /// Waits until the tasks waiting and the one running hold at most kMaxBytes of text: the caller is about
  /// to read a stream's first batch (up to 256 lines of --max-line-kib each), which it holds while it reads
  /// and posts; without this, a batch of long lines was read while the previous one was still being worked
  /// on (a review measured 149 MB -> 215 MB of peak RSS on files of 256 lines of 256 KiB).
  void wait_for_room() {
    if (!thread_.joinable()) return;
    std::unique_lock lk(m_);
    space_.wait(lk, [&] { return error_ || queued_bytes_ + running_bytes_ <= kMaxBytes; });
  }
  /// Tasks waiting (not the one running): the worker is behind the caller when this is not 0.
  std::size_t queued() {
    std::lock_guard lk(m_);
    return q_.size();
  }
  /// Runs every pending task, joins the thread, rethrows a task's exception.
  void finish() {
    stop(true);
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  // A caller waiting for room is woken when the queue is down to kResume tasks (and after each task from
  // there on), not after every task.
  static constexpr std::size_t kAlways = 2, kMaxQueued = 8, kResume = 2;
  static constexpr std::size_t kMaxBytes = 1u << 20;
  void stop(bool drain) {
    if (!thread_.joinable()) return;
    {
      std::lock_guard lk(m_);
      closing_ = true;
      if (!drain) q_.clear();
    }
    ready_.notify_one();
    thread_.join();
  }
  void loop() {
    for (;;) {
      std::function<void()> task;
      bool resume = false;
      {
        std::unique_lock lk(m_);
        ready_.wait(lk, [&] { return !q_.empty() || closing_; });
        if (q_.empty()) return;
        task = std::move(q_.front().first);
        running_bytes_ = q_.front().second;
        queued_bytes_ -= running_bytes_;
        q_.pop_front();
        resume = q_.size() <= kResume;
      }
      // The caller is woken when the queue is down to kResume tasks, not after every task: with the
      // worker behind (1,024 small rank files), a wake per task cost two context switches each (15,000,
      // and more wall time than the second thread saved).
      if (resume) space_.notify_one();
      try {
        task();
      } catch (...) {
        std::lock_guard lk(m_);
        error_ = std::current_exception();
        q_.clear();
        space_.notify_all();
        return;
      }
      task = nullptr;  // what it held (a first batch's lines) is freed before wait_for_room() hears of it
      {
        std::lock_guard lk(m_);
        running_bytes_ = 0;
        resume = q_.size() <= kResume;
      }
      if (resume) space_.notify_one();
    }
  }
  std::mutex m_;
  std::condition_variable ready_, space_;
  std::deque<std::pair<std::function<void()>, std::size_t>> q_;  // each task and its bytes
  std::size_t queued_bytes_ = 0, running_bytes_ = 0;
  bool closing_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

unsigned thread_count(unsigned asked) {
  if (asked > 0) return std::min(asked, 2u);
  return std::thread::hardware_concurrency() >= 2 ? 2 : 1;
}

// glibc gives a second thread its own malloc arena: blocks allocated by the reader and freed by the worker
// then spread over two heaps, which cost 14 MB of peak RSS on a 400,000-finding input (76 MB vs 62 MB)
// and broke the 64 MiB bound. One arena for the process keeps the bound; the two threads allocate
// little per line, and the measured time did not change. https://man7.org/linux/man-pages/man3/mallopt.3.html
// Freed memory at the heap's top is also kept (up to 32 MiB) instead of given back to the kernel at each
// free() past glibc's 128 KiB default: a 1,024-file tree made the heap grow and shrink 2,400 times (brk),
// every regrowth paid in page faults again. The peak, the only RSS the bound speaks of, does not change.
void one_malloc_arena() {
#if defined(__GLIBC__)
  static const bool once = (mallopt(M_ARENA_MAX, 1), mallopt(M_TRIM_THRESHOLD, 32 << 20), true);
  (void)once;
#endif
}
}  // namespace

namespace {
// Blocks are reused: a new one per 256 KiB grew its text by doubling (and once allocated its peel results
// afresh), which on a tree of 1,024 rank files was 4% of the CPU in first-touch page faults alone. The reader
// takes, the worker gives back (cleared, capacity kept); at most a few exist (serial_worker's queue and the
// two in hand). A block grown past its reserve by a long line is not kept: its memory goes back.
class block_pool {
 public:
  std::shared_ptr<line_block> take() {
    {
      std::lock_guard lk(m_);
      if (!free_.empty()) {
        auto b = std::move(free_.back());
        free_.pop_back();
        return b;
      }
    }
    auto b = std::make_shared<line_block>();
    b->text.reserve(kReserve);
    return b;
  }
  void give(const std::shared_ptr<line_block>& b) {
    if (b->text.capacity() > kReserve) return;
    b->clear();
    std::lock_guard lk(m_);
    if (free_.size() < kKept) free_.push_back(b);
  }

 private:
  static constexpr std::size_t kKept = 10;  // serial_worker's queue (8) and the two in hand: no block is allocated twice
  static constexpr std::size_t kReserve = line_block::kBytes + (64u << 10);
  std::mutex m_;
  std::vector<std::shared_ptr<line_block>> free_;
};

// Reads every input into the collector; the run's input facts go to `out`. diagnose() and scan() share it.
status collect(const std::vector<std::string>& paths, const engine& eng, const options& opt, collector& col, run& out) {
  // Two threads (options::threads): this one reads, cuts blocks and scans them with the gate when the worker
  // is behind (a pure function of the bytes); the worker runs every collector call, in input order, so the
  // report does not depend on the thread count.
  const bool threaded = thread_count(opt.threads) > 1;
  if (threaded) one_malloc_arena();
  block_pool pool;  // declared before the worker: its tasks give blocks back until the worker is done
  serial_worker worker(threaded);
  std::optional<match::gate_scratch> reader_gate;  // this thread's gate scratch, when there are two threads
  if (threaded && col.gated()) reader_gate.emplace(eng.gate);
  std::uint64_t bytes_done = 0;
  std::size_t inputs_started = 0;
  bool stopped = false;  // options::cancelled said so
  auto cancelled = [&] { return stopped || (opt.cancelled && (stopped = opt.cancelled())); };
  auto visit = [&](const ingest::source& src, ingest::line_reader& reader) -> bool {
    if (cancelled()) return false;
    if (opt.on_source && inputs_started < UINT32_MAX) opt.on_source(static_cast<std::uint32_t>(inputs_started), src.display);
    ++inputs_started;
    auto st = std::make_shared<collector::stream>();
    worker.post([&col, st, src] { *st = col.open_stream(src); });
    ingest::raw_line raw;
    // The first lines are read as a batch so unknown prefixes are learnt before any line is matched.
    worker.wait_for_room();
    std::vector<std::pair<std::string, std::uint64_t>> head;
    while (head.size() < opt.learn_lines && reader.next(raw)) head.emplace_back(std::string(raw.text), raw.line_no);
    // A paste hard-wrapped by a terminal: rejoin a line cut at the wrap width with the line after it.
    std::size_t wrap = wrap_width(head, &eng.prefixes);
    if (wrap > 0) {
      std::vector<std::pair<std::string, std::uint64_t>> joined;
      for (auto& l : head) {
        if (!joined.empty() && joined.back().first.size() % wrap == 0 && joined.back().first.size() < 64 * wrap)
          joined.back().first += l.first;
        else
          joined.push_back(std::move(l));
      }
      head = std::move(joined);
    }
    std::string pending;
    std::uint64_t pending_no = 0;
    bool have_pending = false;
    if (wrap > 0 && !head.empty()) {  // the last head line may continue in the stream
      pending = std::move(head.back().first);
      pending_no = head.back().second;
      have_pending = true;
      head.pop_back();
    }
    std::size_t head_bytes = 0;
    for (const auto& l : head) head_bytes += l.first.size();
    worker.post([&col, st, head = std::move(head)] { col.add_lines(*st, head); }, head_bytes);
    auto post_line = [&](std::string text, std::uint64_t no) {
      const std::size_t bytes = text.size();
      worker.post([&col, st, text = std::move(text), no] { col.add_line(*st, text, no); }, bytes);
    };
    auto post_block = [&](std::shared_ptr<line_block> blk) {
      // The gate's scan goes to whichever thread is ahead: here when the worker still has tasks waiting
      // (the usual case: the worker carries the per-line work), there otherwise.
      if (reader_gate && worker.queued() > 0) (void)blk->scan_gate(eng, *reader_gate);
      const std::size_t bytes = blk->text.size();
      worker.post([&col, &pool, st, blk = std::move(blk)] {
        col.add_block(*st, *blk);  // no view into the block outlives this (add_block flushes at its end)
        pool.give(blk);
      }, bytes);
    };
    auto blk = pool.take();
    while (reader.next(raw)) {
      if (wrap == 0) {
        blk->add(raw.text, raw.line_no, raw.plain);
        if (blk->full()) {
          post_block(std::move(blk));
          blk = pool.take();
          if (opt.progress) opt.progress(bytes_done + reader.bytes_read(), inputs_started);
          if (cancelled()) break;
        }
        continue;
      }
      if (have_pending && pending.size() % wrap == 0 && pending.size() < 64 * wrap) {
        pending += raw.text;
        continue;
      }
      if (have_pending) post_line(std::move(pending), pending_no);
      pending.assign(raw.text);
      pending_no = raw.line_no;
      have_pending = true;
    }
    if (have_pending) post_line(std::move(pending), pending_no);
    post_block(std::move(blk));
    worker.post([&col, &out, st, bytes = reader.bytes_read()] {
      col.close_stream(*st);
      input_stats stats{st->display, st->lines, bytes};
      if (stats.lines > 0) out.any_readable = true;
      out.total_lines += stats.lines;
      out.total_bytes += stats.bytes;
      out.inputs.push_back(std::move(stats));
    });
    bytes_done += reader.bytes_read();
    if (opt.progress) opt.progress(bytes_done, inputs_started);
    return true;
  };
  auto errors = ingest::read_inputs(paths, opt.ingest, visit);
  worker.finish();
  if (stopped) return error{"cancelled", errc::cancelled};
  out.errors = std::move(errors);
  return col.check();  // an engine error mid-run: no verdict from partial matching
}

// The masking that finish() does before correlating: paths of errors, the last lines kept unmasked by the
// light path, the second pass for hosts learnt late; then the counts and the bound notes.
void finish_masking(collector& col, run& out) {
  auto& masker = col.masker();
  for (auto& e : out.errors) e.path = masker.apply_path(text::sanitize(e.path));
  out.masked = masker.enabled();
  out.redacted = masker.masks_identity();
  col.mask_deferred();  // last lines kept from light-path lines, masked with every host learnt by now
  if (masker.enabled()) {  // second pass: hosts learnt late are masked in everything already kept
    col.remask_learnt();
    for (auto& i : out.inputs) masker.rescan(i.path);
    for (auto& e : out.errors) masker.rescan(e.path);
  }
  out.mask_counts = masker.counts();
  for (const auto& note : col.bound_notes()) out.errors.push_back({"(all inputs)", note, false});
}

// What finish() and conclude() do after the diagnosis: no "healthy" when an input was cut short or nothing
// could be read.
void final_notes(run& out) {
  bool cut_short = std::any_of(out.errors.begin(), out.errors.end(), [](const ingest::input_error& e) { return e.cut_short; });
  if (cut_short && out.diag.verdict == correlate::verdict::healthy) {  // what was not read may hold the failure
    out.diag.verdict = correlate::verdict::undetermined;
    out.diag.initiating_rule = "an input was cut short by a bound (see the notes): the rest was not read";
  }
  if (!out.any_readable) {  // nothing was read: never call that healthy
    out.diag.verdict = correlate::verdict::undetermined;
    out.diag.initiating_rule = "no input could be read";
  }
}
}  // namespace

result<run> diagnose(const std::vector<std::string>& paths, const engine& eng, const options& opt) {
  collector col(eng, opt);
  if (auto st = col.check(); !st) return st.error();
  run out;
  if (auto st = collect(paths, eng, opt, col, out); !st) return st.error();
  finish(col, out);
  if (opt.on_finish) opt.on_finish(col, out);
  return out;
}

result<scanned> scan(const std::vector<std::string>& paths, const engine& eng, const options& opt) {
  collector col(eng, opt);
  if (auto st = col.check(); !st) return st.error();
  run out;
  if (auto st = collect(paths, eng, opt, col, out); !st) return st.error();
  finish_masking(col, out);
  scanned s;
  s.in = col.inputs();
  s.errors = std::move(out.errors);
  s.inputs = std::move(out.inputs);
  s.total_lines = out.total_lines;
  s.total_bytes = out.total_bytes;
  s.any_readable = out.any_readable;
  s.masked = out.masked;
  s.redacted = out.redacted;
  s.mask_counts = std::move(out.mask_counts);
  return s;
}

run conclude(scanned s, const kb::library& lib, const options& opt) {
  run out;
  out.errors = std::move(s.errors);
  out.inputs = std::move(s.inputs);
  out.total_lines = s.total_lines;
  out.total_bytes = s.total_bytes;
  out.any_readable = s.any_readable;
  out.masked = s.masked;
  out.redacted = s.redacted;
  out.mask_counts = std::move(s.mask_counts);
  s.in.max_suspicious_shown = opt.max_suspicious_shown;
  out.diag = diagnose_inputs(s.in, lib);
  out.timeline = timeline::build(s.in, out.diag, lib);
  if (out.diag.initiating_host && opt.host_keyer) out.initiating_host_key = opt.host_keyer(*out.diag.initiating_host);
  if (out.diag.verdict == correlate::verdict::failure && !out.initiating_host_key.empty() && opt.recurrences)
    out.recurrences = opt.recurrences(out.initiating_host_key, out.diag.kind, out.recurrence_days);
  out.action = action::decide(out.diag, out.recurrences, lib);
  final_notes(out);
  return out;
}

void finish(collector& col, run& out) {
  auto& masker = col.masker();
  finish_masking(col, out);
  out.diag = col.diagnose();
  out.timeline = timeline::build(col.inputs(), out.diag, col.library());
  if (out.diag.initiating_host)
    out.initiating_host_key =
        col.host_key(masker.masks_identity() ? masker.original(*out.diag.initiating_host) : *out.diag.initiating_host);
  if (out.diag.verdict == correlate::verdict::failure && !out.initiating_host_key.empty())
    out.recurrences = col.recurrences(out.initiating_host_key, out.diag.kind, out.recurrence_days);
  out.action = action::decide(out.diag, out.recurrences, col.library());
  if (col.reveal() && masker.masks_identity())  // the first failing host first, then every other host seen
    for (const auto& h : col.inputs().hosts) {
      std::string real = masker.original(h);
      if (real.empty() || real == h) continue;
      auto item = std::make_pair(h, real);
      if (out.diag.initiating_host && h == *out.diag.initiating_host) out.revealed.insert(out.revealed.begin(), item);
      else out.revealed.push_back(item);
    }
  final_notes(out);
}

std::vector<kb::example_failure> check_healthy_baselines(const std::vector<std::string>& dirs, const kb::library& lib) {
  std::vector<kb::example_failure> fails;
  for (const auto& dir : dirs) {
    auto r = diagnose({dir}, lib, {});
    if (!r) {
      fails.push_back({"(healthy)", dir + ": " + r.error().message});
      continue;
    }
    const auto& d = r.value().diag;
    if (d.verdict != correlate::verdict::healthy)
      fails.push_back({d.signature.empty() ? "(healthy)" : d.signature, dir + " is a healthy baseline but gives verdict " + std::string(correlate::to_string(d.verdict))});
  }
  return fails;
}

}  // namespace ff::pipeline
