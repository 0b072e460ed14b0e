// The tensors a checkpoint must hold for a config, with their shapes: the
// single source of truth used both to validate a loaded checkpoint and to
// write a random one. Names are HuggingFace's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/model_config.h"

namespace moeedb {

enum class ExpertLayout {
  kPerExpert,  // experts.{j}.gate_proj.weight ... (published checkpoints; Mixtral w1/w3/w2)
  kPacked,     // experts.gate_up_proj [E, 2I, H], experts.down_proj [E, H, I] (transformers v5)
};

struct TensorSpec {
  enum class Init { kNormal, kOnes, kZeros };
  std::string name;
  std::vector<std::string> aliases;  // other accepted names (e.g. Qwen3 "router")
  std::vector<int64_t> shape;
  Init init = Init::kNormal;
};

std::string LayerPrefix(int64_t layer);  // "model.layers.{i}."

// How a checkpoint names its MoE tensors (detected on load, chosen on write).
struct CheckpointNaming {
  ExpertLayout layout = ExpertLayout::kPerExpert;
  std::string moe_module;  // empty: the family's canonical one
};

// Every tensor the model needs, in a stable order.
std::vector<TensorSpec> ExpectedTensors(const ModelConfig& config, const CheckpointNaming& naming);

}  // namespace moeedb
