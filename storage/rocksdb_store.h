// RocksStore: the embedded store (the default), one RocksDB database in a
// folder with one column family per kind of record; every write is one atomic
// WriteBatch across families.
//
//   meta  "c/<name>"            -> collection JSON (id, spec, counters)
//         "format/ids-in-listing-order" -> "1" once the id keys below are (stores
//                               of older versions kept them as coll|'e'|external;
//                               Open moves them; older versions cannot open these)
//   ids   coll|'k'|IdOrderKey(external) -> internal id (8 bytes, big-endian)
//         coll|'i'|internal     -> external id
//   docs  coll|internal         -> {"id","text","metadata"} JSON
//   hs    coll|internal         -> raw HS floats
//   rw    coll|internal         -> raw RW floats
//   ops   coll|seq              -> the change: internal ids added and removed
//
// coll is the collection's 4-byte id, integers are big-endian so keys sort
// numerically. One writer at a time (a mutex around each write's
// read-modify-write of the collection record) makes the change-log numbers
// gapless and in commit order. Writes with sync=true are durable when the
// call returns (the acknowledgement). One process opens the folder at a time.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "storage/store.h"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
}  // namespace rocksdb

namespace moeedb {

class RocksStore final : public Store {
 public:
  // Opens (creating if needed) the database in folder `path`.
  static Result<std::unique_ptr<RocksStore>> Open(const std::string& path);
  ~RocksStore() override;

  Result<CollectionRecord> CreateCollection(const std::string& name, const std::string& spec_json) override;
  Result<CollectionRecord> GetCollection(const std::string& name) const override;
  Result<std::vector<CollectionRecord>> ListCollections() const override;
  Status DropCollection(const std::string& name) override;
  Status UpdateSpec(const std::string& name, const std::string& expected, const std::string& spec_json) override;
  Result<std::map<std::string, std::string>> ListAliases() const override;
  Status UpdateAliases(const std::map<std::string, std::string>& expected,
                       const std::map<std::string, std::string>& aliases) override;
  Result<WriteResult> Upsert(const std::string& collection, const std::vector<StoredDocument>& docs,
                             bool sync) override;
  Result<WriteResult> UpsertIfUnchanged(const std::string& collection, const std::vector<StoredDocument>& docs,
                                        const std::vector<uint64_t>& expected, bool sync) override;
  Result<std::optional<uint64_t>> InternalId(const std::string& collection, const std::string& external_id) const override;
  Result<WriteResult> Delete(const std::string& collection, const std::vector<std::string>& ids, bool sync) override;
  Result<std::optional<StoredDocument>> Get(const std::string& collection,
                                            const std::string& external_id) const override;
  Result<StoredDocument> GetByInternal(const std::string& collection, uint64_t internal_id,
                                       bool with_vectors) const override;
  Result<std::vector<std::optional<StoredDocument>>> GetManyByInternal(const std::string& collection,
                                                                       const std::vector<uint64_t>& internal_ids,
                                                                       bool with_vectors,
                                                                       const ShardFilter& shard) const override;
  Result<DocumentPage> ListDocuments(const std::string& collection, const std::string& after,
                                     size_t limit) const override;
  Status ScanVectors(const std::string& collection,
                     const std::function<void(uint64_t, const float*, size_t, const float*, size_t,
                                              const std::string&)>& fn,
                     const ShardFilter& shard) const override;
  Status ScanMetadata(const std::string& collection,
                      const std::function<void(uint64_t, const std::string&)>& fn,
                      const ShardFilter& shard) const override;
  using Store::ReadOps;
  Status ReadOps(const std::string& collection, uint64_t after, size_t limit,
                 const std::function<void(const OpRecord&)>& fn) const override;
  Status TrimOps(const std::string& collection, uint64_t upto) override;
  // A RocksDB checkpoint: hard links where possible.
  Status Checkpoint(const std::string& dir) const override;
  std::string location() const override { return path_; }

 private:
  RocksStore() = default;
  Status WriteCollection(void* batch, const CollectionRecord& rec);
  // Upsert, and UpsertIfUnchanged when `expected` is given.
  Result<WriteResult> Write(const std::string& collection, const std::vector<StoredDocument>& docs,
                            const std::vector<uint64_t>* expected, bool sync);
  // Moves id keys written by a moeedb before IdOrderKey to their new keys.
  Status MoveIdsToListingOrder();
  Result<CollectionRecord> LoadCollection(const std::string& name) const;
  // The internal id `external` is stored under in collection `r` (std::nullopt: absent).
  Result<std::optional<uint64_t>> InternalIdIn(const CollectionRecord& r, const std::string& external) const;
  // std::nullopt when the document is not stored.
  Result<std::optional<StoredDocument>> ReadDocument(const CollectionRecord& rec, uint64_t internal,
                                                     bool with_vectors) const;

  std::string path_;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> cf_;  // meta, ids, docs, hs, rw, ops
  mutable std::mutex write_mu_;                   // one writer at a time (read-modify-write of counters)
};

}  // namespace moeedb
