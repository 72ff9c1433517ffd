// The run's entry points: diagnose(), scan(), conclude() and finish(), over a collector that collect()
// (collect.cpp) filled.
#include <algorithm>
#include <set>

#include "internal.hpp"
#include "firstfault/text.hpp"

namespace ff::pipeline {

result<engine> engine::build(const kb::library& lib) {
  auto cat_r = normalize::prefix_catalog::load(lib.prefix_files);
  if (!cat_r) return cat_r.error();
  auto m_r = match::matcher::compile(lib);
  if (!m_r) return m_r.error();
  auto g_r = match::gate::build(lib, gate_extras());
  if (!g_r) return g_r.error();
  engine e;
  e.gate = std::move(g_r).value();
  // The gate again without the run-fact signatures' fingerprints (engine::fact_free_gate): a library of
  // what gate::build reads (names, roles, tags, fingerprints, benign samples, the healthy-lines table),
  // those fingerprints left out; cached on disk beside the gate under its own content hash.
  if (e.gate.enabled() && std::any_of(lib.signatures.begin(), lib.signatures.end(), match::gate::run_fact_only)) {
    kb::library slim;
    slim.content_hash = lib.content_hash + "/no-fact-run";
    if (auto t = lib.tables.find("healthy_lines"); t != lib.tables.end()) slim.tables.emplace(t->first, t->second);
    slim.signatures.reserve(lib.signatures.size());
    for (const auto& s : lib.signatures) {
      kb::signature c;
      c.name = s.name;
      c.role = s.role;
      c.tags = s.tags;
      c.positive = s.positive;
      if (!match::gate::run_fact_only(s)) c.fingerprints = s.fingerprints;
      slim.signatures.push_back(std::move(c));
    }
    auto f_r = match::gate::build(slim, gate_extras());
    if (!f_r) return f_r.error();
    e.fact_free_gate = std::move(f_r).value();
  }
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

result<run> diagnose(const std::vector<std::string>& paths, const kb::library& lib, const options& opt, sink& events) {
  auto e = engine::build(lib);
  if (!e) return e.error();
  return diagnose(paths, e.value(), opt, events);
}

correlate::diagnosis diagnose_inputs(correlate::inputs& in, const kb::library& lib) {
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
  // The inputs are correlated in place, one attempt at a time (a copy per attempt held every finding
  // and activity record again); only_attempt is put back as it was.
  const auto given = in.only_attempt;
  for (int a : chosen) {
    in.only_attempt = a;
    auto d = correlate::correlate(in, lib);
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
  in.only_attempt = given;
  last.attempts = std::move(list);
  last.attempts_total = attempts.size();
  return last;
}

namespace {
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

result<run> diagnose(const std::vector<std::string>& paths, const engine& eng, const options& opt, sink& events) {
  collector col(eng, opt);
  if (auto st = col.check(); !st) return st.error();
  run out;
  if (auto st = collect(paths, eng, opt, col, out, events); !st) return st.error();
  finish(col, out);
  events.finish(col, out);
  return out;
}

result<run> diagnose(const std::vector<std::string>& paths, const engine& eng, const options& opt) {
  return diagnose(paths, eng, opt, no_sink());
}

result<scanned> scan(const std::vector<std::string>& paths, const engine& eng, const options& opt, sink& events) {
  collector col(eng, opt);
  if (auto st = col.check(); !st) return st.error();
  run out;
  if (auto st = collect(paths, eng, opt, col, out, events); !st) return st.error();
  finish_masking(col, out);
  events.finish(col, out);  // (a scan's run holds its inputs' facts, no diagnosis)
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

result<scanned> scan(const std::vector<std::string>& paths, const engine& eng, const options& opt) {
  return scan(paths, eng, opt, no_sink());
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
