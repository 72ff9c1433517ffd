// Cross-rank correlation: root cause, initiating rank, collateral. The rules are listed in
// docs/ARCHITECTURE.md ("Correlation rules"); each decision records the rule that made it.
#include <algorithm>
#include <cstring>
#include <cmath>
#include <ctime>
#include <functional>
#include <map>
#include <set>

#include <re2/re2.h>

#include "firstfault/correlate.hpp"
#include "firstfault/correlate_rules.hpp"
#include "firstfault/limits.hpp"
#include "firstfault/text.hpp"
#include "correlate/run_facts.hpp"

namespace ff::correlate {

namespace {

using rules::before;
using rules::field;
using rules::format_time;

evidence to_evidence(const finding& f, std::optional<int> rank) {
  return {f.source, f.text, format_time(f.ts) + (f.ts && f.ts_inherited ? " (inherited)" : ""), f.line_no, rank, f.host};
}

const kb::signature* inferred(const kb::library& lib, const std::string& rule) {
  for (const auto& s : lib.signatures)
    if (s.inferred_by == rule) return &s;
  return nullptr;
}

void fill_from_signature(diagnosis& d, const kb::signature& s) {
  d.signature = s.name;
  d.signature_id = s.id;
  d.kind = s.kind;
  d.category = s.category;
  d.title = s.title;
  d.priority = s.priority;
  d.fix = s.fix;
  d.fix_code = s.fix_code;
  d.verify = s.verify;
  d.confirm = s.confirm;
  d.references = s.references;
}

}  // namespace

std::string_view to_string(verdict v) {
  switch (v) {
    case verdict::failure: return "failure";
    case verdict::undetermined: return "undetermined";
    case verdict::healthy: break;
  }
  return "healthy";
}

std::string_view to_string(confidence c) {
  switch (c) {
    case confidence::high: return "high";
    case confidence::medium: return "medium";
    case confidence::low: return "low";
    case confidence::none: break;
  }
  return "";
}

namespace {

// What decided the root cause and the first failing rank, passed from one stage to the next.
struct decision {
  const finding* root = nullptr;             // the root-cause line (none when an inference rule decided)
  const kb::signature* root_sig = nullptr;   // its signature, or the inferred entry
  std::vector<const finding*> root_findings; // every line of the root signature, or the inference's evidence
  std::optional<int> init_rank;
  std::string rank_rule;                     // why that rank (or why none)
  bool orphan = false;                       // the root is a symptom no cause line explains (low confidence)
  bool weak_kind = false;                    // a weak kind rule chose the kind (low confidence)
  int handed_from = -1;                      // the signature a root rule took the root from, and that rule
  const rules::root_rule* handed_by = nullptr;
};

// The strongest cause line, which a root rule may hand to another line; then the rank rules on its lines.
// With no cause line, the first inference rule that fires decides (its entry, rank and evidence).
decision decide_root(const rules::context& ctx, const kb::library& lib, diagnosis& d) {
  decision dec;
  dec.root = rules::strongest_cause(ctx);
  if (dec.root)
    for (const auto& rr : rules::root_rules())
      if (const auto* other = rr.fn(ctx, *dec.root)) {
        if (other->signature != dec.root->signature) {
          dec.handed_from = dec.root->signature;
          dec.handed_by = &rr;
        }
        dec.root = other;
        d.rule = std::string(rr.name);
        break;
      }
  if (!dec.root) {
    for (const auto& ir : rules::inference_rules()) {
      auto inf = ir.fn(ctx);
      if (!inf) continue;
      dec.root_sig = inferred(lib, inf->entry);
      if (!dec.root_sig) continue;  // kb lint guarantees every produced entry exists; a user's --kb may not
      d.rule = std::string(ir.name);
      dec.init_rank = inf->rank;
      dec.rank_rule = inf->why;
      dec.root_findings = inf->findings;
      d.evidence_lines = inf->extra;
      break;
    }
    if (dec.root_sig) return dec;
    // Last: symptoms alone, all of one kind, stand for that kind (rules::orphan_symptom).
    dec.root = rules::orphan_symptom(ctx);
    if (!dec.root) return dec;
    d.rule = "orphan_symptoms";
    dec.orphan = true;
  }
  dec.root_sig = &ctx.sig(*dec.root);
  for (const auto& f : ctx.fs)
    if (f.signature == dec.root->signature && !ctx.survived.count(&f)) dec.root_findings.push_back(&f);
  for (const auto& rr : rules::rank_rules())
    if (auto rd = (!dec.orphan || rr.name == "initiator_field") ? rr.fn(ctx, dec.root_findings) : std::nullopt) {
      dec.init_rank = rd->rank;
      if (rd->host) d.initiating_host = rd->host;
      dec.rank_rule = rd->why;
      break;
    }
  if (!dec.init_rank && dec.rank_rule.empty()) {
    std::set<int> ranks;
    for (const auto* f : dec.root_findings)
      if (f->rank) ranks.insert(*f->rank);
    dec.rank_rule = ranks.empty() ? "the root-cause line carries no rank (node or job level), and no per-rank evidence names one"
                                  : "ranks " + text::rank_ranges({ranks.begin(), ranks.end()}) + " all report it and their times do not order them";
  }
  return dec;
}

// Honest verdict: healthy only when nothing looks like a failure (no finding, no line that looks wrong after
// benign messages were set aside, no failed worker).
void set_verdict(diagnosis& d, decision& dec, const rules::context& ctx, const inputs& in) {
  // A line that looks wrong before the run's successful end was survived, like an error (rules::ended_well).
  // Lines that look wrong count unless the run went on after them (rules::suspicious_survived).
  bool any_suspicious = std::any_of(in.suspicious.begin(), in.suspicious.end(),
                                    [&](const suspicious_line& x) { return rules::suspicious_survived(ctx, x).empty(); });
  bool bad_exit = rules::any_worker_failed(ctx);
  if (dec.root_sig) {
    d.verdict = verdict::failure;
    fill_from_signature(d, *dec.root_sig);
    if (!dec.root) d.priority = 0;
  } else if (ctx.fs.size() > ctx.survived.size() || any_suspicious || bad_exit) {
    d.verdict = verdict::undetermined;
    dec.rank_rule = "no signature explains the failure";
  } else if (in.success_ends.empty() && rules::ends_in_startup(ctx, true)) {
    // Nothing looks wrong, but the log stops in the job's start-up, with no progress and no end: it may have
    // hung right there. Not healthy (the run did not end in success nor progress).
    d.verdict = verdict::undetermined;
    dec.rank_rule = std::string(kLogStopsInStartup);
  } else {
    d.verdict = verdict::healthy;
  }
  d.initiating_rank = dec.init_rank;
  d.initiating_rule = dec.rank_rule;
  d.exits = ctx.exits;
}

// The process-group backend of this run, for code that names it: gloo when only gloo lines were seen, else
// NCCL, PyTorch's backend for GPU training (https://pytorch.org/docs/stable/distributed.html#which-backend-to-use).
std::string backend_of(const rules::context& ctx) {
  bool gloo = false, nccl = false;
  for (const auto& f : ctx.fs) {
    const auto& sys = ctx.sig(f).systems;
    bool g = std::find(sys.begin(), sys.end(), "gloo") != sys.end();
    bool n = std::find(sys.begin(), sys.end(), "nccl") != sys.end();
    gloo = gloo || (g && !n);
    nccl = nccl || (n && !g);
  }
  return gloo && !nccl ? "\"gloo\"" : "\"nccl\"";
}

// A fix, verify or confirm step is shown with its placeholders filled; a step that needs a value this run
// does not have (an Xid with no catalogue row) is left out rather than shown unfilled.
// `{name|fallback}` takes the fallback when the run has no value ("torchrun --nproc_per_node {nproc|2}
// {script|train.py}": the run's own script when a traceback named it, else the common name). Run facts
// (run_facts.hpp) fill what the line's fields do not.
std::vector<std::string> fill_list(const std::vector<std::string>& list, const std::function<std::string(const std::string&)>& value) {
  std::vector<std::string> out;
  for (const auto& line : list) {
    bool all = true;
    auto filled = text::fill_template(line, [&](const std::string& spec) {
      auto bar = spec.find('|');
      auto v = value(spec.substr(0, bar));
      if (v.empty() && bar != std::string::npos) v = spec.substr(bar + 1);
      all = all && !v.empty();
      return v;
    });
    if (all) out.push_back(std::move(filled));
  }
  return out;
}
void fill_steps(diagnosis& d, const std::function<std::string(const std::string&)>& value) {
  for (auto* list : {&d.fix, &d.verify, &d.confirm}) *list = fill_list(*list, value);
}

// The line whose own fields fill the sentence: the lead line, or the first evidence line that has any of
// them. Never one field from one line and the next from another (a pid of one kill with the name of
// another process).
const finding* fields_source(const kb::signature& s, const finding* lead, const std::vector<const finding*>& ev) {
  std::vector<std::string> names;
  std::string_view t = s.root_cause;
  for (auto open = t.find('{'); open != std::string_view::npos; open = t.find('{', open + 1))
    if (auto close = t.find('}', open); close != std::string_view::npos) names.emplace_back(t.substr(open + 1, close - open - 1));
  auto has_any = [&](const finding& f) {
    return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return !field(f, n).empty(); });
  };
  if (has_any(*lead)) return lead;
  for (const auto* f : ev)
    if (has_any(*f)) return f;
  return lead;
}

