// Vectors an outside model computed for texts (eval/teacher/minilm.py: the
// all-MiniLM-L6-v2 anchor), looked up by the exact text, so that the
// harness measures such a model with the same tasks and metrics as moeedb's
// own setups. The texts a run needs are the ones `EvalTexts` lists.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace moeedb::eval {

class TextVectors {
 public:
  // `texts_jsonl`: one {"text": ...} object a line; `vectors_f32`: one
  // little-endian float32 row per line, in the same order (the dimension is
  // the file's size over the line count; a file that does not divide evenly
  // is an error). Repeated texts keep their first row.
  static Result<TextVectors> Load(const std::string& texts_jsonl, const std::string& vectors_f32);

  // The row of `text`; NotFound naming the text when the file has none.
  Result<std::vector<float>> Of(const std::string& text) const;
  Result<std::vector<std::vector<float>>> Of(const std::vector<std::string>& texts) const;
  size_t dim() const { return dim_; }
  size_t size() const { return row_.size(); }

 private:
  size_t dim_ = 0;
  std::vector<float> data_;
  std::unordered_map<std::string, size_t> row_;
};

// Every text the three tasks embed, each once, in a fixed order: STS-B dev
// and test, Banking77 train and test, Cranfield documents and queries, read
// from EVAL_DIR/{stsb,banking77,cranfield}.
Result<std::vector<std::string>> EvalTexts(const std::string& eval_dir);

}  // namespace moeedb::eval
