#include "engine/kernels/bf16_gemm.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "engine/kernels/instruction_rate.h"
#include "engine/kernels/register_tiles.h"
#include "engine/kernels/vector_exp.h"

namespace moeedb {

namespace {

constexpr int kRows = 6;    // rows of x per register tile
constexpr int kPanels = 4;  // 16-column panels per register tile (6 x 4 accumulators)
// The widening tile's shape: 8 x 2 accumulators, and 4 widened weight
// vectors and 2 broadcasts of x live beside them (of 32 registers).
constexpr int kWidenRows = 8;
constexpr int kWidenPanels = 2;
// The AVX2 widening tile: 5 rows x one panel (two 8-column halves): 10
// accumulators, 4 widened weight vectors, 2 broadcasts of x (of 16
// registers; the mask is read from memory). Each accumulator takes two
// dependent FMAs per pair of k: 4 rows (8 chains) left the FMA units
// waiting; 6 rows, one half at a time, spilled.
constexpr int kWidenRowsAvx2 = 5;

int64_t Pairs(int64_t K) { return (K + 1) / 2; }
int64_t Panels(int64_t N) { return (N + 15) / 16; }
// Entry (k, j) of the packed weight. Panels come in blocks of kPanels (the
// last block may hold fewer), interleaved per k pair: a register tile's
// weights for one pair are one contiguous run of up to 256 bytes, one
// stream for the prefetcher instead of kPanels streams G · 64 bytes apart.
int64_t PanelIndex(int64_t G, int64_t P, int64_t k, int64_t j) {
  const int64_t block = j / (16 * kPanels), p = (j / 16) % kPanels;
  const int64_t in_block = std::min<int64_t>(kPanels, P - block * kPanels);
  return block * kPanels * G * 32 + ((k / 2) * in_block + p) * 32 + (j % 16) * 2 + k % 2;
}

// The widening tiles' view of the packed weight from panel p0 on: its first
// pair's entries, and in *pair_stride the distance to the next pair's (the
// panels of p0's block interleaved per pair, PanelIndex).
const uint16_t* PanelPairs(const uint16_t* panels, int64_t G, int64_t P, int64_t p0, int64_t* pair_stride) {
  const int64_t block = p0 / kPanels;
  *pair_stride = std::min<int64_t>(kPanels, P - block * kPanels) * 32;
  return panels + block * kPanels * G * 32 + (p0 % kPanels) * 32;
}

#if defined(__x86_64__)

// Row x[0..K) as bf16 (round to nearest even), padded with zeros to Kp.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void RoundRowAvx512(const float* x, int64_t K, int64_t Kp,
                                                                            uint16_t* q) {
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + k));
    std::memcpy(q + k, &v, 32);
  }
  for (; k < K; ++k) q[k] = Bf16FromFloat(x[k]);
  std::fill(q + K, q + Kp, uint16_t{0});
}

// y[0..R, 0..16C) = sum_g xq[r][2g..2g+2) · panel_c[g], the C panels of a
// block interleaved per pair (PanelIndex); the last panel writes `last_cols`
// (1..16) columns.
template <int R, int C>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void Tile(int64_t G, const uint16_t* xq, int64_t ldq,
                                                                 const uint16_t* block, float* y, int64_t ldy,
                                                                 int last_cols) {
  __m512 acc[R][C];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  for (int64_t g = 0; g < G; ++g) {
    __m512i w[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) w[c] = _mm512_loadu_si512(block + (g * C + c) * 32);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      int32_t pair;
      std::memcpy(&pair, xq + r * ldq + 2 * g, 4);
      const __m512i xb = _mm512_set1_epi32(pair);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], (__m512bh)xb, (__m512bh)w[c]);
    }
  }
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c) {
    const __mmask16 mask = c == C - 1 ? static_cast<__mmask16>((1u << last_cols) - 1) : static_cast<__mmask16>(0xFFFF);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * ldy + c * 16, mask, acc[r][c]);
  }
}

using TileFn = void (*)(int64_t, const uint16_t*, int64_t, const uint16_t*, float*, int64_t, int);

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

