// Database: a folder of collections. It owns the Store (RocksDB, the source
// of truth), every collection opened so far (its dense and lexical indexes)
// and the embedding setups the collections were built with: each collection
// records its model folder, routing, prompt and poolings, and is embedded
// with exactly that setup, loaded on first use and shared by the collections
// that recorded the same. The CLI, the HTTP server and the C API are thin
// adapters over it; none opens or creates a collection by itself.
//
// Thread-safe: the collection and setup tables take a lock; collections are
// thread-safe themselves (vector_collection.h).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "database/client_vectors.h"
#include "database/embedding_setup.h"
#include "database/payload_groups.h"
#include "database/vector_collection.h"
#include "storage/store.h"

namespace moeedb {

struct UpsertCondition;

// Whose texts an embedding carries: documents follow the caller's length
// policy; a query may always be truncated.
enum class EmbedPurpose { kDocuments, kQuery };
using EmbedFunction =
    std::function<Result<std::vector<Embedding>>(const EmbeddingSetup&, const std::vector<std::string>&, EmbedPurpose)>;

// The default bound on a search's staleness over a shared store: ten
// follower periods. A replica that has not read the change log for longer
// reads it first (during a failover from the synchronous standby), or
// answers 503 and claims "stale" (docs/cluster.md, "Staleness and read
// consistency").
inline constexpr uint64_t kDefaultMaxStalenessMs = 2000;
// A node's periodic index snapshots (SaveIndexesIfDue): after this many
// change-log entries applied since the last one, or this many seconds with
// any applied; what a kill -9 leaves to replay.
inline constexpr uint64_t kDefaultSnapshotEntries = 20000;
inline constexpr uint64_t kDefaultSnapshotSeconds = 300;
// The change-log entries kept per collection over a shared store (TrimLogs):
// at ~47 entries a second (12,000 documents/s in batches of 256) about six
// hours of writes, the longest a node may be down and still replay.
inline constexpr uint64_t kDefaultLogRetentionEntries = 1000000;
// How many change-log entries a peer's replica may be behind this node's own
// replicas of a collection and still answer a search this node coordinates
// (it catches up first, or answers 503 and another replica is asked).
inline constexpr uint64_t kDefaultMaxLagEntries = 100;

struct DatabaseOptions {
  // How this process computes (dtype, quant, device, threads, workers, batch
  // tokens, SSMoE cache): used for every setup loaded. Its recorded fields
  // (model folder, routing, prompt, poolings) are ignored: each collection's own count.
  EmbeddingSpec compute;
  // A model folder to use instead of every collection's recorded one (the
  // CLI's --model); the collection's recorded weights must match it.
  std::string model_override;
  // Embeds the texts of upserts and searches; empty: EmbeddingSetup::Embed.
  EmbedFunction embed;
  // Open: NotFound unless the folder already holds a database.
  bool must_exist = false;
  // The local folder of the derived indexes; "" for the database's own
  // folder. A PostgreSQL store needs one (the CLI's --index-dir).
  std::string index_dir;
  // The cluster's other nodes, which hold the shards this one does not
  // (must outlive the database); nullptr: this node holds every shard.
  ShardPeers* peers = nullptr;
  // Over a shared store: the most a search may lag the change log, in
  // milliseconds since a replica last read it (it reads it first, or the
  // search is Unavailable); 0: no bound.
  uint64_t max_staleness_ms = kDefaultMaxStalenessMs;
  // Coordinating a sharded search: kDefaultMaxLagEntries' bound.
  uint64_t max_lag_entries = kDefaultMaxLagEntries;
};

class Database {
 public:
  // Opens the database at `location` (a folder, created unless
  // options.must_exist, or a PostgreSQL URI: storage/store.h).
  static Result<std::unique_ptr<Database>> Open(const std::string& location, DatabaseOptions options);
  // Snapshots the indexes of every open collection.
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Every collection, in name order.
  Result<std::vector<CollectionRecord>> ListCollections() const;
  // The collection's record (its document count and recorded spec) without
  // opening its indexes; NotFound when it does not exist.
  Result<CollectionRecord> GetCollection(const std::string& name) const;
  // A stored document with its vectors, read without opening the
  // collection's indexes; std::nullopt when absent, NotFound without the collection.
  Result<std::optional<StoredDocument>> GetDocument(const std::string& collection, const std::string& id) const;
  // A consistent on-disk copy of the whole database in `dir` (must not
  // exist); the copy rebuilds its indexes on first open.
  Status Checkpoint(const std::string& dir) const;
  // The collection, opened on first use and kept open; NotFound when it does
  // not exist; InvalidArgument when its recorded setup cannot be loaded as
  // recorded (another model under the overriding folder). The caller's
  // reference keeps it alive, even once it is dropped and closed here.
  Result<std::shared_ptr<VectorCollection>> OpenCollection(const std::string& name);
  // The options of a new collection embedded with `setup`: its dims,
  // calibration statistics (computed once per setup), recorded info and the
  // model's alpha; index kinds and lexical settings at their defaults, for
  // the caller to change before CreateCollection.
  Result<CollectionOptions> NewCollectionOptions(const EmbeddingSetup& setup);
  // Creates `name` and keeps it open; InvalidArgument when it already exists.
  Result<std::shared_ptr<VectorCollection>> CreateCollection(const std::string& name, const CollectionOptions& options);
  // Closes `name` and removes it with its indexes; NotFound when it does not exist.
  Status DropCollection(const std::string& name);

