// The history's storage engines behind history::store: SQLite (a local file, the default) and PostgreSQL
// (a database shared by a cluster). Same schema, same migrations (each in its own SQL dialect), same queries.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "firstfault/history.hpp"

namespace ff::history {

/// True for postgresql:// and postgres:// connection URIs and libpq keyword/value strings ("host=... dbname=...")
/// (https://www.postgresql.org/docs/15/libpq-connect.html#LIBPQ-CONNSTRING).
bool is_postgres_url(const std::string& path);
/// The salt in `salt_path`, created (mode 0600) on first use.
std::string local_salt(const std::filesystem::path& salt_path);

namespace detail {
class backend {
 public:
  virtual ~backend() = default;
  virtual status add(entry& e) = 0;  ///< e.created_at is set; fills e.id
  virtual result<std::vector<entry>> list(int limit) const = 0;
  virtual result<std::optional<entry>> get(std::int64_t id) const = 0;
  virtual result<std::vector<count_row>> stats(const std::string& by, int days) const = 0;  ///< by: checked
  virtual result<std::int64_t> recurrences(const std::string& host_key, const std::string& kind, int days) const = 0;
  virtual int schema_version() const = 0;
  virtual result<std::string> salt() = 0;  ///< the host_key salt of this history
};
/// The stats query; `param` is the placeholder of the "since" time (? or $1).
std::string stats_sql(const std::string& by, const std::string& param);
/// history_pg.cpp. Errors name the database by its URI without the password.
result<std::unique_ptr<backend>> open_postgres(const std::string& url);
/// `url` with any password replaced by "***" (for messages).
std::string redact_url(const std::string& url);
}  // namespace detail

}  // namespace ff::history
