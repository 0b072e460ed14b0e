// PayloadIndex: for the payload fields a collection declares indexed, which
// documents hold which values, so a filtered search scores only the
// documents that can match rather than testing every one (Qdrant's payload
// index, Elasticsearch's keyword and numeric fields).
//
// Per declared key (a payload key as filters read it, metadata_filter.h):
//   keyword, uuid: each string value -> a Roaring bitmap of internal ids
//   bool:          true / false -> a bitmap
//   integer, float: an ordered set of (number, id), for equality and ranges
//   datetime:      an ordered set of (microseconds, id), for datetime ranges
//   text, geo:     declared (reported, kept across changes) but not used to
//                  narrow: those filters test each candidate
// Candidates() answers a filter's requirements (MetadataFilter::Requirements)
// that an indexed key's kind can answer, intersected: a superset of what the
// filter keeps, which the caller still tests document by document. It
// answers nothing when no requirement is on an indexed key.
// Not thread-safe for writers: callers serialise Add/Remove against reads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/enum_table.h"
#include "base/status.h"
#include "index/metadata_filter.h"

namespace moeedb {

enum class PayloadFieldKind { kKeyword, kInteger, kFloat, kBool, kDatetime, kUuid, kText, kGeo };
inline constexpr EnumTable<PayloadFieldKind, 8> kPayloadFieldKinds{
    "payload index kind",
    {{{PayloadFieldKind::kKeyword, "keyword"},
      {PayloadFieldKind::kInteger, "integer"},
      {PayloadFieldKind::kFloat, "float"},
      {PayloadFieldKind::kBool, "bool"},
      {PayloadFieldKind::kDatetime, "datetime"},
      {PayloadFieldKind::kUuid, "uuid"},
      {PayloadFieldKind::kText, "text"},
      {PayloadFieldKind::kGeo, "geo"}}}};

// Declared payload indexes: key -> kind.
using PayloadIndexFields = std::map<std::string, PayloadFieldKind>;

// `fields` from a JSON object {"key": "kind", ...}; InvalidArgument naming
// the key for an unknown kind, a malformed key, or more than kMaxPayloadIndexes.
inline constexpr size_t kMaxPayloadIndexes = 64;
Result<PayloadIndexFields> PayloadIndexFieldsFromJson(const nlohmann::json& j);
nlohmann::json PayloadIndexFieldsToJson(const PayloadIndexFields& fields);

class PayloadIndex {
 public:
  // An empty index of `fields` (their keys checked by PayloadIndexFieldsFromJson).
  static Result<std::unique_ptr<PayloadIndex>> Create(const PayloadIndexFields& fields);
  ~PayloadIndex();

  // Indexes the values document `id` holds at each declared key. Remove
  // takes the metadata it was added with (each posting is found by value).
  void Add(uint64_t id, const nlohmann::json& metadata);
  void Remove(uint64_t id, const nlohmann::json& metadata);

  // The ids that can meet every requirement an indexed key answers
  // (ascending), or nullopt when none does. `exact` (optional) is set when
  // every requirement was answered exactly (a keyword, uuid or bool index's
  // equality): the ids are then exactly the documents meeting them all.
  std::optional<std::vector<uint64_t>> Candidates(const std::vector<FilterRequirement>& requirements,
                                                  bool* exact = nullptr) const;

  const PayloadIndexFields& fields() const { return fields_; }
  // How many documents hold a value at `key` (0 for an undeclared key; for
  // text and geo, the documents seen with the key).
  uint64_t Points(const std::string& key) const;
  // Bytes of the postings (bitmaps as Roaring serializes them, ordered sets
  // at their node size).
  size_t memory_bytes() const;

 private:
  struct Field;
  PayloadIndex() = default;
  PayloadIndexFields fields_;
  std::vector<std::unique_ptr<Field>> by_key_;  // in fields_' order
};

}  // namespace moeedb