// Evidence (the root lines, earliest first, one per rank, the initiating rank's first), the first failing
// host, the kind (a lookup table row or a kind rule may refine it), and the summary and steps filled from
// the lines' fields.
void explain_root(diagnosis& d, decision& dec, const rules::context& ctx, const kb::library& lib) {
  const auto& root_sig = *dec.root_sig;
  const auto& init_rank = dec.init_rank;
  std::vector<const finding*> ev = dec.root_findings;
  std::stable_sort(ev.begin(), ev.end(), [](const finding* a, const finding* b) { return before(a->ts, b->ts); });
  if (init_rank) std::stable_partition(ev.begin(), ev.end(), [&](const finding* f) { return f->rank == init_rank; });
  std::set<std::string> used;
  for (const auto* f : ev) {
    std::string k = f->rank ? std::to_string(*f->rank) : f->source + f->text;
    if (!used.insert(k).second) continue;
    d.evidence_lines.push_back(to_evidence(*f, f->rank));  // after a rule's own evidence (a silent rank's last line)
    if (used.size() >= limits::kEvidenceLines) break;
  }
  const finding* lead = ev.front();
  if (!d.initiating_host && init_rank)
    for (const auto* f : ev)
      if (f->rank == init_rank && f->host) {
        d.initiating_host = f->host;
        break;
      }
  if (!d.initiating_host && lead->host && (!init_rank || lead->rank == init_rank)) d.initiating_host = lead->host;
  // a lookup table (Xid number -> NVIDIA's meaning) adds facts and may set the kind
  std::string key = root_sig.lookup_field.empty() ? "" : field(*lead, root_sig.lookup_field);
  if (key.empty() && !root_sig.lookup_field.empty())
    for (const auto* f : ev)
      if (!(key = field(*f, root_sig.lookup_field)).empty()) break;
  if (!key.empty()) {
    auto k = lib.lookup(root_sig, key, "kind");
    if (const auto* ki = k.empty() ? nullptr : lib.kind(k)) {
      d.kind = ki->kind;
      d.category = ki->category;
    }
  }
  std::string summary_suffix;  // a kind rule's reason, when it changed the kind
  for (const auto& kr : rules::kind_rules())
    if (auto k = kr.fn(ctx, dec.root_findings, d.kind))
      if (const auto* ki = lib.kind(k->first)) {
        d.kind = ki->kind;
        d.category = ki->category;
        d.rule = std::string(kr.name);
        d.kind_reason = k->second;
        dec.weak_kind = kr.weak;
        summary_suffix = " However, " + k->second + ".";
        break;
      }
  const finding* fields_from = fields_source(root_sig, lead, ev);
  auto value = [&](const std::string& name) -> std::string {
    if (name == "backend") return backend_of(ctx);
    // An inferred verdict's {rank} is the rank it names, never a rank of its evidence (a waiting rank's line).
    if (name == "rank") return init_rank ? std::to_string(*init_rank) : (dec.root && lead->rank ? std::to_string(*lead->rank) : "");
    if (name == "host") return d.initiating_host.value_or(lead->host.value_or(""));
    if (name == "ts") return format_time(lead->ts);
    if (name.rfind("lookup.", 0) == 0) return key.empty() ? "" : lib.lookup(root_sig, key, name.substr(7));
    if (auto v = field(*fields_from, name); !v.empty()) return v;
    return run_value(ctx, init_rank ? init_rank : lead->rank, name);
  };
  // A value this run does not have is not shown as "(unknown)": the sentence is said without it.
  d.summary = text::fill_sentence(root_sig.root_cause, value) + summary_suffix;
  if (auto v = field(*lead, "final_exception"); !v.empty() && d.summary.find(v) == std::string::npos)
    d.facts.push_back("the exception behind it: " + v);
  if (auto v = field(*lead, "user_frame"); !v.empty()) d.facts.push_back("raised at " + v);
  for (auto& f : fill_list(root_sig.facts, value)) d.facts.push_back(std::move(f));
  fill_steps(d, value);
}

