// The masker's rule table (private to src/mask): the built-in rules in the order they apply, the secret key
// rules made from the key words of kb/_tables/secret_keys.tsv, the public hosts kept as they are, and the host-name helpers.
// The rules are applied by masker.cpp; kb/_tables/secret_formats.tsv is read by secret_formats() (rules.cpp).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ff::mask::detail {

struct rule_def {
  const char* kind;
  const char* token;  // replacement prefix: "ip" -> ip-1; secrets use <kind-N>
  bool secret;
  const char* regex;  // group 1, when present, is the part replaced
};

// "[host]:port" (c10d's "[trainer-0]:29500"). Not in the Vectorscan gate: every "[rankN]:"/"[defaultN]:"
// tag followed by a date starts a candidate there, which doubled the gate's cost on torchrun consoles;
// bracket_host_port_candidate() tests it by hand instead.
constexpr const char* kBracketHostPort = R"(\[([A-Za-z][\w.-]*[\w])\]:\d{2,5}(?:[\s,);]|$))";

/// The built-in rules, in the order they apply (secrets first).
std::span<const rule_def> rules();

/// The secret key words (kb/_tables/secret_keys.tsv: RE2 fragments matched case-insensitively at the end
/// of a key name) as one alternation, in the file's order.
const std::string& secret_key_words();

/// The RE2 rules for "a key that ends in a secret word, then its value" (group 1 is the value).
std::vector<std::string> secret_key_rules();

/// Public documentation hosts that help the reader and identify nobody: never masked
/// (kb/_tables/public_hosts.tsv).
const std::vector<std::string>& public_hosts();

/// Whether a value a host rule captured may be learnt as a host name (not a word such as "node").
bool learnable(const std::string& v);

/// Expands a Slurm host list ("gpu[001-004,7],login1") into names, at most `max` of them.
std::vector<std::string> expand_hostlist(std::string_view list, std::size_t max);

}  // namespace ff::mask::detail
