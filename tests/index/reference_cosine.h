// The cosine the dual index must compute, computed here in double from raw
// vectors and a z-score fitted here (not the index's Standardizer): the
// independent reference the dual-index tests check scores against.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace moeedb::test {

// Mean and unbiased std per feature.
struct ZScore {
  std::vector<double> mean, sd;
};

inline ZScore FitZScore(const std::vector<float>& rows, size_t dim) {
  const size_t n = rows.size() / dim;
  ZScore z{std::vector<double>(dim), std::vector<double>(dim)};
  for (size_t j = 0; j < dim; ++j) {
    double m = 0, v = 0;
    for (size_t i = 0; i < n; ++i) m += rows[i * dim + j];
    m /= static_cast<double>(n);
    for (size_t i = 0; i < n; ++i) v += (rows[i * dim + j] - m) * (rows[i * dim + j] - m);
    z.mean[j] = m, z.sd[j] = std::sqrt(v / static_cast<double>(n - 1));
  }
  return z;
}

// The cosine of a and b after the z-score (std + 1e-8, as the reference method does).
inline double ZScoredCosine(const float* a, const float* b, size_t dim, const ZScore& z) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t j = 0; j < dim; ++j) {
    const double x = (a[j] - z.mean[j]) / (z.sd[j] + 1e-8), y = (b[j] - z.mean[j]) / (z.sd[j] + 1e-8);
    ab += x * y, aa += x * x, bb += y * y;
  }
  return ab / std::sqrt(aa * bb);
}

}  // namespace moeedb::test
