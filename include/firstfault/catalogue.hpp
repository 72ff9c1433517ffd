// firstfault/catalogue.hpp: the message catalogues of upstream projects and how well the knowledge base reads them.
//
// A catalogue (kb/_catalogue/PROJECT.tsv, docs/catalogues.md) lists every error and warning message one
// upstream project can print: its template (placeholders <int> <hex> <float> <str>), level, form and source
// (path:line@commit), and its class: what the message means to a training run. tools/catalogue/ writes them
// from the project's source at a pinned commit. `firstfault kb coverage` synthesises a line from every
// template (placeholders filled with typical values, wrapped in the common prefixes) and reads it the way a
// diagnosis does; a template is recognised when that reading agrees with its class.
//
//   auto cats = ff::catalogue::load_dir("kb/_catalogue");
//   auto eng = ff::pipeline::engine::build(lib);
//   for (const auto& p : cats.value()) auto cov = ff::catalogue::evaluate(eng.value(), p);
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "firstfault/kb.hpp"
#include "firstfault/kb_lint.hpp"
#include "firstfault/result.hpp"

namespace ff::pipeline {
struct engine;
}

namespace ff::catalogue {

/// What a template means to a training run (the class column).
struct klass {
  enum class what {
    none,           ///< not classified yet (empty column), or a spelling this version does not know
    kind_cause,     ///< kind:KIND:cause: the message is that failure
    kind_collateral,///< kind:KIND:collateral: printed because of that failure elsewhere
    benign,         ///< benign:CONDITION: printed by healthy runs under that condition
    generic_error,  ///< an error with no kind of its own: suspicious, never healthy, undetermined at worst
    irrelevant,     ///< printed only outside training runs (CLI usage, build tools, inference servers)
  };
  what is = what::none;
  std::string kind;       ///< for kind_cause and kind_collateral
  std::string condition;  ///< for benign
};
klass parse_class(std::string_view text);

struct entry {
  std::string tmpl, level, form, source, cls, signature;
  int line_no = 0;  ///< in the catalogue file
};

struct project {
  std::string name, source, commit, origin, file;
  std::vector<entry> entries;
};

/// Reads one catalogue: "# key: value" header lines (project, source, commit, origin), then a header row
/// naming the columns (template, level, form, source, class, signature; any order, extra columns ignored).
result<project> parse(const std::string& file, std::string_view text);
/// Every *.tsv of `dir` except classes.tsv and hints.tsv (the rules and the typical values), sorted by name.
result<std::vector<project>> load_dir(const std::string& dir);

/// The template with its placeholders filled with typical values: <int> 3, 42, 1 in turn; <hex> 0x1f (1f after a literal "0x");
/// <float> 1.5; <str> node-1, eth0, /tmp/x in turn. A placeholder that carries its typical value,
/// <str=JOB 42>, is filled with it (the catalogue's hints, where the generic value would not be realistic).
std::string fill(std::string_view tmpl);
/// The lines a template is tested as. The message first gets the header its form implies (form "log": a
/// Python logging header with the level for .py sources, a c10/glog header for C and C++, a dmesg stamp
/// for the kernel; form "line": none, the template is the whole line), then each common prefix: none,
/// torchrun's "[rank3]:", srun's "3: ", a collector's RFC 3339 stamp.
std::vector<std::string> synthesise(const entry& e, std::string_view project);

/// What one template came to.
struct template_result {
  const entry* e = nullptr;
  bool classified = false, recognised = false;
  std::string line;                  ///< the first synthesised line whose reading disagreed (or the first line)
  std::vector<std::string> matched;  ///< signatures that matched that line (name)
};

struct coverage {
  std::string name, source, commit;
  std::size_t templates = 0, classified = 0, recognised = 0;
  std::vector<template_result> results;
};

/// Reads every template's synthesised lines with the diagnosis's prefix catalogue, matcher and
/// suspicion test. Errors: the matcher's engine failing.
result<coverage> evaluate(const pipeline::engine& eng, const project& p);

/// The lint check of the catalogues (`kb lint`): every fingerprint of every signature matches at least one
/// catalogued template's synthesised line or one real sample (a positive example). One issue per fingerprint
/// that matches neither: a pattern nobody has seen a line for, or a catalogue that lacks its project.
std::vector<kb::lint_issue> lint_fingerprints(const kb::library& lib, const std::vector<project>& catalogues);

}  // namespace ff::catalogue
