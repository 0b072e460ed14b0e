#include "engine/kernels/vector_exp.h"

#include <cmath>
#include <cstdlib>
#include <string>

namespace moeedb {

bool CpuHasAvx2Fma() {
#if defined(__x86_64__)
  static const bool on = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return on;
#else
  return false;
#endif
}

bool CpuHasAvx512F() {
#if defined(__x86_64__)
  static const bool on = [] {
    __builtin_cpu_init();
    return CpuHasAvx2Fma() && __builtin_cpu_supports("avx512f");
  }();
  return on;
#else
  return false;
#endif
}

bool SimdLevelRuns(SimdLevel s) {
  switch (s) {
    case SimdLevel::kScalar: return true;
    case SimdLevel::kAvx2: return CpuHasAvx2Fma();
    case SimdLevel::kAvx512: return CpuHasAvx512F();
  }
  return false;
}

const char* SimdLevelName(SimdLevel s) {
  switch (s) {
    case SimdLevel::kScalar: return "scalar";
    case SimdLevel::kAvx2: return "avx2";
    case SimdLevel::kAvx512: return "avx512";
  }
  return "?";
}

SimdLevel WidestSimdLevel(const char* cap_env) {
  const char* env = std::getenv(cap_env);
  const std::string cap = env != nullptr ? env : "";
  SimdLevel top = SimdLevel::kAvx512;
  for (SimdLevel s : {SimdLevel::kAvx2, SimdLevel::kScalar})
    if (cap == SimdLevelName(s)) top = s;
  for (SimdLevel s : {SimdLevel::kAvx512, SimdLevel::kAvx2})
    if (s <= top && SimdLevelRuns(s)) return s;
  return SimdLevel::kScalar;
}

namespace {

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) int64_t ExpAvx2(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, Exp8(_mm256_loadu_ps(x + i)));
  return i;
}

__attribute__((target("avx2,fma"))) int64_t SiluGluAvx2(const float* g, const float* u, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i);
    const __m256 e = Exp8(_mm256_sub_ps(zero, gv));  // exp(-g): 0 for g > 87, large but finite for g < -88
    _mm256_storeu_ps(out + i, _mm256_div_ps(_mm256_mul_ps(gv, _mm256_loadu_ps(u + i)), _mm256_add_ps(one, e)));
  }
  return i;
}
#endif

}  // namespace

void ExpArray(const float* x, float* y, int64_t n) {
  int64_t i = 0;
#if defined(__x86_64__)
  if (CpuHasAvx2Fma()) {
    i = ExpAvx2(x, y, n);
    if (i < n) {  // the tail through the same polynomial
      float in[8] = {0}, out[8];
      for (int64_t j = i; j < n; ++j) in[j - i] = x[j];
      ExpAvx2(in, out, 8);
      for (int64_t j = i; j < n; ++j) y[j] = out[j - i];
    }
    return;
  }
#endif
  for (; i < n; ++i) y[i] = x[i] < -87.0f ? 0.0f : std::exp(x[i]);  // as Exp8: no denormals
}

void SiluGluArray(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
#if defined(__x86_64__)
  if (CpuHasAvx2Fma()) i = SiluGluAvx2(gate, up, out, n);
#endif
  for (; i < n; ++i) out[i] = gate[i] * up[i] / (1.0f + std::exp(-gate[i]));
}

}  // namespace moeedb
