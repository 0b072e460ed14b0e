// The dual index on its own (index/dual_index.h): exact fused, HS and RW
// search against cosines computed here in double from the raw vectors and
// a standardizer fitted here; Score; removal; a snapshot that loads back to
// the same answers; the requests it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "index/dual_index.h"
#include "tests/index/reference_cosine.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

constexpr size_t kDh = 12, kDr = 8, kRows = 300;

struct Rows {
  std::vector<float> hs, rw;
};

Rows RandomRows(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  Rows r;
  for (size_t i = 0; i < n * kDh; ++i) r.hs.push_back(g(rng) + 0.5f);
  for (size_t i = 0; i < n * kDr; ++i) r.rw.push_back(g(rng) * 2.f - 1.f);
  return r;
}

using test::FitZScore;
using test::ZScore;
using test::ZScoredCosine;

class DualIndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rows_ = RandomRows(kRows, 7);
    zh_ = FitZScore(rows_.hs, kDh);
    zr_ = FitZScore(rows_.rw, kDr);
    DualIndexSpec spec;
    spec.dim_hs = kDh, spec.dim_rw = kDr;
    auto ix = DualIndex::Create(spec, Standardizer::Fit(rows_.hs.data(), kRows, kDh),
                                Standardizer::Fit(rows_.rw.data(), kRows, kDr));
    ASSERT_TRUE(ix.ok()) << ix.status().ToString();
    index_ = std::move(ix).value();
    for (size_t i = 0; i < kRows; ++i) ids_.push_back(1000 + i * 3);
    ASSERT_TRUE(index_->Add(ids_, rows_.hs.data(), rows_.rw.data()).ok());
  }
  // The exact top k by the reference cosines.
  std::vector<std::pair<uint64_t, double>> Expected(const float* qh, const float* qr, QueryMode mode, float alpha,
                                                    size_t k, const std::vector<bool>* alive = nullptr) const {
    std::vector<std::pair<uint64_t, double>> all;
    for (size_t i = 0; i < kRows; ++i) {
      if (alive && !(*alive)[i]) continue;
      const double h = ZScoredCosine(qh, &rows_.hs[i * kDh], kDh, zh_), r = ZScoredCosine(qr, &rows_.rw[i * kDr], kDr, zr_);
      all.push_back({ids_[i], mode == QueryMode::kHs ? h : mode == QueryMode::kRw ? r : h + alpha * r});
    }
    std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
    all.resize(std::min(k, all.size()));
    return all;
  }
  Rows rows_;
  ZScore zh_, zr_;
  std::vector<uint64_t> ids_;
  std::unique_ptr<DualIndex> index_;
};

TEST_F(DualIndexTest, ExactSearchEqualsTheReferenceCosinesInEveryDenseMode) {
  const Rows q = RandomRows(5, 99);
  for (QueryMode mode : {QueryMode::kFused, QueryMode::kHs, QueryMode::kRw})
    for (size_t qi = 0; qi < 5; ++qi) {
      SearchRequest r;
      r.hs = &q.hs[qi * kDh], r.rw = &q.rw[qi * kDr];
      r.k = 10, r.alpha = 0.7f, r.mode = mode, r.exact = true;
      auto hits = index_->Search(r);
      ASSERT_TRUE(hits.ok()) << hits.status().ToString();
      const auto want = Expected(r.hs, r.rw, mode, r.alpha, 10);
      ASSERT_EQ(hits->size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ((*hits)[i].id, want[i].first) << kQueryModes.Name(mode) << " rank " << i;
        EXPECT_NEAR((*hits)[i].score, want[i].second, 1e-4);
      }
    }
}

