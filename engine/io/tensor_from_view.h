// A checkpoint tensor as an ATen tensor, and back (implemented in
// tensor_from_view.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include "base/status.h"
#include "engine/io/safetensors.h"

namespace moeedb {

// A float32 tensor for `view`: zero-copy over the mapping when the file holds
// aligned F32 (the mapping is read-only: never modify the result in place),
// a converted copy for F16/BF16. Other dtypes are an error naming the tensor.
Result<at::Tensor> TensorFromView(const TensorView& view);

// `t` (any float dtype, any layout, detached) as F32 bytes for WriteSafetensors.
TensorToWrite F32TensorToWrite(std::string name, const at::Tensor& t);

}  // namespace moeedb
