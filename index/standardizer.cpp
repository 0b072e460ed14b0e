#include "index/standardizer.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace moeedb {

Standardizer Standardizer::Identity(size_t dim) {
  Standardizer s;
  s.mean_.assign(dim, 0.0f);
  s.inv_std_.assign(dim, 1.0f);
  return s;
}

Standardizer Standardizer::Raw(size_t dim) {
  Standardizer s = Identity(dim);
  s.normalize_ = false;
  return s;
}

Standardizer Standardizer::Fit(const float* rows, size_t n, size_t dim) {
  if (n < 2) return Identity(dim);
  Standardizer s;
  s.mean_.assign(dim, 0.0f);
  s.inv_std_.assign(dim, 1.0f);
  for (size_t j = 0; j < dim; ++j) {
    double mean = 0, var = 0;
    for (size_t i = 0; i < n; ++i) mean += rows[i * dim + j];
    mean /= static_cast<double>(n);
    for (size_t i = 0; i < n; ++i) {
      const double d = rows[i * dim + j] - mean;
      var += d * d;
    }
    const double sd = std::sqrt(var / static_cast<double>(n - 1));
    s.mean_[j] = static_cast<float>(mean);
    s.inv_std_[j] = static_cast<float>(1.0 / (sd + 1e-8));
  }
  return s;
}

void Standardizer::Apply(const float* in, float* out) const {
  const size_t d = mean_.size();
  double norm = 0;
  for (size_t j = 0; j < d; ++j) {
    out[j] = (in[j] - mean_[j]) * inv_std_[j];
    norm += static_cast<double>(out[j]) * out[j];
  }
  if (normalize_ && norm > 0) {
    const float inv = static_cast<float>(1.0 / std::sqrt(norm));
    for (size_t j = 0; j < d; ++j) out[j] *= inv;
  }
}

void Standardizer::Invert(const float* image, float* out) const {
  for (size_t j = 0; j < mean_.size(); ++j) out[j] = image[j] / inv_std_[j] + mean_[j];
}

std::string Standardizer::ToJson() const {
  nlohmann::json j{{"mean", mean_}, {"inv_std", inv_std_}};
  if (!normalize_) j["normalize"] = false;
  return j.dump();
}

Result<Standardizer> Standardizer::FromJson(const std::string& text) {
  try {
    auto j = nlohmann::json::parse(text);
    Standardizer s;
    s.mean_ = j.at("mean").get<std::vector<float>>();
    s.inv_std_ = j.at("inv_std").get<std::vector<float>>();
    s.normalize_ = j.value("normalize", true);
    if (s.mean_.size() != s.inv_std_.size()) return Status::Corruption("standardizer: mean and inv_std sizes differ");
    return s;
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("standardizer statistics are damaged: ") + e.what());
  }
}

}  // namespace moeedb
