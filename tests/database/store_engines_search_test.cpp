// The same collection (exact flat indexes, the lexical index on) written
// through the same upserts, replacements and deletes into a RocksStore and
// into a PostgresStore answers 200 queries in every search mode, half of
// them filtered, with the same ids and scores (within 1e-6); and a
// collection reopened over PostgreSQL rebuilds its indexes from the store
// (no snapshot in its index folder) to the same answers.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <random>
#include <sstream>
#include <thread>

#include "database/vector_collection.h"
#include "storage/postgres_store.h"
#include "tests/index/lexical_corpus.h"
#include "tests/storage/pg_test_db.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

constexpr size_t kDh = 16, kDr = 8, kDocs = 300;

std::vector<float> Vec(std::mt19937& rng, size_t dim) {
  std::normal_distribution<float> g;
  std::vector<float> v(dim);
  for (auto& x : v) x = g(rng);
  return v;
}

// Texts from the corpus's words, metadata with a number and a tag to filter on.
std::vector<StoredDocument> Documents(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> words;
  for (const auto& s : test::kCorpus) {
    std::istringstream in(s);
    for (std::string w; in >> w;) words.push_back(w);
  }
  std::vector<StoredDocument> docs;
  for (size_t i = 0; i < kDocs; ++i) {
    std::string text;
    const size_t n = 4 + rng() % 12;
    for (size_t k = 0; k < n; ++k) text += (k ? " " : "") + words[rng() % words.size()];
    const json meta = {{"n", static_cast<int>(i % 10)}, {"tag", i % 3 == 0 ? "a" : "b"}};
    docs.push_back({"doc-" + std::to_string(i), text, meta.dump(), Vec(rng, kDh), Vec(rng, kDr)});
  }
  return docs;
}

std::unique_ptr<VectorCollection> Build(Store* store, const std::string& index_root,
                                        const std::vector<StoredDocument>& docs) {
  CollectionOptions o;
  o.dim_hs = kDh;
  o.dim_rw = kDr;
  o.index.hs.kind = o.index.rw.kind = IndexKind::kFlat;
  o.lexical.enabled = true;
  o.default_alpha = 0.7f;
  auto c = VectorCollection::Create(store, "c", o, index_root);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return nullptr;
  // Batches of 50, then replacements of every 7th document and deletes of every 11th.
  for (size_t i = 0; i < docs.size(); i += 50)
    EXPECT_TRUE((*c)->Upsert(std::vector<StoredDocument>(docs.begin() + i, docs.begin() + std::min(docs.size(), i + 50))).ok());
  std::vector<StoredDocument> replaced;
  std::vector<std::string> deleted;
  for (size_t i = 0; i < docs.size(); ++i) {
    if (i % 7 == 0) {
      StoredDocument d = docs[(i * 13) % docs.size()];
      d.id = docs[i].id;
      replaced.push_back(d);
    }
    if (i % 11 == 0) deleted.push_back(docs[i].id);
  }
  EXPECT_TRUE((*c)->Upsert(replaced).ok());
  EXPECT_TRUE((*c)->Delete(deleted).ok());
  return std::move(c).value();
}

struct Query {
  SearchSpec spec;
  std::vector<float> hs, rw;
};

std::vector<Query> Queries() {
  std::mt19937 rng(7);
  std::vector<std::string> words;
  for (const auto& s : test::kCorpus) {
    std::istringstream in(s);
    for (std::string w; in >> w;) words.push_back(w);
  }
  const QueryMode modes[] = {QueryMode::kFused, QueryMode::kHs, QueryMode::kRw, QueryMode::kLexical, QueryMode::kHybrid};
  std::vector<Query> out;
  for (size_t i = 0; i < 200; ++i) {
    Query q;
    q.hs = Vec(rng, kDh);
    q.rw = Vec(rng, kDr);
    q.spec.k = 1 + rng() % 25;
    q.spec.mode = modes[i % 5];
    q.spec.query = words[rng() % words.size()] + " " + words[rng() % words.size()];
    q.spec.exact = true;
    if (i % 3 == 0) q.spec.alpha = 0.25f * (rng() % 8);
    if (q.spec.mode == QueryMode::kHybrid) {
      q.spec.fusion = i % 2 ? FusionKind::kRrf : FusionKind::kWeighted;
      if (i % 4 == 1) q.spec.norm = ScoreNorm::kZScore;
    }
    if (i % 2 == 0)
      EXPECT_TRUE(q.spec.SetFilter(i % 4 == 0 ? R"({"n": {"$lt": 6}})" : R"({"tag": "a"})").ok());
    out.push_back(std::move(q));
  }
  return out;
}

