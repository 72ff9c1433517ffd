// The local history: schema and migrations, queries, recurrence, and clear errors for locked/corrupt files.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "firstfault/history.hpp"

namespace fs = std::filesystem;

namespace {

struct temp_db {
  fs::path dir = fs::temp_directory_path() / ("ff-hist-" + std::to_string(::getpid()) + "-" + std::to_string(rand()));
  std::string path = (dir / "history.db").string();
  ~temp_db() { fs::remove_all(dir); }
};

ff::history::entry make(const std::string& kind, const std::string& host_key, int rank) {
  ff::history::entry e;
  e.inputs = "logs/";
  e.verdict = "failure";
  e.signature = "sig_" + kind;
  e.kind = kind;
  e.initiating_rank = rank;
  e.initiating_host = "node-1";
  e.host_key = host_key;
  e.report_json = R"({"schema":"firstfault.report/v1"})";
  return e;
}

TEST(history, stores_lists_shows_and_counts) {
  temp_db t;
  auto s = ff::history::store::open(t.path);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s.value().schema_version(), ff::history::store::kSchemaVersion);
  auto a = make("cuda_oom", "k1", 3), b = make("cuda_oom", "k1", 5), c = make("gpu_xid_hardware", "k2", 0);
  ASSERT_TRUE(s.value().add(a));
  ASSERT_TRUE(s.value().add(b));
  ASSERT_TRUE(s.value().add(c));
  EXPECT_EQ(c.id, 3);
  auto rows = s.value().list(10);
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows.value().size(), 3u);
  EXPECT_EQ(rows.value()[0].kind, "gpu_xid_hardware");  // newest first
  auto one = s.value().get(a.id);
  ASSERT_TRUE(one && one.value());
  EXPECT_EQ(one.value()->initiating_rank, 3);
  EXPECT_EQ(one.value()->report_json, a.report_json);
  auto by_kind = s.value().stats("kind", 7);
  ASSERT_TRUE(by_kind);
  ASSERT_EQ(by_kind.value().size(), 2u);
  EXPECT_EQ(by_kind.value()[0].key, "cuda_oom");
  EXPECT_EQ(by_kind.value()[0].count, 2);
  auto rec = s.value().recurrences("k1", "cuda_oom", 7);
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec.value(), 2);
  EXPECT_EQ(s.value().recurrences("k2", "cuda_oom", 7).value(), 0);
  EXPECT_FALSE(s.value().stats("colour", 7));
}

TEST(history, survives_reopen_and_keeps_the_schema_version) {
  temp_db t;
  {
    auto s = ff::history::store::open(t.path);
    ASSERT_TRUE(s);
    auto e = make("cuda_oom", "k", 1);
    ASSERT_TRUE(s.value().add(e));
  }
  auto s = ff::history::store::open(t.path);
  ASSERT_TRUE(s);
  EXPECT_EQ(s.value().list(5).value().size(), 1u);
}

TEST(history, corrupt_file_gives_a_clear_error) {
  temp_db t;
  fs::create_directories(t.dir);
  std::ofstream(t.path) << "this is not a database, just text that someone wrote here by mistake\n";
  auto s = ff::history::store::open(t.path);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("corrupt"), std::string::npos) << s.error().message;
}

TEST(history, newer_schema_is_refused) {
  temp_db t;
  { ASSERT_TRUE(ff::history::store::open(t.path)); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(t.path.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  auto s = ff::history::store::open(t.path);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("newer"), std::string::npos);
}

// A database written by schema version 1 (before the action columns) is migrated in place: its rows stay,
// with an empty action, and new rows store the action and its hosts.
TEST(history, version_1_database_is_migrated_to_the_action_columns) {
  temp_db t;
  fs::create_directories(t.dir);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(t.path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE diagnoses(id INTEGER PRIMARY KEY AUTOINCREMENT, created_at INTEGER NOT NULL, source TEXT NOT NULL,"
                         " inputs TEXT NOT NULL, verdict TEXT NOT NULL, signature TEXT, kind TEXT, initiating_rank INTEGER,"
                         " initiating_host TEXT, host_key TEXT, report_json TEXT NOT NULL);"
                         "INSERT INTO diagnoses(created_at, source, inputs, verdict, kind, report_json)"
                         " VALUES(1700000000, 'diagnose', 'old/', 'failure', 'cuda_oom', '{}');"
                         "PRAGMA user_version = 1;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto s = ff::history::store::open(t.path);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s.value().schema_version(), 2);
  auto e = make("gpu_fell_off_bus", "k1", 0);
  e.action = "restart-excluding-hosts";
  e.action_hosts = "gpu-node-7";
  ASSERT_TRUE(s.value().add(e));
  auto rows = s.value().list(10);
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows.value().size(), 2u);
  EXPECT_EQ(rows.value()[0].action, "restart-excluding-hosts");
  EXPECT_EQ(rows.value()[0].action_hosts, "gpu-node-7");
  EXPECT_EQ(rows.value()[1].inputs, "old/");
  EXPECT_EQ(rows.value()[1].action, "");
}

TEST(history, locked_database_gives_a_clear_error) {
  temp_db t;
  auto s = ff::history::store::open(t.path);
  ASSERT_TRUE(s);
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(t.path.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  auto e = make("cuda_oom", "k", 1);
  auto st = s.value().add(e);  // waits the busy timeout, then reports the lock
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("locked"), std::string::npos) << st.error().message;
}

TEST(history, host_key_is_stable_salted_and_not_the_name) {
  temp_db t;
  auto a = ff::history::host_key(t.path, "gpu-node-17.example.com");
  auto b = ff::history::host_key(t.path, "gpu-node-17.example.com");
  auto c = ff::history::host_key(t.path, "gpu-node-18.example.com");
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a.find("gpu"), std::string::npos);
  EXPECT_TRUE(fs::exists(t.dir / "host-salt"));
  EXPECT_EQ(ff::history::host_key(t.path, ""), "");
}

}  // namespace
