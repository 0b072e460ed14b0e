// RouterKernel (engine/kernels/router_kernel.h): every path against a plain
// std::fma loop written here, bit for bit; logits that do not depend on the
// expert count; the top-k choice against long-double dot products, on random
// routers and on constructed near-ties and exact ties.
#include "engine/kernels/router_kernel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

namespace moeedb {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = g(rng);
  return v;
}

// The logit as the header defines it: one FMA chain over h in order.
float ChainLogit(const float* x, const float* w, int64_t H) {
  float s = 0.0f;
  for (int64_t h = 0; h < H; ++h) s = std::fma(x[h], w[h], s);
  return s;
}

std::vector<SimdLevel> PathsThisCpuRuns() {
  std::vector<SimdLevel> out;
  for (auto p : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512})
    if (SimdLevelRuns(p)) out.push_back(p);
  return out;
}

class RouterKernelPaths : public ::testing::TestWithParam<SimdLevel> {};

// Expert counts below, at and past a vector, a 64-expert chunk and its tail;
// row counts that leave 1-3 rows past the 4-row tiles; a hidden size that is
// no multiple of anything.
TEST_P(RouterKernelPaths, EqualsTheFmaChainBitForBit) {
  const int64_t H = 70;
  for (int64_t E : {1, 5, 8, 16, 17, 64, 100}) {
    for (int64_t N : {1, 6, 13}) {
      const auto x = Random(static_cast<size_t>(N * H), static_cast<uint32_t>(E * 31 + N), 1.0f);
      const auto w = Random(static_cast<size_t>(E * H), static_cast<uint32_t>(E), 0.3f);
      RouterKernel rk(w.data(), E, H);
      std::vector<float> z(static_cast<size_t>(N * E), std::nanf(""));
      rk.Logits(GetParam(), x.data(), N, z.data());
      for (int64_t i = 0; i < N; ++i)
        for (int64_t e = 0; e < E; ++e)
          ASSERT_EQ(z[static_cast<size_t>(i * E + e)], ChainLogit(x.data() + i * H, w.data() + e * H, H))
              << "E " << E << " N " << N << " row " << i << " expert " << e;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EachPathThisCpuRuns, RouterKernelPaths, ::testing::ValuesIn(PathsThisCpuRuns()),
                         [](const auto& info) { return std::string(SimdLevelName(info.param)); });

TEST(RouterKernel, LogitsDoNotDependOnTheExpertCount) {
  const int64_t H = 256, E = 64, N = 37;
  const auto x = Random(static_cast<size_t>(N * H), 1, 1.0f);
  const auto w = Random(static_cast<size_t>(E * H), 2, 0.05f);
  std::vector<int64_t> kept;
  std::vector<float> wk;
  for (int64_t e = 0; e < E; e += 3) {
    kept.push_back(e);
    wk.insert(wk.end(), w.begin() + e * H, w.begin() + (e + 1) * H);
  }
  const int64_t K = static_cast<int64_t>(kept.size());
  std::vector<float> z(static_cast<size_t>(N * E)), zk(static_cast<size_t>(N * K));
  RouterKernel(w.data(), E, H).Logits(x.data(), N, z.data());
  RouterKernel(wk.data(), K, H).Logits(x.data(), N, zk.data());
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < K; ++j)
      ASSERT_EQ(zk[static_cast<size_t>(i * K + j)], z[static_cast<size_t>(i * E + kept[static_cast<size_t>(j)])]);
}

// The k largest x·w[e] in long double (products of floats are exact there),
// ties to the lower index, as a set.
std::set<int64_t> ExactTopK(const float* x, const std::vector<float>& w, int64_t E, int64_t H, int64_t k) {
  std::vector<long double> d(static_cast<size_t>(E), 0.0L);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t h = 0; h < H; ++h) d[static_cast<size_t>(e)] += static_cast<long double>(x[h]) * w[e * H + h];
  std::vector<int64_t> idx(static_cast<size_t>(E));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int64_t a, int64_t b) { return d[static_cast<size_t>(a)] > d[static_cast<size_t>(b)]; });
  return {idx.begin(), idx.begin() + k};
}

