// The JSON bodies of the collections API (a new collection's settings, a
// search), read into the service layer's options. Every error is an
// InvalidArgument whose message names the field (the server answers 400).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"
#include "database/vector_collection.h"

namespace moeedb {

// {"query", "k", "mode", "alpha", "beta", "w_hs", "fusion", "norm", "rrf_k",
//  "filter", "exact"}: see docs/server.md.
Result<SearchOptions> ParseSearchRequest(const nlohmann::json& body);

// The settings of PUT /collections/{name} into *o (whose dims, statistics
// and model info the caller fills in): "index" {"hs", "rw", "sq8"}, "alpha",
// "lexical" (true | false | {"language", "k1", "b"}; absent: on, english).
Status ParseCollectionRequest(const nlohmann::json& body, CollectionOptions* o);

}  // namespace moeedb
