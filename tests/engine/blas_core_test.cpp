// The BLAS kernels this process runs (base/blas_core.h): on a CPU
// with AVX2 and FMA, OpenBLAS never runs its Prescott (SSE3) kernels unless
// the environment asks for a core; and whichever core runs, its products
// match a double-precision reference computed apart.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "base/blas_core.h"

namespace moeedb {
namespace {

TEST(BlasCore, TheCpusKernelsRunUnlessTheEnvironmentChoosesOthers) {
  const std::string core = BlasCore();
  ASSERT_EQ(core.rfind("OpenBLAS ", 0), 0u) << "OpenBLAS is the BLAS moeedb is built against: " << core;
  std::cout << "BLAS: " << core << "\n";
  if (const char* forced = std::getenv("OPENBLAS_CORETYPE"); forced != nullptr && *forced != '\0') {
    EXPECT_EQ(core.find("selected by moeedb"), std::string::npos) << core;  // the user's choice stands
    return;
  }
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    EXPECT_EQ(core.rfind("OpenBLAS Prescott", 0), std::string::npos) << core;
  if (core.find("selected by moeedb") != std::string::npos) {
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                        __builtin_cpu_supports("avx512cd");
    const std::string want = avx512 ? "OpenBLAS SkylakeX" : "OpenBLAS Haswell";
    EXPECT_EQ(core.rfind(want, 0), 0u) << core;
  }
}

// Shapes of the trainer's and the attention's products: odd sizes (edge
// tiles), a transposed operand, batched, and one large enough to thread.
TEST(BlasCore, ProductsMatchADoubleReference) {
  at::manual_seed(3);
  auto check = [](const at::Tensor& a, const at::Tensor& b) {
    const at::Tensor got = at::matmul(a, b).to(at::kDouble);
    const at::Tensor want = at::matmul(a.to(at::kDouble), b.to(at::kDouble));
    const double scale = at::matmul(a.abs().to(at::kDouble), b.abs().to(at::kDouble)).max().item<double>();
    EXPECT_LT((got - want).abs().max().item<double>(), 1e-5 * scale)
        << "shapes " << a.sizes() << " x " << b.sizes();
  };
  check(at::randn({37, 53}), at::randn({53, 61}));
  check(at::randn({700, 256}), at::randn({512, 256}).t());
  check(at::randn({96, 4, 23, 64}), at::randn({96, 4, 64, 23}));
  check(at::randn({1024, 1024}), at::randn({1024, 1024}));
}

}  // namespace
}  // namespace moeedb
