// The per-line stage's stateless steps (line_stage.hpp). Moved out of pipeline.cpp unchanged: the collector
// (src/pipeline/) keeps the state and calls these in order.
#include "firstfault/line_stage.hpp"

#include "firstfault/text.hpp"

namespace ff::line {

std::string mask_line(mask::masker& masker, std::string_view raw) {
  // Masking happens here, before anything else sees the line: no output can carry the raw value.
  return masker.apply(text::sanitize(raw));
}

// A prefix no catalogue entry lists, learnt from this stream, peeled: the catalogue again on the rest.
void apply_learnt(const normalize::prefix_catalog& cat, normalize::line_meta& meta, const normalize::line_meta& learnt,
                  std::string_view rest) {
  normalize::line_meta inner;
  cat.normalize_fast(rest, inner);
  meta.body = inner.body;
  // The learnt number is a rank only where no catalogue prefix attributed the line.
  if (!meta.rank) meta.rank = inner.rank ? inner.rank : (meta.local_rank || meta.task ? std::nullopt : learnt.rank);
  if (!meta.local_rank) meta.local_rank = inner.local_rank;
  if (!meta.task) meta.task = inner.task;
  if (!meta.host) meta.host = std::move(inner.host);
  if (!meta.ts) meta.ts = inner.ts;
  if (!meta.level) meta.level = inner.level;
}

void peel_learnt(const normalize::prefix_catalog& cat, const normalize::prefix_learner& learner, normalize::line_meta& meta) {
  std::string_view rest;
  normalize::line_meta learnt;
  if (learner.peel(meta.body, learnt, rest)) apply_learnt(cat, meta, learnt, rest);
}

void peel(const normalize::prefix_catalog& cat, const normalize::prefix_learner& learner, std::string_view text,
          normalize::line_meta& meta) {
  cat.normalize_fast(text, meta);
  peel_learnt(cat, learner, meta);
}

void observe_and_peel(const normalize::prefix_catalog& cat, normalize::prefix_learner& learner, normalize::line_meta& meta,
                      const std::size_t* token_len, const std::string* token_shape) {
  std::string_view rest;
  // The learner writes only the rank (when it is empty) of its output: a per-thread one, its rank reset.
  thread_local normalize::line_meta learnt;
  learnt.rank.reset();
  const bool peeled = token_len ? learner.observe_and_peel(meta.body, *token_len, *token_shape, learnt, rest)
                                : learner.observe_and_peel(meta.body, learnt, rest);
  if (peeled) apply_learnt(cat, meta, learnt, rest);
}

std::int64_t rank_code(const std::optional<int>& rank, const std::optional<int>& local_rank) {
  if (rank) return (std::int64_t{1} << 32) | static_cast<std::uint32_t>(*rank);
  if (local_rank) return (std::int64_t{2} << 32) | static_cast<std::uint32_t>(*local_rank);
  return 0;
}

std::optional<correlate::rank_key> rank_key_of(const std::optional<int>& rank, const std::optional<int>& local_rank,
                                               const std::optional<int>& attempt) {
  if (rank) return correlate::rank_key::global_rank(*rank, attempt);
  if (local_rank) return correlate::rank_key::local_rank(*local_rank, attempt);
  return std::nullopt;
}

// (slurmstepd: src/slurmd/slurmstepd/req.c, "%s ON %s CANCELLED AT %s") That is the line's own time, not the
// earlier line's it would inherit. A date elsewhere in a message (a checkpoint's name) is not the time of the line.
std::optional<normalize::timestamp> time_in_message(std::string_view text) {
  for (auto at = text.find(" AT "); at != std::string_view::npos; at = text.find(" AT ", at + 1)) {
    auto t = text.substr(at + 4, 19);
    if (t.size() == 19 && normalize::detail::iso_plain_shape(t)) return normalize::detail::parse_iso_plain(t);
  }
  return std::nullopt;
}

bool host_forms_name_only(std::string_view line, std::string_view host) {
  return !mask::prefix_host_form(line, true) && mask::nccl_header_hosts_are(line, host);
}

const shape_facts& shape_memo::facts_of(std::uint64_t id, std::string_view line, std::string_view body) {
  auto& slot = recent_[id & 255];
  if (slot.id == id) return *slot.facts;
  auto it = shapes_.find(id);
  if (it != shapes_.end()) {
    slot = {id, &it->second};
    return it->second;
  }
  if (shapes_.size() >= kMaxShapes) {
    shapes_.clear();
    recent_.fill(recent{});
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
  const shape_facts& kept = shapes_.emplace(id, std::move(f)).first->second;
  slot = {id, &kept};
  return kept;
}

// (read_step() on a console of 1,024 interleaved ranks ran for nearly every line, its rank's newest in a
// block: ~10% of the instructions.)
std::optional<long> step_memo::step_of(std::uint64_t shape, std::uint8_t body_at, std::string_view body) {
  const std::uint64_t key = shape << 8 | body_at;
  auto& s = slots_[(key ^ (key >> 10)) & (slots_.size() - 1)];
  if (s.key != key) s = {key, extract::find_step(body)};
  const auto& sp = s.span;
  if (!sp.found) return std::nullopt;
  if (sp.at + sp.len > body.size()) return extract::read_step(body, true);  // (cannot happen: same shape, same body)
  return extract::step_value(body.substr(sp.at, sp.len));
}

}  // namespace ff::line
