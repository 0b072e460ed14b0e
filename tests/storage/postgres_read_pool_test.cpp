// A PostgresStore's reads run on a pool of connections (read_connections=,
// default PostgresStore::kDefaultReadConnections): a read parked at the
// server (here behind a table lock another session holds) does not hold up
// the node's other reads, the searches' hits among them. Its writes run on a
// pool of their own (write_connections=): a write waiting for its
// collection's row does not hold up the node's writes to another. Forced
// with locks, not timing: the parked one is seen waiting in pg_stat_activity
// first.
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
  // True once a session of the database waits for a lock in a statement
  // naming `table`.
  static bool WaitForAWaiter(const std::string& uri, const std::string& table = "moeedb_ops") {
    pqxx::connection c(uri);
    for (int i = 0; i < 600; ++i) {
      const auto n = pqxx::nontransaction(c)
                         .exec_params("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
                                      "datname = current_database() AND query LIKE '%' || $1 || '%'", table)[0][0]
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
  for (const std::string name : {"read_connections", "write_connections"}) {
    for (const std::string value : {"0", "65", "four"}) {
      auto s = Store::Open(WithParam(pg.uri(), name + "=" + value));
      ASSERT_FALSE(s.ok()) << name << "=" << value;
      EXPECT_EQ(s.status().code(), Status::Code::kInvalidArgument) << name << "=" << value;
      EXPECT_NE(s.status().message().find(name), std::string::npos) << s.status().ToString();
    }
  }
}

// A write takes its collection's row in its last statement and holds it to
// COMMIT (the change log's order); another session holds c's row here. The
// node's write to c parks on one write connection; its write to d goes on
// another meanwhile (with one write connection it would queue behind).
TEST(PostgresWritePool, AWriteWaitingForItsCollectionDoesNotHoldUpTheNodesWritesToAnother) {
  test::PgDatabase pg;
  std::unique_ptr<Store> store = OpenWithDocument(WithParam(pg.uri(), "write_connections=2"));
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->CreateCollection("d", "{}").ok());

  std::future<Result<WriteResult>> parked;  // before the lock: a failed assertion drops the lock first
  pqxx::connection holder(pg.uri());
  pqxx::work hold(holder);
  hold.exec("UPDATE moeedb_collections SET doc_count = doc_count WHERE name = 'c'");
  parked = std::async(std::launch::async, [&] { return store->Upsert("c", {Doc("b")}, true); });
  ASSERT_TRUE(OpsLock::WaitForAWaiter(pg.uri(), "moeedb_collections"));
  auto other = std::async(std::launch::async, [&] { return store->Upsert("d", {Doc("x")}, true); });
  // Under the write's 8 s wait for the row, after which it would retry.
  const bool answered = other.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  EXPECT_EQ(parked.wait_for(std::chrono::seconds(0)), std::future_status::timeout) << "the write to c was not parked";
  hold.commit();
  EXPECT_TRUE(answered) << "the write to d waited for the parked one";
  auto to_d = other.get();
  ASSERT_TRUE(to_d.ok()) << to_d.status().ToString();
  EXPECT_EQ(to_d->seq, 1u);
  auto to_c = parked.get();
  ASSERT_TRUE(to_c.ok()) << to_c.status().ToString();
  EXPECT_EQ(to_c->seq, 2u);  // after a's entry
  auto b = store->Get("c", "b");
  ASSERT_TRUE(b.ok() && b->has_value());
}

}  // namespace
}  // namespace moeedb
