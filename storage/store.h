// Store: the source of truth of a database: its collections and their
// recorded setups, documents (text, metadata, raw HS/RW vectors) and a
// per-collection change log. Two implementations with one contract:
// RocksStore (rocksdb_store.h, one process, the default: `--db DIR`) and
// PostgresStore (postgres_store.h, `--db postgresql://...`: many nodes).
//
// The contract both keep:
//  - every write is atomic (all or nothing) and acknowledged only when
//    durable (committed; with sync=false RocksStore may lose the newest
//    writes on a machine crash, never half of one);
//  - an upsert of an existing external id gives the document a new internal
//    id and removes the old one in the same write, so derived indexes replay
//    "remove old, add new";
//  - each write that changes a collection appends one change-log entry whose
//    sequence number is the collection's last_op + 1: numbers are gapless and
//    in commit order, so a reader that has applied every entry up to N has
//    missed nothing when it next reads the entries above N, as long as entry
//    N is still the one it applied (OpRecord::entry_id: a store restored to
//    an earlier point numbers new writes anew).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

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
  // The entry's identity where the store gives one (PostgreSQL: the write's
  // random id; "" otherwise): a reader that applied entry N checks that the
  // log's entry N is still the one it applied, so a log that went back (a
  // crash that lost commits, a point-in-time restore) and numbered other
  // writes anew is noticed, not followed into the wrong documents.
  std::string entry_id;
};

// How a collection's shard keys are split among its S shards. kRange: shard
// k holds the keys in [ShardKeyFloor(k, S), ShardKeyFloor(k + 1, S)), so a
// store indexed by shard key reads one shard's rows alone, whatever S (a
// reshard included). kModulo: key mod S, how collections created before
// schema 9 were placed; they keep it for life (their replicas were built by
// it), and reading one shard of them means reading the whole collection.
enum class ShardLayout { kModulo, kRange };

// Which of a collection's documents a reader wants: those in shard `shard`
// of `count` (ShardOfKey). count 1 (the default) is every document.
struct ShardFilter {
  uint32_t shard = 0, count = 1;
  ShardLayout layout = ShardLayout::kModulo;
  bool all() const { return count <= 1; }
  bool Holds(const std::string& external_id) const;
};

// A document's shard key: FNV-1a (64-bit) of its external id's bytes,
// mixed by MurmurHash3's 64-bit finalizer (fmix64), shifted right one bit so
// it fits a signed 64-bit column. Stable across versions and machines: it
// decides where documents live.
uint64_t ShardKey(const std::string& external_id);
// The shard among `count` that shard key `key` (< 2^63) belongs to.
uint32_t ShardOfKey(uint64_t key, uint32_t count, ShardLayout layout);
// The smallest key of shard `shard` of `count` in the range layout:
// ceil(shard * 2^63 / count); 2^63 (past every key) for shard == count.
uint64_t ShardKeyFloor(uint32_t shard, uint32_t count);
// The shard among `count` a document belongs to: ShardOfKey(ShardKey(id), ...).
uint32_t ShardOfId(const std::string& external_id, uint32_t count, ShardLayout layout);
// The key that orders documents in a listing: ids of 1 to 20 decimal digits
// first, by number (Qdrant's integer ids; the id itself breaks the tie of
// leading zeros), then every other id by its bytes (UUIDs by their value).
// "0" + the digits left-padded with zeros to 20 + the id, or "1" + the id:
// distinct ids get distinct keys. The PostgreSQL store computes the same in
// SQL (postgres_rows.h's kIdOrderSql).
std::string IdOrderKey(const std::string& external_id);

struct WriteResult {
  uint64_t seq = 0;                    // the op-log entry this write created (0: no change)
  std::string entry_id;                // that entry's identity (OpRecord::entry_id)
  std::string previous_entry_id;       // entry seq - 1's identity as the write saw it ("" none)
  std::vector<uint64_t> added;         // internal ids, in input order
  std::vector<uint64_t> removed;       // internal ids replaced or deleted
  size_t not_found = 0;                // deletes of ids that were not there
};

class Store {
 public:
  // The store at `location`: a PostgreSQL connection URI
  // ("postgresql://..." or "postgres://...": PostgresStore), else a folder
  // (RocksStore, created if needed).
  static Result<std::unique_ptr<Store>> Open(const std::string& location);
  virtual ~Store() = default;

