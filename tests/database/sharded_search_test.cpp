// A collection split into shards answers exactly as one index: the same
// documents in a collection of one shard and one of six, 200 queries in
// every mode (fused, hs, rw, lexical, hybrid with each fusion), with and
// without filters, after replacements and deletes and after reopening. Each
// shard holds exactly its documents; a shard without a replica fails the
// search or, when partial results are asked for, is named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <functional>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "database/shard_replica.h"
#include "database/vector_collection.h"
#include "storage/rocksdb_store.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

using json = nlohmann::json;
constexpr size_t kDh = 16, kDr = 8;
constexpr ShardLayout kRange = ShardLayout::kRange;  // how collections created here are placed

std::vector<float> Gaussian(uint64_t seed, size_t dim) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n;
  std::vector<float> v(dim);
  for (auto& x : v) x = n(rng);
  return v;
}

// Sentences of the STS-B sample: column 1 documents, column 2 queries.
void ReadSentences(std::vector<std::string>* docs, std::vector<std::string>* queries) {
  std::ifstream in(test::Data("stsb-sample.csv"));
  std::string line;
  std::set<std::string> seen;
  while (std::getline(in, line)) {
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cols.push_back(c);
    if (cols.size() < 3) continue;
    if (seen.insert(cols[0]).second) docs->push_back(cols[0]);
    queries->push_back(cols[1]);
  }
}

std::vector<StoredDocument> Documents(const std::vector<std::string>& texts, size_t n, uint64_t salt) {
  std::vector<StoredDocument> docs;
  for (size_t i = 0; i < n && i < texts.size(); ++i) {
    const std::string meta = "{\"group\": " + std::to_string(i % 5) + ", \"year\": " + std::to_string(1990 + i % 30) + "}";
    docs.push_back({"doc-" + std::to_string(i), texts[i], meta, Gaussian(i * 2 + salt, kDh), Gaussian(i * 2 + 1 + salt, kDr)});
  }
  return docs;
}

std::unique_ptr<VectorCollection> Make(Store* store, const std::string& name, uint32_t shards,
                                       ShardPeers* peers = nullptr, const std::string& root = "") {
  CollectionOptions o;
  o.dim_hs = kDh;
  o.dim_rw = kDr;
  o.shards = shards;
  auto c = VectorCollection::Create(store, name, o, root, peers);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

// The searches every query runs: each mode, hybrid with each fusion.
std::vector<SearchSpec> Modes(const std::string& query, bool filtered) {
  std::vector<SearchSpec> out;
  auto add = [&](QueryMode m, std::optional<FusionKind> f = {}, std::optional<ScoreNorm> n = {}) {
    SearchSpec s;
    s.query = query;
    s.k = 10;
    s.mode = m;
    s.fusion = f;
    s.norm = n;
    s.exact = true;
    if (filtered) EXPECT_TRUE(s.SetFilter(R"({"group": {"$in": [1, 3]}, "year": {"$gte": 1995}})").ok());
    out.push_back(s);
  };
  add(QueryMode::kFused);
  add(QueryMode::kHs);
  add(QueryMode::kRw);
  add(QueryMode::kLexical);
  add(QueryMode::kHybrid);
  add(QueryMode::kHybrid, FusionKind::kWeighted, ScoreNorm::kMinMax);
  add(QueryMode::kHybrid, FusionKind::kWeighted, ScoreNorm::kZScore);
  return out;
}

// Runs 200 queries in every mode on both; *compared: the hits compared.
void ExpectSameAnswers(const VectorCollection& one, const VectorCollection& sharded,
                       const std::vector<std::string>& queries, size_t* compared) {
  *compared = 0;
  for (size_t qi = 0; qi < 200; ++qi) {
    const auto hs = Gaussian(1000000 + qi, kDh), rw = Gaussian(2000000 + qi, kDr);
    for (const SearchSpec& s : Modes(queries[qi % queries.size()], qi % 2 == 1)) {
      auto a = one.Search(hs.data(), rw.data(), s);
      auto b = sharded.Search(hs.data(), rw.data(), s);
      ASSERT_TRUE(a.ok()) << a.status().ToString();
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      const std::string what = "query " + std::to_string(qi) + " mode " + kQueryModes.Name(s.mode);
      ASSERT_EQ(a->size(), b->size()) << what;
      for (size_t i = 0; i < a->size(); ++i) {
        EXPECT_EQ((*a)[i].id, (*b)[i].id) << what << " rank " << i;
        EXPECT_NEAR((*a)[i].score, (*b)[i].score, 1e-6) << what;
        EXPECT_NEAR((*a)[i].score_hs, (*b)[i].score_hs, 1e-6) << what;
        EXPECT_NEAR((*a)[i].score_rw, (*b)[i].score_rw, 1e-6) << what;
        EXPECT_NEAR((*a)[i].score_lex, (*b)[i].score_lex, 1e-6) << what;
        ++*compared;
      }
    }
  }
}

// MurmurHash3's fmix64, written here from its published constants.
uint64_t Fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  return k ^ (k >> 33);
}

