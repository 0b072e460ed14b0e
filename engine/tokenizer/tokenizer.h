// What the service layer and the front ends need from a model folder's
// tokenizer.json, whichever algorithm it holds: the byte-level BPE of the
// decoder families (bpe_tokenizer.h) or BERT's WordPiece (wordpiece_tokenizer.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/embed/token_encoder.h"

namespace moeedb {

class Tokenizer : public TokenEncoder {
 public:
  // Text back from ids (added tokens as their content). Unknown ids are an error.
  virtual Result<std::string> Decode(const std::vector<int32_t>& ids) const = 0;
  // The id of a vocabulary entry or an added token, if it is one.
  virtual std::optional<int32_t> TokenId(const std::string& token) const = 0;
  // Whether `id` is an added (special) token such as [CLS] or <|endoftext|>.
  virtual bool IsAdded(int32_t id) const = 0;
};

// The tokenizer a tokenizer.json describes, chosen by its model type (BPE or
// WordPiece). NotFound when the file is missing; NotSupported for another
// model type, naming it.
Result<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path);

}  // namespace moeedb
