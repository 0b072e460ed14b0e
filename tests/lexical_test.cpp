// Lexical (BM25) search and hybrid fusion: the index against a BM25 written
// here with plain loops, the fusion formulas against hand-derived values,
// and the collection's lexical index under upserts, deletes, filters,
// reopening (catch-up and rebuild), collections recorded before it existed,
// and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "index/fusion.h"
#include "index/lexical_index.h"
#include "database/vector_collection.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

const std::vector<std::string> kCorpus = {
    "The boundary layer on a flat plate thickens downstream of the leading edge.",
    "Heat transfer in supersonic flow over a cone was measured in the wind tunnel.",
    "A dog runs through the snow, chasing a red ball.",
    "Dogs running on the beach at sunset.",
    "The pressure distribution on a wing at high angles of attack.",
    "Running shoes for long-distance runners wear out after about 500 miles.",
    "Supersonic wind tunnels need a large pressure ratio to start.",
    "The cat sleeps on the warm windowsill.",
    "Laminar flow over a flat plate: the boundary layer equations and their similarity solution.",
    "A study of turbulent boundary layers in adverse pressure gradients, with heat transfer.",
    "Wing flutter appears when aerodynamic forces couple with the structure's elastic modes.",
    "The snow fell all night and the roads were closed.",
    "Shock waves form ahead of blunt bodies in supersonic and hypersonic flow.",
    "How to train a dog to fetch a ball.",
    "Heat heat heat: a very repetitive sentence about heat.",
    "Pressure.",
};

// BM25 as the header states it, over the term lists the index itself makes
// (so tokenisation and stemming are the same), with plain loops.
std::map<size_t, double> ReferenceBm25(const std::vector<std::vector<std::string>>& docs,
                                       const std::vector<std::string>& query, double k1, double b) {
  const double N = static_cast<double>(docs.size());
  double avgdl = 0;
  for (const auto& d : docs) avgdl += static_cast<double>(d.size());
  avgdl /= N;
  std::map<size_t, double> scores;
  for (size_t i = 0; i < docs.size(); ++i) {
    double s = 0;
    bool any = false;
    for (const auto& t : query) {  // a repeated query word counts once per occurrence
      double n = 0;
      for (const auto& d : docs) n += std::count(d.begin(), d.end(), t) > 0 ? 1 : 0;
      const double f = static_cast<double>(std::count(docs[i].begin(), docs[i].end(), t));
      if (f == 0) continue;
      any = true;
      const double idf = std::log(1 + (N - n + 0.5) / (n + 0.5));
      s += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * static_cast<double>(docs[i].size()) / avgdl));
    }
    if (any) scores[i] = s;
  }
  return scores;
}

std::unique_ptr<LexicalIndex> BuildIndex(const test::TempDir& dir, const LexicalSpec& spec) {
  auto ix = LexicalIndex::Open(dir / "lex", spec);
  EXPECT_TRUE(ix.ok()) << ix.status().ToString();
  std::vector<uint64_t> ids;
  std::vector<const std::string*> texts;
  for (size_t i = 0; i < kCorpus.size(); ++i) ids.push_back(i + 1), texts.push_back(&kCorpus[i]);
  EXPECT_TRUE((*ix)->Replace(ids, texts).ok());
  return std::move(ix).value();
}

TEST(LexicalIndex, TermsAreLowercasedAndStemmed) {
  test::TempDir dir;
  auto ix = LexicalIndex::Open(dir / "lex", LexicalSpec{true});
  ASSERT_TRUE(ix.ok());
  auto t = (*ix)->Terms("Dogs RUNNING, dog runs!");
  std::sort(t.begin(), t.end());
  EXPECT_EQ(t, (std::vector<std::string>{"dog", "dog", "run", "run"}));
  LexicalSpec none{true, "none"};
  auto raw = LexicalIndex::Open(dir / "raw", none);
  ASSERT_TRUE(raw.ok());
  auto r = (*raw)->Terms("Dogs running");
  std::sort(r.begin(), r.end());
  EXPECT_EQ(r, (std::vector<std::string>{"dogs", "running"}));
}