  // NotFound / InvalidArgument ("already exists") as appropriate.
  virtual Result<CollectionRecord> CreateCollection(const std::string& name, const std::string& spec_json) = 0;
  virtual Result<CollectionRecord> GetCollection(const std::string& name) const = 0;
  virtual Result<std::vector<CollectionRecord>> ListCollections() const = 0;
  // Removes the collection and every record of it.
  virtual Status DropCollection(const std::string& name) = 0;
  // Replaces the collection's spec with `spec_json` if it is still `expected`
  // (as GetCollection read it), atomically; Conflict, nothing changed, if
  // another writer changed it since: read it again and retry.
  virtual Status UpdateSpec(const std::string& name, const std::string& expected, const std::string& spec_json) = 0;

  // Collection aliases (alias -> collection name). DropCollection removes
  // the ones naming the dropped collection in the same write, and
  // CreateCollection refuses (InvalidArgument) a name an alias has.
  virtual Result<std::map<std::string, std::string>> ListAliases() const = 0;
  // Replaces every alias with `aliases` if they are still `expected` (as
  // ListAliases read them), atomically; Conflict, nothing changed, otherwise.
  // In the same write it checks that every alias names an existing
  // collection (NotFound) and that none is a collection's own name
  // (InvalidArgument), so no concurrent drop or create can break either.
  virtual Status UpdateAliases(const std::map<std::string, std::string>& expected,
                               const std::map<std::string, std::string>& aliases) = 0;

  // Inserts or replaces documents, atomically: all or nothing. Ids must be
  // non-empty and distinct within the batch; vectors are stored as given
  // (their dims are the collection's to check).
  virtual Result<WriteResult> Upsert(const std::string& collection, const std::vector<StoredDocument>& docs,
                                     bool sync) = 0;
  // Upsert on a condition: each document's id must be stored now under the
  // internal id at the same place in `expected` (what InternalId read), so a
  // read-modify-write lands only if no other write came between; Conflict,
  // and nothing written, otherwise.
  virtual Result<WriteResult> UpsertIfUnchanged(const std::string& collection, const std::vector<StoredDocument>& docs,
                                                const std::vector<uint64_t>& expected, bool sync) = 0;
  // Deletes documents by external id, atomically; absent ids are counted, not errors.
  virtual Result<WriteResult> Delete(const std::string& collection, const std::vector<std::string>& ids,
                                     bool sync) = 0;

  // The internal id the document is stored under now; std::nullopt when absent.
  virtual Result<std::optional<uint64_t>> InternalId(const std::string& collection,
                                                     const std::string& external_id) const = 0;
  // std::nullopt when absent.
  virtual Result<std::optional<StoredDocument>> Get(const std::string& collection,
                                                    const std::string& external_id) const = 0;
  virtual Result<StoredDocument> GetByInternal(const std::string& collection, uint64_t internal_id,
                                               bool with_vectors) const = 0;
  // The documents with these internal ids, in order; std::nullopt for an id
  // not stored or outside `shard`. Reads the collection record once for the
  // whole list (search results, op-log replay).
  virtual Result<std::vector<std::optional<StoredDocument>>> GetManyByInternal(
      const std::string& collection, const std::vector<uint64_t>& internal_ids, bool with_vectors,
      const ShardFilter& shard = ShardFilter()) const = 0;

  // Up to `limit` documents (without vectors) in the order of their ids'
  // IdOrderKey (integers by number, then the rest by bytes), the first after
  // `after` ("": from the start), read from one snapshot.
  // `next_after` is the `after` of the next page, empty on the last page.
  virtual Result<DocumentPage> ListDocuments(const std::string& collection, const std::string& after,
                                             size_t limit) const = 0;

