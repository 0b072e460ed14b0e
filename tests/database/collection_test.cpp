// Collections: exact fused search against an independent brute force, ANN
// recall, deletes and re-adds, HNSW rebuilds, persistence and replay,
// metadata filters, and bad input leaving the store untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <map>
#include <set>
#include <thread>

#include "database/vector_collection.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

struct Data {
  size_t n, dh, dr;
  std::vector<std::vector<float>> hs, rw;
};

// Clustered vectors (HNSW is pathological on pure Gaussian noise).
Data MakeData(size_t n, size_t dh, size_t dr, unsigned seed, size_t clusters = 10) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0, 1);
  std::vector<std::vector<float>> ch(clusters, std::vector<float>(dh)), cr(clusters, std::vector<float>(dr));
  for (auto& c : ch) for (auto& v : c) v = 3 * g(rng);
  for (auto& c : cr) for (auto& v : c) v = 3 * g(rng) + 5;  // RW-like offsets
  Data d{n, dh, dr, {}, {}};
  for (size_t i = 0; i < n; ++i) {
    const size_t c = rng() % clusters;
    std::vector<float> h(dh), r(dr);
    for (size_t j = 0; j < dh; ++j) h[j] = ch[c][j] + g(rng);
    for (size_t j = 0; j < dr; ++j) r[j] = cr[c][j] + g(rng);
    d.hs.push_back(h);
    d.rw.push_back(r);
  }
  return d;
}

std::vector<StoredDocument> Docs(const Data& d, size_t from, size_t to, const std::string& prefix = "d") {
  std::vector<StoredDocument> docs;
  for (size_t i = from; i < to; ++i)
    docs.push_back({prefix + std::to_string(i), "text " + std::to_string(i),
                    json{{"n", i}, {"parity", i % 2 ? "odd" : "even"}}.dump(), d.hs[i], d.rw[i]});
  return docs;
}

// Mean and unbiased std per feature, computed here, as JSON for the collection.
std::pair<std::vector<double>, std::vector<double>> Stats(const std::vector<std::vector<float>>& rows) {
  const size_t d = rows[0].size(), n = rows.size();
  std::vector<double> mean(d, 0), sd(d, 0);
  for (const auto& r : rows) for (size_t j = 0; j < d; ++j) mean[j] += r[j] / n;
  for (const auto& r : rows) for (size_t j = 0; j < d; ++j) sd[j] += (r[j] - mean[j]) * (r[j] - mean[j]) / (n - 1);
  for (auto& s : sd) s = std::sqrt(s);
  return {mean, sd};
}
std::string StatsJson(const std::pair<std::vector<double>, std::vector<double>>& s) {
  std::vector<double> inv;
  for (double v : s.second) inv.push_back(1.0 / (v + 1e-8));
  return json{{"mean", s.first}, {"inv_std", inv}}.dump();
}
std::vector<double> ZNorm(const std::vector<float>& x, const std::pair<std::vector<double>, std::vector<double>>& s) {
  std::vector<double> z(x.size());
  double n = 0;
  for (size_t j = 0; j < x.size(); ++j) {
    z[j] = (x[j] - s.first[j]) / (s.second[j] + 1e-8);
    n += z[j] * z[j];
  }
  for (auto& v : z) v /= std::sqrt(n);
  return z;
}

struct Env {
  test::TempDir dir;
  std::unique_ptr<Store> store;
  Env() { store = std::move(Store::Open(dir / "db")).value(); }
};

CollectionOptions Options(size_t dh, size_t dr, IndexKind kind, bool sq8 = false) {
  CollectionOptions o;
  o.dim_hs = dh;
  o.dim_rw = dr;
  o.index.hs.kind = o.index.rw.kind = kind;
  o.index.hs.codes = o.index.rw.codes = sq8 ? CodeKind::kSq8 : CodeKind::kNone;
  o.index.min_train_rows = 64;
  return o;
}