// An inferred verdict with no line of its own: only {rank} can have a value.
void explain_inferred(diagnosis& d, const decision& dec, const rules::context& ctx) {
  auto value = [&](const std::string& name) -> std::string {
    if (name == "rank") return dec.init_rank ? std::to_string(*dec.init_rank) : "";
    return name == "host" || name == "ts" ? "" : run_value(ctx, dec.init_rank, name);
  };
  d.summary = text::fill_sentence(dec.root_sig->root_cause, value);
  for (auto& f : fill_list(dec.root_sig->facts, value)) d.facts.push_back(std::move(f));
  fill_steps(d, value);
}

void set_confidence(diagnosis& d, const decision& dec) {
  if (d.verdict != verdict::failure) return;
  if (dec.orphan || dec.weak_kind) d.confidence = confidence::low;
  else if (dec.root && dec.root_sig->priority >= kb::kStrongCausePriority)
    d.confidence = (dec.init_rank || dec.root_findings.size() <= 1 || !dec.root->rank) ? confidence::high : confidence::medium;
  else if (dec.root) d.confidence = confidence::medium;
  else d.confidence = confidence::low;
}

// Every other signature's lines, one group per signature (most lines first), each explained against the
// root cause; other causes of another kind are also listed as alternatives (highest priority first).
void group_collateral(diagnosis& d, const decision& dec, const rules::context& ctx) {
  std::map<int, collateral_group> groups;
  std::map<std::string, alternative> alts;
  for (const auto& f : ctx.fs) {
    if (dec.root && f.signature == dec.root->signature) continue;
    const auto& s = ctx.sig(f);
    if (s.is_cause() && !ctx.survived.count(&f) && (!dec.root_sig || s.kind != dec.root_sig->kind)) {
      auto& a = alts[s.name];
      if (a.signature.empty()) a = {s.name, s.kind, s.title, s.priority, to_evidence(f, f.rank)};
    }
    auto& g = groups[f.signature];
    if (g.signature.empty()) {
      g.signature = s.name;
      g.kind = s.kind;
      g.title = s.title;
      g.role = s.role;
      g.example = to_evidence(f, f.rank);
    }
    g.count += 1 + f.duplicates;  // every matching line, repeats across files and processes included
    if (f.rank) g.ranks.push_back(*f.rank);
  }
  for (auto& [sig, g] : groups) {
    std::sort(g.ranks.begin(), g.ranks.end());
    g.ranks.erase(std::unique(g.ranks.begin(), g.ranks.end()), g.ranks.end());
    // A group whose every line was survived says so, with the first line's reason.
    const std::string* survived_why = nullptr;
    bool all_survived = true;
    for (const auto& f : ctx.fs)
      if (f.signature == sig) {
        auto it = ctx.survived.find(&f);
        if (it == ctx.survived.end()) { all_survived = false; break; }
        if (!survived_why) survived_why = &it->second;
      }
    if (all_survived && survived_why) {
      g.explanation = "also seen, survived: " + *survived_why;
      d.collateral.push_back(std::move(g));
      continue;
    }
    g.ranks.erase(std::unique(g.ranks.begin(), g.ranks.end()), g.ranks.end());
    // The line a root rule set aside says why in one line: the rule's own summary.
    if (sig == dec.handed_from && dec.handed_by) {
      g.explanation = "not the cause (" + std::string(dec.handed_by->name) + "): " + std::string(dec.handed_by->summary);
      d.collateral.push_back(std::move(g));
      continue;
    }
    if (d.verdict == verdict::failure) {
      std::string of = dec.init_rank ? "rank " + std::to_string(*dec.init_rank) + "'s " + d.title : d.title;
      g.explanation = g.role == kb::role::symptom ? "collateral of " + of : "secondary error, likely a consequence of " + of;
    } else {
      g.explanation = g.role == kb::role::symptom ? "a consequence of a failure elsewhere" : "possible cause";
    }
    d.collateral.push_back(std::move(g));
  }
  std::stable_sort(d.collateral.begin(), d.collateral.end(),
                   [](const collateral_group& a, const collateral_group& b) { return a.count > b.count; });
  for (auto& [_, a] : alts) d.alternatives.push_back(std::move(a));
  std::stable_sort(d.alternatives.begin(), d.alternatives.end(),
                   [](const alternative& a, const alternative& b) { return a.priority > b.priority; });
}

