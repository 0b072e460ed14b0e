#include "engine/kernels/rms_norm.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "engine/kernels/tensor_ops.h"
#include "engine/kernels/vector_exp.h"

namespace moeedb {

namespace {

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) float SumSquaresAvx2(const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    a0 = _mm256_fmadd_ps(v0, v0, a0);
    a1 = _mm256_fmadd_ps(v1, v1, a1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    a0 = _mm256_fmadd_ps(v, v, a0);
  }
  float sum = Hsum8(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) sum += x[i] * x[i];
  return sum;
}
#endif

float SumSquares(const float* x, int64_t n) {
#if defined(__x86_64__)
  if (CpuHasAvx2Fma()) return SumSquaresAvx2(x, n);
#endif
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
  return sum;
}

}  // namespace

at::Tensor RmsNormFast(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const int64_t D = x.dim() > 0 ? x.size(-1) : 0;
  if (!x.device().is_cpu() || x.scalar_type() != at::kFloat || !x.is_contiguous() || x.requires_grad() ||
      weight.requires_grad() || weight.scalar_type() != at::kFloat || !weight.is_contiguous() ||
      weight.numel() != D || D == 0)
    return RmsNorm(x, weight, eps);
  at::Tensor y = at::empty_like(x);
  const float* xp = x.data_ptr<float>();
  const float* wp = weight.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const auto e = static_cast<float>(eps);
  at::parallel_for(0, x.numel() / D, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = xp + r * D;
      float* yr = yp + r * D;
      // As the formula: x * rsqrt(mean(x^2) + eps), then times the weight.
      const float inv = 1.0f / std::sqrt(SumSquares(xr, D) / static_cast<float>(D) + e);
      for (int64_t d = 0; d < D; ++d) yr[d] = wp[d] * (xr[d] * inv);
    }
  });
  return y;
}

}  // namespace moeedb
