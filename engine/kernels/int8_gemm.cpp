#include "engine/kernels/int8_gemm.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "engine/kernels/register_tiles.h"

namespace moeedb {

namespace {

constexpr int kRows = 6;    // rows of x per register tile
constexpr int kPanels = 4;  // 16-column panels per register tile (6 x 4 accumulators)

int64_t Groups(int64_t K) { return (K + 3) / 4; }
int64_t Panels(int64_t N) { return (N + 15) / 16; }

// Row x[0..K) as unsigned bytes q = round(x / s) + 128, padded with 128 (a
// zero) to Kp; returns s = max|x| / 127 (0 for a zero row).
float QuantizeRowPortable(const float* x, int64_t K, int64_t Kp, uint8_t* q) {
  float amax = 0;
  for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(x[k]));
  const float inv = amax > 0 ? 127.0f / amax : 0.0f;
  for (int64_t k = 0; k < K; ++k) q[k] = static_cast<uint8_t>(std::nearbyint(x[k] * inv) + 128);
  std::memset(q + K, 128, static_cast<size_t>(Kp - K));
  return amax / 127.0f;
}

// Every row of x[M, K] quantised by quantize_row into xq (Kp entries a row),
// its scale into sx (the portable path).
void QuantizeRows(int64_t M, int64_t K, int64_t Kp, const float* x, int64_t ldx, std::vector<uint8_t>* xq,
                  std::vector<float>* sx) {
  xq->resize(static_cast<size_t>(M * Kp));
  sx->resize(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) (*sx)[m] = QuantizeRowPortable(x + m * ldx, K, Kp, xq->data() + m * Kp);
}

// A row block of x as the tiles read it, in a buffer of the compute thread
// (kept from call to call: at most a row block, kRegisterTileRowBlockBytes).
template <typename Q>
struct QuantizedRows {
  std::vector<Q> q;
  std::vector<float> scale;
  // Rows m0..m1 of x quantised by quantize_row (Kp entries a row).
  void Fill(int64_t m0, int64_t m1, int64_t K, int64_t Kp, const float* x, int64_t ldx,
            float (*quantize_row)(const float*, int64_t, int64_t, Q*)) {
    q.resize(static_cast<size_t>((m1 - m0) * Kp));
    scale.resize(static_cast<size_t>(m1 - m0));
    for (int64_t m = m0; m < m1; ++m) scale[m - m0] = quantize_row(x + m * ldx, K, Kp, q.data() + (m - m0) * Kp);
  }
};
template <typename Q>
QuantizedRows<Q>& ThreadRows() {
  thread_local QuantizedRows<Q> rows;
  return rows;
}

#if defined(__x86_64__)

__attribute__((target("avx512f,avx512bw"))) float QuantizeRowAvx512(const float* x, int64_t K, int64_t Kp, uint8_t* q) {
  __m512 mx = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
  float amax = _mm512_reduce_max_ps(mx);
  for (int64_t j = k; j < K; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float inv = amax > 0 ? 127.0f / amax : 0.0f;
  const __m512 vinv = _mm512_set1_ps(inv);
  const __m512i offset = _mm512_set1_epi32(128);
  for (k = 0; k + 16 <= K; k += 16) {
    const __m512i v = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + k), vinv)), offset);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + k), _mm512_cvtusepi32_epi8(v));
  }
  for (; k < K; ++k) q[k] = static_cast<uint8_t>(std::nearbyint(x[k] * inv) + 128);
  std::memset(q + K, 128, static_cast<size_t>(Kp - K));
  return amax / 127.0f;
}

// acc += a (unsigned bytes) · b (signed bytes), in groups of four, in
// place. Written out: GCC 12 compiles _mm512_dpbusd_epi32 on an array of
// accumulators into a copy of each accumulator before and after the
// instruction and a store of it to the stack, every step (the tile below
// ran at 0.36 of vpdpbusd's peak; bench/gemm_kernels).
__attribute__((target("avx512f,avx512vnni"), always_inline)) inline __m512i Dpbusd(__m512i acc, __m512i a, __m512i b) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

