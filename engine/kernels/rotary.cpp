#include "engine/kernels/rotary.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

namespace moeedb {

bool RotaryInPlace(at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  auto fits = [&](const at::Tensor& t) {
    return t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous() && !t.requires_grad();
  };
  if (x.dim() != 3 || !fits(x) || !fits(cos) || !fits(sin) || x.size(2) % 2 != 0) return false;
  const int64_t N = x.size(0), heads = x.size(1), hd = x.size(2), half = hd / 2;
  for (const at::Tensor* t : {&cos, &sin})
    if (t->dim() != 3 || t->size(0) != N || t->size(1) != 1 || t->size(2) != hd) return false;
  float* xp = x.data_ptr<float>();
  const float* cp = cos.data_ptr<float>();
  const float* sp = sin.data_ptr<float>();
  at::parallel_for(0, N, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *c = cp + r * hd, *s = sp + r * hd;
      for (int64_t h = 0; h < heads; ++h) {
        float* v = xp + (r * heads + h) * hd;
        for (int64_t d = 0; d < half; ++d) {
          const float a = v[d], b = v[d + half];
          v[d] = a * c[d] - b * s[d];
          v[d + half] = b * c[d + half] + a * s[d + half];
        }
      }
    }
  });
  return true;
}

}  // namespace moeedb
