// What the plain-loop reference tests (olmoe_reference_test, bert_moe_reference_test)
// share: named float32 tensors they write as a checkpoint and read back by name,
// filled with N(base, 0.3) draws, and the largest difference of an engine
// tensor from a reference vector.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace moeedb::test {

struct RefWeights {
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> tensors;
  const std::vector<float>& operator[](const std::string& n) const { return tensors.at(n).second; }
};

// Adds tensors of random values, drawn in the order they are added from one seed.
class RandomWeights {
 public:
  explicit RandomWeights(unsigned seed) : rng_(seed) {}
  void Add(const std::string& name, std::vector<int64_t> shape, float base = 0.0f) {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = base + normal_(rng_);
    weights.tensors[name] = {std::move(shape), std::move(v)};
  }
  RefWeights weights;

 private:
  std::mt19937 rng_;
  std::normal_distribution<float> normal_{0.0f, 0.3f};
};

inline double MaxAbsDiff(const at::Tensor& a, const std::vector<double>& b) {
  at::Tensor c = a.to(at::kDouble).contiguous().view({-1});
  EXPECT_EQ(c.numel(), static_cast<int64_t>(b.size()));
  double m = 0;
  for (size_t i = 0; i < b.size(); ++i) m = std::max(m, std::abs(c.data_ptr<double>()[i] - b[i]));
  return m;
}

}  // namespace moeedb::test