TEST(Collection, ExactFusedSearchEqualsBruteForce) {
  Env env;
  Data d = MakeData(120, 12, 6, 1);
  // Exact duplicates make ties: they must be broken by insertion order.
  for (size_t i = 100; i < 110; ++i) { d.hs[i] = d.hs[i - 100]; d.rw[i] = d.rw[i - 100]; }
  auto sh = Stats(d.hs), sr = Stats(d.rw);
  CollectionOptions o = Options(12, 6, IndexKind::kFlat);
  o.std_hs_json = StatsJson(sh);
  o.std_rw_json = StatsJson(sr);
  auto c = VectorCollection::Create(env.store.get(), "c", o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE((*c)->Upsert(Docs(d, 0, 120)).ok());
  std::vector<std::vector<double>> zh, zr;
  for (size_t i = 0; i < 120; ++i) { zh.push_back(ZNorm(d.hs[i], sh)); zr.push_back(ZNorm(d.rw[i], sr)); }
  Data q = MakeData(5, 12, 6, 2);
  q.hs[0] = d.hs[3];  // a query equal to a document (and to its duplicate)
  q.rw[0] = d.rw[3];
  for (size_t qi = 0; qi < 5; ++qi) {
    auto qh = ZNorm(q.hs[qi], sh), qr = ZNorm(q.rw[qi], sr);
    for (float alpha : {0.0f, 0.5f, 1.0f, 2.5f}) {
      for (auto mode : {QueryMode::kFused, QueryMode::kHs, QueryMode::kRw}) {
        for (size_t k : {1, 10, 500}) {
          std::vector<std::pair<double, size_t>> ref;
          for (size_t i = 0; i < 120; ++i) {
            double a = 0, b = 0;
            for (size_t j = 0; j < 12; ++j) a += qh[j] * zh[i][j];
            for (size_t j = 0; j < 6; ++j) b += qr[j] * zr[i][j];
            ref.push_back({mode == QueryMode::kFused ? a + alpha * b : mode == QueryMode::kHs ? a : b, i});
          }
          std::stable_sort(ref.begin(), ref.end(), [](auto& x, auto& y) { return x.first > y.first; });
          SearchSpec so;
          so.k = k;
          so.alpha = alpha;
          so.mode = mode;
          so.exact = true;
          auto hits = (*c)->Search(q.hs[qi].data(), q.rw[qi].data(), so);
          ASSERT_TRUE(hits.ok());
          ASSERT_EQ(hits->size(), std::min<size_t>(k, 120));
          for (size_t r = 0; r < hits->size(); ++r) {
            EXPECT_NEAR((*hits)[r].score, ref[r].first, 1e-4);
            // Same document, or an exact tie (equal scores) in a different order is not allowed either.
            EXPECT_EQ((*hits)[r].id, "d" + std::to_string(ref[r].second)) << "rank " << r << " alpha " << alpha;
          }
        }
      }
    }
  }
}

TEST(Collection, AnnFusedSearchFindsTheExactNeighbours) {
  for (IndexKind kind : {IndexKind::kHnsw, IndexKind::kIvf}) {
    for (bool sq8 : {false, true}) {
      Env env;
      // Queries are held-out points of the same distribution.
      Data d = MakeData(2020, 32, 16, 3, 20);
      CollectionOptions o = Options(32, 16, kind, sq8);
      o.index.fp16_rows = sq8;  // the compact configuration: SQ8 indexes, fp16 rows for re-scoring
      auto c = VectorCollection::Create(env.store.get(), "c", o);
      ASSERT_TRUE(c.ok());
      ASSERT_TRUE((*c)->Upsert(Docs(d, 0, 2000), false).ok());
      Data q = d;
      q.hs.erase(q.hs.begin(), q.hs.begin() + 2000);
      q.rw.erase(q.rw.begin(), q.rw.begin() + 2000);
      double recall = 0;
      for (size_t i = 0; i < 20; ++i) {
        SearchSpec ann;
        ann.k = 10;
        SearchSpec ex = ann;
        ex.exact = true;
        auto a = (*c)->Search(q.hs[i].data(), q.rw[i].data(), ann);
        auto e = (*c)->Search(q.hs[i].data(), q.rw[i].data(), ex);
        ASSERT_TRUE(a.ok() && e.ok());
        std::set<std::string> truth;
        for (const auto& h : *e) truth.insert(h.id);
        for (const auto& h : *a) recall += truth.count(h.id) / 200.0;
      }
      EXPECT_GE(recall, 0.9) << kIndexKinds.Name(kind) << (sq8 ? "+sq8" : "");
    }
  }
}

TEST(Collection, DeletedDocumentsAreNeverReturned) {
  for (IndexKind kind : {IndexKind::kFlat, IndexKind::kHnsw, IndexKind::kIvf}) {
    Env env;
    Data d = MakeData(400, 16, 8, 5);
    CollectionOptions o = Options(16, 8, kind);
    o.index.rebuild_ratio = 0.9;  // tombstones stay (no rebuild) in this test
    auto c = VectorCollection::Create(env.store.get(), "c", o);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->Upsert(Docs(d, 0, 400), false).ok());
    std::vector<std::string> gone;
    for (size_t i = 0; i < 400; i += 4) gone.push_back("d" + std::to_string(i));
    auto del = (*c)->Delete(gone);
    ASSERT_TRUE(del.ok());
    EXPECT_EQ(del->removed.size(), 100u);
    EXPECT_EQ((*c)->size(), 300u);
    for (size_t i = 0; i < 400; i += 4) {  // the deleted document's own vectors as the query
      for (auto mode : {QueryMode::kFused, QueryMode::kHs, QueryMode::kRw}) {
        for (bool exact : {false, true}) {
          SearchSpec so;
          so.k = 20;
          so.mode = mode;
          so.exact = exact;
          auto hits = (*c)->Search(d.hs[i].data(), d.rw[i].data(), so);
          ASSERT_TRUE(hits.ok());
          EXPECT_EQ(hits->size(), 20u);
          for (const auto& h : *hits) EXPECT_NE(std::stoul(h.id.substr(1)) % 4, 0u) << kIndexKinds.Name(kind);
        }
      }
      if (i > 40) break;
    }
    // Re-adding a deleted id works and is found first for its own vectors.
    ASSERT_TRUE((*c)->Upsert(Docs(d, 8, 9)).ok());
    SearchSpec so;
    so.k = 1;
    auto hits = (*c)->Search(d.hs[8].data(), d.rw[8].data(), so);
    ASSERT_TRUE(hits.ok());
    EXPECT_EQ((*hits)[0].id, "d8");
    EXPECT_TRUE((*(*c)->Get("d8")).has_value());
    EXPECT_FALSE((*(*c)->Get("d4")).has_value());
  }
}

