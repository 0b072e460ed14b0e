// Helpers shared by the harness's tasks (not a public header).
#pragma once

#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "database/embedding_setup.h"
#include "eval/harness/harness.h"

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

// What was evaluated, for the report: the setup's info, the outside
// model's label and dimension, or the baseline.
nlohmann::json SetupJson(const EvalInput& in);

using Matrix = std::vector<std::vector<float>>;

}  // namespace moeedb::eval::harness
