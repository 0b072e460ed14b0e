// RidgeMap: the linear map that best carries one set of vectors onto
// another, in closed form. The embedding trainer starts its distillation
// projection (the student's pooled vector into a teacher's space of another
// dimension) from it, so the direct term's first gradients already point
// from a fitted map rather than a random one.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>

namespace moeedb::embed_train {

// W [to.size(1), from.size(1)] minimising |from W^T - to|^2 + ridge |W|^2
// with ridge = ridge_share x the mean of diag(from^T from): the normal
// equations (from^T from + ridge I) W^T = from^T to, solved in double.
// `from` [n, a] and `to` [n, b], n rows in both.
inline at::Tensor RidgeMap(const at::Tensor& from, const at::Tensor& to, double ridge_share = 1e-2) {
  at::NoGradGuard no_grad;
  const at::Tensor x = from.to(at::kDouble), y = to.to(at::kDouble);
  at::Tensor gram = at::matmul(x.t(), x);
  // A floor keeps an all-zero `from` solvable (its map is then zero).
  const double ridge = std::max(ridge_share * gram.diagonal().mean().item<double>(), 1e-12);
  gram = gram + ridge * at::eye(gram.size(0), at::kDouble);
  return at::linalg_solve(gram, at::matmul(x.t(), y)).t().to(at::kFloat).contiguous();
}

}  // namespace moeedb::embed_train
