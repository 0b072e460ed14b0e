// Collections created and dropped on one node reach another node over the
// same PostgreSQL database: a collection created on A opens on B at its first
// use; one A drops is closed on B at B's next catch-up (not an error there),
// and the name, created again on A, opens on B as the new collection.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <pqxx/pqxx>
#include <random>
#include <set>
#include <thread>

#include "database/database.h"
#include "storage/postgres_store.h"
#include "tests/database/held_shards_peers.h"
#include "tests/storage/pg_test_db.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

CollectionOptions Flat() {
  CollectionOptions o;
  o.dim_hs = 4;
  o.dim_rw = 2;
  o.index.hs.kind = o.index.rw.kind = IndexKind::kFlat;
  return o;
}

StoredDocument Doc(const std::string& id, float x) { return {id, "text " + id, "{}", {x, 1, 0, 0}, {1, x}}; }

// A document with random vectors and a word of its own in its text.
StoredDocument RandomDoc(const std::string& id, std::mt19937* rng) {
  std::normal_distribution<float> g(0, 1);
  StoredDocument d{id, "about " + id + "word", "{}", std::vector<float>(4), std::vector<float>(2)};
  for (auto& x : d.hs) x = g(*rng);
  for (auto& x : d.rw) x = g(*rng);
  return d;
}

// Every document of the store, found on `c` (one node's replicas) by its own
// vectors as the top hit with its own text and a score of 1 + alpha, and by
// its own word; no other document in c's indexes.
void ExpectAnswersAsTheStore(VectorCollection* c, const std::string& node) {
  std::vector<StoredDocument> stored;
  for (std::string after;;) {
    auto page = c->List(after, 100);
    ASSERT_TRUE(page.ok());
    for (auto& d : page->documents) stored.push_back(std::move(d));
    if (page->next_after.empty()) break;
    after = page->next_after;
  }
  EXPECT_EQ(c->IndexedIds().size(), stored.size()) << node;
  for (const auto& listed : stored) {
    auto d = c->Get(listed.id);
    ASSERT_TRUE(d.ok() && d->has_value());
    SearchSpec s;
    s.k = 1;
    s.exact = true;
    auto hits = c->Search((*d)->hs.data(), (*d)->rw.data(), s);
    ASSERT_TRUE(hits.ok()) << hits.status().ToString();
    ASSERT_EQ(hits->size(), 1u) << node;
    EXPECT_EQ((*hits)[0].id, (*d)->id) << node << ": another document's vector answers for " << (*d)->id;
    EXPECT_EQ((*hits)[0].text, (*d)->text) << node;
    EXPECT_NEAR((*hits)[0].score, 1.0 + c->default_alpha(), 1e-4) << node << " " << (*d)->id;
    SearchSpec lex;
    lex.k = 1;
    lex.mode = QueryMode::kLexical;
    lex.query = (*d)->id + "word";
    auto found = c->Search(nullptr, nullptr, lex);
    ASSERT_TRUE(found.ok()) << found.status().ToString();
    ASSERT_EQ(found->size(), 1u) << node << " " << lex.query;
    EXPECT_EQ((*found)[0].id, (*d)->id) << node;
  }
}

