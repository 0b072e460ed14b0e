// Pooling of a text's token vectors into its HS and RW embeddings.
#pragma once

#include <string>

namespace moeedb {

// How a text's vectors are pooled over its tokens (the MoEE paper's Table 5
// ablation and the training-free form of multi-layer pooling).
enum class HsPooling {
  kLast,        // final-normed hidden state of the last token (MoEE, PromptEOL)
  kMean,        // final-normed hidden states averaged over the text's tokens
  kLayersMean,  // the mean over decoder layers of final_norm(layer output), each layer read at
                //   the last token (causal attention) or averaged over tokens (bidirectional)
  kTrained,     // the model folder's trained pooler (trained_pooler.h) over every layer's states
};
enum class RwPooling {
  kLast,  // router logits of the last token
  kMean,  // router logits averaged over the text's tokens
};
const char* HsPoolingName(HsPooling p);
const char* RwPoolingName(RwPooling p);
// "last" | "mean" | "layers-mean" | "trained" (HS), "last" | "mean" (RW); false if unknown.
bool ParseHsPooling(const std::string& name, HsPooling* out);
bool ParseRwPooling(const std::string& name, RwPooling* out);

}  // namespace moeedb
