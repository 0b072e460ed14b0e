// Qdrant's wire formats, translated for moeedb's Qdrant router (qdrant.cpp):
// point ids, filters, request-field checks and score formulas. Pure
// functions over JSON; errors are InvalidArgument with a message for the
// client.
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "database/payload_order.h"
#include "database/score_formula.h"
#include "database/spec/search_spec.h"

namespace moeedb::qdrant {

using json = nlohmann::json;

inline Status Bad(const std::string& m) { return Status::InvalidArgument(m); }
// A UUID in any form Qdrant reads (Rust's uuid crate): hyphenated
// (8-4-4-4-12 hex digits), simple (32 hex digits, Python's uuid4().hex),
// braced ({...}) or URN (urn:uuid:...), either case; its lower-case
// hyphenated form, or "" when `s` is none of them.
std::string CanonicalUuid(const std::string& s);
// A point id as moeedb stores it: an unsigned integer as its decimal string,
// a UUID in its lower-case hyphenated form.
Result<std::string> PointId(const json& id);
// A stored id as Qdrant answers it: a number when all digits, else a string.
json QdrantId(const std::string& id);
// Qdrant's filter (must / should / must_not over match and range
// conditions, nested to 32 levels) as moeedb's metadata filter ($and / $or /
// $not / field conditions); other condition kinds are refused by name.
Result<json> TranslateFilter(const json& f, int depth);
// The "filter" field of a request as moeedb filter text ("" for none).
Result<std::string> FilterOf(const json& j);
// InvalidArgument naming the first field of `j` not in `known` ("in <what>").
Status RefuseUnknown(const json& j, std::initializer_list<const char*> known, const std::string& what);
// j[key] as a count in [0, max], `fallback` when absent or null.
Result<size_t> Count(const json& j, const char* key, size_t fallback, size_t max);
// The SearchSpec a Qdrant query, search or prefetch carries, read through
// the spec's field table so each value gets the table's rule, named as
// Qdrant names the field: `limit` (+ `offset`) as k, `filter` translated,
// `using` hs or rw as the mode (any other name: the collection's vector of
// that name, which the query vector resolves: client_vectors.h),
// `params.alpha`, `params.exact` and `params.quantization` (oversampling as
// the oversample; ignore as an exact search over the full rows; rescore is
// always on). The query vector is not part of the spec.
Result<SearchSpec> QuerySpec(const json& request, size_t offset = 0);
// Qdrant's quantization_config onto a collection's index: {"scalar": {"type":
// "int8"}} as sq8 codes, {"product": {"compression": "x4".."x64"}} as PQ of
// compression/4 dimensions a byte, {"binary": {}} as 1-bit codes; null: no
// change; "Disabled" (an update's spelling): none.
// always_ram, quantile and the binary encodings are accepted (moeedb's codes
// are always in RAM; its scores always re-scored exactly).
Status ApplyQuantizationConfig(const json& config, DualIndexSpec* index);
// The quantization_config a collection reports (null without codes).
json QuantizationConfig(const SignalIndexSpec& index);
// The vector a query, search or prefetch names with `using` ("" none).
Result<std::string> Using(const json& request);

// What `with_payload` keeps of a payload: true (all), false (none: null),
// a list of keys, or {"include": [...]} / {"exclude": [...]}.
class PayloadSelector {
 public:
  static Result<PayloadSelector> Parse(const json& with_payload, bool fallback);
  json Apply(const json& payload) const;

 private:
  bool all_ = true, none_ = false;
  std::vector<std::string> include_, exclude_;
};

// What `with_vector` (`with_vectors`) asks of a point's vectors: none
// (false, absent), all (true), or the named ones (a list of names).
class VectorSelector {
 public:
  static Result<VectorSelector> Parse(const json& with_vector);
  bool any() const { return all_ || !names_.empty(); }
  // Whether the vector `name` is answered.
  bool Keeps(const std::string& name) const;

 private:
  bool all_ = false;
  std::vector<std::string> names_;
};

// A score formula over the prefetches' scores: numbers, "$score" /
// "$score[i]", {"sum": [...]}, {"mult": [...]}, {"neg": x},
// {"div": {"left", "right", "by_zero_default"}}; nesting to 32 levels.
Result<ScoreFormula> ParseFormula(const json& e, int depth = 0);

}  // namespace moeedb::qdrant
