// VectorCollection: one collection = the Store (source of truth) + this
// node's replicas of its shards (shard_replica.h: the dense DualIndex and the
// BM25 LexicalIndex of each). Vector-level and model-free: the embedding
// layer (the CLI, the server, the C API) computes the vectors.
//
// A collection created with S shards places each document in shard
// ShardOfId(id, S, layout) (store.h: ranges of the shard key). Writes go to the store first (the
// acknowledgement), then into the local replicas that hold the documents'
// shards. A search asks each shard once, the local replicas here and the
// others through ShardPeers (another node's replica, found by the cluster
// layer), and merges the answers into what one index would have answered
// (shard_query.h). On one node, or with no placement, every shard is local.
// Thread-safe. One open VectorCollection per collection at a time: the
// lexical indexes hold their database's write lock until the object goes.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "index/dual_index.h"
#include "index/fusion.h"
#include "index/lexical_index.h"
#include "index/metadata_filter.h"
#include "database/spec/search_spec.h"
#include "database/vector_schema.h"
#include "index/standardizer.h"
#include "database/shard_query.h"
#include "database/shard_replica.h"
#include "storage/store.h"

namespace moeedb {

struct CollectionOptions {
  size_t dim_hs = 0, dim_rw = 0;
  DualIndexSpec index;                 // dims are filled in from dim_hs/dim_rw
  std::string std_hs_json, std_rw_json;  // standardizer statistics; empty: identity (L2 only)
  std::string info_json = "{}";        // recorded as is: model fingerprint, routing, prompt, ...
  float default_alpha = 1.0f;
  LexicalSpec lexical{true};           // BM25 over the texts (hybrid and lexical search)
  uint32_t shards = 1;                 // documents split by ShardOfId(id, shards, kRange)
  uint32_t replicas = 1;               // copies of each shard a cluster keeps
  PayloadIndexFields payload_indexes;  // payload keys indexed from the start (Database::SetPayloadIndex changes them)
};

// Where a placed collection's shards are, as this node is to hold them.
struct PlacedShards {
  uint32_t shards = 1;        // the split searches use now
  std::vector<ShardRef> held;  // this node's replicas: of that split, or of one being built or retired
};

// The other nodes' replicas of sharded collections, as the cluster layer
// finds them (cluster/); a single node has none.
class ShardPeers {
 public:
  virtual ~ShardPeers() = default;
  // The split searches use and the replicas this node is to hold;
  // std::nullopt: every shard of the collection's recorded split.
  virtual std::optional<PlacedShards> HeldShards(const CollectionLayout& layout) = 0;
  // Asks the cluster to split the collection into `shards` (the new split's
  // replicas are built, then searches switch to it): NotSupported where the
  // peers cannot place a collection.
  virtual Status Reshard(const CollectionLayout& layout, uint32_t shards) {
    return Status::NotSupported("this node cannot reshard a placed collection");
  }
  // The lowest change-log entry a live replica of the collection on another
  // node has applied, or one being built there reads from, as the cluster
  // holds it (its claims); std::nullopt when none is known, 0 when the
  // cluster cannot be read. The log's retention keeps that entry and the ones after.
  virtual std::optional<uint64_t> LowestApplied(const CollectionLayout& layout) { return std::nullopt; }
  // A replica of `shard` this node is opening reads the change log from entry
  // `seq` (its snapshot's, or its build's start): the peers are told, so that
  // their log retention keeps that entry until the replica is open (a claim
  // "building" at `seq`). Called on the opening thread; best effort.
  virtual void HoldLogFrom(const CollectionLayout& layout, ShardRef shard, uint64_t seq) {}
  // The split searches of a placed collection use, as the cluster holds it
  // now (read afresh, not as this node last acted on it); std::nullopt if unknown.
  virtual std::optional<uint32_t> SplitInUse(const CollectionLayout& layout) { return std::nullopt; }
  // Each of `shards`' (of the split q.shards) BM25 statistics of
  // q.spec.query from a live replica elsewhere; a shard no replica answered
  // for is left out.
  virtual std::vector<std::pair<uint32_t, LexicalStats>> Stats(const ShardQuery& q,
                                                               const std::vector<uint32_t>& shards) = 0;
  // Each of `shards`' answer to q from a live replica elsewhere; a shard no
  // replica answered for is left out.
  virtual std::vector<ShardAnswer> Search(const ShardQuery& q, const std::vector<uint32_t>& shards) = 0;
  // Waits (up to `timeout`) until every shard of a collection just created
  // has a ready replica, so that its first searches find them all.
  virtual void AwaitReplicas(const CollectionLayout& layout, std::chrono::milliseconds timeout) {}
  // The cluster as its coordination service holds it (nodes, placements,
  // replicas), as JSON text: what `moeedb cluster status` prints.
  virtual Result<std::string> ClusterStatus() { return Status::NotSupported("no cluster status"); }
};

// What a search reports beside its hits.
struct SearchInfo {
  std::vector<uint32_t> missing_shards;  // shards no replica answered for (a partial search)
};

struct SearchHit {
  std::string id;
  float score = 0;                          // what the ranking used
  float score_hs = 0, score_rw = 0;         // exact cosines (0 in lexical mode without query vectors)
  float score_lex = 0;                      // BM25 (lexical and hybrid modes)
  // Each signal's share of `score` (they sum to it, up to rounding): in fused
  // mode score_hs and alpha * score_rw; in hybrid mode what fusion gave each.
  float part_hs = 0, part_rw = 0, part_lex = 0;
  std::string text, metadata_json;
};

class VectorCollection {
 public:
  // `index_root`: the local folder under which the derived indexes live
  // (index_root/indexes/ID-NAME); "" for the store's own folder (a RocksStore).
  // `peers`: the cluster's other nodes (nullptr: this node holds every shard).
  static Result<std::unique_ptr<VectorCollection>> Create(Store* store, const std::string& name,
                                                          const CollectionOptions& options,
                                                          const std::string& index_root = "",
                                                          ShardPeers* peers = nullptr);
  // Opens the replicas of the shards this node holds: each loads its
  // snapshot and replays, or rebuilds from the store.
  static Result<std::unique_ptr<VectorCollection>> Open(Store* store, const std::string& name,
                                                        const std::string& index_root = "",
                                                        ShardPeers* peers = nullptr);
  // The info a collection recorded (CollectionOptions::info_json), read from
  // its store record without opening its index; Corruption if the spec is damaged.
  static Result<std::string> RecordedInfo(const CollectionRecord& record);
  // Removes the collection from the store and its derived indexes from disk.
  // The caller must have closed every VectorCollection of it.
  static Status Drop(Store* store, const std::string& name, const std::string& index_root = "");
  // Removes a collection's derived indexes (the folders of every shard of
  // every split under index_dir) from disk; nothing may have them open.
  static void RemoveIndexFolders(const std::string& index_dir);
  // Closes the replicas; removes their folders too once RemoveFoldersWhenClosed was called.
  ~VectorCollection();
  // For a collection dropped (here or on another node) while requests may
  // still hold it: its folders go when the last holder lets it go.
  void RemoveFoldersWhenClosed() { remove_folders_ = true; }