TEST(Collection, HnswRebuildsAfterTheTombstoneThreshold) {
  Env env;
  Data d = MakeData(500, 16, 8, 6);
  CollectionOptions o = Options(16, 8, IndexKind::kHnsw);
  o.index.rebuild_ratio = 0.2;
  auto c = VectorCollection::Create(env.store.get(), "c", o);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Upsert(Docs(d, 0, 500), false).ok());
  std::vector<std::string> gone;
  for (size_t i = 0; i < 90; ++i) gone.push_back("d" + std::to_string(i));
  ASSERT_TRUE((*c)->Delete(gone).ok());
  EXPECT_EQ((*c)->index_rebuilds(), 0u);  // 90 / 500 < 0.2
  gone.clear();
  for (size_t i = 90; i < 120; ++i) gone.push_back("d" + std::to_string(i));
  ASSERT_TRUE((*c)->Delete(gone).ok());
  EXPECT_EQ((*c)->index_rebuilds(), 1u);  // 120 / 500 > 0.2
  EXPECT_EQ((*c)->size(), 380u);
  SearchSpec so;
  so.k = 50;
  for (size_t i = 0; i < 120; i += 7) {
    auto hits = (*c)->Search(d.hs[i].data(), d.rw[i].data(), so);
    ASSERT_TRUE(hits.ok());
    for (const auto& h : *hits) EXPECT_GE(std::stoul(h.id.substr(1)), 120u);
  }
  // Updates replace: the old version is tombstoned, the new one found.
  Data d2 = MakeData(1, 16, 8, 99);
  auto upd = Docs(d2, 0, 1, "d");  // id "d0" again, new vectors... d0 was deleted: plain insert
  upd[0].id = "d200";
  ASSERT_TRUE((*c)->Upsert(upd).ok());
  so.k = 1;
  auto hits = (*c)->Search(d2.hs[0].data(), d2.rw[0].data(), so);
  ASSERT_TRUE(hits.ok());
  EXPECT_EQ((*hits)[0].id, "d200");
  EXPECT_EQ((*c)->size(), 380u);
}

