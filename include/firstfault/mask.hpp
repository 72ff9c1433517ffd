// firstfault/mask.hpp: mask secrets (and, with --redact, identifying values) at ingest, before anything is
// stored or shown.
//
// The policy (docs/security.md):
//   - always masked: secrets (token formats of kb/_tables/secret_formats.tsv, key = value in any syntax,
//     command-line passwords, private-key blocks, long random tokens beside a secret word) and e-mail
//     addresses;
//   - shown by default: host names, IP addresses, MACs, GPU UUIDs and serials, account ids, user names
//     (users act on them: the host of an Xid line is named in the report); no host is learnt, no identity
//     rule is compiled or gated;
//   - options::redact (--redact, `redact: true`): those are masked too, by keyed pseudonyms (options::key:
//     node- plus 10 hex of HMAC-SHA256) that stay the same across runs and nodes;
//   - options::enabled false (--no-mask): nothing is masked.
//
// Runs on every line right after it is read and sanitised, before prefixes are peeled, so no later stage,
// output format or stored report can carry an unmasked value: one masking decision per line. Replacement
// is consistent within one run, so cross-rank reasoning still works. Secrets are replaced by a kind marker
// (<hf-token-1>) that never contains the value. Every rule is an RE2 pattern (linear time). The report
// lists counts per kind, never the values.
//
//   ff::mask::masker m(ff::mask::options{});
//   m.apply("HF_TOKEN=hf_abc... failed on gpu-7");  // "HF_TOKEN=<hf-token-1> failed on gpu-7"
//   ff::mask::options o;
//   o.redact = true;
//   ff::mask::masker r(o);
//   r.apply("NCCL INFO Bootstrap : Using eth0:10.1.2.3<0>");   // "... eth0:ip-1<0>"
//   r.counts();   // {"ipv4": 1}
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "firstfault/result.hpp"

