// The int8 GEMM's kernels (AVX512-VNNI, AVX2, the portable loop: each one
// this CPU runs) against a plain loop written here, which quantises each
// row of x itself (round(x / s), s = max|x| / 127) and multiplies in
// integers: each kernel must give the same integer sums, so the results agree
// to float rounding (every row-tile and column-panel remainder, K not a
// multiple of 4, N not a multiple of 16, wide leading dimensions, a zero
// row). Also: packing round-trips, and against the float product the
// quantised one stays close (the accuracy the weight formats rely on).
#include "engine/kernels/int8_gemm.h"

#include <gtest/gtest.h>

#include "engine/kernels/runtime.h"

#include <cmath>
#include <random>
#include <vector>

namespace moeedb {
namespace {

std::vector<Int8GemmKernel> KernelsThisCpuRuns() {
  std::vector<Int8GemmKernel> out;
  for (auto k : {Int8GemmKernel::kNone, Int8GemmKernel::kAvx2, Int8GemmKernel::kAvx512Vnni})
    if (Int8GemmKernelRuns(k)) out.push_back(k);
  return out;
}

TEST(Int8Gemm, KernelInUseIsOneThisCpuRuns) {
  EXPECT_TRUE(Int8GemmKernelRuns(Int8GemmKernelInUse()));
  EXPECT_EQ(Int8GemmAvailable(), Int8GemmKernelInUse() != Int8GemmKernel::kNone);
}

class Int8GemmKernels : public ::testing::TestWithParam<Int8GemmKernel> {};

TEST_P(Int8GemmKernels, MatchesAPlainIntegerLoop) {
  const Int8GemmKernel kernel = GetParam();
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  std::uniform_int_distribution<int> wi(-127, 127);
  int checked = 0;
  for (int64_t M : {1, 2, 5, 6, 7, 13, 40})
    for (int64_t N : {16, 24, 64, 70, 130})
      for (int64_t K : {1, 4, 7, 64, 130}) {
        const int64_t ldx = K + 3, ldy = N + 2;
        std::vector<float> x(M * ldx), scale(N), y(M * ldy, 42.0f);
        std::vector<int8_t> w(K * N), panels(Int8PanelBytes(K, N)), back(K * N);
        std::vector<int32_t> terms(Int8ColumnTerms(N));
        for (auto& v : x) v = u(rng);
        if (M > 2)
          for (int64_t k = 0; k < K; ++k) x[2 * ldx + k] = 0;  // a zero row
        for (auto& v : w) v = static_cast<int8_t>(wi(rng));
        for (auto& v : scale) v = 0.01f * (1 + u(rng));
        PackInt8Panels(w.data(), K, N, panels.data(), terms.data());
        UnpackInt8Panels(panels.data(), K, N, back.data());
        ASSERT_EQ(back, w);
        Int8GemmF32(kernel, M, N, K, x.data(), ldx, panels.data(), terms.data(), scale.data(), y.data(), ldy);
        for (int64_t m = 0; m < M; ++m) {
          double amax = 0;
          for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(double(x[m * ldx + k])));
          const float s = static_cast<float>(amax) / 127.0f;
          const float inv = amax > 0 ? 127.0f / static_cast<float>(amax) : 0.0f;
          for (int64_t n = 0; n < N; ++n) {
            int64_t acc = 0;
            for (int64_t k = 0; k < K; ++k) acc += static_cast<int64_t>(std::nearbyint(x[m * ldx + k] * inv)) * w[k * N + n];
            const double ref = static_cast<double>(acc) * s * scale[n];
            ASSERT_NEAR(y[m * ldy + n], ref, 1e-5 * (1 + std::fabs(ref))) << M << " " << N << " " << K;
          }
          for (int64_t n = N; n < ldy; ++n) ASSERT_EQ(y[m * ldy + n], 42.0f);  // past N: untouched
        }
        ++checked;
      }
  EXPECT_EQ(checked, 7 * 5 * 5);
}

TEST_P(Int8GemmKernels, StaysCloseToTheFloatProduct) {
  // Per-row int8 activations and per-column int8 weights: the relative
  // error of a 512-long dot product is about 1 %, far below the spread of
  // the products themselves.
  std::mt19937 rng(9);
  std::normal_distribution<float> g(0, 1);
  const int64_t M = 8, N = 48, K = 512;
  std::vector<float> x(M * K), wf(K * N), scale(N), y(M * N);
  for (auto& v : x) v = g(rng);
  for (auto& v : wf) v = g(rng);
  std::vector<int8_t> w(K * N), panels(Int8PanelBytes(K, N));
  std::vector<int32_t> terms(Int8ColumnTerms(N));
  for (int64_t n = 0; n < N; ++n) {
    float amax = 0;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(wf[k * N + n]));
    scale[n] = amax / 127;
    for (int64_t k = 0; k < K; ++k) w[k * N + n] = static_cast<int8_t>(std::nearbyint(wf[k * N + n] / scale[n]));
  }
  PackInt8Panels(w.data(), K, N, panels.data(), terms.data());
  Int8GemmF32(GetParam(), M, N, K, x.data(), K, panels.data(), terms.data(), scale.data(), y.data(), N);
  double err = 0, norm = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double ref = 0;
      for (int64_t k = 0; k < K; ++k) ref += double(x[m * K + k]) * wf[k * N + n];
      err += (y[m * N + n] - ref) * (y[m * N + n] - ref);
      norm += ref * ref;
    }
  EXPECT_LT(std::sqrt(err / norm), 0.03);
}