TEST(ShardKey, IsFnv1a64MixedByFmix64ShiftedRightOneBit) {
  // Published FNV-1a 64 values: "" -> cbf29ce484222325, "a" -> af63dc4c8601ec8c.
  EXPECT_EQ(ShardKey(""), Fmix64(0xcbf29ce484222325ull) >> 1);
  EXPECT_EQ(ShardKey("a"), Fmix64(0xaf63dc4c8601ec8cull) >> 1);
  EXPECT_EQ(ShardKey("a"), 4706636184713914157ull);  // the same by an independent (Python) computation
  EXPECT_EQ(ShardOfId("a", 6, ShardLayout::kModulo), 5u);
  EXPECT_EQ(ShardOfId("anything", 1, kRange), 0u);
  // Every shard gets a fair share of ids in patterns (sequential, even only,
  // a fixed suffix), every residue of an even shard count included.
  for (const auto& make : std::vector<std::function<std::string(int)>>{
           [](int i) { return "doc-" + std::to_string(i); }, [](int i) { return std::to_string(2 * i); },
           [](int i) { return "item" + std::to_string(i) + "-x"; }}) {
    std::vector<int> per(6);
    for (int i = 0; i < 6000; ++i) ++per[ShardOfId(make(i), 6, ShardLayout::kModulo)];
    for (int n : per) EXPECT_NEAR(n, 1000, 120) << make(0);
  }
}

// Each of `c`'s replicas is of the split into `shards`, and every document in
// its dense index lies in its shard by `layout`; how many documents they hold.
size_t ExpectEachReplicaHoldsItsShard(const VectorCollection& c, uint32_t shards, ShardLayout layout) {
  size_t held = 0;
  for (const auto& r : c.Contents()) {
    EXPECT_EQ(r.shards, shards);
    for (uint64_t internal : r.dense) {
      auto d = c.GetByInternal(internal);
      if (!d.ok()) {
        ADD_FAILURE() << d.status().ToString();
        continue;
      }
      EXPECT_EQ(ShardOfId(d->id, shards, layout), r.shard) << d->id;
      ++held;
    }
  }
  return held;
}

