// SearchSpec: one search of a collection, as every front end describes it
// (the CLI's search flags, the collections API's body, the C API's JSON,
// the Qdrant and other adapters, a search forwarded between nodes). Its
// field table (SearchFields) is the only place its names, ranges, defaults
// and help live; docs/layout.md lists which fields each front end carries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "base/field_table.h"
#include "index/fusion.h"
#include "index/metadata_filter.h"
#include "index/query_mode.h"

namespace moeedb {

// The most hits one search returns.
inline constexpr size_t kMaxSearchK = 10000;
// Hybrid search's defaults when a query names none: reciprocal rank fusion
// with lexical weight 16, both chosen on the tuning half of Cranfield's
// queries with the default model (docs/eval.md); HS weight 1, min-max
// normalisation for weighted fusion (rrf k: index/fusion.h).
inline constexpr double kDefaultBeta = 16.0;
inline constexpr double kDefaultWHs = 1.0;
inline constexpr FusionKind kDefaultFusion = FusionKind::kRrf;
inline constexpr ScoreNorm kDefaultNorm = ScoreNorm::kMinMax;

enum class ReadConsistency { kAny, kHead };
inline constexpr EnumTable<ReadConsistency, 2> kReadConsistencies{
    "consistency", {{{ReadConsistency::kAny, "any"}, {ReadConsistency::kHead, "head"}}}};

struct SearchSpec {
  std::string query;  // the query's text (embedded for the dense signals; BM25's words)
  size_t k = 10;
  QueryMode mode = QueryMode::kFused;
  std::optional<float> alpha;  // RW weight; unset: the collection's
  // Hybrid only; unset: the defaults above.
  std::optional<double> beta;   // lexical weight
  std::optional<double> w_hs;   // HS weight
  std::optional<FusionKind> fusion;
  std::optional<ScoreNorm> norm;  // weighted fusion's normalisation
  std::optional<int> rrf_k;       // rrf fusion's k in 1/(k + rank)
  // Only documents whose metadata matches; empty: all. Set through the
  // table (or SetFilter), which parses it once, so a bad filter is refused
  // before any search.
  std::string filter_json;
  std::shared_ptr<const MetadataFilter> filter;
  bool exact = false;  // the exact path, not the ANN indexes
  // Candidates each ANN or coded half proposes per hit, re-scored exactly; unset: the collection's.
  std::optional<double> oversample;
  // A sharded collection: answer from the shards that have a live replica,
  // naming the missing ones, rather than failing as unavailable.
  bool partial = false;
  // Read-your-writes: answer only from replicas that have applied this
  // change-log entry (the `seq` a write returned); 0: any.
  uint64_t min_seq = 0;
  // What a read must include: any replica's (kAny, what min_seq allows), or
  // every write acknowledged before the search began (kHead: the replicas
  // asked first apply the change log up to its head, read from the store).
  ReadConsistency consistency = ReadConsistency::kAny;

  // Parses `filter_json` ("" or "null" clears it); InvalidArgument naming the bad part.
  Status SetFilter(const std::string& filter_json);
  // Keeps the filter and adds `filter_json` to it: a document must meet both
  // ("" adds nothing).
  Status NarrowFilter(const std::string& filter_json);
  // The rules between fields: the hybrid-only fields only with mode hybrid;
  // in hybrid mode, weights that are >= 0 and not all 0. Errors name the
  // fields as `spelling` does.
  Status Check(spec::Spelling spelling) const;
};

// The field table: query, k, mode, alpha, beta, w_hs, fusion, norm, rrf_k, filter, exact, oversample, partial, min_seq,
// consistency.
const spec::FieldTable<SearchSpec>& SearchFields();
// A JSON body into a checked spec (unknown keys ignored, as the collections API
// always has: clients add their own); the query must be a string.
Result<SearchSpec> SearchSpecFromJson(const nlohmann::json& body);
// The spec as JSON (set fields only): SearchSpecFromJson reads it back equal.
nlohmann::json SearchSpecToJson(const SearchSpec& spec);

// The fusion a hybrid search with `s` runs: its weights, alpha falling back
// to `default_alpha` and the others to the defaults above.
FusionOptions FusionOf(const SearchSpec& s, float default_alpha);

}  // namespace moeedb
