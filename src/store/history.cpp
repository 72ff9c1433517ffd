// SQLite-backed history of diagnoses.
#include "firstfault/history.hpp"

#include "backend.hpp"
#include "migrations.hpp"

#include <sqlite3.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace ff::history {

namespace fs = std::filesystem;

std::string detail::stats_sql(const std::string& by, const std::string& param) {
  // host: group by the stable key, show the most recent masked name
  if (by == "host")
    return "SELECT MAX(initiating_host), COUNT(*) FROM diagnoses WHERE verdict='failure' AND host_key != '' AND created_at >= " + param +
           " GROUP BY host_key ORDER BY 2 DESC, 1";
  return "SELECT " + by + ", COUNT(*) FROM diagnoses WHERE verdict='failure' AND created_at >= " + param + " GROUP BY " + by +
         " ORDER BY 2 DESC, 1";
}

namespace {

std::string describe(sqlite3* db, int rc, const std::string& path) {
  std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  int code = rc & 0xff;
  if (code == SQLITE_BUSY || code == SQLITE_LOCKED)
    return path + ": history database is locked by another process (" + msg + ")";
  if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB)
    return path + ": history database is corrupt (" + msg + "); move it away to start a new one";
  return path + ": history database error: " + msg;
}

// Column order read back by row_to_entry().
const char* kSelect =
    "SELECT id, created_at, source, inputs, verdict, signature, kind, initiating_rank, initiating_host, host_key,"
    " report_json, action, action_hosts FROM diagnoses";

std::int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

entry row_to_entry(sqlite3_stmt* st) {
  auto text = [&](int i) {
    auto* p = sqlite3_column_text(st, i);
    return p ? std::string(reinterpret_cast<const char*>(p)) : std::string();
  };
  entry e;
  e.id = sqlite3_column_int64(st, 0);
  e.created_at = sqlite3_column_int64(st, 1);
  e.source = text(2);
  e.inputs = text(3);
  e.verdict = text(4);
  e.signature = text(5);
  e.kind = text(6);
  if (sqlite3_column_type(st, 7) != SQLITE_NULL) e.initiating_rank = sqlite3_column_int(st, 7);
  e.initiating_host = text(8);
  e.host_key = text(9);
  e.report_json = text(10);
  e.action = text(11);
  e.action_hosts = text(12);
  return e;
}

}  // namespace

namespace {
class sqlite_backend final : public detail::backend {
 public:
  sqlite3* db = nullptr;
  std::string path;
  int version = 0;
  ~sqlite_backend() override {
    if (db) sqlite3_close(db);
  }
  static result<std::unique_ptr<detail::backend>> open(const std::string& path);
  status add(entry& e) override;
  result<std::vector<entry>> list(int limit) const override;
  result<std::optional<entry>> get(std::int64_t id) const override;
  result<std::vector<count_row>> stats(const std::string& by, int days) const override;
  result<std::int64_t> recurrences(const std::string& host_key, const std::string& kind, int days) const override;
  int schema_version() const override { return version; }
  result<std::string> salt() override { return local_salt(fs::path(path).parent_path() / "host-salt"); }
};
}  // namespace

std::string local_salt(const fs::path& salt_path) {
  std::string salt;
  {
    std::ifstream in(salt_path);
    std::getline(in, salt);
  }
  if (salt.empty()) {
    std::random_device rd;
    std::ostringstream o;
    for (int i = 0; i < 4; ++i) o << std::hex << rd();
    salt = o.str();
    std::error_code ec;
    fs::create_directories(salt_path.parent_path(), ec);
    std::ofstream out(salt_path);
    out << salt << "\n";
    fs::permissions(salt_path, fs::perms::owner_read | fs::perms::owner_write, ec);
  }
  return salt;
}

struct store::impl {
  std::unique_ptr<detail::backend> be;
};

store::store() = default;
store::~store() = default;
store::store(store&&) noexcept = default;
store& store::operator=(store&&) noexcept = default;