// The range layout: shard k of S holds the keys from ShardKeyFloor(k, S) up
// to ShardKeyFloor(k + 1, S); the floors split [0, 2^63) into S ranges whose
// widths differ by at most one, and every key falls in the range of its shard.
TEST(ShardKey, TheRangeLayoutSplitsTheKeysIntoSEqualRanges) {
  constexpr uint64_t kEnd = 1ull << 63;
  std::mt19937_64 rng(7);
  for (uint32_t count : {1u, 2u, 3u, 5u, 6u, 7u, 64u, 1000u, 65535u}) {
    EXPECT_EQ(ShardKeyFloor(0, count), 0u);
    EXPECT_EQ(ShardKeyFloor(count, count), kEnd);
    const uint64_t width = kEnd / count;
    for (uint32_t k = 0; k < count; ++k) {
      const uint64_t lo = ShardKeyFloor(k, count), hi = ShardKeyFloor(k + 1, count);
      ASSERT_TRUE(hi - lo == width || hi - lo == width + 1) << count << " " << k;
      EXPECT_EQ(ShardOfKey(lo, count, kRange), k);
      EXPECT_EQ(ShardOfKey(hi - 1, count, kRange), k);
    }
    for (int i = 0; i < 2000; ++i) {
      const uint64_t key = rng() >> 1;
      const uint32_t k = ShardOfKey(key, count, kRange);
      ASSERT_LT(k, count);
      EXPECT_LE(ShardKeyFloor(k, count), key);
      EXPECT_LT(key, ShardKeyFloor(k + 1, count));
    }
  }
  // Ids in patterns get fair shares in this layout too.
  std::vector<int> per(6);
  for (int i = 0; i < 6000; ++i) ++per[ShardOfId("doc-" + std::to_string(i), 6, kRange)];
  for (int n : per) EXPECT_NEAR(n, 1000, 120);
  // Splitting S into 2S halves each range: a key's shard of 2S is 2k or 2k + 1.
  for (int i = 0; i < 2000; ++i) {
    const uint64_t key = rng() >> 1;
    EXPECT_EQ(ShardOfKey(key, 6, kRange) / 2, ShardOfKey(key, 3, kRange));
  }
}

// A collection recorded before the layout existed (its spec has no
// shard_layout) keeps the modulo layout its replicas were built by; a new
// one records the range layout.
TEST(ShardedSearch, ACollectionRecordedWithoutALayoutKeepsTheModuloLayout) {
  test::TempDir dir;
  auto store = RocksStore::Open(dir / "db");
  ASSERT_TRUE(store.ok());
  std::vector<std::string> texts, queries;
  ReadSentences(&texts, &queries);
  auto c = Make(store->get(), "c", 3);
  ASSERT_TRUE(c);
  EXPECT_EQ(json::parse((*store)->GetCollection("c")->spec_json).value("shard_layout", ""), "range");
  const auto docs = Documents(texts, 150, 0);
  ASSERT_TRUE(c->Upsert(docs).ok());
  const std::string index_dir = c->index_dir();
  c.reset();
  // As an older moeedb recorded it, and no folders: built from the store.
  CollectionRecord rec = *(*store)->GetCollection("c");
  json spec = json::parse(rec.spec_json);
  spec.erase("shard_layout");
  ASSERT_TRUE((*store)->UpdateSpec("c", rec.spec_json, spec.dump()).ok());
  for (uint32_t k = 0; k < 3; ++k) ShardReplica::RemoveFolders(ShardReplica::Dir(index_dir, k, 3));
  auto old = VectorCollection::Open(store->get(), "c");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(ExpectEachReplicaHoldsItsShard(**old, 3, ShardLayout::kModulo), docs.size());
}

// A range-placed collection's folders written without a placement record
// (as an older node, which places by modulo whatever the spec says, leaves
// them in a rolling upgrade) are rebuilt from the store, not opened from
// their snapshot; with the record, they open from it.
TEST(ShardedSearch, FoldersAnotherPlacementFilledAreRebuiltNotOpened) {
  test::TempDir dir;
  auto store = RocksStore::Open(dir / "db");
  ASSERT_TRUE(store.ok());
  std::vector<std::string> texts, queries;
  ReadSentences(&texts, &queries);
  auto c = Make(store->get(), "c", 2);
  ASSERT_TRUE(c);
  const auto docs = Documents(texts, 120, 0);
  ASSERT_TRUE(c->Upsert(docs).ok());
  ASSERT_TRUE(c->SaveIndex().ok());
  const std::string index_dir = c->index_dir();
  c.reset();
  {
    auto kept = VectorCollection::Open(store->get(), "c");
    ASSERT_TRUE(kept.ok()) << kept.status().ToString();
    EXPECT_TRUE((*kept)->opened_from_snapshot());
  }
  for (uint32_t k = 0; k < 2; ++k) {
    ASSERT_TRUE(std::filesystem::remove(ShardReplica::Dir(index_dir, k, 2) + "/placement"));
  }
  auto again = VectorCollection::Open(store->get(), "c");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE((*again)->opened_from_snapshot());
  EXPECT_EQ(ExpectEachReplicaHoldsItsShard(**again, 2, kRange), docs.size());
}

