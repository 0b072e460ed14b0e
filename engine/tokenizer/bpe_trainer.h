// BpeTrainer: learns a byte-level BPE vocabulary from text and writes it as a
// HuggingFace tokenizer.json that BpeTokenizer (and the `tokenizers` library)
// load: NFC normaliser, ByteLevel pre-tokenizer with the GPT-2 regex, the 256
// byte symbols, then one token per merge, most frequent pair first.
//
// Training follows the tokenizers library's BpeTrainer: words are the
// pre-tokenizer's pieces, counted; each round merges the most frequent
// adjacent pair over all words (ties: the pair whose symbols were created
// first), until the vocabulary is full or no pair occurs min_frequency times.
// The result depends only on the text, never on thread timing or hash order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace moeedb {

struct BpeTrainerOptions {
  int64_t vocab_size = 8192;   // specials + 256 bytes + merges
  int64_t min_frequency = 2;   // a pair seen fewer times is never merged
  // Added (special) tokens, ids 0.. in this order. The first is the
  // end-of-text token models are trained with.
  std::vector<std::string> special_tokens = {"<|endoftext|>", "<|padding|>"};
};

struct BpeTrainingStats {
  int64_t words = 0;         // pre-tokenizer pieces counted
  int64_t unique_words = 0;
  int64_t merges = 0;
  int64_t vocab_size = 0;    // may be below the target when the text runs out of pairs
};

class BpeTrainer {
 public:
  explicit BpeTrainer(BpeTrainerOptions options);
  ~BpeTrainer();

  // Counts the words of `text` (any size; call as often as needed). Invalid
  // UTF-8 is an InvalidArgument error and counts nothing from this call.
  Status AddText(std::string_view text);
  // Learns the merges and returns the tokenizer.json text.
  Result<std::string> Train(BpeTrainingStats* stats = nullptr);

 private:
  struct Regex;
  BpeTrainerOptions options_;
  std::unique_ptr<Regex> regex_;
  std::unordered_map<std::string, int64_t> word_counts_;
  int64_t words_ = 0;
};

}  // namespace moeedb
