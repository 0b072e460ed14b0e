// ModelConfig: a HuggingFace config.json resolved against the family table
// into the numbers the decoder needs. Parsing fails with a message naming the
// file and the field; an unknown model_type lists the supported ones.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/model_family.h"
#include "base/status.h"

namespace moeedb {

struct ModelConfig {
  const ModelFamily* family = nullptr;
  std::string model_type;
  std::string source;  // file it came from, for messages
  std::string json_text;  // the original config.json, verbatim

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t dense_intermediate = 0;   // width of dense (non-MoE) layers' MLP
  int64_t expert_intermediate = 0;  // width of one routed expert
  int64_t shared_intermediate = 0;  // width of the shared expert MLP (0: none)
  int64_t num_experts = 0;
  int64_t top_k = 0;
  bool norm_topk_prob = false;      // effective: renormalise the top-k weights
  double rms_norm_eps = 1e-6;       // the norms' epsilon (LayerNorm's too: "layer_norm_eps")
  int64_t max_positions = 0;        // PositionKind::kLearned: rows of the position table
  double rope_theta = 10000.0;
  std::optional<double> clip_qkv;   // OLMoE
  bool qkv_bias = false;
  bool o_bias = false;
  bool tie_word_embeddings = false;
  std::vector<bool> moe_layer;      // per layer: MoE block (true) or dense MLP
  std::optional<int64_t> bos_token_id, eos_token_id, pad_token_id;
  // "is_causal": false marks a model trained for bidirectional attention (as
  // LLM2Vec turns a decoder into an encoder): every token sees its whole text.
  bool causal = true;
  double initializer_range = 0.02;

  static Result<ModelConfig> FromFile(const std::string& path);
  static Result<ModelConfig> FromJson(const std::string& json_text, const std::string& source);

 private:
  static Result<ModelConfig> FromJsonChecked(const std::string& json_text, const std::string& source);

 public:

  int64_t num_moe_layers() const;
  // RW dimension: experts x MoE layers.
  int64_t rw_dim() const { return num_moe_layers() * num_experts; }
  // One line: "OLMoE: 16 layers (16 MoE), hidden 2048, 64 experts top-8, ..."
  std::string Summary() const;
};

}  // namespace moeedb
