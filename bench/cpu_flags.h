// The CPU's SIMD flags that decide which kernels run (from /proc/cpuinfo),
// and the kernel OpenBLAS picked: every benchmark prints them beside its
// figures.
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "base/blas_core.h"

namespace moeedb::bench {

// The CPU's model name, as /proc/cpuinfo gives it.
inline std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      const size_t at = line.find_first_not_of(" \t", line.find(':') + 1);
      return at == std::string::npos ? "" : line.substr(at);
    }
  return "(unknown)";
}

inline std::string CpuFlags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;)
      if (w == "avx2" || w == "fma" || w == "f16c" || w.rfind("avx512", 0) == 0 || w == "avx_vnni" || w == "amx_bf16")
        out += (out.empty() ? "" : " ") + w;
    break;
  }
  return out.empty() ? "(none of avx2/avx512)" : out;
}

// The core OpenBLAS runs its kernels for (base/blas_core.h: moeedb
// selects one where the library took the CPU for Prescott), and
// OPENBLAS_CORETYPE when the environment forces one (some machines set it to
// an older core than the CPU's, e.g. Haswell on an AVX-512 CPU: the f32 GEMM
// baselines and every f32 matmul then run AVX2 kernels).
inline std::string BlasCore() {
  std::string out = moeedb::BlasCore();
  if (out.empty()) out = "OpenBLAS not loaded";
  if (const char* forced = std::getenv("OPENBLAS_CORETYPE"); forced != nullptr && *forced != '\0')
    out += std::string(" (OPENBLAS_CORETYPE=") + forced + " in the environment)";
  return out;
}

}  // namespace moeedb::bench
