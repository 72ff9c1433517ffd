// Each line's road through the per-line stage (line_stage.hpp): the full path (mask, peel, extract, match)
// and the light path for lines the scan gate does not hit, for one line (watch), a block (diagnose) or an
// input's first batch. The state it writes is the collector's (collector.cpp).
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

using line::host_forms_name_only;
using line::rank_code;

std::size_t collector::add_line(stream& st, std::string_view raw_text, std::uint64_t line_no) {
  std::string clean = prepare(raw_text);
  normalize::line_meta meta;  // peeled once: the learner observes the catalogue's body, then adds its own layer
  impl_->eng.prefixes.normalize_fast(clean, meta);
  observe_and_peel(st, meta);
  return process(st, meta, line_no, false);
}

std::string collector::prepare(std::string_view raw_text) { return line::mask_line(impl_->masker, raw_text); }

std::size_t collector::add_line_gated(stream& st, std::string_view raw_text, std::uint64_t line_no) {
  return add_line_gated(st, raw_text, line_no, -1, -1);
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
  if (!second_scans(blk)) return 0;
  // (The reader found most lines printable ASCII on its way to their ends; second_scans() looked at the others.)
  for (std::size_t i = 0; i < blk.size(); ++i) {
    const auto& L = im.lines[i];
    n += add_line_gated(st, blk.line(i), blk.line_nos[i], L.gate_hit, L.plain, L.sanitized, L.fact_free_hit);
  }
  im.deferring = false;
  flush_light(st);
  im.sanitized.clear();  // (after flush_light: its pending lines were views into them)
  return n;
}

// add_block()'s gate verdicts that a line by line scan would ask (add_line_gated): the gate again on the
// lines that sanitising changes (a tqdm bar redrawn with '\r'), and the gate without the run-fact
// fingerprints (engine::fact_free_gate) on the lines the gate hits. One scan per block for each, of the
// lines that need it gathered into a block of their own, instead of one hs_scan per line (each cost
// about 1,300 instructions of Vectorscan's set-up, ~3,800 in all: 10,500 calls on the generated
// console's first 20 MB, its bars). A verdict is a function of the line's bytes, and the gate's regexps
// cannot run from one line into the next (match::gate: within_line), so the verdicts are hit()'s.
bool collector::second_scans(const line_block& blk) {
  auto& im = *impl_;
  const std::size_t n = blk.size();
  im.lines.assign(n, impl::line_verdicts{});
  im.regate.clear();
  im.regate_of.clear();
  for (std::size_t i = 0; i < n; ++i) {
    auto& L = im.lines[i];
    L.gate_hit = blk.gate_hit[i];
    if (blk.known_plain[i]) continue;
    const std::string_view raw = blk.line(i);
    L.plain = text::is_plain(raw) ? 1 : text::is_clean(raw) ? 2 : 0;
    if (L.plain) continue;
    const std::string& s = im.sanitized.emplace_back(text::sanitize(raw));
    L.sanitized = &s;
    if (!text::is_clean(s)) continue;  // (add_line_gated: the full path)
    im.regate.add(s, 0);
    im.regate_of.push_back(i);
  }
  auto failed = [&](const status& r) {
    if (im.engine_error.empty()) im.engine_error = r.error().message;
    return false;
  };
  if (!im.regate.empty()) {
    if (auto r = im.eng.gate.hit_lines(im.regate.text, im.regate.starts, im.regate.gate_hit, im.gate_scratch); !r) return failed(r);
    for (std::size_t k = 0; k < im.regate_of.size(); ++k) im.lines[im.regate_of[k]].gate_hit = im.regate.gate_hit[k];
  }
  if (!im.eng.fact_free_gate.enabled()) return true;
  im.regate.clear();
  im.regate_of.clear();
  for (std::size_t i = 0; i < n; ++i) {
    const auto& L = im.lines[i];
    if (L.gate_hit != 1 || (L.sanitized && !text::is_clean(*L.sanitized))) continue;
    im.regate.add(L.sanitized ? std::string_view(*L.sanitized) : blk.line(i), 0);
    im.regate_of.push_back(i);
  }
  if (!im.regate.empty()) {
    if (auto r = im.eng.fact_free_gate.hit_lines(im.regate.text, im.regate.starts, im.regate.gate_hit, im.fact_gate_scratch); !r)
      return failed(r);
    for (std::size_t k = 0; k < im.regate_of.size(); ++k) im.lines[im.regate_of[k]].fact_free_hit = im.regate.gate_hit[k];
  }
  return true;
}

