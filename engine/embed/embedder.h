// Embedder: texts (or token ids) -> MoEE vectors, batched by a token budget.
//
// Texts are cleaned and put into the prompt template, tokenised with the
// post-processor's special tokens, sorted by length and packed into batches
// of at most batch_tokens padded tokens; results come back in input order.
// Vectors are raw (not standardised): hs is the final-normed last hidden
// state, rw the router read-out of every MoE layer at the last token.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/model_family.h"
#include "engine/model/pooling.h"
#include "engine/model/prompt.h"
#include "base/status.h"
#include "engine/embed/token_encoder.h"

namespace moeedb {

class MoeModel;

struct EmbedderOptions {
  PromptTemplate prompt = PromptTemplates()[0];  // prompteol
  std::string instruction;                       // empty: none (the reference's no_instruction)
  bool rw_readout_default = true;                // use the family's read-out (logits; probs for DeepSeek)
  RouterReadout rw_readout = RouterReadout::kLogits;
  // Padded tokens per forward pass: larger forwards read each weight once
  // for more rows, and were the fastest per token of 256..16384 for every
  // format and routing mode (docs/perf.md, "Forward size").
  int64_t batch_tokens = 16384;
  HsPooling hs_pooling = HsPooling::kLast;       // MoEE: last token
  RwPooling rw_pooling = RwPooling::kLast;
};

struct Embedding {
  std::vector<float> hs;
  std::vector<float> rw;
  int64_t tokens = 0;  // tokens the model processed for this input
  // With EmbedIds(..., true): each token's final-normed hidden state,
  // tokens x hidden_size, row-major; empty otherwise.
  std::vector<float> token_states;
};

class Embedder {
 public:
  // `model` must outlive the embedder; `encoder` may be null (ids only).
  Embedder(const MoeModel* model, const TokenEncoder* encoder, EmbedderOptions options);

  // The ids the model sees for `text` (prompt applied, special tokens added).
  // Empty or whitespace-only text is an InvalidArgument error.
  Result<std::vector<int32_t>> Tokenize(std::string_view text) const;
  // Tokenize for each text; an InvalidArgument error names the input by index.
  Result<std::vector<std::vector<int32_t>>> TokenizeAll(const std::vector<std::string>& texts) const;
  // Errors name the offending input by index.
  Result<std::vector<Embedding>> EmbedTexts(const std::vector<std::string>& texts) const;
  // Ids are used as they are: no template, no special tokens.
  // With token_states, each Embedding also holds every token's hidden state.
  Result<std::vector<Embedding>> EmbedIds(const std::vector<std::vector<int32_t>>& ids, bool token_states = false) const;

  RouterReadout rw_readout() const;
  // InvalidArgument ("no token ids", "token id N is outside the vocabulary
  // [0, V)") unless `ids` is a non-empty sequence of the model's ids.
  Status CheckIds(const std::vector<int32_t>& ids) const;
  // CheckIds for each list; the error names the first bad one by index
  // ("input I: ...").
  Status CheckAllIds(const std::vector<std::vector<int32_t>>& ids) const;
  const EmbedderOptions& options() const { return options_; }

 private:
  const MoeModel* model_;
  const TokenEncoder* encoder_;
  EmbedderOptions options_;
};

}  // namespace moeedb
