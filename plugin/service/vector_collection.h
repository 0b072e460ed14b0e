// VectorCollection: one collection = the Store (source of truth) + its
// DualIndex (derived). Vector-level and model-free: the embedding layer
// (EmbeddingCollection, the CLI, the server) computes the vectors.
//
// Writes go to RocksDB first (one atomic WriteBatch, synced when asked: the
// acknowledgement), then to the in-memory index. The index is snapshotted
// with the op-log sequence number it reflects; Open() loads the snapshot and
// replays newer ops, or rebuilds from the stored vectors, so after a kill -9
// every acknowledged document is searchable and nothing else is.
// Thread-safe: searches share a lock, writes take it exclusively.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/status.h"
#include "index/dual_index.h"
#include "storage/store.h"

namespace moeedb {

struct CollectionOptions {
  size_t dim_hs = 0, dim_rw = 0;
  DualIndexSpec index;                 // dims are filled in from dim_hs/dim_rw
  std::string std_hs_json, std_rw_json;  // standardizer statistics; empty: identity (L2 only)
  std::string info_json = "{}";        // recorded as is: model fingerprint, routing, prompt, ...
  float default_alpha = 1.0f;
};

struct SearchHit {
  std::string id;
  float score = 0, score_hs = 0, score_rw = 0;
  std::string text, metadata_json;
};

struct SearchOptions {
  size_t k = 10;
  std::optional<float> alpha;  // default: the collection's
  SearchMode mode = SearchMode::kFused;
  std::string filter_json;     // empty: none
  bool exact = false;
};

class VectorCollection {
 public:
  static Result<std::unique_ptr<VectorCollection>> Create(Store* store, const std::string& name,
                                                          const CollectionOptions& options);
  // Loads the index snapshot and replays, or rebuilds from the store.
  static Result<std::unique_ptr<VectorCollection>> Open(Store* store, const std::string& name);
  // The info a collection recorded (CollectionOptions::info_json), read from
  // its store record without opening its index; Corruption if the spec is damaged.
  static Result<std::string> RecordedInfo(const CollectionRecord& record);
  ~VectorCollection();

  // All or nothing: every document is validated first (id, UTF-8 text,
  // metadata object, vector dims, finite values); any error stores nothing.
  Result<WriteResult> Upsert(const std::vector<StoredDocument>& docs, bool sync = true);
  Result<WriteResult> Delete(const std::vector<std::string>& ids, bool sync = true);
  Result<std::optional<StoredDocument>> Get(const std::string& id) const;
  Result<std::vector<SearchHit>> Search(const float* hs, const float* rw, const SearchOptions& options) const;

  // Snapshot the index and trim the op log it covers.
  Status SaveIndex();

  const std::string& name() const { return name_; }
  size_t size() const;
  size_t dim_hs() const { return dim_hs_; }
  size_t dim_rw() const { return dim_rw_; }
  float default_alpha() const { return default_alpha_; }
  const std::string& info_json() const { return info_json_; }
  std::string spec_json() const { return spec_json_; }
  // Internal ids in the index (sorted): for consistency checks.
  std::vector<uint64_t> IndexedIds() const;
  bool opened_from_snapshot() const { return from_snapshot_; }
  size_t replayed_ops() const { return replayed_ops_; }
  size_t index_rebuilds() const;

 private:
  VectorCollection() = default;
  static std::string IndexDir(const Store& store, const CollectionRecord& rec);
  Status ApplyToIndex(const WriteResult& res, const std::vector<StoredDocument>* docs);

  Store* store_ = nullptr;
  std::string name_, index_dir_, spec_json_, info_json_;
  size_t dim_hs_ = 0, dim_rw_ = 0;
  float default_alpha_ = 1.0f;
  std::unique_ptr<DualIndex> index_;
  std::unordered_map<uint64_t, std::string> metadata_;  // internal id -> metadata JSON text
  uint64_t applied_seq_ = 0;
  bool from_snapshot_ = false;
  size_t replayed_ops_ = 0;
  mutable std::shared_mutex mu_;
};

}  // namespace moeedb
