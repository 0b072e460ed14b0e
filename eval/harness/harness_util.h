// Helpers shared by the harness's tasks (not a public header).
#pragma once

#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "database/embedding_setup.h"

namespace moeedb::eval::harness {

template <typename T>
std::vector<T> Head(std::vector<T> v, size_t limit) {
  if (limit > 0 && v.size() > limit) v.resize(limit);
  return v;
}

inline std::string F2(double v) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(2) << v;
  return o.str();
}

inline nlohmann::json SetupJson(const EmbeddingSetup* setup) {
  if (!setup) return {{"baseline", "tfidf"}};
  return nlohmann::json::parse(setup->InfoJson());
}

using Matrix = std::vector<std::vector<float>>;

}  // namespace moeedb::eval::harness
