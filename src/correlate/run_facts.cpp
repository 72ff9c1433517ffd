// Run facts for templates (run_facts.hpp). Each is read from lines the run printed; nothing is assumed.
#include "correlate/run_facts.hpp"

#include <cmath>
#include <set>
#include <string_view>

#include <fmt/format.h>

namespace ff::correlate {

namespace {

using rules::field;

std::string marked_field(const inputs::marked_line& m, std::string_view name) {
  for (const auto& [k, v] : m.fields)
    if (k == name) return v;
  return "";
}

// The newest marked line with a value for `name`: the given rank's when it has one, else any rank's (the
// lists in the order given, each newest first).
const inputs::marked_line* last_with(const std::vector<const std::vector<inputs::marked_line>*>& lists, std::string_view name,
                                     std::optional<int> rank) {
  const inputs::marked_line* any = nullptr;
  for (const auto* list : lists)
    for (auto it = list->rbegin(); it != list->rend(); ++it) {
      if (marked_field(*it, name).empty()) continue;
      if (rank && it->rank == rank) return &*it;
      if (!any) any = &*it;
    }
  return any;
}

std::optional<double> number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  try {
    std::size_t used = 0;
    double v = std::stod(s, &used);
    if (used != s.size() || !std::isfinite(v) || v < 0) return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

// Seconds per step a progress line states: Megatron's "elapsed time per iteration (ms)", DeepSpeed's "iter
// time (s)", tqdm's "s/it" or its reciprocal "it/s" (the signature's extract names the field by its unit).
std::optional<double> step_seconds(const inputs::marked_line& m) {
  if (auto v = number(marked_field(m, "step_ms"))) return *v / 1000.0;
  if (auto v = number(marked_field(m, "step_s"))) return *v;
  if (auto v = number(marked_field(m, "it_per_s")); v && *v > 0) return 1.0 / *v;
  return std::nullopt;
}

std::string progress_value(const rules::context& ctx, std::optional<int> rank, const std::string& what) {
  const auto* m = last_with({&ctx.in->fact_lines}, "step", rank);
  if (!m) return "";
  auto step = number(marked_field(*m, "step"));
  auto planned = number(marked_field(*m, "planned"));
  if (!planned && m->rank)
    if (auto a = ctx.activity.find(*m->rank); a != ctx.activity.end() && a->second.planned_steps)
      planned = static_cast<double>(*a->second.planned_steps);
  auto per = step_seconds(*m);
  if (what == "step") return step ? fmt::format("{:.0f}", *step) : "";
  if (what == "planned") return planned ? fmt::format("{:.0f}", *planned) : "";
  if (what == "step_time") return per ? human_duration(*per) : "";
  if (what == "needed") return per && planned ? human_duration(*per * *planned) : "";
  if (what == "left") return per && planned && step && *planned >= *step ? human_duration(*per * (*planned - *step)) : "";
  return "";
}

// Processes per node: not inferred from the ranks a log shows (a pasted excerpt of an 8-GPU job may show
// ranks 0-5 only, and "6" would read as a fact). No line states it in a form read yet, so the template's
// fallback is shown.
std::string nproc_value(const rules::context&) { return ""; }

std::string ckpt_dir_value(const rules::context& ctx, std::optional<int> rank) {
  // A path the failing line names itself (OSError's file name) comes first.
  for (const auto& f : ctx.fs)
    if ((!rank || f.rank == rank) && ctx.sig(f).is_cause())
      if (auto p = field(f, "ckpt_path"); !p.empty()) return dir_of(p);
  if (const auto* m = last_with({&ctx.in->fact_lines, &ctx.in->work_lines}, "ckpt_path", rank)) return dir_of(marked_field(*m, "ckpt_path"));
  return "";
}

std::string script_value(const rules::context& ctx, std::optional<int> rank) {
  std::string any;
  for (const auto& f : ctx.fs)
    if (auto s = field(f, "script"); !s.empty()) {
      if (rank && f.rank == rank) return s;
      if (any.empty()) any = s;
    }
  return any;
}

}  // namespace

std::string human_duration(double s) {
  if (s < 10) return fmt::format("{:.1f} s", s);
  if (s < 300) return fmt::format("{:.0f} s", s);
  if (s < 7200) return fmt::format("{:.1f} min", s / 60);
  if (s < 72 * 3600) return fmt::format("{:.1f} h", s / 3600);
  return fmt::format("{:.1f} days", s / 86400);
}

std::string dir_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string run_value(const rules::context& ctx, std::optional<int> rank, const std::string& name) {
  if (name == "script") return script_value(ctx, rank);
  if (name == "nproc") return nproc_value(ctx);
  if (name == "ckpt_dir") return ckpt_dir_value(ctx, rank);
  if (name.rfind("progress.", 0) == 0) return progress_value(ctx, rank, name.substr(9));
  return "";
}

}  // namespace ff::correlate