// The same product with each bf16 pair of w widened to two float32 vectors
// in registers (the low half shifted up; the high half masked) and x's
// float32 values (not rounded) multiplied in with FMA, k in order: for CPUs
// whose vdpbf16ps runs at half their FMA rate or less, or lacks. Each y
// element is one FMA chain over k whatever the tiling. w's panels for pair g
// start at w + g * pair_stride; the tile's C panels are next to each other.
template <int R, int C>
__attribute__((target("avx512f"))) void WidenTile(int64_t K, const float* x, int64_t ldx, const uint16_t* w,
                                                  int64_t pair_stride, float* y, int64_t ldy, int last_cols) {
  __m512 acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  const int64_t pairs = K / 2;
  for (int64_t g = 0; g < pairs; ++g) {
    __m512 lo[C], hi[C];
#pragma GCC unroll 2
    for (int c = 0; c < C; ++c) {
      const __m512i v = _mm512_loadu_si512(w + g * pair_stride + c * 32);
      lo[c] = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
      hi[c] = _mm512_castsi512_ps(_mm512_and_si512(v, high));
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 x0 = _mm512_set1_ps(x[r * ldx + 2 * g]), x1 = _mm512_set1_ps(x[r * ldx + 2 * g + 1]);
#pragma GCC unroll 2
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(x1, hi[c], _mm512_fmadd_ps(x0, lo[c], acc[r][c]));
    }
  }
  if (K % 2 != 0) {  // the last k alone (its pair's high half is padding)
#pragma GCC unroll 2
    for (int c = 0; c < C; ++c) {
      const __m512 lo = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_loadu_si512(w + pairs * pair_stride + c * 32), 16));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][c] = _mm512_fmadd_ps(_mm512_set1_ps(x[r * ldx + K - 1]), lo, acc[r][c]);
    }
  }
#pragma GCC unroll 2
  for (int c = 0; c < C; ++c) {
    const __mmask16 mask = c == C - 1 ? static_cast<__mmask16>((1u << last_cols) - 1) : static_cast<__mmask16>(0xFFFF);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * ldy + c * 16, mask, acc[r][c]);
  }
}

using WidenTileFn = void (*)(int64_t, const float*, int64_t, const uint16_t*, int64_t, float*, int64_t, int);

template <int R>
constexpr WidenTileFn WidenTileFor(int c) {
  return c == 1 ? &WidenTile<R, 1> : &WidenTile<R, 2>;
}

WidenTileFn WidenTileFor(int r, int c) {
  switch (r) {
    case 1: return WidenTileFor<1>(c);
    case 2: return WidenTileFor<2>(c);
    case 3: return WidenTileFor<3>(c);
    case 4: return WidenTileFor<4>(c);
    case 5: return WidenTileFor<5>(c);
    case 6: return WidenTileFor<6>(c);
    case 7: return WidenTileFor<7>(c);
    default: return WidenTileFor<8>(c);
  }
}

// WidenTile with AVX2 (CPUs without AVX-512): one 16-column panel, its
// pair of 64 bytes as two 8-column halves, each widened as there. Every y
// element is the same FMA chain over k as in WidenTile, so the two give the
// same bits. The panel's entries for pair g start at w + g * pair_stride.
template <int R>
__attribute__((target("avx2,fma"))) void WidenTileAvx2(int64_t K, const float* x, int64_t ldx, const uint16_t* w,
                                                       int64_t pair_stride, float* y, int64_t ldy, int last_cols) {
  __m256 acc0[R], acc1[R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  const int64_t pairs = K / 2;
  for (int64_t g = 0; g < pairs; ++g) {
    const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + g * pair_stride));
    const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + g * pair_stride + 16));
    const __m256 lo0 = _mm256_castsi256_ps(_mm256_slli_epi32(v0, 16));
    const __m256 hi0 = _mm256_castsi256_ps(_mm256_and_si256(v0, high));
    const __m256 lo1 = _mm256_castsi256_ps(_mm256_slli_epi32(v1, 16));
    const __m256 hi1 = _mm256_castsi256_ps(_mm256_and_si256(v1, high));
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 x0 = _mm256_broadcast_ss(x + r * ldx + 2 * g), x1 = _mm256_broadcast_ss(x + r * ldx + 2 * g + 1);
      acc0[r] = _mm256_fmadd_ps(x1, hi0, _mm256_fmadd_ps(x0, lo0, acc0[r]));
      acc1[r] = _mm256_fmadd_ps(x1, hi1, _mm256_fmadd_ps(x0, lo1, acc1[r]));
    }
  }
  if (K % 2 != 0) {  // the last k alone (its pair's high half is padding)
    const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + pairs * pair_stride));
    const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + pairs * pair_stride + 16));
    const __m256 lo0 = _mm256_castsi256_ps(_mm256_slli_epi32(v0, 16));
    const __m256 lo1 = _mm256_castsi256_ps(_mm256_slli_epi32(v1, 16));
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 x0 = _mm256_broadcast_ss(x + r * ldx + K - 1);
      acc0[r] = _mm256_fmadd_ps(x0, lo0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(x0, lo1, acc1[r]);
    }
  }
  if (last_cols == 16) {
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      _mm256_storeu_ps(y + r * ldy, acc0[r]);
      _mm256_storeu_ps(y + r * ldy + 8, acc1[r]);
    }
    return;
  }
  alignas(32) float row[16];  // the matrix's last panel: its first last_cols columns
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    _mm256_store_ps(row, acc0[r]);
    _mm256_store_ps(row + 8, acc1[r]);
    std::memcpy(y + r * ldy, row, static_cast<size_t>(last_cols) * sizeof(float));
  }
}