// Random routers: the chosen set is the exact one, ordered by logit, and
// almost every row is decided in float32.
TEST(RouterKernel, TopKIsTheExactChoice) {
  const int64_t H = 512, E = 64, N = 400;
  const auto x = Random(static_cast<size_t>(N * H), 3, 1.0f);
  const auto w = Random(static_cast<size_t>(E * H), 4, 0.04f);
  RouterKernel rk(w.data(), E, H);
  std::vector<float> z(static_cast<size_t>(N * E));
  rk.Logits(x.data(), N, z.data());
  for (int64_t k : {1, 8}) {
    std::vector<int64_t> got(static_cast<size_t>(N * k));
    const int64_t redone = rk.TopK(x.data(), z.data(), N, k, got.data());
    EXPECT_LT(redone, N / 10) << "k " << k;
    for (int64_t i = 0; i < N; ++i) {
      const int64_t* g = got.data() + i * k;
      EXPECT_EQ(std::set<int64_t>(g, g + k), ExactTopK(x.data() + i * H, w, E, H, k)) << "row " << i;
      for (int64_t j = 1; j < k; ++j) EXPECT_GE(z[static_cast<size_t>(i * E + g[j - 1])], z[static_cast<size_t>(i * E + g[j])]);
    }
  }
}

// Experts 5 and 9 differ by one ulp in one weight: their float32 logits
// cannot tell them apart, the double path can. Experts 2 and 7 are the same
// row (an exact tie): the lower index wins. Each pair is placed at the k-th
// and (k+1)-th places by making it larger than every other expert.
TEST(RouterKernel, NearTiesAndTiesAreDecidedExactly) {
  const int64_t H = 128, E = 12, N = 50;
  auto w = Random(static_cast<size_t>(E * H), 5, 0.05f);
  auto x = Random(static_cast<size_t>(N * H), 6, 1.0f);
  for (int64_t i = 0; i < N; ++i) x[static_cast<size_t>(i * H)] = 40.0f;  // a dimension the pairs read
  for (int64_t h = 0; h < H; ++h) {
    w[static_cast<size_t>(9 * H + h)] = w[static_cast<size_t>(5 * H + h)];
    w[static_cast<size_t>(7 * H + h)] = w[static_cast<size_t>(2 * H + h)];
  }
  w[static_cast<size_t>(5 * H)] = w[static_cast<size_t>(9 * H)] = w[static_cast<size_t>(2 * H)] =
      w[static_cast<size_t>(7 * H)] = 1.0f;
  w[static_cast<size_t>(2 * H)] = w[static_cast<size_t>(7 * H)] = 2.0f;  // 2 and 7 above 5 and 9
  w[static_cast<size_t>(9 * H + 1)] = std::nextafter(w[static_cast<size_t>(5 * H + 1)], 1.0f);
  RouterKernel rk(w.data(), E, H);
  std::vector<float> z(static_cast<size_t>(N * E));
  rk.Logits(x.data(), N, z.data());
  // k = 1 splits 2 from 7; k = 3 splits 5 from 9.
  for (int64_t k : {1, 3}) {
    std::vector<int64_t> got(static_cast<size_t>(N * k));
    EXPECT_EQ(rk.TopK(x.data(), z.data(), N, k, got.data()), N) << "k " << k;  // every row near a tie
    for (int64_t i = 0; i < N; ++i) {
      const int64_t* g = got.data() + i * k;
      EXPECT_EQ(g[0], 2) << "row " << i;
      if (k == 3) {
        EXPECT_EQ(g[1], 7);
        // Which of 5 and 9 is larger depends on the sign of x[i][1].
        EXPECT_EQ(g[2], x[static_cast<size_t>(i * H + 1)] > 0 ? 9 : 5) << "row " << i;
        EXPECT_EQ(std::set<int64_t>(g, g + k), ExactTopK(x.data() + i * H, w, E, H, k));
      }
    }
  }
}

TEST(RouterKernel, NonFiniteInputStillChoosesDistinctExperts) {
  const int64_t H = 32, E = 16, k = 4;
  const auto w = Random(static_cast<size_t>(E * H), 7, 0.1f);
  std::vector<float> x(static_cast<size_t>(2 * H), 1.0f);
  x[3] = std::nanf("");
  x[H + 5] = std::numeric_limits<float>::infinity();
  RouterKernel rk(w.data(), E, H);
  std::vector<float> z(static_cast<size_t>(2 * E));
  rk.Logits(x.data(), 2, z.data());
  std::vector<int64_t> got(static_cast<size_t>(2 * k));
  rk.TopK(x.data(), z.data(), 2, k, got.data());
  for (int64_t i = 0; i < 2; ++i) {
    std::set<int64_t> s(got.begin() + i * k, got.begin() + (i + 1) * k);
    EXPECT_EQ(static_cast<int64_t>(s.size()), k);
    for (int64_t e : s) EXPECT_TRUE(e >= 0 && e < E);
  }
}

}  // namespace
}  // namespace moeedb
