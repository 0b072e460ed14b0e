#include "engine/kernels/weight_format.h"

#include <cstdlib>
#include <cstring>

namespace moeedb {

bool CpuHasFastBf16Gemm() {
#if defined(__x86_64__)
  static const bool fast = [] {
    const char* env = std::getenv("MOEEDB_BF16_COMPUTE");
    if (env != nullptr && std::strcmp(env, "off") == 0) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq");
  }();
  return fast;
#else
  return false;
#endif
}

ComputeDtype EffectiveComputeDtype(const WeightFormat& f, bool cuda) {
  if (f.dtype == ComputeDtype::kBF16 && (cuda || CpuHasFastBf16Gemm())) return ComputeDtype::kBF16;
  return ComputeDtype::kF32;
}

std::string WeightFormatName(const WeightFormat& f) {
  std::string s = kComputeDtypes.Name(f.dtype);
  if (f.quant == WeightQuant::kInt8) s += "+int8";
  return s;
}

}  // namespace moeedb
