// TrainNet: the trainable form of the engine's decoder, for the trainers.
// The tensors ExpectedTensors names (per-expert layout) as autograd leaves
// and a forward pass over right-padded [B, T] batches. It is a second,
// independent implementation of the decoder; tests check it against the
// engine's MoeModel on saved weights.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/model/checkpoint_spec.h"
#include "engine/model/model_config.h"
#include "engine/io/safetensors.h"
#include "base/status.h"

namespace moeedb {

struct TrainForwardOptions {
  at::Tensor lengths;        // [B] real tokens per row (right padding); undefined: every row is full
  bool causal = true;        // false: every token attends to every real token of its row
  bool want_logits = true;   // next-token logits [B, T, V]
  bool want_layers = false;  // residual stream per layer and router logits per MoE layer
};

struct TrainForwardOutput {
  at::Tensor logits;                       // [B, T, V] if asked
  at::Tensor hidden;                       // [B, T, H] final-normed last layer
  std::vector<at::Tensor> layer_out;       // want_layers: [B, T, H] embedding output, then after each layer
  std::vector<at::Tensor> router_logits;   // want_layers: [B, T, E] per MoE layer
  at::Tensor aux, zloss;                   // scalars, averaged over MoE layers (padding rows included)
};

class TrainNet {
 public:
  // NotSupported unless every layer is MoE and there are no shared experts.
  static Status CheckTrainable(const ModelConfig& config);
  explicit TrainNet(const ModelConfig& config);

  const std::vector<TensorSpec>& specs() const { return specs_; }
  std::vector<at::Tensor>& params() { return params_; }
  const at::Tensor& P(const std::string& name) const { return params_[index_.at(name)]; }

  void Init(uint64_t seed);
  // Loads every tensor from a safetensors file (per-expert names, any float
  // dtype), as float32 leaves.
  Status Load(const std::string& file);
  Status Save(const std::string& file, DType dtype) const;

  TrainForwardOutput Forward(const at::Tensor& tokens, const TrainForwardOptions& options = {}) const;

 private:
  const ModelConfig& c_;
  std::vector<TensorSpec> specs_;
  std::unordered_map<std::string, int> index_;
  std::vector<at::Tensor> params_;
};

}  // namespace moeedb
