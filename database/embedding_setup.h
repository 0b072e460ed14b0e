// EmbeddingSetup: a model, its tokenizer and an embedder configured the way
// a collection was built (model folder and weight fingerprint, routing
// policy, prompt), plus the standardization statistics fitted on a fixed
// calibration text set, so that an embedding is a pure function of the text.
// A collection records Info(); queries and later ingests must use the same.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/embed/embed_workers.h"
#include "engine/embed/embedder.h"
#include "engine/model/model.h"
#include "base/status.h"
#include "engine/tokenizer/tokenizer.h"
#include "database/spec/embedding_spec.h"
#include "database/vector_collection.h"

namespace moeedb {

class EmbeddingSetup {
 public:
  static Result<std::unique_ptr<EmbeddingSetup>> Load(const EmbeddingSpec& config);

  // {"model_dir", "model_fingerprint", "model_type", "routing", "prompt", "rw_readout", "dim_hs", "dim_rw"}
  std::string InfoJson() const;
  // InvalidArgument naming each difference ("model", "routing", "prompt", ...)
  // between this setup and a collection's recorded info.
  Status CheckMatches(const std::string& collection_info_json) const;

  Result<std::vector<Embedding>> Embed(const std::vector<std::string>& texts) const;
  // Standardizer statistics (JSON) for HS and RW, fitted on the calibration
  // texts: read from the model folder's standardization.json when that file
  // was written for exactly this setup (model weights, routing, prompt,
  // pooling, read-out), else computed (64 texts through the model).
  Result<std::pair<std::string, std::string>> CalibrationStats() const;
  // The options of a new collection embedded with this setup, given its
  // calibration statistics (CalibrationStats()): dims, statistics, the
  // recorded info and the model's default alpha. Index kinds and lexical
  // settings keep their defaults for the caller to change.
  CollectionOptions NewCollectionOptions(const std::pair<std::string, std::string>& stats) const;
  // The content of a standardization.json for this setup (always computed).
  Result<std::string> CalibrationFileJson() const;
  static constexpr const char* kStandardizationFile = "standardization.json";

  // Whether HS is z-scored before the cosine (by collections, with the
  // calibration statistics, and by the harness): yes for the training-free
  // poolings (method.md A.3); no for a trained pooler, whose output was
  // trained for the raw cosine (z-scoring its 1024 dimensions with 64
  // calibration texts only adds noise: docs/eval.md).
  bool standardizes_hs() const { return config_.hs_pooling != "trained"; }
  // The ids the model sees for `text` (prompt applied, special tokens added).
  Result<std::vector<int32_t>> Tokenize(const std::string& text) const { return embedder_->Tokenize(text); }
  const Embedder& embedder() const { return *embedder_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const EmbeddingSpec& config() const { return config_; }
  // The default alpha of a new collection: the model folder's (model_defaults.h).
  double default_alpha() const { return default_alpha_; }
  const std::string& routing() const { return routing_canonical_; }
  const MoeModel& model() const { return *model_; }
  // For analyses that watch the forward pass through taps (MoE Lens); not
  // while another thread embeds with this setup.
  MoeModel& mutable_model() { return *model_; }
  size_t dim_hs() const;
  size_t dim_rw() const;

 private:
  EmbeddingSetup() = default;
  Result<std::pair<std::string, std::string>> ComputeCalibrationStats() const;
  EmbeddingSpec config_;
  std::unique_ptr<MoeModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Embedder> embedder_;
  std::unique_ptr<EmbedWorkers> workers_;  // Embed() calls are serialised by it
  std::string fingerprint_, routing_canonical_;
  std::string experts_;  // the routed experts, as InfoJson records them
  double default_alpha_ = 1.0;
};

// The fixed calibration texts (varied English sentences).
const std::vector<std::string>& CalibrationTexts();

}  // namespace moeedb
