#include "engine/analysis/expert_usage.h"

#include <ATen/ATen.h>

#include "engine/model/model.h"

namespace moeedb {

double ExpertUsage::Share(size_t layer, size_t expert) const {
  return tokens > 0 ? static_cast<double>(selected[layer][expert]) / static_cast<double>(tokens) : 0.0;
}

void ExpertUsage::Add(const ExpertUsage& o) {
  if (mass.empty()) {
    *this = o;
    return;
  }
  tokens += o.tokens;
  for (size_t l = 0; l < mass.size() && l < o.mass.size(); ++l)
    for (size_t e = 0; e < mass[l].size() && e < o.mass[l].size(); ++e) {
      mass[l][e] += o.mass[l][e];
      selected[l][e] += o.selected[l][e];
    }
}

Result<ExpertUsage> MeasureExpertUsage(MoeModel& model, const std::vector<std::vector<int32_t>>& ids) {
  const ModelConfig& c = model.config();
  ExpertUsage u;
  u.top_k = c.top_k;
  u.num_experts = c.num_experts;
  const size_t moe_layers = static_cast<size_t>(std::count(c.moe_layer.begin(), c.moe_layer.end(), true));
  u.mass.assign(moe_layers, std::vector<double>(static_cast<size_t>(c.num_experts), 0.0));
  u.selected.assign(moe_layers, std::vector<int64_t>(static_cast<size_t>(c.num_experts), 0));
  std::vector<int64_t> moe_index(static_cast<size_t>(c.num_layers), -1);
  for (int64_t l = 0, m = 0; l < c.num_layers; ++l)
    if (c.moe_layer[static_cast<size_t>(l)]) moe_index[static_cast<size_t>(l)] = m++;
  model.set_tap([&](std::string_view name, int64_t layer, const at::Tensor& z) {
    if (name != "router_logits" || layer < 0 || layer >= c.num_layers || moe_index[static_cast<size_t>(layer)] < 0) return;
    const auto m = static_cast<size_t>(moe_index[static_cast<size_t>(layer)]);
    at::Tensor logits = z.to(at::kFloat).cpu();  // [N, E]
    at::Tensor p = at::softmax(logits.to(at::kDouble), -1).sum(0).contiguous();
    at::Tensor top = std::get<1>(at::topk(logits, c.top_k, -1)).reshape({-1}).contiguous();
    const double* pm = p.data_ptr<double>();
    for (int64_t e = 0; e < c.num_experts; ++e) u.mass[m][static_cast<size_t>(e)] += pm[e];
    const int64_t* t = top.data_ptr<int64_t>();
    for (int64_t i = 0; i < top.numel(); ++i) u.selected[m][static_cast<size_t>(t[i])]++;
  });
  Status failed;
  for (size_t start = 0; start < ids.size() && failed.ok(); start += 16) {
    std::vector<std::vector<int32_t>> chunk(ids.begin() + static_cast<std::ptrdiff_t>(start),
                                            ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), start + 16)));
    auto out = model.Forward(chunk);
    if (!out.ok()) failed = out.status();
    else for (const auto& s : chunk) u.tokens += static_cast<int64_t>(s.size());
  }
  model.set_tap(nullptr);
  if (!failed.ok()) return failed;
  return u;
}

}  // namespace moeedb
