// The exact fused scan (index/exact_scan) against a plain double-precision
// loop written here: the same top-k rows in the same order and scores within
// float rounding, for f32 and fp16 rows, weights with a zero, tombstoned rows,
// one and several threads, one query and a batch; equal scores in the order
// the caller gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "index/exact_scan.h"

namespace moeedb {
namespace {

struct Rows {
  size_t n, dh, dr;
  std::vector<float> hs, rw;
  std::vector<uint16_t> hs16, rw16;
};

Rows MakeRows(size_t n, size_t dh, size_t dr, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0, 1);
  Rows r{n, dh, dr, {}, {}, {}, {}};
  r.hs.resize(n * dh);
  r.rw.resize(n * dr);
  for (auto& v : r.hs) v = g(rng);
  for (auto& v : r.rw) v = g(rng);
  for (float v : r.hs) r.hs16.push_back(FloatToF16(v));
  for (float v : r.rw) r.rw16.push_back(FloatToF16(v));
  return r;
}

// Plain loops in double over the rows as stored (fp16 rows decoded).
std::vector<std::pair<double, size_t>> Reference(const Rows& r, bool fp16, const float* qh, const float* qr, float wh,
                                                 float wr, const std::vector<bool>& keep, size_t k) {
  std::vector<std::pair<double, size_t>> all;
  for (size_t p = 0; p < r.n; ++p) {
    if (!keep[p]) continue;
    double sh = 0, sr = 0;
    for (size_t j = 0; j < r.dh; ++j)
      sh += double(qh[j]) * (fp16 ? F16ToFloat(r.hs16[p * r.dh + j]) : r.hs[p * r.dh + j]);
    for (size_t j = 0; j < r.dr; ++j)
      sr += double(qr[j]) * (fp16 ? F16ToFloat(r.rw16[p * r.dr + j]) : r.rw[p * r.dr + j]);
    all.push_back({wh * sh + wr * sr, p});
  }
  std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.first > b.first; });
  if (all.size() > k) all.resize(k);
  return all;
}

TEST(ExactScan, MatchesAPlainLoopForEveryRowFormatWeightAndThreadCount) {
  // Odd dims exercise the SIMD tails; 9000 rows give the scan several threads.
  const Rows r = MakeRows(9000, 203, 37, 5);
  std::mt19937 rng(9);
  std::vector<bool> keep(r.n);
  for (size_t p = 0; p < r.n; ++p) keep[p] = rng() % 5 != 0;
  const Rows q = MakeRows(3, 203, 37, 6);
  for (bool fp16 : {false, true}) {
    ScanRows hs{fp16 ? nullptr : r.hs.data(), fp16 ? r.hs16.data() : nullptr, r.dh};
    ScanRows rw{fp16 ? nullptr : r.rw.data(), fp16 ? r.rw16.data() : nullptr, r.dr};
    for (auto [wh, wr] : {std::pair{1.0f, 0.3f}, std::pair{1.0f, 0.0f}, std::pair{0.0f, 1.0f}}) {
      for (int threads : {1, 0, 3}) {
        std::vector<ScanQuery> queries;
        for (size_t i = 0; i < 3; ++i) queries.push_back({q.hs.data() + i * r.dh, q.rw.data() + i * r.dr, wh, wr});
        ScanOptions o;
        o.k = 25;
        o.threads = threads;
        o.keep = [&](size_t p) { return static_cast<bool>(keep[p]); };
        const auto batch = ScanTopKBatch(hs, rw, r.n, queries, o);
        ASSERT_EQ(batch.size(), 3u);
        for (size_t i = 0; i < 3; ++i) {
          const auto ref = Reference(r, fp16, queries[i].hs, queries[i].rw, wh, wr, keep, o.k);
          const auto one = ScanTopK(hs, rw, r.n, queries[i], o);
          ASSERT_EQ(batch[i].size(), ref.size());
          ASSERT_EQ(one.size(), ref.size());
          for (size_t j = 0; j < ref.size(); ++j) {
            SCOPED_TRACE(testing::Message() << "fp16 " << fp16 << " w " << wh << "," << wr << " threads " << threads
                                            << " query " << i << " rank " << j);
            EXPECT_EQ(batch[i][j].row, ref[j].second);
            EXPECT_EQ(one[j].row, ref[j].second);
            EXPECT_NEAR(batch[i][j].score, ref[j].first, 1e-4 * (1 + std::abs(ref[j].first)));
            EXPECT_FLOAT_EQ(one[j].score, batch[i][j].score);
            // The parts: a signal of weight 0 is not computed.
            if (wr == 0.0f) EXPECT_EQ(batch[i][j].score_rw, 0.0f);
            if (wh == 0.0f) EXPECT_EQ(batch[i][j].score_hs, 0.0f);
            EXPECT_NEAR(wh * batch[i][j].score_hs + wr * batch[i][j].score_rw, batch[i][j].score, 1e-4);
          }
        }
      }
    }
  }
}