using WidenTileAvx2Fn = void (*)(int64_t, const float*, int64_t, const uint16_t*, int64_t, float*, int64_t, int);

WidenTileAvx2Fn WidenTileAvx2For(int r) {
  switch (r) {
    case 1: return &WidenTileAvx2<1>;
    case 2: return &WidenTileAvx2<2>;
    case 3: return &WidenTileAvx2<3>;
    case 4: return &WidenTileAvx2<4>;
    default: return &WidenTileAvx2<5>;
  }
}

bool CpuHasAvx512Bw() {
  static const bool on = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  }();
  return on;
}

bool CpuHasAvx512Bf16() {
  static const bool on = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512bf16");
  }();
  return on;
}

#endif  // __x86_64__

}  // namespace

uint16_t Bf16FromFloat(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<uint16_t>(u >> 16);
}

float FloatFromBf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

Bf16GemmPath Bf16GemmPathInUse() {
#if defined(__x86_64__)
  static const Bf16GemmPath path = [] {
    const char* env = std::getenv("MOEEDB_BF16_GEMM");
    const std::string want = env == nullptr ? "" : env;
    if (want == "off" || !CpuHasAvx2Fma()) return Bf16GemmPath::kNone;
    if (want == "avx2" || !CpuHasAvx512Bw()) return Bf16GemmPath::kWidenAvx2;
    if (!CpuHasAvx512Bf16() || want == "widen") return Bf16GemmPath::kWiden;
    if (want == "dot") return Bf16GemmPath::kDot;
    // A vdpbf16ps does 64 operations, an FMA 32, and the widening tile
    // spends about one instruction in eight on conversions: it pays where
    // FMAs issue at more than ~2.2x vdpbf16ps's rate (2.5x: a margin for the
    // probe's noise). The 2-core Xeon (Sapphire Rapids class) here: 3.9x.
    // Instructions a second, the best of five short runs each, the two
    // taking turns (so a change in the host's load between them does not
    // tilt the ratio).
    constexpr int64_t kSteps = 1 << 17;
    double fma = 0, dot = 0;
    for (int trial = 0; trial < 5; ++trial) {
      fma = std::max(fma, kSteps * kInstructionChains / std::max(TimeInstruction(TimedInstruction::kFmaZmm, kSteps), 1e-9));
      dot = std::max(dot, kSteps * kInstructionChains /
                              std::max(TimeInstruction(TimedInstruction::kDotBf16Zmm, kSteps), 1e-9));
    }
    return fma > 2.5 * dot ? Bf16GemmPath::kWiden : Bf16GemmPath::kDot;
  }();
  return path;
#else
  return Bf16GemmPath::kNone;
#endif
}

bool Bf16GemmAvailable() { return Bf16GemmPathInUse() != Bf16GemmPath::kNone; }

bool Bf16GemmWidens() {
  const Bf16GemmPath p = Bf16GemmPathInUse();
  return p == Bf16GemmPath::kWiden || p == Bf16GemmPath::kWidenAvx2;
}

bool Bf16GemmPathRuns(Bf16GemmPath p) {
#if defined(__x86_64__)
  switch (p) {
    case Bf16GemmPath::kDot: return CpuHasAvx512Bf16();
    case Bf16GemmPath::kWiden: return CpuHasAvx512Bw();
    case Bf16GemmPath::kWidenAvx2: return CpuHasAvx2Fma();
    case Bf16GemmPath::kNone: return true;
  }
#endif
  return p == Bf16GemmPath::kNone;
}