bool is_postgres_url(const std::string& path) {
  if (path.rfind("postgresql://", 0) == 0 || path.rfind("postgres://", 0) == 0) return true;
  // libpq's keyword/value form ("host=db dbname=ff user=ff password=..."): a string that starts with one
  // of its connection keywords and '=' is a connection string, never a file name to create
  // (https://www.postgresql.org/docs/15/libpq-connect.html#LIBPQ-PARAMKEYWORDS).
  static const char* kKeywords[] = {"host", "hostaddr", "port", "dbname", "user", "password", "passfile", "service",
                                    "sslmode", "connect_timeout", "application_name", "options", "target_session_attrs"};
  std::size_t i = path.find_first_not_of(" \t");
  if (i == std::string::npos) return false;
  std::size_t e = path.find_first_of(" \t=", i);
  if (e == std::string::npos) return false;
  std::size_t eq = path.find_first_not_of(" \t", e);
  if (eq == std::string::npos || path[eq] != '=') return false;
  std::string key = path.substr(i, e - i);
  for (const char* k : kKeywords)
    if (key == k) return true;
  return false;
}

result<store> store::open(const std::string& path) {
  auto be = is_postgres_url(path) ? detail::open_postgres(path) : sqlite_backend::open(path);
  if (!be) return be.error();
  store s;
  s.impl_ = std::make_unique<impl>();
  s.impl_->be = std::move(be).value();
  return s;
}

int store::schema_version() const { return impl_ ? impl_->be->schema_version() : 0; }
status store::add(entry& e) {
  e.created_at = e.created_at ? e.created_at : now_s();
  return impl_->be->add(e);
}
result<std::vector<entry>> store::list(int limit) const { return impl_->be->list(limit); }
result<std::optional<entry>> store::get(std::int64_t id) const { return impl_->be->get(id); }
result<std::vector<count_row>> store::stats(const std::string& by, int days) const {
  if (by != "signature" && by != "kind" && by != "host") return error{"history stats: --by must be signature, kind or host"};
  return impl_->be->stats(by, days);
}
result<std::int64_t> store::recurrences(const std::string& key, const std::string& kind, int days) const {
  if (key.empty() || kind.empty()) return std::int64_t{0};
  return impl_->be->recurrences(key, kind, days);
}
result<std::string> store::salt() { return impl_->be->salt(); }

result<std::unique_ptr<detail::backend>> sqlite_backend::open(const std::string& path) {
  auto s = std::make_unique<sqlite_backend>();
  auto* impl_ = s.get();
  impl_->path = path;
  std::error_code ec;
  if (auto dir = fs::path(path).parent_path(); !dir.empty()) fs::create_directories(dir, ec);
  int rc = sqlite3_open_v2(path.c_str(), &impl_->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) return error{describe(impl_->db, rc, path)};
  sqlite3_busy_timeout(impl_->db, 2000);
  sqlite3_stmt* st = nullptr;
  rc = sqlite3_prepare_v2(impl_->db, "PRAGMA user_version", -1, &st, nullptr);
  if (rc != SQLITE_OK) return error{describe(impl_->db, rc, path)};
  rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    sqlite3_finalize(st);
    return error{describe(impl_->db, rc, path)};
  }
  int version = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  if (version > store::kSchemaVersion)
    return error{path + ": history database has schema version " + std::to_string(version) +
                 ", newer than this firstfault (" + std::to_string(store::kSchemaVersion) + "); upgrade firstfault"};
  for (int v = version; v < store::kSchemaVersion; ++v) {
    std::string sql = std::string("BEGIN IMMEDIATE;") + detail::render(v, detail::dialect::sqlite) + "PRAGMA user_version = " + std::to_string(v + 1) + ";COMMIT;";
    char* err = nullptr;
    rc = sqlite3_exec(impl_->db, sql.c_str(), nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
      std::string m = describe(impl_->db, rc, path);
      sqlite3_free(err);
      sqlite3_exec(impl_->db, "ROLLBACK", nullptr, nullptr, nullptr);
      return error{m};
    }
  }
  impl_->version = store::kSchemaVersion;
  return std::unique_ptr<detail::backend>(std::move(s));
}

