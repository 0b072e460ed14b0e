#include "database/score_formula.h"

#include <cmath>
#include <cstdio>

namespace moeedb {

using json = nlohmann::json;

namespace {

// Python's float repr is what Qdrant's messages print; %.17g names the same number.
std::string Num(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

Status NonFinite(const std::string& expression) {
  return Status::InvalidArgument("The expression " + expression + " produced a non-finite number");
}

}  // namespace

ScoreFormula ScoreFormula::Constant(double value) {
  ScoreFormula f;
  f.value_ = value;
  return f;
}

ScoreFormula ScoreFormula::PrefetchScore(size_t prefetch, std::string written) {
  ScoreFormula f;
  f.op_ = Op::kScore;
  f.index_ = prefetch;
  f.written_ = written.empty() ? "$score[" + std::to_string(prefetch) + "]" : std::move(written);
  return f;
}

ScoreFormula ScoreFormula::OfKey(Op op, PayloadKey key) {
  ScoreFormula f;
  f.op_ = op;
  f.key_ = std::make_shared<const PayloadKey>(std::move(key));
  return f;
}

ScoreFormula ScoreFormula::PayloadNumber(PayloadKey key) { return OfKey(Op::kPayload, std::move(key)); }

ScoreFormula ScoreFormula::Condition(std::shared_ptr<const MetadataFilter> filter) {
  ScoreFormula f;
  f.op_ = Op::kCondition;
  f.condition_ = std::move(filter);
  return f;
}

#define MOEEDB_FORMULA_LIST(Name, OP)                         \
  ScoreFormula ScoreFormula::Name(std::vector<ScoreFormula> a) { \
    ScoreFormula f;                                           \
    f.op_ = Op::OP;                                           \
    f.args_ = std::move(a);                                   \
    return f;                                                 \
  }
MOEEDB_FORMULA_LIST(Sum, kSum)
MOEEDB_FORMULA_LIST(Product, kProduct)
#undef MOEEDB_FORMULA_LIST

#define MOEEDB_FORMULA_UNARY(Name, OP)            \
  ScoreFormula ScoreFormula::Name(ScoreFormula x) { \
    ScoreFormula f;                               \
    f.op_ = Op::OP;                               \
    f.args_.push_back(std::move(x));              \
    return f;                                     \
  }
MOEEDB_FORMULA_UNARY(Negate, kNegate)
MOEEDB_FORMULA_UNARY(Abs, kAbs)
MOEEDB_FORMULA_UNARY(Sqrt, kSqrt)
MOEEDB_FORMULA_UNARY(Exp, kExp)
MOEEDB_FORMULA_UNARY(Log10, kLog10)
MOEEDB_FORMULA_UNARY(Ln, kLn)
#undef MOEEDB_FORMULA_UNARY

ScoreFormula ScoreFormula::Divide(ScoreFormula left, ScoreFormula right, std::optional<double> by_zero) {
  ScoreFormula f;
  f.op_ = Op::kDivide;
  f.has_value_ = by_zero.has_value();
  f.value_ = by_zero.value_or(0.0);
  f.args_.push_back(std::move(left));
  f.args_.push_back(std::move(right));
  return f;
}

ScoreFormula ScoreFormula::Pow(ScoreFormula base, ScoreFormula exponent) {
  ScoreFormula f;
  f.op_ = Op::kPow;
  f.args_.push_back(std::move(base));
  f.args_.push_back(std::move(exponent));
  return f;
}

ScoreFormula ScoreFormula::GeoDistance(double lat, double lon, PayloadKey to) {
  ScoreFormula f = OfKey(Op::kGeo, std::move(to));
  f.value_ = lat;
  f.value2_ = lon;
  return f;
}

ScoreFormula ScoreFormula::DatetimeKey(PayloadKey key) { return OfKey(Op::kDatetimeKey, std::move(key)); }

Result<ScoreFormula> ScoreFormula::DecayOf(Decay kind, ScoreFormula x, std::optional<ScoreFormula> target,
                                           double midpoint, double scale) {
  if (!(midpoint > 0 && midpoint < 1)) return Status::InvalidArgument("Midpoint must be between 0 and 1, got " + Num(midpoint));
  if (!(scale > 0)) return Status::InvalidArgument("Scale must be non-zero positive, got " + Num(scale));
  ScoreFormula f;
  f.op_ = Op::kDecay;
  f.index_ = static_cast<size_t>(kind);
  f.value_ = midpoint;
  f.value2_ = scale;
  f.args_.push_back(std::move(x));
  f.args_.push_back(target ? std::move(*target) : Constant(0.0));
  return f;
}

Result<double> ScoreFormula::Evaluate(const FormulaPoint& point) const {
  static const json kNone = json::object();
  MOEEDB_ASSIGN_OR_RETURN(double v, Eval(point, defaults_ ? *defaults_ : kNone));
  // A score is an f32, as Qdrant's: one past f32's range is no score.
  const float f = static_cast<float>(v);
  if (!std::isfinite(f)) return NonFinite(Num(v) + " as f32 = " + (f > 0 ? "inf" : "-inf"));
  return static_cast<double>(f);
}

Result<json> ScoreFormula::ValueOf(const FormulaPoint& point, const json& defaults) const {
  const std::string& key = key_->key();
  json value;  // null: none
  std::vector<const json*> found;
  if (point.payload) found = key_->Values(*point.payload);
  if (!found.empty()) {
    value = json::array();
    for (const json* v : found) value.push_back(*v);
  } else if (auto it = defaults.find(key); it != defaults.end() && !(it->is_array() && it->empty())) {
    value = *it;
  }
  // One value counts as itself (a null too: the caller finds it no
  // number); several stay a list (not a number either).
  if (value.is_array() && value.size() == 1) return json(value[0]);
  if (value.is_null()) return Status::InvalidArgument("No value found for " + key + " in the payload nor the formula defaults");
  return value;
}

Result<double> ScoreFormula::Eval(const FormulaPoint& point, const json& defaults) const {
  auto arg = [&](size_t i) { return args_[i].Eval(point, defaults); };
  switch (op_) {
    case Op::kConstant: return value_;
    case Op::kScore: {
      if (index_ < point.scores.size() && point.scores[index_]) return *point.scores[index_];
      auto it = defaults.find(written_);
      if (it != defaults.end() && it->is_number()) return it->get<double>();
      return 0.0;
    }
    case Op::kPayload: {
      MOEEDB_ASSIGN_OR_RETURN(json v, ValueOf(point, defaults));
      if (!v.is_number())
        return Status::InvalidArgument("Expected number value for " + key_->key() +
                                       " in the payload and/or in the formula defaults. Error: Value is not a number");
      return v.get<double>();
    }
    case Op::kCondition: {
      json meta = point.payload && point.payload->is_object() ? *point.payload : json::object();
      if (condition_->UsesIds()) meta["$id"] = point.id;
      if (condition_->UsesVectors()) meta["$vectors"] = point.vectors ? point.vectors() : std::vector<std::string>();
      return condition_->Matches(meta) ? 1.0 : 0.0;
    }
    case Op::kSum: {
      double s = 0;
      for (size_t i = 0; i < args_.size(); ++i) {
        MOEEDB_ASSIGN_OR_RETURN(double x, arg(i));
        s += x;
      }
      return s;
    }
    case Op::kProduct: {
      double p = 1;
      for (size_t i = 0; i < args_.size(); ++i) {
        MOEEDB_ASSIGN_OR_RETURN(double x, arg(i));
        if (x == 0.0) return x;  // the factors after a zero are not evaluated (nor their errors)
        p *= x;
      }
      return p;
    }
    case Op::kNegate: {
      MOEEDB_ASSIGN_OR_RETURN(double x, arg(0));
      return -x;
    }
    case Op::kAbs: {
      MOEEDB_ASSIGN_OR_RETURN(double x, arg(0));
      return std::fabs(x);
    }
    case Op::kDivide: {
      MOEEDB_ASSIGN_OR_RETURN(double l, arg(0));
      if (l == 0.0) return l;
      MOEEDB_ASSIGN_OR_RETURN(double r, arg(1));
      if (r == 0.0) {
        if (has_value_) return value_;
        return NonFinite(Num(l) + "/" + Num(r));
      }
      const double q = l / r;
      if (!std::isfinite(q)) return NonFinite(Num(l) + "/" + Num(r));
      return q;
    }
    case Op::kSqrt: {
      MOEEDB_ASSIGN_OR_RETURN(double x, arg(0));
      if (x >= 0) return std::sqrt(x);
      return NonFinite("sqrt(" + Num(x) + ")");
    }
    case Op::kPow: {
      MOEEDB_ASSIGN_OR_RETURN(double b, arg(0));
      MOEEDB_ASSIGN_OR_RETURN(double e, arg(1));
      if (b >= 0 || (b != 0 && std::trunc(e) == e)) {
        const double p = std::pow(b, e);
        if (std::isfinite(p)) return p;
      }
      return NonFinite(Num(b) + "^" + Num(e));
    }
    case Op::kExp: {
      MOEEDB_ASSIGN_OR_RETURN(double x, arg(0));
      const double y = std::exp(x);
      if (std::isfinite(y)) return y;
      return NonFinite("exp(" + Num(x) + ")");
    }
    case Op::kLog10:
    case Op::kLn: {
      MOEEDB_ASSIGN_OR_RETURN(double x, arg(0));
      if (x > 0) return op_ == Op::kLn ? std::log(x) : std::log10(x);
      return NonFinite(std::string(op_ == Op::kLn ? "ln(" : "log10(") + Num(x) + ")");
    }
    case Op::kGeo: {
      MOEEDB_ASSIGN_OR_RETURN(json v, ValueOf(point, defaults));
      if (v.is_object() && v.contains("lat") && v.contains("lon") && v["lat"].is_number() && v["lon"].is_number())
        return GeoDistanceMetres(value_, value2_, v["lat"].get<double>(), v["lon"].get<double>());
      return Status::InvalidArgument("Expected geo point for " + key_->key() + " in the payload and/or in the formula defaults.");
    }
    case Op::kDatetimeKey: {
      MOEEDB_ASSIGN_OR_RETURN(json v, ValueOf(point, defaults));
      int64_t micros;
      if (v.is_string() && ParseDatetime(v.get<std::string>(), &micros)) return static_cast<double>(micros) / 1e6;
      return Status::InvalidArgument("Expected datetime for " + key_->key() + " in the payload and/or in the formula defaults.");
    }
    case Op::kDecay: {
      MOEEDB_ASSIGN_OR_RETURN(double x, arg(0));
      MOEEDB_ASSIGN_OR_RETURN(double target, arg(1));
      const double midpoint = value_, scale = value2_;
      switch (static_cast<Decay>(index_)) {
        case Decay::kLinear: return std::max(0.0, -((1.0 - midpoint) / scale) * std::fabs(x - target) + 1.0);
        case Decay::kExponential: return std::exp(std::log(midpoint) / scale * std::fabs(x - target));
        case Decay::kGauss: return std::exp(std::log(midpoint) / (scale * scale) * (x - target) * (x - target));
      }
      return 0.0;
    }
  }
  return 0.0;
}

}  // namespace moeedb