TEST_F(DualIndexTest, ScoreRemoveAndSnapshot) {
  const Rows q = RandomRows(1, 5);
  auto scored = index_->Score(q.hs.data(), q.rw.data(), 2.0f, {ids_[3], 424242, ids_[0]});
  ASSERT_TRUE(scored.ok());
  ASSERT_EQ(scored->size(), 2u);  // the unknown id is left out
  EXPECT_EQ((*scored)[0].id, ids_[3]);
  EXPECT_NEAR((*scored)[0].score_hs, ZScoredCosine(q.hs.data(), &rows_.hs[3 * kDh], kDh, zh_), 1e-4);
  EXPECT_NEAR((*scored)[0].score, (*scored)[0].score_hs + 2.0f * (*scored)[0].score_rw, 1e-5);
  // Removal: the removed ids never come back, the rest rank as before.
  std::vector<bool> alive(kRows, true);
  std::vector<uint64_t> gone;
  for (size_t i = 0; i < kRows; i += 4) gone.push_back(ids_[i]), alive[i] = false;
  EXPECT_EQ(index_->Remove(gone), gone.size());
  EXPECT_EQ(index_->Remove({gone[0]}), 0u);
  EXPECT_EQ(index_->size(), kRows - gone.size());
  SearchRequest r;
  r.hs = q.hs.data(), r.rw = q.rw.data(), r.k = 20, r.alpha = 1.0f, r.exact = true;
  auto before = index_->Search(r);
  ASSERT_TRUE(before.ok());
  const auto want = Expected(r.hs, r.rw, QueryMode::kFused, 1.0f, 20, &alive);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ((*before)[i].id, want[i].first);
  // A snapshot loads back to the same answers and the sequence it recorded.
  test::TempDir dir;
  ASSERT_TRUE(index_->Save(dir / "snap", 17).ok());
  uint64_t seq = 0;
  auto loaded = DualIndex::Load(dir / "snap", &seq);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(seq, 17u);
  auto after = (*loaded)->Search(r);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), before->size());
  for (size_t i = 0; i < after->size(); ++i) {
    EXPECT_EQ((*after)[i].id, (*before)[i].id);
    EXPECT_FLOAT_EQ((*after)[i].score, (*before)[i].score);
  }
  EXPECT_EQ(DualIndex::Load(dir / "none", &seq).status().code(), Status::Code::kNotFound);
  // Its sequence is read from the folder without loading it, and follows a newer save.
  EXPECT_EQ(DualIndex::SnapshotSeq(dir / "snap"), std::optional<uint64_t>(17));
  ASSERT_TRUE(index_->Save(dir / "snap", 1234567890123).ok());
  EXPECT_EQ(DualIndex::SnapshotSeq(dir / "snap"), std::optional<uint64_t>(1234567890123));
  EXPECT_EQ(DualIndex::SnapshotSeq(dir / "none"), std::nullopt);
}

TEST_F(DualIndexTest, RefusesBadRequestsAndRows) {
  const Rows q = RandomRows(1, 3);
  SearchRequest r;
  r.hs = q.hs.data(), r.rw = q.rw.data();
  r.mode = QueryMode::kHybrid;  // not a dense mode
  EXPECT_EQ(index_->Search(r).status().code(), Status::Code::kInvalidArgument);
  r.mode = QueryMode::kFused;
  r.alpha = NAN;
  EXPECT_FALSE(index_->Search(r).ok());
  r.alpha = 1, r.rw = nullptr;
  EXPECT_FALSE(index_->Search(r).ok());
  r.mode = QueryMode::kHs;  // HS alone needs no RW half
  EXPECT_TRUE(index_->Search(r).ok());
  std::vector<float> nan_hs(kDh, NAN), rw(kDr, 1.f);
  EXPECT_FALSE(index_->Add({1}, nan_hs.data(), rw.data()).ok());
  EXPECT_FALSE(index_->Add({ids_[0]}, rows_.hs.data(), rows_.rw.data()).ok());  // an id already there
  EXPECT_EQ(index_->size(), kRows);
}

}  // namespace
}  // namespace moeedb

namespace moeedb {
// An id removed and added again is found at its new row only: Score and
// Contains see the new vectors, `among` skips removed ids, a rebuild keeps
// the new row; a snapshot whose dead row is marked alive again (one id on
// two live rows) is refused as corrupt rather than answering from either.
TEST_F(DualIndexTest, AnIdRemovedAndAddedAgainIsFoundAtItsNewRow) {
  const Rows q = RandomRows(1, 5);
  const std::vector<uint64_t> gone = {ids_[0], ids_[1], ids_[2]};
  ASSERT_EQ(index_->Remove(gone), 3u);
  for (uint64_t id : gone) EXPECT_FALSE(index_->Contains(id));
  SearchRequest r;
  r.hs = q.hs.data(), r.rw = q.rw.data(), r.k = 10, r.alpha = 1.0f;
  const std::vector<uint64_t> among = {ids_[0], ids_[1], ids_[5]};
  r.among = &among;
  auto hits = index_->Search(r);
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->size(), 1u);
  EXPECT_EQ((*hits)[0].id, ids_[5]);
  // ids_[0] comes back with row 10's vectors.
  ASSERT_TRUE(index_->Add({ids_[0]}, &rows_.hs[10 * kDh], &rows_.rw[10 * kDr]).ok());
  EXPECT_TRUE(index_->Contains(ids_[0]));
  EXPECT_EQ(index_->size(), kRows - 2);
  auto check_new_row = [&](const DualIndex& ix) {
    auto s = ix.Score(q.hs.data(), q.rw.data(), 1.0f, {ids_[0], ids_[10]});
    ASSERT_TRUE(s.ok());
    ASSERT_EQ(s->size(), 2u);
    EXPECT_FLOAT_EQ((*s)[0].score, (*s)[1].score);
    EXPECT_NEAR((*s)[0].score_hs, ZScoredCosine(q.hs.data(), &rows_.hs[10 * kDh], kDh, zh_), 1e-4);
  };
  check_new_row(*index_);
  test::TempDir dir;
  ASSERT_TRUE(index_->Save(dir / "snap", 3).ok());
  // Mark every dead row alive again: the old ids_[0] row now shares its id.
  std::filesystem::path meta;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir / "snap"))
    if (e.path().filename() == "meta.json") meta = e.path();
  ASSERT_FALSE(meta.empty());
  nlohmann::json j = nlohmann::json::parse(std::ifstream(meta));
  ASSERT_EQ(j.at("alive").at(0).get<int>(), 0);
  for (auto& a : j.at("alive")) a = 1;
  std::ofstream(meta) << j.dump();
  uint64_t seq = 0;
  EXPECT_EQ(DualIndex::Load(dir / "snap", &seq).status().code(), Status::Code::kCorruption);
  // Removing past rebuild_ratio (a quarter) of the rows rebuilds without the
  // dead rows; the new row stays, the removed ids stay gone.
  const std::vector<uint64_t> more(ids_.begin() + 20, ids_.begin() + 120);
  ASSERT_EQ(index_->Remove(more), more.size());
  EXPECT_EQ(index_->rebuilds(), 1u);
  check_new_row(*index_);
  EXPECT_FALSE(index_->Contains(ids_[1]));
  EXPECT_FALSE(index_->Contains(ids_[20]));
  EXPECT_EQ(index_->Ids().size(), index_->size());
  EXPECT_EQ(index_->size(), kRows - 2 - more.size());
}

