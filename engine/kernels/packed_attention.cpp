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

// GCC 12 reports its own AVX-512 intrinsics' _mm512_undefined_ps() operands
// as maybe uninitialised once inlined (GCC bug 105593, fixed in 13).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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

// s[0..n8) (n8 a multiple of 8; masked entries -inf) -> exp(s - max s) in
// place; returns 1 / the sum, the factor that makes them a softmax.
__attribute__((target("avx2,fma"))) float ExpShiftedAvx2(float* s, int64_t n8) {
  __m256 mv = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < n8; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(s + i));
  const __m256 m = _mm256_set1_ps(Hmax8(mv));
  __m256 sv = _mm256_setzero_ps();
  for (int64_t i = 0; i < n8; i += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(s + i), m));
    _mm256_storeu_ps(s + i, e);
    sv = _mm256_add_ps(sv, e);
  }
  return 1.0f / Hsum8(sv);
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
    scores[j] = Hsum8(a) * scale;
  }
  // Pad to a multiple of 8 with -inf: exp gives exactly 0 there.
  const int64_t n8 = (n + 7) / 8 * 8;
  for (int64_t i = n; i < n8; ++i) scores[i] = -std::numeric_limits<float>::infinity();
  const float inv = ExpShiftedAvx2(scores, n8);
  for (int64_t d = 0; d < hd; d += 8) _mm256_storeu_ps(o + d, _mm256_setzero_ps());
  for (j = 0; j < n; ++j) {
    const __m256 p = _mm256_set1_ps(scores[j] * inv);
    const float* vj = v + j * kv_ld;
    for (int64_t d = 0; d < hd; d += 8)
      _mm256_storeu_ps(o + d, _mm256_fmadd_ps(p, _mm256_loadu_ps(vj + d), _mm256_loadu_ps(o + d)));
  }
}

constexpr int kTileQueries = 4;   // queries of one text and head scored together
constexpr int64_t kBlockQueries = 256;  // queries per task (one transposed key block serves them)

// kTileQueries queries (q rows q_ld apart, the same text and head) against
// the first n8 keys, given transposed as kt [hd][kt_ld] (zero columns past
// the text's keys); query i sees its first n[i] keys, n8 is the largest n[i]
// rounded up to 8. v rows kv_ld apart; o rows o_ld apart. scores:
// kTileQueries x n8.
// Each key column loaded serves every query of the tile, and the scores come
// out eight keys a vector with no lane reductions, which is what the
// one-query kernel (AttendAvx2) spends most of its time on.
__attribute__((target("avx2,fma"))) void AttendTileAvx2(const float* q, int64_t q_ld, const float* kt, int64_t kt_ld,
                                                        int64_t n8, const float* v, int64_t kv_ld, const int64_t* n,
                                                        int64_t hd, float scale, float* scores, float* o,
                                                        int64_t o_ld) {
  constexpr int R = kTileQueries;
  // Scores, sixteen keys at a time (two vectors), then eight.
  int64_t j = 0;
  for (; j + 16 <= n8; j += 16) {
    __m256 a[R][2];
    for (int i = 0; i < R; ++i) a[i][0] = a[i][1] = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd; ++d) {
      const __m256 k0 = _mm256_loadu_ps(kt + d * kt_ld + j), k1 = _mm256_loadu_ps(kt + d * kt_ld + j + 8);
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        const __m256 qd = _mm256_broadcast_ss(q + i * q_ld + d);
        a[i][0] = _mm256_fmadd_ps(qd, k0, a[i][0]);
        a[i][1] = _mm256_fmadd_ps(qd, k1, a[i][1]);
      }
    }
    for (int i = 0; i < R; ++i) {
      _mm256_storeu_ps(scores + i * n8 + j, a[i][0]);
      _mm256_storeu_ps(scores + i * n8 + j + 8, a[i][1]);
    }
  }
  for (; j < n8; j += 8) {
    __m256 a[R];
    for (int i = 0; i < R; ++i) a[i] = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd; ++d) {
      const __m256 k0 = _mm256_loadu_ps(kt + d * kt_ld + j);
      for (int i = 0; i < R; ++i) a[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(q + i * q_ld + d), k0, a[i]);
    }
    for (int i = 0; i < R; ++i) _mm256_storeu_ps(scores + i * n8 + j, a[i]);
  }
  // Softmax per query over its own keys (the rest -inf, exp 0).
  const __m256 sc = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int i = 0; i < R; ++i) {
    float* s = scores + i * n8;
    for (int64_t c = 0; c < n8; c += 8) {
      const __m256 idx = _mm256_add_ps(_mm256_set1_ps(static_cast<float>(c)),
                                       _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7));
      const __m256 seen = _mm256_cmp_ps(idx, _mm256_set1_ps(static_cast<float>(n[i])), _CMP_LT_OQ);
      _mm256_storeu_ps(s + c, _mm256_blendv_ps(ninf, _mm256_mul_ps(_mm256_loadu_ps(s + c), sc), seen));
    }
    const __m256 inv = _mm256_set1_ps(ExpShiftedAvx2(s, n8));
    for (int64_t c = 0; c < n8; c += 8) _mm256_storeu_ps(s + c, _mm256_mul_ps(_mm256_loadu_ps(s + c), inv));
  }
  // Weighted sums of the values, sixteen dimensions at a time: each value
  // vector loaded serves every query of the tile.
  int64_t n_max = 0;
  for (int i = 0; i < R; ++i) n_max = std::max(n_max, n[i]);
  for (int64_t d = 0; d < hd; d += 16) {
    const bool two = d + 16 <= hd;
    __m256 a[R][2];
    for (int i = 0; i < R; ++i) a[i][0] = a[i][1] = _mm256_setzero_ps();
    for (int64_t jj = 0; jj < n_max; ++jj) {
      const float* vj = v + jj * kv_ld + d;
      const __m256 v0 = _mm256_loadu_ps(vj), v1 = two ? _mm256_loadu_ps(vj + 8) : _mm256_setzero_ps();
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        const __m256 p = _mm256_broadcast_ss(scores + i * n8 + jj);
        a[i][0] = _mm256_fmadd_ps(p, v0, a[i][0]);
        a[i][1] = _mm256_fmadd_ps(p, v1, a[i][1]);
      }
    }
    for (int i = 0; i < R; ++i) {
      _mm256_storeu_ps(o + i * o_ld + d, a[i][0]);
      if (two) _mm256_storeu_ps(o + i * o_ld + d + 8, a[i][1]);
    }
  }
}