// Lines that look wrong: severity first, then rarity across ranks (the odd rank out first), then order of
// appearance.
void rank_suspicious(diagnosis& d, const inputs& in, const rules::context& ctx) {
  d.suspicious = in.suspicious;
  for (auto& s : d.suspicious) s.survived = rules::suspicious_survived(ctx, s);
  // A healthy report lists only the lines it judged survived, each with its reason.
  if (d.verdict == verdict::healthy) std::erase_if(d.suspicious, [](const suspicious_line& s) { return s.survived.empty(); });
  std::stable_sort(d.suspicious.begin(), d.suspicious.end(), [](const suspicious_line& a, const suspicious_line& b) {
    if (a.strong != b.strong) return a.strong;
    return std::max<std::size_t>(1, a.ranks.size()) < std::max<std::size_t>(1, b.ranks.size());
  });
  if (d.suspicious.size() > in.max_suspicious_shown) d.suspicious.resize(in.max_suspicious_shown);
}

// torchrun's own verdict: its "Root Cause (first observed failure)" is the first worker the agent saw
// exit (https://pytorch.org/docs/stable/elastic/errors.html), which need not be the first to fail (a rank
// that hung or was killed by a peer's failure can exit first). When it names another rank, say so.
void note_launcher_root_cause(diagnosis& d, const rules::context& ctx) {
  if (!d.initiating_rank || d.verdict == verdict::healthy) return;
  for (const auto& e : ctx.exits)
    if (e.root_cause && e.rank && *e.rank != *d.initiating_rank) {
      d.launcher_note = "torchrun's \"Root Cause (first observed failure)\" names rank " + std::to_string(*e.rank) +
                        (e.exitcode ? " (exitcode " + std::to_string(*e.exitcode) + ")" : std::string()) + " at " + e.source + ":" +
                        std::to_string(e.line_no) + ": the first worker the agent saw exit, which is not the first to fail here (rank " +
                        std::to_string(*d.initiating_rank) + ", decided above)";
      return;
    }
}

