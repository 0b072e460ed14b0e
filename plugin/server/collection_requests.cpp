#include "plugin/server/collection_requests.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace moeedb {

using json = nlohmann::json;

namespace {

Result<double> Number(const json& j, const char* key, double lo) {
  if (!j[key].is_number() || !std::isfinite(j[key].get<double>()) || j[key].get<double>() < lo)
    return Status::InvalidArgument(std::string("'") + key + "' must be a finite number" + (lo == 0 ? " >= 0" : ""));
  return j[key].get<double>();
}

Result<std::string> String(const json& j, const char* key) {
  if (!j[key].is_string()) return Status::InvalidArgument(std::string("'") + key + "' must be a string");
  return j[key].get<std::string>();
}

}  // namespace

Result<SearchOptions> ParseSearchRequest(const json& j) {
  SearchOptions so;
  if (!j.contains("query") || !j["query"].is_string()) return Status::InvalidArgument("'query' must be a string");
  so.text = j["query"].get<std::string>();
  if (j.contains("k")) {
    if (!j["k"].is_number_integer() || j["k"].get<int64_t>() < 1 || j["k"].get<int64_t>() > 10000)
      return Status::InvalidArgument("'k' must be an integer in [1, 10000]");
    so.k = j["k"].get<size_t>();
  }
  if (j.contains("mode")) {
    MOEEDB_ASSIGN_OR_RETURN(std::string mode, String(j, "mode"));
    MOEEDB_ASSIGN_OR_RETURN(so.mode, ParseQueryMode(mode));
  }
  const bool hybrid = so.mode == QueryMode::kHybrid;
  if (j.contains("alpha")) {
    MOEEDB_ASSIGN_OR_RETURN(double a, Number(j, "alpha", hybrid ? 0.0 : -INFINITY));
    so.alpha = static_cast<float>(a);
  }
  for (const char* key : {"beta", "w_hs", "fusion", "norm", "rrf_k"})
    if (j.contains(key) && !hybrid) return Status::InvalidArgument(std::string("'") + key + "' applies to \"mode\": \"hybrid\" only");
  if (j.contains("beta")) { MOEEDB_ASSIGN_OR_RETURN(so.beta, Number(j, "beta", 0.0)); }
  if (j.contains("w_hs")) { MOEEDB_ASSIGN_OR_RETURN(so.w_hs, Number(j, "w_hs", 0.0)); }
  if (j.contains("fusion")) {
    MOEEDB_ASSIGN_OR_RETURN(std::string f, String(j, "fusion"));
    MOEEDB_ASSIGN_OR_RETURN(so.fusion, ParseFusionKind(f));
  }
  if (j.contains("norm")) {
    MOEEDB_ASSIGN_OR_RETURN(std::string n, String(j, "norm"));
    MOEEDB_ASSIGN_OR_RETURN(so.norm, ParseScoreNorm(n));
  }
  if (j.contains("rrf_k")) {
    if (!j["rrf_k"].is_number_integer() || j["rrf_k"].get<int64_t>() < 1 || j["rrf_k"].get<int64_t>() > 100000)
      return Status::InvalidArgument("'rrf_k' must be an integer in [1, 100000]");
    so.rrf_k = j["rrf_k"].get<int>();
  }
  if (j.contains("filter") && !j["filter"].is_null()) {
    MOEEDB_ASSIGN_OR_RETURN(so.filter, MetadataFilter::Parse(j["filter"].dump()));
  }
  if (j.contains("exact")) {
    if (!j["exact"].is_boolean()) return Status::InvalidArgument("'exact' must be true or false");
    so.exact = j["exact"].get<bool>();
  }
  return so;
}

Status ParseCollectionRequest(const json& j, CollectionOptions* o) {
  if (j.contains("index")) {
    if (!j["index"].is_object()) return Status::InvalidArgument("'index' must be an object {\"hs\": kind, \"rw\": kind}");
    for (auto [key, half] : {std::pair{"hs", &o->index.hs}, std::pair{"rw", &o->index.rw}}) {
      if (!j["index"].contains(key)) continue;
      if (!j["index"][key].is_string()) return Status::InvalidArgument("index kinds are strings: flat, hnsw, ivf");
      MOEEDB_ASSIGN_OR_RETURN(half->kind, ParseIndexKind(j["index"][key].get<std::string>()));
    }
    if (j["index"].contains("sq8")) o->index.hs.sq8 = o->index.rw.sq8 = j["index"]["sq8"].is_boolean() && j["index"]["sq8"].get<bool>();
  }
  if (j.contains("alpha")) {
    MOEEDB_ASSIGN_OR_RETURN(double a, Number(j, "alpha", -INFINITY));
    o->default_alpha = static_cast<float>(a);
  }
  o->lexical = LexicalSpec{true};
  if (!j.contains("lexical")) return Status::OK();
  const json& l = j["lexical"];
  if (l.is_boolean()) {
    o->lexical.enabled = l.get<bool>();
    return Status::OK();
  }
  if (!l.is_object()) return Status::InvalidArgument("'lexical' must be true, false or {\"language\", \"k1\", \"b\"}");
  json with = l;
  if (!with.contains("enabled")) with["enabled"] = true;
  auto parsed = LexicalSpec::FromJson(with.dump());
  if (!parsed.ok()) return Status::InvalidArgument("'lexical': " + parsed.status().message());
  o->lexical = *parsed;
  return Status::OK();
}

}  // namespace moeedb
