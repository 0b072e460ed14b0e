// Lane reductions of AVX2 vectors, shared by the engine's CPU kernels and the
// index's exact scan. Callers choose their AVX2 paths at run time (the CPU's
// flags), so these are compiled for AVX2 only where they are inlined.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

namespace moeedb {

// The sum of a vector's eight lanes.
__attribute__((target("avx2,fma"))) inline float Hsum8(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The largest of a vector's eight lanes.
__attribute__((target("avx2,fma"))) inline float Hmax8(__m256 a) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

}  // namespace moeedb

#endif  // __x86_64__