TEST(ShardedSearch, SixShardsAnswerAsOneIndexInEveryMode) {
  test::TempDir dir;
  auto store = RocksStore::Open(dir / "db");
  ASSERT_TRUE(store.ok());
  std::vector<std::string> texts, queries;
  ReadSentences(&texts, &queries);
  ASSERT_GE(texts.size(), 800u);
  auto one = Make(store->get(), "one", 1);
  auto six = Make(store->get(), "six", 6);
  ASSERT_TRUE(one && six);
  const auto docs = Documents(texts, 800, 0);
  for (size_t at = 0; at < docs.size(); at += 200) {
    std::vector<StoredDocument> batch(docs.begin() + at, docs.begin() + std::min(docs.size(), at + 200));
    ASSERT_TRUE(one->Upsert(batch).ok());
    ASSERT_TRUE(six->Upsert(batch).ok());
  }
  // Replacements (new vectors and texts) and deletes reach every shard.
  auto changed = Documents(std::vector<std::string>(texts.begin() + 800, texts.end()), 100, 77);
  for (size_t i = 0; i < changed.size(); ++i) changed[i].id = "doc-" + std::to_string(i * 7);
  ASSERT_TRUE(one->Upsert(changed).ok());
  ASSERT_TRUE(six->Upsert(changed).ok());
  std::vector<std::string> gone;
  for (int i = 3; i < 800; i += 11) gone.push_back("doc-" + std::to_string(i));
  ASSERT_TRUE(one->Delete(gone).ok());
  ASSERT_TRUE(six->Delete(gone).ok());

  // Each replica holds exactly its shard's documents, together all of them.
  EXPECT_EQ(six->HeldShards(), (std::vector<uint32_t>{0, 1, 2, 3, 4, 5}));
  size_t total = 0;
  for (const auto& r : six->ReplicaStates()) {
    total += r.documents;
    EXPECT_GT(r.documents, 60u) << "shard " << r.shard;
  }
  EXPECT_EQ(total, one->size());
  EXPECT_EQ(six->size(), one->size());
  EXPECT_EQ(six->IndexedIds(), one->IndexedIds());  // same internal ids: same write order
  EXPECT_EQ(six->LexicalIds(), one->IndexedIds());

  size_t compared = 0;
  ExpectSameAnswers(*one, *six, queries, &compared);
  EXPECT_GT(compared, 5000u);

  // Reopened: every shard from its own snapshot, and still the same answers.
  ASSERT_TRUE(six->SaveIndex().ok());
  six.reset();
  auto reopened = VectorCollection::Open(store->get(), "six");
  ASSERT_TRUE(reopened.ok());
  EXPECT_TRUE((*reopened)->opened_from_snapshot());
  ExpectSameAnswers(*one, **reopened, queries, &compared);
  EXPECT_GT(compared, 5000u);
}

// Holds the shards it is told to and answers for no other.
class NoPeers : public ShardPeers {
 public:
  explicit NoPeers(std::vector<uint32_t> held) : held_(std::move(held)) {}
  std::optional<PlacedShards> HeldShards(const CollectionLayout& layout) override {
    PlacedShards p{layout.shards, {}};
    for (uint32_t k : held_) p.held.push_back(ShardRef{layout.shards, k});
    return p;
  }
  std::vector<std::pair<uint32_t, LexicalStats>> Stats(const ShardQuery&, const std::vector<uint32_t>& shards) override {
    asked_ += shards.size();
    return {};
  }
  std::vector<ShardAnswer> Search(const ShardQuery&, const std::vector<uint32_t>& shards) override {
    asked_ += shards.size();
    return {};
  }
  size_t asked_ = 0;

 private:
  std::vector<uint32_t> held_;
};

