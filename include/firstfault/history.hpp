// firstfault/history.hpp: the history of diagnoses (SQLite by default; PostgreSQL for a cluster).
//
// A path that starts with postgresql:// or postgres:// is a libpq connection URI
// (https://www.postgresql.org/docs/15/libpq-connect.html#LIBPQ-CONNSTRING): the same schema, migrations and
// queries run there, so `history list|show|stats` and the recurrence note cover every job of the cluster.
//
// Every diagnosis (from `diagnose`, later `watch`) is stored, already masked, at
// $XDG_DATA_HOME/firstfault/history.db (or ~/.local/share/firstfault/history.db; --history PATH,
// --no-history). The schema is versioned with PRAGMA user_version and migrated forward in a transaction.
// Hosts are stored as masked names plus `host_key`, a salted hash of the real host name (the salt lives
// in the same directory and never leaves the machine), so "the same node failed 3 times this week" works
// across runs although masked names (node-1) are only stable within one run.
// A locked or corrupt database gives an error; callers print the diagnosis anyway.
//
//   auto h = ff::history::store::open(ff::history::default_path());
//   if (h) h.value().add(entry);      // else: print h.error().message, keep going
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "firstfault/result.hpp"

namespace ff::history {

struct entry {
  std::int64_t id = 0;
  std::int64_t created_at = 0;      ///< Unix seconds
  std::string source = "diagnose";  ///< diagnose | watch
  std::string inputs;               ///< masked input paths, "; "-separated
  std::string verdict, signature, kind;
  std::optional<int> initiating_rank;
  std::string initiating_host;      ///< masked name as shown in the report
  std::string host_key;             ///< salted hash of the real host (empty when unknown)
  std::string report_json;          ///< the full masked report
  std::string action;               ///< the report's action kind (action.hpp: "restart", ...; "" before schema 2)
  std::string action_hosts;         ///< the hosts it excludes, masked as in the report, comma-separated
};

struct count_row {
  std::string key;  ///< signature, kind or host
  std::int64_t count = 0;
};

class store {
 public:
  static constexpr int kSchemaVersion = 2;  ///< 2: the action columns (src/store/migrations.hpp)
  /// Opens (creating directories and the schema) or migrates. Errors: locked, corrupt, unwritable.
  static result<store> open(const std::string& path);
  status add(entry& e);                        ///< fills e.id and e.created_at
  result<std::vector<entry>> list(int limit) const;
  result<std::optional<entry>> get(std::int64_t id) const;
  /// Counts over the last `days` days grouped by "signature", "kind" or "host".
  result<std::vector<count_row>> stats(const std::string& by, int days) const;
  /// How many earlier diagnoses of `kind` on the same host (by host_key) in the last `days` days.
  result<std::int64_t> recurrences(const std::string& host_key, const std::string& kind, int days) const;
  int schema_version() const;
  /// The salt of host_key(): a file next to a SQLite database, a row of a PostgreSQL one (shared by every
  /// machine that writes to it, so a host has one key across the cluster).
  result<std::string> salt();

  store();
  ~store();
  store(store&&) noexcept;
  store& operator=(store&&) noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// $XDG_DATA_HOME/firstfault/history.db, or ~/.local/share/firstfault/history.db.
std::string default_path();

/// Salted hash used for host_key; the salt is created once next to the database (in the database for PostgreSQL).
std::string host_key(const std::string& db_path, const std::string& real_host);

}  // namespace ff::history
