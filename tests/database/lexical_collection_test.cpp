// A collection's lexical index and hybrid search: under upserts, deletes
// and filters, re-scored on every signal against a BM25 with plain loops
// (tests/index/lexical_corpus.h), caught up from the op log or rebuilt on
// reopening, off for collections recorded before it existed, and bad queries.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "database/vector_collection.h"
#include "index/lexical_index.h"
#include "tests/index/lexical_corpus.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

using json = nlohmann::json;
using test::kCorpus;
using test::ReferenceBm25;

constexpr size_t kDh = 6, kDr = 4;

std::vector<float> Vec(size_t i, size_t dim, float salt) {
  std::vector<float> v(dim);
  for (size_t j = 0; j < dim; ++j) v[j] = std::sin(static_cast<float>(i * 7 + j * 3) + salt) + 0.1f * j;
  return v;
}

StoredDocument Doc(const std::string& id, const std::string& text, size_t i, const std::string& meta = "{}") {
  return {id, text, meta, Vec(i, kDh, 0.3f), Vec(i, kDr, 1.7f)};
}

std::unique_ptr<VectorCollection> MakeCollection(Store* store, bool lexical = true) {
  CollectionOptions o;
  o.dim_hs = kDh;
  o.dim_rw = kDr;
  o.lexical.enabled = lexical;
  auto c = VectorCollection::Create(store, "c", o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

std::vector<std::string> LexicalIdsOf(const VectorCollection& c, const std::string& q, size_t k = 10,
                                      const std::string& filter = "") {
  SearchSpec so;
  so.k = k;
  so.mode = QueryMode::kLexical;
  so.query = q;
  if (!filter.empty()) so.filter = MetadataFilter::Parse(filter).value();
  auto hits = c.Search(nullptr, nullptr, so);
  EXPECT_TRUE(hits.ok()) << hits.status().ToString();
  std::vector<std::string> ids;
  if (hits.ok())
    for (const auto& h : *hits) ids.push_back(h.id);
  return ids;
}

TEST(LexicalCollection, UpsertsAndDeletesNeverLeaveStaleHits) {
  test::TempDir dir;
  auto store = Store::Open(dir / "db");
  ASSERT_TRUE(store.ok());
  auto c = MakeCollection(store->get());
  std::vector<StoredDocument> docs;
  for (size_t i = 0; i < kCorpus.size(); ++i) docs.push_back(Doc("d" + std::to_string(i), kCorpus[i], i));
  ASSERT_TRUE(c->Upsert(docs).ok());
  EXPECT_EQ(LexicalIdsOf(*c, "windowsill"), std::vector<std::string>{"d7"});
  // Replace d7's text: the old words no longer find it, the new ones do.
  ASSERT_TRUE(c->Upsert({Doc("d7", "A parrot talks to the sailors.", 7)}).ok());
  EXPECT_TRUE(LexicalIdsOf(*c, "windowsill").empty());
  EXPECT_EQ(LexicalIdsOf(*c, "parrot sailors"), std::vector<std::string>{"d7"});
  // Delete: gone from lexical and hybrid results alike.
  ASSERT_TRUE(c->Delete({"d7"}).ok());
  EXPECT_TRUE(LexicalIdsOf(*c, "parrot").empty());
  SearchSpec hy;
  hy.k = 20;
  hy.mode = QueryMode::kHybrid;
  hy.query = "parrot sailors";
  auto q = Doc("q", "", 7);
  auto hits = c->Search(q.hs.data(), q.rw.data(), hy);
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  for (const auto& h : *hits) EXPECT_NE(h.id, "d7");
  EXPECT_EQ(hits->size(), kCorpus.size() - 1);
  EXPECT_EQ(c->LexicalIds(), c->IndexedIds());
}

TEST(LexicalCollection, FiltersApplyToLexicalHits) {
  test::TempDir dir;
  auto store = Store::Open(dir / "db");
  ASSERT_TRUE(store.ok());
  auto c = MakeCollection(store->get());
  std::vector<StoredDocument> docs;
  for (size_t i = 0; i < kCorpus.size(); ++i)
    docs.push_back(Doc("d" + std::to_string(i), kCorpus[i], i, json{{"n", i}}.dump()));
  ASSERT_TRUE(c->Upsert(docs).ok());
  auto all = LexicalIdsOf(*c, "dog");
  auto some = LexicalIdsOf(*c, "dog", 10, R"({"n": {"$gte": 3}})");
  EXPECT_NE(std::find(all.begin(), all.end(), "d2"), all.end());
  EXPECT_EQ(std::find(some.begin(), some.end(), "d2"), some.end());
  EXPECT_FALSE(some.empty());
  SearchSpec hy;
  hy.mode = QueryMode::kHybrid;
  hy.query = "dog";
  hy.filter = MetadataFilter::Parse(R"({"n": {"$lt": 5}})").value();
  auto q = Doc("q", "", 2);
  auto hits = c->Search(q.hs.data(), q.rw.data(), hy);
  ASSERT_TRUE(hits.ok());
  ASSERT_FALSE(hits->empty());
  for (const auto& h : *hits) EXPECT_LT(json::parse(h.metadata_json)["n"].get<int>(), 5);
}

TEST(LexicalCollection, HybridRescoresEveryCandidateOnEverySignal) {
  test::TempDir dir;
  auto store = Store::Open(dir / "db");
  ASSERT_TRUE(store.ok());
  auto c = MakeCollection(store->get());
  std::vector<StoredDocument> docs;
  for (size_t i = 0; i < kCorpus.size(); ++i) docs.push_back(Doc("d" + std::to_string(i), kCorpus[i], i));
  ASSERT_TRUE(c->Upsert(docs).ok());
  auto q = Doc("q", "", 5);
  SearchSpec dense;
  dense.k = kCorpus.size();
  dense.mode = QueryMode::kHs;
  dense.exact = true;
  auto d = c->Search(q.hs.data(), q.rw.data(), dense);
  ASSERT_TRUE(d.ok());
  std::map<std::string, std::pair<float, float>> cos;
  for (const auto& h : *d) cos[h.id] = {h.score_hs, h.score_rw};
  // The reference BM25 of the same query over the same texts.
  auto ix = LexicalIndex::Open(dir / "ref", LexicalSpec{true});
  ASSERT_TRUE(ix.ok());
  std::vector<std::vector<std::string>> terms;
  for (const auto& t : kCorpus) terms.push_back((*ix)->Terms(t));
  const std::string text = "supersonic pressure";
  const auto bm25 = ReferenceBm25(terms, (*ix)->Terms(text), 1.2, 0.75);
  for (FusionKind f : {FusionKind::kWeighted, FusionKind::kRrf}) {
    SearchSpec hy;
    hy.k = kCorpus.size();
    hy.mode = QueryMode::kHybrid;
    hy.query = text;
    hy.fusion = f;
    hy.beta = 1.5;
    auto hits = c->Search(q.hs.data(), q.rw.data(), hy);
    ASSERT_TRUE(hits.ok()) << hits.status().ToString();
    ASSERT_EQ(hits->size(), kCorpus.size());
    for (const auto& h : *hits) {
      EXPECT_FLOAT_EQ(h.score_hs, cos[h.id].first) << h.id;
      EXPECT_FLOAT_EQ(h.score_rw, cos[h.id].second) << h.id;
      const size_t i = std::stoul(h.id.substr(1));
      const double want = bm25.count(i) ? bm25.at(i) : 0.0;
      EXPECT_NEAR(h.score_lex, want, 1e-5 * std::max(1.0, want)) << h.id;
    }
    for (size_t r = 1; r < hits->size(); ++r) EXPECT_GE((*hits)[r - 1].score, (*hits)[r].score);
    for (const auto& h : *hits) EXPECT_NEAR(h.part_hs + h.part_rw + h.part_lex, h.score, 1e-6) << h.id;
  }
  // Dense modes: fused parts are score_hs and alpha * score_rw; hs/rw put the score on their signal.
  SearchSpec fused;
  fused.k = 5;
  fused.alpha = 0.7f;
  fused.exact = true;
  for (QueryMode m : {QueryMode::kFused, QueryMode::kHs, QueryMode::kRw}) {
    fused.mode = m;
    auto hits = c->Search(q.hs.data(), q.rw.data(), fused);
    ASSERT_TRUE(hits.ok());
    ASSERT_FALSE(hits->empty());
    for (const auto& h : *hits) {
      const float hs = m == QueryMode::kRw ? 0.0f : h.score_hs;
      const float rw = m == QueryMode::kFused ? 0.7f * h.score_rw : m == QueryMode::kRw ? h.score_rw : 0.0f;
      EXPECT_FLOAT_EQ(h.part_hs, hs) << h.id;
      EXPECT_FLOAT_EQ(h.part_rw, rw) << h.id;
      EXPECT_EQ(h.part_lex, 0.0f);
      EXPECT_NEAR(h.part_hs + h.part_rw, h.score, 1e-5) << h.id;
    }
  }
  // The fused ranking is what Fuse gives on those scores (weighted, min-max).
  std::vector<FusedCandidate> ref;
  for (const auto& [id, p] : cos) {
    const size_t i = std::stoul(id.substr(1));
    ref.push_back({i, p.first, p.second, bm25.count(i) ? bm25.at(i) : 0.0});
  }
  FusionOptions fo;
  fo.w_rw = c->default_alpha();
  fo.w_lex = 1.5;
  Fuse(fo, &ref);
  SearchSpec hy;
  hy.k = 5;
  hy.mode = QueryMode::kHybrid;
  hy.query = text;
  hy.beta = 1.5;
  hy.fusion = FusionKind::kWeighted;
  auto top = c->Search(q.hs.data(), q.rw.data(), hy);
  ASSERT_TRUE(top.ok());
  ASSERT_EQ(top->size(), 5u);
  for (size_t r = 0; r < 5; ++r) EXPECT_EQ((*top)[r].id, "d" + std::to_string(ref[r].id)) << r;
}

TEST(LexicalCollection, CatchesUpFromTheOpLogOrRebuilds) {
  test::TempDir dir;
  std::vector<uint64_t> ids;
  {
    auto store = Store::Open(dir / "db");
    ASSERT_TRUE(store.ok());
    auto c = MakeCollection(store->get());
    for (size_t i = 0; i < kCorpus.size(); ++i) ASSERT_TRUE(c->Upsert({Doc("d" + std::to_string(i), kCorpus[i], i)}).ok());
    ASSERT_TRUE(c->SaveIndex().ok());  // commits the lexical index, trims the op log
    ASSERT_TRUE(c->Upsert({Doc("d3", "Replaced text about parrots.", 3)}).ok());
    ASSERT_TRUE(c->Delete({"d2"}).ok());
    ids = c->IndexedIds();
    // No SaveIndex: the lexical index has uncommitted changes, lost on close.
  }
  {
    auto store = Store::Open(dir / "db");
    ASSERT_TRUE(store.ok());
    auto c = VectorCollection::Open(store->get(), "c");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_FALSE((*c)->lexical_rebuilt());  // caught up from the op log
    EXPECT_EQ((*c)->LexicalIds(), ids);
    EXPECT_EQ(LexicalIdsOf(**c, "parrots"), std::vector<std::string>{"d3"});
    EXPECT_TRUE(LexicalIdsOf(**c, "chasing").empty());  // d2's words
  }
  // The lexical folder lost: rebuilt from the store.
  std::filesystem::path lexdir;
  for (const auto& e : std::filesystem::directory_iterator(dir / "db/indexes"))
    if (e.path().string().size() > 8 && e.path().extension() == ".lexical") lexdir = e.path();
  ASSERT_FALSE(lexdir.empty());
  std::filesystem::remove_all(lexdir);
  auto store = Store::Open(dir / "db");
  ASSERT_TRUE(store.ok());
  auto c = VectorCollection::Open(store->get(), "c");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE((*c)->lexical_rebuilt());
  EXPECT_EQ((*c)->LexicalIds(), ids);
  EXPECT_EQ(LexicalIdsOf(**c, "parrots"), std::vector<std::string>{"d3"});
}

TEST(LexicalCollection, CollectionsRecordedBeforeLexicalOpenWithItOff) {
  test::TempDir dir;
  auto store = Store::Open(dir / "db");
  ASSERT_TRUE(store.ok());
  {
    auto c = MakeCollection(store->get());
    ASSERT_TRUE(c->Upsert({Doc("a", "old collection text", 1)}).ok());
    ASSERT_TRUE(c->SaveIndex().ok());
  }
  // Rewrite the record as a collection from before the lexical index.
  auto rec = (*store)->GetCollection("c");
  ASSERT_TRUE(rec.ok());
  json spec = json::parse(rec->spec_json);
  spec.erase("lexical");
  ASSERT_TRUE((*store)->UpdateSpec("c", rec->spec_json, spec.dump()).ok());
  auto c = VectorCollection::Open(store->get(), "c");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE((*c)->has_lexical());
  auto q = Doc("q", "", 1);
  SearchSpec dense;
  auto hits = (*c)->Search(q.hs.data(), q.rw.data(), dense);
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->size(), 1u);
  EXPECT_EQ((*hits)[0].id, "a");
  for (QueryMode m : {QueryMode::kLexical, QueryMode::kHybrid}) {
    SearchSpec so;
    so.mode = m;
    so.query = "old";
    auto r = (*c)->Search(q.hs.data(), q.rw.data(), so);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("no lexical index"), std::string::npos) << r.status().message();
  }
}

