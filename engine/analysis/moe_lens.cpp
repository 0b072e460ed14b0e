#include "engine/analysis/moe_lens.h"

#include <ATen/ATen.h>

#include "engine/model/model.h"
#include "engine/model/moe_block.h"
#include "engine/kernels/tensor_ops.h"

namespace moeedb {

Result<std::vector<double>> MoeLensCosines(MoeModel& model, const std::vector<std::vector<int32_t>>& ids) {
  if (model.config().family->expert_mlp != ExpertMlp::kSwiGlu)
    return Status::NotSupported(std::string("MoE Lens measures SwiGLU experts; the ") + model.config().family->display_name +
                                " family's experts are not");
  const auto blocks = model.MoeBlocks();
  std::vector<double> sum(blocks.size(), 0.0);
  // Capture each MoE layer's input at every sequence's last token.
  std::vector<at::Tensor> inputs;
  std::vector<int64_t> last;
  int64_t offset = 0;
  for (const auto& s : ids) {
    offset += static_cast<int64_t>(s.size());
    last.push_back(offset - 1);
  }
  const at::Tensor last_idx = at::tensor(last, at::kLong);
  const auto& moe_layer = model.config().moe_layer;
  model.set_tap([&](std::string_view name, int64_t layer, const at::Tensor& v) {
    if (name == "moe_in" && moe_layer[layer]) inputs.push_back(v.index_select(0, last_idx));
  });
  auto out = model.Forward(ids);
  model.set_tap(nullptr);
  if (!out.ok()) return out.status();
  try {
    for (size_t l = 0; l < blocks.size(); ++l) {
      const MoeBlock& b = *blocks[l];
      const at::Tensor& u = inputs[l];  // [B, H]
      auto r = b.Route(u, RoutingPolicy{});
      for (int64_t i = 0; i < u.size(0); ++i) {
        at::Tensor ui = u[i].unsqueeze(0);
        at::Tensor hk = at::zeros_like(ui);
        double gsum = 0;
        at::Tensor h1;
        for (int64_t j = 0; j < r.experts.size(1); ++j) {
          const int64_t e = r.experts[i][j].item<int64_t>();
          const double g = r.weights[i][j].item<double>();
          at::Tensor he = SwiGlu(ui, b.expert_gate_up(e), b.expert_down(e)) + ui;
          if (j == 0) h1 = he;  // topk is sorted: slot 0 is the best expert
          hk += g * he;
          gsum += g;
        }
        hk /= gsum;
        sum[l] += at::cosine_similarity(h1, hk, 1).item<double>();
      }
    }
  } catch (const std::exception& e) {
    return Status::Internal(std::string("MoE Lens measurement failed: ") + e.what());
  }
  for (auto& s : sum) s /= static_cast<double>(ids.size());
  return sum;
}

}  // namespace moeedb
