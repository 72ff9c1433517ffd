// What every subcommand of the CLI shares: exit codes, the knowledge base, masking options, durations,
// and the history store opened on first use. The CLI is the only code that reads argv or writes
// stdout/stderr (docs/ARCHITECTURE.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "firstfault/history.hpp"
#include "firstfault/kb.hpp"
#include "firstfault/mask.hpp"
#include "firstfault/result.hpp"

namespace ff::cli {

/// Exit status for a usage error (bad option value, unknown name); ff::exit_status() maps engine errors.
constexpr int kExitUsage = 2;

/// "firstfault: MESSAGE" on stderr, the message sanitised (no terminal escapes from inputs).
void print_error(const std::string& message);

/// The built-in knowledge base plus each `--kb` directory (later ones override by name).
result<kb::library> load_kb(const std::vector<std::string>& dirs);

/// --color: "always", "never", or "auto" (stdout is a terminal and NO_COLOR is unset; https://no-color.org).
bool use_color(const std::string& mode);

/// Masking for diagnose and watch: the team config (given, or $XDG_CONFIG_HOME/firstfault/mask.yaml /
/// ~/.config/firstfault/mask.yaml when that file exists), `--mask-rule` patterns, `--no-mask`.
/// Errors: the config cannot be read or parsed, a rule does not compile (RE2's words).
/// `redact`: --redact (identity masking too); a config's `redact: true` turns it on as well.
result<mask::options> mask_options(std::string config, const std::vector<std::string>& rules, bool no_mask, bool redact = false);

/// The per-user key of --redact without --mask-key/--mask-key-file: the first line of
/// $XDG_CONFIG_HOME/firstfault/redact.key (else ~/.config/firstfault/redact.key), created on first use with
/// mode 0600 and 32 random bytes (OpenSSL RAND_bytes) as hex, so a host has the same pseudonym in every
/// report and in the history. Errors: no home, the file cannot be created or read, randomness failed.
result<std::string> user_redact_key();

/// The mask key of `scan` and `diagnose --mask-key` (mask::options::key): `key`, or the first line of
/// `key_file` (a site secret, mode 0600), made per job with `job_id` (mask::job_key). "" when none is given.
/// Errors: the key file cannot be read or its first line is empty.
result<std::string> mask_key(const std::string& key, const std::string& key_file, const std::string& job_id);

/// "300", "300s", "1500ms", "5m", "2h" -> seconds; nullopt for anything else.
std::optional<double> parse_duration(const std::string& s);

/// The history database of one command: the path (`--history` or history::default_path()), opened on
/// first use; a store that cannot be opened is reported once with `consequence` ("the diagnosis is
/// printed but not stored") and the command goes on without it.
class history_session {
 public:
  history_session(const std::string& path, bool enabled, std::string consequence);
  const std::string& path() const { return path_; }
  bool enabled() const { return enabled_; }
  history::store* get();
  /// The salted key of a real host name (history::host_key), as pipeline::options::host_keyer wants it.
  std::string host_key(const std::string& real_host) const { return history::host_key(path_, real_host); }
  /// Earlier failures of `kind` on the host with this key (history::store::recurrences); nullopt without a store.
  std::optional<std::int64_t> recurrences(const std::string& host_key, const std::string& kind, int days);
  /// Stores `e`; a failure is reported with the consequence and does not change the exit status.
  void add(history::entry e);

 private:
  std::string path_, consequence_;
  bool enabled_, tried_ = false;
  std::optional<history::store> store_;
};

}  // namespace ff::cli
