// The one thing the embedder needs from a tokenizer. The BPE tokenizer
// (engine/tokenizer) implements it; engine-only builds can embed token ids.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace moeedb {

class TokenEncoder {
 public:
  virtual ~TokenEncoder() = default;
  // Token ids for `text`; with add_special, the post-processor's BOS/EOS.
  // Invalid UTF-8 is an InvalidArgument error.
  virtual Result<std::vector<int32_t>> Encode(std::string_view text, bool add_special) const = 0;
  virtual int64_t vocab_size() const = 0;
};

}  // namespace moeedb
