// Document updates: a change to the metadata (a client's payload) of stored
// documents, Qdrant's set, overwrite, delete-keys and clear payload, or to
// some of their vectors (Qdrant's update and delete vectors). Applied
// as one atomic write that no other write overtook: each document is read
// with the internal id it is stored under, changed, and written on the
// condition that the id still holds it (Store::UpsertIfUnchanged); when
// another write came between, the whole change is read and applied again.
// A metadata change keeps the vectors, and the text (what the lexical index
// reads) follows the metadata where it came from it (PayloadText); a vector
// change keeps the rest.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "database/client_vectors.h"
#include "database/document_scan.h"
#include "database/vector_collection.h"

namespace moeedb {

struct MetadataChange {
  enum class Kind { kSet, kOverwrite, kDeleteKeys, kClear };
  Kind kind = Kind::kSet;
  nlohmann::json values = nlohmann::json::object();  // kSet: merged in; kOverwrite: the new metadata
  std::string at;                                     // kSet: a payload key ("a.b", "a[0]", "a[].b") merged into ("" the top)
  std::vector<std::string> keys;                      // kDeleteKeys: keys or dotted paths removed

  // InvalidArgument naming the field: values not an object, a malformed
  // key, a key to delete that is empty or goes into a list ("a[].b").
  Status Validate() const;
  // The metadata after the change.
  nlohmann::json Apply(nlohmann::json metadata) const;
};

// Deletes the documents `which` keeps (its ids, or what its filter keeps when
// read), as one atomic write; ids that are not stored are counted in the
// result's not_found. Nothing to delete: an empty result (seq 0).
Result<WriteResult> DeleteDocuments(VectorCollection* c, const ScanSpec& which, bool sync);

// Applies `change` to the documents `which` keeps, all or nothing. With
// `which.ids`, an id that is not stored is NotFound and nothing changes
// (Qdrant's rule); with a filter, the documents it keeps when read.
// Unavailable when other writes kept changing the documents (8 tries).
Result<WriteResult> ChangeMetadata(VectorCollection* c, const ScanSpec& which, const MetadataChange& change, bool sync);

// Which points of an upsert are written (Qdrant's update_mode and
// update_filter): a point already stored is skipped under `insert_only`, or
// when `filter` does not keep its stored version; a new one is skipped
// under `update_only`.
struct UpsertCondition {
  bool insert_only = false, update_only = false;
  std::shared_ptr<const MetadataFilter> filter;  // nullptr: every stored point may be replaced
};
// Writes the points of `docs` (vectors already given) that `condition`
// lets through, as one write that no other write overtook (each point's
// state checked as read); nothing to write: an empty result.
Result<WriteResult> UpsertWhere(VectorCollection* c, const std::vector<StoredDocument>& docs, const UpsertCondition& condition,
                                bool sync);

// Sets, for each id, the vectors given (by name; the point's other vectors
// kept), all or nothing: NotFound for an id not stored, InvalidArgument
// (client_vectors.h) for a vector the collection does not take.
// `only_where`: a stored point its filter does not keep is left as it is.
Result<WriteResult> SetVectors(VectorCollection* c, const std::map<std::string, ClientVector>& vectors, bool sync,
                               const std::shared_ptr<const MetadataFilter>& only_where = nullptr);
// Removes the named vectors from the points `which` keeps, all or nothing.
// InvalidArgument for a name not declared, or a collection of the served
// model's vectors (its points keep both).
Result<WriteResult> RemoveVectors(VectorCollection* c, const ScanSpec& which, const std::vector<std::string>& names,
                                  bool sync);

}  // namespace moeedb
