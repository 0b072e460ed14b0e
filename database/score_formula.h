// A score formula over a query's prefetch scores (Qdrant's formula query):
// constants, the score a candidate has on prefetch i, sums, products,
// negation and division with a value for division by zero. A front end
// builds it from its wire form; the search evaluates it per candidate.
#pragma once

#include <cstddef>
#include <vector>

#include "base/status.h"

namespace moeedb {

class ScoreFormula {
 public:
  ScoreFormula() = default;  // the constant 0
  static ScoreFormula Constant(double value);
  static ScoreFormula PrefetchScore(size_t prefetch);
  static ScoreFormula Sum(std::vector<ScoreFormula> terms);
  static ScoreFormula Product(std::vector<ScoreFormula> factors);
  static ScoreFormula Negate(ScoreFormula x);
  static ScoreFormula Divide(ScoreFormula left, ScoreFormula right, double by_zero);

  // InvalidArgument when a PrefetchScore names a prefetch past `prefetches`.
  Status Check(size_t prefetches) const;
  // The formula's value for a candidate with these prefetch scores.
  double Evaluate(const std::vector<double>& scores) const;

 private:
  enum class Op { kConstant, kScore, kSum, kProduct, kNegate, kDivide };
  Op op_ = Op::kConstant;
  double value_ = 0;   // kConstant; kDivide: the value of x / 0
  size_t index_ = 0;   // kScore
  std::vector<ScoreFormula> args_;
};

}  // namespace moeedb
