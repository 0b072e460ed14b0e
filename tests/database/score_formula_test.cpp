// Score formulas (database/score_formula.h), each value worked out by hand
// from Qdrant's rules (qdrant-client's hybrid/formula.py): variables and
// their defaults, conditions, the operations, the decays, and the errors a
// non-finite value or a payload value of the wrong type raises.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "database/score_formula.h"

namespace moeedb {
namespace {

using json = nlohmann::json;
using F = ScoreFormula;

F Key(const std::string& k) { return F::PayloadNumber(*PayloadKey::Parse(k)); }

Result<double> Eval(F f, const json& payload, std::vector<std::optional<double>> scores = {0.5},
                    const json& defaults = json::object()) {
  f.SetDefaults(defaults);
  FormulaPoint p;
  p.scores = std::move(scores);
  p.payload = &payload;
  p.id = "7";
  p.vectors = [] { return std::vector<std::string>{"text"}; };
  return f.Evaluate(p);
}

const json kPayload = json::parse(R"({"n": 4, "one": [2.5], "many": [1, 2], "word": "cat", "none": null,
  "at": "2024-01-02T00:00:00Z", "geo": {"lat": 52.52, "lon": 13.405}, "nested": {"d": 3}})");

TEST(ScoreFormula, VariablesReadScoresPayloadsAndDefaults) {
  EXPECT_EQ(*Eval(F::PrefetchScore(0, "$score"), kPayload), 0.5);
  // Not in prefetch 1's list: its default by the variable as written, else 0.
  EXPECT_EQ(*Eval(F::PrefetchScore(1, "$score[1]"), kPayload, {0.5, std::nullopt}), 0.0);
  EXPECT_EQ(*Eval(F::PrefetchScore(1, "$score[1]"), kPayload, {0.5, std::nullopt}, {{"$score[1]", 9}}), 9.0);
  EXPECT_EQ(*Eval(F::PrefetchScore(4, "$score[4]"), kPayload, {0.5}, {{"$score[4]", 2}}), 2.0);  // past the prefetches
  EXPECT_EQ(*Eval(Key("n"), kPayload), 4.0);
  EXPECT_EQ(*Eval(Key("one"), kPayload), 2.5);  // a list of one is its value
  EXPECT_EQ(*Eval(Key("nested.d"), kPayload), 3.0);
  EXPECT_EQ(*Eval(Key("absent"), kPayload, {0.5}, {{"absent", 1.5}}), 1.5);
  auto many = Eval(Key("many"), kPayload);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.status().message().find("in the payload and/or in the formula defaults"), std::string::npos);
  EXPECT_FALSE(Eval(Key("word"), kPayload).ok());
  EXPECT_FALSE(Eval(Key("none"), kPayload, {0.5}, {{"none", 1}}).ok());  // a stored null is no number; no default
  auto missing = Eval(Key("absent"), kPayload);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("No value found for absent"), std::string::npos);
}

