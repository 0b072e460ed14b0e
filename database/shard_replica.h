// ShardReplica: this node's copy of one shard of a collection: the dense
// DualIndex (HS and RW) and, when enabled, the LexicalIndex (BM25) over the
// documents of that shard (store.h's ShardOfId), with their metadata for
// filters. A collection of one shard has one replica holding everything.
//
// Derived from the store, the source of truth: each index records the
// change-log sequence number it reflects (the dense one in its snapshot, the
// lexical one at its last commit); Open() catches each up from the log, or
// rebuilds the shard from the store, so after a kill -9 every acknowledged
// document is searchable and nothing else is. Every change-log entry is
// applied (it numbers the replica's progress), keeping only its documents
// of this shard.
// Thread-safe. One change at a time (follow_mu_: a catch-up, this node's own
// write, a rebuild, a snapshot); each reads the store without holding the
// searches' lock (mu_) and takes it exclusively only to put a batch of
// entries, or a whole rebuilt index, in place: searches go on while a
// replica replays a backlog or rebuilds. A replica whose content cannot be
// trusted until a rebuild completes (the log went back under it, a change
// failed halfway) answers Unavailable meanwhile (building()).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <mutex>
#include <shared_mutex>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "database/shard_query.h"
#include "index/dual_index.h"
#include "index/lexical_index.h"
#include "index/payload_index.h"
#include "index/search_batcher.h"
#include "index/standardizer.h"
#include "storage/store.h"

namespace moeedb {

// What a collection's record says about its indexes and shards.
struct CollectionLayout {
  std::string name;
  uint32_t store_id = 0;
  size_t dim_hs = 0, dim_rw = 0;
  DualIndexSpec index;
  Standardizer std_hs, std_rw;
  LexicalSpec lexical;  // enabled false: no lexical index
  float default_alpha = 1.0f;
  std::string info_json = "{}";
  uint32_t shards = 1, replicas = 1;
  // How document keys split among the shards, whatever their count: kRange
  // for collections created since it existed (the spec's "shard_layout"),
  // kModulo for the older ones, for life.
  ShardLayout shard_layout = ShardLayout::kModulo;
  // Recorded with shards or replicas (a cluster places it), even once
  // resharded to one shard of one replica.
  bool placed = false;
  // Split anew since it was created (folders of the old name "<dir>.shard-K"
  // may then hold another split's shard: they are not taken over).
  bool resharded = false;
  PayloadIndexFields payload_indexes;  // the payload keys indexed (index/payload_index.h)
  // Corruption when the record's spec is damaged.
  static Result<CollectionLayout> FromRecord(const CollectionRecord& rec);
};

class ShardReplica {
 public:
  // Called, on the opening thread, with the change-log entry a replica being
  // opened will read the log from, as soon as that is known: its snapshot's
  // entry, or the head its build starts at. The log must keep it (and every
  // later entry) until the replica is open, or the replica rebuilds.
  using LogFloorListener = std::function<void(uint64_t seq)>;
  // Opens shard `shard` of the collection in folder `dir` (its lexical index
  // in dir + ".lexical"): snapshot and log replay, or a rebuild. `on_floor`,
  // if set, hears where it reads the log from (a rebuild may call it again).
  static Result<std::unique_ptr<ShardReplica>> Open(Store* store, const CollectionLayout& layout, uint32_t shard,
                                                    const std::string& dir, const LogFloorListener& on_floor = {});
  ~ShardReplica();
  // The folders of shard `shard` of `shards` under a collection's index folder.
  static std::string Dir(const std::string& collection_dir, uint32_t shard, uint32_t shards);
  // Removes a replica's folders (`dir` and its lexical one); nothing may have them open.
  static void RemoveFolders(const std::string& dir);

  // This node's own committed write `res` (docs: the upserted documents,
  // nullptr for a delete), with the entries before it if the replica lags.
  // A store that cannot be read leaves the replica behind (the follower
  // catches it up) rather than failing a committed write.
  Status FollowOwnWrite(const WriteResult& res, const std::vector<StoredDocument>* docs);
  // Applies the change-log entries above applied_seq(); how many.
  Result<size_t> CatchUp();

  // This shard's part of `q` (shard_query.h): catches up to q.min_seq first.
  Result<ShardAnswer> Answer(const ShardQuery& q);
  // This shard's BM25 statistics of q.spec.query's terms (empty without a
  // lexical index): catches up to q.min_seq first.
  Result<LexicalStats> Stats(const ShardQuery& q);
  // Catches up until applied_seq() >= seq; Unavailable if the log does not reach it.
  Status CatchUpTo(uint64_t seq);
  // Over a shared store: reads the change log first when this replica last
  // read it more than `max_staleness_ms` ago (0: no bound); Unavailable when
  // it cannot, so no answer is staler than the bound.
  Status WithinStaleness(uint64_t max_staleness_ms);
  // Milliseconds since this replica last read the change log to its end
  // (0 over a store only this process writes).
  uint64_t log_read_age_ms() const;

