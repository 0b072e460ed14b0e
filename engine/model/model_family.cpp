#include "engine/model/model_family.h"

namespace moeedb {

const std::vector<ModelFamily>& SupportedFamilies() {
  // Sources: method.md section E (HF modeling files of each family). Mixtral's
  // MoE module is "block_sparse_moe" in published checkpoints and "mlp" in
  // transformers v5 (packed experts).
  static const std::vector<ModelFamily> kFamilies = {
      {"olmoe", "OLMoE", {"mlp"}, {"gate"}, "gate_proj", "up_proj", "down_proj", "", SharedExpertKind::kNone,
       QkNorm::kFullProjection, false, false, RouterReadout::kLogits, MoeLayerRule::kAll, "num_experts",
       "intermediate_size"},
      {"qwen2_moe", "Qwen2-MoE (Qwen1.5-MoE)", {"mlp"}, {"gate"}, "gate_proj", "up_proj", "down_proj",
       "shared_expert", SharedExpertKind::kSigmoidGated, QkNorm::kNone, true, false, RouterReadout::kLogits,
       MoeLayerRule::kQwenSparseStep, "num_experts", "moe_intermediate_size"},
      {"qwen3_moe", "Qwen3-MoE", {"mlp"}, {"gate", "router"}, "gate_proj", "up_proj", "down_proj", "",
       SharedExpertKind::kNone, QkNorm::kPerHead, false, false, RouterReadout::kLogits,
       MoeLayerRule::kQwenSparseStep, "num_experts", "moe_intermediate_size"},
      {"mixtral", "Mixtral", {"block_sparse_moe", "mlp"}, {"gate"}, "w1", "w3", "w2", "", SharedExpertKind::kNone,
       QkNorm::kNone, false, true, RouterReadout::kLogits, MoeLayerRule::kAll, "num_local_experts",
       "intermediate_size"},
      {"deepseek", "DeepSeekMoE (v1)", {"mlp"}, {"gate"}, "gate_proj", "up_proj", "down_proj", "shared_experts",
       SharedExpertKind::kUnweighted, QkNorm::kNone, false, false, RouterReadout::kProbs,
       MoeLayerRule::kDeepseekFirstKDense, "n_routed_experts", "moe_intermediate_size"},
      // An encoder: BERT's layers with each feed-forward block split into
      // experts by its neurons (scripts/moefy_minilm.sh writes one from
      // all-MiniLM-L6-v2). Tensor names: checkpoint_spec.cpp.
      {"bert_moe", "BERT-MoE", {"mlp"}, {"gate"}, "", "up_proj", "down_proj", "", SharedExpertKind::kNone,
       QkNorm::kNone, false, false, RouterReadout::kLogits, MoeLayerRule::kAll, "num_experts",
       "expert_intermediate_size", NormKind::kLayer, true, PositionKind::kLearned, ExpertMlp::kGelu, true, true},
  };
  return kFamilies;
}

const ModelFamily* FindFamily(const std::string& model_type) {
  for (const auto& f : SupportedFamilies())
    if (model_type == f.model_type) return &f;
  return nullptr;
}

std::string SupportedModelTypes() {
  std::string s;
  for (const auto& f : SupportedFamilies()) s += (s.empty() ? "" : ", ") + std::string(f.model_type);
  return s;
}

const char* RouterReadoutName(RouterReadout r) {
  switch (r) {
    case RouterReadout::kLogits: return "logits";
    case RouterReadout::kProbs: return "probs";
    case RouterReadout::kLogProbs: return "log_probs";
  }
  return "?";
}

Result<RouterReadout> ParseRouterReadout(const std::string& name) {
  for (RouterReadout r : {RouterReadout::kLogits, RouterReadout::kProbs, RouterReadout::kLogProbs})
    if (name == RouterReadoutName(r)) return r;
  return Status::InvalidArgument("the RW read-out must be logits, probs or log_probs");
}

}  // namespace moeedb
