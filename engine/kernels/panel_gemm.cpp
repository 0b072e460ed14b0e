#include "engine/kernels/panel_gemm.h"

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
template <int R>
__attribute__((target("avx2,fma"))) void Tile(int64_t K, const float* x, int64_t ldx, const float* panel, float* y,
                                              int64_t ldy) {
  __m256 acc0[R], acc1[R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const __m256 w0 = _mm256_loadu_ps(panel + k * 16);
    const __m256 w1 = _mm256_loadu_ps(panel + k * 16 + 8);
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

#endif  // __x86_64__

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
#if defined(__x86_64__)
  for (int64_t p = 0; p < N / 16; ++p) {
    const float* panel = panels + p * K * 16;
    float* yp = y + p * 16;
    int64_t m = 0;
    for (; m + 6 <= M; m += 6) Tile<6>(K, x + m * ldx, ldx, panel, yp + m * ldy, ldy);
    const float* xm = x + m * ldx;
    float* ym = yp + m * ldy;
    switch (M - m) {
      case 5: Tile<5>(K, xm, ldx, panel, ym, ldy); break;
      case 4: Tile<4>(K, xm, ldx, panel, ym, ldy); break;
      case 3: Tile<3>(K, xm, ldx, panel, ym, ldy); break;
      case 2: Tile<2>(K, xm, ldx, panel, ym, ldy); break;
      case 1: Tile<1>(K, xm, ldx, panel, ym, ldy); break;
      default: break;
    }
  }
#else
  (void)M, (void)N, (void)K, (void)x, (void)ldx, (void)panels, (void)y, (void)ldy;
#endif
}

}  // namespace moeedb