// Periodic snapshots (what `moeedb serve --snapshot-entries/--snapshot-s`
// runs): due by the entries applied since the last one, or by time with any
// applied; a collection dropped without a clean save (as kill -9 leaves it)
// opens again from the latest snapshot and replays only what followed it.
TEST(Collection, SnapshotsDueByEntriesOrTimeBoundWhatAReopenReplays) {
  Env env;
  Data d = MakeData(130, 16, 8, 3);
  const auto never = std::chrono::milliseconds(0);
  {
    auto c = VectorCollection::Create(env.store.get(), "c", Options(16, 8, IndexKind::kFlat));
    ASSERT_TRUE(c.ok());
    std::vector<bool> saved;
    for (size_t i = 0; i < 10; ++i) {
      ASSERT_TRUE((*c)->Upsert(Docs(d, i * 10, i * 10 + 10)).ok());
      auto s = (*c)->SaveIndexIfDue(4, never);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      saved.push_back(*s);
    }
    EXPECT_EQ(saved, (std::vector<bool>{false, false, false, true, false, false, false, true, false, false}));
    // By time: due once the period passed with entries applied since; not again with none.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto by_time = (*c)->SaveIndexIfDue(0, std::chrono::milliseconds(1));
    ASSERT_TRUE(by_time.ok());
    EXPECT_TRUE(*by_time);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    by_time = (*c)->SaveIndexIfDue(0, std::chrono::milliseconds(1));
    ASSERT_TRUE(by_time.ok());
    EXPECT_FALSE(*by_time);
    ASSERT_TRUE((*c)->Upsert(Docs(d, 100, 110)).ok());  // after the last snapshot: the crash's tail
    ASSERT_TRUE((*c)->Delete({"d3"}).ok());
  }  // gone without SaveIndex
  auto c = VectorCollection::Open(env.store.get(), "c");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE((*c)->opened_from_snapshot());
  EXPECT_EQ((*c)->replayed_ops(), 2u);
  EXPECT_EQ((*c)->size(), 109u);
  // Reopened from a snapshot 2 entries back: 2 more make 4 since it, so due by count now.
  ASSERT_TRUE((*c)->Upsert(Docs(d, 110, 120)).ok());
  auto s = (*c)->SaveIndexIfDue(4, never);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(*s);
  ASSERT_TRUE((*c)->Upsert(Docs(d, 120, 130)).ok());
  s = (*c)->SaveIndexIfDue(4, never);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(*s);
}

TEST(Collection, AReplicaBuiltFromTheStoreIsSavedAtOnceWhenItHoldsEnoughDocuments) {
  Env env;
  Data d = MakeData(40, 16, 8, 5);
  const auto never = std::chrono::milliseconds(0);
  {
    auto c = VectorCollection::Create(env.store.get(), "c", Options(16, 8, IndexKind::kFlat));
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->Upsert(Docs(d, 0, 40)).ok());
  }  // gone without a snapshot: the next open builds 40 documents from the store
  auto c = VectorCollection::Open(env.store.get(), "c");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE((*c)->opened_from_snapshot());
  // One entry applied, but a build of 40 documents: due at a threshold of 40, not of 41.
  auto s = (*c)->SaveIndexIfDue(41, never);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(*s);
  s = (*c)->SaveIndexIfDue(40, never);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(*s);
  s = (*c)->SaveIndexIfDue(40, never);  // saved: not due again
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(*s);
  c->reset();
  auto again = VectorCollection::Open(env.store.get(), "c");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE((*again)->opened_from_snapshot());
  EXPECT_EQ((*again)->replayed_ops(), 0u);
}

