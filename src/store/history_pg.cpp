// The history in PostgreSQL, through libpq (https://www.postgresql.org/docs/15/libpq.html): one database
// shared by every machine of a cluster (login nodes, the Slurm controller's epilog, watch on the nodes).
#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include "../base/dl.hpp"
#include "backend.hpp"
#include "migrations.hpp"

namespace ff::history::detail {

namespace {

// The migrations are migrations.hpp's steps in PostgreSQL's dialect. The version and the host_key salt live
// in firstfault_meta.

// Any constant: concurrent first opens (every node's epilog at once) migrate one at a time.
constexpr const char* kMigrationLock = "SELECT pg_advisory_xact_lock(7466530417)";

const char* kSelect =
    "SELECT id, created_at, source, inputs, verdict, signature, kind, initiating_rank, initiating_host, host_key,"
    " report_json, action, action_hosts FROM diagnoses";

// libpq is loaded when a postgresql:// history is opened, not linked: linked, it made every run of every
// command load 22 more shared libraries (Kerberos, LDAP, SASL, GnuTLS among them): a small diagnosis took
// 71 ms instead of 59 ms. Only the functions below are used. https://man7.org/linux/man-pages/man3/dlopen.3.html
#define FF_PQ_FUNCTIONS(X) \
  X(PQclear) X(PQresultStatus) X(PQgetisnull) X(PQgetvalue) X(PQfinish) X(PQerrorMessage) X(PQexecParams) \
  X(PQconnectdbParams) X(PQstatus) X(PQsetNoticeProcessor) X(PQexec) X(PQntuples)
struct pq_api {
  FF_PQ_FUNCTIONS(FF_DL_FIELD)
};
const pq_api* pq = nullptr;  // set by load_pq() before any connection exists

// The libpq of the Debian package libpq5 (its soname), once per process. Returns "" or why it failed.
std::string load_pq() {
  return ff::detail::load_library_once(pq, "libpq.so.5", "libpq (Debian package libpq5)", [](void* h, pq_api& api) {
    bool ok = true;
    FF_PQ_FUNCTIONS(FF_DL_BIND)
    return ok;
  });
}
#undef FF_PQ_FUNCTIONS

struct result_ptr {
  PGresult* r;
  explicit result_ptr(PGresult* p) : r(p) {}
  ~result_ptr() { pq->PQclear(r); }
  result_ptr(const result_ptr&) = delete;
  result_ptr& operator=(const result_ptr&) = delete;
  ExecStatusType status() const { return r ? pq->PQresultStatus(r) : PGRES_FATAL_ERROR; }
};

// The passwords a connection string holds, as written and percent-decoded: libpq quotes parts of the
// string in its messages (an invalid percent-encoding, an unknown option), so every message is scrubbed
// of them before it is shown.
std::vector<std::string> passwords_in(const std::string& url) {
  std::vector<std::string> out;
  auto add = [&](std::string v) {
    if (v.empty()) return;
    std::string dec;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (v[i] == '%' && i + 2 < v.size() && std::isxdigit(static_cast<unsigned char>(v[i + 1])) &&
          std::isxdigit(static_cast<unsigned char>(v[i + 2]))) {
        dec += static_cast<char>(std::stoi(v.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        dec += v[i];
      }
    }
    out.push_back(v);
    if (dec != v && !dec.empty()) out.push_back(dec);
  };
  if (auto scheme = url.find("://"); scheme != std::string::npos) {
    auto start = scheme + 3;
    auto at = url.find('@', start), slash = url.find('/', start);
    if (at != std::string::npos && (slash == std::string::npos || at < slash))
      if (auto colon = url.find(':', start); colon != std::string::npos && colon < at) add(url.substr(colon + 1, at - colon - 1));
  }
  for (auto p = url.find("password"); p != std::string::npos; p = url.find("password", p + 8)) {
    auto q = p + 8;
    while (q < url.size() && url[q] == ' ') ++q;
    if (q >= url.size() || url[q] != '=') continue;
    ++q;
    while (q < url.size() && url[q] == ' ') ++q;
    std::size_t end;
    if (q < url.size() && url[q] == '\'') {
      end = url.find('\'', q + 1);
      add(url.substr(q + 1, (end == std::string::npos ? url.size() : end) - q - 1));
    } else {
      end = url.find_first_of("& \t", q);
      add(url.substr(q, (end == std::string::npos ? url.size() : end) - q));
    }
  }
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return out;
}

std::string scrub(std::string s, const std::vector<std::string>& secrets) {
  for (const auto& x : secrets)
    for (auto p = s.find(x); p != std::string::npos; p = s.find(x, p + 3)) s.replace(p, x.size(), "***");
  return s;
}

std::string trim_message(const char* m, const std::vector<std::string>& secrets) {
  std::string s = m ? m : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (auto& c : s)
    if (c == '\n') c = ' ';
  return scrub(std::move(s), secrets);
}

entry row_to_entry(const PGresult* r, int row) {
  auto text = [&](int c) { return pq->PQgetisnull(r, row, c) ? std::string() : std::string(pq->PQgetvalue(r, row, c)); };
  entry e;
  e.id = std::stoll(text(0));
  e.created_at = std::stoll(text(1));
  e.source = text(2);
  e.inputs = text(3);
  e.verdict = text(4);
  e.signature = text(5);
  e.kind = text(6);
  if (!pq->PQgetisnull(r, row, 7)) e.initiating_rank = std::stoi(text(7));
  e.initiating_host = text(8);
  e.host_key = text(9);
  e.report_json = text(10);
  e.action = text(11);
  e.action_hosts = text(12);
  return e;
}

std::int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

class pg_backend final : public backend {
 public:
  ~pg_backend() override {
    if (conn_) pq->PQfinish(conn_);
  }
  status connect(const std::string& url);
  status add(entry& e) override;
  result<std::vector<entry>> list(int limit) const override;
  result<std::optional<entry>> get(std::int64_t id) const override;
  result<std::vector<count_row>> stats(const std::string& by, int days) const override;
  result<std::int64_t> recurrences(const std::string& host_key, const std::string& kind, int days) const override;
  int schema_version() const override { return version_; }
  result<std::string> salt() override;

 private:
  error fail(const std::string& what) const {
    return error{shown_ + ": history database error: " + what + ": " + trim_message(pq->PQerrorMessage(conn_), secrets_)};
  }
  // Runs `sql` with text parameters (nullptr for NULL).
  PGresult* exec(const char* sql, const std::vector<const char*>& params) const {
    return pq->PQexecParams(conn_, sql, static_cast<int>(params.size()), nullptr, params.data(), nullptr, nullptr, 0);
  }
  status migrate();
  PGconn* conn_ = nullptr;
  std::string shown_;
  std::vector<std::string> secrets_;
  int version_ = 0;
};

status pg_backend::connect(const std::string& url) {
  shown_ = redact_url(url);
  secrets_ = passwords_in(url);
  // libpq echoes a bad percent-encoding with its surroundings (a password among them): refused here first.
  for (std::size_t i = 0; i < url.size(); ++i)
    if (url[i] == '%' && (i + 2 >= url.size() || !std::isxdigit(static_cast<unsigned char>(url[i + 1])) ||
                          !std::isxdigit(static_cast<unsigned char>(url[i + 2]))))
      return error{shown_ + ": the history database URL has a '%' that is not followed by two hex digits (percent-encoding)"};
  if (auto why = load_pq(); !why.empty()) return error{shown_ + ": " + why};
  // connect_timeout first, so a value in the URI wins (libpq: later keywords override earlier ones).
  const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* vals[] = {"10", "firstfault", url.c_str(), nullptr};
  conn_ = pq->PQconnectdbParams(keys, vals, 1);
  if (!conn_) return error{shown_ + ": history database error: out of memory"};
  if (pq->PQstatus(conn_) != CONNECTION_OK) return error{shown_ + ": cannot connect to the history database: " + trim_message(pq->PQerrorMessage(conn_), secrets_)};
  pq->PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);  // "relation already exists, skipping"
  return migrate();
}

status pg_backend::migrate() {
  // A schema already at this version needs no lock and no CREATE: a role that may only read (a login
  // node's `history list`) opens the history without the privileges a migration needs.
  {
    result_ptr v(pq->PQexec(conn_,
                        "SELECT (SELECT value FROM firstfault_meta WHERE key = 'schema_version'),"
                        " (SELECT count(*) FROM firstfault_meta WHERE key = 'host_salt')"));
    if (v.status() == PGRES_TUPLES_OK && pq->PQntuples(v.r) == 1 && !pq->PQgetisnull(v.r, 0, 0) &&
        std::atoi(pq->PQgetvalue(v.r, 0, 0)) == store::kSchemaVersion && std::atoi(pq->PQgetvalue(v.r, 0, 1)) == 1) {
      version_ = store::kSchemaVersion;
      return ok();
    }
  }
  result_ptr b(pq->PQexec(conn_, "BEGIN"));
  if (b.status() != PGRES_COMMAND_OK) return fail("BEGIN");
  auto rollback = [&](error e) -> status {
    pq->PQclear(pq->PQexec(conn_, "ROLLBACK"));
    return e;
  };
  if (result_ptr l(pq->PQexec(conn_, kMigrationLock)); l.status() != PGRES_TUPLES_OK) return rollback(fail("lock for migrations"));
  if (result_ptr m(pq->PQexec(conn_, "CREATE TABLE IF NOT EXISTS firstfault_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)"));
      m.status() != PGRES_COMMAND_OK)
    return rollback(fail("create firstfault_meta"));
  int version = 0;
  {
    result_ptr v(pq->PQexec(conn_, "SELECT value FROM firstfault_meta WHERE key = 'schema_version'"));
    if (v.status() != PGRES_TUPLES_OK) return rollback(fail("read the schema version"));
    if (pq->PQntuples(v.r) == 1) version = std::atoi(pq->PQgetvalue(v.r, 0, 0));
  }
  if (version > store::kSchemaVersion)
    return rollback(error{shown_ + ": history database has schema version " + std::to_string(version) + ", newer than this firstfault (" +
                          std::to_string(store::kSchemaVersion) + "); upgrade firstfault"});
  for (int v = version; v < store::kSchemaVersion; ++v) {
    if (result_ptr m(pq->PQexec(conn_, render(v, dialect::postgres).c_str())); m.status() != PGRES_COMMAND_OK)
      return rollback(fail("migration to schema version " + std::to_string(v + 1)));
  }
  if (version < store::kSchemaVersion) {
    std::string vs = std::to_string(store::kSchemaVersion);
    result_ptr u(exec("INSERT INTO firstfault_meta(key, value) VALUES('schema_version', $1) ON CONFLICT(key) DO UPDATE SET value = $1", {vs.c_str()}));
    if (u.status() != PGRES_COMMAND_OK) return rollback(fail("write the schema version"));
  }
  // The host_key salt, made once by the database itself, shared by every client.
  result_ptr s(pq->PQexec(conn_,
                      "INSERT INTO firstfault_meta(key, value) VALUES('host_salt', md5(random()::text || clock_timestamp()::text))"
                      " ON CONFLICT(key) DO NOTHING"));
  if (s.status() != PGRES_COMMAND_OK) return rollback(fail("create the host salt"));
  if (result_ptr c(pq->PQexec(conn_, "COMMIT")); c.status() != PGRES_COMMAND_OK) return fail("COMMIT");
  version_ = store::kSchemaVersion;
  return ok();
}

status pg_backend::add(entry& e) {
  std::string created = std::to_string(e.created_at);
  std::string rank = e.initiating_rank ? std::to_string(*e.initiating_rank) : "";
  result_ptr r(exec("INSERT INTO diagnoses(created_at, source, inputs, verdict, signature, kind, initiating_rank, initiating_host,"
                    " host_key, report_json, action, action_hosts) VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12) RETURNING id",
                    {created.c_str(), e.source.c_str(), e.inputs.c_str(), e.verdict.c_str(), e.signature.c_str(), e.kind.c_str(),
                     e.initiating_rank ? rank.c_str() : nullptr, e.initiating_host.c_str(), e.host_key.c_str(), e.report_json.c_str(),
                     e.action.c_str(), e.action_hosts.c_str()}));
  if (r.status() != PGRES_TUPLES_OK || pq->PQntuples(r.r) != 1) return fail("insert");
  e.id = std::stoll(pq->PQgetvalue(r.r, 0, 0));
  return ok();
}

result<std::vector<entry>> pg_backend::list(int limit) const {
  std::string l = std::to_string(limit < 0 ? 0 : limit);
  result_ptr r(exec((std::string(kSelect) + " ORDER BY id DESC LIMIT $1").c_str(), {l.c_str()}));
  if (r.status() != PGRES_TUPLES_OK) return fail("list");
  std::vector<entry> out;
  for (int i = 0; i < pq->PQntuples(r.r); ++i) out.push_back(row_to_entry(r.r, i));
  return out;
}

result<std::optional<entry>> pg_backend::get(std::int64_t id) const {
  std::string i = std::to_string(id);
  result_ptr r(exec((std::string(kSelect) + " WHERE id = $1").c_str(), {i.c_str()}));
  if (r.status() != PGRES_TUPLES_OK) return fail("show");
  std::optional<entry> out;
  if (pq->PQntuples(r.r) == 1) out = row_to_entry(r.r, 0);
  return out;
}

result<std::vector<count_row>> pg_backend::stats(const std::string& by, int days) const {
  std::string since = std::to_string(now_s() - static_cast<std::int64_t>(days) * 86400);
  result_ptr r(exec(stats_sql(by, "$1").c_str(), {since.c_str()}));
  if (r.status() != PGRES_TUPLES_OK) return fail("stats");
  std::vector<count_row> out;
  for (int i = 0; i < pq->PQntuples(r.r); ++i)
    out.push_back({pq->PQgetisnull(r.r, i, 0) ? "" : pq->PQgetvalue(r.r, i, 0), std::stoll(pq->PQgetvalue(r.r, i, 1))});
  return out;
}

result<std::int64_t> pg_backend::recurrences(const std::string& key, const std::string& kind, int days) const {
  std::string since = std::to_string(now_s() - static_cast<std::int64_t>(days) * 86400);
  result_ptr r(exec("SELECT COUNT(*) FROM diagnoses WHERE host_key = $1 AND kind = $2 AND created_at >= $3",
                    {key.c_str(), kind.c_str(), since.c_str()}));
  if (r.status() != PGRES_TUPLES_OK || pq->PQntuples(r.r) != 1) return fail("recurrences");
  return static_cast<std::int64_t>(std::stoll(pq->PQgetvalue(r.r, 0, 0)));
}

result<std::string> pg_backend::salt() {
  result_ptr r(pq->PQexec(conn_, "SELECT value FROM firstfault_meta WHERE key = 'host_salt'"));
  if (r.status() != PGRES_TUPLES_OK || pq->PQntuples(r.r) != 1) return fail("read the host salt");
  return std::string(pq->PQgetvalue(r.r, 0, 0));
}

}  // namespace

std::string redact_url(const std::string& url) {
  // scheme://user:password@host...: the password goes; a password=... parameter too.
  std::string out = url;
  auto scheme = out.find("://");
  if (scheme != std::string::npos) {
    auto start = scheme + 3;
    auto at = out.find('@', start);
    auto slash = out.find('/', start);
    if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
      auto colon = out.find(':', start);
      if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  return scrub(out, passwords_in(url));
}

result<std::unique_ptr<backend>> open_postgres(const std::string& url) {
  auto be = std::make_unique<pg_backend>();
  if (auto st = be->connect(url); !st) return st.error();
  return std::unique_ptr<backend>(std::move(be));
}

}  // namespace ff::history::detail