void ExpectSameAnswers(const VectorCollection& a, const VectorCollection& b) {
  size_t nonempty = 0;
  for (const Query& q : Queries()) {
    auto ha = a.Search(q.hs.data(), q.rw.data(), q.spec);
    auto hb = b.Search(q.hs.data(), q.rw.data(), q.spec);
    ASSERT_TRUE(ha.ok()) << ha.status().ToString();
    ASSERT_TRUE(hb.ok()) << hb.status().ToString();
    ASSERT_EQ(ha->size(), hb->size()) << q.spec.query;
    nonempty += !ha->empty();
    for (size_t i = 0; i < ha->size(); ++i) {
      EXPECT_EQ((*ha)[i].id, (*hb)[i].id) << "query " << q.spec.query << " rank " << i;
      EXPECT_NEAR((*ha)[i].score, (*hb)[i].score, 1e-6);
      EXPECT_NEAR((*ha)[i].score_lex, (*hb)[i].score_lex, 1e-6);
      EXPECT_EQ((*ha)[i].text, (*hb)[i].text);
      EXPECT_EQ(json::parse((*ha)[i].metadata_json), json::parse((*hb)[i].metadata_json));
    }
  }
  EXPECT_GT(nonempty, 190u);  // the queries do find documents
}

TEST(StoreEngines, RocksDbAndPostgresAnswerEveryQueryAlike) {
  test::TempDir dir;
  test::PgDatabase pg;
  const auto docs = Documents(3);
  auto rocks = Store::Open(dir / "rocks");
  auto postgres = Store::Open(pg.uri());
  ASSERT_TRUE(rocks.ok() && postgres.ok()) << postgres.status().ToString();
  auto a = Build(rocks->get(), "", docs);
  auto b = Build(postgres->get(), dir / "pg-indexes", docs);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->IndexedIds(), b->IndexedIds());
  ExpectSameAnswers(*a, *b);

  // Over PostgreSQL, a node with an empty index folder builds from the store.
  auto fresh = VectorCollection::Open(postgres->get(), "c", dir / "another-node");
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  ExpectSameAnswers(*a, **fresh);
}