TEST(Collection, SnapshotReplayAndRebuildGiveTheSameIndex) {
  Env env;
  Data d = MakeData(300, 16, 8, 7);
  {
    auto c = VectorCollection::Create(env.store.get(), "c", Options(16, 8, IndexKind::kHnsw));
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->Upsert(Docs(d, 0, 200)).ok());
    ASSERT_TRUE((*c)->SaveIndex().ok());
    ASSERT_TRUE((*c)->Upsert(Docs(d, 200, 300)).ok());      // after the snapshot
    ASSERT_TRUE((*c)->Delete({"d5", "d250"}).ok());           // both sides of it
  }
  auto c = VectorCollection::Open(env.store.get(), "c");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE((*c)->opened_from_snapshot());
  EXPECT_EQ((*c)->replayed_ops(), 2u);
  EXPECT_EQ((*c)->size(), 298u);
  SearchSpec so;
  so.k = 10;
  so.exact = true;
  auto a = (*c)->Search(d.hs[7].data(), d.rw[7].data(), so);
  // Without a snapshot the index is rebuilt from the stored vectors.
  std::filesystem::remove_all(env.dir / "db/indexes");
  auto r = VectorCollection::Open(env.store.get(), "c");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE((*r)->opened_from_snapshot());
  auto b = (*r)->Search(d.hs[7].data(), d.rw[7].data(), so);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) EXPECT_EQ((*a)[i].id, (*b)[i].id);
  EXPECT_EQ((*c)->IndexedIds(), (*r)->IndexedIds());
}

TEST(Collection, ASnapshotCarriesItsDocumentsMetadataAsOfItsEntry) {
  Env env;
  Data d = MakeData(100, 8, 4, 9);
  std::string dir;
  {
    auto c = VectorCollection::Create(env.store.get(), "c", Options(8, 4, IndexKind::kFlat));
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->Upsert(Docs(d, 0, 100)).ok());
    ASSERT_TRUE((*c)->SaveIndex().ok());
    auto changed = Docs(d, 0, 10);
    for (auto& doc : changed) doc.metadata_json = R"({"parity": "changed"})";
    ASSERT_TRUE((*c)->Upsert(changed).ok());  // after the snapshot: replayed on open
    dir = (*c)->index_dir();
  }  // gone without a snapshot of the last write
  ASSERT_TRUE(std::filesystem::exists(dir + "/metadata"));
  const auto count = [&](VectorCollection& c, const std::string& filter) {
    SearchSpec so;
    so.k = 100;
    so.exact = true;
    so.filter = *MetadataFilter::Parse(filter);
    auto hits = c.Search(d.hs[0].data(), d.rw[0].data(), so);
    EXPECT_TRUE(hits.ok());
    return hits.ok() ? hits->size() : 0;
  };
  for (bool damaged : {false, true}) {
    // Damaged, the file is not used: the metadata are read from the store instead.
    if (damaged) std::filesystem::resize_file(dir + "/metadata", 10);
    auto c = VectorCollection::Open(env.store.get(), "c");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_TRUE((*c)->opened_from_snapshot());
    EXPECT_EQ((*c)->replayed_ops(), 1u);
    EXPECT_EQ(count(**c, R"({"parity": "changed"})"), 10u) << damaged;
    EXPECT_EQ(count(**c, R"({"parity": "odd"})"), 45u) << damaged;
    EXPECT_EQ(count(**c, R"({"n": {"$lt": 10}})"), 0u) << damaged;
  }
}

