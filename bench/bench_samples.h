// What several benchmarks make and summarise alike: random vectors with
// standard-normal entries, latency percentiles of a run, and the process's
// memory as /proc/self/status reports it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace moeedb::bench {

// `dim` standard-normal floats drawn from `rng` (any standard engine).
template <typename Rng>
std::vector<float> Gaussian(Rng& rng, size_t dim) {
  std::normal_distribution<float> n;
  std::vector<float> v(dim);
  for (auto& x : v) x = n(rng);
  return v;
}

// {"n", "p50_ms", "p99_ms", "max_ms"} of latencies in milliseconds.
inline nlohmann::json Percentiles(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  auto at = [&](double p) { return ms.empty() ? 0.0 : ms[std::min(ms.size() - 1, static_cast<size_t>(p * ms.size()))]; };
  return {{"n", ms.size()}, {"p50_ms", at(0.5)}, {"p99_ms", at(0.99)}, {"max_ms", ms.empty() ? 0.0 : ms.back()}};
}

// Bytes of a /proc/self/status line ("VmRSS:", "VmHWM:", "RssAnon:", "RssFile:"); -1 when absent.
inline int64_t StatusBytes(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(std::strlen(key))) * 1024;
  return -1;
}

}  // namespace moeedb::bench
