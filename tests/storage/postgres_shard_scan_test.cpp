// How PostgresStore reads one shard for a replica's build: pages of their
// own transactions (no snapshot held across the scan, so a write committed
// mid-scan may be seen and vacuum is not held back), and, with patroni=,
// from the synchronous standby once it has replayed what the primary had
// committed when the scan began, else from the primary (a standby behind,
// or lost mid-scan, costs nothing but the primary's reads).
#include <gtest/gtest.h>

#include <functional>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <regex>
#include <string>
#include <vector>

#include "storage/postgres_store.h"
#include "storage/store.h"
#include "tests/storage/fake_patroni.h"
#include "tests/storage/pg_test_db.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

StoredDocument Doc(const std::string& id, float x) {
  return {id, "text of " + id, json{{"id", id}}.dump(), {x, x + 0.25f, -x}, {x * 3.5f, 1e-30f}};
}

std::vector<StoredDocument> Docs(int n) {
  std::vector<StoredDocument> docs;
  for (int i = 0; i < n; ++i) docs.push_back(Doc("doc-" + std::to_string(i), static_cast<float>(i)));
  return docs;
}

// The ids a scan of `shard` of collection c gives, each with how often;
// `at(n)` runs before the document handed out after n others.
std::map<std::string, int> ScanIds(Store* store, const ShardFilter& shard,
                                   const std::function<void(size_t)>& at = [](size_t) {}) {
  std::map<std::string, int> seen;
  size_t n = 0;
  Status s = store->ScanMetadata("c", [&](uint64_t, const std::string& meta) {
    at(n++);
    ++seen[json::parse(meta).at("id").get<std::string>()];
  }, shard);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return seen;
}

// A scan's sessions on the server at `uri` that read a page (by
// pg_stat_activity's application_name and last statement); `holding`: only
// those holding a snapshot now.
int64_t PageSessions(const std::string& uri, bool holding = false) {
  return test::QueryCount(uri, std::string("SELECT count(*) FROM pg_stat_activity WHERE application_name = '") +
                                   PostgresStore::kScanSessionName + "' AND query LIKE 'SELECT internal, shard_key%'" +
                                   (holding ? " AND backend_xmin IS NOT NULL" : ""));
}

// A write committed while a range-placed shard is being read, at a key past
// every one read so far, is in the scan's later page; while the scan's
// callback runs, no session of the store holds a snapshot (one repeatable-
// read transaction for the whole scan held both back).
TEST(PostgresShardScan, EachPageIsReadAtItsOwnMomentAndNoSnapshotIsHeldBetween) {
  test::PgDatabase db;
  auto store = test::OpenWithCollection(db.uri(), "c");
  ASSERT_TRUE(store);
  const auto docs = Docs(2600);
  ASSERT_TRUE(store->Upsert("c", docs, true).ok());
  const ShardFilter shard{0, 2, ShardLayout::kRange};
  uint64_t top = 0;
  size_t expected = 0;
  for (const auto& d : docs)
    if (shard.Holds(d.id)) top = std::max(top, ShardKey(d.id)), ++expected;
  ASSERT_GT(expected, 1000u);  // two pages at least
  std::string late;
  for (int i = 0; late.empty(); ++i) {
    const std::string id = "late-" + std::to_string(i);
    if (shard.Holds(id) && ShardKey(id) > top) late = id;
  }
  int64_t holding = -1;
  const auto seen = ScanIds(store.get(), shard, [&](size_t n) {
    if (n != 0) return;
    holding = test::QueryCount(db.uri(), "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                         "AND backend_type = 'client backend' AND backend_xmin IS NOT NULL "
                                         "AND pid <> pg_backend_pid()");
    ASSERT_TRUE(store->Upsert("c", {Doc(late, 9999)}, true).ok());
  });
  EXPECT_EQ(holding, 0);
  EXPECT_EQ(seen.size(), expected + 1);
  EXPECT_EQ(seen.count(late), 1u) << "the write committed mid-scan was not read by the later page";
  for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << id;
}

