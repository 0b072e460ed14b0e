// What a PostgresStore write does when PostgreSQL fails under it, forced
// with hooks and locks, not timing: a connection lost before COMMIT (retried,
// stored once, no gap in the change log), a COMMIT whose answer was lost
// after the write was stored (resolved by its write id: acknowledged once),
// one lost before it was stored (retried with the same id), and a server
// that needs a synchronous standby while none streams (Unavailable at once,
// nothing written) instead of a COMMIT that hangs; a writer frozen inside
// its transaction (ended by the server, so the others go on).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <regex>
#include <thread>

#include "storage/postgres_store.h"
#include "storage/store.h"
#include "tests/storage/pg_test_db.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

StoredDocument Doc(const std::string& id, float x) {
  return {id, "text of " + id, json{{"id", id}}.dump(), {x, x + 0.25f, -x}, {x * 3.5f, 1e-30f}};
}

PostgresStore* Pg(const std::unique_ptr<Store>& s) { return dynamic_cast<PostgresStore*>(s.get()); }

class PostgresFailure : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = test::OpenWithCollection(pg_.uri(), "c");
    ASSERT_TRUE(store_);
    ASSERT_TRUE(store_->Upsert("c", {Doc("a", 1)}, true).ok());  // seq 1
  }
  // The write is stored exactly once, under the next number, with no gap.
  void ExpectStoredOnce(const Result<WriteResult>& r, const std::string& id, uint64_t docs = 1) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->seq, 2u);
    const CollectionRecord rec = *store_->GetCollection("c");
    EXPECT_EQ(rec.last_op, 2u);
    EXPECT_EQ(rec.count, 1 + docs);
    EXPECT_TRUE((*store_->Get("c", id)).has_value());
    EXPECT_EQ(test::QueryCount(pg_.uri(), "SELECT count(*) FROM moeedb_ops"), 2);
    EXPECT_EQ(test::QueryCount(pg_.uri(), "SELECT count(*) FROM moeedb_documents WHERE external = '" + id + "'"), 1);
  }
  test::PgDatabase pg_;
  std::unique_ptr<Store> store_;
};

// The writer's backend is terminated while it waits for the collection's row
// (held by another transaction): nothing of that attempt is stored, the
// write reconnects, retries and is stored once.
TEST_F(PostgresFailure, AConnectionLostMidBatchIsRetriedAndStoredOnce) {
  pqxx::connection admin(pg_.uri());
  pqxx::work hold(admin);
  hold.exec("SELECT 1 FROM moeedb_collections WHERE name = 'c' FOR UPDATE");  // the writer will wait here
  auto write = std::async(std::launch::async, [&] { return store_->Upsert("c", {Doc("b", 2), Doc("b2", 3)}, true); });
  pqxx::connection killer(pg_.uri());
  int killed = 0;
  for (int i = 0; i < 500 && killed == 0; ++i) {
    pqxx::nontransaction k(killer);
    killed = k.exec("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()")[0][0].as<int>();
    if (killed == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(killed, 1);
  // The retry waits for the row again; once it is free the write goes through.
  EXPECT_EQ(write.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  hold.abort();
  auto r = write.get();
  ExpectStoredOnce(r, "b", 2);
  EXPECT_TRUE((*store_->Get("c", "b2")).has_value());
}

// COMMIT went through but its answer was lost: the write id is found on the
// server, so the write is acknowledged as it was stored, not written twice.
TEST_F(PostgresFailure, ALostAnswerToAStoredCommitIsAcknowledgedOnce) {
  int calls = 0;
  Pg(store_)->SetCommitHookForTest([&](bool committed) {
    if (committed && calls++ == 0) throw pqxx::in_doubt_error("test: the answer to COMMIT was lost");
  });
  ExpectStoredOnce(store_->Upsert("c", {Doc("b", 2)}, true), "b");
  EXPECT_EQ(calls, 1);  // resolved by lookup, never sent again
}

// The connection went away before COMMIT reached the server: the write id is
// not there (once the lost attempt's transaction is over), so the write is
// retried with the same id and stored once; the lost attempt's number is
// rolled back with it.
TEST_F(PostgresFailure, ALostCommitThatNeverArrivedIsRetriedOnce) {
  int before = 0;
  Pg(store_)->SetCommitHookForTest([&](bool committed) {
    if (!committed && before++ == 0) throw pqxx::in_doubt_error("test: the connection was lost before COMMIT");
  });
  ExpectStoredOnce(store_->Upsert("c", {Doc("b", 2)}, true), "b");
  EXPECT_EQ(before, 2);
  // Deletes take the same path.
  before = 0;
  auto d = store_->Delete("c", {"b"}, true);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->seq, 3u);
  EXPECT_EQ(d->removed.size(), 1u);
  EXPECT_FALSE((*store_->Get("c", "b")).has_value());
}

// A node frozen inside a write (SIGSTOP: its connection open, its
// transaction holding the collection's row): PostgreSQL ends the idle
// session, so another node's write goes through while it is still frozen,
// and the frozen node's own reads do not wait behind it; thawed, its write
// finds the session gone and is retried under the next number.
TEST_F(PostgresFailure, AWriterFrozenInItsTransactionDoesNotStopTheOthers) {
  auto other = Store::Open(pg_.uri());  // another node
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  std::mutex mu;
  std::condition_variable cv;
  bool frozen = false, thaw = false;
  int attempts = 0;
  Pg(store_)->SetCommitHookForTest([&](bool committed) {
    if (committed || attempts++ > 0) return;
    std::unique_lock lock(mu);
    frozen = true;
    cv.notify_all();
    // Until the other node's write is through; a cap keeps a failing run finite.
    cv.wait_for(lock, std::chrono::seconds(60), [&] { return thaw; });
    frozen = false;
  });
  auto write = std::async(std::launch::async, [&] { return store_->Upsert("c", {Doc("b", 2)}, true); });
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return frozen; }));
  }
  auto read = store_->Get("c", "a");  // the frozen node's own read
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(read->has_value());
  auto theirs = (*other)->Upsert("c", {Doc("x", 5)}, true);
  {
    std::lock_guard lock(mu);
    EXPECT_TRUE(frozen) << "the other node's write waited for the frozen one";
    thaw = true;
  }
  cv.notify_all();
  ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
  EXPECT_EQ(theirs->seq, 2u);
  auto mine = write.get();
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  EXPECT_EQ(mine->seq, 3u);
  EXPECT_EQ(attempts, 2);
  const CollectionRecord rec = *store_->GetCollection("c");
  EXPECT_EQ(rec.last_op, 3u);
  EXPECT_EQ(rec.count, 3u);
  EXPECT_EQ(test::QueryCount(pg_.uri(), "SELECT count(*) FROM moeedb_ops"), 3);
  EXPECT_TRUE((*store_->Get("c", "b")).has_value());
  EXPECT_TRUE((*store_->Get("c", "x")).has_value());
}

