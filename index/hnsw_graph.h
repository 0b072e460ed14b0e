// HnswGraph: an HNSW graph (hnswlib) whose nodes hold an int8 code of each
// row (per-row scale, symmetric), not the float row: the graph walk is
// bound by reading node data from memory, and a code is 1/4 of an f32 row.
// It proposes candidates; DualIndex re-scores them exactly on the float
// rows, so the codes' small error (~1e-3 of a cosine) reorders nothing that
// is returned. Distances (1 - inner product of the codes) run at the widest
// SIMD level the CPU has, chosen at run time (AVX512-VNNI, AVX2, portable);
// hnswlib's own kernels are fixed at compile time, and Debian's Faiss is
// built generic.
//
// Searches may run concurrently with each other (the search breadth is set
// once: ef = max(ef_search, k)); Add must not overlap them.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace moeedb {

class HnswGraph {
 public:
  // An empty graph over rows of `dim` values, M links per node (2M on the
  // bottom layer), ef_construction candidates per insertion.
  HnswGraph(size_t dim, int m, int ef_construction, int ef_search);
  ~HnswGraph();
  HnswGraph(const HnswGraph&) = delete;
  HnswGraph& operator=(const HnswGraph&) = delete;

  // Inserts n rows (row-major, dim values each) as rows size() .. size()+n-1,
  // `threads` insertions at a time.
  void Add(const float* rows, size_t n, int threads);
  // Up to k row numbers with the highest (int8-code) inner product with q,
  // best first. Rows are not filtered: the caller drops dead ones.
  std::vector<size_t> Search(const float* q, size_t k) const;
  size_t size() const;
  // Bytes the graph holds in memory: codes, links (every level), labels.
  size_t memory_bytes() const;

  // hnswlib's file format (codes included).
  Status Save(const std::string& path) const;
  static Result<std::unique_ptr<HnswGraph>> Load(const std::string& path, size_t dim, int ef_search);

  // The distance kernel this CPU runs: "avx512-vnni", "avx2" or "portable".
  static const char* SimdLevel();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  HnswGraph();
};

}  // namespace moeedb
