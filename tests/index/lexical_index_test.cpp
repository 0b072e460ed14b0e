// The lexical (BM25, Xapian) index against a BM25 written with plain loops
// (lexical_corpus.h): terms, scores, filters, removal, reopening, bad settings.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "index/lexical_index.h"
#include "tests/index/lexical_corpus.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

using json = nlohmann::json;
using test::kCorpus;
using test::ReferenceBm25;

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

}  // namespace
}  // namespace moeedb