  // Collection aliases (Qdrant's): another name a collection answers to.
  struct AliasChange {
    enum class Kind { kCreate, kDelete, kRename };
    Kind kind = Kind::kCreate;
    std::string alias;   // create, delete: the alias; rename: its old name
    std::string target;  // create: the collection; rename: the new name
  };
  // Applies `changes` in order as one write, all or nothing (a switch is
  // delete + create in one call): create points an alias at an existing
  // collection (replacing where it pointed), delete removes one (absent:
  // nothing), rename moves one (NotFound when absent). InvalidArgument for
  // an alias spelled as no collection could be, or one a collection has.
  Status ChangeAliases(const std::vector<AliasChange>& changes);
  // alias -> collection.
  Result<std::map<std::string, std::string>> ListAliases() const;
  // The collection `name` denotes: itself when a collection has that name,
  // else the alias's collection, else `name` (its use reports NotFound);
  // the store's error when it cannot be read.
  Result<std::string> ResolveName(const std::string& name) const;

  // Declares (a kind) or removes (nullopt) the payload index on `key` of
  // collection `name` (index/payload_index.h): recorded in its spec, which
  // every node's replicas follow, and built here before it returns. Answers
  // are the same either way; an index makes selective filters fast.
  // InvalidArgument for a malformed key or past kMaxPayloadIndexes.
  Status SetPayloadIndex(const std::string& name, const std::string& key, std::optional<PayloadFieldKind> kind);
  // Splits collection `name` into `shards` online (VectorCollection::Reshard):
  // here, it returns once searches use the new split; in a cluster, once the
  // request is placed (the cluster's status shows the new split being built,
  // then in use). Searches stay complete and writes go on throughout.
  Status Reshard(const std::string& name, uint32_t shards);

  // The setup for `config`'s recorded fields (model folder, routing, prompt,
  // poolings; empty ones resolved from the model folder) with this
  // database's compute options: loaded once, shared when equal.
  Result<const EmbeddingSetup*> LoadSetup(const EmbeddingSpec& config);
  // The setup collection `name` was built with (checked against its record);
  // InvalidArgument for a collection of plain client vectors (no model).
  Result<const EmbeddingSetup*> SetupOf(const std::string& name);
  // Registers a setup the caller loaded (it must outlive the database): the
  // collections that recorded its fields share it rather than load their own.
  void AddSetup(const EmbeddingSetup* setup);

  // Embeds the documents' texts with the collection's setup and stores them
  // as one atomic write (synced when `sync`): all or nothing. With a
  // `condition`, only the documents it lets through (document_update.h).
  Result<WriteResult> Upsert(const std::string& name, std::vector<StoredDocument> docs, bool sync = true,
                             const UpsertCondition* condition = nullptr);
  // Searches `name`; embeds options.text with its setup first unless the
  // mode is lexical (no model runs then).
  Result<std::vector<SearchHit>> Search(const std::string& name, const SearchSpec& options,
                                        SearchInfo* info = nullptr);
  // Search's (with `vectors`, SearchVectors') hits grouped by a payload
  // field (payload_groups.h): every document the search ranks (up to
  // kMaxSearchK), options.k ignored; InvalidArgument for a bad key or a
  // group_size or limit of 0.
  Result<std::vector<HitGroup<SearchHit>>> SearchGroups(const std::string& name, SearchSpec options, const GroupSpec& groups,
                                                        const VectorQuery* vectors = nullptr, SearchInfo* info = nullptr);
  // Searches `name` by a client's vectors (client_vectors.h) in their mode;
  // options.mode hybrid adds the lexical signal of options.query. Scores are
  // the collection's (ClientScore gives what the client sees).
  Result<std::vector<SearchHit>> SearchVectors(const std::string& name, const VectorQuery& query, SearchSpec options,
                                               SearchInfo* info = nullptr);

