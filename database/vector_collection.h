// VectorCollection: one collection = the Store (source of truth) + its
// derived indexes: the DualIndex (HS and RW vectors) and, when enabled, the
// LexicalIndex (BM25 over the texts). Vector-level and model-free: the
// embedding layer (the CLI, the server, the C API) computes the vectors.
//
// Writes go to RocksDB first (one atomic WriteBatch, synced when asked: the
// acknowledgement), then to the indexes. Each index records the op-log
// sequence number it reflects (the dense one in its snapshot, the lexical
// one at its last commit); Open() catches each up from the op log, or
// rebuilds it from the store, so after a kill -9 every acknowledged document
// is searchable and nothing else is. Collections recorded before the
// lexical index existed open with it off.
// Thread-safe: searches share a lock, writes take it exclusively. One open
// VectorCollection per collection at a time: the lexical index holds its
// database's write lock until the object goes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "index/dual_index.h"
#include "index/fusion.h"
#include "index/lexical_index.h"
#include "index/metadata_filter.h"
#include "index/search_batcher.h"
#include "database/spec/search_spec.h"
#include "database/vector_schema.h"
#include "index/standardizer.h"
#include "storage/store.h"

namespace moeedb {

struct CollectionOptions {
  size_t dim_hs = 0, dim_rw = 0;
  DualIndexSpec index;                 // dims are filled in from dim_hs/dim_rw
  std::string std_hs_json, std_rw_json;  // standardizer statistics; empty: identity (L2 only)
  std::string info_json = "{}";        // recorded as is: model fingerprint, routing, prompt, ...
  float default_alpha = 1.0f;
  LexicalSpec lexical{true};           // BM25 over the texts (hybrid and lexical search)
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
  static Result<std::unique_ptr<VectorCollection>> Create(Store* store, const std::string& name,
                                                          const CollectionOptions& options,
                                                          const std::string& index_root = "");
  // Loads the index snapshot and replays, or rebuilds from the store.
  static Result<std::unique_ptr<VectorCollection>> Open(Store* store, const std::string& name,
                                                        const std::string& index_root = "");
  // The info a collection recorded (CollectionOptions::info_json), read from
  // its store record without opening its index; Corruption if the spec is damaged.
  static Result<std::string> RecordedInfo(const CollectionRecord& record);
  // Removes the collection from the store and its derived indexes from disk.
  // The caller must have closed every VectorCollection of it.
  static Status Drop(Store* store, const std::string& name, const std::string& index_root = "");
  // Removes a collection's derived indexes (index_dir() and its lexical
  // folder) from disk; nothing may have them open.
  static void RemoveIndexFolders(const std::string& index_dir);
  ~VectorCollection();

  // All or nothing: every document is validated first (id, UTF-8 text,
  // metadata object, vector dims, finite values); any error stores nothing.
  Result<WriteResult> Upsert(const std::vector<StoredDocument>& docs, bool sync = true);
  Result<WriteResult> Delete(const std::vector<std::string>& ids, bool sync = true);
  Result<std::optional<StoredDocument>> Get(const std::string& id) const;
  // A page of documents in id order (Store::ListDocuments).
  Result<DocumentPage> List(const std::string& after, size_t limit) const;
  // Dense modes need hs and rw; lexical needs options.query (the vectors,
  // when given, fill in score_hs/score_rw); hybrid needs all three.
  Result<std::vector<SearchHit>> Search(const float* hs, const float* rw, const SearchSpec& options) const;

  // Commit the lexical index, snapshot the dense one, trim the op log they cover.
  Status SaveIndex();