  // All or nothing: every document is validated first (id, UTF-8 text,
  // metadata object, vector dims, finite values); any error stores nothing.
  Result<WriteResult> Upsert(const std::vector<StoredDocument>& docs, bool sync = true);
  // Upsert if each document's id is still stored under the internal id
  // beside it in `expected` (0: absent), as read by InternalId; Conflict,
  // nothing written, otherwise (document_update.h retries).
  Result<WriteResult> UpsertIfUnchanged(const std::vector<StoredDocument>& docs, const std::vector<uint64_t>& expected,
                                        bool sync = true);
  Result<WriteResult> Delete(const std::vector<std::string>& ids, bool sync = true);
  Result<std::optional<StoredDocument>> Get(const std::string& id) const;
  // The internal id `id` is stored under now, and the document stored under
  // an internal id (NotFound once replaced or deleted): a consistent read.
  Result<std::optional<uint64_t>> InternalId(const std::string& id) const;
  Result<StoredDocument> GetByInternal(uint64_t internal) const;
  // A page of documents in id order (Store::ListDocuments).
  Result<DocumentPage> List(const std::string& after, size_t limit) const;
  // Dense modes need hs and rw; lexical needs options.query (the vectors,
  // when given, fill in score_hs/score_rw); hybrid needs all three.
  // Unavailable when a shard has no live replica, unless options.partial
  // (then `info` lists the missing shards).
  Result<std::vector<SearchHit>> Search(const float* hs, const float* rw, const SearchSpec& options,
                                        SearchInfo* info = nullptr) const;
  // This node's answer for its replicas of `shards` of the split q.shards
  // (another node's search). NotFound for a shard held here no more (or a
  // collection recreated since).
  Result<std::vector<ShardAnswer>> AnswerShards(const ShardQuery& q, const std::vector<uint32_t>& shards) const;
  // The BM25 statistics of q's terms in this node's replicas of `shards`.
  Result<std::vector<std::pair<uint32_t, LexicalStats>>> ShardStats(const ShardQuery& q,
                                                                    const std::vector<uint32_t>& shards) const;

