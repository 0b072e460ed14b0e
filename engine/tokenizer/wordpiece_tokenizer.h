// BERT's WordPiece tokenizer read from a HuggingFace tokenizer.json.
//
// Encode() follows the tokenizers library's pipeline for BERT files:
// added tokens ([CLS], [SEP], ...) are split out of the raw text first, the
// rest goes through BertNormalizer (control characters dropped, whitespace
// made spaces, spaces around CJK ideographs, lowercase, accents stripped
// after NFD), BertPreTokenizer (split at whitespace, each punctuation
// character a word of its own), then WordPiece (greedy longest match, "##"
// continuations, [UNK] for a word with no split or over
// max_input_chars_per_word characters). The file's "truncation" keeps the
// first max_length - 2 pieces of a longer text, as the library does before
// the template adds [CLS] and [SEP]. Lowercasing is ICU's simple case
// mapping per code point (the library uses Rust's full mapping: the two
// differ only for a few characters such as U+0130).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "engine/tokenizer/tokenizer.h"

namespace moeedb {

class WordPieceTokenizer final : public Tokenizer {
 public:
  static Result<std::unique_ptr<WordPieceTokenizer>> FromJson(const std::string& json_text, const std::string& source);
  ~WordPieceTokenizer() override;

  // Invalid UTF-8 is an InvalidArgument error. With add_special, the
  // template's [CLS] ... [SEP]; without, the pieces alone.
  Result<std::vector<int32_t>> Encode(std::string_view text, bool add_special) const override;
  // Pieces joined by spaces, "##" continuations glued to the piece before,
  // each piece then cleaned as the library's WordPiece decoder does (" ." to
  // ".", " 's" to "'s", ...: per piece, so "don ' t" stays).
  Result<std::string> Decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  std::optional<int32_t> TokenId(const std::string& token) const override;
  bool IsAdded(int32_t id) const override;

  struct Impl;

 private:
  WordPieceTokenizer();
  std::unique_ptr<Impl> impl_;
  int64_t vocab_size_ = 0;
};

}  // namespace moeedb
