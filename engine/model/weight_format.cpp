#include "engine/model/weight_format.h"

namespace moeedb {

const char* ComputeDtypeName(ComputeDtype d) { return d == ComputeDtype::kF32 ? "f32" : "bf16"; }
const char* WeightQuantName(WeightQuant q) { return q == WeightQuant::kNone ? "none" : "int8"; }

Result<ComputeDtype> ParseComputeDtype(const std::string& name) {
  if (name == "f32" || name == "float32") return ComputeDtype::kF32;
  if (name == "bf16" || name == "bfloat16") return ComputeDtype::kBF16;
  return Status::InvalidArgument("unknown dtype '" + name + "' (expected f32 or bf16)");
}

Result<WeightQuant> ParseWeightQuant(const std::string& name) {
  if (name == "none") return WeightQuant::kNone;
  if (name == "int8") return WeightQuant::kInt8;
  return Status::InvalidArgument("unknown quantization '" + name + "' (expected none or int8)");
}

bool CpuHasFastBf16Gemm() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

ComputeDtype EffectiveComputeDtype(const WeightFormat& f, bool cuda) {
  if (f.dtype == ComputeDtype::kBF16 && (cuda || CpuHasFastBf16Gemm())) return ComputeDtype::kBF16;
  return ComputeDtype::kF32;
}

std::string WeightFormatName(const WeightFormat& f) {
  std::string s = ComputeDtypeName(f.dtype);
  if (f.quant == WeightQuant::kInt8) s += "+int8";
  return s;
}

}  // namespace moeedb