  const std::string& name() const { return name_; }
  size_t size() const;
  size_t dim_hs() const { return dim_hs_; }
  size_t dim_rw() const { return dim_rw_; }
  float default_alpha() const { return default_alpha_; }
  const std::string& info_json() const { return info_json_; }
  // How clients' own vectors map onto the stored ones (client_vectors.h).
  const VectorSchema& schema() const { return schema_; }
  // The statistics the index standardizes each half with.
  const Standardizer& standardizer_hs() const { return index_->standardizer_hs(); }
  const Standardizer& standardizer_rw() const { return index_->standardizer_rw(); }
  std::string spec_json() const { return spec_json_; }
  // The store's id of the collection (a collection dropped and created again
  // under the same name has a new one) and the local folder of its indexes.
  uint32_t store_id() const { return store_id_; }
  const std::string& index_dir() const { return index_dir_; }
  // Internal ids in the index (sorted): for consistency checks.
  std::vector<uint64_t> IndexedIds() const;
  bool has_lexical() const { return lexical_ != nullptr; }
  const LexicalSpec& lexical_spec() const { return lexical_spec_; }
  // Internal ids in the lexical index (sorted; empty without one).
  std::vector<uint64_t> LexicalIds() const;
  bool lexical_rebuilt() const { return lexical_rebuilt_; }
  bool opened_from_snapshot() const { return from_snapshot_; }
  size_t replayed_ops() const { return replayed_ops_; }
  size_t index_rebuilds() const;
  // The newest change-log entry both indexes include.
  uint64_t applied_seq() const;
  // Applies the store's change-log entries above applied_seq(): the writes
  // other nodes made to a shared (PostgreSQL) store. Idempotent; returns how
  // many entries it applied.
  Result<size_t> CatchUp();

 private:
  VectorCollection() = default;
  static std::string IndexDir(const Store& store, const std::string& index_root, const CollectionRecord& rec);
  Status ApplyToIndex(const WriteResult& res, const std::vector<StoredDocument>* docs);
  // After this node's own write `res` (mu_ held): its change into the
  // indexes, with the entries before it if they lag. A store that cannot be
  // read leaves them behind rather than failing a committed write.
  Status FollowOwnWrite(const WriteResult& res, const std::vector<StoredDocument>* docs);
  // CatchUp with mu_ held exclusively.
  Result<size_t> CatchUpLocked();
  // One change-log entry into both indexes, reading the added documents from
  // the store; applying it twice leaves the same state.
  Status ApplyLoggedOp(const OpRecord& op);
  // Takes `gone` out of both indexes and the metadata, puts docs[i] in under
  // ids[i], and records `seq` as applied: what a write and a logged entry share.
  Status ApplyChange(uint64_t seq, const std::vector<uint64_t>& gone, const std::vector<uint64_t>& ids,
                     const std::vector<const StoredDocument*>& docs);
  // Catches the lexical index up from the op log, or rebuilds it.
  Status OpenLexical(const CollectionRecord& rec);
  Result<std::vector<SearchHit>> SearchLexicalOrHybrid(const float* hs, const float* rw, const SearchSpec& o,
                                                       const std::function<bool(uint64_t)>& filter) const;
  Result<std::vector<SearchHit>> ToSearchHits(const std::vector<FusedCandidate>& hits) const;

  Store* store_ = nullptr;
  std::string name_, index_dir_, spec_json_, info_json_;
  uint32_t store_id_ = 0;
  size_t dim_hs_ = 0, dim_rw_ = 0;
  float default_alpha_ = 1.0f;
  VectorSchema schema_;
  std::unique_ptr<DualIndex> index_;
  mutable SearchBatcher batcher_;  // concurrent exact searches share a pass over the rows
  LexicalSpec lexical_spec_;
  std::unique_ptr<LexicalIndex> lexical_;
  mutable std::mutex lexical_mu_;  // Xapian objects are single-threaded
  bool lexical_rebuilt_ = false;
  std::unordered_map<uint64_t, std::string> metadata_;  // internal id -> metadata JSON text
  uint64_t applied_seq_ = 0;
  bool from_snapshot_ = false;
  size_t replayed_ops_ = 0;
  mutable std::shared_mutex mu_;
};

}  // namespace moeedb
