// DualIndex: the two derived indexes of a collection, one over standardized
// HS vectors and one over standardized RW vectors, and the fused search
//   score = cos_HS + alpha * cos_RW   (mode fused; hs / rw: one half alone).
//
// Every row's standardized vectors are kept (the "full" rows, f32 or fp16, in
// the heap or in a memory-mapped file the page cache holds), so exact search
// is two inner-product passes, and every other search re-scores exactly: each
// half proposes oversample*k candidates from its codes (an ANN index, HNSW or
// IVF, over its rows or over their 8/4-bit scalar, product or 1-bit codes, or
// a flat scan of those codes), the union is re-scored with both halves' exact
// cosines from the full rows, and the top k are returned. A document proposed
// by only one half is therefore ranked by its true fused score, never by a
// partial or quantized one; only the candidates' full rows are read.
// Filters and deletions are applied to the candidates; if too few survive,
// the candidate count grows (x4) until it covers the index, so a filtered
// ANN search degrades to exact search rather than returning fewer hits.
//
// Deletions: ids are tombstoned (IVF also removes them); once tombstones
// exceed rebuild_ratio of the rows, everything is rebuilt without them.
// Codes that need training (IVF centroids, scalar ranges, PQ codebooks, the
// 1-bit centre) are trained at min_train_rows rows and again each time the
// rows grow 8-fold up to kRetrainRows, so early codes do not fix a large
// collection's quality.
// Not thread-safe for writers: callers serialise Add/Remove against Search.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/enum_table.h"
#include "base/status.h"
#include "index/id_positions.h"
#include "index/query_mode.h"
#include "index/standardizer.h"

namespace faiss {
struct Index;
}

namespace moeedb {

enum class IndexKind { kFlat, kHnsw, kIvf };
inline constexpr EnumTable<IndexKind, 3> kIndexKinds{
    "index kind", {{{IndexKind::kFlat, "flat"}, {IndexKind::kHnsw, "hnsw"}, {IndexKind::kIvf, "ivf"}}}};

// What a half's candidates are found by, in RAM: its full rows (none), or
// codes of them: 8- or 4-bit scalar (per-dimension ranges), product
// quantization (one byte per pq_dims dimensions), or 1 bit per dimension
// (sign after centring, Hamming distance). A flat half with codes scans them.
enum class CodeKind { kNone, kSq8, kSq4, kPq, kBinary };
inline constexpr EnumTable<CodeKind, 5> kCodeKinds{"code kind",
                                                   {{{CodeKind::kNone, "none"},
                                                     {CodeKind::kSq8, "sq8"},
                                                     {CodeKind::kSq4, "sq4"},
                                                     {CodeKind::kPq, "pq"},
                                                     {CodeKind::kBinary, "binary"}}}};

struct SignalIndexSpec {
  IndexKind kind = IndexKind::kFlat;
  CodeKind codes = CodeKind::kNone;
  int pq_dims = 8;         // dimensions per PQ sub-quantizer (a divisor of the dimension is chosen at or below it)
  int hnsw_m = 32;
  int ef_construction = 80;
  int ef_search = 64;      // raised to the candidate count when that is larger
  int ivf_nlist = 0;       // 0: 4 * sqrt(rows at training time)
  int nprobe = 16;
};

struct DualIndexSpec {
  size_t dim_hs = 0, dim_rw = 0;
  SignalIndexSpec hs, rw;
  int oversample = 4;          // candidates per ANN or coded half = oversample * k
  double rebuild_ratio = 0.25; // rebuild when tombstones exceed this share of rows
  size_t min_train_rows = 256; // IVF and SQ8 halves train once this many rows exist
  bool fp16_rows = false;      // keep the exact-scoring rows in fp16 (half the memory; ~1e-3 score error)
  bool rows_on_disk = false;   // the exact-scoring rows in a memory-mapped file, not the heap
  std::string ToJson() const;
  static Result<DualIndexSpec> FromJson(const std::string& json_text);
};

struct SearchRequest {
  const float* hs = nullptr;  // raw query vectors (standardized inside)
  const float* rw = nullptr;
  size_t k = 10;
  float alpha = 1.0f;
  QueryMode mode = QueryMode::kFused;  // fused, hs or rw: the dense modes
  bool exact = false;                         // force the exact path
  double oversample = 0;                      // candidates per half = oversample * k; 0: the spec's
  std::function<bool(uint64_t id)> filter;    // empty: every document
  // When set, the only ids that may be hits (ascending; e.g. a payload
  // index's candidates, still tested by `filter`): up to kScoreAmongMax of
  // them, or any number under a full scan, are scored exactly one by one
  // instead of searching the index.
  const std::vector<uint64_t>* among = nullptr;
};

// The most `among` ids an ANN search scores one by one; more are searched
// through the index with membership tested per candidate.
inline constexpr size_t kScoreAmongMax = 65536;

struct Hit {
  uint64_t id = 0;
  float score = 0;     // what the ranking used (fused, hs or rw)
  float score_hs = 0;  // exact cosines of the standardized vectors
  float score_rw = 0;
};

// Rows at which trained codes stop being retrained as the index grows.
inline constexpr size_t kRetrainRows = size_t{1} << 17;

class DualIndex {
 public:
  // `rows_folder`: where a spec with rows_on_disk keeps its row files
  // (unlinked scratch files; "" for the system's temporary folder).
  static Result<std::unique_ptr<DualIndex>> Create(const DualIndexSpec& spec, Standardizer hs, Standardizer rw,
                                                   const std::string& rows_folder = "");
  // What Create refuses of a spec with these standardizers (InvalidArgument):
  // dims, ANN or codes over vectors that are not unit length, codes that
  // cannot train on min_train_rows rows.
  static Status CheckSpec(const DualIndexSpec& spec, const Standardizer& hs, const Standardizer& rw);
  ~DualIndex();

