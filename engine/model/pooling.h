// Pooling of a text's token vectors into its HS and RW embeddings.
#pragma once

#include "base/enum_table.h"

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
inline constexpr EnumTable<HsPooling, 4> kHsPoolings{"HS pooling",
                                                     {{{HsPooling::kLast, "last"},
                                                       {HsPooling::kMean, "mean"},
                                                       {HsPooling::kLayersMean, "layers-mean"},
                                                       {HsPooling::kTrained, "trained"}}}};
inline constexpr EnumTable<RwPooling, 2> kRwPoolings{"RW pooling", {{{RwPooling::kLast, "last"}, {RwPooling::kMean, "mean"}}}};

}  // namespace moeedb