TEST(ClusterDatabase, ADropOnOneNodeClosesTheCollectionOnAnotherAndItsNameOpensAnew) {
  test::TempDir dir;
  test::PgDatabase pg;
  DatabaseOptions oa, ob;
  oa.index_dir = dir / "a";
  ob.index_dir = dir / "b";
  auto a = Database::Open(pg.uri(), oa);
  auto b = Database::Open(pg.uri(), ob);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
  auto ca = (*a)->CreateCollection("c", Flat());
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  ASSERT_TRUE((*ca)->Upsert({Doc("x1", 0.5f)}).ok());
  // Created on A: B opens it at its first use, from the store.
  auto cb = (*b)->OpenCollection("c");
  ASSERT_TRUE(cb.ok()) << cb.status().ToString();
  EXPECT_EQ((*cb)->size(), 1u);
  const uint32_t old_id = (*cb)->store_id();
  // Dropped on A: B's catch-up closes its copy instead of failing on it.
  ASSERT_TRUE((*a)->DropCollection("c").ok());
  auto n = (*b)->CatchUp();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ((*b)->OpenCollection("c").status().code(), Status::Code::kNotFound);
  // Created again on A with other documents: B opens the new one.
  auto again = (*a)->CreateCollection("c", Flat());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_TRUE((*again)->Upsert({Doc("y1", 0.25f), Doc("y2", 0.75f)}).ok());
  auto cb2 = (*b)->OpenCollection("c");
  ASSERT_TRUE(cb2.ok()) << cb2.status().ToString();
  EXPECT_NE((*cb2)->store_id(), old_id);
  EXPECT_EQ((*cb2)->size(), 2u);
  EXPECT_FALSE((*(*cb2)->Get("x1")).has_value());
  EXPECT_TRUE((*(*cb2)->Get("y2")).has_value());
  // A collection dropped and created again between two catch-ups: same name,
  // a new store id, so B's copy is replaced, not followed into the wrong log.
  ASSERT_TRUE((*a)->DropCollection("c").ok());
  auto third = (*a)->CreateCollection("c", Flat());
  ASSERT_TRUE(third.ok());
  ASSERT_TRUE((*third)->Upsert({Doc("z1", 0.1f)}).ok());
  ASSERT_TRUE((*b)->CatchUp().ok());
  auto cb3 = (*b)->OpenCollection("c");
  ASSERT_TRUE(cb3.ok());
  EXPECT_EQ((*cb3)->size(), 1u);
  EXPECT_TRUE((*(*cb3)->Get("z1")).has_value());
  EXPECT_NE((*cb3)->index_dir(), (*cb2)->index_dir());
}

// The change log goes back under running nodes (a crash that lost unsynced
// commits, a point-in-time restore): entries 4 and 5, which both nodes had
// applied, are gone and the next writes reuse their numbers and internal ids
// for other documents. Each node notices at its cursor (the entry it applied
// last is not the one the log holds now) and rebuilds what it holds: every
// stored document is then found on both nodes by its own vectors and words.
TEST(ClusterDatabase, ARewoundChangeLogIsNoticedAndEveryNodeRebuilds) {
  test::TempDir dir;
  test::PgDatabase pg;
  DatabaseOptions oa, ob;
  oa.index_dir = dir / "a";
  ob.index_dir = dir / "b";
  auto a = Database::Open(pg.uri(), oa);
  auto b = Database::Open(pg.uri(), ob);
  ASSERT_TRUE(a.ok() && b.ok());
  CollectionOptions o = Flat();
  o.lexical = LexicalSpec{true};
  auto ca = (*a)->CreateCollection("c", o);
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  std::mt19937 rng(7);
  for (const char* id : {"d1", "d2", "d3"}) ASSERT_TRUE((*ca)->Upsert({RandomDoc(id, &rng)}).ok());
  auto cb = (*b)->OpenCollection("c");
  ASSERT_TRUE(cb.ok());
  // The point the log will go back to.
  pqxx::connection sql(pg.uri());
  pqxx::nontransaction(sql).exec(
      "CREATE TABLE saved_docs AS SELECT * FROM moeedb_documents; CREATE TABLE saved_ops AS SELECT * FROM moeedb_ops;"
      "CREATE TABLE saved_colls AS SELECT * FROM moeedb_collections;");
  for (const char* id : {"d4", "d5"}) ASSERT_TRUE((*ca)->Upsert({RandomDoc(id, &rng)}, /*sync=*/false).ok());
  ASSERT_TRUE((*b)->CatchUp().ok());
  EXPECT_EQ((*cb)->applied_seq(), 5u);
  // A third node snapshots its indexes at entry 5 and is down meanwhile.
  DatabaseOptions oc;
  oc.index_dir = dir / "c";
  {
    auto c = Database::Open(pg.uri(), oc);
    ASSERT_TRUE(c.ok() && (*c)->OpenCollection("c").ok());
    ASSERT_TRUE((*c)->SaveIndexes().ok());
  }
  {
    pqxx::work t(sql);
    t.exec("DELETE FROM moeedb_documents; INSERT INTO moeedb_documents SELECT * FROM saved_docs;"
           "DELETE FROM moeedb_ops; INSERT INTO moeedb_ops SELECT * FROM saved_ops;"
           "UPDATE moeedb_collections c SET last_op = s.last_op, next_internal = s.next_internal, doc_count = s.doc_count "
           "FROM saved_colls s WHERE c.id = s.id;");
    t.commit();
  }
  // New documents under the lost numbers, written through B (its own write's
  // number is one it applied: it reads the log and notices); then A, which
  // has not read the log since, writes the entry right after the one it
  // applied last: it must not take its own write as following its indexes.
  for (const char* id : {"e4", "e5"}) ASSERT_TRUE((*cb)->Upsert({RandomDoc(id, &rng)}).ok());
  ASSERT_TRUE((*ca)->Upsert({RandomDoc("e6", &rng)}).ok());
  ASSERT_TRUE((*a)->CatchUp().ok());
  ASSERT_TRUE((*b)->CatchUp().ok());
  EXPECT_FALSE((*(*ca)->Get("d4")).has_value());
  ExpectAnswersAsTheStore(ca->get(), "writer");
  ExpectAnswersAsTheStore(cb->get(), "follower");
  EXPECT_GE((*cb)->log_rewinds(), 1u);
  EXPECT_GE((*ca)->log_rewinds(), 1u);
  // The node that was down notices at its snapshot's cursor when it opens.
  auto c = Database::Open(pg.uri(), oc);
  ASSERT_TRUE(c.ok());
  auto cc = (*c)->OpenCollection("c");
  ASSERT_TRUE(cc.ok());
  ExpectAnswersAsTheStore(cc->get(), "node back from down");
}