  // The most a search's answer may lag the change log (milliseconds since a
  // replica last read it; 0: no bound): ShardReplica::WithinStaleness.
  void SetMaxStaleness(uint64_t ms) { max_staleness_ms_ = ms; }
  // Each local replica past the bound reads the change log now (or finds
  // its head unchanged): what a node does before it claims its replicas ready.
  void RefreshStaleReplicas();
  uint64_t max_staleness_ms() const { return max_staleness_ms_; }
  // Coordinating a search with peers: a peer's replica answers only once it
  // has applied at least (this node's newest applied entry - `entries`); one
  // further behind catches up first or answers Unavailable, and the peers
  // ask another replica (ShardQuery::min_seq).
  void SetMaxLag(uint64_t entries) { max_lag_entries_ = entries; }

  // Indexes the payload keys of `fields` (and no others) in every local
  // replica and in those opened later: what the collection's record
  // declares (Database::SetPayloadIndex records it, then calls this).
  Status SetPayloadIndexes(const PayloadIndexFields& fields);
  // The payload keys indexed, and how many documents hold a value at each
  // (over the local replicas).
  PayloadIndexFields payload_indexes() const;
  std::map<std::string, uint64_t> PayloadIndexPoints() const;

  // Commit the lexical indexes, snapshot the dense ones, trim the op log they cover.
  Status SaveIndex();
  // SaveIndex when one is due: `every_entries` change-log entries applied
  // since the last snapshot (0: never by count), or a replica built from the
  // store holding at least that many documents with no snapshot since, or
  // `every` elapsed since the last with at least one entry applied (0: never
  // by time); whether it saved. A process killed then replays at most about
  // that much of the log when it opens the collection again.
  Result<bool> SaveIndexIfDue(uint64_t every_entries, std::chrono::milliseconds every);
  // Opens the replicas of the shards this node is to hold now (peers'
  // HeldShards) and closes, then removes, the ones it holds no more;
  // searches use the split the peers name once its replicas here are open.
  Status SyncShards();
  // Replicas SyncShards opens side by side.
  static constexpr size_t kOpenReplicasAtOnce = 4;
  // Splits the collection into `shards` online. Placed in a cluster: asks
  // the peers (the cluster builds the new split, then switches to it).
  // Otherwise here: builds every shard of the new split from the store
  // beside the old one (searches and writes go on), records the new count
  // in the collection's record, swaps, and removes the old split's folders.
  // InvalidArgument for 0 or more than kMaxShards (shard_query.h).
  Status Reshard(uint32_t shards);
  // Records `shards` as the split of collection `name` (of store id
  // `store_id`) in its store record: what a node opening it uses where no
  // placement names a split. NotFound if the collection was dropped.
  static Status RecordSplit(Store* store, const std::string& name, uint32_t store_id, uint32_t shards);

