// A byte-level BPE tokenizer read from a HuggingFace tokenizer.json.
//
// Encode() follows the tokenizers library's pipeline: added/special tokens
// are split out of the raw text first (leftmost-longest), the rest is
// normalised (NFC, ...), pre-tokenised (ByteLevel with the GPT-2 regex, or
// Split with the file's own regex, e.g. Qwen's), byte-mapped, merged by
// rank, and finally the post-processor adds the template's special tokens.
// Unsupported components in the file are an error at load, not a silent
// difference at encode time.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "engine/tokenizer/tokenizer.h"

namespace moeedb {

class BpeTokenizer final : public Tokenizer {
 public:
  static Result<std::unique_ptr<BpeTokenizer>> FromFile(const std::string& path);
  static Result<std::unique_ptr<BpeTokenizer>> FromJson(const std::string& json_text, const std::string& source);
  ~BpeTokenizer() override;

  // Invalid UTF-8 is an InvalidArgument error naming the byte offset.
  // An empty text gives no ids (plus the template's specials if asked).
  Result<std::vector<int32_t>> Encode(std::string_view text, bool add_special) const override;
  // Bytes back from ids (added tokens as their content). Unknown ids are an error.
  Result<std::string> Decode(const std::vector<int32_t>& ids) const override;
  // 1 + the largest id in the vocabulary or the added tokens.
  int64_t vocab_size() const override { return vocab_size_; }
  std::optional<int32_t> TokenId(const std::string& token) const override;
  // Whether `id` is an added (special) token such as <|endoftext|>.
  bool IsAdded(int32_t id) const override;

  struct Impl;

 private:
  BpeTokenizer();
  std::unique_ptr<Impl> impl_;
  int64_t vocab_size_ = 0;
};

}  // namespace moeedb