  // Every live document of `shard` with its vectors: each one committed
  // before the call, perhaps some committed during it (no snapshot need be
  // held throughout: a reader applies the log after its cursor again). In
  // internal-id order, but PostgreSQL reads a range-placed shard by shard key.
  virtual Status ScanVectors(const std::string& collection,
                             const std::function<void(uint64_t internal, const float* hs, size_t dim_hs,
                                                      const float* rw, size_t dim_rw,
                                                      const std::string& metadata_json)>& fn,
                             const ShardFilter& shard = ShardFilter()) const = 0;
  // (internal id, metadata JSON) of every live document of `shard`, as ScanVectors reads them.
  virtual Status ScanMetadata(const std::string& collection,
                              const std::function<void(uint64_t internal, const std::string& metadata_json)>& fn,
                              const ShardFilter& shard = ShardFilter()) const = 0;
  // The first `limit` change-log entries with seq > after, in order (fewer:
  // the log ends there). A reader far behind reads the log in such pages, so
  // it holds one page of entries at a time, not its whole backlog.
  virtual Status ReadOps(const std::string& collection, uint64_t after, size_t limit,
                         const std::function<void(const OpRecord&)>& fn) const = 0;
  // Every change-log entry with seq > after, in order.
  Status ReadOps(const std::string& collection, uint64_t after, const std::function<void(const OpRecord&)>& fn) const {
    return ReadOps(collection, after, SIZE_MAX, fn);
  }
  // ReadOps as the synchronous standby holds the log, for a replica to
  // follow while no primary answers: a prefix of the log (the standby
  // replays the primary's), perhaps shorter than what a replica read from
  // the old primary, never an entry the old primary alone had. NotSupported
  // where no such server can be named (the default; a single RocksDB
  // process; PostgreSQL without patroni=).
  virtual Status ReadOpsFromStandby(const std::string& collection, uint64_t after, size_t limit,
                                    const std::function<void(const OpRecord&)>& fn) const;
  Status ReadOpsFromStandby(const std::string& collection, uint64_t after,
                            const std::function<void(const OpRecord&)>& fn) const {
    return ReadOpsFromStandby(collection, after, SIZE_MAX, fn);
  }
  // Drops change-log entries with seq <= upto: after an index snapshot covers
  // them (a store only this process writes), or below a shared store's
  // retention window (a reader whose cursor is older then rebuilds).
  virtual Status TrimOps(const std::string& collection, uint64_t upto) = 0;

  // A consistent copy of the whole database in folder `dir` (must not
  // exist); NotSupported where the engine has its own backups (PostgreSQL).
  virtual Status Checkpoint(const std::string& dir) const = 0;

  // Where the store is: the folder, or the connection URI without its password.
  virtual std::string location() const = 0;
  // Whether other processes write to it too: then a document an index still
  // holds may be gone from the store already (the index follows the log).
  virtual bool shared() const { return false; }

  // Blocks until another process may have committed a change, or until
  // `timeout_ms` passes; true when woken (the caller then reads the change
  // log). Default: no other writers, so it sleeps out the timeout.
  virtual bool WaitForChange(int timeout_ms) const;

  // The collection's record and the identity (OpRecord::entry_id) of its
  // newest change-log entry, record.last_op ("" when none or unknown), read
  // in one snapshot wherever every acknowledged write is (PostgreSQL: the
  // primary or, while none answers, the synchronous standby). Default: the
  // record alone (a store only this process writes needs no identities).
  struct LogHead {
    CollectionRecord record;
    std::string entry_id;
  };
  virtual Result<LogHead> GetLogHead(const std::string& collection) const;
};

// Whether `location` names a PostgreSQL database ("postgresql://..." or
// "postgres://...") rather than a folder: what Store::Open goes by.
bool IsPostgresLocation(const std::string& location);

// The checks both stores make before writing, with the same messages.
// A collection name: 1-128 characters, no '/'; a spec: a JSON object.
Status CheckNewCollection(const std::string& name, const std::string& spec_json);
// An id: non-empty, at most 512 bytes, UTF-8 without NUL (a text column
// holds it); `where` names it in the message ("document 3").
Status CheckId(const std::string& id, const std::string& where);
// A batch's ids: each CheckId's, and distinct.
Status CheckBatchIds(const std::vector<StoredDocument>& docs);
// A delete's ids: each CheckId's (repeats are allowed: deleted once).
Status CheckDeleteIds(const std::vector<std::string>& ids);
// A document's {"id", "text", "metadata"} record; InvalidArgument for metadata that is not JSON.
Result<std::string> DocumentRecord(const StoredDocument& d);
// A {"id", "text", "metadata"} record back into *d (vectors untouched); Corruption when damaged.
Status ParseDocumentRecord(const std::string& record, StoredDocument* d);

}  // namespace moeedb