  // Indexes the payload keys of `fields` (and no others) from the metadata
  // the replica holds, built aside and swapped in; searches go on meanwhile.
  Status SetPayloadIndexes(const PayloadIndexFields& fields);
  // Documents with a value at each indexed key ({} without payload indexes).
  std::map<std::string, uint64_t> PayloadIndexPoints() const;

  // Commits the lexical index and snapshots the dense one; the sequence
  // number both cover (the log may be trimmed to it).
  Result<uint64_t> Save();

  uint32_t shard() const { return shard_; }
  uint32_t shards() const { return filter_.count; }  // of the split this replica is a shard of
  const std::string& dir() const { return dir_; }
  size_t size() const;
  uint64_t applied_seq() const;
  std::vector<uint64_t> IndexedIds() const;
  std::vector<uint64_t> LexicalIds() const;
  size_t index_rebuilds() const;
  // Bytes the replica's indexes hold in memory (rows, ANN structures).
  size_t index_bytes() const;
  // Bytes the payload index holds.
  size_t payload_index_bytes() const;
  bool opened_from_snapshot() const { return from_snapshot_; }
  // The change-log entry the replica's snapshot on disk covers (0: none).
  uint64_t snapshot_seq() const { return snapshot_seq_; }
  // The documents the replica was built with from the store (opened or
  // rebuilt), while it has saved no snapshot since (0 once it has): what a
  // process killed now builds again.
  size_t built_unsaved() const { return built_unsaved_; }
  size_t replayed_ops() const { return replayed_ops_; }
  bool lexical_rebuilt() const { return lexical_rebuilt_; }
  // Times this replica found the change log gone back under it and rebuilt.
  size_t log_rewinds() const;
  // Times it found the log trimmed past its cursor and rebuilt.
  size_t log_trims() const { return log_trims_; }
  // Whether a rebuild is due or under way: the replica refuses searches
  // until it completes.
  bool building() const { return needs_rebuild_; }
  // Change-log entries a catch-up reads the documents of (one read of the
  // store) before it takes the searches' lock to apply them (bounded by
  // documents too).
  static constexpr size_t kReplayBatchEntries = 256;
  static constexpr size_t kReplayBatchDocuments = 2048;
  // Change-log entries a catch-up reads at a time: a replica far behind
  // holds one page of its backlog in memory, not all of it.
  static constexpr size_t kLogPageEntries = 4096;
  // Documents a build from the store adds to the index at a time.
  static constexpr size_t kBuildChunkDocuments = 16384;