  const std::string& name() const { return name_; }
  // The collection's live documents.
  size_t size() const;
  size_t dim_hs() const { return layout_.dim_hs; }
  size_t dim_rw() const { return layout_.dim_rw; }
  float default_alpha() const { return layout_.default_alpha; }
  const std::string& info_json() const { return layout_.info_json; }
  const CollectionLayout& layout() const { return layout_; }
  // Whether the peers place this collection's replicas (as of the last SyncShards).
  bool placed() const { return placed_; }
  // The split searches use now (the record's, until a reshard).
  uint32_t shards() const { return shards_; }
  // The shards of that split this node holds a replica of, ascending.
  std::vector<uint32_t> HeldShards() const;
  // Every replica this node holds, of any split, ascending.
  std::vector<ShardRef> HeldReplicas() const;
  // What a held replica holds: its document count, applied entry, index
  // bytes, and the times it found the change log gone back and rebuilt.
  struct ReplicaState {
    uint32_t shard = 0;
    uint32_t shards = 1;  // of this split
    size_t documents = 0;
    uint64_t applied_seq = 0;
    size_t index_bytes = 0;
    size_t payload_index_bytes = 0;
    size_t log_rewinds = 0;
    uint64_t log_read_age_ms = 0;  // since it last read the change log to its end
    bool building = false;         // being opened, or a rebuild is due or under way: it refuses searches
  };
  std::vector<ReplicaState> ReplicaStates() const;
  // What each local replica holds, by internal id (sorted): its dense and its
  // lexical index (empty without one), for comparing replicas of a shard
  // across nodes (the ids are the store's, the same on every node).
  struct ReplicaContents {
    uint32_t shard = 0;
    uint32_t shards = 1;
    uint64_t applied_seq = 0;
    std::vector<uint64_t> dense, lexical;
  };
  std::vector<ReplicaContents> Contents() const;
  // How clients' own vectors map onto the stored ones (client_vectors.h).
  const VectorSchema& schema() const { return schema_; }
  // The statistics the index standardizes each half with.
  const Standardizer& standardizer_hs() const { return layout_.std_hs; }
  const Standardizer& standardizer_rw() const { return layout_.std_rw; }
  std::string spec_json() const { return spec_json_; }
  // The store's id of the collection (a collection dropped and created again
  // under the same name has a new one) and the local folder of its indexes.
  uint32_t store_id() const { return layout_.store_id; }
  const std::string& index_dir() const { return index_dir_; }
  // Internal ids in the local replicas' dense indexes (sorted): for consistency checks.
  std::vector<uint64_t> IndexedIds() const;
  bool has_lexical() const { return layout_.lexical.enabled; }
  const LexicalSpec& lexical_spec() const { return layout_.lexical; }
  // Internal ids in the local replicas' lexical indexes (sorted; empty without them).
  std::vector<uint64_t> LexicalIds() const;
  // Whether any local replica rebuilt its lexical index / every one opened
  // from its snapshot; the entries they replayed and the dense rebuilds.
  bool lexical_rebuilt() const;
  bool opened_from_snapshot() const;
  size_t replayed_ops() const;
  size_t index_rebuilds() const;
  // Times a local replica found the change log gone back under it and rebuilt from the store.
  size_t log_rewinds() const;
  // Times a local replica found the change log trimmed past its cursor and rebuilt.
  size_t log_trims() const;
  // The newest change-log entry every local replica includes.
  uint64_t applied_seq() const;
  // The oldest change-log entry a local replica still reads: the smallest of
  // the open replicas' applied entries and of the entries the replicas being
  // opened read the log from; std::nullopt when there are neither. Log
  // retention keeps it and every later entry.
  std::optional<uint64_t> LogFloor() const;
  // Applies the store's change-log entries above applied_seq(): the writes
  // other nodes made to a shared (PostgreSQL) store. Idempotent; returns how
  // many entries it applied.
  Result<size_t> CatchUp();

