#include "engine/kernels/packed_attention.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/kernels/vector_exp.h"

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
    scores[j] = Hsum8(a) * scale;
  }
  // Pad to a multiple of 8 with -inf: exp gives exactly 0 there.
  const int64_t n8 = (n + 7) / 8 * 8;
  for (int64_t i = n; i < n8; ++i) scores[i] = -std::numeric_limits<float>::infinity();
  __m256 mv = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < n8; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(scores + i));
  const __m256 m = _mm256_set1_ps(Hmax8(mv));
  __m256 sv = _mm256_setzero_ps();
  for (int64_t i = 0; i < n8; i += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(scores + i), m));
    _mm256_storeu_ps(scores + i, e);
    sv = _mm256_add_ps(sv, e);
  }
  const float inv = 1.0f / Hsum8(sv);
  for (int64_t d = 0; d < hd; d += 8) _mm256_storeu_ps(o + d, _mm256_setzero_ps());
  for (j = 0; j < n; ++j) {
    const __m256 p = _mm256_set1_ps(scores[j] * inv);
    const float* vj = v + j * kv_ld;
    for (int64_t d = 0; d < hd; d += 8)
      _mm256_storeu_ps(o + d, _mm256_fmadd_ps(p, _mm256_loadu_ps(vj + d), _mm256_loadu_ps(o + d)));
  }
}

#endif  // __x86_64__

}  // namespace

void PackedAttentionF32(const PackedAttentionShape& shape, const float* q, int64_t q_ld, const float* k,
                        const float* v, int64_t kv_ld, const int64_t* q_text, const int64_t* q_pos,
                        int64_t n_queries, const int64_t* text_start, float* out) {
  const int64_t nh = shape.heads, hd = shape.head_dim, group = shape.heads / shape.kv_heads;
#if defined(__x86_64__)
  const bool vec = hd % 8 == 0 && CpuHasAvx2Fma();
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

}  // namespace moeedb