TEST(ExactScan, EqualScoresFollowTheCallersOrderAndKMayExceedTheRows) {
  // Rows 0..5 identical: all tie. The caller ranks higher rows first.
  Rows r = MakeRows(1, 16, 8, 3);
  Rows six{6, 16, 8, {}, {}, {}, {}};
  for (int i = 0; i < 6; ++i) {
    six.hs.insert(six.hs.end(), r.hs.begin(), r.hs.end());
    six.rw.insert(six.rw.end(), r.rw.begin(), r.rw.end());
  }
  ScanRows hs{six.hs.data(), nullptr, 16}, rw{six.rw.data(), nullptr, 8};
  ScanOptions o;
  o.k = 4;
  o.tie_before = [](size_t a, size_t b) { return a > b; };
  auto hits = ScanTopK(hs, rw, 6, {r.hs.data(), r.rw.data(), 1.0f, 0.5f}, o);
  ASSERT_EQ(hits.size(), 4u);
  EXPECT_EQ(hits[0].row, 5u);
  EXPECT_EQ(hits[1].row, 4u);
  EXPECT_EQ(hits[2].row, 3u);
  EXPECT_EQ(hits[3].row, 2u);
  o.k = 100;
  o.tie_before = nullptr;  // default: lower row first
  hits = ScanTopK(hs, rw, 6, {r.hs.data(), r.rw.data(), 1.0f, 0.5f}, o);
  ASSERT_EQ(hits.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(hits[i].row, i);
  EXPECT_TRUE(ScanTopK(hs, rw, 0, {r.hs.data(), r.rw.data(), 1.0f, 0.5f}, o).empty());
}

TEST(ExactScan, Fp16RoundTripIsExactForHalves) {
  for (float v : {0.0f, 1.0f, -2.5f, 0.099975586f, 65504.0f, -0.00006103515625f})
    EXPECT_EQ(F16ToFloat(FloatToF16(v)), v) << v;
  EXPECT_EQ(F16ToFloat(FloatToF16(1.0f + 1.0f / 4096)), 1.0f);  // ties round to even
}

}  // namespace
}  // namespace moeedb

#include "index/dual_index.h"
#include "index/standardizer.h"

namespace moeedb {
namespace {

TEST(ExactScan, DualIndexSearchBatchEqualsSearchForEachRequest) {
  const Rows r = MakeRows(3000, 48, 16, 21);
  DualIndexSpec spec;
  spec.dim_hs = 48;
  spec.dim_rw = 16;
  auto index = DualIndex::Create(spec, Standardizer::Identity(48), Standardizer::Identity(16));
  ASSERT_TRUE(index.ok());
  std::vector<uint64_t> ids(r.n);
  for (size_t i = 0; i < r.n; ++i) ids[i] = 1000 + i;
  ASSERT_TRUE((*index)->Add(ids, r.hs.data(), r.rw.data()).ok());
  ASSERT_EQ((*index)->Remove({1000, 1005, 2999}), 3u);
  const Rows q = MakeRows(6, 48, 16, 22);
  std::vector<SearchRequest> rs(6);
  const QueryMode modes[] = {QueryMode::kFused, QueryMode::kHs, QueryMode::kRw};
  for (size_t i = 0; i < rs.size(); ++i) {
    rs[i].hs = q.hs.data() + i * 48;
    rs[i].rw = q.rw.data() + i * 16;
    rs[i].k = 5 + i;
    rs[i].alpha = 0.25f * i;
    rs[i].mode = modes[i % 3];
  }
  rs[4].filter = [](uint64_t id) { return id % 3 == 0; };  // searched on its own
  auto batch = (*index)->SearchBatch(rs);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ASSERT_EQ(batch->size(), rs.size());
  for (size_t i = 0; i < rs.size(); ++i) {
    auto one = (*index)->Search(rs[i]);
    ASSERT_TRUE(one.ok());
    ASSERT_EQ((*batch)[i].size(), rs[i].k);
    ASSERT_EQ(one->size(), rs[i].k);
    for (size_t j = 0; j < one->size(); ++j) {
      EXPECT_EQ((*batch)[i][j].id, (*one)[j].id) << i << " " << j;
      EXPECT_FLOAT_EQ((*batch)[i][j].score, (*one)[j].score);
      EXPECT_FLOAT_EQ((*batch)[i][j].score_hs, (*one)[j].score_hs);
      EXPECT_FLOAT_EQ((*batch)[i][j].score_rw, (*one)[j].score_rw);
      EXPECT_NE((*one)[j].id, 1005u);
      if (i == 4) EXPECT_EQ((*one)[j].id % 3, 0u);
    }
  }
  // A bad request fails the batch.
  rs[2].alpha = std::nanf("");
  EXPECT_FALSE((*index)->SearchBatch(rs).ok());
}

}  // namespace
}  // namespace moeedb