TEST(Collection, MetadataFilters) {
  Env env;
  Data d = MakeData(100, 8, 4, 8);
  auto c = VectorCollection::Create(env.store.get(), "c", Options(8, 4, IndexKind::kHnsw));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Upsert(Docs(d, 0, 100)).ok());
  auto check = [&](const std::string& filter, const std::function<bool(size_t)>& expect, size_t count) {
    for (bool exact : {false, true}) {
      SearchSpec so;
      so.k = 100;
      auto parsed = MetadataFilter::Parse(filter);
      ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
      so.filter = *parsed;
      so.exact = exact;
      auto hits = (*c)->Search(d.hs[0].data(), d.rw[0].data(), so);
      ASSERT_TRUE(hits.ok()) << hits.status().ToString();
      EXPECT_EQ(hits->size(), count) << filter;
      for (const auto& h : *hits) EXPECT_TRUE(expect(std::stoul(h.id.substr(1)))) << filter << " " << h.id;
    }
  };
  check(R"({"parity": "odd"})", [](size_t i) { return i % 2 == 1; }, 50);
  check(R"({"n": {"$gte": 10, "$lt": 20}})", [](size_t i) { return i >= 10 && i < 20; }, 10);
  check(R"({"n": {"$in": [3, 5, 99]}, "parity": "odd"})", [](size_t i) { return i == 3 || i == 5 || i == 99; }, 3);
  check(R"({"missing": 1})", [](size_t) { return false; }, 0);
  // Logical operators, beside field conditions and nested.
  check(R"({"$or": [{"n": {"$lt": 5}}, {"n": {"$gte": 95}}]})", [](size_t i) { return i < 5 || i >= 95; }, 10);
  check(R"({"$not": {"parity": "odd"}, "n": {"$lt": 10}})", [](size_t i) { return i % 2 == 0 && i < 10; }, 5);
  check(R"({"$and": [{"n": {"$gte": 20}}, {"$or": [{"n": 21}, {"n": 40}, {"parity": "nope"}]}]})",
        [](size_t i) { return i == 21 || i == 40; }, 2);
  check(R"({"$not": {"missing": 1}})", [](size_t) { return true; }, 100);
  // Bad filters are refused when parsed, before any search.
  for (const char* f : {R"({"$or": []})", R"({"$or": {"n": 1}})", R"({"$not": [1]})", R"({"$xor": [{"n": 1}]})"})
    EXPECT_EQ(MetadataFilter::Parse(f).status().code(), Status::Code::kInvalidArgument) << f;
  std::string deep = R"({"n": 1})";
  for (int i = 0; i < 40; ++i) deep = R"({"$not": )" + deep + "}";
  EXPECT_EQ(MetadataFilter::Parse(deep).status().code(), Status::Code::kInvalidArgument);
  EXPECT_FALSE(MetadataFilter::Parse(R"({"n": {"$near": 3}})").ok());
  EXPECT_FALSE(MetadataFilter::Parse("[1]").ok());
}

