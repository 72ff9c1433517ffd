// SQLite-backed history of diagnoses.
#include "firstfault/history.hpp"

#include <sqlite3.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace ff::history {

namespace fs = std::filesystem;

namespace {

// Forward-only migrations; index i brings the schema from version i to i+1.
const char* kMigrations[] = {
    R"(CREATE TABLE IF NOT EXISTS diagnoses(
         id INTEGER PRIMARY KEY AUTOINCREMENT,
         created_at INTEGER NOT NULL,
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
};

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
    " report_json FROM diagnoses";

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
  return e;
}

}  // namespace

struct store::impl {
  sqlite3* db = nullptr;
  std::string path;
  int version = 0;
  ~impl() {
    if (db) sqlite3_close(db);
  }
};

store::store() = default;
store::~store() = default;
store::store(store&&) noexcept = default;
store& store::operator=(store&&) noexcept = default;

result<store> store::open(const std::string& path) {
  store s;
  s.impl_ = std::make_unique<impl>();
  s.impl_->path = path;
  std::error_code ec;
  if (auto dir = fs::path(path).parent_path(); !dir.empty()) fs::create_directories(dir, ec);
  int rc = sqlite3_open_v2(path.c_str(), &s.impl_->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) return error{describe(s.impl_->db, rc, path)};
  sqlite3_busy_timeout(s.impl_->db, 2000);
  sqlite3_stmt* st = nullptr;
  rc = sqlite3_prepare_v2(s.impl_->db, "PRAGMA user_version", -1, &st, nullptr);
  if (rc != SQLITE_OK) return error{describe(s.impl_->db, rc, path)};
  rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    sqlite3_finalize(st);
    return error{describe(s.impl_->db, rc, path)};
  }
  int version = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  if (version > kSchemaVersion)
    return error{path + ": history database has schema version " + std::to_string(version) +
                 ", newer than this firstfault (" + std::to_string(kSchemaVersion) + "); upgrade firstfault"};
  for (int v = version; v < kSchemaVersion; ++v) {
    std::string sql = std::string("BEGIN IMMEDIATE;") + kMigrations[v] + "PRAGMA user_version = " + std::to_string(v + 1) + ";COMMIT;";
    char* err = nullptr;
    rc = sqlite3_exec(s.impl_->db, sql.c_str(), nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
      std::string m = describe(s.impl_->db, rc, path);
      sqlite3_free(err);
      sqlite3_exec(s.impl_->db, "ROLLBACK", nullptr, nullptr, nullptr);
      return error{m};
    }
  }
  s.impl_->version = kSchemaVersion;
  return s;
}

int store::schema_version() const { return impl_ ? impl_->version : 0; }

status store::add(entry& e) {
  e.created_at = e.created_at ? e.created_at : now_s();
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(impl_->db,
                              "INSERT INTO diagnoses(created_at, source, inputs, verdict, signature, kind, initiating_rank,"
                              " initiating_host, host_key, report_json) VALUES(?,?,?,?,?,?,?,?,?,?)",
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
  rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return error{describe(impl_->db, rc, impl_->path)};
  e.id = sqlite3_last_insert_rowid(impl_->db);
  return ok();
}

result<std::vector<entry>> store::list(int limit) const {
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

result<std::optional<entry>> store::get(std::int64_t id) const {
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

result<std::vector<count_row>> store::stats(const std::string& by, int days) const {
  std::string col = by == "signature" ? "signature" : by == "kind" ? "kind" : by == "host" ? "initiating_host" : "";
  if (col.empty()) return error{"history stats: --by must be signature, kind or host"};
  // host: group by the stable key, show the most recent masked name
  std::string sql = by == "host"
                        ? "SELECT MAX(initiating_host), COUNT(*) FROM diagnoses WHERE verdict='failure' AND host_key != '' AND created_at >= ? GROUP BY host_key ORDER BY 2 DESC"
                        : "SELECT " + col + ", COUNT(*) FROM diagnoses WHERE verdict='failure' AND created_at >= ? GROUP BY " + col + " ORDER BY 2 DESC";
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

result<std::int64_t> store::recurrences(const std::string& key, const std::string& kind, int days) const {
  if (key.empty() || kind.empty()) return std::int64_t{0};
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
  fs::path salt_path = fs::path(db_path).parent_path() / "host-salt";
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