// A server of its own whose synchronous_standby_names names a standby that
// never connects (what Patroni's strict synchronous mode sets when its
// standby is gone): a synced write answers Unavailable at once and writes
// nothing; an unsynced one does not wait for a standby and is stored.
TEST(PostgresNoStandby, ASyncedWriteWithoutASynchronousStandbyIsUnavailableNotHung) {
  const std::string dir = std::string(std::getenv("MOEEDB_TEST_PG_DIR")) + "-nostandby";
  const std::string script = MOEEDB_PG_CLUSTER_SH;
  // A server left by a run that was killed keeps its settings: a new one.
  std::system(("bash " + script + " stop " + dir + " >/dev/null 2>&1").c_str());
  std::filesystem::remove_all(dir);
  ASSERT_EQ(std::system(("bash " + script + " start " + dir).c_str()), 0);
  std::string uri;
  std::getline(std::ifstream(dir + "/uri"), uri);
  {
    auto s = Store::Open(uri);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_TRUE((*s)->CreateCollection("c", "{}").ok());
    // A role without pg_monitor, opened while commits need no standby.
    {
      pqxx::connection c(uri);
      pqxx::nontransaction(c).exec("CREATE ROLE plain LOGIN");
      pqxx::nontransaction(c).exec("GRANT CREATE ON SCHEMA public TO plain");
      pqxx::nontransaction(c).exec("GRANT ALL ON ALL TABLES IN SCHEMA public TO plain");
      pqxx::nontransaction(c).exec("GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO plain");
    }
    auto plain = Store::Open(std::regex_replace(uri, std::regex("://postgres@"), "://plain@"));
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    {
      pqxx::connection c(uri);
      pqxx::nontransaction(c).exec("ALTER SYSTEM SET synchronous_standby_names = 'standby_never_there'");
      pqxx::nontransaction(c).exec("SELECT pg_reload_conf()");
    }
    for (int i = 0; i < 500; ++i) {  // until the reload reached new sessions
      pqxx::connection c(uri);
      if (pqxx::nontransaction(c).exec("SHOW synchronous_standby_names")[0][0].as<std::string>() != "") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    auto w = std::async(std::launch::async, [&] { return (*s)->Upsert("c", {Doc("a", 1)}, true); });
    ASSERT_EQ(w.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "the write hung";
    auto r = w.get();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Status::Code::kUnavailable);
    EXPECT_NE(r.status().message().find("no synchronous standby"), std::string::npos) << r.status().message();
    EXPECT_EQ((*s)->GetCollection("c")->last_op, 0u);
    EXPECT_FALSE((*(*s)->Get("c", "a")).has_value());
    // Every write commits synced (a wait: false write too: a commit lost to a
    // crash would rewind the change log under the nodes): refused the same way.
    auto unsynced = (*s)->Upsert("c", {Doc("a", 1)}, false);
    EXPECT_EQ(unsynced.status().code(), Status::Code::kUnavailable) << unsynced.status().ToString();
    EXPECT_EQ((*s)->GetCollection("c")->last_op, 0u);
    // The role without pg_monitor sees no standby's state: told so, not told
    // that none streams (which would send it retrying for ever).
    auto denied = (*plain)->Upsert("c", {Doc("a", 1)}, true);
    EXPECT_EQ(denied.status().code(), Status::Code::kIOError) << denied.status().ToString();
    EXPECT_NE(denied.status().message().find("GRANT pg_monitor TO plain"), std::string::npos)
        << denied.status().message();
    EXPECT_EQ((*s)->GetCollection("c")->last_op, 0u);
  }
  EXPECT_EQ(std::system(("bash " + script + " stop " + dir).c_str()), 0);
}

}  // namespace
}  // namespace moeedb
