// How a MoE block picks and weights its experts (method.md C, D):
//   learned            softmax(z) -> top-k -> renormalise iff the family says so
//   ssmoe{c,k,sign}    p = (1-c) softmax(z) + c softmax(f_EV(x)), then top-k as learned;
//                      f_EV(x)_e = x . cbar_e, the spectral centroid of expert e
//   top1{weight}       only the best expert runs, weighted by its softmax
//                      probability (raw, paper-faithful) or 1 (one)
// RW always reads the learned logits z. Shared experts always run.
#pragma once

#include <string>

#include "base/status.h"

namespace moeedb {

struct RoutingPolicy {
  enum class Kind { kLearned, kSsmoe, kTop1 };
  // kCanonical: each singular vector flipped to a non-negative dot with the
  // router row, ranked by |dot| (moeedb's default, a labelled deviation);
  // kReference: the released code's ranking by the signed dot of torch.svd's vectors.
  enum class Sign { kCanonical, kReference };
  enum class Top1Weight { kRaw, kOne };

  Kind kind = Kind::kLearned;
  double c = 0.5;   // ssmoe: weight of the spectral router
  int k = 50;       // ssmoe: candidate singular vectors averaged per matrix
  Sign sign = Sign::kCanonical;
  Top1Weight top1_weight = Top1Weight::kRaw;

  // "learned" | "ssmoe[:c=0.5,k=50,sign=canonical|reference]" | "top1[:weight=raw|one]"
  static Result<RoutingPolicy> Parse(const std::string& spec);
  // The canonical spelling, with every parameter (recorded by collections).
  std::string ToString() const;
};

}  // namespace moeedb
