// Store: the source of truth. RocksDB with one column family per kind of
// record; every write is one atomic WriteBatch across families.
//
//   meta  "c/<name>"            -> collection JSON (id, spec, counters)
//   ids   coll|'e'|external     -> internal id (8 bytes, big-endian)
//         coll|'i'|internal     -> external id
//   docs  coll|internal         -> {"id","text","metadata"} JSON
//   hs    coll|internal         -> raw HS floats
//   rw    coll|internal         -> raw RW floats
//   ops   coll|seq              -> the operation: internal ids added and removed
//
// coll is the collection's 4-byte id, integers are big-endian so keys sort
// numerically. An upsert of an existing external id gives the document a new
// internal id and removes the old one in the same batch, so derived indexes
// replay "remove old, add new" from the op log. Writes with sync=true are
// durable when the call returns (the acknowledgement).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
}  // namespace rocksdb

namespace moeedb {

struct CollectionRecord {
  std::string name;
  uint32_t id = 0;
  std::string spec_json;     // what the service layer records (model, routing, dims, ...)
  uint64_t next_internal = 1;
  uint64_t last_op = 0;      // sequence number of the newest op-log entry
  uint64_t count = 0;        // live documents
};

struct StoredDocument {
  std::string id;             // external id
  std::string text;
  std::string metadata_json;  // "{}" when none
  std::vector<float> hs, rw;  // raw vectors
};

struct DocumentPage {
  std::vector<StoredDocument> documents;
  std::string next_after;  // empty: no more documents
};

struct OpRecord {
  uint64_t seq = 0;
  std::vector<uint64_t> added, removed;  // internal ids
};

struct WriteResult {
  uint64_t seq = 0;                    // the op-log entry this write created (0: no change)
  std::vector<uint64_t> added;         // internal ids, in input order
  std::vector<uint64_t> removed;       // internal ids replaced or deleted
  size_t not_found = 0;                // deletes of ids that were not there
};

class Store {
 public:
  // Opens (creating if needed) the database at `path`.
  static Result<std::unique_ptr<Store>> Open(const std::string& path);
  ~Store();

  // NotFound / InvalidArgument ("already exists") as appropriate.
  Result<CollectionRecord> CreateCollection(const std::string& name, const std::string& spec_json);
  Result<CollectionRecord> GetCollection(const std::string& name) const;
  Result<std::vector<CollectionRecord>> ListCollections() const;
  // Removes the collection and every record of it.
  Status DropCollection(const std::string& name);
  // Replaces the collection's spec (e.g. refitted statistics), atomically.
  Status UpdateSpec(const std::string& name, const std::string& spec_json);

  // Inserts or replaces documents, atomically: all or nothing. Ids must be
  // non-empty and distinct within the batch; vectors are stored as given
  // (their dims are the collection's to check).
  Result<WriteResult> Upsert(const std::string& collection, const std::vector<StoredDocument>& docs, bool sync);
  // Deletes documents by external id, atomically; absent ids are counted, not errors.
  Result<WriteResult> Delete(const std::string& collection, const std::vector<std::string>& ids, bool sync);

  // std::nullopt when absent.
  Result<std::optional<StoredDocument>> Get(const std::string& collection, const std::string& external_id) const;
  Result<StoredDocument> GetByInternal(const std::string& collection, uint64_t internal_id, bool with_vectors) const;
  // The documents with these internal ids, in order; std::nullopt for an id
  // not stored. Reads the collection record once for the whole list (search
  // results, op-log replay).
  Result<std::vector<std::optional<StoredDocument>>> GetManyByInternal(const std::string& collection,
                                                                       const std::vector<uint64_t>& internal_ids,
                                                                       bool with_vectors) const;

  // Up to `limit` documents (without vectors) in byte order of their external
  // ids, the first after `after` ("": from the start), read from one snapshot.
  // `next_after` is the `after` of the next page, empty on the last page.
  Result<DocumentPage> ListDocuments(const std::string& collection, const std::string& after, size_t limit) const;

  // Every live document with its vectors, in internal-id order.
  Status ScanVectors(const std::string& collection,
                     const std::function<void(uint64_t internal, const float* hs, size_t dim_hs, const float* rw,
                                              size_t dim_rw, const std::string& metadata_json)>& fn) const;
  // (internal id, metadata JSON) of every live document, in internal-id order.
  Status ScanMetadata(const std::string& collection,
                      const std::function<void(uint64_t internal, const std::string& metadata_json)>& fn) const;
  // The op-log entries with seq > after, in order.
  Status ReadOps(const std::string& collection, uint64_t after, const std::function<void(const OpRecord&)>& fn) const;
  // Drops op-log entries with seq <= upto (after an index snapshot covers them).
  Status TrimOps(const std::string& collection, uint64_t upto);

  // A consistent on-disk copy of the whole database in `dir` (must not exist).
  Status Checkpoint(const std::string& dir) const;

  const std::string& path() const { return path_; }

 private:
  Store() = default;
  Status WriteCollection(void* batch, const CollectionRecord& rec);
  Result<CollectionRecord> LoadCollection(const std::string& name) const;
  // std::nullopt when the document is not stored.
  Result<std::optional<StoredDocument>> ReadDocument(const CollectionRecord& rec, uint64_t internal,
                                                     bool with_vectors) const;

  std::string path_;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> cf_;  // meta, ids, docs, hs, rw, ops
  mutable std::mutex write_mu_;                   // one writer at a time (read-modify-write of counters)
};

}  // namespace moeedb
