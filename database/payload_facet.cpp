#include "database/payload_facet.h"

#include <algorithm>
#include <map>
#include <set>

namespace moeedb {

using json = nlohmann::json;

Result<std::vector<FacetHit>> Facet(const VectorCollection& c, const ScanSpec& which, const std::string& key, size_t limit) {
  MOEEDB_ASSIGN_OR_RETURN(PayloadKey k, PayloadKey::Parse(key));
  ScanSpec all = which;
  all.skip = 0;
  all.limit = SIZE_MAX;
  MOEEDB_ASSIGN_OR_RETURN(ScanPage page, Scan(c, all));
  // nlohmann's json orders booleans before numbers before strings, numbers by value, strings by bytes.
  std::map<json, size_t> counts;
  for (const StoredDocument& d : page.documents) {
    const json meta = json::parse(d.metadata_json, nullptr, false);
    std::set<json> values;
    for (const json* v : k.Values(meta))
      if (v->is_string() || v->is_boolean() || v->is_number_integer()) values.insert(*v);
    for (const json& v : values) ++counts[v];
  }
  std::vector<FacetHit> hits;
  for (const auto& [value, count] : counts) hits.push_back({value, count});
  std::stable_sort(hits.begin(), hits.end(), [](const FacetHit& a, const FacetHit& b) { return a.count > b.count; });
  if (hits.size() > limit) hits.resize(limit);
  return hits;
}

}  // namespace moeedb
