// RmsNormFast: RMSNorm over the last dimension, y = w * (x / sqrt(mean(x^2) +
// eps)), in one pass per row for contiguous float32 CPU tensors without
// autograd; anything else goes to RmsNorm (tensor_ops.h), ATen's formula.
// Why: that formula is five ATen calls and three passes over the activations,
// and a forward normalises 4-5 times per layer (input, post-attention, QK
// norms) plus the read-out.
#pragma once

#include <ATen/core/Tensor.h>

namespace moeedb {

at::Tensor RmsNormFast(const at::Tensor& x, const at::Tensor& weight, double eps);

}  // namespace moeedb
