// Metadata filters, applied before ranking. A filter is a JSON object whose
// fields must all match (AND):
//   {"lang": "en"}                       equality (string, number, bool)
//   {"year": {"$gte": 2000, "$lt": 2010}} range ($gt, $gte, $lt, $lte; numbers or strings)
//   {"tag": {"$in": ["a", "b"]}}         set membership ($nin: none of them)
//   {"tag": {"$eq": "a"}}, {"tag": {"$ne": "a"}}
//   {"title": {"$contains": "cat"}}      substring of a string, or an element of a list ($not_contains: not)
//   {"tags": {"$empty": true}}           missing, null or [] (false: anything else)
//   {"$or": [{"lang": "en"}, {"year": {"$lt": 1900}}]}   any of the filters
//   {"$and": [...]}, {"$not": {"lang": "fr"}}            all of them; not this one
//   {"$id": {"$in": ["7", "9"]}}         the document's own id (the caller puts it in
//                                        the object under "$id"; see UsesIds)
// A field name is a key of the metadata object or, when no such key exists, a
// dotted path into nested objects ("metadata.topic"). A list value matches
// $eq / $in when any element does (Qdrant's rule for arrays). A document
// without the field does not match (except for $ne, $nin, $not_contains and $empty). Logical
// operators sit beside field conditions, all ANDed; they nest (32 levels).
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "base/status.h"

namespace moeedb {

class MetadataFilter {
 public:
  // InvalidArgument naming the bad part (unknown operator, wrong type).
  static Result<std::shared_ptr<const MetadataFilter>> Parse(const std::string& filter_json);
  virtual ~MetadataFilter() = default;
  // Whether a document's metadata object matches.
  virtual bool Matches(const nlohmann::json& metadata) const = 0;
  // Whether a condition names "$id": the caller then adds the document's id
  // to the object it matches, under that key.
  virtual bool UsesIds() const = 0;
};

// Whether the document with this metadata JSON text and external id
// matches (the id under "$id" when the filter names it).
bool MatchesDocument(const MetadataFilter& filter, const std::string& metadata_json, const std::string& id);

}  // namespace moeedb
