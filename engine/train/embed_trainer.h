// TrainEmbedding: turns an MoE language model into a sentence embedder.
//
// A TrainedPooler (trained_pooler.h) reads the model's per-layer states (and,
// optionally, its router logits); the pooler alone (freeze_lm: the backbone
// stays the training-free LM) or the pooler and the whole model are trained
// on three signals at once, each step drawing from every source:
//  - contrastive pairs: InfoNCE with in-batch negatives (multiple-negatives
//    ranking) at `temperature`, plus the pair's hard negative when it has
//    one; pairs of the same group (a class label) are not negatives of each
//    other;
//  - scored pairs (STS-B train): CoSENT, log(1 + sum over s_i > s_j of
//    exp(scale (cos_j - cos_i)));
//  - distillation towards a teacher's vectors for the sentences that have
//    one: 1 - cos(student, teacher) and the squared difference of the two
//    in-batch cosine matrices;
//  - optionally, the contrastive terms again on the RW vector (rw_weight) and
//    on the training-free HS poolings last, mean and layers-mean
//    (hs_pooling_weight), so that what the engine reads without the pooler
//    is a sentence vector too; and a term matching those poolings' in-batch
//    similarities to the pooled vector's (side_match_weight).
// The model may be switched to bidirectional attention (causal = false), as
// LLM2Vec does; the output folder then says so in config.json. A start
// folder that ships a pooler of the same spec is continued (training in
// stages: distillation first, then pairs).
//
// Deterministic for a seed at a given thread count (step s draws from a
// generator seeded by (seed, s)); checkpoints resume to the same weights.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model/pooling.h"
#include "engine/model/trained_pooler.h"

namespace moeedb {

struct ContrastivePair {
  int32_t anchor = 0, positive = 0;  // sentence indices
  int32_t negative = -1;             // a hard negative, or -1
  int32_t group = -1;                // pairs of one group (>= 0) are not each other's negatives
  int32_t source = 0;                // sources are drawn equally often
};

struct ScoredPair {
  int32_t a = 0, b = 0;
  float score = 0;
};

struct EmbedTrainData {
  std::vector<std::vector<int32_t>> sentences;  // token ids as the engine sees them
  std::vector<ContrastivePair> pairs;
  std::vector<ScoredPair> scored;               // training (CoSENT)
  std::vector<ScoredPair> validation;           // dev pairs: Spearman at every evaluation
  int64_t teacher_dim = 0;
  std::vector<float> teacher;                   // [rows, teacher_dim], L2-normalised
  std::vector<int32_t> teacher_row;             // per sentence: row in `teacher`, or -1
  std::vector<int32_t> teacher_only;            // sentences only the teacher's list holds (distillation only)
};

struct EmbedTrainOptions {
  std::string model_dir;        // the language model to start from (config.json, model.safetensors)
  std::string out_dir;          // model folder written at the end; state in out_dir/train_state
  uint64_t seed = 0;
  int64_t steps = 1100;
  double minutes = 0;           // stop this invocation after M minutes (0: none)
  int64_t stop_after = 0;       // stop this invocation after N steps (0: none)
  int64_t pairs_per_step = 48;  // contrastive pairs per step (split over the sources)
  int64_t scored_per_step = 32;
  int64_t teacher_per_step = 0; // extra sentences from teacher_only per step, distilled only
  int64_t max_tokens = 64;      // longer sentences are cut
  int64_t chunk_tokens = 2048;  // padded tokens per forward chunk
  bool freeze_lm = false;       // train the pooler only
  bool causal = true;
  PoolerSpec pooler;            // latents, heads, ffn, out_dim, token pooling, router rows (0 or MoE layers)
  // kWeighted: the token log-weights to start from (one per vocabulary
  // entry; e.g. log idf of the training sentences); empty: zeros, a plain mean.
  std::vector<float> token_log_weight_init;
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
  enum class MatchTarget { kPooled, kLexical };
  MatchTarget side_match_target = MatchTarget::kPooled;
  int64_t checkpoint_every = 200, eval_every = 250;
  int threads = 0;
  std::function<void(const std::string&)> log;
};

struct EmbedTrainResult {
  int64_t step = 0;
  bool finished = false;
  double initial_val_spearman = 0;  // validation Spearman before the first step
  double val_spearman = 0;          // at the last evaluation
  double sentences_per_second = 0;  // this invocation
};

// log(idf) per vocabulary entry over `sentences` (token ids), with the
// smoothed idf = ln((1 + N) / (1 + df)) + 1 of the harness's TF-IDF: where
// a weighted pooler's token log-weights start.
std::vector<float> LogIdfTokenWeights(const std::vector<std::vector<int32_t>>& sentences, int64_t vocab);

// Errors: InvalidArgument for inconsistent data (indices, dims) or options;
// IOError for the output folder; a state written by another run is refused.
Result<EmbedTrainResult> TrainEmbedding(const EmbedTrainData& data, const EmbedTrainOptions& options);

}  // namespace moeedb
