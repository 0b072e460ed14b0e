// The store contract (storage/store.h) kept by both engines, the same test
// run on a RocksStore and on a PostgresStore: collections, atomic batches,
// replacement and deletion in a gapless change log, paging in byte order of
// the ids, bit-exact vectors. Then what only PostgreSQL has: its schema
// version, an unreachable server, and the change log's ordering under a
// writer that holds its number (locks, not timing).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <random>
#include <set>
#include <thread>

#include "storage/postgres_rows.h"
#include "storage/postgres_store.h"
#include "storage/store.h"
#include "tests/storage/pg_test_db.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

StoredDocument Doc(const std::string& id, float x) {
  return {id, "text of " + id, json{{"id", id}, {"x", x}}.dump(), {x, x + 0.25f, -x}, {x * 3.5f, 1e-30f}};
}

// A store of either engine, in a place of its own.
class StoreContract : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto s = Store::Open(GetParam() == "postgres" ? pg_.uri() : dir_ / "db");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    ASSERT_TRUE(store_->CreateCollection("c", R"({"dim_hs": 3, "dim_rw": 2})").ok());
  }
  std::vector<OpRecord> Ops(uint64_t after = 0) {
    std::vector<OpRecord> ops;
    EXPECT_TRUE(store_->ReadOps("c", after, [&](const OpRecord& op) { ops.push_back(op); }).ok());
    return ops;
  }
  test::TempDir dir_;
  test::PgDatabase pg_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreContract, CollectionsAreCreatedOnceListedAndDropped) {
  EXPECT_EQ(store_->CreateCollection("c", "{}").status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(store_->CreateCollection("a/b", "{}").status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(store_->CreateCollection("d", "[1]").status().code(), Status::Code::kInvalidArgument);
  ASSERT_TRUE(store_->CreateCollection("b", R"({"k": 1})").ok());
  auto all = store_->ListCollections();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  std::vector<std::string> names = {(*all)[0].name, (*all)[1].name};
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"b", "c"}));
  const std::string first = store_->GetCollection("b")->spec_json;
  ASSERT_TRUE(store_->UpdateSpec("b", first, R"({"k": 2})").ok());
  EXPECT_EQ(json::parse(store_->GetCollection("b")->spec_json)["k"], 2);
  // A second writer that read the first spec changes nothing.
  EXPECT_EQ(store_->UpdateSpec("b", first, R"({"k": 3})").code(), Status::Code::kConflict);
  EXPECT_EQ(json::parse(store_->GetCollection("b")->spec_json)["k"], 2);
  EXPECT_EQ(store_->UpdateSpec("nope", "{}", "{}").code(), Status::Code::kNotFound);
  const uint32_t old_id = store_->GetCollection("b")->id;
  ASSERT_TRUE(store_->DropCollection("b").ok());
  EXPECT_EQ(store_->GetCollection("b").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(store_->DropCollection("b").code(), Status::Code::kNotFound);
  auto again = store_->CreateCollection("b", "{}");
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->id, old_id);  // ids are never reused: old index folders cannot be mistaken
}

