// How a model's routers use their experts over a set of texts (MoE Lens's
// specialisation measure, method.md D, and expert pruning's "usage" rule):
// per MoE layer and routed expert, over every real token, the learned
// router's softmax probability mass and how many tokens have the expert in
// their top-k.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace moeedb {

class MoeModel;

struct ExpertUsage {
  int64_t tokens = 0;                          // real tokens seen
  int64_t top_k = 0, num_experts = 0;
  std::vector<std::vector<double>> mass;       // [MoE layer][expert]: summed softmax probability
  std::vector<std::vector<int64_t>> selected;  // [MoE layer][expert]: tokens with the expert in their top-k
  // selected / tokens: the share of tokens routed to the expert; the uniform
  // baseline is top_k / num_experts.
  double Share(size_t layer, size_t expert) const;
  void Add(const ExpertUsage& other);          // sums another measurement of the same model
};

// Runs the model over `ids` (in bounded batches) and counts; the model's tap
// is used during the call and cleared after.
Result<ExpertUsage> MeasureExpertUsage(MoeModel& model, const std::vector<std::vector<int32_t>>& ids);

}  // namespace moeedb
