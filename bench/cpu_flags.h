// The CPU's SIMD flags that decide which kernels run (from /proc/cpuinfo):
// every benchmark prints them beside its figures.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace moeedb::bench {

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

}  // namespace moeedb::bench