std::size_t collector::add_line_gated(stream& st, std::string_view raw_text, std::uint64_t line_no, int gate_hit, int plain,
                                      const std::string* sanitized, int fact_free_hit) {
  auto& im = *impl_;
  // The full path when the line can matter: the masker's next line depends on this one, the gate hits it,
  // or (add_light) its rank has a record open.
  if (plain < 0) plain = text::is_plain(raw_text) ? 1 : text::is_clean(raw_text) ? 2 : 0;
  if (!im.light_ok || im.masker.line_state_open()) return add_line(st, raw_text, line_no);
  const std::string_view raw = raw_text;  // (the full path reads the line as read: its sanitising is its own)
  if (!plain) {
    // A line that sanitising changes (a tqdm bar redrawn with '\r', colour escapes): the full path reads
    // sanitize(line), so the light path may too, gated afresh (removed bytes can join a gate literal). In a
    // block only, where the sanitised text lives until the block's end (the pending light lines are views).
    // Every such line took the full path before: the generated 1 GB console's 370,000 bars (4% of its
    // lines) were most of its CPU once a run-fact signature matched them.
    if (!im.deferring) return add_line(st, raw_text, line_no);
    const std::string& s = sanitized ? *sanitized : im.sanitized.emplace_back(text::sanitize(raw_text));
    if (!text::is_clean(s)) return add_line(st, raw_text, line_no);
    raw_text = s;
    plain = text::is_plain(s) ? 1 : 2;
    if (!sanitized) gate_hit = -1;  // (add_block's second_scans() gated the sanitised text)
  }
  if (gate_hit < 0) {
    auto hit = im.eng.gate.hit(raw_text, im.gate_scratch);
    if (!hit) {
      if (im.engine_error.empty()) im.engine_error = hit.error().message;
      return 0;
    }
    gate_hit = hit.value();
  }
  // A line the gate hits only for a run-fact signature (engine::fact_free_gate) takes the light path as a
  // fact candidate (in a block): only inputs::fact_lines can change, and flush_facts() reads the newest
  // ones in full. Before, every tqdm bar and Megatron iteration line was read in full.
  struct fact_flag {
    bool& f;
    ~fact_flag() { f = false; }
  } reset{im.fact_line};
  if (gate_hit && im.deferring && im.eng.fact_free_gate.enabled()) {
    if (fact_free_hit < 0) {
      auto h = im.eng.fact_free_gate.hit(raw_text, im.fact_gate_scratch);
      if (!h) {
        if (im.engine_error.empty()) im.engine_error = h.error().message;
        return 0;
      }
      fact_free_hit = h.value() ? 1 : 0;
    }
    if (!fact_free_hit) gate_hit = 0, im.fact_line = true;
  }
  if (gate_hit) return add_line(st, raw, line_no);
  // Peeled here, by the thread that uses the peel. (The reader thread peeled whole blocks ahead until
  // stop 40: 160 bytes of line_meta per line, 655 KB a block, written on one core and read on the other,
  // cost more than the peel it moved: the 210 MB console took 0.85 s CPU / 0.58 s wall with two threads,
  // 0.77 / 0.49 without; one thread, 1,024 rank files 1.79 -> 1.60 s.)
  normalize::line_meta meta;
  im.eng.prefixes.normalize_fast(raw_text, meta);
  const shape_facts* facts = meta.shape_id ? &im.shape_memo.facts_of(meta.shape_id, raw_text, meta.body) : nullptr;
  // (the host checks here and in add_light/add_lines serve identity masking: without --redact no host is
  // learnt, so they are skipped; with it, light_ok is false and every line takes the full path)
  if (im.masker.masks_identity() && (facts ? facts->bracket_host_port : mask::bracket_host_port_candidate(raw_text)))
    return add_line(st, raw_text, line_no);
  return add_light(st, raw_text, line_no, meta, plain, nullptr, -1, false, facts);
}

// A line the gate let through (plain, no gate hit, no masker state open), peeled by the catalogue into
// `meta`: the light path unless its rank has a record open, its prefix has an error level or it names a
// host the masker learns from. `masked`: the line masked already (add_lines' first batch: the learner has

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

void collector::learn_other_hosts(std::string_view line, const std::string& peeled, const shape_facts* facts) {
  if (facts ? facts->host_forms == 0 || (facts->host_forms == 1 && line.substr(facts->host_at, facts->host_len) == peeled)
            : host_forms_name_only(line, peeled))
    return;
  thread_local std::vector<std::pair<std::size_t, std::size_t>> spans;
  mask::prefix_host_spans(line, spans);
  for (const auto& [at, len] : spans)
    if (line.substr(at, len) != peeled) impl_->masker.mask_host(std::string(line.substr(at, len)));
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
        const shape_facts* facts = !gate_hit && metas[i].shape_id ? &im.shape_memo.facts_of(metas[i].shape_id, text, metas[i].body) : nullptr;
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
    line::peel_learnt(im.eng.prefixes, st.learner, metas[i]);
    if (!plain[i]) n += process(st, metas[i], raw[i].second, false);
    else if (unmasked[i]) n += add_light(st, raw[i].first, raw[i].second, metas[i], plain[i], nullptr, host[i], true);
    else n += add_light(st, raw[i].first, raw[i].second, metas[i], plain[i], &clean[i], host[i]);
  }
  im.deferring = false;
  flush_light(st);
  return n;
}

void collector::observe_and_peel(stream& st, normalize::line_meta& meta, const shape_facts* facts) const {
  line::observe_and_peel(impl_->eng.prefixes, st.learner, meta, facts ? &facts->token_len : nullptr, facts ? &facts->token_shape : nullptr);
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

std::size_t collector::process(stream& st, std::string_view clean, std::uint64_t line_no) {
  normalize::line_meta meta;
  line::peel(impl_->eng.prefixes, st.learner, clean, meta);
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
    if (impl_->fact_line && raw && !f.body.empty()) keep_fact_candidate(st, f);
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

}  // namespace ff::pipeline
