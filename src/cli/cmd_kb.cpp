// firstfault kb lint|test|list|show|search|export and firstfault explain: the knowledge base itself.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.hpp"
#include "common.hpp"
#include "firstfault/action.hpp"
#include "firstfault/catalogue.hpp"
#include "firstfault/correlate_rules.hpp"
#include "firstfault/encyclopedia.hpp"
#include "firstfault/gate.hpp"
#include "firstfault/kb_lint.hpp"
#include "firstfault/pipeline.hpp"
#include "firstfault/text.hpp"

namespace ff::cli {
namespace {

void print_signature(const kb::signature& s) {
  std::cout << s.title << "\n" << std::string(s.title.size(), '=') << "\n\n";
  std::cout << "name: " << s.name << "   kind: " << s.kind << " (" << s.category << ")   role: " << kb::to_string(s.role)
            << (s.is_cause() ? "   priority: " + std::to_string(s.priority) : "") << "\n\n";
  std::cout << s.description << "\n";
  auto list = [](const char* head, const std::vector<std::string>& xs, const char* bullet) {
    if (xs.empty()) return;
    std::cout << head << "\n";
    for (const auto& x : xs) std::cout << "  " << bullet << x << "\n";
    std::cout << "\n";
  };
  list("Fingerprints:", s.fingerprints, "");
  list("Fix:", text::with_fallbacks(s.fix), "- ");
  for (const auto& c : s.fix_code) {
    std::cout << "  [" << c.stack << "]\n";
    std::istringstream code(c.code);
    for (std::string l; std::getline(code, l);) std::cout << "    " << l << "\n";
  }
  list("Verify:", text::with_fallbacks(s.verify), "$ ");
  list("Confirm:", s.confirm, "[ ] ");
  list("Prevention:", s.prevention, "- ");
  list("False positives:", s.falsepositives, "- ");
  if (!s.positive.empty()) std::cout << "Example:\n  " << s.positive.front().line << "\n\n";
  list("References:", s.references, "");
}

// A failure kind: its meaning, then its signatures (strongest cause first), then the first one in full.
void print_kind(const kb::library& lib, const kb::kind_info& k) {
  std::vector<const kb::signature*> of_kind;
  for (const auto& s : lib.signatures)
    if (s.kind == k.kind) of_kind.push_back(&s);
  std::stable_sort(of_kind.begin(), of_kind.end(), [](auto* a, auto* b) {
    return a->is_cause() != b->is_cause() ? a->is_cause() : a->priority > b->priority;
  });
  std::cout << "kind " << k.kind << " (" << k.category << ")\n  " << k.meaning << "\n\n";
  std::cout << "Signatures of this kind:\n";
  for (const auto* s : of_kind) std::printf("  %-48s %-8s %s\n", s->name.c_str(), std::string(kb::to_string(s->role)).c_str(), s->title.c_str());
  if (!of_kind.empty()) {
    std::cout << "\n";
    print_signature(*of_kind.front());
  }
}

// `explain NAME` and `kb show NAME`: a signature or a kind, by name, with suggestions when neither exists.
int show_entry(const kb::library& lib, const std::string& typed) {
  std::string n = kb::resolve_name(lib, typed);
  if (const auto* s = lib.find(n)) {
    print_signature(*s);
    return 0;
  }
  if (const auto* k = lib.kind(n)) {
    print_kind(lib, *k);
    return 0;
  }
  std::vector<std::string> names;
  for (const auto& sig : lib.signatures) names.push_back(sig.name);
  for (const auto& k : lib.kinds) names.push_back(k.kind);
  std::string hint;
  for (const auto& c : text::closest(n, names, 5)) hint += (hint.empty() ? "" : ", ") + c;
  print_error("no signature or kind named '" + n + "'" +
              (hint.empty() ? " (try: firstfault kb search WORD)" : "; did you mean: " + hint + "?"));
  return kExitUsage;
}

class kb_command final : public command {
 public:
  kb_command(CLI::App& app, std::vector<std::string>& kb_dirs) {
    sub_ = app.add_subcommand("kb", "inspect and check the knowledge base");
    sub_->require_subcommand(1);
    lint_ = sub_->add_subcommand("lint", "check every signature's schema and patterns");
    test_ = sub_->add_subcommand("test", "run every signature's examples (and check healthy baselines)");
    test_->add_option("--healthy", healthy_dirs_, "logs of healthy runs: any cause finding in them fails");
    list_ = sub_->add_subcommand("list", "list signatures");
    list_->add_option("--format", list_format_, "text | json")->check(CLI::IsMember({"text", "json"}));
    show_ = sub_->add_subcommand("show", "show one signature");
    show_->add_option("name", show_name_)->required();
    search_ = sub_->add_subcommand("search", "find signatures by word");
    search_->add_option("query", query_)->required();
    export_ = sub_->add_subcommand("export", "export the knowledge base");
    export_->add_flag("--patterns", export_patterns_, "one fingerprint regex per line (RE2 syntax, for rg -f)");
    export_->add_flag("--ere", export_ere_, "with --patterns: POSIX extended syntax, for grep -E -f");
    export_->add_flag("--gate", export_gate_, "the scan gate's Vectorscan expressions, one per line: flags, a tab, the expression (bench/floor.cpp)");
    export_->add_option("--format", export_format_, "markdown | html: write the encyclopedia")->check(CLI::IsMember({"markdown", "html"}));
    export_->add_option("dir", export_dir_, "output directory for --format");
    coverage_ = sub_->add_subcommand("coverage", "how many upstream message templates (kb/_catalogue) the knowledge base reads as classified");
    coverage_->add_option("--format", coverage_format_, "text | json | tsv (tsv: one row per template, for tools/catalogue/classify.py)")
        ->check(CLI::IsMember({"text", "json", "tsv"}));
    coverage_->add_option("--catalogue", catalogue_dir_, "directory of catalogues (default: the source tree's kb/_catalogue)");
    coverage_->add_flag("--missed", coverage_missed_, "text: list every classified template the tool does not read as classified");
    coverage_->add_option("--min", coverage_min_, "fail (exit 1) when recognised/classified over all projects is below this fraction");
    actions_ = sub_->add_subcommand("actions", "print the action rule table (kb/_tables/actions.tsv) as Markdown, as docs/actions.md shows it");
    lint_->add_option("--catalogue", catalogue_dir_, "directory of catalogues for the fingerprint check (default: the source tree's kb/_catalogue)");
    for (auto* c : {lint_, test_, list_, show_, search_, export_, coverage_, actions_})
      c->add_option("--kb", kb_dirs, "extra directory of signature files")->check(CLI::ExistingDirectory);
  }
  bool parsed() const override { return sub_->parsed(); }
  int run(const kb::library& lib) override {
    if (lint_->parsed()) return lint(lib);
    if (test_->parsed()) return test(lib);
    if (list_->parsed()) return list(lib);
    if (search_->parsed()) return search(lib);
    if (show_->parsed()) return show_entry(lib, show_name_);
    if (coverage_->parsed()) return coverage(lib);
    if (actions_->parsed()) {
      std::cout << action::table_markdown(lib);
      return 0;
    }
    return export_kb(lib);
  }