TEST(ScoreFormula, OperationsConditionsAndDecays) {
  auto cond = [](const char* f) { return F::Condition(*MetadataFilter::Parse(f)); };
  EXPECT_EQ(*Eval(cond(R"({"word": "cat"})"), kPayload), 1.0);
  EXPECT_EQ(*Eval(cond(R"({"word": "dog"})"), kPayload), 0.0);
  EXPECT_EQ(*Eval(cond(R"({"$id": {"$in": ["7"]}})"), kPayload), 1.0);
  EXPECT_EQ(*Eval(cond(R"({"$has_vector": "image"})"), kPayload), 0.0);
  // 0.5 * 4 + |-3| - 2.5 = 2.5
  F sum = F::Sum({F::Product({F::PrefetchScore(0), Key("n")}), F::Abs(F::Constant(-3)), F::Negate(Key("one"))});
  EXPECT_DOUBLE_EQ(*Eval(sum, kPayload), 2.5);
  // A zero factor ends a product before a factor that would fail.
  EXPECT_EQ(*Eval(F::Product({F::Constant(0), Key("word")}), kPayload), 0.0);
  EXPECT_FALSE(Eval(F::Product({F::Constant(1), Key("word")}), kPayload).ok());
  EXPECT_EQ(*Eval(F::Divide(F::Constant(0), Key("word"), std::nullopt), kPayload), 0.0);  // 0 / x: not evaluated
  EXPECT_EQ(*Eval(F::Divide(F::Constant(3), F::Constant(0), 7.0), kPayload), 7.0);
  auto by_zero = Eval(F::Divide(F::Constant(3), F::Constant(0), std::nullopt), kPayload);
  ASSERT_FALSE(by_zero.ok());
  EXPECT_NE(by_zero.status().message().find("produced a non-finite number"), std::string::npos);
  EXPECT_DOUBLE_EQ(*Eval(F::Pow(F::Constant(-2), F::Constant(3)), kPayload), -8.0);
  EXPECT_FALSE(Eval(F::Pow(F::Constant(-2), F::Constant(0.5)), kPayload).ok());
  EXPECT_FALSE(Eval(F::Pow(F::Constant(0), F::Constant(-1)), kPayload).ok());
  EXPECT_FALSE(Eval(F::Sqrt(F::Constant(-1)), kPayload).ok());
  EXPECT_FALSE(Eval(F::Ln(F::Constant(0)), kPayload).ok());
  EXPECT_FALSE(Eval(F::Exp(F::Constant(1000)), kPayload).ok());
  // Finite as a double, past f32's range as a score: 1e20 * 1e20 = 1e40 > 3.4e38.
  EXPECT_FALSE(Eval(F::Product({F::Constant(1e20), F::Constant(1e20)}), kPayload).ok());
  EXPECT_EQ(*Eval(F::Constant(0.1), kPayload), static_cast<double>(0.1f));
  EXPECT_DOUBLE_EQ(*Eval(F::Log10(F::Constant(1000)), kPayload), 3.0);
  // 2024-01-02T00:00:00Z is 1704153600 s after 1970.
  EXPECT_DOUBLE_EQ(*Eval(F::DatetimeKey(*PayloadKey::Parse("at")), kPayload), 1704153600.0);
  EXPECT_FALSE(Eval(F::DatetimeKey(*PayloadKey::Parse("word")), kPayload).ok());
  // Berlin to itself: 0 m; to (52.52, 14.405): one degree of longitude at 52.52 N,
  // 6371008.8 * 2 * asin(cos(52.52 deg) * sin(0.5 deg)) = 67,659.94 m (Python's math, by hand).
  EXPECT_NEAR(*Eval(F::GeoDistance(52.52, 13.405, *PayloadKey::Parse("geo")), kPayload), 0.0, 1e-6);
  EXPECT_NEAR(*Eval(F::GeoDistance(52.52, 14.405, *PayloadKey::Parse("geo")), kPayload), 67659.94, 0.01);
  EXPECT_FALSE(Eval(F::GeoDistance(0, 0, *PayloadKey::Parse("n")), kPayload).ok());
  // Decays of |x - target| = 2 with midpoint 0.5, scale 4: linear 1 - 0.125 * 2 = 0.75;
  // exponential 0.5^(2/4) = 0.7071; Gaussian 0.5^(4/16) = 0.8409.
  auto decay = [&](F::Decay d) {
    return *Eval(*F::DecayOf(d, F::Constant(5), F::Constant(3), 0.5, 4.0), kPayload);
  };
  EXPECT_DOUBLE_EQ(decay(F::Decay::kLinear), 0.75);
  EXPECT_NEAR(decay(F::Decay::kExponential), std::sqrt(0.5), 1e-7);  // an f32 score
  EXPECT_NEAR(decay(F::Decay::kGauss), std::pow(0.5, 0.25), 1e-7);
  EXPECT_FALSE(F::DecayOf(F::Decay::kLinear, F::Constant(1), std::nullopt, 1.0, 1.0).ok());
  EXPECT_FALSE(F::DecayOf(F::Decay::kLinear, F::Constant(1), std::nullopt, 0.5, 0.0).ok());
}

}  // namespace
}  // namespace moeedb
