#include "engine/kernels/panel_gemm.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "engine/kernels/vector_exp.h"

namespace moeedb {

namespace {

#if defined(__x86_64__)

// y[0..R, 0..16] = x[0..R, 0..K] · panel[K][16]: R (<= 6) rows, the 12
// accumulators in registers, the panel read once per tile.
// Row k of the panel is panel + k * ks (16 when packed, the row length of an
// unpacked [K, N] matrix otherwise).
template <int R>
__attribute__((target("avx2,fma"))) void Tile(int64_t K, const float* x, int64_t ldx, const float* panel, int64_t ks,
                                              float* y, int64_t ldy) {
  __m256 acc0[R], acc1[R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const __m256 w0 = _mm256_loadu_ps(panel + k * ks);
    const __m256 w1 = _mm256_loadu_ps(panel + k * ks + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 xb = _mm256_broadcast_ss(x + r * ldx + k);
      acc0[r] = _mm256_fmadd_ps(xb, w0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(xb, w1, acc1[r]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(y + r * ldy, acc0[r]);
    _mm256_storeu_ps(y + r * ldy + 8, acc1[r]);
  }
}

// y[0..R, 0..32] = x[0..R, 0..K] · [w0 | w1]: two 16-column blocks whose
// row k is at w0 + k * ws and w1 + k * ws (16 columns of an unpacked [K, N]
// matrix and the next 16: w1 = w0 + 16, ws = ldw; two packed panels: ws =
// 16). R (<= 8) rows, 16 accumulators of sixteen floats, each x element
// broadcast once for both blocks. Every y element is the same sequence of
// FMAs over k as in Tile, so this path and the AVX2 one give the same bits.
template <int R>
__attribute__((target("avx512f"))) void Tile512(int64_t K, const float* x, int64_t ldx, const float* w0,
                                                const float* w1, int64_t ws, float* y, int64_t ldy) {
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const __m512 b0 = _mm512_loadu_ps(w0 + k * ws);
    const __m512 b1 = _mm512_loadu_ps(w1 + k * ws);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 xb = _mm512_set1_ps(x[r * ldx + k]);
      acc0[r] = _mm512_fmadd_ps(xb, b0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(xb, b1, acc1[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(y + r * ldy, acc0[r]);
    _mm512_storeu_ps(y + r * ldy + 16, acc1[r]);
  }
}

// Every row tile of x against one 16-column panel.
void PanelColumns(int64_t M, int64_t K, const float* x, int64_t ldx, const float* panel, int64_t ks, float* y,
                  int64_t ldy) {
  int64_t m = 0;
  for (; m + 6 <= M; m += 6) Tile<6>(K, x + m * ldx, ldx, panel, ks, y + m * ldy, ldy);
  const float* xm = x + m * ldx;
  float* ym = y + m * ldy;
  switch (M - m) {
    case 5: Tile<5>(K, xm, ldx, panel, ks, ym, ldy); break;
    case 4: Tile<4>(K, xm, ldx, panel, ks, ym, ldy); break;
    case 3: Tile<3>(K, xm, ldx, panel, ks, ym, ldy); break;
    case 2: Tile<2>(K, xm, ldx, panel, ks, ym, ldy); break;
    case 1: Tile<1>(K, xm, ldx, panel, ks, ym, ldy); break;
    default: break;
  }
}

// Every row tile of x against two 16-column blocks (Tile512's w0, w1, ws).
void Columns512(int64_t M, int64_t K, const float* x, int64_t ldx, const float* w0, const float* w1, int64_t ws,
                float* y, int64_t ldy) {
  int64_t m = 0;
  for (; m + 8 <= M; m += 8) Tile512<8>(K, x + m * ldx, ldx, w0, w1, ws, y + m * ldy, ldy);
  const float* xm = x + m * ldx;
  float* ym = y + m * ldy;
  switch (M - m) {
    case 7: Tile512<7>(K, xm, ldx, w0, w1, ws, ym, ldy); break;
    case 6: Tile512<6>(K, xm, ldx, w0, w1, ws, ym, ldy); break;
    case 5: Tile512<5>(K, xm, ldx, w0, w1, ws, ym, ldy); break;
    case 4: Tile512<4>(K, xm, ldx, w0, w1, ws, ym, ldy); break;
    case 3: Tile512<3>(K, xm, ldx, w0, w1, ws, ym, ldy); break;
    case 2: Tile512<2>(K, xm, ldx, w0, w1, ws, ym, ldy); break;
    case 1: Tile512<1>(K, xm, ldx, w0, w1, ws, ym, ldy); break;
    default: break;
  }
}

#endif  // __x86_64__

// The parallel kernels' row blocks: at most kBlockRows rows each, as many as
// that needs, of sizes differing by one row at most. The threads take
// contiguous runs of (row block, column block) pairs, so blocks of 128 and a
// short last one (a 260-token text: 128 + 128 + 4) left one thread most of
// the rows. Each row is computed alone whatever its block, so are the bits.
constexpr int64_t kBlockRows = 128;
int64_t RowBlocks(int64_t M) { return (M + kBlockRows - 1) / kBlockRows; }
// Row block b of rb starts here (b = rb: M).
int64_t RowBlockStart(int64_t M, int64_t rb, int64_t b) { return b * M / rb; }

}  // namespace

bool PanelGemmAvailable() {
  static const bool on = [] {
    const char* env = std::getenv("MOEEDB_PANEL_GEMM");
    return !(env != nullptr && std::string(env) == "off") && CpuHasAvx2Fma();
  }();
  return on;
}

int64_t PanelGemmMaxRows(int64_t K, int threads) {
  if (!PanelGemmAvailable() || K < 1) return 0;
  // One thread: any number of rows (the kernel beat OpenBLAS from 8 to 2048
  // rows on these matrices, docs/perf.md); with more, OpenBLAS splits large
  // GEMMs across threads and this kernel does not.
  return threads <= 1 ? std::numeric_limits<int64_t>::max() : 32;
}

void PackPanels(const float* w, int64_t K, int64_t N, float* panels) {
  for (int64_t p = 0; p < N / 16; ++p)
    for (int64_t k = 0; k < K; ++k) std::memcpy(panels + (p * K + k) * 16, w + k * N + p * 16, 16 * sizeof(float));
}

void PanelGemmF32(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const float* panels, float* y,
                  int64_t ldy) {
  PanelGemmF32(RowsGemmPathInUse(), M, N, K, x, ldx, panels, y, ldy);
}

void PanelGemmF32Parallel(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const float* panels, float* y,
                          int64_t ldy) {
  // As RowsGemmF32Parallel: a block's panels (K x 128 floats) stay in L2
  // across its row tiles; blocks of an even number of panels keep the
  // 32-column tiles whole.
  constexpr int64_t kPanelsPerBlock = 8;
  const int64_t P = N / 16, rb = RowBlocks(M), cb = (P + kPanelsPerBlock - 1) / kPanelsPerBlock;
  at::parallel_for(0, rb * cb, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r0 = RowBlockStart(M, rb, t / cb), r1 = RowBlockStart(M, rb, t / cb + 1);
      const int64_t p0 = (t % cb) * kPanelsPerBlock;
      PanelGemmF32(r1 - r0, std::min(kPanelsPerBlock, P - p0) * 16, K, x + r0 * ldx, ldx, panels + p0 * K * 16,
                   y + r0 * ldy + p0 * 16, ldy);
    }
  });
}

void PanelGemmF32(SimdLevel path, int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const float* panels,
                  float* y, int64_t ldy) {
#if defined(__x86_64__)
  int64_t p = 0;
  if (path == SimdLevel::kAvx512 && CpuHasAvx512F())
    for (; p + 2 <= N / 16; p += 2)
      Columns512(M, K, x, ldx, panels + p * K * 16, panels + (p + 1) * K * 16, 16, y + p * 16, ldy);
  for (; p < N / 16; ++p) PanelColumns(M, K, x, ldx, panels + p * K * 16, 16, y + p * 16, ldy);
#else
  (void)path, (void)M, (void)N, (void)K, (void)x, (void)ldx, (void)panels, (void)y, (void)ldy;
#endif
}

SimdLevel RowsGemmPathInUse() {
  static const SimdLevel p = WidestSimdLevel("MOEEDB_ROWS_GEMM");
  return p;
}

bool RowsGemmAvailable() { return CpuHasAvx2Fma(); }

void RowsGemmF32(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const float* w, int64_t ldw, float* y,
                 int64_t ldy) {
  RowsGemmF32(RowsGemmPathInUse(), M, N, K, x, ldx, w, ldw, y, ldy);
}

void RowsGemmF32Parallel(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const float* w, int64_t ldw,
                         float* y, int64_t ldy) {
  // Blocks of up to 128 rows x 128 columns: a block's 32-column strips of
  // w (K x 32 floats) stay in L2 across its row tiles.
  constexpr int64_t kCols = 128;
  const int64_t rb = RowBlocks(M), cb = (N + kCols - 1) / kCols;
  at::parallel_for(0, rb * cb, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r0 = RowBlockStart(M, rb, t / cb), r1 = RowBlockStart(M, rb, t / cb + 1);
      const int64_t c0 = (t % cb) * kCols;
      RowsGemmF32(r1 - r0, std::min(kCols, N - c0), K, x + r0 * ldx, ldx, w + c0, ldw, y + r0 * ldy + c0, ldy);
    }
  });
}

void RowsGemmF32(SimdLevel path, int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const float* w,
                 int64_t ldw, float* y, int64_t ldy) {
#if defined(__x86_64__)
  int64_t c = 0;
  if (path == SimdLevel::kAvx512 && CpuHasAvx512F())
    for (; c + 32 <= N; c += 32) Columns512(M, K, x, ldx, w + c, w + c + 16, ldw, y + c, ldy);
  for (; c + 16 <= N; c += 16) PanelColumns(M, K, x, ldx, w + c, ldw, y + c, ldy);
#else
  (void)path, (void)M, (void)N, (void)K, (void)x, (void)ldx, (void)w, (void)ldw, (void)y, (void)ldy;
#endif
}

}  // namespace moeedb