namespace ff::mask {

struct custom_rule {
  std::string name;   ///< kind reported in the counts
  std::string regex;  ///< RE2; the whole match is replaced (or group 1 when the pattern has a group)
};

struct options {
  bool enabled = true;
  /// Identity masking (--redact, `redact: true`): host names, addresses, MACs, user names and home
  /// directories are replaced too, by keyed pseudonyms when `key` is set. Off: only secrets and e-mail
  /// addresses are masked, and no host is learnt.
  bool redact = false;
  std::vector<custom_rule> extra;          ///< --mask-rule / team config rules
  std::vector<std::string> keep_hosts;     ///< host names never masked (e.g. "localhost")
  /// Keyed tokens (`scan` on many nodes, `diagnose --mask-key`): a host, address or user becomes
  /// PREFIX-XXXXXXXXXX, the first 10 hex digits of HMAC-SHA256(key, kind NUL value), the same on every node
  /// that has the key, with no shared table. Empty: numbered in order of appearance (node-1, node-2). Secrets
  /// are numbered either way: a hash of a secret with a guessable key could be brute-forced.
  std::string key;
};

/// One secret format of kb/_tables/secret_formats.tsv (compiled into the binary): applied in the file's
/// order, before the key = value rules. `regex` is RE2 (group 1, when present, is the part replaced);
/// `sample` a made-up line holding one, which the unit tests check is masked.
struct secret_format {
  std::string name;    ///< kind counted in the report
  std::string issuer;  ///< who defines the format
  std::string token;   ///< replacement prefix: <token-N>
  std::string regex;
  std::string source;  ///< the page documenting the prefix, length or syntax
  std::string sample;
};
const std::vector<secret_format>& secret_formats();

/// The masking key of one job: HMAC-SHA256(site_key, "firstfault-job:" + job_id) as hex when a job id is
/// given, else `site_key` itself. Without a site key the key is derivable from the job id alone, so anyone
/// who knows the job id and guesses a host name can check the guess (docs/cluster.md).
std::string job_key(const std::string& site_key, const std::string& job_id);

/// The scan gate's patterns for masking (Vectorscan regexps, see gate.hpp): every rule whose match changes
/// the masker's state or depends on context (secrets, which may continue on the next line; host names in
/// a context, which are learnt and masked everywhere after; Slurm node lists; private-key blocks), plus
/// the custom rules. Context-free values (addresses, e-mails, FQDNs, home directories) are masked wherever
/// they are shown, so they need no gate.
std::vector<std::string> gate_patterns(const options& opt);
/// The host rules for line-prefix forms (NCCL header, syslog, pdsh), left out of gate_patterns() because
/// prefix peeling finds the same hosts; checked on a gated-out line only when its peel found no host.
std::vector<std::string> prefix_host_patterns();
/// True exactly when one of prefix_host_patterns() matches `line` (RE2), the regexp run only when a hand
/// check of what it needs first passes (a " [digits]" after ":pid:tid", a date at the line's start, ...):
/// the light path asks this of a gated-out line whose peel found no host, instead of a second Vectorscan
/// scan of every block (3 instructions a byte, most of it for the NCCL header's literal-free pattern).
/// `line_start_only`: only the forms anchored at the line's start (syslog, pdsh, "[date] host [pid]"), not
/// the NCCL "host:pid:tid [dev]" header, which can follow other prefixes.
bool prefix_host_form(std::string_view line, bool line_start_only = false);
/// The host each prefix host form on `line` names (group 1 of every match of every rule of
/// prefix_host_patterns(), in rule order, then left to right), as (offset, length) into `line`: what
/// masking the line would learn from those forms. Empty when prefix_host_form(line) is false.
void prefix_host_spans(std::string_view line, std::vector<std::pair<std::size_t, std::size_t>>& out);
/// True when every NCCL "host:pid:tid [dev]" header on `line` (and every near miss of one) names `host`:
/// then masking the line learns no other host from that form. A hand scan, no regexp; false means "maybe
/// another host" (ask prefix_host_spans).
bool nccl_header_hosts_are(std::string_view line, std::string_view host);
/// The "[host]:port" rule is left out of gate_patterns() (as a Vectorscan pattern it doubled the gate's
/// cost on torchrun consoles, where every "[rankN]:" tag starts a candidate): true for every line that
/// rule could match (a superset, by hand), so the caller reads such a line in full.
bool bracket_host_port_candidate(std::string_view line);
/// `re` (RE2 syntax) with each counted repetition ({n}, {n,}, {n,m}, lazy or not) made unbounded: `*` when n
/// is 0, else `+`. The result matches every text `re` matches (and maybe more), and compiles far smaller: the
/// masker's rule set is compiled from these and confirms a relaxed rule with its exact regexp (masker.cpp).
/// Escapes (\x{41}, \p{Greek}, \Q...\E) and character classes ([{}0-9]) are copied unchanged. `changed`:
/// whether anything was replaced. A repetition whose bounds are all at most `keep_up_to` is copied as it
/// is ({2}, {1,4}, {7} with 8): it costs the compiled set little, and made unbounded it turns a narrow rule
/// into one that fires on common text (the MAC and IPv6 rules' `(?:[0-9a-f]{2}:){5}` relaxed matched every
/// "00:00:06" of a timestamp and every NCCL "host:pid:tid" header, and the exact confirmation then ran on
/// nearly every line masked).
std::string relax_counted_repeats(std::string_view re, bool* changed, int keep_up_to = 0);

/// Loads a team config (YAML): `enabled: bool`, `redact: bool`, `rules: [{name, regex}]`, `keep_hosts: [..]`.
result<options> load_config(const std::string& path, options base);

class masker {
 public:
  explicit masker(options opt);
  ~masker();
  masker(masker&&) noexcept;
  masker& operator=(masker&&) noexcept;
  /// Checks the extra rules; returns the first that does not compile.
  status check() const;
  /// Masks one line. Stateful: remembers replacements (consistency) and private-key blocks across lines.
  std::string apply(std::string_view line);
  /// Masks one line kept out of stream order (a light-path line masked only when it is shown): the
  /// stream's state (an open private-key block, a secret that ran to the end of the last line) is neither
  /// used nor changed, so the lines still to come are masked as if this call had not happened.
  std::string apply_detached(std::string_view line);
  /// Masks a path shown to the user (user names in home directories, then the line rules).
  std::string apply_path(std::string_view path);
  /// Masks one host name found by prefix peeling or in a path (node-N, consistent with the line rules).
  /// `count` false: the replacement is made (and the host learnt) but not counted, for a caller that
  /// learns a host ahead of the line that will be counted (add_lines' first batch).
  std::string mask_host(const std::string& host, bool count = true);
  /// True when apply() could change `text`: it names a learnt host (any capitals), or holds what an address,
  /// e-mail, path or user-name rule needs (3 dots, 2 colons, 5 dashes, '@', '/', '\\', '=', or "user",
  /// "login", "logname", "owner" in any capitals). Conservative, for short texts such as a learner's token:
  /// a text with none of them is left as it is by the built-in rules outside the gate's contexts.
  bool may_change(std::string_view text) const;
  /// True when `text` names a learnt host other than `host` (both in any capitals): a line prefix the light
  /// path peels raw, whose other learnt host apply() would replace, so that the masked line peels another way
  /// ("[rank7]:" after a "[rank7]:1996" line taught "rank7" as a host:port host).
  bool names_other_learnt_host(std::string_view text, std::string_view host) const;
  /// The words of `text` (offset, length) that could be a learnt host in any text of its shape (its digits
  /// any digits): a learnt host's length and first character. Conservative; changes only when
  /// learnt_host_count() does. The word bounds are those names_other_learnt_host() reads.
  void words_that_may_be_learnt_hosts(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& out) const;
  std::size_t learnt_host_count() const;
  /// Second pass over text already masked: replaces host names learnt since it was masked (a host first
  /// named by a later line: SLURM_JOB_NODELIST, MASTER_ADDR, pod/NAME). Returns the replacements made.
  std::size_t rescan(std::string& text);
  /// Called at the start of each input stream: per-stream state (an open private-key block) ends.
  void reset_stream();
  /// The original value behind a replacement token made in this run ("" when unknown). Used only to
  /// compute salted keys (history's host_key); never shown or stored.
  std::string original(const std::string& token) const;
  /// True while the next line depends on this one's masking (inside a private-key block, or after a
  /// secret that ran to the end of the line): that line must be masked whatever the scan gate says.
  bool line_state_open() const;
  /// Replacements made so far, per kind.
  const std::map<std::string, std::size_t>& counts() const {
    if (repeated_hosts_) counts_["hostname"] += std::exchange(repeated_hosts_, 0);
    return counts_;
  }
  /// Counts one more replacement of a host that mask_host() already replaced (a caller that keeps the
  /// token of a repeated host instead of asking again). Added to counts() when it is read: a console
  /// names a host on nearly every line.
  void count_repeated_host() {
    if (opt_.enabled) ++repeated_hosts_;
  }
  bool enabled() const { return opt_.enabled; }
  /// True when host names, addresses and user names are masked (--redact): the only mode that learns hosts.
  bool masks_identity() const { return opt_.enabled && opt_.redact; }

 private:
  /// The rules that read more than one match: URL-encoded key names, variable pointers, nested blocks
  /// under a secret's name, long random tokens beside a secret word, a flag whose value is on the next line.
  void mask_context(std::string& line);
  struct impl;
  options opt_;
  std::unique_ptr<impl> impl_;
  mutable std::map<std::string, std::size_t> counts_;
  mutable std::size_t repeated_hosts_ = 0;  ///< count_repeated_host() calls not yet in counts_
};

}  // namespace ff::mask