const char* Bf16GemmPathName(Bf16GemmPath p) {
  switch (p) {
    case Bf16GemmPath::kDot: return "avx512-bf16 vdpbf16ps";
    case Bf16GemmPath::kWiden: return "avx512 widened to f32 (FMA)";
    case Bf16GemmPath::kWidenAvx2: return "avx2 widened to f32 (FMA)";
    case Bf16GemmPath::kNone: break;
  }
  return "off";
}

int64_t Bf16PanelElements(int64_t K, int64_t N) { return Panels(N) * Pairs(K) * 32; }

void PackBf16Panels(const uint16_t* w, int64_t K, int64_t N, uint16_t* panels) {
  const int64_t G = Pairs(K), P = Panels(N);
  std::fill(panels, panels + Bf16PanelElements(K, N), uint16_t{0});
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) panels[PanelIndex(G, P, k, j)] = w[k * N + j];
}

void UnpackBf16Panels(const uint16_t* panels, int64_t K, int64_t N, uint16_t* w) {
  const int64_t G = Pairs(K), P = Panels(N);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) w[k * N + j] = panels[PanelIndex(G, P, k, j)];
}

void Bf16GemmF32(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const uint16_t* panels, float* y,
                 int64_t ldy) {
  Bf16GemmF32(Bf16GemmPathInUse(), M, N, K, x, ldx, panels, y, ldy);
}

void Bf16GemmF32(Bf16GemmPath path, int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx,
                 const uint16_t* panels, float* y, int64_t ldy) {
  if (M <= 0 || N <= 0) return;
  const int64_t G = Pairs(K), Kp = 2 * G, P = Panels(N);
  if (!Bf16GemmPathRuns(path)) path = Bf16GemmPath::kNone;
  if (path == Bf16GemmPath::kNone) {  // the same rounding of x, products summed in float one at a time
    std::vector<float> xr(static_cast<size_t>(K));
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t k = 0; k < K; ++k) xr[k] = FloatFromBf16(Bf16FromFloat(x[m * ldx + k]));
      for (int64_t j = 0; j < N; ++j) {
        float acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += xr[k] * FloatFromBf16(panels[PanelIndex(G, P, k, j)]);
        y[m * ldy + j] = acc;
      }
    }
    return;
  }
#if defined(__x86_64__)
  if (path == Bf16GemmPath::kWiden) {  // x read in place, in float32
    ForEachRegisterTile<kWidenRows, kWidenPanels>(
        M, N, K * 4, [](int64_t, int64_t) {},
        [&](int64_t, int64_t m, int r, int64_t p0, int c, int last_cols) {
          int64_t pair_stride = 0;
          const uint16_t* w = PanelPairs(panels, G, P, p0, &pair_stride);
          WidenTileFor(r, c)(K, x + m * ldx, ldx, w, pair_stride, y + m * ldy + p0 * 16, ldy, last_cols);
        });
    return;
  }
  if (path == Bf16GemmPath::kWidenAvx2) {  // the same, a panel at a time
    ForEachRegisterTile<kWidenRowsAvx2, 1>(
        M, N, K * 4, [](int64_t, int64_t) {},
        [&](int64_t, int64_t m, int r, int64_t p0, int, int last_cols) {
          int64_t pair_stride = 0;
          const uint16_t* w = PanelPairs(panels, G, P, p0, &pair_stride);
          WidenTileAvx2For(r)(K, x + m * ldx, ldx, w, pair_stride, y + m * ldy + p0 * 16, ldy, last_cols);
        });
    return;
  }
  // Each row block rounded to bf16 in a buffer of its compute thread (kept
  // from call to call: at most a row block).
  thread_local std::vector<uint16_t> xq;
  ForEachRegisterTile<kRows, kPanels>(
      M, N, Kp * 2,
      [&](int64_t m0, int64_t m1) {
        xq.resize(static_cast<size_t>((m1 - m0) * Kp));
        for (int64_t m = m0; m < m1; ++m) RoundRowAvx512(x + m * ldx, K, Kp, xq.data() + (m - m0) * Kp);
      },
      [&](int64_t m0, int64_t m, int r, int64_t p0, int c, int last_cols) {
        TileFor(r, c)(G, xq.data() + (m - m0) * Kp, Kp, panels + p0 * G * 32, y + m * ldy + p0 * 16, ldy, last_cols);
      });
#endif
}

}  // namespace moeedb
