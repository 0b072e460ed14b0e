#include "engine/packed_attention.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace moeedb {

namespace {

// One query row against n keys: scores, softmax, weighted sum of values.
// scores has room for n rounded up to 8.
void AttendScalar(const float* q, const float* k, const float* v, int64_t kv_ld, int64_t n, int64_t hd, float scale,
                  float* scores, float* o) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    const float* kj = k + j * kv_ld;
    float s = 0;
    for (int64_t d = 0; d < hd; ++d) s += q[d] * kj[d];
    scores[j] = s * scale;
    m = std::max(m, scores[j]);
  }
  float sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += (scores[j] = std::exp(scores[j] - m));
  const float inv = 1.0f / sum;
  std::fill(o, o + hd, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const float p = scores[j] * inv;
    const float* vj = v + j * kv_ld;
    for (int64_t d = 0; d < hd; ++d) o[d] += p * vj[d];
  }
}

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

__attribute__((target("avx2,fma"))) inline float Hsum(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// AttendScalar for head_dim a multiple of 8: four keys' dot products at a
// time (independent FMA chains), the exponentials eight at a time.
__attribute__((target("avx2,fma"))) void AttendAvx2(const float* q, const float* k, const float* v, int64_t kv_ld,
                                                    int64_t n, int64_t hd, float scale, float* scores, float* o) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const float *k0 = k + j * kv_ld, *k1 = k0 + kv_ld, *k2 = k1 + kv_ld, *k3 = k2 + kv_ld;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t d = 0; d < hd; d += 8) {
      const __m256 qd = _mm256_loadu_ps(q + d);
      a0 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k0 + d), a0);
      a1 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k1 + d), a1);
      a2 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k2 + d), a2);
      a3 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k3 + d), a3);
    }
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
    _mm_storeu_ps(scores + j, _mm_mul_ps(s, _mm_set1_ps(scale)));
  }
  for (; j < n; ++j) {
    const float* kj = k + j * kv_ld;
    __m256 a = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd; d += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(kj + d), a);
    scores[j] = Hsum(a) * scale;
  }
  // Pad to a multiple of 8 with -inf: exp gives exactly 0 there.
  const int64_t n8 = (n + 7) / 8 * 8;
  for (int64_t i = n; i < n8; ++i) scores[i] = -std::numeric_limits<float>::infinity();
  __m256 mv = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < n8; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(scores + i));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const __m256 m = _mm256_set1_ps(_mm_cvtss_f32(m4));
  __m256 sv = _mm256_setzero_ps();
  for (int64_t i = 0; i < n8; i += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(scores + i), m));
    _mm256_storeu_ps(scores + i, e);
    sv = _mm256_add_ps(sv, e);
  }
  const float inv = 1.0f / Hsum(sv);
  for (int64_t d = 0; d < hd; d += 8) _mm256_storeu_ps(o + d, _mm256_setzero_ps());
  for (j = 0; j < n; ++j) {
    const __m256 p = _mm256_set1_ps(scores[j] * inv);
    const float* vj = v + j * kv_ld;
    for (int64_t d = 0; d < hd; d += 8)
      _mm256_storeu_ps(o + d, _mm256_fmadd_ps(p, _mm256_loadu_ps(vj + d), _mm256_loadu_ps(o + d)));
  }
}

__attribute__((target("avx2,fma"))) void ExpInPlace(float* p, int64_t n8) {
  for (int64_t i = 0; i < n8; i += 8) _mm256_storeu_ps(p + i, Exp8(_mm256_loadu_ps(p + i)));
}

bool HasAvx2Fma() {
  static const bool on = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return on;
}

#endif  // __x86_64__

}  // namespace

void PackedAttentionF32(const PackedAttentionShape& shape, const float* q, int64_t q_ld, const float* k,
                        const float* v, int64_t kv_ld, const int64_t* q_text, const int64_t* q_pos,
                        int64_t n_queries, const int64_t* text_start, float* out) {
  const int64_t nh = shape.heads, hd = shape.head_dim, group = shape.heads / shape.kv_heads;
#if defined(__x86_64__)
  const bool vec = hd % 8 == 0 && HasAvx2Fma();
#endif
  at::parallel_for(0, n_queries, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores;
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = q_pos[r] + 1;
      if (static_cast<int64_t>(scores.size()) < n + 8) scores.resize(static_cast<size_t>(n + 8));
      const float* kt = k + text_start[q_text[r]] * kv_ld;
      const float* vt = v + text_start[q_text[r]] * kv_ld;
      for (int64_t h = 0; h < nh; ++h) {
        const float* qr = q + r * q_ld + h * hd;
        const int64_t kvh = h / group;
        float* o = out + (r * nh + h) * hd;
#if defined(__x86_64__)
        if (vec) {
          AttendAvx2(qr, kt + kvh * hd, vt + kvh * hd, kv_ld, n, hd, shape.scale, scores.data(), o);
          continue;
        }
#endif
        AttendScalar(qr, kt + kvh * hd, vt + kvh * hd, kv_ld, n, hd, shape.scale, scores.data(), o);
      }
    }
  });
}

void PackedAttentionExp(const float* x, float* y, int64_t n) {
#if defined(__x86_64__)
  if (HasAvx2Fma()) {
    std::vector<float> buf((static_cast<size_t>(n) + 7) / 8 * 8, 0.0f);
    std::copy(x, x + n, buf.begin());
    ExpInPlace(buf.data(), static_cast<int64_t>(buf.size()));
    std::copy(buf.begin(), buf.begin() + n, y);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

}  // namespace moeedb