TEST(ShardedSearch, AShardWithoutAReplicaFailsTheSearchOrIsNamedInAPartialOne) {
  test::TempDir dir;
  auto store = RocksStore::Open(dir / "db");
  ASSERT_TRUE(store.ok());
  std::vector<std::string> texts, queries;
  ReadSentences(&texts, &queries);
  NoPeers peers({0, 2, 3});
  auto c = Make(store->get(), "c", 4, &peers);
  ASSERT_TRUE(c);
  const auto docs = Documents(texts, 300, 0);
  ASSERT_TRUE(c->Upsert(docs).ok());
  EXPECT_EQ(c->HeldShards(), (std::vector<uint32_t>{0, 2, 3}));
  size_t held_docs = 0;
  for (const auto& d : docs) held_docs += ShardOfId(d.id, 4, kRange) != 1;
  EXPECT_EQ(c->IndexedIds().size(), held_docs);

  const auto hs = Gaussian(5, kDh), rw = Gaussian(6, kDr);
  SearchSpec s;
  s.query = queries[0];
  s.k = 1000;
  auto failed = c->Search(hs.data(), rw.data(), s);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(failed.status().message().find("shard 1"), std::string::npos) << failed.status().message();
  EXPECT_GT(peers.asked_, 0u);

  s.partial = true;
  SearchInfo info;
  auto partial = c->Search(hs.data(), rw.data(), s, &info);
  ASSERT_TRUE(partial.ok()) << partial.status().ToString();
  EXPECT_EQ(info.missing_shards, std::vector<uint32_t>{1});
  EXPECT_EQ(partial->size(), held_docs);
  for (const auto& h : *partial) EXPECT_NE(ShardOfId(h.id, 4, kRange), 1u) << h.id;

  // Given up: the replica's folders go; taken on: it is built from the store.
  peers = NoPeers({1, 2});
  ASSERT_TRUE(c->SyncShards().ok());
  EXPECT_EQ(c->HeldShards(), (std::vector<uint32_t>{1, 2}));
  size_t now_held = 0;
  for (const auto& d : docs) now_held += ShardOfId(d.id, 4, kRange) == 1 || ShardOfId(d.id, 4, kRange) == 2;
  EXPECT_EQ(c->IndexedIds().size(), now_held);
}

// Records the entry each search it is sent requires of a replica.
class RecordingPeers : public NoPeers {
 public:
  using NoPeers::NoPeers;
  std::vector<ShardAnswer> Search(const ShardQuery& q, const std::vector<uint32_t>& shards) override {
    min_seqs.push_back(q.min_seq);
    return NoPeers::Search(q, shards);
  }
  std::vector<uint64_t> min_seqs;
};

TEST(ShardedSearch, APeersReplicaMayNotLagThisNodesNewestEntryByMoreThanTheBound) {
  test::TempDir dir;
  auto store = RocksStore::Open(dir / "db");
  ASSERT_TRUE(store.ok());
  std::vector<std::string> texts, queries;
  ReadSentences(&texts, &queries);
  RecordingPeers peers({0});
  auto c = Make(store->get(), "c", 2, &peers);
  ASSERT_TRUE(c);
  const auto docs = Documents(texts, 30, 0);
  for (const auto& d : docs) ASSERT_TRUE(c->Upsert({d}).ok());  // 30 entries
  ASSERT_EQ(c->applied_seq(), 30u);
  const auto hs = Gaussian(5, kDh), rw = Gaussian(6, kDr);
  SearchSpec s;
  s.k = 5;
  s.partial = true;  // the fake peers answer for no shard
  auto search = [&](uint64_t lag) {
    c->SetMaxLag(lag);
    EXPECT_TRUE(c->Search(hs.data(), rw.data(), s).ok());
    return peers.min_seqs.empty() ? UINT64_MAX : peers.min_seqs.back();
  };
  EXPECT_EQ(search(10), 20u);   // at most 10 entries behind this node's 30
  EXPECT_EQ(search(0), 30u);    // none behind
  EXPECT_EQ(search(100), 0u);   // a bound above the log's length asks nothing
  s.min_seq = 25;               // a client's own requirement stands when stricter
  EXPECT_EQ(search(10), 25u);
  s.min_seq = 5;
  EXPECT_EQ(search(10), 20u);
}

// The folders of a collection's shards beside its index folder, by name.
std::set<std::string> ShardFolders(const std::string& index_dir) {
  std::set<std::string> out;
  const std::filesystem::path dir(index_dir);
  for (const auto& e : std::filesystem::directory_iterator(dir.parent_path())) {
    const std::string name = e.path().filename().string();
    if (name.rfind(dir.filename().string() + ".shard-", 0) == 0) out.insert(name.substr(dir.filename().string().size()));
  }
  return out;
}

