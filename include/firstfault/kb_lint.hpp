// firstfault/kb_lint.hpp: `firstfault kb lint` and `firstfault kb test`, the checks of the knowledge base.
//
// Above the matcher in the layers (cmake/layers.tsv: ff_kb_lint): the pattern checks compile every pattern
// in both engines (match::check_pattern), so the knowledge base itself (ff_kb) does not depend on them.
//
//   auto issues = ff::kb::lint(lib);          // schema, order, uniqueness, patterns, vocabulary samples
//   auto failures = ff::kb::test_examples(lib);
#pragma once

#include <string>
#include <vector>

#include "firstfault/kb.hpp"

namespace ff::kb {

/// One problem found by lint(): "file: signature: message".
struct lint_issue {
  std::string file, name, message;
};

/// Schema, ordering, uniqueness and pattern checks (every pattern compiled in RE2 and Vectorscan).
std::vector<lint_issue> lint(const library& lib);

/// Shared definitions (kb/_macros): a signature that repeats a list's patterns or a macro's text instead of
/// naming it, and definitions no signature uses. Part of lint().
std::vector<lint_issue> lint_macros(const library& lib);

/// The vocabulary tables (kb/_tables/*.tsv with a `sample` column and a `word` or `regex` column): every row
/// names its source and has a sample; a `regex` matches its sample (RE2); a `word` stands in its sample at a
/// word start; and host_words samples are read the way their first use reads them (a path sample gives a
/// host in ingest::hints_from_path, a prefix sample is a console-prefix host form of the masker). Part of lint().
std::vector<lint_issue> lint_vocabulary(const library& lib);

/// Both directions between the correlator's inference rules and the knowledge base: every entry a
/// rule can produce exists with that `inferred_by`, and every `inferred_by` entry is produced by a
/// rule. `produced` is the union of the rules' outputs (correlate::rules::inference_rules()).
std::vector<lint_issue> lint_inferred(const library& lib, const std::vector<std::string>& produced);

/// Runs every example of every signature (firstfault kb test).
std::vector<example_failure> test_examples(const library& lib);

}  // namespace ff::kb