// A payload index changes how a filtered search finds its documents, never
// what it answers: a collection with one (declared at creation, or added
// later) answers every filter as one without, through updates, deletes and
// a reopen, in the dense modes exact and through HNSW.
TEST(Collection, PayloadIndexAnswersAsTheFilterAlone) {
  Env env;
  Data d = MakeData(400, 8, 4, 11);
  CollectionOptions indexed = Options(8, 4, IndexKind::kHnsw);
  indexed.payload_indexes = {{"parity", PayloadFieldKind::kKeyword}, {"n", PayloadFieldKind::kInteger}};
  auto a = VectorCollection::Create(env.store.get(), "plain", Options(8, 4, IndexKind::kHnsw));
  auto b = VectorCollection::Create(env.store.get(), "indexed", indexed);
  auto later = VectorCollection::Create(env.store.get(), "later", Options(8, 4, IndexKind::kHnsw));
  ASSERT_TRUE(a.ok() && b.ok() && later.ok());
  for (auto* c : {&*a, &*b, &*later}) ASSERT_TRUE((*c)->Upsert(Docs(d, 0, 400)).ok());
  ASSERT_TRUE((*later)->SetPayloadIndexes({{"parity", PayloadFieldKind::kKeyword}}).ok());
  const char* filters[] = {R"({"parity": "odd"})", R"({"n": {"$in": [3, 5, 99, 250]}})",
                           R"({"n": {"$gte": 100, "$lt": 140}, "parity": "even"})", R"({"n": 7, "parity": "even"})",
                           R"({"parity": "odd", "$or": [{"n": {"$lt": 30}}, {"n": {"$gt": 390}}]})"};
  auto compare = [&](const char* when) {
    for (const char* f : filters)
      for (bool exact : {false, true})
        for (QueryMode mode : {QueryMode::kFused, QueryMode::kHs}) {
          SearchSpec so;
          so.k = 20;
          so.exact = exact;
          so.mode = mode;
          so.filter = *MetadataFilter::Parse(f);
          auto want = (*a)->Search(d.hs[3].data(), d.rw[3].data(), so);
          ASSERT_TRUE(want.ok()) << want.status().ToString();
          for (auto* c : {&*b, &*later}) {
            auto got = (**c).Search(d.hs[3].data(), d.rw[3].data(), so);
            ASSERT_TRUE(got.ok()) << got.status().ToString();
            // Exact answers are equal; HNSW's unindexed answer may miss
            // what scoring the candidates finds, so it is held to the
            // exact one by score.
            if (exact) {
              ASSERT_EQ(got->size(), want->size()) << when << " " << f;
              for (size_t i = 0; i < want->size(); ++i) {
                EXPECT_EQ((*got)[i].id, (*want)[i].id) << when << " " << f << " rank " << i;
                EXPECT_NEAR((*got)[i].score, (*want)[i].score, 1e-4);
              }
            } else {
              SearchSpec ex = so;
              ex.exact = true;
              auto truth = (*a)->Search(d.hs[3].data(), d.rw[3].data(), ex);
              ASSERT_EQ(got->size(), truth->size()) << when << " " << f;
              for (const auto& h : *got)
                EXPECT_TRUE(MatchesDocument(*so.filter, (*(**c).Get(h.id))->metadata_json, h.id)) << f << " " << h.id;
            }
          }
        }
  };
  compare("after the first write");
  // Updates move documents between values; deletes take some away.
  std::vector<StoredDocument> changed;
  for (size_t i = 0; i < 100; ++i)
    changed.push_back({"d" + std::to_string(i), "text", json{{"n", 300 + i}, {"parity", i % 3 ? "odd" : "even"}}.dump(),
                       d.hs[i], d.rw[i]});
  std::vector<std::string> gone;
  for (size_t i = 100; i < 200; i += 3) gone.push_back("d" + std::to_string(i));
  for (auto* c : {&*a, &*b, &*later}) {
    ASSERT_TRUE((*c)->Upsert(changed).ok());
    ASSERT_TRUE((*c)->Delete(gone).ok());
  }
  compare("after updates and deletes");
  EXPECT_EQ((*b)->PayloadIndexPoints().at("parity"), (*b)->size());
  // Reopened from the store: the declared indexes come back with the record.
  for (auto* c : {&*b, &*later}) ASSERT_TRUE((*c)->SaveIndex().ok());
  b->reset();
  auto reopened = VectorCollection::Open(env.store.get(), "indexed");
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->payload_indexes(), indexed.payload_indexes);
  *b = std::move(*reopened);
  compare("after a reopen");
  EXPECT_GT((*b)->ReplicaStates()[0].payload_index_bytes, 0u);
  // Unknown kinds and bad keys are refused at creation.
  CollectionOptions bad = Options(8, 4, IndexKind::kFlat);
  bad.payload_indexes = {{"a..b", PayloadFieldKind::kKeyword}};
  auto refused = VectorCollection::Create(env.store.get(), "bad", bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("a..b"), std::string::npos) << refused.status().message();
}

TEST(Collection, BadInputStoresNothing) {
  Env env;
  Data d = MakeData(10, 8, 4, 9);
  auto c = VectorCollection::Create(env.store.get(), "c", Options(8, 4, IndexKind::kFlat));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Upsert(Docs(d, 0, 5)).ok());
  auto bad_batch = [&](std::function<void(std::vector<StoredDocument>&)> damage, const std::string& needle) {
    auto docs = Docs(d, 5, 10);
    damage(docs);
    auto r = (*c)->Upsert(docs);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
    EXPECT_EQ((*c)->size(), 5u);
    EXPECT_FALSE((*(*c)->Get("d5")).has_value());  // the valid documents of the batch are not stored either
  };
  bad_batch([](auto& v) { v[3].hs.pop_back(); }, "hs has 7 dims");
  bad_batch([](auto& v) { v[2].rw.push_back(1); }, "rw has 5 dims");
  bad_batch([](auto& v) { v[1].hs[0] = NAN; }, "NaN or Inf");
  bad_batch([](auto& v) { v[1].rw[2] = INFINITY; }, "NaN or Inf");
  bad_batch([](auto& v) { v[4].metadata_json = "[1,2]"; }, "metadata must be a JSON object");
  bad_batch([](auto& v) { v[4].metadata_json = "{oops"; }, "not valid JSON");
  bad_batch([](auto& v) { v[3].id = "d5"; }, "appears twice");
  bad_batch([](auto& v) { v[0].id = ""; }, "empty id");
  bad_batch([](auto& v) { v[0].text = "bad \xff"; }, "invalid UTF-8");
  auto exists = VectorCollection::Create(env.store.get(), "c", Options(8, 4, IndexKind::kFlat));
  EXPECT_FALSE(exists.ok());
  EXPECT_FALSE(VectorCollection::Open(env.store.get(), "nope").ok());
}

