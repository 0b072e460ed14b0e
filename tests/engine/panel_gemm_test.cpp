// The packed few-row GEMM kernel against a plain double-precision loop
// written here (every row-tile remainder, several panels, leading dimensions
// wider than the matrices, K = 1), and LinearWeight's use of it (single
// matrices and expert stacks filled by Set) against a double-precision
// at::mm of the same weights.
#include "engine/kernels/panel_gemm.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/kernels/linear_weight.h"
#include "engine/kernels/vector_exp.h"

namespace moeedb {
namespace {

TEST(PanelGemm, MatchesAPlainLoop) {
  if (!PanelGemmAvailable()) {
    EXPECT_EQ(PanelGemmMaxRows(256, 1), 0);  // LinearWeight then never uses it
    return;
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  int checked = 0;
  std::vector<SimdLevel> paths = {SimdLevel::kAvx2};
  if (CpuHasAvx512F()) paths.push_back(SimdLevel::kAvx512);
  for (SimdLevel path : paths)
  for (int64_t M : {1, 2, 3, 5, 6, 7, 8, 9, 11, 12, 13, 16, 17, 40})
    for (int64_t N : {16, 32, 48, 64})
      for (int64_t K : {1, 5, 64}) {
        const int64_t ldx = K + 3, ldy = N + 2;
        std::vector<float> x(M * ldx), w(K * N), panels(K * N), y(M * ldy, 42.0f);
        for (auto& v : x) v = u(rng);
        for (auto& v : w) v = u(rng);
        PackPanels(w.data(), K, N, panels.data());
        PanelGemmF32(path, M, N, K, x.data(), ldx, panels.data(), y.data(), ldy);
        // The default path gives the same bits as the AVX2 tile (the same FMAs over k).
        std::vector<float> y2(M * ldy, 42.0f);
        PanelGemmF32(M, N, K, x.data(), ldx, panels.data(), y2.data(), ldy);
        if (path == SimdLevel::kAvx2) ASSERT_EQ(y, y2) << "M " << M << " N " << N << " K " << K;
        for (int64_t m = 0; m < M; ++m) {
          for (int64_t n = 0; n < N; ++n) {
            double ref = 0;
            for (int64_t k = 0; k < K; ++k) ref += static_cast<double>(x[m * ldx + k]) * w[k * N + n];
            ASSERT_NEAR(y[m * ldy + n], ref, 1e-5 * (1 + std::sqrt(static_cast<double>(K))))
                << "M " << M << " N " << N << " K " << K << " at " << m << "," << n;
          }
          for (int64_t n = N; n < ldy; ++n) ASSERT_EQ(y[m * ldy + n], 42.0f) << "wrote past row " << m;
        }
        ++checked;
      }
  EXPECT_EQ(checked, static_cast<int>(paths.size()) * 14 * 4 * 3);
}

// The rows kernel reads an unpacked [K, N] matrix in place, once per path
// the CPU runs: every 8- and 6-row tile remainder, N with and without a last
// 16 columns past the 32-column tiles, wide leading dimensions everywhere.
class RowsGemmPaths : public ::testing::TestWithParam<SimdLevel> {};

std::vector<SimdLevel> RowsPathsThisCpuRuns() {
  std::vector<SimdLevel> out;
  if (RowsGemmAvailable()) out.push_back(SimdLevel::kAvx2);
  if (RowsGemmAvailable() && CpuHasAvx512F()) out.push_back(SimdLevel::kAvx512);
  return out;
}

TEST_P(RowsGemmPaths, MatchesAPlainLoop) {
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t M : {1, 2, 5, 6, 7, 8, 9, 15, 16, 17, 40})
    for (int64_t N : {16, 32, 48, 96})
      for (int64_t K : {1, 7, 64}) {
        const int64_t ldx = K + 3, ldy = N + 2, ldw = N + 5;
        std::vector<float> x(M * ldx), w(K * ldw), y(M * ldy, 42.0f);
        for (auto& v : x) v = u(rng);
        for (auto& v : w) v = u(rng);
        RowsGemmF32(GetParam(), M, N, K, x.data(), ldx, w.data(), ldw, y.data(), ldy);
        for (int64_t m = 0; m < M; ++m) {
          for (int64_t n = 0; n < N; ++n) {
            double ref = 0;
            for (int64_t k = 0; k < K; ++k) ref += static_cast<double>(x[m * ldx + k]) * w[k * ldw + n];
            ASSERT_NEAR(y[m * ldy + n], ref, 1e-5 * (1 + std::sqrt(static_cast<double>(K))))
                << "M " << M << " N " << N << " K " << K << " at " << m << "," << n;
          }
          for (int64_t n = N; n < ldy; ++n) ASSERT_EQ(y[m * ldy + n], 42.0f) << "wrote past row " << m;
        }
      }
}

INSTANTIATE_TEST_SUITE_P(EachPathThisCpuRuns, RowsGemmPaths, ::testing::ValuesIn(RowsPathsThisCpuRuns()),
                         [](const auto& info) { return std::string(SimdLevelName(info.param)); });

// The parallel kernels split the rows into blocks of at most 128 of sizes
// differing by one (a 260-token text: 87 + 87 + 86) and the blocks' columns
// over the threads: every row comes out bit for bit as the same row
// multiplied alone, on one thread or two, at row counts around the block
// size.
TEST(PanelGemm, TheParallelKernelsGiveEachRowAsAlone) {
  if (!PanelGemmAvailable()) GTEST_SKIP() << "no AVX2 and FMA: the kernels do not run";
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> u(-1, 1);
  const int64_t N = 160, K = 48;
  std::vector<float> w(K * N), panels(K * N);
  for (auto& v : w) v = u(rng);
  PackPanels(w.data(), K, N, panels.data());
  const int threads = at::get_num_threads();
  for (int64_t M : {1, 127, 128, 129, 260, 513}) {
    std::vector<float> x(M * K), alone_p(M * N), alone_r(M * N);
    for (auto& v : x) v = u(rng);
    for (int64_t m = 0; m < M; ++m) {
      PanelGemmF32(1, N, K, x.data() + m * K, K, panels.data(), alone_p.data() + m * N, N);
      RowsGemmF32(1, N, K, x.data() + m * K, K, w.data(), N, alone_r.data() + m * N, N);
    }
    for (int t : {1, 2}) {
      at::set_num_threads(t);
      std::vector<float> y(M * N, 42.0f);
      PanelGemmF32Parallel(M, N, K, x.data(), K, panels.data(), y.data(), N);
      ASSERT_EQ(y, alone_p) << "panels, M " << M << ", " << t << " threads";
      std::fill(y.begin(), y.end(), 42.0f);
      RowsGemmF32Parallel(M, N, K, x.data(), K, w.data(), N, y.data(), N);
      ASSERT_EQ(y, alone_r) << "rows, M " << M << ", " << t << " threads";
    }
    for (int64_t n = 0; n < N; ++n) {  // and the product itself, for the last row
      double ref = 0;
      for (int64_t k = 0; k < K; ++k) ref += static_cast<double>(x[(M - 1) * K + k]) * w[k * N + n];
      ASSERT_NEAR(alone_p[(M - 1) * N + n], ref, 1e-5 * (1 + std::sqrt(static_cast<double>(K))));
    }
  }
  at::set_num_threads(threads);
}

// Row counts up to PanelGemmMaxRows take the packed path, larger ones at::mm
// (with one thread every count is packed; with two, more than 32 rows are
// not); both must give x W^T.
TEST(PanelGemm, LinearWeightGivesTheSameProductOnEitherPath) {
  at::manual_seed(5);
  const int threads = at::get_num_threads();
  for (int t : {1, 2}) {
    at::set_num_threads(t);
    at::Tensor w = at::randn({256, 128}) * 0.05;         // [out, in]
    at::Tensor experts = at::randn({3, 64, 96}) * 0.05;  // [E, out, in]
    const LinearWeight single = LinearWeight::From(w, WeightFormat{}, at::kCPU);
    LinearWeight stack = LinearWeight::Stack(3, 64, 96, WeightFormat{}, at::kCPU);
    for (int64_t e = 0; e < 3; ++e) stack.Set(e, experts[e]);
    for (int64_t M : {1, 5, 17, 128, 300}) {
      at::Tensor x = at::randn({M, 128});
      at::Tensor ref = at::mm(x.to(at::kDouble), w.to(at::kDouble).t()).to(at::kFloat);
      EXPECT_LT((single.Apply(x) - ref).abs().max().item<float>(), 1e-4) << "M " << M;
      // A row range of a wider buffer, as the grouped expert dispatch passes it.
      at::Tensor xs = at::randn({M + 2, 100});
      at::Tensor buf = at::zeros({M + 2, 70});
      for (int64_t e = 0; e < 3; ++e) {
        buf.zero_();
        stack.Matrix(e).ApplyInto(buf.narrow(0, 1, M).narrow(1, 0, 64), xs.narrow(0, 1, M).narrow(1, 0, 96));
        at::Tensor want = at::mm(xs.narrow(0, 1, M).narrow(1, 0, 96).to(at::kDouble), experts[e].to(at::kDouble).t());
        EXPECT_LT((buf.narrow(0, 1, M).narrow(1, 0, 64) - want.to(at::kFloat)).abs().max().item<float>(), 1e-4)
            << "expert " << e << ", M " << M;
        EXPECT_EQ(buf.narrow(1, 64, 6).abs().max().item<float>(), 0.0f);
        EXPECT_EQ(buf.select(0, 0).abs().max().item<float>(), 0.0f);
      }
    }
    // The packed copy is counted: a small f32 matrix holds twice its values.
    if (PanelGemmAvailable()) EXPECT_EQ(single.nbytes(), 2 * 256 * 128 * 4);
  }
  at::set_num_threads(threads);
}

}  // namespace
}  // namespace moeedb