// The run's Slurm job id, when the logs name it (a jobid field of a slurmstepd/sacct line, or the default
// output name slurm-%j.out / slurm-%A_%a.out: https://slurm.schedmd.com/sbatch.html#OPT_output), fills
// $SLURM_JOB_ID in the verify commands, which then run as printed.
void fill_slurm_job_id(diagnosis& d, const rules::context& ctx, const inputs& in) {
  static const re2::RE2 id_re(R"(^(\d+(?:_\d+)?))");
  static const re2::RE2 name_re(R"((?:^|/)slurm-(\d+(?:_\d+)?)\.out$)");
  std::string job_id;
  // A job id the log text states wins over a file name; the file of the root-cause evidence wins over others.
  for (const auto& f : ctx.fs) {
    for (const char* k : {"jobid", "job_id", "stepid", "step_id"})
      if (auto v = field(f, k); !v.empty() && re2::RE2::PartialMatch(v, id_re, &job_id)) break;
    if (!job_id.empty()) break;
  }
  if (job_id.empty() && !d.evidence_lines.empty()) re2::RE2::PartialMatch(d.evidence_lines.front().source, name_re, &job_id);
  for (const auto& n : in.source_names)
    if (job_id.empty()) re2::RE2::PartialMatch(n, name_re, &job_id);
  if (job_id.empty()) return;
  for (auto& v : d.verify)
    for (const char* var : {"${SLURM_JOB_ID}", "$SLURM_JOB_ID"})
      for (std::size_t at; (at = v.find(var)) != std::string::npos;) v.replace(at, std::strlen(var), job_id);
}

