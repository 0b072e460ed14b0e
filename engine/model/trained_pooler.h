// TrainedPooler: the Multi-Layers Trainable Pooling of Tang & Yang (2024,
// "Pooling and Attention", method.md D'), with one addition: the router
// logits of every MoE layer may enter as extra rows, so routing shapes the
// pooled vector.
//
// Input rows, per text: final_norm(h_l) pooled over the text's tokens (the
// mean, the last token, or a weighted mean whose weight per vocabulary entry
// is learned, like a trained IDF, so that rare content words outweigh "the")
// for l = 0 (the embedding output) .. L, then, if the
// pooler reads RW, each MoE layer's pooled router logits projected to the
// hidden size. A learned row-position embedding is added; trainable latents
// attend over the normed rows (one multi-head cross-attention block with a
// residual on the latents), a GEGLU FFN follows, the latents are averaged,
// RMS-normed and projected to out_dim. Cosine is taken downstream.
//
// Beyond the paper, an optional lexical channel (lexical_dim > 0, with
// weighted token pooling): the token-weighted mean of learned per-token
// vectors (a dense bag of words, as in dense lexical representations). The
// output is then [n / |n|; g * l / |l|] for the attention-pooled vector n,
// the lexical vector l and a learned gain g, so that the cosine of two
// outputs is (cos_n + g^2 cos_l) / (1 + g^2): what the transformer
// understands and which rare words the texts share, in one vector.
//
// Stored beside the model as pooler.json (the PoolerSpec) and
// pooler.safetensors (the tensors PoolerTensors names).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "base/enum_table.h"
#include "base/status.h"

namespace moeedb {

enum class TokenPooling { kMean, kLast, kWeighted };
inline constexpr EnumTable<TokenPooling, 3> kTokenPoolings{
    "token pooling",
    {{{TokenPooling::kMean, "mean"}, {TokenPooling::kLast, "last"}, {TokenPooling::kWeighted, "weighted"}}}};

struct PoolerSpec {
  int64_t hidden = 0;       // the model's hidden size
  int64_t layer_rows = 0;   // hidden-state rows: num_layers + 1 (embedding output first)
  int64_t router_rows = 0;  // router rows (MoE layers); 0: the pooler reads HS only
  int64_t router_dim = 0;   // experts per MoE layer (when router_rows > 0)
  // One router projection per MoE layer ([router_rows, H, router_dim]) rather
  // than one shared ([H, router_dim]): what a pruned model needs, whose layers
  // keep different experts.
  bool router_proj_per_layer = false;
  int64_t latents = 16;
  int64_t heads = 4;        // must divide hidden
  int64_t ffn = 512;        // GEGLU width
  int64_t out_dim = 512;
  TokenPooling token_pooling = TokenPooling::kMean;  // how rows pool over a text's tokens
  int64_t vocab = 0;        // kWeighted: entries of the token weight table (the model's vocabulary)
  int64_t lexical_dim = 0;  // the lexical channel's width (0: none; needs kWeighted)

  int64_t output_dim() const { return out_dim + lexical_dim; }

  int64_t rows() const { return layer_rows + router_rows; }
  // InvalidArgument naming the field unless every size is positive and consistent.
  Status Validate() const;
  static Result<PoolerSpec> FromJson(const std::string& text);
  std::string ToJson() const;
};

struct PoolerTensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  double init_std = 0;  // 0: ones (norm weights)
  bool zeros = false;   // starts at zero (the token log-weights: a plain mean)
};
// Every tensor of a pooler of this spec, in file order, with its initialisation.
std::vector<PoolerTensorSpec> PoolerTensors(const PoolerSpec& spec);

// The pooler's forward pass in ATen ops (differentiable: the trainer runs
// it on autograd leaves). layer_rows [B, layer_rows, H]; router_rows
// [B, router_rows, E] (ignored when the spec reads no RW); lexical [B,
// lexical_dim], the token-weighted means of lexical_embed's rows (ignored
// without a lexical channel). Returns [B, output_dim()].
at::Tensor PoolerForward(const PoolerSpec& spec, const std::map<std::string, at::Tensor>& weights,
                         const at::Tensor& layer_rows, const at::Tensor& router_rows,
                         const at::Tensor& lexical = at::Tensor());

// kWeighted: each token's pooling weight, exp(token_log_weight[id]), for the
// token ids `ids` (any shape of int64); the rows are sum_t w_t x_t / sum_t w_t.
at::Tensor PoolerTokenWeights(const std::map<std::string, at::Tensor>& weights, const at::Tensor& ids);

class TrainedPooler {
 public:
  // Reads DIR/pooler.json and DIR/pooler.safetensors; NotFound when the
  // folder has no pooler.json, Corruption for a missing or misshapen tensor.
  static Result<std::unique_ptr<TrainedPooler>> LoadDir(const std::string& dir);
  static bool ExistsIn(const std::string& dir);

  const PoolerSpec& spec() const { return spec_; }
  // Corruption (naming `dir`) unless the spec fits the model: its hidden
  // size, num_layers + 1 layer rows, one row of num_experts logits per MoE
  // layer when it reads RW, and one token weight per vocabulary entry.
  Status CheckFits(const ModelConfig& config, const std::string& dir) const;
  // PoolerForward with the loaded weights, without autograd; float32 CPU in and out.
  at::Tensor Forward(const at::Tensor& layer_rows, const at::Tensor& router_rows,
                     const at::Tensor& lexical = at::Tensor()) const;
  // PoolerTokenWeights with the loaded weights (kWeighted only).
  at::Tensor TokenWeights(const at::Tensor& ids) const;
  const std::map<std::string, at::Tensor>& weights() const { return weights_; }

 private:
  PoolerSpec spec_;
  std::map<std::string, at::Tensor> weights_;
};

// Writes DIR/pooler.json and DIR/pooler.safetensors (float32) atomically per file.
Status SavePooler(const std::string& dir, const PoolerSpec& spec, const std::map<std::string, at::Tensor>& weights);

}  // namespace moeedb