// y[0..R, 0..16C) = (sum_g xq[r][4g..4g+4) · panel_c[g]) - terms, times
// sx[r] · scale[j]; the last panel writes `last_cols` (1..16) columns.
template <int R, int C>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void Tile(int64_t G, const uint8_t* xq, int64_t ldq,
                                                                 const int8_t* panel, int64_t panel_stride,
                                                                 const int32_t* terms, const float* scale,
                                                                 const float* sx, float* y, int64_t ldy, int last_cols) {
  __m512i acc[R][C];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_si512();
  for (int64_t g = 0; g < G; ++g) {
    __m512i w[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) w[c] = _mm512_loadu_si512(panel + c * panel_stride + g * 64);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      int32_t four;
      std::memcpy(&four, xq + r * ldq + 4 * g, 4);
      const __m512i xb = _mm512_set1_epi32(four);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) acc[r][c] = Dpbusd(acc[r][c], xb, w[c]);
    }
  }
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c) {
    const __mmask16 mask = c == C - 1 ? static_cast<__mmask16>((1u << last_cols) - 1) : static_cast<__mmask16>(0xFFFF);
    const __m512i t = _mm512_loadu_si512(terms + c * 16);
    const __m512 sc = _mm512_maskz_loadu_ps(mask, scale + c * 16);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r][c], t)), _mm512_set1_ps(sx[r]));
      _mm512_mask_storeu_ps(y + r * ldy + c * 16, mask, _mm512_mul_ps(v, sc));
    }
  }
}

using TileFn = void (*)(int64_t, const uint8_t*, int64_t, const int8_t*, int64_t, const int32_t*, const float*,
                        const float*, float*, int64_t, int);

template <int R>
constexpr TileFn TileFor(int c) {
  return c == 1 ? &Tile<R, 1> : c == 2 ? &Tile<R, 2> : c == 3 ? &Tile<R, 3> : &Tile<R, 4>;
}

TileFn TileFor(int r, int c) {
  switch (r) {
    case 1: return TileFor<1>(c);
    case 2: return TileFor<2>(c);
    case 3: return TileFor<3>(c);
    case 4: return TileFor<4>(c);
    case 5: return TileFor<5>(c);
    default: return TileFor<6>(c);
  }
}

// Row x[0..K) as signed 16-bit q = round(x / s), padded with 0 to Kp;
// returns s = max|x| / 127 (0 for a zero row). The same integers as the
// unsigned bytes above, less the offset.
__attribute__((target("avx2,fma"))) float QuantizeRowAvx2(const float* x, int64_t K, int64_t Kp, int16_t* q) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 mx = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) mx = _mm256_max_ps(mx, _mm256_and_ps(_mm256_loadu_ps(x + k), abs_mask));
  float lanes[8];
  _mm256_storeu_ps(lanes, mx);
  float amax = 0;
  for (float v : lanes) amax = std::max(amax, v);
  for (int64_t j = k; j < K; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float inv = amax > 0 ? 127.0f / amax : 0.0f;
  const __m256 vinv = _mm256_set1_ps(inv);
  for (k = 0; k + 8 <= K; k += 8) {
    const __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + k), vinv));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + k),
                     _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
  }
  for (; k < K; ++k) q[k] = static_cast<int16_t>(std::nearbyint(x[k] * inv));
  std::fill(q + K, q + Kp, int16_t{0});
  return amax / 127.0f;
}

