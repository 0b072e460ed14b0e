// Fusion of the HS, RW and lexical signals (index/fusion.h): weighted
// min-max and z-score and reciprocal rank fusion against values derived by
// hand, and the options it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "index/fusion.h"

namespace moeedb {
namespace {

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

}  // namespace
}  // namespace moeedb
