// Facets: how many documents hold each value of a payload field (Qdrant's
// facet), among the documents a scan keeps. Values are the strings,
// integers and booleans at the key (index/metadata_filter.h's PayloadKey:
// lists flattened one level), each counted once per document; hits come
// by count descending, then value ascending (booleans, then numbers, then
// strings by bytes). Every kept document is read from the store.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "database/document_scan.h"

namespace moeedb {

struct FacetHit {
  nlohmann::json value;
  size_t count = 0;
};

// The `limit` most frequent values of `key`; InvalidArgument for a bad key.
Result<std::vector<FacetHit>> Facet(const VectorCollection& c, const ScanSpec& which, const std::string& key, size_t limit);

}  // namespace moeedb