TEST(LexicalIndex, SearchEqualsPlainLoopBm25) {
  for (auto [k1, b] : {std::pair{1.2, 0.75}, std::pair{2.0, 0.3}, std::pair{0.9, 1.0}}) {
    test::TempDir dir;
    LexicalSpec spec{true, "english", k1, b};
    auto ix = BuildIndex(dir, spec);
    std::vector<std::vector<std::string>> docs;
    for (const auto& t : kCorpus) docs.push_back(ix->Terms(t));
    for (const std::string q : {"boundary layer flat plate", "supersonic heat transfer", "dog running in snow",
                                "pressure", "heat heat", "wing flutter aerodynamic", "the", "nothing matches zzz"}) {
      const auto ref = ReferenceBm25(docs, ix->Terms(q), k1, b);
      std::vector<std::pair<double, uint64_t>> want;
      for (auto [i, s] : ref) want.push_back({-s, i + 1});
      std::sort(want.begin(), want.end());
      if (want.size() > 10) want.resize(10);
      auto got = ix->Search(q, 10, {});
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_EQ(got->size(), want.size()) << q;
      for (size_t r = 0; r < want.size(); ++r) {
        EXPECT_EQ((*got)[r].id, want[r].second) << q << " rank " << r;
        EXPECT_NEAR((*got)[r].score, -want[r].first, 1e-6 * std::abs(want[r].first)) << q << " rank " << r;
      }
      // Score() on every id, matched or not, by the same formula.
      std::vector<uint64_t> all;
      for (size_t i = 0; i < kCorpus.size(); ++i) all.push_back(kCorpus.size() - i);  // any order
      auto sc = ix->Score(q, all);
      ASSERT_TRUE(sc.ok());
      for (size_t i = 0; i < all.size(); ++i) {
        const auto it = ref.find(all[i] - 1);
        const double expect = it == ref.end() ? 0.0 : it->second;
        EXPECT_NEAR((*sc)[i], expect, 1e-6 * std::max(1.0, expect)) << q << " id " << all[i];
      }
    }
  }
}

TEST(LexicalIndex, FilterAndRemoveAndClear) {
  test::TempDir dir;
  auto ix = BuildIndex(dir, LexicalSpec{true});
  auto even = [](uint64_t id) { return id % 2 == 0; };
  auto hits = ix->Search("dog", 10, even);
  ASSERT_TRUE(hits.ok());
  ASSERT_FALSE(hits->empty());
  for (const auto& h : *hits) EXPECT_EQ(h.id % 2, 0u);
  ASSERT_TRUE(ix->Remove({3, 4, 14, 999}).ok());  // 999 absent: ignored
  hits = ix->Search("dog", 10, {});
  ASSERT_TRUE(hits.ok());
  for (const auto& h : *hits) EXPECT_TRUE(h.id != 3 && h.id != 4 && h.id != 14);
  EXPECT_EQ(ix->size(), kCorpus.size() - 3);
  ASSERT_TRUE(ix->Clear().ok());
  EXPECT_EQ(ix->size(), 0u);
  EXPECT_TRUE(ix->Search("dog", 10, {})->empty());
}

TEST(LexicalIndex, CommitRecordsTheSequenceAcrossReopen) {
  test::TempDir dir;
  {
    auto ix = BuildIndex(dir, LexicalSpec{true});
    ASSERT_TRUE(ix->Commit(42).ok());
  }
  auto ix = LexicalIndex::Open(dir / "lex", LexicalSpec{true});
  ASSERT_TRUE(ix.ok());
  EXPECT_EQ((*ix)->committed_seq(), 42u);
  EXPECT_EQ((*ix)->size(), kCorpus.size());
}

TEST(LexicalIndex, AnUnreadableDatabaseStartsEmptyAndALockedOneIsLeftAlone) {
  test::TempDir dir;
  {
    auto ix = BuildIndex(dir, LexicalSpec{true});
    ASSERT_TRUE(ix->Commit(7).ok());
    // A second handle while the first is open: an error, and nothing wiped.
    auto again = LexicalIndex::Open(dir / "lex", LexicalSpec{true});
    ASSERT_FALSE(again.ok());
    EXPECT_NE(again.status().message().find("open elsewhere"), std::string::npos) << again.status().message();
  }
  EXPECT_EQ((*LexicalIndex::Open(dir / "lex", LexicalSpec{true}))->size(), kCorpus.size());
  // Overwrite every file of the database with garbage.
  for (const auto& e : std::filesystem::directory_iterator(dir / "lex"))
    if (e.is_regular_file()) test::WriteFile(e.path().string(), std::string(100, 'x'));
  auto ix = LexicalIndex::Open(dir / "lex", LexicalSpec{true});
  ASSERT_TRUE(ix.ok()) << ix.status().ToString();
  EXPECT_EQ((*ix)->size(), 0u);
  EXPECT_EQ((*ix)->committed_seq(), 0u);
}

TEST(LexicalIndex, BadSettingsAreRefused) {
  EXPECT_FALSE((LexicalSpec{true, "klingon"}.Validate().ok()));
  EXPECT_FALSE((LexicalSpec{true, "english", -1.0}.Validate().ok()));
  EXPECT_FALSE((LexicalSpec{true, "english", 1.2, 1.5}.Validate().ok()));
  EXPECT_FALSE(LexicalSpec::FromJson(R"({"enabled": true, "k2": 3})").ok());
  EXPECT_TRUE(LexicalSpec::FromJson(R"({"enabled": true, "language": "french", "k1": 1.5, "b": 0.5})").ok());
}