// A node builds a 2-shard collection's replicas from PostgreSQL while, between
// the pages of each shard's scan, another node replaces documents (read
// already or not yet), deletes some and adds new ones: once caught up, its
// replicas answer as the store, dense and lexical (each page reads its own
// moment; the entries after the build's cursor are applied again).
TEST(ClusterDatabase, AShardBuiltWhileWritesLandBetweenItsPagesConvergesToTheStore) {
  test::TempDir dir;
  test::PgDatabase pg;
  DatabaseOptions oa, ob;
  oa.index_dir = dir / "a";
  ob.index_dir = dir / "b";
  auto a = Database::Open(pg.uri(), oa);
  auto b = Database::Open(pg.uri(), ob);
  ASSERT_TRUE(a.ok() && b.ok());
  CollectionOptions o = Flat();
  o.shards = 2;
  auto ca = (*a)->CreateCollection("c", o);
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  std::mt19937 rng(5);
  constexpr int kDocs = 4000;
  std::vector<StoredDocument> docs;
  for (int i = 0; i < kDocs; ++i) docs.push_back(RandomDoc("d" + std::to_string(i), &rng));
  ASSERT_TRUE((*ca)->Upsert(docs).ok());
  auto* store_b = dynamic_cast<PostgresStore*>((*b)->store());
  ASSERT_NE(store_b, nullptr);
  int pages = 0, next = kDocs;
  size_t written = 0;
  store_b->SetScanPageHookForTest([&] {
    ++pages;
    std::set<int> replaced, gone;
    while (replaced.size() < 40) replaced.insert(static_cast<int>(rng() % kDocs));
    while (gone.size() < 20) gone.insert(static_cast<int>(rng() % kDocs));
    std::vector<StoredDocument> w;
    for (int i : replaced) w.push_back(RandomDoc("d" + std::to_string(i), &rng));  // a deleted one comes back
    for (int i = 0; i < 10; ++i) w.push_back(RandomDoc("d" + std::to_string(next++), &rng));
    std::vector<std::string> ids;
    for (int i : gone) ids.push_back("d" + std::to_string(i));
    auto up = (*ca)->Upsert(w);
    auto del = (*ca)->Delete(ids);
    EXPECT_TRUE(up.ok() && del.ok());
    written += up.ok() && del.ok();
  });
  auto cb = (*b)->OpenCollection("c");
  store_b->SetScanPageHookForTest(nullptr);
  ASSERT_TRUE(cb.ok()) << cb.status().ToString();
  EXPECT_GE(pages, 4);  // two shards of about 2,000 rows: two pages each, at least
  EXPECT_EQ(written, static_cast<size_t>(pages));
  ASSERT_TRUE((*cb)->CatchUp().ok());
  ExpectAnswersAsTheStore(cb->get(), "b");
}

