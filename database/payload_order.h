// Documents ordered by a payload field (Qdrant's scroll and query by
// `order_by`): each kept document once per orderable value at the key
// (numbers, booleans as 0 and 1, strings that read as datetimes as
// microseconds since the epoch; index/metadata_filter.h's PayloadKey and
// ParseDatetime), ascending or descending by that value, ties in id order,
// from `start_from` on. Every kept document is read from the store.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "database/document_scan.h"

namespace moeedb {

struct OrderBySpec {
  std::string key;
  bool descending = false;
  std::optional<double> start_from;  // the first value answered (inclusive)
};

struct OrderedDocument {
  StoredDocument doc;       // without vectors
  nlohmann::json value;     // the value it is ordered by (a number)
};

// The first `limit` of the documents `which` keeps, ordered by `order`.
// InvalidArgument for a bad key.
Result<std::vector<OrderedDocument>> ScanOrdered(const VectorCollection& c, const ScanSpec& which, const OrderBySpec& order,
                                                 size_t limit);
// An order from JSON (the collections API's and Qdrant's form): a key, or
// {"key", "direction": "asc"|"desc", "start_from": a number or a
// datetime}; InvalidArgument naming the field.
Result<OrderBySpec> OrderBySpecFromJson(const nlohmann::json& order_by);
// A value as order_by compares it (a number, a boolean, or a datetime
// string); std::nullopt for anything else.
std::optional<double> OrderValue(const nlohmann::json& v);

}  // namespace moeedb
