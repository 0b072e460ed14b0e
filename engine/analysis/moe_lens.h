// MoE Lens measurement (method.md D): per MoE layer, the cosine between the
// top-1 and the full top-k block outputs at the last token,
//   H_1 = E_top1(u) + u,   H_k = sum_i g_i (E_i(u) + u) / sum_i g_i,
// u = the post-attention RMSNorm output (the block's input), shared experts
// excluded, averaged over the given sequences.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace moeedb {

class MoeModel;

// One mean cosine per MoE layer, in layer order.
Result<std::vector<double>> MoeLensCosines(MoeModel& model, const std::vector<std::vector<int32_t>>& ids);

}  // namespace moeedb
