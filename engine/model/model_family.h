// The per-family table: everything that differs between the MoE model
// families moeedb loads, in one place (as llama.cpp's per-architecture
// tables). The decoder is written once and reads these fields; adding a
// family means adding a row, not copying the forward pass.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace moeedb {

// Where the query/key RMSNorm sits, if any.
enum class QkNorm {
  kNone,
  kFullProjection,  // OLMoE: RMSNorm over the whole q/k projection, before the head split
  kPerHead,         // Qwen3-MoE: RMSNorm(head_dim) per head, after the split, before RoPE
};

enum class SharedExpertKind {
  kNone,
  kSigmoidGated,  // Qwen2-MoE: sigmoid(shared_expert_gate . x) * SharedMLP(x)
  kUnweighted,    // DeepSeekMoE: + SharedMLP(x)
};

// What MoEE reads out of the router as the RW embedding (method.md A.1).
enum class RouterReadout { kLogits, kProbs, kLogProbs };

// Which decoder layers carry an MoE block (the others have a dense MLP).
enum class MoeLayerRule {
  kAll,                 // OLMoE, Mixtral
  kQwenSparseStep,      // not in mlp_only_layers and (i+1) % decoder_sparse_step == 0
  kDeepseekFirstKDense  // i >= first_k_dense_replace and i % moe_layer_freq == 0
};

// How the layers normalise. kLayer is LayerNorm (mean-centred, a weight and
// a bias); kRms is RMSNorm (a weight).
enum class NormKind { kRms, kLayer };

// Where the token's position enters: rotated into q and k (RoPE), or as an
// absolute learned row added to the token embedding before its norm (BERT).
enum class PositionKind { kRope, kLearned };

// What one routed expert computes. kSwiGlu: down(silu(gate x) * up x).
// kGelu: down(gelu(up x + b_up)), exact (erf) GELU; the block's output bias
// is added once, not per expert (an FFN split by its neurons into experts,
// MoEfication: with every expert chosen it is the FFN exactly).
enum class ExpertMlp { kSwiGlu, kGelu };

struct ModelFamily {
  const char* model_type;       // config.json "model_type"
  const char* display_name;     // e.g. "OLMoE"
  std::vector<std::string> moe_modules;   // first is canonical ("block_sparse_moe" or "mlp"); others accepted
  std::vector<std::string> router_names;  // first is canonical; others accepted on load
  const char* expert_gate;      // per-expert tensor names: gate, up, down
  const char* expert_up;
  const char* expert_down;
  const char* shared_module;    // "shared_expert", "shared_experts", or "" if none
  SharedExpertKind shared;
  QkNorm qk_norm;
  bool qkv_bias_always;         // Qwen2-MoE: q/k/v carry biases whatever the config says
  bool renormalize_always;      // Mixtral: top-k weights always renormalised
  RouterReadout rw_readout;     // MoEE's RW read-out for this family
  MoeLayerRule moe_layers;
  const char* experts_field;    // config field with the routed-expert count
  const char* expert_intermediate_field;  // config field with the per-expert MLP width
  // The encoder families' differences from the decoders above; the defaults
  // are every decoder's.
  NormKind norm = NormKind::kRms;
  bool post_norm = false;       // BERT: x = norm(x + attn(x)); x = norm(x + mlp(x)); no final norm
  PositionKind positions = PositionKind::kRope;
  ExpertMlp expert_mlp = ExpertMlp::kSwiGlu;
  bool unweighted_experts = false;  // the chosen experts' outputs summed with weight 1 (MoEfication)
  bool router_bias = false;         // the router's logits carry a bias (mlp.gate.bias)
};

// The families moeedb knows, in a fixed order.
const std::vector<ModelFamily>& SupportedFamilies();
// nullptr if unknown.
const ModelFamily* FindFamily(const std::string& model_type);
// "olmoe, qwen2_moe, ..." for error messages.
std::string SupportedModelTypes();

const char* RouterReadoutName(RouterReadout r);
// The inverse of RouterReadoutName; InvalidArgument for any other name.
Result<RouterReadout> ParseRouterReadout(const std::string& name);

}  // namespace moeedb