// A mask of the first n (0..8) 32-bit lanes.
__attribute__((target("avx2"))) inline __m256i FirstLanesAvx2(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// acc += vpmaddwd(a, b), in place. Written out for the reason Dpbusd is:
// with the intrinsics GCC 12 put each product in a fresh register and moved
// it back to its accumulator, and kept one accumulator on the stack.
__attribute__((target("avx2"), always_inline)) inline __m256i MaddAddAvx2(__m256i acc, __m256i a, __m256i b) {
  __m256i product;
  asm("vpmaddwd %3, %2, %1\n\tvpaddd %1, %0, %0" : "+x"(acc), "=&x"(product) : "x"(a), "x"(b));
  return acc;
}

// The same product on AVX2 without VNNI, one 16-column panel a tile, in two
// passes of 8 columns: each 16-byte quarter of a panel group (4 columns x 4
// rows of w) is widened to 16-bit and multiplied by the row's 4 values with
// vpmaddwd (16 products an instruction, exact: |x|, |w| <= 127), giving 2
// partial sums per column that are added at the end. x is signed here, so
// no column terms. Eight columns of up to 4 rows hold 8 accumulators, 4
// broadcast rows, a widened quarter and a product: 14 of the 16 ymm
// registers (16 columns of 3 rows needed 17, and GCC kept 8 accumulators on
// the stack: 0.48 of the instruction pair's peak; bench/gemm_kernels).
template <int R>
__attribute__((target("avx2,fma"))) void TileAvx2(int64_t G, const int16_t* xq, int64_t ldq, const int8_t* panel,
                                                  const float* scale, const float* sx, float* y, int64_t ldy,
                                                  int last_cols) {
  for (int half = 0; half < 2; ++half) {
    const int cols = std::min(std::max(last_cols - 8 * half, 0), 8);
    if (cols == 0) break;
    __m256i acc[R][2];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    const int8_t* w_half = panel + half * 32;
    for (int64_t g = 0; g < G; ++g) {
      __m256i xb[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        int64_t four;
        std::memcpy(&four, xq + r * ldq + 4 * g, 8);
        xb[r] = _mm256_set1_epi64x(four);
      }
#pragma GCC unroll 2
      for (int q = 0; q < 2; ++q) {
        const __m256i w =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w_half + g * 64 + q * 16)));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[r][q] = MaddAddAvx2(acc[r][q], xb[r], w);
      }
    }
    // acc[r][q] holds columns 4q..4q+3 of the half as (k 0-1, k 2-3) pairs;
    // hadd sums the pairs ([c0 c1 c4 c5 | c2 c3 c6 c7]) and the permute
    // orders them.
    const __m256i mask = FirstLanesAvx2(cols);
    const __m256 sc = _mm256_maskload_ps(scale + 8 * half, mask);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256i sums = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[r][0], acc[r][1]), 0xD8);
      _mm256_maskstore_ps(y + r * ldy + 8 * half, mask,
                          _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(sums), _mm256_set1_ps(sx[r])), sc));
    }
  }
}

using TileAvx2Fn = void (*)(int64_t, const int16_t*, int64_t, const int8_t*, const float*, const float*, float*,
                            int64_t, int);

TileAvx2Fn TileAvx2For(int r) {
  return r == 1 ? &TileAvx2<1> : r == 2 ? &TileAvx2<2> : r == 3 ? &TileAvx2<3> : &TileAvx2<4>;
}

bool CpuHasAvx2() {
  static const bool on = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return on;
}

bool CpuHasAvx512Vnni() {
  static const bool on = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vnni");
  }();
  return on;
}

#endif  // __x86_64__

}  // namespace

bool Int8GemmKernelRuns(Int8GemmKernel k) {
#if defined(__x86_64__)
  switch (k) {
    case Int8GemmKernel::kAvx512Vnni: return CpuHasAvx512Vnni();
    case Int8GemmKernel::kAvx2: return CpuHasAvx2();
    case Int8GemmKernel::kNone: return true;
  }
#endif
  return k == Int8GemmKernel::kNone;
}

Int8GemmKernel Int8GemmKernelInUse() {
  static const Int8GemmKernel k = [] {
    const char* env = std::getenv("MOEEDB_INT8_GEMM");
    const std::string want = env == nullptr ? "" : env;
    if (want == "off") return Int8GemmKernel::kNone;
    if (want != "avx2" && Int8GemmKernelRuns(Int8GemmKernel::kAvx512Vnni)) return Int8GemmKernel::kAvx512Vnni;
    if (Int8GemmKernelRuns(Int8GemmKernel::kAvx2)) return Int8GemmKernel::kAvx2;
    return Int8GemmKernel::kNone;
  }();
  return k;
}

bool Int8GemmAvailable() { return Int8GemmKernelInUse() != Int8GemmKernel::kNone; }