TEST(Reshard, ThreeToSixToTwoUnderWritesAnswersAsOneShardAndLosesNothing) {
  test::TempDir dir;
  auto store = RocksStore::Open(dir / "db");
  ASSERT_TRUE(store.ok());
  std::vector<std::string> texts, queries;
  ReadSentences(&texts, &queries);
  auto one = Make(store->get(), "one", 1);
  auto c = Make(store->get(), "c", 3);
  ASSERT_TRUE(one && c);
  const auto docs = Documents(texts, texts.size(), 0);
  ASSERT_GT(docs.size(), 400u);
  const std::vector<StoredDocument> first(docs.begin(), docs.begin() + 200);
  ASSERT_TRUE(one->Upsert(first).ok() && c->Upsert(first).ok());

  // Writes to both collections alike (upserts of new documents, replacements
  // of old ones, deletes) and searches of the resharded one, while it is
  // split anew: every search answers (no shard missing), every write is
  // acknowledged by both.
  const auto under_writes = [&](size_t from, size_t to, uint32_t shards) {
    std::atomic<bool> done{false};
    std::atomic<size_t> searches{0}, failures{0};
    std::thread writer([&] {
      for (size_t i = from; i < to; i += 4) {
        std::vector<StoredDocument> batch(docs.begin() + i, docs.begin() + std::min(to, i + 4));
        batch.push_back(docs[i % 200]);
        batch.back().metadata_json = "{\"group\": 9, \"rewritten\": " + std::to_string(i) + "}";
        if (!one->Upsert(batch).ok() || !c->Upsert(batch).ok()) ++failures;
        const std::vector<std::string> gone{"doc-" + std::to_string((i * 7) % 200)};
        if (!one->Delete(gone).ok() || !c->Delete(gone).ok()) ++failures;
      }
      done = true;
    });
    std::thread searcher([&] {
      const auto hs = Gaussian(11, kDh), rw = Gaussian(12, kDr);
      SearchSpec s;
      s.k = 50;
      s.query = queries[0];
      for (size_t i = 0; !done; ++i) {
        s.mode = i % 2 ? QueryMode::kHybrid : QueryMode::kFused;
        auto hits = c->Search(hs.data(), rw.data(), s);
        if (!hits.ok()) ADD_FAILURE() << "a search during the reshard: " << hits.status().ToString();
        // (a hit a concurrent write removed after the shards answered is left out)
        else if (hits->empty() || hits->size() > 50u) ADD_FAILURE() << "a search during the reshard found " << hits->size();
        ++searches;
      }
    });
    Status s = c->Reshard(shards);
    writer.join();
    searcher.join();
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(failures.load(), 0u);
    EXPECT_GT(searches.load(), 0u);
  };

  under_writes(200, 300, 6);
  EXPECT_EQ(c->shards(), 6u);
  EXPECT_EQ(c->HeldShards(), (std::vector<uint32_t>{0, 1, 2, 3, 4, 5}));
  size_t compared = 0;
  ExpectSameAnswers(*one, *c, queries, &compared);
  EXPECT_GT(compared, 1000u);
  // Each shard holds exactly its documents of the new split.
  ExpectEachReplicaHoldsItsShard(*c, 6, kRange);
  // The old split's folders are gone; each new shard has its two.
  const auto folders = ShardFolders(c->index_dir());
  EXPECT_EQ(folders.size(), 12u) << ::testing::PrintToString(folders);
  for (uint32_t k = 0; k < 6; ++k) {
    EXPECT_TRUE(folders.count(".shard-" + std::to_string(k) + "-of-6")) << k;
    EXPECT_TRUE(folders.count(".shard-" + std::to_string(k) + "-of-6.lexical")) << k;
  }

  under_writes(300, 400, 2);
  EXPECT_EQ(c->shards(), 2u);
  ExpectSameAnswers(*one, *c, queries, &compared);
  EXPECT_GT(compared, 1000u);
  // Nothing acknowledged is lost: the indexes hold every stored document, as the one shard does.
  EXPECT_EQ(c->IndexedIds().size(), c->size());
  EXPECT_EQ(one->IndexedIds().size(), one->size());
  EXPECT_EQ(c->size(), one->size());
  for (const std::string& f : ShardFolders(c->index_dir())) EXPECT_NE(f.find("-of-2"), std::string::npos) << f;

  // The record names the new split: reopened, the collection uses it, from its snapshots.
  ASSERT_TRUE(c->SaveIndex().ok());
  c.reset();
  auto again = VectorCollection::Open(store->get(), "c");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->shards(), 2u);
  EXPECT_TRUE((*again)->opened_from_snapshot());
  ExpectSameAnswers(*one, **again, queries, &compared);
  // Out of range.
  EXPECT_EQ((*again)->Reshard(0).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ((*again)->Reshard(kMaxShards + 1).code(), Status::Code::kInvalidArgument);
}