constexpr int kTileQueries512 = 8;  // the AVX-512 tile: 16 accumulators of 32

// ExpShiftedAvx2 sixteen a vector (n16 a multiple of 16).
__attribute__((target("avx512f"))) float ExpShiftedAvx512(float* s, int64_t n16) {
  __m512 mv = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < n16; i += 16) mv = _mm512_max_ps(mv, _mm512_loadu_ps(s + i));
  const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mv));
  __m512 sv = _mm512_setzero_ps();
  for (int64_t i = 0; i < n16; i += 16) {
    const __m512 e = Exp16(_mm512_sub_ps(_mm512_loadu_ps(s + i), m));
    _mm512_storeu_ps(s + i, e);
    sv = _mm512_add_ps(sv, e);
  }
  return 1.0f / _mm512_reduce_add_ps(sv);
}

// AttendTileAvx2 with 16-float vectors and eight queries a tile: n16 (the
// largest n[i] rounded up to 16) keys, kt columns past the text's keys zero,
// head_dim a multiple of 16. Each key vector loaded serves eight queries
// (two loads and eight broadcasts per sixteen FMAs).
__attribute__((target("avx512f,avx2,fma"))) void AttendTileAvx512(const float* q, int64_t q_ld, const float* kt,
                                                                 int64_t kt_ld, int64_t n16, const float* v,
                                                                 int64_t kv_ld, const int64_t* n, int64_t hd,
                                                                 float scale, float* scores, float* o, int64_t o_ld) {
  constexpr int R = kTileQueries512;
  int64_t j = 0;
  for (; j + 32 <= n16; j += 32) {
    __m512 a[R][2];
    for (int i = 0; i < R; ++i) a[i][0] = a[i][1] = _mm512_setzero_ps();
    for (int64_t d = 0; d < hd; ++d) {
      const __m512 k0 = _mm512_loadu_ps(kt + d * kt_ld + j), k1 = _mm512_loadu_ps(kt + d * kt_ld + j + 16);
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) {
        const __m512 qd = _mm512_set1_ps(q[i * q_ld + d]);
        a[i][0] = _mm512_fmadd_ps(qd, k0, a[i][0]);
        a[i][1] = _mm512_fmadd_ps(qd, k1, a[i][1]);
      }
    }
    for (int i = 0; i < R; ++i) {
      _mm512_storeu_ps(scores + i * n16 + j, a[i][0]);
      _mm512_storeu_ps(scores + i * n16 + j + 16, a[i][1]);
    }
  }
  for (; j < n16; j += 16) {
    __m512 a[R];
    for (int i = 0; i < R; ++i) a[i] = _mm512_setzero_ps();
    for (int64_t d = 0; d < hd; ++d) {
      const __m512 k0 = _mm512_loadu_ps(kt + d * kt_ld + j);
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) a[i] = _mm512_fmadd_ps(_mm512_set1_ps(q[i * q_ld + d]), k0, a[i]);
    }
    for (int i = 0; i < R; ++i) _mm512_storeu_ps(scores + i * n16 + j, a[i]);
  }
  // Softmax per query over its own keys (the rest -inf, exp 0).
  const __m512 sc = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512 lane = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int i = 0; i < R; ++i) {
    float* s = scores + i * n16;
    const __m512 ni = _mm512_set1_ps(static_cast<float>(n[i]));
    for (int64_t c = 0; c < n16; c += 16) {
      const __mmask16 seen =
          _mm512_cmp_ps_mask(_mm512_add_ps(_mm512_set1_ps(static_cast<float>(c)), lane), ni, _CMP_LT_OQ);
      _mm512_storeu_ps(s + c, _mm512_mask_mul_ps(ninf, seen, _mm512_loadu_ps(s + c), sc));
    }
    const __m512 inv = _mm512_set1_ps(ExpShiftedAvx512(s, n16));
    for (int64_t c = 0; c < n16; c += 16) _mm512_storeu_ps(s + c, _mm512_mul_ps(_mm512_loadu_ps(s + c), inv));
  }
  // Weighted sums of the values, 32 dimensions at a time.
  int64_t n_max = 0;
  for (int i = 0; i < R; ++i) n_max = std::max(n_max, n[i]);
  for (int64_t d = 0; d < hd; d += 32) {
    const bool two = d + 32 <= hd;
    __m512 a[R][2];
    for (int i = 0; i < R; ++i) a[i][0] = a[i][1] = _mm512_setzero_ps();
    for (int64_t jj = 0; jj < n_max; ++jj) {
      const float* vj = v + jj * kv_ld + d;
      const __m512 v0 = _mm512_loadu_ps(vj), v1 = two ? _mm512_loadu_ps(vj + 16) : _mm512_setzero_ps();
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) {
        const __m512 p = _mm512_set1_ps(scores[i * n16 + jj]);
        a[i][0] = _mm512_fmadd_ps(p, v0, a[i][0]);
        a[i][1] = _mm512_fmadd_ps(p, v1, a[i][1]);
      }
    }
    for (int i = 0; i < R; ++i) {
      _mm512_storeu_ps(o + i * o_ld + d, a[i][0]);
      if (two) _mm512_storeu_ps(o + i * o_ld + d + 16, a[i][1]);
    }
  }
}