const char* Int8GemmKernelName(Int8GemmKernel k) {
  switch (k) {
    case Int8GemmKernel::kAvx512Vnni: return "avx512-vnni";
    case Int8GemmKernel::kAvx2: return "avx2";
    case Int8GemmKernel::kNone: break;
  }
  return "none";
}

int64_t Int8PanelBytes(int64_t K, int64_t N) { return Panels(N) * Groups(K) * 64; }
int64_t Int8ColumnTerms(int64_t N) { return Panels(N) * 16; }

void PackInt8Panels(const int8_t* w, int64_t K, int64_t N, int8_t* panels, int32_t* column_terms) {
  const int64_t G = Groups(K), P = Panels(N);
  std::memset(panels, 0, static_cast<size_t>(P * G * 64));
  std::fill(column_terms, column_terms + P * 16, 0);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) {
      const int8_t v = w[k * N + j];
      panels[((j / 16) * G + k / 4) * 64 + (j % 16) * 4 + k % 4] = v;
      column_terms[j] += 128 * v;
    }
}

void UnpackInt8Panels(const int8_t* panels, int64_t K, int64_t N, int8_t* w) {
  const int64_t G = Groups(K);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) w[k * N + j] = panels[((j / 16) * G + k / 4) * 64 + (j % 16) * 4 + k % 4];
}

void Int8GemmF32(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const int8_t* panels,
                 const int32_t* column_terms, const float* scale, float* y, int64_t ldy) {
  Int8GemmF32(Int8GemmKernelInUse(), M, N, K, x, ldx, panels, column_terms, scale, y, ldy);
}

void Int8GemmF32(Int8GemmKernel kernel, int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx,
                 const int8_t* panels, const int32_t* column_terms, const float* scale, float* y, int64_t ldy) {
  if (M <= 0 || N <= 0) return;
  const int64_t G = Groups(K), Kp = 4 * G;
  if (!Int8GemmKernelRuns(kernel)) kernel = Int8GemmKernel::kNone;
#if defined(__x86_64__)
  if (kernel == Int8GemmKernel::kAvx2) {
    ForEachRegisterTile<4, 1>(
        M, N, Kp * 2,
        [&](int64_t m0, int64_t m1) { ThreadRows<int16_t>().Fill(m0, m1, K, Kp, x, ldx, &QuantizeRowAvx2); },
        [&](int64_t m0, int64_t m, int r, int64_t p0, int, int last_cols) {
          const QuantizedRows<int16_t>& xq = ThreadRows<int16_t>();
          TileAvx2For(r)(G, xq.q.data() + (m - m0) * Kp, Kp, panels + p0 * G * 64, scale + p0 * 16,
                         xq.scale.data() + (m - m0), y + m * ldy + p0 * 16, ldy, last_cols);
        });
    return;
  }
  if (kernel == Int8GemmKernel::kAvx512Vnni) {
    ForEachRegisterTile<kRows, kPanels>(
        M, N, Kp,
        [&](int64_t m0, int64_t m1) { ThreadRows<uint8_t>().Fill(m0, m1, K, Kp, x, ldx, &QuantizeRowAvx512); },
        [&](int64_t m0, int64_t m, int r, int64_t p0, int c, int last_cols) {
          const QuantizedRows<uint8_t>& xq = ThreadRows<uint8_t>();
          TileFor(r, c)(G, xq.q.data() + (m - m0) * Kp, Kp, panels + p0 * G * 64, G * 64, column_terms + p0 * 16,
                        scale + p0 * 16, xq.scale.data() + (m - m0), y + m * ldy + p0 * 16, ldy, last_cols);
        });
    return;
  }
#endif
  // The portable loop: the same arithmetic, one product at a time.
  std::vector<uint8_t> xq;
  std::vector<float> sx;
  QuantizeRows(M, K, Kp, x, ldx, &xq, &sx);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < N; ++j) {
      int64_t acc = 0;
      for (int64_t k = 0; k < Kp; ++k)
        acc += int64_t{xq[m * Kp + k]} * panels[((j / 16) * G + k / 4) * 64 + (j % 16) * 4 + k % 4];
      y[m * ldy + j] = static_cast<float>(acc - column_terms[j]) * sx[m] * scale[j];
    }
}

}  // namespace moeedb