namespace {

// `among` (a payload index's candidates): few ids are scored one by one and
// give the reference's exact top k over them and the filter, in every mode
// and with or without an ANN index; past kScoreAmongMax an ANN search tests
// membership per candidate and answers as the filter alone would.
TEST_F(DualIndexTest, AmongFewIdsScoresThemExactly) {
  const Rows q = RandomRows(3, 5);
  std::vector<uint64_t> among;
  std::vector<bool> allowed(kRows, false);
  for (size_t i = 0; i < kRows; i += 7) among.push_back(ids_[i]), allowed[i] = true;
  among.push_back(999'999);  // an id the index does not hold
  std::sort(among.begin(), among.end());
  // The filter leaves out one allowed id: among narrows, the filter decides.
  const uint64_t dropped = ids_[14];
  allowed[14] = false;
  for (QueryMode mode : {QueryMode::kFused, QueryMode::kHs, QueryMode::kRw})
    for (size_t qi = 0; qi < 3; ++qi) {
      SearchRequest r;
      r.hs = &q.hs[qi * kDh], r.rw = &q.rw[qi * kDr];
      r.k = 10, r.alpha = 0.7f, r.mode = mode;
      r.among = &among;
      r.filter = [&](uint64_t id) { return id != dropped; };
      auto hits = index_->Search(r);
      ASSERT_TRUE(hits.ok()) << hits.status().ToString();
      const auto want = Expected(r.hs, r.rw, mode, r.alpha, 10, &allowed);
      ASSERT_EQ(hits->size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ((*hits)[i].id, want[i].first) << kQueryModes.Name(mode) << " rank " << i;
        EXPECT_NEAR((*hits)[i].score, want[i].second, 1e-4);
      }
    }
}

TEST(DualIndexAmong, ManyIdsThroughAnAnnIndexAnswerAsTheFilterAlone) {
  constexpr size_t kDim = 8, kN = 2 * kScoreAmongMax + 1000;
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> hs(kN * kDim), rw(kN * 2);
  for (auto& x : hs) x = g(rng);
  for (auto& x : rw) x = g(rng);
  DualIndexSpec spec;
  spec.dim_hs = kDim, spec.dim_rw = 2;
  spec.hs.kind = spec.rw.kind = IndexKind::kIvf;
  spec.hs.ivf_nlist = spec.rw.ivf_nlist = 64;
  auto ix = DualIndex::Create(spec, Standardizer::Identity(kDim), Standardizer::Identity(2));
  ASSERT_TRUE(ix.ok());
  std::vector<uint64_t> ids(kN);
  for (size_t i = 0; i < kN; ++i) ids[i] = i + 1;
  ASSERT_TRUE((*ix)->Add(ids, hs.data(), rw.data()).ok());
  // Every even id and a few odd ones: more than kScoreAmongMax.
  std::vector<uint64_t> among;
  for (uint64_t id = 1; id <= kN; ++id)
    if (id % 2 == 0 || id % 1001 == 0) among.push_back(id);
  ASSERT_GT(among.size(), kScoreAmongMax);
  for (int qi = 0; qi < 3; ++qi) {
    SearchRequest r;
    std::vector<float> qh(kDim), qr(2);
    for (auto& x : qh) x = g(rng);
    for (auto& x : qr) x = g(rng);
    r.hs = qh.data(), r.rw = qr.data(), r.k = 10;
    r.filter = [](uint64_t id) { return id % 2 == 0; };
    auto alone = (*ix)->Search(r);
    r.among = &among;
    auto narrowed = (*ix)->Search(r);
    ASSERT_TRUE(alone.ok() && narrowed.ok());
    ASSERT_EQ(alone->size(), 10u);
    ASSERT_EQ(narrowed->size(), alone->size());
    for (size_t i = 0; i < alone->size(); ++i) {
      EXPECT_EQ((*narrowed)[i].id, (*alone)[i].id);
      EXPECT_EQ((*narrowed)[i].id % 2, 0u);
    }
  }
}

}  // namespace
}  // namespace moeedb
