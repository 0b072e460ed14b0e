// EmbedTrainOptions: how `moeedb train embed` (EmbedTrainer) trains, each
// option declared once in its field table (EmbedTrainFields): the CLI's
// flags, their help, defaults (the member initialisers below) and ranges
// come from it, as for the other specs (base/field_table.h). The data a run
// reads (pairs, scored pairs, teacher vectors) is EmbedTrainData, not an
// option.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/enum_table.h"
#include "base/field_table.h"
#include "base/status.h"
#include "engine/model/model_config.h"
#include "engine/model/pooling.h"
#include "engine/model/trained_pooler.h"

namespace moeedb {

// What the side-match term pulls the training-free poolings towards.
enum class MatchTarget { kPooled, kLexical };
inline constexpr EnumTable<MatchTarget, 2> kMatchTargets{
    "match target", {{{MatchTarget::kPooled, "pooled"}, {MatchTarget::kLexical, "lexical"}}}};

struct EmbedTrainOptions {
  std::string model_dir;        // the language model to start from (config.json, model.safetensors)
  std::string out_dir;          // model folder written at the end; state in out_dir/train_state
  // The schedule and this invocation's budget.
  int64_t steps = 1100;
  double minutes = 0;           // stop this invocation after M minutes (0: none)
  int64_t stop_after = 0;       // stop this invocation after N steps (0: none)
  uint64_t seed = 0;
  int threads = 0;              // compute threads (0: libtorch's default)
  // What each step draws.
  int64_t pairs_per_step = 48;  // contrastive pairs per step (split over the sources)
  int64_t scored_per_step = 32;
  int64_t teacher_per_step = 0; // extra sentences from teacher_only per step, distilled only
  int64_t max_tokens = 64;      // longer sentences are cut
  int64_t chunk_tokens = 2048;  // padded tokens per forward chunk
  // What is trained.
  bool freeze_lm = false;       // train the pooler only
  bool causal = true;           // false: bidirectional attention (LLM2Vec), recorded in config.json
  // The pooler: hidden 0 means "fit it to the model" (EmbedTrainer::Open
  // fills hidden size, rows, router rows where pooler_reads_rw, vocabulary
  // for weighted pooling, ffn = 2 x hidden, and out_dim 0 as the teacher's
  // dimension, else 512); a caller may also give every field itself.
  PoolerSpec pooler = FitToModel();
  bool pooler_reads_rw = true;
  // kWeighted: the token log-weights to start from (one per vocabulary
  // entry); empty with a fitted pooler: the log idf of the training sentences.
  std::vector<float> token_log_weight_init;
  // Rates and the loss terms' weights.
  double lr_lm = 2e-4, lr_pooler = 3e-4, min_lr_ratio = 0.05, weight_decay = 0.01, clip_norm = 1.0;
  int64_t warmup_steps = 100;
  double temperature = 0.05, cosent_scale = 20.0;
  double distill_weight = 5.0, distill_matrix_weight = 20.0, aux_loss_coef = 0.01;
  // Weight of the same InfoNCE and CoSENT terms on the RW vector (the router
  // logits pooled over tokens as rw_pooling says, standardised over the
  // step): trains the routers to be a sentence vector of their own. 0: off.
  // Needs !freeze_lm.
  double rw_weight = 0;
  RwPooling rw_pooling = RwPooling::kLast;
  // Weight of the same terms on each training-free HS pooling (last, mean,
  // layers-mean; pooling.h), cosine of the raw vectors. 0: off. Needs !freeze_lm.
  double hs_pooling_weight = 0;
  // Weight of a term pulling each training-free HS pooling's in-batch cosine
  // matrix towards the pooled vector's (held fixed; lexical channel
  // included): the squared difference, as the distillation's matrix term.
  // Carries what the pooler reads (word overlap, passages) into the vectors
  // read without it. 0: off. Needs !freeze_lm.
  double side_match_weight = 0;
  // What the match term pulls towards: the pooled vector's cosines, or
  // (kLexical) the TF-IDF cosines of the texts' tokens (idf over all training
  // sentences, texts cut at max_tokens as the model reads them): word
  // overlap alone, which keyword-led retrieval rewards.
  MatchTarget side_match_target = MatchTarget::kPooled;
  int64_t checkpoint_every = 200, eval_every = 250;
  std::function<void(const std::string&)> log;

  // A pooler spec with hidden 0 and the user-facing defaults (16 latents,
  // mean token pooling, no lexical channel, out_dim from the teacher).
  static PoolerSpec FitToModel();
  // Fills a FitToModel() pooler from the model; InvalidArgument when the
  // choices do not fit (a lexical channel without weighted token pooling).
  Status FitPooler(const ModelConfig& c, int64_t teacher_dim);
  // The cross-field rules the table cannot state (terms that train the
  // model need it unfrozen; chunk_tokens >= max_tokens).
  Status Validate() const;
};

// steps, minutes, stop_after, seed, threads, pairs_per_step, scored_per_step,
// teacher_per_step, max_tokens, freeze_lm, bidirectional, pooler_rw,
// token_pooling, out_dim, lexical_dim, latents, lr_lm, lr_pooler,
// warmup_steps, min_lr_ratio, weight_decay, clip_norm, temperature,
// cosent_scale, distill_weight, distill_matrix_weight, aux_loss_coef,
// rw_weight, rw_pooling, hs_pooling_weight, side_match_weight,
// side_match_target, checkpoint_every, eval_every.
const spec::FieldTable<EmbedTrainOptions>& EmbedTrainFields();

}  // namespace moeedb
