// TrainLanguageModel: trains an MoE language model of a family the engine
// loads (OLMoE and the other families without shared experts or dense
// layers) from scratch with libtorch, and writes it in HuggingFace layout so
// MoeModel::LoadDir runs it unchanged.
//
// Recipe: next-token cross-entropy + aux_loss_coef x the Switch/OLMoE
// load-balancing loss (E * sum_e f_e P_e, per MoE layer, averaged) +
// z_loss_coef x the router z-loss; AdamW (decay on matrices only), linear
// warm-up then cosine decay to min_lr_ratio x peak, gradient clipping.
//
// Deterministic for a seed at a given thread count: batch s is drawn from a
// generator seeded by (seed, s), so a run stopped by its time budget or by a
// kill resumes from its last checkpoint and reaches the same weights as an
// uninterrupted run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/io/safetensors.h"
#include "base/status.h"

namespace moeedb {

struct LmTrainOptions {
  std::string out_dir;           // model folder written at the end; state in out_dir/train_state
  uint64_t seed = 0;
  int64_t seq_len = 128;
  int64_t batch_size = 16;       // sequences per step
  int64_t steps = 0;             // schedule length; 0: estimated from `minutes` after the first steps
  double minutes = 0;            // wall-clock budget of this invocation; 0: none (needs `steps`)
  int64_t stop_after = 0;        // stop this invocation after this many steps (0: no limit)
  double peak_lr = 2e-3;
  double min_lr_ratio = 0.1;
  int64_t warmup_steps = 100;
  double weight_decay = 0.1;
  double clip_norm = 1.0;
  double aux_loss_coef = 0.01;
  double z_loss_coef = 0.001;
  int64_t checkpoint_every = 200;  // steps (and whenever the budget ends)
  int64_t eval_every = 500;        // steps between validation perplexities
  int64_t val_windows = 64;        // validation windows of seq_len tokens
  int threads = 0;                 // 0: leave libtorch's setting
  DType out_dtype = DType::kF16;   // dtype of the final model.safetensors
  std::function<void(const std::string&)> log;  // progress lines; may be empty
};

struct LmTrainResult {
  int64_t step = 0;            // steps done so far (all invocations)
  int64_t total_steps = 0;     // the schedule length
  bool finished = false;       // step == total_steps and the model folder is written
  double untrained_val_loss = 0;  // nats/token before the first step
  double val_loss = 0;            // nats/token at the last evaluation
  double tokens_per_second = 0;   // this invocation
};

// config_path: the config.json to train (copied into out_dir). Token ids must
// be < the config's vocab_size; each stream needs more than seq_len tokens.
Result<LmTrainResult> TrainLanguageModel(const std::string& config_path, const std::vector<int32_t>& train_tokens,
                                         const std::vector<int32_t>& val_tokens, const LmTrainOptions& options);

// Mean next-token loss (nats/token) of a saved model folder on `tokens`, cut
// into windows of seq_len: the engine's own forward pass, for checking the
// trainer and for reporting perplexity of any checkpoint.
Result<double> EvaluateLoss(const std::string& model_dir, const std::vector<int32_t>& tokens, int64_t seq_len,
                            int64_t max_windows);

}  // namespace moeedb
