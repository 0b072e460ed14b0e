// A score formula (Qdrant's formula query): an expression over a point's
// prefetch scores, its payload and conditions on it, evaluated per
// candidate. A front end builds it from its wire form.
//
// Values: constants; $score[i] (the point's score in prefetch i's list;
// else, or past the prefetches, the default named by the variable as
// written, else 0); a payload
// key's number (a key with one value, else its default); a condition (a
// metadata filter: 1 when the point meets it, else 0); the geo distance in
// metres from an origin to a payload key's {lat, lon}; a datetime (constant,
// or a payload key's) in seconds since 1970. Operations: sum, product (0 as
// soon as a factor is), negation, abs, division (0 / x is 0; x / 0 is the
// by-zero value, or an error without one), sqrt, pow, exp, log10, ln, and
// the linear, exponential and Gaussian decays of |x - target| (decays.
// midpoint in (0, 1), scale > 0). The value is rounded to an f32 (Qdrant's
// scores are). A value that is not finite (the result too, as an f32), a payload
// value of the wrong type or a missing one is an error naming it, as
// Qdrant's (qdrant-client's hybrid/formula.py) are.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "index/metadata_filter.h"

namespace moeedb {

// What a formula reads of one candidate.
struct FormulaPoint {
  std::vector<std::optional<double>> scores;  // per prefetch: its score there, unset when not in its list
  const nlohmann::json* payload = nullptr;    // the point's payload (an object)
  std::string id;
  // The names of the vectors the point has (read only for a has_vector condition).
  std::function<std::vector<std::string>()> vectors;
};

class ScoreFormula {
 public:
  enum class Decay { kLinear, kExponential, kGauss };
  ScoreFormula() = default;  // the constant 0
  static ScoreFormula Constant(double value);
  // `written` is the variable as the query spelled it ("$score", "$score[1]"): its default's key.
  static ScoreFormula PrefetchScore(size_t prefetch, std::string written = "");
  static ScoreFormula PayloadNumber(PayloadKey key);
  static ScoreFormula Condition(std::shared_ptr<const MetadataFilter> filter);
  static ScoreFormula Sum(std::vector<ScoreFormula> terms);
  static ScoreFormula Product(std::vector<ScoreFormula> factors);
  static ScoreFormula Negate(ScoreFormula x);
  static ScoreFormula Abs(ScoreFormula x);
  static ScoreFormula Divide(ScoreFormula left, ScoreFormula right, std::optional<double> by_zero);
  static ScoreFormula Sqrt(ScoreFormula x);
  static ScoreFormula Pow(ScoreFormula base, ScoreFormula exponent);
  static ScoreFormula Exp(ScoreFormula x);
  static ScoreFormula Log10(ScoreFormula x);
  static ScoreFormula Ln(ScoreFormula x);
  static ScoreFormula GeoDistance(double lat, double lon, PayloadKey to);
  static ScoreFormula DatetimeKey(PayloadKey key);
  // x and target (nullopt: 0); InvalidArgument unless 0 < midpoint < 1 and scale > 0.
  static Result<ScoreFormula> DecayOf(Decay kind, ScoreFormula x, std::optional<ScoreFormula> target,
                                      double midpoint, double scale);

  // The defaults a missing payload value or prefetch score takes: variable
  // (key, or "$score[i]" as written) -> value.
  void SetDefaults(nlohmann::json defaults) { defaults_ = std::make_shared<const nlohmann::json>(std::move(defaults)); }
  // The formula's value for a candidate; InvalidArgument as described above.
  Result<double> Evaluate(const FormulaPoint& point) const;

 private:
  enum class Op {
    kConstant, kScore, kPayload, kCondition, kSum, kProduct, kNegate, kAbs, kDivide, kSqrt, kPow, kExp,
    kLog10, kLn, kGeo, kDatetimeKey, kDecay
  };
  // A formula of `op` over a payload key (kPayload, kGeo, kDatetimeKey).
  static ScoreFormula OfKey(Op op, PayloadKey key);
  Result<double> Eval(const FormulaPoint& point, const nlohmann::json& defaults) const;
  // A payload key's one value, else its default; InvalidArgument when neither is.
  Result<nlohmann::json> ValueOf(const FormulaPoint& point, const nlohmann::json& defaults) const;

  Op op_ = Op::kConstant;
  double value_ = 0;     // kConstant; kDivide: x / 0 (with has_value_); kGeo: origin latitude; kDecay: midpoint
  double value2_ = 0;    // kGeo: origin longitude; kDecay: scale
  bool has_value_ = false;
  size_t index_ = 0;     // kScore; kDecay: the Decay
  std::string written_;  // kScore
  std::shared_ptr<const PayloadKey> key_;            // kPayload, kGeo, kDatetimeKey
  std::shared_ptr<const MetadataFilter> condition_;  // kCondition
  std::vector<ScoreFormula> args_;
  std::shared_ptr<const nlohmann::json> defaults_;   // the root's
};

}  // namespace moeedb