TEST(Collection, Fp16RowsScoreLikeF32AndSurviveASnapshot) {
  Env env;
  Data d = MakeData(300, 40, 20, 10);
  CollectionOptions a = Options(40, 20, IndexKind::kFlat), b = a;
  b.index.fp16_rows = true;
  auto ca = VectorCollection::Create(env.store.get(), "a", a);
  auto cb = VectorCollection::Create(env.store.get(), "b", b);
  ASSERT_TRUE(ca.ok() && cb.ok());
  ASSERT_TRUE((*ca)->Upsert(Docs(d, 0, 300), false).ok());
  ASSERT_TRUE((*cb)->Upsert(Docs(d, 0, 300), false).ok());
  ASSERT_TRUE((*cb)->SaveIndex().ok());
  cb->reset();  // one open handle per collection (the lexical index holds a write lock)
  auto reopened = VectorCollection::Open(env.store.get(), "b");
  ASSERT_TRUE(reopened.ok());
  EXPECT_TRUE((*reopened)->opened_from_snapshot());
  SearchSpec so;
  so.k = 300;
  so.exact = true;
  auto x = (*ca)->Search(d.hs[1].data(), d.rw[1].data(), so);
  auto y = (*reopened)->Search(d.hs[1].data(), d.rw[1].data(), so);
  ASSERT_TRUE(x.ok() && y.ok());
  std::map<std::string, float> fx;
  for (const auto& h : *x) fx[h.id] = h.score;
  double max_err = 0;
  for (const auto& h : *y) max_err = std::max(max_err, double(std::abs(fx.at(h.id) - h.score)));
  EXPECT_LT(max_err, 2e-3);
  EXPECT_GT(max_err, 0.0);  // really stored in half precision
  EXPECT_EQ((*y)[0].id, "d1");
}

TEST(Collection, DocumentsArePagedInIdOrderFromOneSnapshot) {
  Env env;
  auto c = VectorCollection::Create(env.store.get(), "p", Options(8, 4, IndexKind::kFlat));
  ASSERT_TRUE(c.ok());
  const Data d = MakeData(25, 8, 4, 3, 7);
  ASSERT_TRUE((*c)->Upsert(Docs(d, 0, 25)).ok());
  ASSERT_TRUE((*c)->Delete({"d10"}).ok());
  auto replaced = Docs(d, 3, 4);
  replaced[0].text = "replaced";
  ASSERT_TRUE((*c)->Upsert(replaced).ok());
  std::vector<std::string> want;
  for (int i = 0; i < 25; ++i)
    if (i != 10) want.push_back("d" + std::to_string(i));
  std::sort(want.begin(), want.end());  // byte order: d0 d1 d11 ... d19 d2 d20 ...
  std::vector<std::string> got;
  std::string after;
  size_t pages = 0;
  do {
    auto page = (*c)->List(after, 7);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    ASSERT_LE(page->documents.size(), 7u);
    for (const auto& doc : page->documents) {
      got.push_back(doc.id);
      EXPECT_TRUE(doc.hs.empty());  // no vectors in a page
      EXPECT_EQ(doc.text, doc.id == "d3" ? "replaced" : "text " + doc.id.substr(1));
    }
    after = page->next_after;
    ++pages;
  } while (!after.empty() && pages < 10);
  EXPECT_EQ(got, want);
  EXPECT_EQ(pages, 4u);  // 24 documents: 7 + 7 + 7 + 3
  // An `after` that is not stored starts at the next id in byte order.
  auto from = (*c)->List("d105", 2);
  ASSERT_TRUE(from.ok());
  ASSERT_EQ(from->documents.size(), 2u);
  EXPECT_EQ(from->documents[0].id, "d11");
  EXPECT_EQ(from->next_after, "d12");
  EXPECT_EQ((*c)->List("", 0).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(env.store->ListDocuments("nope", "", 5).status().code(), Status::Code::kNotFound);
}

}  // namespace
}  // namespace moeedb