#endif  // __x86_64__

// A task: queries [begin, end) of one text (consecutive rows), one head.
struct QueryBlock {
  int64_t begin, end;
};

// Runs of consecutive query rows of the same text, cut into blocks of at
// most kBlockQueries.
std::vector<QueryBlock> QueryBlocks(const int64_t* q_text, int64_t n_queries) {
  std::vector<QueryBlock> out;
  for (int64_t r = 0; r < n_queries;) {
    int64_t e = r + 1;
    while (e < n_queries && e - r < kBlockQueries && q_text[e] == q_text[r]) ++e;
    out.push_back({r, e});
    r = e;
  }
  return out;
}

}  // namespace

SimdLevel AttentionKernelInUse() {
  static const SimdLevel k = WidestSimdLevel("MOEEDB_ATTENTION_KERNEL");
  return k;
}

void PackedAttentionF32(const PackedAttentionShape& shape, const float* q, int64_t q_ld, const float* k,
                        const float* v, int64_t kv_ld, const int64_t* q_text, const int64_t* q_pos,
                        int64_t n_queries, const int64_t* text_start, float* out) {
  PackedAttentionF32(AttentionKernelInUse(), shape, q, q_ld, k, v, kv_ld, q_text, q_pos, n_queries, text_start, out);
}