// Collection "c" of 2 shards holding `docs`, snapshotted and closed, its
// shards' folders renamed to the old names (".shard-K", which do not say 2).
void SavedUnderOldNames(Store* store, const std::vector<StoredDocument>& docs, std::string* index_dir, uint32_t* id) {
  auto c = Make(store, "c", 2);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->Upsert(docs).ok());
  ASSERT_TRUE(c->SaveIndex().ok());
  *index_dir = c->index_dir();
  *id = c->store_id();
  c.reset();
  for (const std::string k : {"0", "1"}) {
    std::filesystem::rename(*index_dir + ".shard-" + k + "-of-2", *index_dir + ".shard-" + k);
    std::filesystem::rename(*index_dir + ".shard-" + k + "-of-2.lexical", *index_dir + ".shard-" + k + ".lexical");
  }
}

// Folders named before a shard's folder named its split are used, not rebuilt.
TEST(Reshard, AShardFolderOfTheOldNameIsAdopted) {
  test::TempDir dir;
  auto store = RocksStore::Open(dir / "db");
  ASSERT_TRUE(store.ok());
  std::vector<std::string> texts, queries;
  ReadSentences(&texts, &queries);
  std::string index_dir;
  uint32_t id = 0;
  SavedUnderOldNames(store->get(), Documents(texts, 100, 0), &index_dir, &id);
  auto again = VectorCollection::Open(store->get(), "c");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE((*again)->opened_from_snapshot());
  EXPECT_EQ((*again)->index_rebuilds(), 0u);
  EXPECT_EQ((*again)->IndexedIds().size(), 100u);
  EXPECT_FALSE(std::filesystem::exists(index_dir + ".shard-0"));
}

// Once a collection was resharded, a folder of the old name may hold a shard
// of another split (an old node's, stopped before the reshard): it is not taken over.
TEST(Reshard, AnOldNamedFolderIsNotTakenOverOnceTheCollectionWasResharded) {
  test::TempDir dir;
  auto store = RocksStore::Open(dir / "db");
  ASSERT_TRUE(store.ok());
  std::vector<std::string> texts, queries;
  ReadSentences(&texts, &queries);
  // An old node's folders: shard K of 2 under the old name, which does not say 2.
  std::string index_dir;
  uint32_t id = 0;
  SavedUnderOldNames(store->get(), Documents(texts, 120, 0), &index_dir, &id);
  // Split into 3 meanwhile (by the other nodes): the record says 3.
  ASSERT_TRUE(VectorCollection::RecordSplit(store->get(), "c", id, 3).ok());
  auto again = VectorCollection::Open(store->get(), "c");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE((*again)->opened_from_snapshot());  // built from the store
  EXPECT_TRUE(std::filesystem::exists(index_dir + ".shard-0"));
  for (const auto& r : (*again)->Contents())
    for (uint64_t internal : r.lexical) {
      auto d = (*again)->GetByInternal(internal);
      ASSERT_TRUE(d.ok());
      EXPECT_EQ(ShardOfId(d->id, 3, kRange), r.shard) << d->id;
    }
  EXPECT_EQ((*again)->IndexedIds().size(), 120u);
}

}  // namespace
}  // namespace moeedb
