// A PostgresStore's reads run on a pool of connections (read_connections=,
// default PostgresStore::kDefaultReadConnections): a read parked at the
// server (here behind a table lock another session holds) does not hold up
// the node's other reads, the searches' hits among them. Forced with a lock,
// not timing: the parked read is seen waiting in pg_stat_activity first.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <thread>

#include "storage/postgres_store.h"
#include "storage/store.h"
#include "tests/storage/pg_test_db.h"

namespace moeedb {
namespace {

StoredDocument Doc(const std::string& id) {
  return {id, "text of " + id, nlohmann::json{{"id", id}}.dump(), {1, 2, 3}, {4, 5}};
}

std::string WithParam(const std::string& uri, const std::string& param) {
  return uri + (uri.find('?') == std::string::npos ? "?" : "&") + param;
}

// A store over `uri` holding collection c with one document, a; nullptr
// (and a failure) if not.
std::unique_ptr<Store> OpenWithDocument(const std::string& uri) {
  auto opened = Store::Open(uri);
  if (!opened.ok()) {
    ADD_FAILURE() << opened.status().ToString();
    return nullptr;
  }
  std::unique_ptr<Store> store = std::move(opened).value();
  Status s = store->CreateCollection("c", "{}").status();
  if (s.ok()) s = store->Upsert("c", {Doc("a")}, true).status();
  if (!s.ok()) {
    ADD_FAILURE() << s.ToString();
    return nullptr;
  }
  return store;
}

// Holds ACCESS EXCLUSIVE on moeedb_ops (reads of the change log wait for it)
// until Release; Wait returns once a session of `db` waits for that lock.
class OpsLock {
 public:
  explicit OpsLock(const std::string& uri) : c_(uri), t_(c_) { t_.exec("LOCK TABLE moeedb_ops IN ACCESS EXCLUSIVE MODE"); }
  void Release() { t_.commit(); }
  static bool WaitForAWaiter(const std::string& uri) {
    pqxx::connection c(uri);
    for (int i = 0; i < 600; ++i) {
      const auto n = pqxx::nontransaction(c)
                         .exec("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
                               "datname = current_database() AND query LIKE '%moeedb_ops%'")[0][0]
                         .as<int>();
      if (n > 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 private:
  pqxx::connection c_;
  pqxx::work t_;
};

TEST(PostgresReadPool, AReadParkedAtTheServerDoesNotHoldUpTheNodesOtherReads) {
  test::PgDatabase pg;
  std::unique_ptr<Store> store = OpenWithDocument(pg.uri());
  ASSERT_TRUE(store);

  std::future<size_t> log;  // before the lock: a failed assertion drops the lock first, then waits for the read
  OpsLock lock(pg.uri());
  log = std::async(std::launch::async, [&] {
    size_t n = 0;
    Status s = store->ReadOps("c", 0, [&](const OpRecord&) { ++n; });
    return s.ok() ? n : 0;
  });
  ASSERT_TRUE(OpsLock::WaitForAWaiter(pg.uri()));
  // The log's reader is parked on its connection; a hit's text is read on another.
  auto read = std::async(std::launch::async, [&] { return store->Get("c", "a"); });
  const bool answered = read.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  EXPECT_EQ(log.wait_for(std::chrono::seconds(0)), std::future_status::timeout) << "the log's read was not parked";
  lock.Release();  // before any assertion can end the test: a queued read finishes now
  EXPECT_TRUE(answered) << "the read waited for the parked one";
  auto doc = read.get();
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  ASSERT_TRUE(doc->has_value());
  EXPECT_EQ((*doc)->text, "text of a");
  EXPECT_EQ(log.get(), 1u);
}

TEST(PostgresReadPool, OneReadConnectionQueuesTheReadsBehindAParkedOne) {
  test::PgDatabase pg;
  std::unique_ptr<Store> store = OpenWithDocument(WithParam(pg.uri(), "read_connections=1"));
  ASSERT_TRUE(store);

  std::future<Status> log;  // before the lock, as above
  std::future<Result<std::optional<StoredDocument>>> doc;
  OpsLock lock(pg.uri());
  log = std::async(std::launch::async, [&] { return store->ReadOps("c", 0, [](const OpRecord&) {}); });
  ASSERT_TRUE(OpsLock::WaitForAWaiter(pg.uri()));
  doc = std::async(std::launch::async, [&] { return store->Get("c", "a"); });
  // It cannot finish while the only read connection is parked (however long this waits).
  EXPECT_EQ(doc.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  lock.Release();
  EXPECT_TRUE(log.get().ok());
  auto got = doc.get();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->has_value());
}

// A server restart (here: every backend of the database terminated) leaves
// each pooled connection dead though it still looks open: every read finds
// its own connection broken, reconnects that one and is answered.
TEST(PostgresReadPool, EveryReadIsAnsweredAfterEachPooledConnectionDied) {
  test::PgDatabase pg;
  std::unique_ptr<Store> store = OpenWithDocument(pg.uri());
  ASSERT_TRUE(store);
  const int reads = 2 * PostgresStore::kDefaultReadConnections;
  for (int i = 0; i < reads; ++i) ASSERT_TRUE(store->ReadOps("c", 0, [](const OpRecord&) {}).ok());
  {
    pqxx::connection c(pg.uri());
    const auto killed = pqxx::nontransaction(c)
                            .exec("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = "
                                  "current_database() AND pid <> pg_backend_pid()")[0][0]
                            .as<int>();
    ASSERT_GE(killed, PostgresStore::kDefaultReadConnections) << "the pool's connections were not all open";
  }
  // The change log is read from the primary only (no fallback would hide a failure).
  for (int i = 0; i < reads; ++i) {
    size_t n = 0;
    Status s = store->ReadOps("c", 0, [&](const OpRecord&) { ++n; });
    ASSERT_TRUE(s.ok()) << "read " << i << ": " << s.ToString();
    EXPECT_EQ(n, 1u);
  }
}

TEST(PostgresReadPool, ABadPoolSizeIsRefusedByName) {
  test::PgDatabase pg;
  for (const char* bad : {"read_connections=0", "read_connections=65", "read_connections=four"}) {
    auto s = Store::Open(WithParam(pg.uri(), bad));
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(s.status().message().find("read_connections"), std::string::npos) << s.status().ToString();
  }
}

}  // namespace
}  // namespace moeedb