 private:
  ShardReplica() = default;
  // CatchUp with follow_mu_ held.
  Result<size_t> CatchUpLocked();
  // CatchUpLocked from the store's synchronous standby (while no primary
  // answers), only where its log holds this replica's last entry.
  Result<size_t> CatchUpFromStandbyLocked();
  // Whether `ops` (a log read from this replica's cursor) begin with the
  // entry it applied last, under the same identity.
  bool HoldsLastApplied(const std::vector<OpRecord>& ops) const;
  // Reads the log a page at a time from this replica's cursor (from the
  // primary, or with `from_standby` the synchronous standby) and applies
  // it, checking on each page that it still begins with the entry applied
  // last: `*rewound` is set, with nothing applied from that page, when it
  // does not, and `*trimmed` too when the log now starts after that entry
  // (its retention window passed the cursor). Stops at the log's head as
  // read once a page came back full; follow_mu_ held.
  Result<size_t> FollowLog(bool from_standby, bool* rewound, bool* trimmed);
  // Applies ops[next..] in batches (their documents read in one read of the
  // store without the searches' lock, each batch applied under it), then,
  // given `read_at`, records the log as read to its end then; follow_mu_ held.
  Result<size_t> ApplyEntries(const std::vector<OpRecord>& ops, size_t next,
                              std::optional<std::chrono::steady_clock::time_point> read_at);
  // Applies entry `op` whose documents (in the store now) are `docs` (mu_ held exclusively).
  Status ApplyLoggedOp(const OpRecord& op, std::vector<std::optional<StoredDocument>> docs);
  Status ApplyChange(uint64_t seq, const std::vector<uint64_t>& gone, const std::vector<uint64_t>& ids,
                     const std::vector<const StoredDocument*>& docs);
  Status OpenLexical();
  // A payload index of `fields` over `metadata` (null when `fields` is empty).
  static Result<std::unique_ptr<PayloadIndex>> BuildPayload(const PayloadIndexFields& fields,
                                                            const std::unordered_map<uint64_t, std::string>& metadata);
  // A replica's indexes built from the store, aside, to be swapped in whole.
  struct Built {
    std::unique_ptr<DualIndex> index;
    std::unordered_map<uint64_t, std::string> metadata;
    std::unique_ptr<PayloadIndex> payload;  // of layout_.payload_indexes; null: none declared
    std::unique_ptr<LexicalIndex> lexical;  // in dir_ + ".lexical.new"; null: not built
    uint64_t seq = 0;                       // the log's head the build started from
    std::string entry;                      // that entry's identity
    std::chrono::steady_clock::time_point head_read_at;  // when that head was asked for
  };
  // The dense index and the metadata as of the log's head now and, with
  // `with_lexical`, the lexical index (in dir_ + ".lexical.new"); reads the
  // store without mu_.
  // `on_floor`, if set, hears the entry the build starts at (Built::seq) before it reads a document.
  Result<Built> BuildFromStore(bool with_lexical, const LogFloorListener& on_floor = {}) const;
  // "range" or "modulo": the layout that chose this shard's documents.
  const char* PlacementName() const;
  // Writes PlacementName() into the replica's folder (created if need be).
  Status RecordPlacement() const;
  // Puts `b` in place of what the replica holds (mu_ taken exclusively).
  Status Install(Built b);
  // BuildFromStore and Install, the lexical index too when it is open;
  // needs_rebuild_ stays set until both succeed (follow_mu_ held).
  Status Rebuild();
  // Indexes the stored texts of the documents `metadata` holds into
  // `lexical` (documents removed meanwhile from a shared store are skipped:
  // their entry removes them).
  Status FillLexical(LexicalIndex* lexical, const std::unordered_map<uint64_t, std::string>& metadata) const;
  // Counts and logs a change log found gone back below entry `seq`.
  void NoteRewind(uint64_t seq);
  // The identity of change-log entry `seq` ("" for 0 or an entry without one).
  Result<std::string> EntryAt(uint64_t seq) const;
  // A query's metadata filter over this replica's documents: `keep` tests
  // one (empty: no filter); `among`, when the payload index answers part of
  // the filter, holds every id it can keep (ascending). Lives for one query
  // (it holds the documents' parsed metadata).
  struct QueryFilter {
    std::function<bool(uint64_t)> keep;
    std::optional<std::vector<uint64_t>> among;
    std::unordered_map<uint64_t, nlohmann::json> parsed;
  };
  // Fills `out` with the filter of `q` (mu_ held shared).
  void FilterOf(const ShardQuery& q, QueryFilter* out) const;
  Result<std::vector<ShardCandidate>> Dense(const ShardQuery& q, const QueryFilter& filter) const;
  // The best k by BM25, each scored by LexicalIndex::Score (lexical_mu_ held).
  Result<std::vector<ShardCandidate>> BestLexical(const ShardQuery& q, size_t k,
                                                  const QueryFilter& filter) const;
  Result<std::vector<ShardCandidate>> Lexical(const ShardQuery& q, const QueryFilter& filter) const;
  Result<std::vector<ShardCandidate>> Hybrid(const ShardQuery& q, const QueryFilter& filter) const;

  Store* store_ = nullptr;
  CollectionLayout layout_;
  uint32_t shard_ = 0;
  ShardFilter filter_;
  std::string dir_;
  std::unique_ptr<DualIndex> index_;
  mutable SearchBatcher batcher_;  // concurrent exact searches share a pass over the rows
  std::unique_ptr<LexicalIndex> lexical_;
  mutable std::mutex lexical_mu_;  // Xapian objects are single-threaded
  std::atomic<bool> lexical_rebuilt_{false};  // atomics: read without mu_ (claims, /metrics)
  std::unordered_map<uint64_t, std::string> metadata_;  // internal id -> metadata JSON text
  std::unique_ptr<PayloadIndex> payload_;  // over metadata_; null: no payload index declared
  uint64_t applied_seq_ = 0;
  std::string applied_entry_;       // the identity of entry applied_seq_ ("" unknown)
  std::string applied_entry_next_;  // of the entry ApplyChange is applying
  std::atomic<size_t> log_rewinds_{0};  // times the log went back under this replica
  std::atomic<bool> needs_rebuild_{false};  // a rebuild is due or under way: nothing here is trusted until it ends
  std::atomic<size_t> log_trims_{0};
  std::atomic<uint64_t> snapshot_seq_{0};  // Save()'s, or the snapshot opened from
  std::atomic<size_t> built_unsaved_{0};
  std::chrono::steady_clock::time_point log_read_at_ = std::chrono::steady_clock::now();  // last read to the log's end
  bool from_snapshot_ = false;
  std::atomic<size_t> replayed_ops_{0};
  mutable std::shared_mutex mu_;  // searches share it; a change puts itself in place under it exclusively
  std::mutex follow_mu_;          // one change at a time (see the top)
};

}  // namespace moeedb