// A search with consistency "head" includes every write acknowledged before
// it, on a node that has not followed the log since (no follower runs here):
// its replicas catch up to the log's head first. "any" answers from the
// replica as it is.
TEST(ClusterDatabase, AHeadConsistentReadSeesEveryAcknowledgedWrite) {
  test::TempDir dir;
  test::PgDatabase pg;
  DatabaseOptions oa, ob;
  oa.index_dir = dir / "a";
  ob.index_dir = dir / "b";
  ob.max_staleness_ms = 0;  // no bound: "any" reads the replica exactly as it is
  auto a = Database::Open(pg.uri(), oa);
  auto b = Database::Open(pg.uri(), ob);
  ASSERT_TRUE(a.ok() && b.ok());
  auto ca = (*a)->CreateCollection("c", Flat());
  ASSERT_TRUE(ca.ok());
  std::mt19937 rng(3);
  ASSERT_TRUE((*ca)->Upsert({RandomDoc("x1", &rng)}).ok());
  auto cb = (*b)->OpenCollection("c");
  ASSERT_TRUE(cb.ok());
  const StoredDocument late = RandomDoc("x2", &rng);
  ASSERT_TRUE((*ca)->Upsert({late}).ok());  // acknowledged on A; B has not read the log since
  SearchSpec s;
  s.k = 1;
  s.exact = true;
  auto stale = (*cb)->Search(late.hs.data(), late.rw.data(), s);
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ((*stale)[0].id, "x1");  // "any": the replica as it is
  s.consistency = ReadConsistency::kHead;
  auto head = (*cb)->Search(late.hs.data(), late.rw.data(), s);
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ((*head)[0].id, "x2");
  EXPECT_EQ((*cb)->applied_seq(), 2u);
}