  // Adds n = ids.size() rows of raw vectors (row-major). Ids must be new;
  // vectors must be finite.
  Status Add(const std::vector<uint64_t>& ids, const float* hs, const float* rw);
  // Returns how many of `ids` were present.
  size_t Remove(const std::vector<uint64_t>& ids);

  // Hits by descending score, ties by ascending id; at most k.
  Result<std::vector<Hit>> Search(const SearchRequest& request) const;
  // Search for each request, out[i] for requests[i]; the exact, unfiltered
  // ones share one read of the rows (a queue of queries costs about one).
  Result<std::vector<std::vector<Hit>>> SearchBatch(const std::vector<SearchRequest>& requests) const;
  // Whether SearchBatch shares its pass over the rows with `r` (an exact or
  // ANN-less, unfiltered search), and whether `r` is a valid request (what
  // Search would refuse: missing or non-finite query halves, alpha).
  bool SharesScan(const SearchRequest& r) const;
  Status CheckRequest(const SearchRequest& r) const;
  // The exact cosines of the indexed ids among `ids` (in that order; absent
  // ids are left out), score = score_hs + alpha * score_rw. Hybrid search
  // re-scores the lexical index's candidates with this.
  Result<std::vector<Hit>> Score(const float* hs, const float* rw, float alpha, const std::vector<uint64_t>& ids) const;

  // The standardized RW row of `id` (a raw standardizer's: the row as
  // added); false when the id is not indexed.
  bool RwRow(uint64_t id, std::vector<float>* out) const;
  size_t size() const { return id_to_pos_.size(); }
  bool Contains(uint64_t id) const { return id_to_pos_.Find(id, pos_to_id_) != IdPositions::kNotFound; }
  std::vector<uint64_t> Ids() const;
  size_t tombstones() const { return tombstones_; }
  // Bytes the index holds in the heap: both halves' rows (f32 or fp16) unless
  // on disk, their codes and ANN structures (HNSW graph; a Faiss index as it
  // serializes), the id maps.
  size_t memory_bytes() const;
  // Bytes of the rows in memory-mapped files (0 unless rows_on_disk).
  size_t mapped_bytes() const;
  // Rows on disk: drops their pages from the page cache, so the next
  // re-scoring reads them from the disk (benchmarks time that). No effect
  // on rows in the heap.
  Status EvictRows() const;
  size_t rebuilds() const { return rebuilds_; }
  const DualIndexSpec& spec() const { return spec_; }
  // The statistics each half is standardized with (fixed for the index's life).
  const Standardizer& standardizer_hs() const { return std_hs_; }
  const Standardizer& standardizer_rw() const { return std_rw_; }

  // Snapshot into `dir` (created), recording the op-log sequence number the
  // index reflects. Atomic: a crash leaves the previous snapshot in place.
  Status Save(const std::string& dir, uint64_t applied_seq) const;
  // NotFound when `dir` holds no snapshot. Rows on disk go to row files in `dir`.
  static Result<std::unique_ptr<DualIndex>> Load(const std::string& dir, uint64_t* applied_seq);
  // The entry `dir`'s current snapshot covers, from its name, without loading
  // it (what Load would set *applied_seq to); std::nullopt without one.
  static std::optional<uint64_t> SnapshotSeq(const std::string& dir);

 private:
  struct SignalIndex;
  DualIndex();
  Status AddNormalized(const std::vector<uint64_t>& ids, const float* hs_n, const float* rw_n);
  // Brings both halves' codes up to date with their rows (`alive` of them);
  // a throw from Faiss as Internal "ANN index <what> failed".
  static Status SyncHalves(SignalIndex* hs, SignalIndex* rw, const std::vector<uint8_t>& alive, size_t min_train,
                           const char* what);
  // The standardized query halves (zeros for a null half); InvalidArgument
  // on a non-finite value.
  Status StandardizeQuery(const float* hs, const float* rw, std::vector<float>* qh, std::vector<float>* qr) const;
  // A request's checks, then its standardized query halves.
  Status PrepareQuery(const SearchRequest& r, std::vector<float>* qh, std::vector<float>* qr) const;
  // Whether `r` is answered by scoring every row (exact, or no ANN half it uses).
  bool ScansEveryRow(const SearchRequest& r) const;
  // Exact hits for each request over one pass of the rows; a filter only
  // when there is one request.
  std::vector<std::vector<Hit>> ScanExact(const std::vector<const SearchRequest*>& rs,
                                          const std::vector<std::vector<float>>& qh,
                                          const std::vector<std::vector<float>>& qr) const;
  Status Rebuild();
  // Fills id_to_pos_ from the live rows; Corruption when an id is on two.
  Status IndexLiveIds();
  std::vector<size_t> SignalCandidates(const SignalIndex& h, const float* q, size_t kk) const;

  DualIndexSpec spec_;
  std::string rows_folder_;
  Standardizer std_hs_, std_rw_;
  std::unique_ptr<SignalIndex> hs_, rw_;
  std::vector<uint64_t> pos_to_id_;
  std::vector<uint8_t> alive_;
  IdPositions id_to_pos_;  // over pos_to_id_, the live rows only
  size_t tombstones_ = 0, rebuilds_ = 0;
  mutable std::mutex ann_mu_;  // efSearch/nprobe are index state in Faiss 1.7.3
};

}  // namespace moeedb
