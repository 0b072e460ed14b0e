#include "database/score_formula.h"

#include <string>

namespace moeedb {

ScoreFormula ScoreFormula::Constant(double value) {
  ScoreFormula f;
  f.value_ = value;
  return f;
}

ScoreFormula ScoreFormula::PrefetchScore(size_t prefetch) {
  ScoreFormula f;
  f.op_ = Op::kScore;
  f.index_ = prefetch;
  return f;
}

ScoreFormula ScoreFormula::Sum(std::vector<ScoreFormula> terms) {
  ScoreFormula f;
  f.op_ = Op::kSum;
  f.args_ = std::move(terms);
  return f;
}

ScoreFormula ScoreFormula::Product(std::vector<ScoreFormula> factors) {
  ScoreFormula f;
  f.op_ = Op::kProduct;
  f.args_ = std::move(factors);
  return f;
}

ScoreFormula ScoreFormula::Negate(ScoreFormula x) {
  ScoreFormula f;
  f.op_ = Op::kNegate;
  f.args_.push_back(std::move(x));
  return f;
}

ScoreFormula ScoreFormula::Divide(ScoreFormula left, ScoreFormula right, double by_zero) {
  ScoreFormula f;
  f.op_ = Op::kDivide;
  f.value_ = by_zero;
  f.args_.push_back(std::move(left));
  f.args_.push_back(std::move(right));
  return f;
}

Status ScoreFormula::Check(size_t prefetches) const {
  if (op_ == Op::kScore && index_ >= prefetches)
    return Status::InvalidArgument("the formula names the score of prefetch " + std::to_string(index_) + ", but there are " +
                                   std::to_string(prefetches));
  for (const auto& a : args_) MOEEDB_RETURN_IF_ERROR(a.Check(prefetches));
  return Status::OK();
}

double ScoreFormula::Evaluate(const std::vector<double>& scores) const {
  switch (op_) {
    case Op::kConstant: return value_;
    case Op::kScore: return index_ < scores.size() ? scores[index_] : 0.0;
    case Op::kSum: {
      double s = 0;
      for (const auto& a : args_) s += a.Evaluate(scores);
      return s;
    }
    case Op::kProduct: {
      double p = 1;
      for (const auto& a : args_) p *= a.Evaluate(scores);
      return p;
    }
    case Op::kNegate: return -args_[0].Evaluate(scores);
    case Op::kDivide: {
      const double r = args_[1].Evaluate(scores);
      return r == 0 ? value_ : args_[0].Evaluate(scores) / r;
    }
  }
  return 0;
}

}  // namespace moeedb
