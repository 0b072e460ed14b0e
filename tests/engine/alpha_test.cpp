// Label-free alpha and Spearman, against hand-derived values.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/analysis/alpha.h"

namespace moeedb {
namespace {

TEST(Spearman, HandDerivedWithTies) {
  // ranks x = [1, 2.5, 2.5, 4], y = [1, 3, 2, 4]: cov 4.5, var 4.5 and 5.
  EXPECT_NEAR(Spearman({1, 2, 2, 3}, {1, 3, 2, 4}), 4.5 / std::sqrt(4.5 * 5.0), 1e-12);
  EXPECT_NEAR(Spearman({1, 2, 3}, {10, 20, 30}), 1.0, 1e-12);
  EXPECT_NEAR(Spearman({1, 2, 3}, {3, 2, 1}), -1.0, 1e-12);
  EXPECT_EQ(Spearman({1, 1, 1}, {1, 2, 3}), 0.0);  // constant side: undefined, reported as 0
}

TEST(LabelFreeAlpha, BalancesTheTwoSimilarities) {
  // Independent Gaussians, sd(hs) = 1 and sd(rw) = 2: rho(f, hs) + rho(f, rw)
  // is monotone in the Pearson sum (1 + 2a) / sqrt(1 + 4a^2), maximal at
  // a = 1/2 (derived by hand).
  std::mt19937 rng(1);
  std::normal_distribution<double> n01(0, 1);
  std::vector<double> hs, rw;
  for (int i = 0; i < 4000; ++i) {
    hs.push_back(n01(rng));
    rw.push_back(2 * n01(rng));
  }
  AlphaChoice c = ChooseAlphaLabelFree(hs, rw);
  EXPECT_NEAR(c.alpha, 0.5, 0.1);
  // At the balance each Pearson correlation is 1/sqrt(2); for Gaussians
  // Spearman = (6/pi) asin(r/2), so the objective is 2 (6/pi) asin(1/(2 sqrt 2)).
  EXPECT_NEAR(c.objective, 2 * 6 / M_PI * std::asin(1 / (2 * std::sqrt(2.0))), 0.03);
  // Swap the spreads: a = 2.
  for (auto& v : rw) v /= 4;
  EXPECT_NEAR(ChooseAlphaLabelFree(hs, rw).alpha, 2.0, 0.35);
}

}  // namespace
}  // namespace moeedb
