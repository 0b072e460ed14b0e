// The ATen formulas of the decoder's small ops (HF RMSNorm, SwiGLU): the
// reference the engine's kernels fall back to and are tested against, and
// what the model runs where no kernel takes the case. Internal to the engine.
#pragma once

#include <ATen/ATen.h>


namespace moeedb {

// HF RMSNorm: x * rsqrt(mean(x^2) + eps) over the last dim, computed in fp32,
// cast back to x's dtype, then times the weight.
inline at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  at::Tensor xf = x.to(at::kFloat);
  at::Tensor var = xf.pow(2).mean({-1}, /*keepdim=*/true);
  return weight * (xf * at::rsqrt(var + eps)).to(x.scalar_type());
}

// SwiGLU on a fused [2I, H] weight (gate rows first, then up rows):
// down(silu(gate x) * up x).
inline at::Tensor SwiGlu(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down) {
  const int64_t inter = gate_up.size(0) / 2;
  at::Tensor gu = at::linear(x, gate_up);
  at::Tensor act = at::silu(gu.narrow(1, 0, inter)) * gu.narrow(1, inter, inter);
  return at::linear(act, down);
}

}  // namespace moeedb