TEST_P(Int8GemmKernels, ManyRowsGiveEachRowAsAloneAtAnyThreadCount) {
  // Enough rows for several L2 row blocks (register_tiles.h), a remainder
  // tile and a remainder panel: every row must come out bit for bit as the
  // same row multiplied alone, with one compute thread or two, and agree
  // with the plain integer loop.
  const Int8GemmKernel kernel = GetParam();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  std::uniform_int_distribution<int> wi(-127, 127);
  const int64_t M = 1301, N = 72, K = 1024;
  std::vector<float> x(M * K), scale(N);
  std::vector<int8_t> w(K * N), panels(Int8PanelBytes(K, N));
  std::vector<int32_t> terms(Int8ColumnTerms(N));
  for (auto& v : x) v = u(rng);
  for (auto& v : w) v = static_cast<int8_t>(wi(rng));
  for (auto& v : scale) v = 0.01f * (1 + u(rng));
  PackInt8Panels(w.data(), K, N, panels.data(), terms.data());
  const int threads = ComputeThreads();
  std::vector<float> alone(M * N);
  for (int64_t m = 0; m < M; ++m)
    Int8GemmF32(kernel, 1, N, K, x.data() + m * K, K, panels.data(), terms.data(), scale.data(), alone.data() + m * N, N);
  for (int t : {1, 2}) {
    SetComputeThreads(t);
    std::vector<float> y(M * N, 42.0f);
    Int8GemmF32(kernel, M, N, K, x.data(), K, panels.data(), terms.data(), scale.data(), y.data(), N);
    ASSERT_EQ(y, alone) << t << " threads";
  }
  SetComputeThreads(threads);
  for (int64_t m : {int64_t{0}, int64_t{511}, int64_t{512}, M - 1}) {
    double amax = 0;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(double(x[m * K + k])));
    const float inv = 127.0f / static_cast<float>(amax);
    for (int64_t n = 0; n < N; ++n) {
      int64_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += static_cast<int64_t>(std::nearbyint(x[m * K + k] * inv)) * w[k * N + n];
      const double ref = static_cast<double>(acc) * (static_cast<float>(amax) / 127.0f) * scale[n];
      ASSERT_NEAR(alone[m * N + n], ref, 1e-5 * (1 + std::fabs(ref))) << m << " " << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EachKernelThisCpuRuns, Int8GemmKernels, ::testing::ValuesIn(KernelsThisCpuRuns()),
                         [](const auto& info) {
                           std::string name = Int8GemmKernelName(info.param);
                           for (char& ch : name) ch = ch == '-' ? '_' : ch;
                           return name;
                         });

}  // namespace
}  // namespace moeedb
