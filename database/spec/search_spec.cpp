#include "database/spec/search_spec.h"

namespace moeedb {

using json = nlohmann::json;
using namespace spec;

namespace {

// The fields that only hybrid search reads.
constexpr const char* kHybridOnly[] = {"beta", "w_hs", "fusion", "norm", "rrf_k"};

FieldTable<SearchSpec> MakeSearchFields() {
  FieldTable<SearchSpec> t;
  t.push_back(String("query", &SearchSpec::query, "TEXT", "the query's text"));
  t.push_back(Integer("k", &SearchSpec::k, 1, kMaxSearchK, "N", "number of hits"));
  t.push_back(Enum("mode", &SearchSpec::mode, kQueryModes, "M",
                   "fused (cos_HS + alpha cos_RW) | hs | rw | lexical (BM25 alone) | hybrid (all three fused)"));
  t.push_back(Number("alpha", &SearchSpec::alpha, -HUGE_VAL, HUGE_VAL, "X", "weight of RW", "the collection's"));
  t.push_back(Number("beta", &SearchSpec::beta, 0, HUGE_VAL, "X", "hybrid: weight of the lexical signal").Or(kDefaultBeta));
  t.push_back(Number("w_hs", &SearchSpec::w_hs, 0, HUGE_VAL, "X", "hybrid: weight of HS").Or(kDefaultWHs));
  t.push_back(Enum("fusion", &SearchSpec::fusion, kFusionKinds, "F",
                   "hybrid: rrf (reciprocal ranks) | weighted (normalised scores)")
                  .Or(kFusionKinds.Name(kDefaultFusion)));
  t.push_back(Enum("norm", &SearchSpec::norm, kScoreNorms, "N", "hybrid weighted fusion: minmax | zscore")
                  .Or(kScoreNorms.Name(kDefaultNorm)));
  t.push_back(Integer("rrf_k", &SearchSpec::rrf_k, kMinRrfK, kMaxRrfK, "N", "hybrid rrf fusion: the k of 1/(k + rank)")
                  .Or(kDefaultRrfK));
  auto filter = Custom<SearchSpec>("filter", FieldType::kObject, "JSON",
                                   "metadata filter, e.g. '{\"lang\": \"en\", \"year\": {\"$gte\": 2000}}'");
  filter.get = [](const SearchSpec& s) { return s.filter_json.empty() ? json(nullptr) : json::parse(s.filter_json); };
  filter.set = [](SearchSpec* s, const json& v) { return s->SetFilter(v.dump()); };
  t.push_back(std::move(filter));
  t.push_back(Boolean("exact", &SearchSpec::exact, "exact search (no ANN)"));
  t.push_back(Number("oversample", &SearchSpec::oversample, 1, 1000, "X",
                     "candidates each ANN or coded half proposes per hit, re-scored exactly", "the collection's"));
  t.push_back(Boolean("partial", &SearchSpec::partial,
                      "sharded collection: answer from the shards with a live replica, listing the missing ones"));
  t.push_back(Integer("min_seq", &SearchSpec::min_seq, 0, 9007199254740991.0, "SEQ",
                      "read your writes: only replicas that applied this write's seq"));
  t.push_back(Enum("consistency", &SearchSpec::consistency, kReadConsistencies, "C",
                   "any: a replica as it is (with min_seq: past that write) | head: every write acknowledged before "
                   "the search (replicas catch up to the log's head first)"));
  return t;
}

}  // namespace

const FieldTable<SearchSpec>& SearchFields() {
  static const FieldTable<SearchSpec> kTable = MakeSearchFields();
  return kTable;
}

Status SearchSpec::NarrowFilter(const std::string& text) {
  if (text.empty()) return Status::OK();
  if (filter_json.empty()) return SetFilter(text);
  return SetFilter(json{{"$and", {json::parse(filter_json), json::parse(text)}}}.dump());
}

Status SearchSpec::SetFilter(const std::string& text) {
  if (text.empty() || text == "null") {
    filter_json.clear();
    filter.reset();
    return Status::OK();
  }
  MOEEDB_ASSIGN_OR_RETURN(filter, MetadataFilter::Parse(text));
  filter_json = json::parse(text).dump();  // one spelling, whatever the caller's spacing
  return Status::OK();
}

Status SearchSpec::Check(Spelling spelling) const {
  const bool given[] = {beta.has_value(), w_hs.has_value(), fusion.has_value(), norm.has_value(), rrf_k.has_value()};
  if (mode != QueryMode::kHybrid) {
    for (size_t i = 0; i < std::size(kHybridOnly); ++i)
      if (given[i])
        return Status::InvalidArgument(FieldLabel(kHybridOnly[i], spelling) + " applies to " +
                                       (spelling == Spelling::kJson ? "\"mode\": \"hybrid\"" : "--mode hybrid") + " only");
    return Status::OK();
  }
  if (alpha && *alpha < 0) return Status::InvalidArgument(FieldLabel("alpha", spelling) + " must be >= 0 in hybrid search");
  // The collection's alpha is not known here: the weights given are checked.
  Status s = FusionOf(*this, 0.0f).Validate();
  if (!s.ok())
    return Status::InvalidArgument(s.message() + " (" + FieldLabel("w_hs", spelling) + ", " + FieldLabel("alpha", spelling) +
                                   ", " + FieldLabel("beta", spelling) + ")");
  return Status::OK();
}

Result<SearchSpec> SearchSpecFromJson(const json& body) {
  if (!body.is_object()) return Status::InvalidArgument("the search must be a JSON object");
  if (!body.contains("query") || !body["query"].is_string()) return Status::InvalidArgument("'query' must be a string");
  SearchSpec s;
  // A misspelt field ("fliter") would otherwise be a search without it.
  MOEEDB_RETURN_IF_ERROR(ReadJson(SearchFields(), body, /*refuse_unknown=*/true, &s));
  MOEEDB_RETURN_IF_ERROR(s.Check(Spelling::kJson));
  return s;
}

json SearchSpecToJson(const SearchSpec& s) {
  json j = WriteJson(SearchFields(), s);
  j["query"] = s.query;  // always present: "" is a query too (lexical search refuses it by name)
  return j;
}

FusionOptions FusionOf(const SearchSpec& s, float default_alpha) {
  FusionOptions fo;
  fo.kind = s.fusion.value_or(kDefaultFusion);
  fo.norm = s.norm.value_or(kDefaultNorm);
  fo.w_hs = s.w_hs.value_or(kDefaultWHs);
  fo.w_rw = s.alpha.value_or(default_alpha);
  fo.w_lex = s.beta.value_or(kDefaultBeta);
  fo.rrf_k = s.rrf_k.value_or(kDefaultRrfK);
  return fo;
}

}  // namespace moeedb
