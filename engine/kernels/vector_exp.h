// Vector exponential and SwiGLU for the CPU kernels (packed attention, packed
// experts, RMSNorm): eight floats at a time with AVX2/FMA where the CPU has
// them (lane reductions: base/simd.h).
#pragma once

#include <cstdint>

#include "base/simd.h"

namespace moeedb {

// True on x86-64 CPUs with AVX2 and FMA (the vector paths' requirement).
bool CpuHasAvx2Fma();
// True on x86-64 CPUs with AVX-512 F as well (the 16-lane paths).
bool CpuHasAvx512F();

// The instruction sets the CPU kernels choose between at run time.
enum class SimdLevel { kScalar, kAvx2, kAvx512 };
bool SimdLevelRuns(SimdLevel s);         // whether this CPU has what s needs
const char* SimdLevelName(SimdLevel s);  // "scalar", "avx2", "avx512"
// The widest level this CPU runs, at most the one the environment variable
// `cap_env` names (benchmarks and tests use it to take an AVX2-only CPU's
// paths); unset or any other value: no cap. Read on every call.
SimdLevel WidestSimdLevel(const char* cap_env);

// y[i] = exp(x[i]) as the kernels compute it (Exp8 where AVX2 is available,
// else std::exp), 0 below -87 either way; n may be anything.
void ExpArray(const float* x, float* y, int64_t n);

// out[i] = silu(gate[i]) * up[i] = gate[i] * up[i] / (1 + exp(-gate[i])),
// i < n; out may alias gate.
void SiluGluArray(const float* gate, const float* up, float* out, int64_t n);

#if defined(__x86_64__)
// exp(x), Cephes' single-precision polynomial (~1e-7 relative error); 0 below
// -87 (where float32 exp turns denormal), which also covers -inf.
__attribute__((target("avx2,fma"))) inline __m256 Exp8(__m256 x) {
  const __m256 zero_below = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ);
  x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.3762626647949f)), _mm256_set1_ps(-88.3762626647949f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  x = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
  return _mm256_andnot_ps(zero_below, y);
}

// Exp8 on sixteen lanes (the same polynomial and range reduction), for the
// AVX-512 kernels; tests/engine/packed_attention_test.cpp checks it through the
// AVX-512 attention against a double-precision softmax.
__attribute__((target("avx512f"))) inline __m512 Exp16(__m512 x) {
  const __mmask16 zero_below = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_LT_OQ);
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.3762626647949f)), _mm512_set1_ps(-88.3762626647949f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  x = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  x = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), x);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(x, x), _mm512_add_ps(x, _mm512_set1_ps(1.0f)));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  y = _mm512_mul_ps(y, _mm512_castsi512_ps(e));
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~zero_below), y);
}

#endif  // __x86_64__

}  // namespace moeedb
