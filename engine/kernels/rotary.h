// RotaryInPlace: rotary position embedding (RoPE, "rotate half" layout) on
// contiguous float32 CPU rows, in place, in one pass.
// Why: ATen's formula, x * cos + rotate_half(x) * sin, is five calls and five
// passes over q and k (a negation, a concatenation, two products, a sum),
// run twice per layer.
#pragma once

#include <ATen/core/Tensor.h>

namespace moeedb {

// x [N, heads, head_dim] float32; cos and sin [N, 1, head_dim] (row i's
// angles, shared by its heads). With h = head_dim / 2, per row and head:
//   x[d]     <- x[d] * cos[d] - x[d + h] * sin[d]          (d < h)
//   x[d + h] <- x[d + h] * cos[d + h] + x[d] * sin[d + h]
// Returns false, touching nothing, unless x, cos and sin are contiguous
// float32 CPU tensors of those shapes without autograd.
bool RotaryInPlace(at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace moeedb
