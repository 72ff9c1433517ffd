// firstfault/kb.hpp: the knowledge base: failure signatures, the kind vocabulary and line prefixes.
//
// Signatures are YAML files, one per failure (kb/<area>/<name>.yaml; fields in docs/signatures.md).
// The files under kb/ are compiled into the binary (cmake/embed_kb.cmake), so a copied binary still
// works; library::load() can add the user's own directories (--kb DIR), which may also override a
// built-in signature by using the same name.
//
//   auto lib = ff::kb::library::load(true, {"./my_signatures"});
//   if (!lib) return fail(lib.error().message);
//   for (const auto& s : lib.value().signatures) std::puts(s.name.c_str());
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "firstfault/result.hpp"

namespace ff::kb {

struct example {
  std::string line;
  std::map<std::string, std::string> expect;  ///< extract group -> value the line must yield
};

struct code_fix {
  std::string stack;  ///< pytorch | hf-trainer | deepspeed | megatron | slurm | kubernetes | shell
  std::string code;
};

/// One failure signature. Field meanings: docs/signatures.md.
/// Priority bands of cause signatures (docs/signatures.md, priority): 70 and above are specific software,
/// kernel, scheduler and hardware verdicts (a root cause the report can call with high confidence); 10 and
/// below is the catch-all Python exception, which a symptom or a specific cause on the same line explains.
constexpr int kStrongCausePriority = 70;
constexpr int kCatchAllCausePriority = 10;

/// What a matching line is to the correlator (docs/signatures.md, role). `unknown`: the file's value is none
/// of these (kb lint reports it).
enum class role { unknown, cause, symptom, benign };
/// How specific a signature's fingerprints are; the order is the rank (lower hides higher on one line).
enum class layer { specific, family, generic, unknown };
/// Which rank a matching line names as the initiator (docs/signatures.md, initiator), parsed once at load.
struct initiator {
  enum class how {
    none,           ///< the field is absent: the line names no rank
    printing_rank,  ///< the rank that wrote the line
    named_rank,     ///< the rank in the peer_rank group, or a single rank in ranks
    rank_zero,      ///< rank 0's own work (e.g. a checkpoint save)
    exit_code,      ///< the worker torchelastic reported with `exit_code` ("exit_code:N")
    unknown,        ///< anything else (kb lint reports it)
  };
  how kind = how::none;
  int exit_code = 0;
  bool operator==(const initiator&) const = default;
};
role parse_role(std::string_view text);
layer parse_layer(std::string_view text);  ///< empty text: specific (the default)
initiator parse_initiator(std::string_view text);
std::string_view to_string(role r);
std::string_view to_string(layer l);
std::string to_string(const initiator& i);  ///< the YAML spelling ("" for none)

struct signature {
  std::string file;  ///< where it was loaded from ("builtin:torch/x.yaml" or a path)
  int line_of_name = 0;
  std::string title, id, name, status, level, description, author, date;
  std::vector<std::string> references, tags, systems, collateral_of;
  std::vector<std::string> related;  ///< names (or ids) of related signatures: a declared co-match is not a collision
  std::string kind, category, inferred_by;
  kb::role role = kb::role::unknown;
  /// How specific the fingerprints are: "specific" (one failure, default), "family" (every message of a
  /// layer or source file, e.g. any NCCL WARN from net_ib.cc, any Xid by number) or "generic" (any
  /// error of a kind, e.g. any Python exception). On one line a more specific hit hides the less
  /// specific ones: specific > family > generic.
  kb::layer layer = kb::layer::specific;
  /// Which rank a matching line names as the initiator (printing_rank, named_rank, rank_zero, exit_code:N).
  kb::initiator initiator;
  /// True when the fingerprints are meant for lines inside a stack (Python source lines, frames),
  /// which are otherwise not matched.
  bool match_in_stack = false;
  int priority = 0;  ///< 0-100, only for role: cause
  std::vector<std::string> fingerprints, extract;
  /// `lookup: TABLE:FIELD`: the captured FIELD is looked up in kb/_tables/TABLE.tsv; the row's columns
  /// fill {lookup.COLUMN} placeholders, and a non-empty `kind` column overrides this signature's kind
  /// (e.g. Xid 13 is an application fault, Xid 79 a GPU that fell off the bus).
  std::string lookup_table, lookup_field;
  std::string root_cause;
  std::vector<std::string> fix, verify, confirm, prevention, falsepositives;
  /// `facts:` sentences about this run that make the cause concrete, filled from the run's facts like the
  /// steps ("{progress.step} of {progress.planned} steps, {progress.step_time} each"); a sentence with a
  /// placeholder this run has no value for is left out (correlate.cpp, run_value()).
  std::vector<std::string> facts;
  /// `transient_above: {field: F, value: N}`, with tag event.transient: the line is survived while its
  /// extracted number F is at least N (a loss scale still many halvings above its floor: the scaler is
  /// settling, not collapsing). Empty field: no such bound.
  std::string transient_field;
  int transient_above = 0;
  std::vector<code_fix> fix_code;
  std::vector<example> positive, negative;
  std::vector<std::string> field_order;  ///< top-level keys in file order (for lint)
  std::vector<std::string> macros_used;  ///< "%{name}" and "@name" this file used (kb/_macros; for lint)

