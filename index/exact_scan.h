// Exact fused top-k: every kept row scored as
//   score(p) = w_hs * <q_hs, hs[p]> + w_rw * <q_rw, rw[p]>
// in one pass over the rows (both signals of a row read together), the rows
// split across threads, a top-k heap per thread. The dot products use the
// widest SIMD the CPU has (AVX-512, AVX2+FMA, else portable), chosen at run
// time, over f32 or fp16 rows. Memory-bound: each row is read once per call,
// and once for all the queries of a ScanTopKBatch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace moeedb {

// One signal's rows: row-major, `dim` values per row, in f32 or fp16 (exactly
// one of the pointers set).
struct ScanRows {
  const float* f32 = nullptr;
  const uint16_t* f16 = nullptr;
  size_t dim = 0;
};

struct ScanQuery {
  const float* hs = nullptr;  // dim of the HS rows; unused when w_hs == 0
  const float* rw = nullptr;  // dim of the RW rows; unused when w_rw == 0
  float w_hs = 1.0f, w_rw = 0.0f;
};

struct ScanHit {
  size_t row = 0;
  float score = 0, score_hs = 0, score_rw = 0;  // a signal of weight 0 reads 0
};

struct ScanOptions {
  size_t k = 10;
  // Rows to score; empty: all. Called from several threads at once.
  std::function<bool(size_t row)> keep;
  // Order of equal scores: true when row a ranks before row b. Empty: lower row first.
  std::function<bool(size_t a, size_t b)> tie_before;
  int threads = 0;  // 0: the machine's cores
};

// The k best kept rows of [0, rows) for `q`, best first.
std::vector<ScanHit> ScanTopK(const ScanRows& hs, const ScanRows& rw, size_t rows, const ScanQuery& q,
                              const ScanOptions& o);

// ScanTopK for several queries over one read of the rows: out[i] for queries[i].
std::vector<std::vector<ScanHit>> ScanTopKBatch(const ScanRows& hs, const ScanRows& rw, size_t rows,
                                                const std::vector<ScanQuery>& queries, const ScanOptions& o);

// <q, row p of r>, at the scan's SIMD level.
float DotRow(const float* q, const ScanRows& r, size_t p);

// IEEE fp16 <-> f32 for fp16 rows (round to nearest even; subnormals flush to zero).
uint16_t FloatToF16(float f);
float F16ToFloat(uint16_t h);

// The SIMD level the scan runs at on this CPU: "avx512", "avx2" or "portable".
const char* ScanSimdLevel();

}  // namespace moeedb