// What each variable of the verify commands stands for (kb/_tables/verify_vars.tsv, the `user` ones), with
// this run's value where it has one: the commands then run as printed once those are set.
void explain_verify_vars(diagnosis& d, const kb::library& lib) {
  auto tv = lib.tables.find("verify_vars");
  if (tv == lib.tables.end()) return;
  static const re2::RE2 var_re(R"(\$\{?([A-Za-z_][A-Za-z0-9_]*))");
  std::set<std::string> seen;
  for (const auto& v : d.verify) {
    re2::StringPiece cmd(v.data(), std::min(v.size(), v.find("  #")));
    std::string var;
    while (re2::RE2::FindAndConsume(&cmd, var_re, &var)) {
      if (tv->second.get(var, "set") != "user" || !seen.insert(var).second) continue;
      std::string line = "$" + var + ": " + tv->second.get(var, "meaning");
      if ((var == "NODE" || var == "HOST_A") && d.initiating_host) line += " (here " + *d.initiating_host + ")";
      d.verify_where.push_back(std::move(line));
    }
  }
}

// What an on-call engineer does when the logs do not say why: read the first line that looks wrong, then
// capture what the logs lack, chosen by what they hold. The settings are upstream's:
// https://pytorch.org/docs/stable/torch_nccl_environment_variables.html (TORCH_NCCL_TRACE_BUFFER_SIZE,
// TORCH_NCCL_DUMP_ON_TIMEOUT), https://pytorch.org/docs/stable/distributed.html#torch-distributed-debug
// (TORCH_DISTRIBUTED_DEBUG), https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html (NCCL_DEBUG,
// NCCL_DEBUG_SUBSYS), https://github.com/benfred/py-spy (py-spy dump).
void next_steps(diagnosis& d, const rules::context& ctx) {
  if (d.verdict != verdict::undetermined) return;
  auto at = [&](const std::string& source, std::uint64_t line_no) { return source + ":" + std::to_string(line_no); };
  if (!d.suspicious.empty()) {
    const auto& s = d.suspicious.front();
    d.next_steps.push_back("Read " + at(s.source, s.line_no) + " first, the first line that looks wrong, and the lines of " +
                           (s.rank ? "rank " + std::to_string(*s.rank) : std::string("its file")) + " just before it.");
  } else if (!d.collateral.empty()) {
    const auto& e = d.collateral.front().example;
    d.next_steps.push_back("Read " + at(e.source, e.line_no) + " first (" + d.collateral.front().title +
                           "), and what each rank printed just before its first error.");
  } else if (d.initiating_rule == kLogStopsInStartup && !ctx.in->stream_ends.empty()) {
    // Nothing looks wrong (set_verdict: ends_in_startup): the evidence is where each log stops.
    const auto& e = ctx.in->stream_ends.front();
    d.next_steps.push_back("Read " + at(e.source, e.line_no) + " first, where " +
                           (ctx.in->stream_ends.size() > 1 ? "the first log" : std::string("the log")) +
                           " stops: nothing after it shows progress or an end, so the job may have hung right after that line.");
  }
  bool timeout = false, nccl = false;
  for (const auto& f : ctx.fs) {
    const auto& s = ctx.sig(f);
    timeout = timeout || s.category == "synchronization" || s.has_tag("symptom.hang") || s.has_tag("symptom.timeout");
    nccl = nccl || std::find(s.systems.begin(), s.systems.end(), "nccl") != s.systems.end();
  }
  if (timeout) {
    d.next_steps.push_back("Rerun with TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_DISTRIBUTED_DEBUG=DETAIL: on the "
                           "next timeout every rank dumps its last collectives, and `torchfrtrace` on the dumps names the rank that "
                           "never joined (firstfault reads its output).");
    d.next_steps.push_back("If the job hangs again, run `py-spy dump --pid PID` for each rank's process while it waits: the rank "
                           "that is not in a collective is the one the others wait for.");
  }
  if (nccl || rules::ends_in_startup(ctx, true))
    d.next_steps.push_back("Rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET (and TORCH_DISTRIBUTED_DEBUG=INFO): the log then "
                           "says which interface, transport and peers each rank used during set-up.");
  if (d.next_steps.size() <= 1)
    d.next_steps.push_back("Add the logs that are missing: every rank's output (torchrun --log-dir, srun --output=%t), and each "
                           "node's kernel log from the time of the failure (dmesg -T or journalctl -k): a rank or node that stopped "
                           "without an error is the usual culprit.");
}

}  // namespace