  bool is_cause() const { return role == kb::role::cause; }
  /// role: benign: a message known to appear in healthy runs (each with a real healthy sample). A line it
  /// matches is not evidence of a failure: no finding, not a suspicious line.
  bool is_benign() const { return role == kb::role::benign; }
  bool has_tag(std::string_view t) const { return std::find(tags.begin(), tags.end(), t) != tags.end(); }
  /// 0 specific, 1 family, 2 generic.
  int layer_rank() const { return layer == kb::layer::generic ? 2 : layer == kb::layer::family ? 1 : 0; }
};

/// Shared pattern definitions (kb/_macros/*.yaml, in the spirit of Falco's macros and lists): a macro is
/// pattern text used inside a fingerprint or extract pattern as %{name}; a list is whole patterns, used
/// as one item '@name' that stands for all of them in order. Expanded when a signature is loaded, so
/// every later stage (lint, match, the encyclopedia) sees the full patterns.
struct macro_table {
  std::map<std::string, std::string> macros;
  std::map<std::string, std::vector<std::string>> lists;
};

/// Expands %{macro} and '@list' items in `patterns` in place. `used` (when given) gets each name used
/// ("%{name}" or "@name"), once. Errors: an unknown name, an unclosed "%{".
status expand_macros(const macro_table& table, std::vector<std::string>& patterns, std::vector<std::string>* used = nullptr);

struct kind_info {
  std::string kind, category, meaning;
};

/// A lookup table (kb/_tables/NAME.tsv): a header line of column names, then one row per key (the
/// first column). Facts copied from upstream documentation, each row with its source column.
struct table {
  std::string name;
  std::vector<std::string> columns;  ///< column names, the key column first
  std::map<std::string, std::vector<std::string>> rows;  ///< key -> cells (same order as columns)
  std::vector<std::string> order;  ///< the keys in file order (a rule table is read top to bottom)
  /// The cell of `column` in the row of `key`, or empty.
  std::string get(const std::string& key, const std::string& column) const;
  bool has_column(const std::string& column) const;
};

class library {
 public:
  /// Loads the built-in files (when `builtin`) and every *.yaml under each extra directory.
  /// Errors name the file and the problem. Signatures whose name repeats replace the earlier one.
  static result<library> load(bool builtin, const std::vector<std::string>& extra_dirs);
  /// Loads from (name, text) pairs; names ending in .tsv are the kind vocabulary, names under
  /// _prefixes/ are prefix catalogues. Used by load() and by tests.
  static result<library> from_files(const std::vector<std::pair<std::string, std::string>>& files);

  std::vector<signature> signatures;
  std::vector<kind_info> kinds;
  std::map<std::string, table> tables;  ///< by name (file stem under _tables/)
  std::vector<std::pair<std::string, std::string>> prefix_files;  ///< (name, yaml text)
  macro_table macros;  ///< kb/_macros/*.yaml, already expanded into every signature
  std::vector<std::pair<std::string, std::string>> encyclopedia_files;  ///< kb/_encyclopedia/*.yaml
  std::string content_hash;  ///< 64-bit hash (FNV-1a prime, 8-byte words) of all loaded names and texts, hex (cache key for compiled databases)

  const signature* find(std::string_view name) const;
  const kind_info* kind(std::string_view k) const;
  /// The row cell for a signature's lookup (empty when the signature has no lookup or no such row).
  std::string lookup(const signature& s, const std::string& key, const std::string& column) const;
};

/// One failure of `firstfault kb test` (kb_lint.hpp test_examples, pipeline.hpp check_healthy_baselines).
struct example_failure {
  std::string name, message;
};

/// A fingerprint in RE2 syntax rewritten for `grep -E -f` (POSIX ERE), best effort: non-capturing and
/// named groups become plain groups, \d \s \w (and negations outside a class) become POSIX classes,
/// lazy quantifiers become greedy, inline flags such as (?i) are dropped (so case-insensitive patterns
/// match case-sensitively in grep). Used by `kb export --patterns --ere` for the benchmark's grep row.
std::string to_ere(std::string_view re2_pattern);

/// Signatures whose name, title, kind, tags or description contain `query` (ASCII case-insensitive),
/// best first: a hit in the name outranks the title, which outranks kind/tags, then the description;
/// ties go to the shorter name (the general entry), causes before symptoms, higher priority, name.
/// Pointers into `lib`. Empty when nothing mentions the query.
std::vector<const signature*> search(const library& lib, std::string_view query);

/// What `explain` / `kb show` should open for a typed name: the name itself when a signature or kind
/// has it; else the one candidate with the same text::name_key ("cuda-oom", "CUDA_OOM" -> "cuda_oom");
/// else the typed name unchanged (the caller reports it missing, with text::closest suggestions).
std::string resolve_name(const library& lib, const std::string& typed);

}  // namespace ff::kb
