// Groups of ranked hits by a payload field (Qdrant's groups): walking the
// hits best first, each joins the group of every distinct string, integer
// or boolean value at the key (a payload key as filters read it: lists
// flattened one level); groups come in the order their first hit came, at
// most `group_size` hits each, the first `limit` groups. A hit without
// such a value joins none.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "index/metadata_filter.h"

namespace moeedb {

// What to group by, how many hits per group and how many groups.
struct GroupSpec {
  std::string key;
  size_t group_size = 3;
  size_t limit = 10;
};

template <typename Hit>
struct HitGroup {
  nlohmann::json value;
  std::vector<Hit> hits;
};

// `metadata_of` gives a hit's payload as JSON text.
template <typename Hit>
std::vector<HitGroup<Hit>> GroupByPayload(const std::vector<Hit>& hits, const PayloadKey& key, size_t group_size,
                                          size_t limit, const std::function<const std::string&(const Hit&)>& metadata_of) {
  std::vector<HitGroup<Hit>> out;
  std::map<nlohmann::json, size_t> at;
  for (const Hit& h : hits) {
    const nlohmann::json meta = nlohmann::json::parse(metadata_of(h), nullptr, false);
    std::set<nlohmann::json> values;
    for (const nlohmann::json* v : key.Values(meta))
      if (v->is_string() || v->is_number_integer() || v->is_boolean()) values.insert(*v);
    for (const nlohmann::json& v : values) {
      auto [it, fresh] = at.emplace(v, out.size());
      if (fresh) out.push_back({v, {}});
      if (out[it->second].hits.size() < group_size) out[it->second].hits.push_back(h);
    }
  }
  if (out.size() > limit) out.resize(limit);
  return out;
}

}  // namespace moeedb
