// TensorFromView (declared in engine/kernels/tensor_ops.h): a safetensors
// view as a float32 tensor, zero-copy where the mapping allows.
#include <ATen/ATen.h>

#include <cstring>

#include "engine/io/safetensors.h"
#include "engine/io/tensor_from_view.h"

namespace moeedb {

Result<at::Tensor> TensorFromView(const TensorView& v) {
  std::vector<int64_t> shape = v.shape;
  at::ScalarType st;
  switch (v.dtype) {
    case DType::kF32: st = at::kFloat; break;
    case DType::kF16: st = at::kHalf; break;
    case DType::kBF16: st = at::kBFloat16; break;
    case DType::kF64: st = at::kDouble; break;
    default:
      return Status::NotSupported("tensor '" + v.name + "' in " + v.file + " has dtype " + DTypeName(v.dtype) +
                                  "; weights must be F32, F16, BF16 or F64");
  }
  const size_t elem = DTypeSize(v.dtype);
  void* data = const_cast<void*>(v.data);  // read-only mapping: never written through
  if (reinterpret_cast<uintptr_t>(data) % elem != 0) {
    at::Tensor copy = at::empty(shape, at::TensorOptions().dtype(st));
    std::memcpy(copy.data_ptr(), v.data, v.nbytes);
    return st == at::kFloat ? copy : copy.to(at::kFloat);
  }
  at::Tensor t = at::from_blob(data, shape, at::TensorOptions().dtype(st));
  if (st == at::kFloat) return t;  // zero-copy
  return t.to(at::kFloat);
}

TensorToWrite F32TensorToWrite(std::string name, const at::Tensor& t) {
  const at::Tensor x = t.detach().to(at::kFloat).contiguous();
  const auto* p = static_cast<const uint8_t*>(x.data_ptr());
  return {std::move(name), DType::kF32, x.sizes().vec(), std::vector<uint8_t>(p, p + x.numel() * sizeof(float))};
}

}  // namespace moeedb
