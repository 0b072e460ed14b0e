// The bf16 GEMM, on every path this CPU can run (vdpbf16ps, widened to
// float32 with AVX-512 or AVX2 FMA, the portable loop), against a plain loop written here,
// in double, over the bf16 values of w and of x rounded here bit by bit
// (round to nearest, ties to even; the widening path multiplies x as it
// is): every row-tile and column-panel remainder, K odd, N not a multiple of
// 16, wide leading dimensions. Also: the rounding against hand-derived bit
// patterns, packing round-trips, and columns past N stay untouched.
#include "engine/kernels/bf16_gemm.h"

#include <gtest/gtest.h>

#include "engine/kernels/runtime.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace moeedb {
namespace {

// The bf16 value of f, rounded here by hand: keep the top 16 bits, add one
// unit when the dropped 16 bits exceed half a unit, or equal it and the
// kept part is odd.
double RoundToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t hi = u >> 16;
  const uint32_t lo = u & 0xFFFFu;
  if (lo > 0x8000u || (lo == 0x8000u && (hi & 1u))) ++hi;
  const uint32_t r = hi << 16;
  float out;
  std::memcpy(&out, &r, 4);
  return out;
}

// The paths this CPU runs.
std::vector<Bf16GemmPath> RunnablePaths() {
  std::vector<Bf16GemmPath> out;
  for (Bf16GemmPath p : {Bf16GemmPath::kNone, Bf16GemmPath::kDot, Bf16GemmPath::kWiden, Bf16GemmPath::kWidenAvx2})
    if (Bf16GemmPathRuns(p)) out.push_back(p);
  return out;
}

// Column n of x_row · w in double over the bf16 values of w and of x
// (rounded here, unless the path multiplies x unrounded), and in *mag the
// sum of the products' magnitudes (the error scale).
double ReferenceDot(Bf16GemmPath path, const float* x_row, const std::vector<uint16_t>& w, int64_t K, int64_t N,
                    int64_t n, double* mag) {
  double ref = 0;
  *mag = 0;
  for (int64_t k = 0; k < K; ++k) {
    uint32_t bits = static_cast<uint32_t>(w[k * N + n]) << 16;
    float wv;
    std::memcpy(&wv, &bits, 4);
    const bool widens = path == Bf16GemmPath::kWiden || path == Bf16GemmPath::kWidenAvx2;
    const double xv = widens ? static_cast<double>(x_row[k]) : RoundToBf16(x_row[k]);
    const double p = xv * wv;
    ref += p;
    *mag += std::fabs(p);
  }
  return ref;
}

