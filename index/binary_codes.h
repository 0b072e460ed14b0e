// BinaryCodes: one bit per dimension of each row (the sign of the row after
// centring by the training rows' mean), searched by Hamming distance: the
// candidate generator of a "binary" signal, whose full rows re-score what it
// proposes. 32x fewer bytes than f32 rows; the scan counts bits with AVX-512
// VPOPCNTDQ where the CPU has it (chosen at run time), else POPCNT.
//
// Centring matters: standardized rows are centred already, a raw or
// identity-standardized half is not, and the sign of an uncentred feature is
// the same for most rows (no information). Rows are appended in order and
// never removed (the owner filters dead rows); row positions are the ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace moeedb {

class BinaryCodes {
 public:
  BinaryCodes() = default;
  // Codes of `dim`-dimensional rows centred by the mean of `n` training rows
  // (n == 0: no centring).
  BinaryCodes(size_t dim, const float* train, size_t n);

  size_t dim() const { return dim_; }
  size_t words() const { return words_; }  // 64-bit words per row
  size_t size() const { return words_ ? codes_.size() / words_ : 0; }
  // Appends the codes of `n` rows.
  void Add(const float* rows, size_t n);
  // The code of one vector (words() words; padding bits zero).
  void Encode(const float* x, uint64_t* out) const;
  // Hamming distance between the code of `q` and row `row`.
  uint32_t Distance(const uint64_t* q, size_t row) const;
  // The positions of the k nearest kept rows by Hamming distance to the
  // code of `query`, nearest first, ties by lower position. keep[p] != 0
  // keeps row p (size() bytes); nullptr keeps every row.
  std::vector<size_t> Search(const float* query, size_t k, const uint8_t* keep) const;
  size_t memory_bytes() const { return codes_.capacity() * sizeof(uint64_t) + centre_.capacity() * sizeof(float); }

  // The centre and the codes, for snapshots.
  const std::vector<float>& centre() const { return centre_; }
  const std::vector<uint64_t>& codes() const { return codes_; }
  // Corruption when the sizes disagree.
  static Result<BinaryCodes> FromParts(size_t dim, std::vector<float> centre, std::vector<uint64_t> codes);

 private:
  size_t dim_ = 0, words_ = 0;
  std::vector<float> centre_;   // empty: no centring
  std::vector<uint64_t> codes_; // row-major, words_ per row
};

// Hamming distances of one code to `n` consecutive codes of `words` words:
// out[i] = popcount(q ^ codes[i]). At the widest popcount the CPU has.
void HammingDistances(const uint64_t* q, const uint64_t* codes, size_t n, size_t words, uint32_t* out);

// The popcount level HammingDistances runs at: "avx512-vpopcntdq", "popcnt" or "portable".
const char* HammingSimdLevel();

}  // namespace moeedb