// The stages in order; each names the rule that decided (docs/ARCHITECTURE.md, "Correlation rules").
diagnosis correlate(const inputs& in, const kb::library& lib) {
  diagnosis d;
  const auto ctx = rules::make_context(in, lib);
  auto dec = decide_root(ctx, lib, d);
  set_verdict(d, dec, ctx, in);
  // Code keeps its own braces (f-strings, dicts): only the run facts meant for code are filled.
  for (auto& c : d.fix_code)
    for (std::size_t at; (at = c.code.find("{backend}")) != std::string::npos;) c.code.replace(at, 9, backend_of(ctx));
  if (!dec.root_sig) dec.root_findings.clear();
  if (!dec.root_findings.empty()) explain_root(d, dec, ctx, lib);
  else if (dec.root_sig) explain_inferred(d, dec, ctx);
  set_confidence(d, dec);
  group_collateral(d, dec, ctx);
  rank_suspicious(d, in, ctx);
  note_launcher_root_cause(d, ctx);
  fill_slurm_job_id(d, ctx, in);
  explain_verify_vars(d, lib);
  next_steps(d, ctx);
  d.slow_ranks = slow_ranks_of(in);  // stragglers.cpp: a fact of the report, no verdict changes
  d.ranks = rules::rank_stories(ctx, d.initiating_rank, &d.ranks_total);  // story.cpp: facts of the report too
  d.outcome = rules::outcome_of(ctx, d.ranks);
  return d;
}

}  // namespace ff::correlate