TEST(Bf16Gemm, RoundsToNearestEven) {
  EXPECT_EQ(Bf16FromFloat(1.0f), 0x3F80);
  EXPECT_EQ(Bf16FromFloat(-2.0f), 0xC000);
  // 1 + 2^-8 lies half-way between 1 and 1 + 2^-7: ties go to the even 1.
  EXPECT_EQ(Bf16FromFloat(1.0f + 1.0f / 256), 0x3F80);
  // 1 + 3 * 2^-8 lies half-way between 1 + 2^-7 (odd) and 1 + 2^-6: up.
  EXPECT_EQ(Bf16FromFloat(1.0f + 3.0f / 256), 0x3F82);
  EXPECT_EQ(Bf16FromFloat(1.0f + 1.0f / 256 + 1.0f / 65536), 0x3F81);  // just past half: up
  EXPECT_TRUE(std::isnan(FloatFromBf16(Bf16FromFloat(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(FloatFromBf16(0x3FC0), 1.5f);
}

TEST(Bf16Gemm, MatchesAPlainLoopOverTheRoundedValues) {
  for (Bf16GemmPath path : RunnablePaths()) {
    SCOPED_TRACE(Bf16GemmPathName(path));
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1, 1);
    int checked = 0;
    for (int64_t M : {1, 2, 5, 6, 7, 13, 40})
      for (int64_t N : {16, 24, 64, 70, 100, 130})
        for (int64_t K : {1, 2, 7, 64, 131}) {
          const int64_t ldx = K + 3, ldy = N + 2;
          std::vector<float> x(M * ldx), y(M * ldy, 42.0f);
          std::vector<uint16_t> w(K * N), panels(Bf16PanelElements(K, N)), back(K * N);
          for (auto& v : x) v = u(rng);
          for (auto& v : w) v = Bf16FromFloat(u(rng));
          PackBf16Panels(w.data(), K, N, panels.data());
          UnpackBf16Panels(panels.data(), K, N, back.data());
          ASSERT_EQ(back, w);
          Bf16GemmF32(path, M, N, K, x.data(), ldx, panels.data(), y.data(), ldy);
          for (int64_t m = 0; m < M; ++m) {
            for (int64_t n = 0; n < N; ++n) {
              double mag = 0;
              const double ref = ReferenceDot(path, x.data() + m * ldx, w, K, N, n, &mag);
              // Products of two bf16 values (or of a bf16 value and a float,
              // in an FMA) are exact; only the float sums round: K additions
              // of relative error 2^-24 each.
              ASSERT_NEAR(y[m * ldy + n], ref, 1e-6 * (1 + mag)) << M << " " << N << " " << K;
            }
            for (int64_t n = N; n < ldy; ++n) ASSERT_EQ(y[m * ldy + n], 42.0f);  // past N: untouched
          }
          ++checked;
        }
    EXPECT_EQ(checked, 7 * 6 * 5);
  }
}

TEST(Bf16Gemm, ManyRowsGiveEachRowAsAloneAtAnyThreadCount) {
  // Enough rows for several L2 row blocks (register_tiles.h): every row must
  // come out bit for bit as the same row multiplied alone, with one compute
  // thread or two, and agree with the plain loop, on every path.
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> u(-1, 1);
  const int64_t M = 700, N = 40, K = 1024;
  std::vector<float> x(M * K);
  std::vector<uint16_t> w(K * N), panels(Bf16PanelElements(K, N));
  for (auto& v : x) v = u(rng);
  for (auto& v : w) v = Bf16FromFloat(u(rng));
  PackBf16Panels(w.data(), K, N, panels.data());
  const int threads = ComputeThreads();
  for (Bf16GemmPath path : RunnablePaths()) {
    SCOPED_TRACE(Bf16GemmPathName(path));
    std::vector<float> alone(M * N);
    for (int64_t m = 0; m < M; ++m)
      Bf16GemmF32(path, 1, N, K, x.data() + m * K, K, panels.data(), alone.data() + m * N, N);
    for (int t : {1, 2}) {
      SetComputeThreads(t);
      std::vector<float> y(M * N, 42.0f);
      Bf16GemmF32(path, M, N, K, x.data(), K, panels.data(), y.data(), N);
      ASSERT_EQ(y, alone) << t << " threads";
    }
    SetComputeThreads(threads);
    for (int64_t m : {int64_t{0}, int64_t{255}, int64_t{256}, M - 1})
      for (int64_t n = 0; n < N; ++n) {
        double mag = 0;
        const double ref = ReferenceDot(path, x.data() + m * K, w, K, N, n, &mag);
        ASSERT_NEAR(alone[m * N + n], ref, 1e-6 * (1 + mag)) << m << " " << n;
      }
  }
}

// Each widening path (AVX-512, AVX2) computes every output element as one
// float32 FMA chain over k in order, so both give these bits, and so the
// same vectors whichever a CPU picks: checked bit for bit against that
// chain written here with std::fma, at the shapes of every tile remainder.
TEST(Bf16Gemm, TheWideningPathsAreOneFmaChainOverKInOrder) {
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> u(-1, 1);
  int paths = 0;
  for (Bf16GemmPath path : {Bf16GemmPath::kWiden, Bf16GemmPath::kWidenAvx2}) {
    if (!Bf16GemmPathRuns(path)) continue;
    SCOPED_TRACE(Bf16GemmPathName(path));
    ++paths;
    for (int64_t M : {1, 3, 4, 9, 33})
      for (int64_t N : {16, 40, 100, 1024})
        for (int64_t K : {1, 7, 64, 513}) {
          std::vector<float> x(M * K), y(M * N);
          std::vector<uint16_t> w(K * N), panels(Bf16PanelElements(K, N));
          for (auto& v : x) v = u(rng);
          for (auto& v : w) v = Bf16FromFloat(u(rng));
          PackBf16Panels(w.data(), K, N, panels.data());
          Bf16GemmF32(path, M, N, K, x.data(), K, panels.data(), y.data(), N);
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              float acc = 0;
              for (int64_t k = 0; k < K; ++k) acc = std::fma(x[m * K + k], FloatFromBf16(w[k * N + n]), acc);
              ASSERT_EQ(y[m * N + n], acc) << M << " " << N << " " << K << " at " << m << ", " << n;
            }
        }
  }
  // Every x86-64 CPU these machines have had runs AVX2 and FMA.
  EXPECT_GE(paths, 1) << "no widening path runs on this CPU";
}

}  // namespace
}  // namespace moeedb
