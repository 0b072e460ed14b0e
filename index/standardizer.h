// Standardizer: per-feature z-score with stored statistics, then L2
// normalisation, so that an inner product is the cosine of the z-scored
// vectors (docs/method.md A.3). The statistics are fixed per
// collection, so a vector's image is a pure function of the vector. A raw
// standardizer passes vectors through unchanged (Dot and Euclid collections
// of the client's own vectors).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"

namespace moeedb {

class Standardizer {
 public:
  Standardizer() = default;
  // No z-score (mean 0, std 1): L2 normalisation only.
  static Standardizer Identity(size_t dim);
  // Neither z-score nor normalisation: Apply copies.
  static Standardizer Raw(size_t dim);
  // Mean and unbiased std per feature over `n` rows (std + 1e-8 as the
  // reference does; fewer than 2 rows: identity).
  static Standardizer Fit(const float* rows, size_t n, size_t dim);

  size_t dim() const { return mean_.size(); }
  // out = normalise((in - mean) / (std + 1e-8)); an all-zero result stays zero.
  void Apply(const float* in, float* out) const;
  // A vector whose image is `image` when `image` is unit-length (or zero):
  // out = image / inv_std + mean. The scale Apply removes is not restored,
  // which no cosine sees.
  void Invert(const float* image, float* out) const;
  bool normalizes() const { return normalize_; }

  std::string ToJson() const;
  static Result<Standardizer> FromJson(const std::string& json_text);

 private:
  std::vector<float> mean_, inv_std_;
  bool normalize_ = true;
};

}  // namespace moeedb
