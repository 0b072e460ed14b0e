// RouterKernel: an MoE router's logits in float32 and the exact top-k
// choice of experts, on the CPU.
//
// Why not a float32 GEMM: BLAS sums each dot product in an order that depends
// on the matrix shape, so removing experts from a layer (expert pruning) could
// change the remaining experts' logits in their last bits and, on a near tie,
// which experts a token goes to. Here every logit is one fused multiply-add
// chain over the hidden dimension in order: the same float for any number of
// tokens, experts or threads, on every kernel (the vector lanes run the scalar
// chain). Why not float64 throughout: a float64 GEMM runs at a quarter of the
// float32 rate or less, which top-1 routing (a smaller forward, the same
// router) feels. The choice of experts is still that of exact arithmetic: a
// row whose float32 logits leave it open under their rounding bound is
// redone in double.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kernels/vector_exp.h"

namespace moeedb {

class RouterKernel {
 public:
  RouterKernel() = default;
  // Copies w [experts, hidden] (row-major float32), transposed and padded.
  RouterKernel(const float* w, int64_t experts, int64_t hidden);

  int64_t experts() const { return experts_; }
  int64_t hidden() const { return hidden_; }

  // z [n, experts] = x [n, hidden] · wᵀ, rows contiguous: z[i][e] is
  // fma(x[i][H-1], w[e][H-1], ... fma(x[i][1], w[e][1], fma(x[i][0], w[e][0], 0))).
  // Runs on the compute threads, with the widest of the vector paths below
  // that the CPU runs (MOEEDB_ROUTER_KERNEL=avx2|scalar caps it).
  void Logits(const float* x, int64_t n, float* z) const;
  // The same on a given path (one the CPU cannot run: scalar); every path
  // gives the same floats.
  void Logits(SimdLevel path, const float* x, int64_t n, float* z) const;

  // For each row i, the k experts with the largest exact x[i] · w[e] (ties:
  // the lower index), written to experts[i * k ..] ordered by z[i][e]
  // descending, then index. z must be Logits(x). A row is decided from z
  // where z's rounding bound (gamma_hidden · |x[i]| · |w[e]|) separates the
  // k-th from the (k+1)-th expert, else by the dot products in double.
  // Returns how many rows took the double path. k <= experts.
  int64_t TopK(const float* x, const float* z, int64_t n, int64_t k, int64_t* experts) const;

 private:
  int64_t experts_ = 0, hidden_ = 0, padded_ = 0;  // padded_: experts rounded up to 16
  std::vector<float> wt_;                            // [hidden][padded_], zero past experts_
  std::vector<double> norm_;                         // |w[e]|, Euclidean
};

}  // namespace moeedb
