// The history's schema migrations, one list for both engines (SQLite in history.cpp, PostgreSQL in
// history_pg.cpp): step i brings the schema from version i to i+1. A step is written once in the SQL both
// dialects share; the few words that differ are placeholders that render() fills per dialect:
//   {id}      the row id column: INTEGER PRIMARY KEY AUTOINCREMENT | BIGSERIAL PRIMARY KEY
//   {bigint}  a 64-bit integer:  INTEGER (SQLite's integers are 64-bit) | BIGINT
// Steps are never edited once released; a change of schema is a new step (and store::kSchemaVersion + 1).
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "firstfault/history.hpp"

namespace ff::history::detail {

enum class dialect { sqlite, postgres };

inline constexpr std::array<std::string_view, 2> kMigrationSteps{
    // 1: the diagnoses table and its two indexes.
    R"(CREATE TABLE IF NOT EXISTS diagnoses(
         id {id},
         created_at {bigint} NOT NULL,
         source TEXT NOT NULL,
         inputs TEXT NOT NULL,
         verdict TEXT NOT NULL,
         signature TEXT,
         kind TEXT,
         initiating_rank INTEGER,
         initiating_host TEXT,
         host_key TEXT,
         report_json TEXT NOT NULL);
       CREATE INDEX IF NOT EXISTS diagnoses_host_kind ON diagnoses(host_key, kind, created_at);
       CREATE INDEX IF NOT EXISTS diagnoses_created ON diagnoses(created_at);)",
    // 2: the action of each diagnosis (action.hpp): its kind and the hosts to exclude, comma-separated.
    R"(ALTER TABLE diagnoses ADD COLUMN action TEXT NOT NULL DEFAULT '';
       ALTER TABLE diagnoses ADD COLUMN action_hosts TEXT NOT NULL DEFAULT '';)",
};
static_assert(kMigrationSteps.size() == store::kSchemaVersion, "one migration step per schema version");

/// Step `i` (0-based) in the SQL of `d`.
inline std::string render(std::size_t i, dialect d) {
  std::string sql(kMigrationSteps.at(i));
  auto fill = [&sql](std::string_view name, std::string_view with) {
    for (auto p = sql.find(name); p != std::string::npos; p = sql.find(name, p + with.size())) sql.replace(p, name.size(), with);
  };
  fill("{id}", d == dialect::sqlite ? "INTEGER PRIMARY KEY AUTOINCREMENT" : "BIGSERIAL PRIMARY KEY");
  fill("{bigint}", d == dialect::sqlite ? "INTEGER" : "BIGINT");
  return sql;
}

}  // namespace ff::history::detail