status sqlite_backend::add(entry& e) {
  auto* impl_ = this;
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(impl_->db,
                              "INSERT INTO diagnoses(created_at, source, inputs, verdict, signature, kind, initiating_rank,"
                              " initiating_host, host_key, report_json, action, action_hosts) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
                              -1, &st, nullptr);
  if (rc != SQLITE_OK) return error{describe(impl_->db, rc, impl_->path)};
  sqlite3_bind_int64(st, 1, e.created_at);
  sqlite3_bind_text(st, 2, e.source.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 3, e.inputs.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 4, e.verdict.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 5, e.signature.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 6, e.kind.c_str(), -1, SQLITE_TRANSIENT);
  if (e.initiating_rank) sqlite3_bind_int(st, 7, *e.initiating_rank);
  else sqlite3_bind_null(st, 7);
  sqlite3_bind_text(st, 8, e.initiating_host.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 9, e.host_key.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 10, e.report_json.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 11, e.action.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 12, e.action_hosts.c_str(), -1, SQLITE_TRANSIENT);
  rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return error{describe(impl_->db, rc, impl_->path)};
  e.id = sqlite3_last_insert_rowid(impl_->db);
  return ok();
}

result<std::vector<entry>> sqlite_backend::list(int limit) const {
  auto* impl_ = this;
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(impl_->db, (std::string(kSelect) + " ORDER BY id DESC LIMIT ?").c_str(), -1, &st, nullptr);
  if (rc != SQLITE_OK) return error{describe(impl_->db, rc, impl_->path)};
  sqlite3_bind_int(st, 1, limit);
  std::vector<entry> out;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) out.push_back(row_to_entry(st));
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return error{describe(impl_->db, rc, impl_->path)};
  return out;
}

result<std::optional<entry>> sqlite_backend::get(std::int64_t id) const {
  auto* impl_ = this;
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(impl_->db, (std::string(kSelect) + " WHERE id = ?").c_str(), -1, &st, nullptr);
  if (rc != SQLITE_OK) return error{describe(impl_->db, rc, impl_->path)};
  sqlite3_bind_int64(st, 1, id);
  std::optional<entry> out;
  rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) out = row_to_entry(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return error{describe(impl_->db, rc, impl_->path)};
  return out;
}

result<std::vector<count_row>> sqlite_backend::stats(const std::string& by, int days) const {
  auto* impl_ = this;
  std::string sql = detail::stats_sql(by, "?");
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(impl_->db, sql.c_str(), -1, &st, nullptr);
  if (rc != SQLITE_OK) return error{describe(impl_->db, rc, impl_->path)};
  sqlite3_bind_int64(st, 1, now_s() - static_cast<std::int64_t>(days) * 86400);
  std::vector<count_row> out;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    auto* p = sqlite3_column_text(st, 0);
    out.push_back({p ? reinterpret_cast<const char*>(p) : "", sqlite3_column_int64(st, 1)});
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return error{describe(impl_->db, rc, impl_->path)};
  return out;
}

result<std::int64_t> sqlite_backend::recurrences(const std::string& key, const std::string& kind, int days) const {
  auto* impl_ = this;
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(impl_->db,
                              "SELECT COUNT(*) FROM diagnoses WHERE host_key = ? AND kind = ? AND created_at >= ?", -1, &st, nullptr);
  if (rc != SQLITE_OK) return error{describe(impl_->db, rc, impl_->path)};
  sqlite3_bind_text(st, 1, key.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, kind.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 3, now_s() - static_cast<std::int64_t>(days) * 86400);
  std::int64_t n = 0;
  rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW) return error{describe(impl_->db, rc, impl_->path)};
  return n;
}

std::string default_path() {
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return std::string(x) + "/firstfault/history.db";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.local/share/firstfault/history.db";
  return "firstfault-history.db";
}

std::string host_key(const std::string& db_path, const std::string& real_host) {
  if (real_host.empty()) return "";
  std::string salt;
  if (is_postgres_url(db_path)) {  // shared by every client of the database: lemon nodes across the cluster
    auto st = store::open(db_path);
    if (!st) return "";
    auto s = st.value().salt();
    if (!s) return "";
    salt = s.value();
  } else {
    salt = local_salt(fs::path(db_path).parent_path() / "host-salt");
  }
  // FNV-1a over salt and host: not reversible without the local salt (which never leaves the machine).
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : salt + "\n" + real_host) {
    h ^= c;
    h *= 1099511628211ull;
  }
  std::ostringstream o;
  o << std::hex << h;
  return o.str();
}

}  // namespace ff::history