// Bounded staleness: a replica that last read the change log longer ago
// than the bound reads it before it answers, whatever the consistency asked;
// its age is what the node reports (and claims "stale" by in a cluster).
TEST(ClusterDatabase, AReplicaPastTheStalenessBoundReadsTheLogBeforeItAnswers) {
  test::TempDir dir;
  test::PgDatabase pg;
  DatabaseOptions oa, ob;
  oa.index_dir = dir / "a";
  ob.index_dir = dir / "b";
  ob.max_staleness_ms = 50;
  auto a = Database::Open(pg.uri(), oa);
  auto b = Database::Open(pg.uri(), ob);
  ASSERT_TRUE(a.ok() && b.ok());
  auto ca = (*a)->CreateCollection("c", Flat());
  ASSERT_TRUE(ca.ok());
  std::mt19937 rng(5);
  ASSERT_TRUE((*ca)->Upsert({RandomDoc("y1", &rng)}).ok());
  auto cb = (*b)->OpenCollection("c");
  ASSERT_TRUE(cb.ok());
  const StoredDocument late = RandomDoc("y2", &rng);
  ASSERT_TRUE((*ca)->Upsert({late}).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  EXPECT_GE((*cb)->ReplicaStates()[0].log_read_age_ms, 100u);
  SearchSpec s;
  s.k = 1;
  s.exact = true;
  auto hits = (*cb)->Search(late.hs.data(), late.rw.data(), s);
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  EXPECT_EQ((*hits)[0].id, "y2");  // read the log first: past the bound
  EXPECT_LT((*cb)->ReplicaStates()[0].log_read_age_ms, 100u);
}

// The change log's retention window (Database::TrimLogs, what `moeedb serve
// --log-retention-entries` runs): a node whose snapshot is within the window
// opens from it and replays the entries since; one whose snapshot is older
// finds its cursor trimmed away and rebuilds from the store (not counted as
// a log that went back); both then answer as the store.
TEST(ClusterDatabase, ANodeWithinTheLogsRetentionCatchesUpAndAnOlderOneRebuilds) {
  test::TempDir dir;
  test::PgDatabase pg;
  DatabaseOptions oa, ob;
  oa.index_dir = dir / "a";
  ob.index_dir = dir / "b";
  auto a = Database::Open(pg.uri(), oa);
  ASSERT_TRUE(a.ok());
  CollectionOptions o = Flat();
  o.lexical = LexicalSpec{true};
  auto ca = (*a)->CreateCollection("c", o);
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  std::mt19937 rng(11);
  const auto write = [&](int from, int n) {
    for (int i = from; i < from + n; ++i) ASSERT_TRUE((*ca)->Upsert({RandomDoc("d" + std::to_string(i), &rng)}).ok());
  };
  write(0, 5);  // entries 1-5
  {             // B follows to entry 5 and stops cleanly: its snapshot covers 5
    auto b = Database::Open(pg.uri(), ob);
    ASSERT_TRUE(b.ok());
    auto cb = (*b)->OpenCollection("c");
    ASSERT_TRUE(cb.ok()) << cb.status().ToString();
    EXPECT_EQ((*cb)->applied_seq(), 5u);
    ASSERT_TRUE((*b)->SaveIndexes().ok());
  }
  write(5, 5);  // 6-10
  ASSERT_TRUE((*a)->TrimLogs(8).ok());  // keeps 3-10: B's entry 5 is within
  {
    auto b = Database::Open(pg.uri(), ob);
    ASSERT_TRUE(b.ok());
    auto cb = (*b)->OpenCollection("c");
    ASSERT_TRUE(cb.ok()) << cb.status().ToString();
    EXPECT_TRUE((*cb)->opened_from_snapshot());
    EXPECT_EQ((*cb)->replayed_ops(), 5u);
    EXPECT_EQ((*cb)->log_trims(), 0u);
    EXPECT_EQ((*cb)->applied_seq(), 10u);
    ExpectAnswersAsTheStore(cb->get(), "b within the window");
    ASSERT_TRUE((*b)->SaveIndexes().ok());  // its snapshot now covers 10
  }
  write(10, 10);  // 11-20
  ASSERT_TRUE((*a)->TrimLogs(5).ok());  // keeps 16-20: B's entry 10 is gone
  std::vector<uint64_t> kept;
  ASSERT_TRUE((*a)->store()->ReadOps("c", 0, [&](const OpRecord& op) { kept.push_back(op.seq); }).ok());
  EXPECT_EQ(kept, (std::vector<uint64_t>{16, 17, 18, 19, 20}));
  {
    auto b = Database::Open(pg.uri(), ob);
    ASSERT_TRUE(b.ok());
    auto cb = (*b)->OpenCollection("c");
    ASSERT_TRUE(cb.ok()) << cb.status().ToString();
    EXPECT_EQ((*cb)->log_trims(), 1u);
    EXPECT_EQ((*cb)->log_rewinds(), 0u);
    EXPECT_EQ((*cb)->applied_seq(), 20u);
    EXPECT_EQ((*cb)->size(), 20u);
    ExpectAnswersAsTheStore(cb->get(), "b past the window");
  }
  // A's replica is at the head: the trim leaves it be.
  ASSERT_TRUE((*a)->CatchUp().ok());
  EXPECT_EQ((*ca)->log_trims(), 0u);
  ExpectAnswersAsTheStore(ca->get(), "a");
}

// Another node's live replica, as the cluster's claims would say: at `low`.
class LowestAppliedPeers : public ShardPeers {
 public:
  std::optional<PlacedShards> HeldShards(const CollectionLayout&) override { return std::nullopt; }
  std::vector<std::pair<uint32_t, LexicalStats>> Stats(const ShardQuery&, const std::vector<uint32_t>&) override {
    return {};
  }
  std::vector<ShardAnswer> Search(const ShardQuery&, const std::vector<uint32_t>&) override { return {}; }
  std::optional<uint64_t> LowestApplied(const CollectionLayout&) override { return low; }
  std::optional<uint64_t> low;
};

TEST(ClusterDatabase, TheLogIsNotTrimmedPastTheEntryALiveReplicaAppliedLast) {
  test::TempDir dir;
  test::PgDatabase pg;
  LowestAppliedPeers peers;
  DatabaseOptions oa;
  oa.index_dir = dir / "a";
  oa.peers = &peers;
  auto a = Database::Open(pg.uri(), oa);
  ASSERT_TRUE(a.ok());
  auto ca = (*a)->CreateCollection("c", Flat());
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  std::mt19937 rng(5);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE((*ca)->Upsert({RandomDoc("d" + std::to_string(i), &rng)}).ok());
  const auto kept = [&] {
    std::vector<uint64_t> out;
    EXPECT_TRUE((*a)->store()->ReadOps("c", 0, [&](const OpRecord& op) { out.push_back(op.seq); }).ok());
    return out;
  };
  // A replica elsewhere applied entry 7 last: it and everything after stay.
  peers.low = 7;
  ASSERT_TRUE((*a)->TrimLogs(5).ok());
  EXPECT_EQ(kept().front(), 7u);
  EXPECT_EQ(kept().size(), 14u);
  // It caught up (or is gone): the window alone trims.
  peers.low = std::nullopt;
  ASSERT_TRUE((*a)->TrimLogs(5).ok());
  EXPECT_EQ(kept(), (std::vector<uint64_t>{16, 17, 18, 19, 20}));
}

// Holds the replicas it is told to; a replica being opened stops where it
// reports the entry it reads the log from, until released.
class OpeningPeers : public test::HeldShardsPeers {
 public:
  void HoldLogFrom(const CollectionLayout&, ShardRef shard, uint64_t seq) override {
    std::unique_lock lock(mu);
    told.emplace_back(shard, seq);
    if (!hold) return;
    cv.notify_all();
    cv.wait(lock, [&] { return !hold; });
  }
  std::condition_variable cv;
  bool hold = false;
  std::vector<std::pair<ShardRef, uint64_t>> told;
};

TEST(ClusterDatabase, AReplicaBeingOpenedKeepsTheLogFromTheEntryItsBuildBeganAt) {
  test::TempDir dir;
  test::PgDatabase pg;
  DatabaseOptions oa;
  oa.index_dir = dir / "a";
  auto a = Database::Open(pg.uri(), oa);
  ASSERT_TRUE(a.ok());
  CollectionOptions two = Flat();
  two.shards = 2;
  auto ca = (*a)->CreateCollection("c", two);
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  std::mt19937 rng(11);
  const auto write = [&](int from, int n) {
    for (int i = from; i < from + n; ++i) ASSERT_TRUE((*ca)->Upsert({RandomDoc("d" + std::to_string(i), &rng)}).ok());
  };
  write(0, 20);  // entries 1-20
  OpeningPeers peers;
  peers.held = {0};
  DatabaseOptions ob;
  ob.index_dir = dir / "b";
  ob.peers = &peers;
  auto b = Database::Open(pg.uri(), ob);
  ASSERT_TRUE(b.ok());
  auto cb = (*b)->OpenCollection("c");
  ASSERT_TRUE(cb.ok()) << cb.status().ToString();
  ASSERT_EQ(peers.told.size(), 1u);
  EXPECT_EQ(peers.told[0], std::make_pair(ShardRef{2, 0}, uint64_t{20}));
  // B is given shard 1 too: its build reads the store as of entry 20 and
  // stops there, told.
  {
    std::lock_guard lock(peers.mu);
    peers.held = {0, 1};
    peers.hold = true;
  }
  Status synced;
  std::thread opening([&] { synced = (*cb)->SyncShards(); });
  const auto release = [&] {
    {
      std::lock_guard lock(peers.mu);
      peers.hold = false;
    }
    peers.cv.notify_all();
    if (opening.joinable()) opening.join();
  };
  struct Release {
    std::function<void()> f;
    ~Release() { f(); }
  } released_at_exit{release};  // an assertion that ends the test early lets the build go
  {
    std::unique_lock lock(peers.mu);
    ASSERT_TRUE(peers.cv.wait_for(lock, std::chrono::seconds(60), [&] { return peers.told.size() == 2; }));
    EXPECT_EQ(peers.told[1], std::make_pair(ShardRef{2, 1}, uint64_t{20}));
  }
  const auto building = [&] {
    for (const auto& r : (*cb)->ReplicaStates())
      if (r.shard == 1 && r.shards == 2) return r.building && r.applied_seq == 20;
    return false;
  };
  EXPECT_TRUE(building()) << "the replica being opened is listed (its claim), at the entry it reads from";
  // Meanwhile A writes on, shard 0 follows to the head, and B's retention
  // (5 entries) runs: it keeps entry 20 for the replica being built.
  write(20, 10);  // 21-30
  ASSERT_TRUE((*cb)->CatchUp().ok());
  EXPECT_EQ((*cb)->LogFloor(), std::optional<uint64_t>(20));
  ASSERT_TRUE((*b)->TrimLogs(5).ok());
  std::vector<uint64_t> kept;
  ASSERT_TRUE((*a)->store()->ReadOps("c", 0, [&](const OpRecord& op) { kept.push_back(op.seq); }).ok());
  ASSERT_FALSE(kept.empty());
  EXPECT_EQ(kept.front(), 20u);
  release();
  ASSERT_TRUE(synced.ok()) << synced.ToString();
  // Open, it catches up from entry 20 (no rebuild), and the window alone trims.
  EXPECT_EQ((*cb)->HeldShards(), (std::vector<uint32_t>{0, 1}));
  ASSERT_TRUE((*cb)->CatchUp().ok());
  EXPECT_EQ((*cb)->log_trims(), 0u);
  EXPECT_EQ((*cb)->applied_seq(), 30u);
  EXPECT_EQ((*cb)->size(), 30u);
  ExpectAnswersAsTheStore(cb->get(), "b");
  for (const auto& r : (*cb)->ReplicaStates()) EXPECT_FALSE(r.building) << r.shard;
  EXPECT_EQ((*cb)->LogFloor(), std::optional<uint64_t>(30));
  ASSERT_TRUE((*b)->TrimLogs(5).ok());
  kept.clear();
  ASSERT_TRUE((*a)->store()->ReadOps("c", 0, [&](const OpRecord& op) { kept.push_back(op.seq); }).ok());
  EXPECT_EQ(kept, (std::vector<uint64_t>{26, 27, 28, 29, 30}));
  // Saved; A writes on; shard 1's snapshot is damaged. Opened again, each
  // replica reports its snapshot's entry (30) before loading it, once:
  // shard 0 loads it and replays 31-35, shard 1 fails to and is built at 35.
  ASSERT_TRUE((*b)->SaveIndexes().ok());
  const std::string shard1 = ShardReplica::Dir((*cb)->index_dir(), 1, 2);
  cb->reset();
  b->reset();
  write(30, 5);  // 31-35
  {
    std::ofstream damaged(shard1 + "/snap-30/meta.json", std::ios::trunc);
    damaged << "{not json";
  }
  OpeningPeers again;
  again.held = {0, 1};
  ob.peers = &again;
  auto b2 = Database::Open(pg.uri(), ob);
  ASSERT_TRUE(b2.ok());
  auto cb2 = (*b2)->OpenCollection("c");
  ASSERT_TRUE(cb2.ok()) << cb2.status().ToString();
  EXPECT_EQ((*cb2)->applied_seq(), 35u);
  ExpectAnswersAsTheStore(cb2->get(), "b reopened");
  std::sort(again.told.begin(), again.told.end());
  EXPECT_EQ(again.told, (std::vector<std::pair<ShardRef, uint64_t>>{
                            {ShardRef{2, 0}, 30}, {ShardRef{2, 1}, 30}, {ShardRef{2, 1}, 35}}));
}

}  // namespace
}  // namespace moeedb
