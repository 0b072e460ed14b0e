// MoeModel: a HuggingFace MoE checkpoint loaded for embedding. One decoder
// for every family (model_family.h says what differs); no KV cache.
//
// Forward() takes a batch of token-id sequences of any lengths, pads them on
// the right with an attention mask (positions restart at 0 for every row, so
// a text gives the same result alone or in any batch), and returns per row
// the MoEE read-outs at the last real token.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/moe_dispatch.h"
#include "engine/model/pooling.h"
#include "engine/model/routing_policy.h"
#include "base/status.h"
#include "engine/kernels/weight_format.h"

namespace moeedb {

class Checkpoint;
class MoeBlock;
class TrainedPooler;

struct ForwardOptions {
  bool want_logits = false;  // [B, T, V] next-token logits (tests, perplexity)
  HsPooling hs_pooling = HsPooling::kLast;
  RwPooling rw_pooling = RwPooling::kLast;
  bool want_token_states = false;  // every real token's final-normed hidden state (TEI's /embed_all)
};

struct ForwardOutput {
  at::Tensor hs;             // [B, H]: final-normed hidden state at the last real token (or as pooled;
                             // [B, out_dim] from a trained pooler)
  at::Tensor router_logits;  // [B, L_moe, E]: z = W_gate x at the last real token (or mean), per MoE layer
  at::Tensor logits;         // [B, T, V] if asked (zeros past a row's length)
  at::Tensor token_states;   // [N_real, H] if asked: rows' real tokens in order, final-normed
  std::vector<int64_t> lengths;
};

// A named tap (like llama.cpp's cb(cur, name, il)): called with intermediate
// tensors during Forward when set. Names: "attn_out", "moe_in",
// "router_logits", "mlp_out", "layer_out" (each [N_real, *] over the real
// tokens in row-major order), "final_norm" ([B, H] at the last tokens).
using ForwardTap = std::function<void(std::string_view name, int64_t layer, const at::Tensor& value)>;

class MoeModel {
 public:
  // Loads config.json and the safetensors of a HF folder. Every expected
  // tensor must be present with the shape config.json implies. `options`
  // chooses the weight format and device (weight_format.h); outputs are
  // float32 CPU tensors whatever they say.
  static Result<std::unique_ptr<MoeModel>> LoadDir(const std::string& dir, const LoadOptions& options = {});
  ~MoeModel();

  // ids: one non-empty sequence per row, each id in [0, vocab_size).
  Result<ForwardOutput> Forward(const std::vector<std::vector<int32_t>>& ids, const ForwardOptions& options = {}) const;

  const ModelConfig& config() const { return config_; }
  // The folder's trained pooler (pooler.json + pooler.safetensors), loaded
  // with the model when present; null otherwise. HsPooling::kTrained needs it.
  const TrainedPooler* pooler() const { return pooler_.get(); }
  // Size of out.hs for `p`: the pooler's out_dim for kTrained, else hidden_size.
  int64_t HsDim(HsPooling p) const;
  // InvalidArgument for kTrained on a model without a pooler; OK otherwise.
  Status CheckHsPooling(HsPooling p) const {
    if (p == HsPooling::kTrained && !pooler_)
      return Status::InvalidArgument("HS pooling 'trained' needs a model folder with a trained pooler (pooler.json)");
    return Status::OK();
  }
  void set_tap(ForwardTap tap) { tap_ = std::move(tap); }

  struct RoutingSetup {
    bool from_cache = false;  // SSMoE centroids read from the cache, not computed
    double seconds = 0;       // time spent computing or loading them
    std::string cache_file;   // empty when no cache was used
  };
  // Selects the routing policy of every MoE layer (learned by default). For
  // SSMoE the spectral centroids are loaded from `cache_dir` when a file for
  // this model's weight fingerprint and (k, sign) is there, else computed and
  // written there (empty cache_dir: computed, not cached).
  Result<RoutingSetup> SetRouting(const RoutingPolicy& policy, const std::string& cache_dir = "");
  const RoutingPolicy& routing() const { return routing_; }
  // 16 hex digits: a hash of the config and of the router and expert weights
  // as stored in the checkpoint (routers whole, expert matrices sampled),
  // stable across loads and the same whatever the load options.
  const std::string& WeightFingerprint() const { return fingerprint_; }
  const LoadOptions& load_options() const { return load_options_; }
  // What the matmuls run in (bf16 was asked for but this CPU has no fast
  // bf16 GEMM: f32; weight_format.h).
  ComputeDtype compute_dtype() const { return compute_dtype_; }
  // Bytes of weights the model holds in memory (mapped f32 views included).
  int64_t WeightBytes() const;
  // How every MoE block runs its experts (moe_block.h; kAuto by default;
  // tests and benchmarks force one).
  void set_expert_dispatch(ExpertDispatch d);
  // The packed expert path's window of (token, expert) pairs
  // (MoeBlock::kExpertWindowPairs by default; tests narrow it).
  void set_expert_window_pairs(int64_t pairs);
  // How attention runs: kAuto (the default) takes packed rows
  // (packed_attention.h; in float32) for f32 and bf16 on the CPU and [B, T] grids with batched
  // GEMMs elsewhere; kGrid forces the grid path (tests compare the two).
  enum class AttentionKernel { kAuto, kGrid };
  void set_attention_kernel(AttentionKernel a) { attention_kernel_ = a; }
  // RMSNorm in one pass per row for f32 on the CPU (rms_norm.h; the default)
  // or as ATen's five-op formula (benchmarks compare the two).
  void set_fused_norms(bool on) { fused_norms_ = on; }
  // The MoE blocks in layer order (for tests and measurements).
  std::vector<const MoeBlock*> MoeBlocks() const;

 private:
  struct Layer;
  MoeModel();
  ForwardOutput ForwardImpl(const std::vector<std::vector<int32_t>>& ids, const ForwardOptions& options) const;

  ModelConfig config_;
  std::unique_ptr<Checkpoint> checkpoint_;  // owns the mapping the weights point into
  std::unique_ptr<TrainedPooler> pooler_;
  at::Tensor embed_, final_norm_, lm_head_;  // final_norm_ undefined where the family has none (post-norm)
  at::Tensor final_norm_bias_;                // LayerNorm families
  at::Tensor embed_positions_;                // PositionKind::kLearned: [max positions, H]
  at::Tensor embed_norm_, embed_norm_bias_;   // post-norm families: the embeddings' norm
  at::Tensor embed_int8_, embed_scale_;  // --quant int8: the token embeddings the forward reads, [V, H] and [V]
  at::Tensor inv_freq_;  // RoPE, double precision, on the CPU
  LoadOptions load_options_;
  ComputeDtype compute_dtype_ = ComputeDtype::kF32;
  std::string fingerprint_;
  std::vector<std::unique_ptr<Layer>> layers_;
  ForwardTap tap_;
  RoutingPolicy routing_;
  AttentionKernel attention_kernel_ = AttentionKernel::kAuto;
  bool fused_norms_ = true;
};

}  // namespace moeedb
