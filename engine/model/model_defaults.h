// The embedding settings a model folder asks for when the user chooses none:
// DIR/embedding.json ({"prompt": ..., "hs_pooling": ..., "rw_pooling": ...,
// "alpha": ...}, each optional; alpha is the default weight of cos_RW for a
// new collection, chosen on a dev split). Without the file (or a field), a folder with a trained
// pooler defaults to HS pooling "trained"; an encoder family (bert_moe) to
// no prompt and mean pooling (raw, mean, mean); everything else to the MoEE
// reference setup (prompteol, last, last).
#pragma once

#include <string>

#include "base/status.h"

namespace moeedb {

struct EmbeddingDefaults {
  std::string prompt = "prompteol";
  std::string hs_pooling = "last";
  std::string rw_pooling = "last";
  double alpha = 1.0;
};

// Corruption if embedding.json exists but is not a JSON object of those
// fields (strings; alpha a finite number).
Result<EmbeddingDefaults> ModelEmbeddingDefaults(const std::string& model_dir);

}  // namespace moeedb
