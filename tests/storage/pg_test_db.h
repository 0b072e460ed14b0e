// The tests' PostgreSQL: the throwaway server tests/pg/pg_cluster.sh starts
// for ctest (its URI in $MOEEDB_TEST_PG_DIR/uri) and a fresh database on it
// per test, dropped afterwards.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <pqxx/pqxx>
#include <string>
#include <unistd.h>

#include "storage/store.h"

namespace moeedb::test {

// The server's URI for database `db` ("postgres": the maintenance database).
inline std::string PgUri(const std::string& db = "postgres") {
  const char* dir = std::getenv("MOEEDB_TEST_PG_DIR");
  EXPECT_NE(dir, nullptr) << "MOEEDB_TEST_PG_DIR is not set: ctest starts the server (tests/pg/pg_cluster.sh)";
  if (dir == nullptr) return "";
  std::ifstream in(std::string(dir) + "/uri");
  std::string uri;
  std::getline(in, uri);
  EXPECT_FALSE(uri.empty()) << "no server URI in " << dir << "/uri";
  return uri.substr(0, uri.rfind('/') + 1) + db;
}

// A database of its own for one test, created empty and dropped at the end.
class PgDatabase {
 public:
  PgDatabase() {
    static std::atomic<int> counter{0};
    name_ = "t" + std::to_string(getpid()) + "_" + std::to_string(counter++);
    pqxx::connection c(PgUri());
    pqxx::nontransaction(c).exec("CREATE DATABASE " + name_);
  }
  ~PgDatabase() {
    try {
      pqxx::connection c(PgUri());
      pqxx::nontransaction(c).exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
    } catch (...) {
    }
  }
  std::string uri() const { return PgUri(name_); }

 private:
  std::string name_;
};

// A store on the database at `uri` with an empty collection `collection`;
// null (the failure recorded) if either cannot be made.
inline std::unique_ptr<Store> OpenWithCollection(const std::string& uri, const std::string& collection) {
  auto s = Store::Open(uri);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return nullptr;
  auto c = (*s)->CreateCollection(collection, "{}");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(s).value() : nullptr;
}

// The integer that `sql` (one row, one column) answers on the database at `uri`.
inline int64_t QueryCount(const std::string& uri, const std::string& sql) {
  pqxx::connection c(uri);
  return pqxx::nontransaction(c).exec(sql)[0][0].as<int64_t>();
}

}  // namespace moeedb::test