// Two nodes over one PostgreSQL database, each with its own index folder:
// what one writes, the other applies from the change log (CatchUp), and a
// node that writes while behind takes the entries before its own first.
TEST(StoreEngines, ANodeFollowsTheChangeLogOfAnother) {
  test::TempDir dir;
  test::PgDatabase pg;
  auto store_a = Store::Open(pg.uri());
  auto store_b = Store::Open(pg.uri());
  ASSERT_TRUE(store_a.ok() && store_b.ok());
  const auto docs = Documents(5);
  auto a = Build(store_a->get(), dir / "node-a", std::vector<StoredDocument>(docs.begin(), docs.begin() + 100));
  ASSERT_TRUE(a);
  auto b = VectorCollection::Open(store_b->get(), "c", dir / "node-b");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ExpectSameAnswers(*a, **b);
  // A writes: new documents, a replacement, a delete. B sees them after CatchUp.
  ASSERT_TRUE(a->Upsert(std::vector<StoredDocument>(docs.begin() + 100, docs.begin() + 200)).ok());
  StoredDocument moved = docs[150];
  moved.id = docs[120].id;
  ASSERT_TRUE(a->Upsert({moved}).ok());
  ASSERT_TRUE(a->Delete({docs[130].id, docs[5].id}).ok());
  EXPECT_NE((*b)->applied_seq(), a->applied_seq());
  auto n = (*b)->CatchUp();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 3u);
  EXPECT_EQ((*b)->applied_seq(), a->applied_seq());
  EXPECT_EQ((*b)->IndexedIds(), a->IndexedIds());
  EXPECT_EQ((*b)->LexicalIds(), a->LexicalIds());
  ExpectSameAnswers(*a, **b);
  EXPECT_EQ(*(*b)->CatchUp(), 0u);  // nothing new: nothing applied
  // A writes again; B writes while behind: B applies A's entry, then its own.
  ASSERT_TRUE(a->Upsert(std::vector<StoredDocument>(docs.begin() + 200, docs.begin() + 250)).ok());
  ASSERT_TRUE((*b)->Upsert(std::vector<StoredDocument>(docs.begin() + 250, docs.end())).ok());
  EXPECT_EQ((*b)->applied_seq(), a->applied_seq() + 1);
  ASSERT_TRUE(a->CatchUp().ok());
  EXPECT_EQ((*b)->IndexedIds(), a->IndexedIds());
  EXPECT_EQ(a->IndexedIds().size(), (*store_a)->GetCollection("c")->count);
  ExpectSameAnswers(*a, **b);
}

// A node's concurrent writes to one collection reach PostgreSQL side by side
// (the store commits them in groups): while another session holds the
// collection's row, as many of them wait for it inside their transactions
// as the store runs at once (one at a time, they would queue in the node).
// Once it is let go every write lands, in whatever order they commit, and
// the node's indexes answer as a node that built them from the store.
TEST(StoreEngines, ANodesConcurrentWritesGoToTheStoreSideBySide) {
  test::TempDir dir;
  test::PgDatabase pg;
  auto store = Store::Open(pg.uri());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const auto docs = Documents(9);
  auto a = Build(store->get(), dir / "node-a", std::vector<StoredDocument>(docs.begin(), docs.begin() + 100));
  ASSERT_TRUE(a);
  pqxx::connection admin(pg.uri());
  pqxx::work hold(admin);
  hold.exec("SELECT 1 FROM moeedb_collections WHERE name = 'c' FOR UPDATE");
  constexpr int kWriters = 8;
  std::vector<std::future<Result<WriteResult>>> writes;
  for (int w = 0; w < kWriters; ++w)
    writes.push_back(std::async(std::launch::async, [&, w] {
      // New documents, and a replacement of an earlier one (another's text).
      std::vector<StoredDocument> batch(docs.begin() + 100 + w * 20, docs.begin() + 120 + w * 20);
      StoredDocument moved = docs[200 + w];
      moved.id = docs[w * 3].id;
      batch.push_back(moved);
      return w % 4 == 3 ? a->Delete({docs[w * 3 + 1].id}) : a->Upsert(batch);
    }));
  int waiting = 0;
  for (int i = 0; i < 1000 && waiting < PostgresStore::kWriteGroupsInFlight; ++i) {
    waiting = test::QueryCount(pg.uri(), "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                         "AND wait_event_type = 'Lock'");
    if (waiting < PostgresStore::kWriteGroupsInFlight) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(waiting, PostgresStore::kWriteGroupsInFlight) << "the node's writes reached the store one at a time";
  hold.abort();
  for (auto& w : writes) {
    auto r = w.get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  const CollectionRecord rec = *(*store)->GetCollection("c");
  EXPECT_EQ(a->applied_seq(), rec.last_op);
  EXPECT_EQ(a->IndexedIds().size(), rec.count);
  auto fresh = VectorCollection::Open(store->get(), "c", dir / "node-b");
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ((*fresh)->IndexedIds(), a->IndexedIds());
  EXPECT_EQ((*fresh)->LexicalIds(), a->LexicalIds());
  ExpectSameAnswers(*a, **fresh);
}

}  // namespace
}  // namespace moeedb