 private:
  int lint(const kb::library& lib) const;
  int test(const kb::library& lib) const;
  int list(const kb::library& lib) const;
  int search(const kb::library& lib) const;
  int export_kb(const kb::library& lib) const;
  int export_site(const kb::library& lib) const;
  int coverage(const kb::library& lib) const;

  CLI::App *sub_, *lint_, *test_, *list_, *show_, *search_, *export_, *coverage_, *actions_;
  std::string coverage_format_ = "text", catalogue_dir_ = FF_CATALOGUE_DIR;
  bool coverage_missed_ = false;
  double coverage_min_ = 0;
  std::vector<std::string> healthy_dirs_;
  std::string list_format_ = "text", show_name_, query_, export_format_, export_dir_;
  bool export_patterns_ = false, export_ere_ = false, export_gate_ = false;
};

int kb_command::lint(const kb::library& lib) const {
  auto issues = kb::lint(lib);
  std::vector<std::string> produced;
  for (const auto& r : correlate::rules::inference_rules())
    for (auto p : r.produces) produced.emplace_back(p);
  for (auto& i : kb::lint_inferred(lib, produced)) issues.push_back(std::move(i));
  for (auto& i : action::lint(lib)) issues.push_back({std::move(i.file), std::move(i.name), std::move(i.message)});  // every kind has an action rule
  for (const auto& i : issues) std::printf("%s: %s: %s\n", i.file.c_str(), i.name.c_str(), i.message.c_str());
  // Fingerprints no real line backs (docs/catalogues.md): counted as warnings, not problems, until every
  // signature's project has a catalogue.
  std::size_t unbacked = 0;
  if (auto cats = catalogue::load_dir(catalogue_dir_); cats) {
    auto loose = catalogue::lint_fingerprints(lib, cats.value());
    unbacked = loose.size();
    for (const auto& i : loose) std::printf("warning: %s: %s: %s\n", i.file.c_str(), i.name.c_str(), i.message.c_str());
  }
  // Not problems: the fingerprints with no rare literal of kMinAtom bytes, which the scan gate holds as
  // their own regexps (each costs the gate more than a literal; kb/_tables/healthy_lines.tsv says when a
  // literal counts as common).
  if (auto g = match::gate::build(lib, {}, false); g && !g.value().regex_gated().empty()) {
    std::printf("note: %zu fingerprint(s) gated by their own regexp (no literal of %d+ bytes that healthy text lacks):\n",
                g.value().regex_gated().size(), match::gate::kMinAtom);
    for (const auto& r : g.value().regex_gated()) std::printf("  %s\n", r.c_str());
  }
  std::printf("%zu signatures, %zu problem(s), %zu warning(s)\n", lib.signatures.size(), issues.size(), unbacked);
  return issues.empty() ? 0 : 1;
}

int kb_command::test(const kb::library& lib) const {
  auto fails = kb::test_examples(lib);
  for (auto& f : pipeline::check_healthy_baselines(healthy_dirs_, lib)) fails.push_back(std::move(f));
  for (const auto& f : fails) std::printf("FAIL %s: %s\n", f.name.c_str(), f.message.c_str());
  std::size_t n = 0;
  for (const auto& s : lib.signatures) n += s.positive.size() + s.negative.size();
  std::printf("%zu examples in %zu signatures, %zu failure(s)\n", n, lib.signatures.size(), fails.size());
  return fails.empty() ? 0 : 1;
}

int kb_command::list(const kb::library& lib) const {
  if (list_format_ == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& s : lib.signatures)
      j.push_back({{"name", s.name}, {"id", s.id}, {"title", s.title}, {"kind", s.kind}, {"category", s.category},
                   {"role", kb::to_string(s.role)}, {"layer", kb::to_string(s.layer)}, {"priority", s.priority}, {"status", s.status}, {"level", s.level},
                   {"examples", s.positive.size() + s.negative.size()}, {"fix", s.fix}, {"verify", s.verify},
                   {"references", s.references}});
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  for (const auto& s : lib.signatures)
    std::printf("%-48s %-8s %-32s %s\n", s.name.c_str(), std::string(kb::to_string(s.role)).c_str(), s.kind.c_str(), s.title.c_str());
  return 0;
}

int kb_command::search(const kb::library& lib) const {
  auto found = kb::search(lib, query_);
  for (const auto* s : found) std::printf("%-48s %s\n", s->name.c_str(), s->title.c_str());
  if (found.empty()) {
    print_error("no signature mentions '" + query_ + "'");
    return 1;
  }
  return 0;
}

int kb_command::export_kb(const kb::library& lib) const {
  if (!export_format_.empty()) return export_site(lib);
  if (export_gate_) {
    auto g = match::gate::build(lib, pipeline::engine::gate_extras(), false);
    if (!g) {
      print_error(g.error().message);
      return 1;
    }
    for (const auto& [expr, flags] : g.value().expressions()) std::cout << flags << '\t' << expr << '\n';
    return 0;
  }
  if (!export_patterns_) {
    print_error("kb export needs --patterns, --gate or --format markdown|html DIR");
    return kExitUsage;
  }
  for (const auto& s : lib.signatures)
    for (const auto& p : s.fingerprints) std::cout << (export_ere_ ? kb::to_ere(p) : p) << "\n";
  return 0;
}

int kb_command::export_site(const kb::library& lib) const {
  if (export_dir_.empty()) {
    print_error("kb export --format " + export_format_ + " needs an output directory");
    return kExitUsage;
  }
  const bool html = export_format_ == "html";
  auto pages = encyclopedia::render_site(lib, html ? encyclopedia::format::html : encyclopedia::format::markdown);
  for (const auto& p : pages) {
    std::filesystem::path out = std::filesystem::path(export_dir_) / p.path;
    std::error_code ec;
    std::filesystem::create_directories(out.parent_path(), ec);
    std::ofstream f(out, std::ios::binary);
    if (!f || !(f << p.content)) {
      print_error(out.string() + ": cannot write");
      return kExitUsage;
    }
  }
  std::printf("wrote %zu pages to %s (open %s/index.%s)\n", pages.size(), export_dir_.c_str(), export_dir_.c_str(), html ? "html" : "md");
  return 0;
}

int kb_command::coverage(const kb::library& lib) const {
  auto cats = catalogue::load_dir(catalogue_dir_);
  if (!cats) {
    print_error(cats.error().message);
    return kExitUsage;
  }
  auto eng = pipeline::engine::build(lib);
  if (!eng) {
    print_error(eng.error().message);
    return 1;
  }
  std::vector<catalogue::coverage> covs;
  for (const auto& p : cats.value()) {
    auto c = catalogue::evaluate(eng.value(), p);
    if (!c) {
      print_error(c.error().message);
      return 1;
    }
    covs.push_back(std::move(c).value());
  }
  std::size_t templates = 0, classified = 0, recognised = 0;
  for (const auto& c : covs) templates += c.templates, classified += c.classified, recognised += c.recognised;
  if (coverage_format_ == "json") {
    nlohmann::json projects = nlohmann::json::array();
    for (const auto& c : covs)
      projects.push_back({{"name", c.name}, {"source", c.source}, {"commit", c.commit}, {"templates", c.templates},
                          {"classified", c.classified}, {"recognised", c.recognised}});
    nlohmann::json j{{"projects", projects}, {"templates", templates}, {"classified", classified}, {"recognised", recognised}};
    std::cout << j.dump(2) << "\n";
  } else if (coverage_format_ == "tsv") {
    std::cout << "project\tsource\ttemplate\tclass\trecognised\tmatched\tline\n";
    for (const auto& c : covs)
      for (const auto& r : c.results) {
        std::string matched;
        for (const auto& m : r.matched) matched += (matched.empty() ? "" : ",") + m;
        std::cout << c.name << '\t' << r.e->source << '\t' << r.e->tmpl << '\t' << r.e->cls << '\t' << (r.recognised ? 1 : 0) << '\t'
                  << matched << '\t' << r.line << '\n';
      }
  } else {
    std::printf("%-12s %-52s %-14s %9s %10s %10s\n", "project", "source", "commit", "templates", "classified", "recognised");
    for (const auto& c : covs)
      std::printf("%-12s %-52s %-14s %9zu %10zu %10zu\n", c.name.c_str(), c.source.c_str(), c.commit.substr(0, 12).c_str(), c.templates,
                  c.classified, c.recognised);
    std::printf("%-12s %-52s %-14s %9zu %10zu %10zu  (%.1f%% of classified recognised)\n", "total", "", "", templates, classified,
                recognised, classified ? 100.0 * static_cast<double>(recognised) / static_cast<double>(classified) : 0.0);
    if (coverage_missed_)
      for (const auto& c : covs)
        for (const auto& r : c.results)
          if (r.classified && !r.recognised)
            std::printf("missed %s %s [%s]: %s\n", c.name.c_str(), r.e->source.c_str(), r.e->cls.c_str(), r.line.c_str());
  }
  if (coverage_min_ > 0 && classified > 0 &&
      static_cast<double>(recognised) < coverage_min_ * static_cast<double>(classified)) {
    std::fprintf(stderr, "kb coverage: %zu of %zu classified templates recognised, below the floor %.3f\n", recognised, classified,
                 coverage_min_);
    return 1;
  }
  return 0;
}

class explain_command final : public command {
 public:
  explicit explain_command(CLI::App& app) {
    sub_ = app.add_subcommand("explain", "explain a failure signature (name or kind)");
    sub_->add_option("name", name_)->required();
  }
  bool parsed() const override { return sub_->parsed(); }
  int run(const kb::library& lib) override { return show_entry(lib, name_); }

 private:
  CLI::App* sub_;
  std::string name_;
};

}  // namespace

std::unique_ptr<command> add_kb(CLI::App& app, std::vector<std::string>& kb_dirs) { return std::make_unique<kb_command>(app, kb_dirs); }
std::unique_ptr<command> add_explain(CLI::App& app) { return std::make_unique<explain_command>(app); }

}  // namespace ff::cli
