// RotaryInPlace (engine/kernels/rotary.h) against the rotate-half formula in
// double, written here; tensors it does not take are left untouched.
#include "engine/kernels/rotary.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

namespace moeedb {
namespace {

TEST(RotaryInPlace, MatchesTheRotateHalfFormula) {
  const int64_t N = 37, heads = 3, hd = 10, half = hd / 2;
  at::manual_seed(1);
  at::Tensor x = at::randn({N, heads, hd});
  at::Tensor angle = at::rand({N, 1, hd}) * 6.0;
  at::Tensor cos = angle.cos(), sin = angle.sin();
  const at::Tensor x0 = x.clone();
  ASSERT_TRUE(RotaryInPlace(x, cos, sin));
  auto X = x0.accessor<float, 3>(), Y = x.accessor<float, 3>();
  auto C = cos.accessor<float, 3>(), S = sin.accessor<float, 3>();
  double worst = 0;
  for (int64_t r = 0; r < N; ++r)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t d = 0; d < hd; ++d) {
        // rotate_half(x) = [-x[h:], x[:h]]
        const double rot = d < half ? -static_cast<double>(X[r][h][d + half]) : static_cast<double>(X[r][h][d - half]);
        const double want = static_cast<double>(X[r][h][d]) * C[r][0][d] + rot * S[r][0][d];
        worst = std::max(worst, std::abs(want - Y[r][h][d]));
      }
  EXPECT_LT(worst, 1e-6);
}

TEST(RotaryInPlace, LeavesWhatItDoesNotTakeUntouched) {
  at::Tensor cos = at::ones({4, 1, 8}), sin = at::zeros({4, 1, 8});
  at::Tensor strided = at::randn({4, 8, 2}).transpose(1, 2);  // [4, 2, 8], not contiguous
  const at::Tensor before = strided.clone();
  EXPECT_FALSE(RotaryInPlace(strided, cos, sin));
  EXPECT_TRUE(at::equal(strided, before));
  at::Tensor doubles = at::randn({4, 2, 8}, at::kDouble);
  EXPECT_FALSE(RotaryInPlace(doubles, cos, sin));
  at::Tensor wrong_rows = at::randn({5, 2, 8});
  EXPECT_FALSE(RotaryInPlace(wrong_rows, cos, sin));
}

}  // namespace
}  // namespace moeedb
