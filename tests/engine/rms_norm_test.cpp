// RmsNormFast (engine/kernels/rms_norm.h) against RMSNorm computed in double here, on
// row lengths that cover its 16-wide, 8-wide and scalar parts, a per-head
// view, and the inputs it hands to ATen's formula.
#include "engine/kernels/rms_norm.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

namespace moeedb {
namespace {

at::Tensor Reference(const at::Tensor& x, const at::Tensor& w, double eps) {
  at::Tensor xd = x.to(at::kDouble), wd = w.to(at::kDouble);
  return (wd * xd / at::sqrt(xd.pow(2).mean({-1}, true) + eps)).to(at::kFloat);
}

TEST(RmsNormFast, MatchesTheDefinitionInDouble) {
  at::manual_seed(3);
  for (auto shape : std::vector<std::vector<int64_t>>{{7, 64}, {5, 4, 12}, {3, 40}, {2, 3}, {9, 256}}) {
    at::Tensor x = at::randn(shape) * 3.0;
    at::Tensor w = at::randn({shape.back()});
    at::Tensor y = RmsNormFast(x, w, 1e-5);
    EXPECT_EQ(y.sizes(), x.sizes());
    EXPECT_LT((y - Reference(x, w, 1e-5)).abs().max().item<float>(), 2e-5) << x.sizes();
  }
  // eps matters where a row is near zero.
  at::Tensor small = at::full({2, 16}, 1e-4f), w = at::ones({16});
  EXPECT_LT((RmsNormFast(small, w, 1e-6) - Reference(small, w, 1e-6)).abs().max().item<float>(), 1e-6);
}

TEST(RmsNormFast, OtherInputsTakeTheAtenFormula) {
  at::manual_seed(4);
  at::Tensor x = at::randn({16, 8}).t();  // not contiguous
  at::Tensor w = at::randn({16});
  EXPECT_LT((RmsNormFast(x, w, 1e-5) - Reference(x, w, 1e-5)).abs().max().item<float>(), 2e-5);
  at::Tensor xd = at::randn({4, 8}, at::kDouble);  // not float32
  EXPECT_EQ(RmsNormFast(xd, at::ones({8}, at::kDouble), 1e-5).scalar_type(), at::kDouble);
}

}  // namespace
}  // namespace moeedb
