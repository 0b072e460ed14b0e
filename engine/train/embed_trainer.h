// EmbedTrainer: turns an MoE language model into a sentence embedder.
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
//    in-batch cosine matrices; a teacher of another dimension is compared
//    through a linear map into its space, started from the ridge fit of the
//    untrained student's vectors and trained at the pooler's rate (kept in
//    the run's state, not in the exported model);
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
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/train/embed_train_options.h"

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

struct EmbedTrainResult {
  int64_t step = 0;
  bool finished = false;
  double initial_val_spearman = 0;  // validation Spearman before the first step
  double val_spearman = 0;          // at the last evaluation
  double sentences_per_second = 0;  // this invocation
};

// The validation pairs' Spearman of the pooled vector and, by name, of each
// side vector a term trains ("rw", "hs_last", "hs_mean", "hs_layers-mean").
struct EmbedValidation {
  double spearman = 0;
  std::map<std::string, double> side;
};

// One training run, in the steps a caller may drive one at a time. A run
// lives in out_dir/train_state: Open starts it or resumes it there, and
// Checkpoint commits it atomically, so a run killed at any moment resumes
// from its last checkpoint with the same draws (step s draws from a
// generator seeded by (seed, s)). Not thread-safe.
class EmbedTrainer {
 public:
  // Checks the options (EmbedTrainOptions::Validate; the pooler fitted to the
  // model when options.pooler.hidden is 0) and the data against the model,
  // then starts a run, or resumes the one in out_dir/train_state (an
  // InvalidArgument when that was written by other data, options or model).
  // `data` must outlive the trainer.
  static Result<std::unique_ptr<EmbedTrainer>> Open(const EmbedTrainData& data, const EmbedTrainOptions& options);
  ~EmbedTrainer();

  // One optimisation step at the schedule's rate: the step's loss terms by
  // name, "loss" their sum and "lr_scale" the schedule's factor.
  // InvalidArgument once the schedule is done.
  Result<std::map<std::string, double>> Step();
  // The validation pairs' Spearman now (no weights change).
  Result<EmbedValidation> Evaluate();
  // Commits the weights, the pooler, the optimizer and the history
  // (state.json) as out_dir/train_state.
  Status Checkpoint();
  // Writes the model folder after the last step: F16 weights, config.json
  // (is_causal false when bidirectional), tokenizer.json, the pooler and
  // embed_training_log.json. InvalidArgument before the last step.
  Status Export();
  // Steps until the schedule ends or this invocation's budget (minutes,
  // stop_after) is spent: logs the loss terms, rate and ETA every 20 steps,
  // evaluates every eval_every, checkpoints every checkpoint_every and at
  // the end, and exports when the schedule is done.
  Result<EmbedTrainResult> Run();

  int64_t step() const;
  const EmbedTrainOptions& options() const;

 private:
  struct Impl;
  explicit EmbedTrainer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// log(idf) per vocabulary entry over `sentences` (token ids), with the
// smoothed idf = ln((1 + N) / (1 + df)) + 1 of the harness's TF-IDF: where
// a weighted pooler's token log-weights start.
std::vector<float> LogIdfTokenWeights(const std::vector<std::vector<int32_t>>& sentences, int64_t vocab);

// Open and Run in one call.
Result<EmbedTrainResult> TrainEmbedding(const EmbedTrainData& data, const EmbedTrainOptions& options);

}  // namespace moeedb
