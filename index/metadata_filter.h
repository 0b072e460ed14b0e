// Metadata filters, applied before ranking. A filter is a JSON object whose
// fields must all match (AND):
//   {"lang": "en"}                       equality (string, number, bool)
//   {"year": {"$gte": 2000, "$lt": 2010}} range ($gt, $gte, $lt, $lte; numbers or strings):
//                                        one value must meet every bound
//   {"at": {"$time_gte": "2024-01-31T10:00:00Z"}}  datetime range ($time_gt, $time_gte,
//                                        $time_lt, $time_lte): values and bounds parsed as
//                                        RFC 3339 / ISO 8601 (no zone: UTC)
//   {"tag": {"$in": ["a", "b"]}}         set membership ($nin: none of them; $except:
//                                        some value is none of them, a missing field no)
//   {"tag": {"$eq": "a"}}, {"tag": {"$ne": "a"}}
//   {"title": {"$contains": "cat"}}      substring of a string, or an element of a list ($not_contains: not)
//   {"title": {"$text": "cat"}}          some string value holds the text ($text_any: any of its words)
//   {"tags": {"$empty": true}}           missing, or every value null or [] (false: anything else)
//   {"tags": {"$null": true}}            some value is null (false: none is)
//   {"tags": {"$values_count": {"gte": 2}}}  how many values the field has (gt, gte, lt, lte)
//   {"at": {"$geo_radius": {"center": {"lat", "lon"}, "radius": metres}}}, {"$geo_box":
//          {"top_left", "bottom_right"}}, {"$geo_polygon": {"exterior": {"points": [...]},
//          "interiors": [...]}}          a value {"lat", "lon"} in the area
//   {"$or": [{"lang": "en"}, {"year": {"$lt": 1900}}]}   any of the filters
//   {"$and": [...]}, {"$not": {"lang": "fr"}}            all of them; not this one
//   {"$min_should": {"min_count": 2, "filters": [...]}}  at least that many of the filters
//   {"$nested": {"key": "cities", "filter": {...}}}      some element of the list at key
//                                        matches the filter on its own (keys relative to it)
//   {"$id": {"$in": ["7", "9"]}}         the document's own id (the caller puts it in
//                                        the object under "$id"; see UsesIds)
//   {"$has_vector": "image"}             the document has this vector (the caller puts the
//                                        names it has under "$vectors"; see UsesVectors)
// A field name is a key of the metadata object or, when no such key exists, a
// path: dotted keys into nested objects ("metadata.topic"), "[]" for every
// element of a list and "[i]" for one ("cities[].name", "tags[0]"), as
// Qdrant spells payload keys. A path's values are flattened one level (a
// list value counts as its elements), so $eq, $in, ranges, $text and areas
// match when any value does (Qdrant's rule for arrays); $empty, $null,
// $values_count and $contains see the values unflattened. A document without
// the field does not match (except for $ne, $nin, $not_contains, $empty
// true and $null false). Logical operators sit beside field conditions, all
// ANDed; they nest (32 levels). The semantics are those of Qdrant's filters
// as qdrant-client's local mode evaluates them.
#pragma once

#include <cmath>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace moeedb {

// A condition every document a filter keeps meets, in a form a payload
// index answers (index/payload_index.h): some value at `key` (flattened as
// filters see it) equals one of `equals`, or is a number, or a datetime
// (microseconds, ParseDatetime), within [lo, hi] (each end open or closed).
struct FilterRequirement {
  enum class Kind { kEquals, kNumberRange, kTimeRange };
  std::string key;
  Kind kind = Kind::kEquals;
  std::vector<std::string> equals;  // ScalarKey of each value (strings, numbers, booleans)
  double lo = -HUGE_VAL, hi = HUGE_VAL;
  bool lo_open = false, hi_open = false;
};

// The key a scalar payload value is indexed under: equal values (as filters
// compare them: 3 == 3.0) share it ("s" + string, "b0"/"b1", "n" + the number
// as a double); empty for a null, a list or an object.
std::string ScalarKey(const nlohmann::json& value);

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
  // Whether a condition is $has_vector: the caller then adds the names of
  // the vectors the document has, as a list under "$vectors".
  virtual bool UsesVectors() const = 0;
  // Conditions every kept document meets (the top level's and its $and's
  // field conditions of $eq, $in, number and datetime ranges); a payload
  // index narrows the candidates by them before the filter decides.
  virtual std::vector<FilterRequirement> Requirements() const = 0;
  // Whether the filter is exactly its Requirements() of kind kEquals (it
  // holds nothing else), so an index that answers them all exactly has
  // decided it: its candidates need no test.
  virtual bool OnlyEqualities() const = 0;
};

// A payload key as filters read it (a key of the metadata object, else a
// path: "a.b", "a[].b", "a[0]"), for what else reads payload values by key
// (facets, ordering).
class PayloadKey {
 public:
  // InvalidArgument naming the key for a malformed path.
  static Result<PayloadKey> Parse(const std::string& key);
  // The values at the key in `metadata`, a list flattened into its
  // elements when `flat` (one level, as filters see them).
  std::vector<const nlohmann::json*> Values(const nlohmann::json& metadata, bool flat = true) const;
  // Merges the object `values` into each object the key names in `payload`
  // (Qdrant's set_payload with a key): missing keys on the way are made
  // objects, and so is a value in the way that is not one; a list index
  // past the end changes nothing; where the key indexes a list ("[]",
  // "[0]") and finds none, that value becomes []; a named value that is not
  // an object is replaced by `values`.
  void MergeInto(nlohmann::json* payload, const nlohmann::json& values) const;
  const std::string& key() const { return key_; }

 private:
  std::string key_;
  std::shared_ptr<const void> path_;  // the parsed steps (metadata_filter.cpp)
};

// Whether the document with this metadata JSON text and external id
// matches (the id under "$id" when the filter names it; `vectors`, the
// names of the vectors it has, under "$vectors" when given).
bool MatchesDocument(const MetadataFilter& filter, const std::string& metadata_json, const std::string& id,
                     const std::vector<std::string>* vectors = nullptr);

// The haversine distance in metres between two points (degrees) over the
// mean Earth radius, as filters' geo conditions measure it.
double GeoDistanceMetres(double lat1, double lon1, double lat2, double lon2);

// Microseconds since 1970-01-01T00:00:00Z of a datetime as Qdrant reads
// one: "YYYY-MM-DD", then " " or "T" and "HH:MM" (with " ") or "HH:MM:SS",
// an optional fraction and zone (Z, +HH, +HH:MM, +HHMM) after the seconds;
// no zone is UTC. False for anything else.
bool ParseDatetime(const std::string& text, int64_t* micros);

}  // namespace moeedb
