#include "engine/model/checkpoint_spec.h"

namespace moeedb {

std::string LayerPrefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

std::vector<TensorSpec> ExpectedTensors(const ModelConfig& c, const CheckpointNaming& naming) {
  const ExpertLayout layout = naming.layout;
  const std::string moe_module = naming.moe_module.empty() ? c.family->moe_modules[0] : naming.moe_module;
  using Init = TensorSpec::Init;
  const ModelFamily& fam = *c.family;
  const int64_t H = c.hidden_size, q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  std::vector<TensorSpec> out;
  auto add = [&](std::string name, std::vector<int64_t> shape, Init init = Init::kNormal,
                 std::vector<std::string> aliases = {}) {
    out.push_back(TensorSpec{std::move(name), std::move(aliases), std::move(shape), init});
  };
  auto add_mlp = [&](const std::string& p, int64_t width, const char* g, const char* u, const char* d) {
    add(p + g + ".weight", {width, H});
    add(p + u + ".weight", {width, H});
    add(p + d + ".weight", {H, width});
  };
  // A norm: its weight, and LayerNorm's bias.
  auto add_norm = [&](const std::string& name) {
    add(name + ".weight", {H}, Init::kOnes);
    if (fam.norm == NormKind::kLayer) add(name + ".bias", {H}, Init::kZeros);
  };
  add("model.embed_tokens.weight", {c.vocab_size, H});
  if (fam.positions == PositionKind::kLearned) add("model.embed_positions.weight", {c.max_positions, H});
  if (fam.post_norm) add_norm("model.embed_norm");
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string L = LayerPrefix(i);
    if (!fam.post_norm) add_norm(L + "input_layernorm");
    add_norm(L + "post_attention_layernorm");  // post-norm: after the attention's residual add
    if (fam.post_norm) add_norm(L + "post_mlp_layernorm");
    const std::string A = L + "self_attn.";
    add(A + "q_proj.weight", {q_dim, H});
    add(A + "k_proj.weight", {kv_dim, H});
    add(A + "v_proj.weight", {kv_dim, H});
    add(A + "o_proj.weight", {H, q_dim});
    if (c.qkv_bias) {
      add(A + "q_proj.bias", {q_dim}, Init::kZeros);
      add(A + "k_proj.bias", {kv_dim}, Init::kZeros);
      add(A + "v_proj.bias", {kv_dim}, Init::kZeros);
    }
    if (c.o_bias) add(A + "o_proj.bias", {H}, Init::kZeros);
    if (fam.qk_norm == QkNorm::kFullProjection) {
      add(A + "q_norm.weight", {q_dim}, Init::kOnes);
      add(A + "k_norm.weight", {kv_dim}, Init::kOnes);
    } else if (fam.qk_norm == QkNorm::kPerHead) {
      add(A + "q_norm.weight", {c.head_dim}, Init::kOnes);
      add(A + "k_norm.weight", {c.head_dim}, Init::kOnes);
    }
    if (!c.moe_layer[i]) {
      add_mlp(L + "mlp.", c.dense_intermediate, "gate_proj", "up_proj", "down_proj");
      continue;
    }
    const std::string M = L + moe_module + ".";
    std::vector<std::string> router_aliases;
    for (size_t a = 1; a < fam.router_names.size(); ++a) router_aliases.push_back(M + fam.router_names[a] + ".weight");
    add(M + fam.router_names[0] + ".weight", {c.num_experts, H}, Init::kNormal, router_aliases);
    if (fam.router_bias) add(M + fam.router_names[0] + ".bias", {c.num_experts}, Init::kZeros);
    const int64_t I = c.expert_intermediate;
    if (fam.expert_mlp == ExpertMlp::kGelu) {  // per expert only: up with its bias, down; one output bias
      for (int64_t e = 0; e < c.num_experts; ++e) {
        const std::string X = M + "experts." + std::to_string(e) + ".";
        add(X + fam.expert_up + ".weight", {I, H});
        add(X + fam.expert_up + ".bias", {I}, Init::kZeros);
        add(X + fam.expert_down + ".weight", {H, I});
      }
      add(M + "output_bias", {H}, Init::kZeros);
    } else if (layout == ExpertLayout::kPacked) {
      add(M + "experts.gate_up_proj", {c.num_experts, 2 * I, H});
      add(M + "experts.down_proj", {c.num_experts, H, I});
    } else {
      for (int64_t e = 0; e < c.num_experts; ++e)
        add_mlp(M + "experts." + std::to_string(e) + ".", I, fam.expert_gate, fam.expert_up, fam.expert_down);
    }
    if (c.shared_intermediate > 0) {
      add_mlp(M + fam.shared_module + ".", c.shared_intermediate, "gate_proj", "up_proj", "down_proj");
      if (fam.shared == SharedExpertKind::kSigmoidGated) add(M + "shared_expert_gate.weight", {1, H});
    }
  }
  if (!fam.post_norm) add_norm("model.norm");  // post-norm: the last layer's norm is the last
  if (!c.tie_word_embeddings) add("lm_head.weight", {c.vocab_size, H});
  return out;
}

}  // namespace moeedb