void PackedAttentionF32(SimdLevel kernel, const PackedAttentionShape& shape, const float* q, int64_t q_ld,
                        const float* k, const float* v, int64_t kv_ld, const int64_t* q_text, const int64_t* q_pos,
                        int64_t n_queries, const int64_t* text_start, float* out) {
  const int64_t nh = shape.heads, hd = shape.head_dim, group = shape.heads / shape.kv_heads;
  if (!SimdLevelRuns(kernel)) kernel = SimdLevel::kScalar;
#if defined(__x86_64__)
  const bool vec = hd % 8 == 0 && kernel != SimdLevel::kScalar;
  const bool wide = hd % 16 == 0 && kernel == SimdLevel::kAvx512;
#endif
  // One query row, one head: the tiled kernel's leftovers, and every row
  // where it cannot run.
  auto attend_one = [&](int64_t r, int64_t h, std::vector<float>& scores) {
    const int64_t n = q_pos[r] + 1;
    if (static_cast<int64_t>(scores.size()) < n + 8) scores.resize(static_cast<size_t>(n + 8));
    const int64_t kvh = h / group, s = text_start[q_text[r]];
    const float* qr = q + r * q_ld + h * hd;
    const float *kt = k + s * kv_ld + kvh * hd, *vt = v + s * kv_ld + kvh * hd;
    float* o = out + (r * nh + h) * hd;
#if defined(__x86_64__)
    if (vec) return AttendAvx2(qr, kt, vt, kv_ld, n, hd, shape.scale, scores.data(), o);
#endif
    AttendScalar(qr, kt, vt, kv_ld, n, hd, shape.scale, scores.data(), o);
  };
  const std::vector<QueryBlock> blocks = QueryBlocks(q_text, n_queries);
  const int64_t tasks = static_cast<int64_t>(blocks.size()) * nh;
  at::parallel_for(0, tasks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores, kt;
    for (int64_t t = begin; t < end; ++t) {
      const QueryBlock& b = blocks[static_cast<size_t>(t / nh)];
      const int64_t h = t % nh;
      int64_t r = b.begin;
#if defined(__x86_64__)
      if (vec && b.end - b.begin >= kTileQueries) {
        // The block's keys for this head, transposed: [hd][kt_ld], eight
        // keys at a time (eight contiguous writes per row of kt).
        int64_t n_max = 0;
        for (int64_t i = b.begin; i < b.end; ++i) n_max = std::max(n_max, q_pos[i] + 1);
        const int64_t kt_ld = (n_max + 15) / 16 * 16, kvh = h / group, s = text_start[q_text[b.begin]];
        kt.resize(static_cast<size_t>(hd * kt_ld));
        for (int64_t j0 = 0; j0 < kt_ld; j0 += 8)
          for (int64_t d = 0; d < hd; ++d) {
            float* dst = kt.data() + d * kt_ld + j0;
            for (int64_t j = 0; j < 8; ++j) dst[j] = j0 + j < n_max ? k[(s + j0 + j) * kv_ld + kvh * hd + d] : 0.0f;
          }
        if (static_cast<int64_t>(scores.size()) < kTileQueries512 * kt_ld)
          scores.resize(static_cast<size_t>(kTileQueries512 * kt_ld));
        for (; wide && r + kTileQueries512 <= b.end; r += kTileQueries512) {
          int64_t n[kTileQueries512], tile_n = 0;
          for (int i = 0; i < kTileQueries512; ++i) tile_n = std::max(tile_n, n[i] = q_pos[r + i] + 1);
          AttendTileAvx512(q + r * q_ld + h * hd, q_ld, kt.data(), kt_ld, (tile_n + 15) / 16 * 16,
                           v + s * kv_ld + kvh * hd, kv_ld, n, hd, shape.scale, scores.data(),
                           out + (r * nh + h) * hd, nh * hd);
        }
        for (; r + kTileQueries <= b.end; r += kTileQueries) {
          int64_t n[kTileQueries], tile_n = 0;
          for (int i = 0; i < kTileQueries; ++i) tile_n = std::max(tile_n, n[i] = q_pos[r + i] + 1);
          AttendTileAvx2(q + r * q_ld + h * hd, q_ld, kt.data(), kt_ld, (tile_n + 7) / 8 * 8, v + s * kv_ld + kvh * hd,
                         kv_ld, n, hd, shape.scale, scores.data(), out + (r * nh + h) * hd, nh * hd);
        }
      }
#endif
      for (; r < b.end; ++r) attend_one(r, h, scores);
    }
  });
}

}  // namespace moeedb