  // Snapshots the indexes of every open collection; the first error, if any.
  Status SaveIndexes();
  // Over a shared store, trims each open collection's change log to its
  // newest `keep_entries` entries (0: keeps it whole), never past the entry
  // a live replica applied last (this node's; the others' as the peers
  // know them: ShardPeers::LowestApplied). A node that was down while the
  // window passed its cursor rebuilds from the store. The first error.
  Status TrimLogs(uint64_t keep_entries);
  // VectorCollection::SaveIndexIfDue on every open collection: how many
  // saved, or the first error (the others are still tried).
  Result<size_t> SaveIndexesIfDue(uint64_t every_entries, std::chrono::milliseconds every);
  // Applies to every open collection's indexes the change-log entries other
  // nodes committed (a shared PostgreSQL store), after opening and closing
  // shard replicas as the placement now says; returns how many entries in
  // all and the first error, if any (the other collections still catch up).
  // A collection another node dropped (or dropped and created again) is
  // closed here; its name opens from the store again on next use.
  Result<size_t> CatchUp();
  Store* store() { return store_.get(); }
  // Whether `location` names a store other nodes share (PostgreSQL), before opening it.
  static bool IsSharedLocation(const std::string& location) { return IsPostgresLocation(location); }
  // Whether other processes write to this database too (Store::shared), and
  // the wait for their next commit (Store::WaitForChange): what a node's
  // follower loop runs between CatchUp calls.
  bool shared() const { return store_->shared(); }
  bool WaitForChange(int timeout_ms) const { return store_->WaitForChange(timeout_ms); }
  // What this node's indexes of each open collection hold: the newest
  // change-log entry they include and their document count.
  struct IndexState {
    std::string name;
    uint64_t applied_seq = 0;
    size_t indexed = 0;
  };
  std::vector<IndexState> OpenIndexStates();
  // Each open collection's shard replicas on this node (name, replica).
  std::vector<std::pair<std::string, VectorCollection::ReplicaState>> OpenReplicaStates();
  // The cluster this node is part of, as JSON text (ShardPeers::ClusterStatus);
  // NotFound on a node that is not in a cluster.
  Result<std::string> ClusterStatus();

 private:
  explicit Database(DatabaseOptions options) : options_(std::move(options)) {}
  Result<const EmbeddingSetup*> LoadSetupLocked(const EmbeddingSpec& config);
  Result<std::vector<Embedding>> EmbedWith(const EmbeddingSetup& setup, const std::vector<std::string>& texts,
                                           EmbedPurpose purpose);

  DatabaseOptions options_;
  std::unique_ptr<Store> store_;
  // The open collection `name`, or nullptr.
  std::shared_ptr<VectorCollection> FindOpen(const std::string& name);
  // Every open collection, by name (references: usable without mu_).
  std::vector<std::pair<std::string, std::shared_ptr<VectorCollection>>> OpenOnes();
  // Takes `c` out of the open collections if it is still the one open under
  // `name`; its folders go once the last request holding it lets it go.
  void Retire(const std::string& name, const std::shared_ptr<VectorCollection>& c);

  // Lock order: catch_up_mu_, spec_mu_, open_mu_, setups_mu_, mu_. None is held across
  // a model's forward pass or a replica's build except open_mu_ (one
  // collection opened, created or dropped at a time), catch_up_mu_ and
  // spec_mu_ (a payload index built).
  std::mutex catch_up_mu_;  // one CatchUp pass at a time
  std::mutex open_mu_;
  std::mutex setups_mu_;    // setups_, loaded_, stats_
  std::mutex mu_;           // collections_: held only to look up, add or take out
  // Payload index changes, local and followed: one at a time, so the
  // replicas end on what the record says last.
  std::mutex spec_mu_;
  std::map<std::string, std::shared_ptr<VectorCollection>> collections_;
  std::map<std::string, const EmbeddingSetup*> setups_;  // by their recorded fields (SetupKey)
  std::vector<std::unique_ptr<EmbeddingSetup>> loaded_;  // the ones this database loaded
  std::map<const EmbeddingSetup*, std::pair<std::string, std::string>> stats_;  // calibration statistics
};

// The recorded fields of a collection's info (model folder, routing, prompt,
// poolings) as an EmbeddingSpec; Corruption when the info is damaged.
Result<EmbeddingSpec> RecordedSetup(const std::string& info_json);

}  // namespace moeedb