 private:
  VectorCollection() = default;
  static std::string IndexDir(const Store& store, const std::string& index_root, const CollectionRecord& rec);
  // Opens (loads or builds) this node's replica `ref` in its folder; from when
  // it knows where it reads the log from, that entry is one of LogFloor()'s
  // (and the peers are told) until ForgetOpening(ref).
  Result<std::unique_ptr<ShardReplica>> OpenReplica(ShardRef ref) const;
  void ForgetOpening(ShardRef ref) const;
  // Every local replica, under a shared lock of replicas_mu_.
  std::vector<ShardReplica*> Replicas() const;
  // The ids every local replica gives by `ids`, together, sorted.
  std::vector<uint64_t> SortedIds(std::vector<uint64_t> (ShardReplica::*ids)() const) const;
  // Search over split `split` (0: the one in use as it begins); `*used`: the split asked.
  Result<std::vector<SearchHit>> SearchSplit(const float* hs, const float* rw, const SearchSpec& options,
                                             SearchInfo* info, uint32_t split, uint32_t* used) const;
  Result<std::vector<SearchHit>> ToSearchHits(const std::vector<FusedCandidate>& hits) const;
  Result<WriteResult> Write(const std::vector<StoredDocument>& docs, const std::vector<uint64_t>* expected, bool sync);
  // This node's committed write `res` into every local replica, after this
  // node's writes numbered below it that committed too (their threads are
  // applying them): concurrent writes commit in any order (the store groups
  // them), and a replica given an entry out of order reads the ones before
  // it back from the log (replica FollowOwnWrite), which this mostly spares.
  Status ApplyOwnWrite(const WriteResult& res, const std::vector<StoredDocument>* docs);
  // write_mu_ shared, through write_gate_.
  std::shared_lock<std::shared_mutex> SharedWriteLock();

  Store* store_ = nullptr;
  ShardPeers* peers_ = nullptr;
  std::string name_, index_dir_, spec_json_;
  CollectionLayout layout_;
  VectorSchema schema_;
  // This node's writes hold it shared from the store to the replicas, side by
  // side (the store commits them in groups); a reshard's swap holds it alone.
  std::shared_mutex write_mu_;
  // Taken for a moment before write_mu_ is: a reshard holds it while it
  // waits for write_mu_, so writes that keep overlapping cannot starve it
  // (glibc's rwlock lets new readers in while a writer waits).
  std::mutex write_gate_;
  std::mutex own_mu_;
  std::condition_variable own_cv_;
  std::multiset<uint64_t> own_applying_;  // own_mu_: entries of this node's writes not yet applied
  std::mutex sync_mu_;   // one SyncShards, Reshard or SetPayloadIndexes at a time
  mutable std::mutex payload_mu_;
  PayloadIndexFields payload_indexes_;  // what replicas index (layout_'s, until changed); payload_mu_
  mutable std::shared_mutex replicas_mu_;
  std::map<ShardRef, std::unique_ptr<ShardReplica>> replicas_;  // replicas_mu_
  mutable std::mutex opening_mu_;
  // Replicas being opened -> the change-log entry each will read from (set
  // once it is known; forgotten once the replica is in replicas_ or failed).
  mutable std::map<ShardRef, uint64_t> opening_floors_;  // opening_mu_
  std::atomic<bool> placed_{false};
  std::atomic<bool> resharding_{false};  // a local Reshard is building the new split: no log trim
  std::atomic<uint32_t> shards_{1};  // the split searches use; changed under replicas_mu_
  std::atomic<uint64_t> max_staleness_ms_{0};
  std::atomic<uint64_t> max_lag_entries_{UINT64_MAX};  // no bound until set
  std::atomic<bool> remove_folders_{false};
  // SaveIndexIfDue's: when the last snapshot was taken (this process's
  // first call when it took none).
  std::mutex snapshot_mu_;
  std::optional<std::chrono::steady_clock::time_point> snapshot_at_;
};

}  // namespace moeedb
