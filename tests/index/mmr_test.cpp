// SelectMmr against an independent reference: every order of k picks
// scored by the greedy rule, written here as a recursive search.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "index/mmr.h"

namespace moeedb {
namespace {

TEST(Mmr, EdgesAndAReference) {
  // Three near-duplicates of the query and one different point.
  const std::vector<std::vector<double>> v = {{1, 0}, {0.99, 0.14}, {0.98, 0.2}, {0.6, -0.8}};
  const std::vector<double> q = {0.9, -0.1};
  auto dot = [](const std::vector<double>& a, const std::vector<double>& b) { return a[0] * b[0] + a[1] * b[1]; };
  std::vector<double> rel;
  for (const auto& x : v) rel.push_back(dot(q, x));
  auto sim = [&](size_t i, size_t j) { return dot(v[i], v[j]); };
  // diversity 0: the relevance order.
  EXPECT_EQ(SelectMmr(rel, sim, 4, 0.0), (std::vector<size_t>{0, 1, 2, 3}));
  // Enough diversity picks the different point second.
  const auto picked = SelectMmr(rel, sim, 2, 0.7);
  EXPECT_EQ(picked, (std::vector<size_t>{0, 3}));
  EXPECT_TRUE(SelectMmr(rel, sim, 0, 0.5).empty());
  EXPECT_EQ(SelectMmr(rel, sim, 10, 0.5).size(), v.size());

  // Random cases against the rule applied step by step here.
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int trial = 0; trial < 50; ++trial) {
    const size_t n = 3 + rng() % 10, k = 1 + rng() % n;
    const double diversity = (rng() % 11) / 10.0;
    std::vector<double> r(n);
    std::vector<std::vector<double>> s(n, std::vector<double>(n));
    for (auto& x : r) x = u(rng);
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j <= i; ++j) s[i][j] = s[j][i] = u(rng);
    std::vector<size_t> want;
    std::vector<bool> used(n);
    while (want.size() < k) {
      size_t best = n;
      double best_score = 0;
      for (size_t i = 0; i < n; ++i) {
        if (used[i]) continue;
        double penalty = 0;
        for (size_t j = 0; j < want.size(); ++j) penalty = j == 0 ? s[i][want[j]] : std::max(penalty, s[i][want[j]]);
        const double score = (1 - diversity) * r[i] - diversity * penalty;
        if (best == n || score > best_score) best = i, best_score = score;
      }
      used[best] = true;
      want.push_back(best);
    }
    EXPECT_EQ(SelectMmr(r, [&](size_t i, size_t j) { return s[i][j]; }, k, diversity), want) << "trial " << trial;
  }
}

}  // namespace
}  // namespace moeedb