TEST_P(StoreContract, AliasesChangeAllAtOnceAndGoWithTheirCollection) {
  ASSERT_TRUE(store_->CreateCollection("a", "{}").ok());
  ASSERT_TRUE(store_->CreateCollection("b", "{}").ok());
  using Aliases = std::map<std::string, std::string>;
  ASSERT_TRUE(store_->ListAliases().ok());
  EXPECT_TRUE(store_->ListAliases()->empty());
  ASSERT_TRUE(store_->UpdateAliases({}, {{"live", "a"}, {"old", "b"}}).ok());
  EXPECT_EQ(*store_->ListAliases(), (Aliases{{"live", "a"}, {"old", "b"}}));
  // A writer that read an older table changes nothing.
  EXPECT_EQ(store_->UpdateAliases({}, {{"x", "a"}}).code(), Status::Code::kConflict);
  // The switch: "live" moves to b in the same write that removes "old".
  ASSERT_TRUE(store_->UpdateAliases({{"live", "a"}, {"old", "b"}}, {{"live", "b"}, {"spare", "a"}}).ok());
  EXPECT_EQ(*store_->ListAliases(), (Aliases{{"live", "b"}, {"spare", "a"}}));
  ASSERT_TRUE(store_->DropCollection("b").ok());
  EXPECT_EQ(*store_->ListAliases(), (Aliases{{"spare", "a"}}));
  // The store itself refuses what would break the names (a database's
  // own checks run before it, outside the write): an alias of a dropped
  // collection, an alias a collection has the name of, a collection an
  // alias has the name of.
  const Aliases now = *store_->ListAliases();
  EXPECT_EQ(store_->UpdateAliases(now, {{"spare", "a"}, {"x", "b"}}).code(), Status::Code::kNotFound);
  EXPECT_EQ(store_->UpdateAliases(now, {{"c", "a"}}).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(store_->CreateCollection("spare", "{}").status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(*store_->ListAliases(), now);
}

TEST_P(StoreContract, ABatchIsAllOrNothing) {
  ASSERT_TRUE(store_->Upsert("c", {Doc("x", 1)}, true).ok());
  const CollectionRecord before = *store_->GetCollection("c");
  StoredDocument bad_meta = Doc("z", 1);
  bad_meta.metadata_json = "{not json";
  for (auto batch : {std::vector<StoredDocument>{Doc("y", 1), Doc("", 1)},
                     std::vector<StoredDocument>{Doc("y", 1), Doc("y", 2)},
                     std::vector<StoredDocument>{Doc("y", 1), bad_meta}}) {
    EXPECT_EQ(store_->Upsert("c", batch, true).status().code(), Status::Code::kInvalidArgument);
    const CollectionRecord after = *store_->GetCollection("c");
    EXPECT_EQ(after.count, before.count);
    EXPECT_EQ(after.last_op, before.last_op);
    EXPECT_EQ(after.next_internal, before.next_internal);
    EXPECT_FALSE((*store_->Get("c", "y")).has_value());
  }
  EXPECT_EQ(store_->Upsert("nope", {Doc("y", 1)}, true).status().code(), Status::Code::kNotFound);
  EXPECT_EQ(store_->Delete("nope", {"y"}, true).status().code(), Status::Code::kNotFound);
}

TEST_P(StoreContract, ReplacementsAndDeletesGoToAGaplessChangeLogInOrder) {
  auto w1 = store_->Upsert("c", {Doc("a", 1), Doc("b", 2)}, true);
  auto w2 = store_->Upsert("c", {Doc("a", 3)}, false);  // a replacement: new internal id, old one removed
  auto w3 = store_->Delete("c", {"b", "missing", "b"}, true);
  auto w4 = store_->Delete("c", {"missing"}, true);  // no change: no entry
  ASSERT_TRUE(w1.ok() && w2.ok() && w3.ok() && w4.ok());
  EXPECT_EQ(w2->removed, std::vector<uint64_t>{w1->added[0]});
  EXPECT_EQ(w3->not_found, 1u);
  EXPECT_EQ(w4->seq, 0u);
  EXPECT_EQ(w4->not_found, 1u);
  const std::vector<OpRecord> ops = Ops();
  ASSERT_EQ(ops.size(), 3u);
  for (size_t i = 0; i < ops.size(); ++i) EXPECT_EQ(ops[i].seq, i + 1);  // gapless from 1
  EXPECT_EQ(ops[0].added, w1->added);
  EXPECT_EQ(ops[1].added, w2->added);
  EXPECT_EQ(ops[1].removed, w2->removed);
  EXPECT_TRUE(ops[2].added.empty());
  EXPECT_EQ(ops[2].removed, std::vector<uint64_t>{w1->added[1]});
  EXPECT_EQ(Ops(2).size(), 1u);
  const CollectionRecord rec = *store_->GetCollection("c");
  EXPECT_EQ(rec.count, 1u);
  EXPECT_EQ(rec.last_op, 3u);
  auto a = store_->Get("c", "a");
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_EQ((**a).hs, Doc("a", 3).hs);
  EXPECT_EQ((**a).rw, Doc("a", 3).rw);  // bit for bit, the denormal included
  EXPECT_EQ(json::parse((**a).metadata_json), json::parse(Doc("a", 3).metadata_json));
  auto many = store_->GetManyByInternal("c", {w2->added[0], w1->added[0], 999}, false);
  ASSERT_TRUE(many.ok());
  ASSERT_EQ(many->size(), 3u);
  EXPECT_EQ((*many)[0]->id, "a");
  EXPECT_FALSE((*many)[1].has_value());  // replaced
  EXPECT_FALSE((*many)[2].has_value());
  EXPECT_TRUE((*many)[0]->hs.empty());  // without vectors
  EXPECT_EQ(store_->GetByInternal("c", 999, true).status().code(), Status::Code::kNotFound);
}

// A conditional upsert lands only where each id is still stored under the
// internal id the writer read (0: absent); another write in between makes it
// a Conflict with nothing written: no document, counter or log entry changes.
TEST_P(StoreContract, AConditionalUpsertLandsOnlyOnWhatItRead) {
  ASSERT_TRUE(store_->Upsert("c", {Doc("a", 1), Doc("b", 2)}, true).ok());
  auto a = store_->InternalId("c", "a");
  auto none = store_->InternalId("c", "zz");
  ASSERT_TRUE(a.ok() && *a && none.ok() && !*none);
  EXPECT_EQ(store_->GetByInternal("c", **a, true)->id, "a");
  // Someone else replaces "a" after it was read: the conditional write conflicts.
  ASSERT_TRUE(store_->Upsert("c", {Doc("a", 5)}, true).ok());
  const uint64_t last_op = store_->GetCollection("c")->last_op;
  auto b = store_->InternalId("c", "b");
  auto stale = store_->UpsertIfUnchanged("c", {Doc("b", 7), Doc("a", 8)}, {**b, **a}, true);
  EXPECT_EQ(stale.status().code(), Status::Code::kConflict) << stale.status().ToString();
  EXPECT_EQ(store_->GetCollection("c")->last_op, last_op);
  EXPECT_EQ((*store_->Get("c", "b"))->hs, Doc("b", 2).hs);  // b untouched: all or nothing
  EXPECT_FALSE(store_->GetByInternal("c", **a, true).ok());  // the version read is gone
  // Read again, written: the new versions, one log entry, a new doc counted once.
  auto fresh = store_->InternalId("c", "a");
  auto ok = store_->UpsertIfUnchanged("c", {Doc("b", 7), Doc("a", 8), Doc("n", 9)}, {**b, **fresh, 0}, true);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->seq, last_op + 1);
  EXPECT_EQ((*store_->Get("c", "a"))->hs, Doc("a", 8).hs);
  EXPECT_EQ(store_->GetCollection("c")->count, 3u);
  // "Absent" expected where the id exists: a conflict too.
  EXPECT_EQ(store_->UpsertIfUnchanged("c", {Doc("n", 1)}, {0}, true).status().code(), Status::Code::kConflict);
}

TEST_P(StoreContract, IdsWithQuotesCommasAndBracesAreReplacedExactly) {
  const std::vector<std::string> ids = {"a\"b", "c\\d", "e,f", "{g}", " h ", "NULL", "\xc3\xa9"};
  std::vector<StoredDocument> first, second;
  for (size_t i = 0; i < ids.size(); ++i) {
    first.push_back(Doc(ids[i], static_cast<float>(i)));
    second.push_back(Doc(ids[i], static_cast<float>(i) + 100));
  }
  auto w1 = store_->Upsert("c", first, true);
  auto w2 = store_->Upsert("c", second, true);
  ASSERT_TRUE(w1.ok() && w2.ok()) << w2.status().ToString();
  EXPECT_EQ(w2->removed, w1->added);  // every one replaced, in input order
  EXPECT_EQ(store_->GetCollection("c")->count, ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    auto d = store_->Get("c", ids[i]);
    ASSERT_TRUE(d.ok() && d->has_value()) << ids[i];
    EXPECT_EQ((**d).id, ids[i]);
    EXPECT_EQ((**d).hs[0], static_cast<float>(i) + 100);
  }
  auto del = store_->Delete("c", ids, true);
  ASSERT_TRUE(del.ok());
  EXPECT_EQ(del->removed, w2->added);
  EXPECT_EQ(store_->GetCollection("c")->count, 0u);
}

// Pages list integer ids by number first (Qdrant's order), then every
// other id by its bytes, whatever the server's collation: IdOrderKey's
// order, computed here from its definition.
TEST_P(StoreContract, PagesFollowTheIdOrderAndScansSeeEveryVector) {
  std::vector<StoredDocument> docs;
  for (int i = 0; i < 25; ++i) docs.push_back(Doc("d" + std::to_string(100 + i), static_cast<float>(i)));
  docs.push_back(Doc("Zeta", 50));  // 'Z' < 'd' in bytes
  docs.push_back(Doc("\xc3\xa9t\xc3\xa9", 51));
  const std::vector<std::string> numbers = {"0", "007", "7", "10", "99", "100", "18446744073709551615"};
  for (size_t i = 0; i < numbers.size(); ++i) docs.push_back(Doc(numbers[i], 60.0f + i));
  docs.push_back(Doc("123456789012345678901", 70));  // 21 digits: not an integer id, listed by bytes
  docs.push_back(Doc("00fa4c9c-8362-42b2-bd73-859369822f8f", 71));
  ASSERT_TRUE(store_->Upsert("c", docs, true).ok());
  std::vector<std::string> seen;
  std::string after;
  do {
    auto page = store_->ListDocuments("c", after, 10);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (const auto& d : page->documents) seen.push_back(d.id);
    after = page->next_after;
  } while (!after.empty());
  ASSERT_EQ(seen.size(), docs.size());
  // The integers by number (a form with leading zeros just before the plain one), then the rest by bytes.
  EXPECT_EQ(std::vector<std::string>(seen.begin(), seen.begin() + numbers.size()), numbers);
  auto by_bytes = [&](size_t from) {
    std::vector<std::string> rest(seen.begin() + from, seen.end());
    return std::is_sorted(rest.begin(), rest.end());  // std::string compares bytes
  };
  EXPECT_TRUE(by_bytes(numbers.size()));
  EXPECT_EQ(seen[numbers.size()], "00fa4c9c-8362-42b2-bd73-859369822f8f");
  std::map<uint64_t, std::vector<float>> hs;
  uint64_t last = 0;
  ASSERT_TRUE(store_->ScanVectors("c", [&](uint64_t id, const float* h, size_t dh, const float* r, size_t dr,
                                           const std::string& meta) {
    EXPECT_GT(id, last);  // internal-id order
    last = id;
    EXPECT_EQ(dh, 3u);
    EXPECT_EQ(dr, 2u);
    EXPECT_EQ(r[1], 1e-30f);
    EXPECT_TRUE(json::parse(meta).contains("x"));
    hs[id].assign(h, h + dh);
  }).ok());
  EXPECT_EQ(hs.size(), docs.size());
  size_t metas = 0;
  ASSERT_TRUE(store_->ScanMetadata("c", [&](uint64_t id, const std::string&) { metas += hs.count(id); }).ok());
  EXPECT_EQ(metas, docs.size());
}

// Both layouts over more documents than a scan's page (PostgreSQL reads
// 1,000 a page): each shard's scan (vectors and metadata alike) gives each of
// its documents once, with its own vectors, and the shards together give all.
TEST_P(StoreContract, EachShardsScanGivesItsDocumentsOnceInEitherLayout) {
  std::vector<StoredDocument> docs;
  for (int i = 0; i < 3600; ++i) docs.push_back(Doc("doc-" + std::to_string(i), static_cast<float>(i)));
  ASSERT_TRUE(store_->Upsert("c", docs, true).ok());
  for (ShardLayout layout : {ShardLayout::kModulo, ShardLayout::kRange}) {
    std::map<std::string, int> times;
    for (uint32_t k = 0; k < 3; ++k) {
      size_t metas = 0;
      ASSERT_TRUE(store_->ScanVectors("c", [&](uint64_t, const float* h, size_t dh, const float*, size_t,
                                               const std::string& meta) {
        const json m = json::parse(meta);
        const std::string id = m.at("id");
        EXPECT_EQ(ShardOfId(id, 3, layout), k) << id;
        EXPECT_EQ(dh, 3u);
        EXPECT_EQ(h[0], m.at("x").get<float>()) << id;
        ++times[id];
      }, ShardFilter{k, 3, layout}).ok());
      ASSERT_TRUE(store_->ScanMetadata("c", [&](uint64_t, const std::string& meta) {
        EXPECT_EQ(ShardOfId(json::parse(meta).at("id"), 3, layout), k);
        ++metas;
      }, ShardFilter{k, 3, layout}).ok());
      size_t expected = 0;
      for (const auto& d : docs) expected += ShardOfId(d.id, 3, layout) == k;
      EXPECT_EQ(metas, expected);
      EXPECT_GT(expected, 1000u);  // a fair share: more than one page each
    }
    EXPECT_EQ(times.size(), docs.size());
    for (const auto& [id, n] : times) EXPECT_EQ(n, 1) << id;
  }
}

// Writers of one collection at once (a node's concurrent requests: on
// PostgreSQL over its pool of write connections), their ids overlapping so
// that replacements and deletes race: the log stays gapless, each
// acknowledged write is the entry it answered (its number, its ids, its
// identity), each names the entry before it, and replaying the log gives
// exactly the documents the store holds.
TEST_P(StoreContract, ConcurrentWritersLeaveAGaplessLogThatReplaysToTheStore) {
  constexpr int kWriters = 6, kWrites = 15, kIds = 12;
  std::vector<std::vector<WriteResult>> results(kWriters);
  std::vector<std::string> errors(kWriters);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w)
    threads.emplace_back([&, w] {
      std::mt19937 rng(w);
      for (int i = 0; i < kWrites; ++i) {
        std::vector<std::string> ids;
        for (int n = 1 + static_cast<int>(rng() % 4); static_cast<int>(ids.size()) < n;) {
          const std::string id = "d" + std::to_string(rng() % kIds);
          if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
        }
        std::vector<StoredDocument> docs;
        for (const auto& id : ids) docs.push_back(Doc(id, static_cast<float>(w * 100 + i)));
        Result<WriteResult> r = i % 5 == 4 ? store_->Delete("c", ids, true) : store_->Upsert("c", docs, i % 2 == 0);
        if (!r.ok()) {
          errors[w] = r.status().ToString();
          return;
        }
        if (r->seq != 0) results[w].push_back(*r);
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  std::map<uint64_t, WriteResult> by_seq;
  for (const auto& rs : results)
    for (const auto& r : rs) EXPECT_TRUE(by_seq.emplace(r.seq, r).second) << "two writes answered entry " << r.seq;
  const std::vector<OpRecord> ops = Ops();
  ASSERT_EQ(ops.size(), by_seq.size());
  std::set<uint64_t> live;
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpRecord& op = ops[i];
    ASSERT_EQ(op.seq, i + 1);  // gapless from 1
    const WriteResult& w = by_seq.at(op.seq);
    EXPECT_EQ(op.added, w.added);
    EXPECT_EQ(op.removed, w.removed);
    EXPECT_EQ(op.entry_id, w.entry_id);
    if (i > 0) EXPECT_EQ(w.previous_entry_id, ops[i - 1].entry_id) << "entry " << op.seq;
    for (uint64_t id : op.removed) EXPECT_EQ(live.erase(id), 1u) << "entry " << op.seq << " removes " << id;
    for (uint64_t id : op.added) EXPECT_TRUE(live.insert(id).second) << "entry " << op.seq << " adds " << id;
  }
  std::set<uint64_t> stored;
  for (int i = 0; i < kIds; ++i) {
    auto id = store_->InternalId("c", "d" + std::to_string(i));
    ASSERT_TRUE(id.ok());
    if (*id) stored.insert(**id);
  }
  EXPECT_EQ(stored, live);
  const CollectionRecord rec = *store_->GetCollection("c");
  EXPECT_EQ(rec.count, live.size());
  EXPECT_EQ(rec.last_op, ops.size());
}

INSTANTIATE_TEST_SUITE_P(BothEngines, StoreContract, ::testing::Values("rocksdb", "postgres"),
                         [](const auto& info) { return info.param; });

TEST(PostgresStore, ADatabaseOfANewerSchemaIsRefused) {
  test::PgDatabase pg;
  ASSERT_TRUE(Store::Open(pg.uri()).ok());
  {
    pqxx::connection c(pg.uri());
    pqxx::work t(c);
    t.exec("UPDATE moeedb_meta SET value = '99' WHERE key = 'schema_version'");
    t.commit();
  }
  auto s = Store::Open(pg.uri());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Status::Code::kNotSupported);
  EXPECT_NE(s.status().message().find("schema version 99"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("upgrade moeedb"), std::string::npos);
}

// While one node builds the shard-key index (CREATE INDEX CONCURRENTLY, under
// the build's advisory lock), a node opening the same store waits for it
// without a transaction the build would wait on in turn: PostgreSQL ended
// that cycle as a deadlock, and a three-node cluster's first start failed.
TEST(PostgresStore, ANodeWaitingForAnotherNodesIndexBuildLetsTheBuildFinish) {
  test::PgDatabase pg;
  ASSERT_TRUE(Store::Open(pg.uri()).ok());
  pqxx::connection builder(pg.uri());
  pqxx::nontransaction(builder).exec("DROP INDEX moeedb_documents_shard");
  pqxx::nontransaction(builder).exec("SELECT pg_advisory_lock(7325102368)");  // the build's, as EnsureShardIndex takes it
  std::future<Status> opened;
  // Whatever fails below, the lock goes before `opened` is waited for, or
  // the opening store would wait for it forever.
  struct Unlock {
    pqxx::connection& c;
    ~Unlock() {
      try {
        pqxx::nontransaction(c).exec("SELECT pg_advisory_unlock_all()");
      } catch (...) {
      }
    }
  } unlock{builder};
  opened = std::async(std::launch::async, [&] { return Store::Open(pg.uri()).status(); });
  // The opening store's session, asking for the lock (neither the builder's nor this query's).
  const std::string waiting =
      "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
      "AND query LIKE '%advisory_lock(7325102368)%' AND pid <> pg_backend_pid() AND pid <> " +
      std::to_string(builder.backendpid());
  for (int i = 0; i < 200 && test::QueryCount(pg.uri(), waiting) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_GT(test::QueryCount(pg.uri(), waiting), 0) << "the opening store never reached the index's lock";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_NO_THROW(pqxx::nontransaction(builder).exec(postgres::kShardIndexSql));
  pqxx::nontransaction(builder).exec("SELECT pg_advisory_unlock(7325102368)");  // as the build ends
  const Status s = opened.get();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(test::QueryCount(pg.uri(), "SELECT count(*) FROM pg_index "
                                       "WHERE indexrelid = to_regclass('moeedb_documents_shard') AND indisvalid"),
            1);
}

TEST(PostgresStore, SchemaTwoGainsEachDocumentsShardKeyAndShardedReadsUseIt) {
  test::PgDatabase pg;
  std::vector<StoredDocument> docs;
  for (int i = 0; i < 300; ++i) docs.push_back({"id-" + std::to_string(i), "t", "{}", {1, 2}, {3}});
  {
    auto s = Store::Open(pg.uri());
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->CreateCollection("c", "{}").ok());
    ASSERT_TRUE((*s)->Upsert("c", docs, true).ok());
  }
  {  // As a version-2 store left it: no shard keys.
    pqxx::connection c(pg.uri());
    pqxx::work t(c);
    t.exec("ALTER TABLE moeedb_documents DROP COLUMN shard_key");  // version 9's index on it goes too
    t.exec("ALTER TABLE moeedb_ops DROP COLUMN entry_id");  // version 4's
    t.exec("DROP INDEX moeedb_documents_order");           // version 5's
    t.exec("DROP TABLE moeedb_aliases");                   // version 6's
    t.exec("DROP SEQUENCE moeedb_internal_ids");           // version 7's
    // Version 8 dropped the foreign keys to the collections.
    t.exec("ALTER TABLE moeedb_documents ADD FOREIGN KEY (coll) REFERENCES moeedb_collections(id) ON DELETE CASCADE");
    t.exec("ALTER TABLE moeedb_ops ADD FOREIGN KEY (coll) REFERENCES moeedb_collections(id) ON DELETE CASCADE");
    t.exec("UPDATE moeedb_meta SET value = '2' WHERE key = 'schema_version'");
    t.commit();
  }
  auto s = Store::Open(pg.uri());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  {
    pqxx::connection c(pg.uri());
    pqxx::work t(c);
    for (const auto& row : t.exec("SELECT external, shard_key FROM moeedb_documents"))
      EXPECT_EQ(row[1].as<uint64_t>(), ShardKey(row[0].as<std::string>())) << row[0].as<std::string>();
    EXPECT_EQ(t.exec1("SELECT value FROM moeedb_meta WHERE key = 'schema_version'")[0].as<int>(), PostgresStore::kSchemaVersion);
  }
  // Each shard's scan holds exactly the ids ShardOfId puts there, together
  // all, in either layout (version 9 indexes the shard keys for kRange).
  EXPECT_EQ(test::QueryCount(pg.uri(), "SELECT count(*) FROM pg_indexes WHERE indexname = 'moeedb_documents_shard'"), 1);
  for (ShardLayout layout : {ShardLayout::kModulo, ShardLayout::kRange}) {
    size_t seen = 0;
    for (uint32_t k = 0; k < 4; ++k) {
      std::vector<uint64_t> ids;
      ASSERT_TRUE((*s)->ScanMetadata("c", [&](uint64_t id, const std::string&) { ids.push_back(id); },
                                     ShardFilter{k, 4, layout}).ok());
      auto got = (*s)->GetManyByInternal("c", ids, false, ShardFilter{k, 4, layout});
      ASSERT_TRUE(got.ok());
      for (const auto& d : *got) {
        ASSERT_TRUE(d.has_value());
        EXPECT_EQ(ShardOfId(d->id, 4, layout), k);
      }
      // Another shard's filter hides them.
      auto other = (*s)->GetManyByInternal("c", ids, false, ShardFilter{(k + 1) % 4, 4, layout});
      for (const auto& d : *other) EXPECT_FALSE(d.has_value());
      seen += ids.size();
    }
    EXPECT_EQ(seen, docs.size());
  }
  // Version 7's sequence starts above every internal id given before it.
  uint64_t old_max = 0;
  ASSERT_TRUE((*s)->ScanMetadata("c", [&](uint64_t id, const std::string&) { old_max = std::max(old_max, id); }).ok());
  auto more = (*s)->Upsert("c", {{"new-0", "t", "{}", {1, 2}, {3}}, {"id-7", "t", "{}", {1, 2}, {3}}}, true);
  ASSERT_TRUE(more.ok()) << more.status().ToString();
  for (uint64_t id : more->added) EXPECT_GT(id, old_max);
  EXPECT_EQ(more->removed.size(), 1u);
  // Version 8: no foreign keys; dropping the collection deletes its rows itself.
  EXPECT_EQ(test::QueryCount(pg.uri(), "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND "
                            "confrelid = 'moeedb_collections'::regclass"), 0);
  ASSERT_TRUE((*s)->CreateCollection("other", "{}").ok());
  ASSERT_TRUE((*s)->Upsert("other", {{"o", "t", "{}", {1, 2}, {3}}}, true).ok());
  ASSERT_TRUE((*s)->DropCollection("c").ok());
  EXPECT_EQ(test::QueryCount(pg.uri(), "SELECT count(*) FROM moeedb_documents"), 1);  // "other"'s
  EXPECT_EQ(test::QueryCount(pg.uri(), "SELECT count(*) FROM moeedb_ops"), 1);
  EXPECT_TRUE((*(*s)->Get("other", "o")).has_value());
}

TEST(PostgresStore, AnUnreachableServerIsAClearErrorWithoutThePassword) {
  auto s = Store::Open("postgresql://moeedb:secret@127.0.0.1:1/nowhere?connect_timeout=2");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(s.status().message().find("127.0.0.1:1"), std::string::npos) << s.status().message();
  EXPECT_EQ(s.status().message().find("secret"), std::string::npos) << s.status().message();
  // A database that does not exist on a server that does.
  auto missing = Store::Open(test::PgUri("no_such_database"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no_such_database"), std::string::npos) << missing.status().message();
}

// The change-log trap: writer W takes number N and holds it (an open
// transaction); a second write must not become visible with N + 1 before N
// does, or a follower that read "everything above N - 1" and saw N + 1 would
// skip N for ever. The row lock makes the second write wait; the follower
// sees N, then N + 1.
TEST(PostgresStore, AChangeLogNumberNeverBecomesVisibleBeforeASmallerOne) {
  test::PgDatabase pg;
  auto store = Store::Open(pg.uri());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->CreateCollection("c", "{}").ok());
  ASSERT_TRUE((*store)->Upsert("c", {Doc("a", 1)}, true).ok());  // seq 1
  pqxx::connection held(pg.uri());
  pqxx::work w(held);
  // W: takes seq 2 as every writer does, and holds it.
  const uint64_t n = w.exec("UPDATE moeedb_collections SET last_op = last_op + 1 WHERE name = 'c' RETURNING last_op")[0][0]
                         .as<uint64_t>();
  ASSERT_EQ(n, 2u);
  auto second = std::async(std::launch::async, [&] { return (*store)->Upsert("c", {Doc("b", 2)}, true); });
  // Whatever the scheduling, the second write cannot commit while W holds the row.
  EXPECT_EQ(second.wait_for(std::chrono::milliseconds(500)), std::future_status::timeout);
  auto follower = Store::Open(pg.uri());
  ASSERT_TRUE(follower.ok());
  std::vector<uint64_t> seen;
  ASSERT_TRUE((*follower)->ReadOps("c", 1, [&](const OpRecord& op) { seen.push_back(op.seq); }).ok());
  EXPECT_TRUE(seen.empty());  // nothing above 1 is visible yet
  w.exec_params("INSERT INTO moeedb_ops (coll, seq, added, removed) "
                "SELECT id, $1, '{}', '{}' FROM moeedb_collections WHERE name = 'c'", static_cast<int64_t>(n));
  w.commit();
  auto r = second.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->seq, n + 1);
  ASSERT_TRUE((*follower)->ReadOps("c", 1, [&](const OpRecord& op) { seen.push_back(op.seq); }).ok());
  EXPECT_EQ(seen, (std::vector<uint64_t>{n, n + 1}));
}

// A delete that waits on a document a concurrent write is replacing (the
// replacement deleted the old row and inserted a new one, and commits while
// the delete waits) deletes the new row: "not found" would disagree with the
// store, which still holds it. The replacement is parked right before its
// COMMIT (the commit hook), the delete seen waiting in pg_stat_activity.
TEST(PostgresStore, ADeleteWaitingOnAReplacementDeletesWhatItCommitted) {
  test::PgDatabase pg;
  auto writer = Store::Open(pg.uri());
  auto deleter = Store::Open(pg.uri());
  ASSERT_TRUE(writer.ok() && deleter.ok());
  ASSERT_TRUE((*writer)->CreateCollection("c", "{}").ok());
  ASSERT_TRUE((*writer)->Upsert("c", {Doc("x", 1)}, true).ok());
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> parked;
  std::atomic<bool> once{false};
  static_cast<PostgresStore*>(writer->get())->SetCommitHookForTest([&](bool committed) {
    if (committed || once.exchange(true)) return;
    parked.set_value();
    released.wait();
  });
  auto replacing = std::async(std::launch::async, [&] { return (*writer)->Upsert("c", {Doc("x", 2)}, true); });
  ASSERT_EQ(parked.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  auto deleting = std::async(std::launch::async, [&] { return (*deleter)->Delete("c", {"x"}, true); });
  bool waiting = false;
  {
    pqxx::connection c(pg.uri());
    for (int i = 0; i < 600 && !waiting; ++i) {
      waiting = pqxx::nontransaction(c)
                    .exec("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
                          "datname = current_database() AND query LIKE 'DELETE FROM moeedb_documents%'")[0][0]
                    .as<int>() > 0;
      if (!waiting) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  release.set_value();
  ASSERT_TRUE(waiting) << "the delete never waited on the replaced row";
  auto replaced = replacing.get();
  auto deleted = deleting.get();
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(deleted->not_found, 0u);
  EXPECT_EQ(deleted->removed, replaced->added);
  EXPECT_EQ(deleted->seq, replaced->seq + 1);
  auto x = (*deleter)->Get("c", "x");
  ASSERT_TRUE(x.ok());
  EXPECT_FALSE(x->has_value());
}

// A node waiting for changes is woken by another's commit (the NOTIFY that
// follows it), not by the end of its wait; with no write it is not.
TEST(PostgresStore, ACommitWakesAWaitingNode) {
  test::PgDatabase pg;
  auto writer = Store::Open(pg.uri());
  auto follower = Store::Open(pg.uri());
  ASSERT_TRUE(writer.ok() && follower.ok());
  ASSERT_TRUE((*writer)->CreateCollection("c", "{}").ok());
  EXPECT_TRUE((*follower)->WaitForChange(10));    // subscribing: read the log once
  EXPECT_FALSE((*follower)->WaitForChange(50));   // nothing committed
  auto woken = std::async(std::launch::async, [&] { return (*follower)->WaitForChange(600000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE((*writer)->Upsert("c", {Doc("a", 1)}, true).ok());
  EXPECT_TRUE(woken.get());  // without the notification this would wait out 10 minutes and say false
}

// The log is trimmed where its caller says (a retention window: other nodes
// follow it from their own cursors), one collection's only.
TEST(PostgresStore, TrimsTheChangeLogBelowWhatItIsToldAndHasNoFolderCheckpoint) {
  test::PgDatabase pg;
  auto store = Store::Open(pg.uri());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->CreateCollection("c", "{}").ok());
  ASSERT_TRUE((*store)->CreateCollection("other", "{}").ok());
  for (const char* id : {"a", "b", "c"}) {
    ASSERT_TRUE((*store)->Upsert("c", {Doc(id, 1)}, true).ok());
    ASSERT_TRUE((*store)->Upsert("other", {Doc(id, 1)}, true).ok());
  }
  ASSERT_TRUE((*store)->TrimOps("c", 2).ok());
  std::vector<uint64_t> left, other;
  ASSERT_TRUE((*store)->ReadOps("c", 0, [&](const OpRecord& op) { left.push_back(op.seq); }).ok());
  ASSERT_TRUE((*store)->ReadOps("other", 0, [&](const OpRecord& op) { other.push_back(op.seq); }).ok());
  EXPECT_EQ(left, std::vector<uint64_t>{3});
  EXPECT_EQ(other, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ((*store)->TrimOps("nope", 1).code(), Status::Code::kNotFound);
  test::TempDir dir;
  EXPECT_EQ((*store)->Checkpoint(dir / "copy").code(), Status::Code::kNotSupported);
  EXPECT_EQ((*store)->location().find("postgresql://"), 0u);
}

// Each change-log entry carries its write's identity, the same in the write's
// answer and in the log, and different for every write: what a follower
// compares at its cursor (shard_replica.h), and what numbers alone cannot say
// once a log has gone back and numbered other writes anew.
TEST(PostgresStore, EachChangeLogEntryCarriesItsWritesIdentity) {
  test::PgDatabase pg;
  auto store = Store::Open(pg.uri());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->CreateCollection("c", "{}").ok());
  auto a = (*store)->Upsert("c", {Doc("a", 1)}, true);
  auto b = (*store)->Upsert("c", {Doc("b", 2)}, /*sync=*/false);
  auto d = (*store)->Delete("c", {"a"}, true);
  ASSERT_TRUE(a.ok() && b.ok() && d.ok());
  std::vector<std::string> logged;
  ASSERT_TRUE((*store)->ReadOps("c", 0, [&](const OpRecord& op) { logged.push_back(op.entry_id); }).ok());
  EXPECT_EQ(logged, (std::vector<std::string>{a->entry_id, b->entry_id, d->entry_id}));
  EXPECT_FALSE(a->entry_id.empty());
  EXPECT_NE(a->entry_id, b->entry_id);
  EXPECT_NE(b->entry_id, d->entry_id);
  // Each write names the entry it follows (a node applying its own write
  // checks it against the one it applied last).
  EXPECT_EQ(a->previous_entry_id, "");
  EXPECT_EQ(b->previous_entry_id, a->entry_id);
  EXPECT_EQ(d->previous_entry_id, b->entry_id);
}

}  // namespace
}  // namespace moeedb