TEST(LexicalCollection, BadQueriesAreClearErrors) {
  test::TempDir dir;
  auto store = Store::Open(dir / "db");
  ASSERT_TRUE(store.ok());
  auto c = MakeCollection(store->get());
  ASSERT_TRUE(c->Upsert({Doc("a", "some words", 1)}).ok());
  auto q = Doc("q", "", 1);
  auto expect_bad = [&](SearchSpec so, const std::string& needle, const float* hs, const float* rw) {
    auto r = c->Search(hs, rw, so);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  SearchSpec so;
  so.mode = QueryMode::kHybrid;
  so.query = "words";
  so.beta = -1;
  expect_bad(so, "weights", q.hs.data(), q.rw.data());
  so.beta = 1;
  so.rrf_k = 0;
  expect_bad(so, "rrf k", q.hs.data(), q.rw.data());
  so.rrf_k = 60;
  expect_bad(so, "vectors", nullptr, nullptr);
  so.query.clear();
  expect_bad(so, "query text", q.hs.data(), q.rw.data());
  SearchSpec lex;
  lex.mode = QueryMode::kLexical;
  expect_bad(lex, "query text", nullptr, nullptr);
  // A collection created with lexical off.
  CollectionOptions off;
  off.dim_hs = kDh;
  off.dim_rw = kDr;
  off.lexical.enabled = false;
  auto plain = VectorCollection::Create(store->get(), "plain", off);
  ASSERT_TRUE(plain.ok());
  lex.query = "words";
  auto r = (*plain)->Search(nullptr, nullptr, lex);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no lexical index"), std::string::npos);
  // Bad lexical settings on create.
  CollectionOptions bad = off;
  bad.lexical = LexicalSpec{true, "klingon"};
  EXPECT_FALSE(VectorCollection::Create(store->get(), "bad", bad).ok());
}

}  // namespace
}  // namespace moeedb