// ---- fusion -----------------------------------------------------------------

TEST(Fusion, WeightedMinMaxAndZScoreByHand) {
  // hs: 0.9 0.5 0.1   rw: 0.2 0.4 0.6   lex: 0 3 6
  std::vector<FusedCandidate> c = {{1, 0.9, 0.2, 0.0}, {2, 0.5, 0.4, 3.0}, {3, 0.1, 0.6, 6.0}};
  FusionOptions o;
  o.w_hs = 1, o.w_rw = 0.5, o.w_lex = 2;
  auto mm = c;
  Fuse(o, &mm);
  // min-max: hs 1, .5, 0; rw 0, .5, 1; lex 0, .5, 1 -> 1; 1.75; 2.5
  ASSERT_EQ(mm.size(), 3u);
  EXPECT_EQ(mm[0].id, 3u);
  EXPECT_NEAR(mm[0].fused, 2.5, 1e-12);
  EXPECT_EQ(mm[1].id, 2u);
  EXPECT_NEAR(mm[1].fused, 1.75, 1e-12);
  EXPECT_NEAR(mm[2].fused, 1.0, 1e-12);
  // Each signal's share: id 2 (the middle one) gets 1*.5, .5*.5, 2*.5.
  EXPECT_NEAR(mm[1].part_hs, 0.5, 1e-12);
  EXPECT_NEAR(mm[1].part_rw, 0.25, 1e-12);
  EXPECT_NEAR(mm[1].part_lex, 1.0, 1e-12);
  EXPECT_NEAR(mm[0].part_hs, 0.0, 1e-12);  // id 3: lowest hs
  EXPECT_NEAR(mm[0].part_rw, 0.5, 1e-12);
  EXPECT_NEAR(mm[0].part_lex, 2.0, 1e-12);
  // z-score: each signal is (-1.2247, 0, 1.2247) up to sign; hs descending, rw/lex ascending.
  o.norm = ScoreNorm::kZScore;
  auto z = c;
  Fuse(o, &z);
  const double u = std::sqrt(1.5);
  EXPECT_EQ(z[0].id, 3u);
  EXPECT_NEAR(z[0].fused, -u + 0.5 * u + 2 * u, 1e-9);
  EXPECT_NEAR(z[1].fused, 0.0, 1e-9);
  EXPECT_NEAR(z[2].fused, u - 0.5 * u - 2 * u, 1e-9);
}

TEST(Fusion, RrfByHandAndZeroLexicalGetsNoRank) {
  std::vector<FusedCandidate> c = {{1, 0.9, 0.2, 0.0}, {2, 0.5, 0.4, 3.0}, {3, 0.1, 0.6, 6.0}};
  FusionOptions o;
  o.kind = FusionKind::kRrf;
  o.w_hs = 1, o.w_rw = 1, o.w_lex = 1, o.rrf_k = 60;
  Fuse(o, &c);
  std::map<uint64_t, double> f;
  for (const auto& x : c) f[x.id] = x.fused;
  EXPECT_NEAR(f[1], 1.0 / 61 + 1.0 / 63, 1e-12);              // no lexical term: BM25 0
  EXPECT_NEAR(f[2], 1.0 / 62 + 1.0 / 62 + 1.0 / 62, 1e-12);
  EXPECT_NEAR(f[3], 1.0 / 63 + 1.0 / 61 + 1.0 / 61, 1e-12);
  EXPECT_EQ(c[0].id, 3u);
  EXPECT_NEAR(c[0].part_hs, 1.0 / 63, 1e-12);
  EXPECT_NEAR(c[0].part_rw, 1.0 / 61, 1e-12);
  EXPECT_NEAR(c[0].part_lex, 1.0 / 61, 1e-12);
  EXPECT_EQ(c[2].id, 1u);
  EXPECT_EQ(c[2].part_lex, 0.0);  // no lexical term
}

TEST(Fusion, BadOptionsAreRefused) {
  FusionOptions o;
  o.w_lex = -1;
  EXPECT_FALSE(o.Validate().ok());
  o = FusionOptions{};
  o.w_hs = o.w_rw = o.w_lex = 0;
  EXPECT_FALSE(o.Validate().ok());
  o = FusionOptions{};
  o.rrf_k = 0;
  EXPECT_FALSE(o.Validate().ok());
  o.w_rw = std::nan("");
  EXPECT_FALSE(o.Validate().ok());
  EXPECT_FALSE(kFusionKinds.Parse("borda").ok());
  EXPECT_FALSE(kScoreNorms.Parse("l2").ok());
  EXPECT_FALSE(kQueryModes.Parse("sparse").ok());
}

// ---- collections ------------------------------------------------------------

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
  ASSERT_TRUE((*store)->UpdateSpec("c", spec.dump()).ok());
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