// A server of its own with a synchronous standby (tests/pg/pg_cluster.sh
// PG_STANDBY=1, remote_apply) and a fake Patroni naming both.
class PostgresStandbyScan : public ::testing::Test {
 protected:
  void SetUp() override {
    // A folder per test (ctest runs these side by side), named short: the
    // server's socket path under it must fit in 107 bytes.
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = std::string(std::getenv("MOEEDB_TEST_PG_DIR")) + "-sb" + std::to_string(std::hash<std::string>{}(test) % 100000);
    Stop();
    std::filesystem::remove_all(dir_);
    ASSERT_EQ(std::system(("PG_STANDBY=1 bash " + script_ + " start " + dir_).c_str()), 0);
    std::getline(std::ifstream(dir_ + "/uri"), primary_);
    std::string port;
    std::getline(std::ifstream(dir_ + "/standby_port"), port);
    standby_ = std::regex_replace(primary_, std::regex(":[0-9]+/"), ":" + port + "/");
    leader_.Set("/primary", 200);
    any_.Set("/cluster", 200,
             json{{"members",
                   {test::Member("pg0", "leader", test::PgHostPort(primary_), leader_.host_port()),
                    test::Member("pg1", "sync_standby", test::PgHostPort(standby_))}}}
                 .dump());
    auto s = Store::Open(primary_ + (primary_.find('?') == std::string::npos ? "?" : "&") +
                         "connect_timeout=2&patroni=" + any_.host_port());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    ASSERT_TRUE(store_->CreateCollection("c", "{}").ok());
    docs_ = Docs(2600);
    ASSERT_TRUE(store_->Upsert("c", docs_, true).ok());
    for (const auto& d : docs_) expected_ += shard_.Holds(d.id);
    ASSERT_GT(expected_, 1000u);  // two pages at least
  }
  void TearDown() override {
    store_.reset();
    Stop();
  }
  void Stop() { std::system(("bash " + script_ + " stop " + dir_ + " >/dev/null 2>&1").c_str()); }
  void ExpectEveryDocumentOnce(const std::map<std::string, int>& seen) {
    EXPECT_EQ(seen.size(), expected_);
    for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << id;
  }

  const std::string script_ = MOEEDB_PG_CLUSTER_SH;
  const ShardFilter shard_{1, 2, ShardLayout::kRange};
  std::string dir_, primary_, standby_;
  test::FakePatroni any_, leader_;
  std::unique_ptr<Store> store_;
  std::vector<StoredDocument> docs_;
  size_t expected_ = 0;
};

TEST_F(PostgresStandbyScan, PagesComeFromTheStandbyOnceItHasReplayedWhatThePrimaryHad) {
  int64_t on_standby = -1, holding = -1, on_primary = -1;
  const auto seen = ScanIds(store_.get(), shard_, [&](size_t n) {
    if (n != 0) return;
    on_standby = PageSessions(standby_);
    holding = PageSessions(standby_, /*holding=*/true);
    on_primary = PageSessions(primary_);
  });
  EXPECT_EQ(on_standby, 1);
  EXPECT_EQ(holding, 0);
  EXPECT_EQ(on_primary, 0);
  ExpectEveryDocumentOnce(seen);
}

// Replay paused on the standby, then a commit on the primary that does not
// wait for it: the standby is behind the scan's start, so after waiting
// kStandbyScanWait the pages come from the primary.
TEST_F(PostgresStandbyScan, AStandbyBehindTheScansStartIsNotReadFrom) {
  {
    pqxx::connection s(standby_);
    pqxx::nontransaction(s).exec("SELECT pg_wal_replay_pause()");
    pqxx::connection p(primary_);
    pqxx::work t(p);
    t.exec("SET LOCAL synchronous_commit = local");
    t.exec("CREATE TABLE moved_on (x int)");
    t.commit();
  }
  int64_t on_standby = -1, on_primary = -1;
  const auto seen = ScanIds(store_.get(), shard_, [&](size_t n) {
    if (n != 0) return;
    on_standby = PageSessions(standby_);
    on_primary = PageSessions(primary_);
  });
  EXPECT_EQ(on_standby, 0);
  EXPECT_EQ(on_primary, 1);
  ExpectEveryDocumentOnce(seen);
  pqxx::connection s(standby_);
  pqxx::nontransaction(s).exec("SELECT pg_wal_replay_resume()");
}

// The standby's session is ended after the first page: the scan goes on from
// the same key on the primary and gives every document once.
TEST_F(PostgresStandbyScan, AStandbyLostMidScanLeavesTheRestToThePrimary) {
  int64_t ended = -1, on_primary_first = -1, on_primary_last = -1;
  const auto seen = ScanIds(store_.get(), shard_, [&](size_t n) {
    if (n == 0) {
      on_primary_first = PageSessions(primary_);
      ended = test::QueryCount(standby_, std::string("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                                     "WHERE application_name = '") +
                                             PostgresStore::kScanSessionName + "'");
    }
    if (n + 1 == expected_) on_primary_last = PageSessions(primary_);
  });
  EXPECT_EQ(ended, 1);
  EXPECT_EQ(on_primary_first, 0);
  EXPECT_EQ(on_primary_last, 1);
  ExpectEveryDocumentOnce(seen);
}

}  // namespace
}  // namespace moeedb
