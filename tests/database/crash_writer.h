// Shared by crash_writer (the child that gets killed) and crash_test (the
// parent that checks): the deterministic content of document k.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moeedb::crash {

constexpr size_t kDimHs = 16, kDimRw = 8, kBatch = 20;

inline std::string IdOf(uint64_t k) { return "k" + std::to_string(k); }

inline std::vector<float> VecOf(uint64_t k, size_t dim, uint64_t salt) {
  std::vector<float> v(dim);
  uint64_t x = k * 0x9E3779B97F4A7C15ULL + salt;
  for (size_t j = 0; j < dim; ++j) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    v[j] = static_cast<float>(static_cast<int64_t>(x % 2001) - 1000) / 100.0f + (k % 7);
  }
  return v;
}

}  // namespace moeedb::crash
