// TF-IDF cosine: the lexical baseline of the harness. Terms are lower-cased
// runs of ASCII letters and digits; weights are (1 + ln tf) * ln((1 + N) /
// (1 + df)) + 1 (smoothed idf, as scikit-learn's default), L2-normalised.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

namespace moeedb::eval {

using SparseVector = std::vector<std::pair<int, float>>;  // (term id, weight), sorted by term

class TfIdf {
 public:
  // Document frequencies from `corpus` (the texts the baseline may see).
  explicit TfIdf(const std::vector<std::string>& corpus);
  // Unit-length vector of `text` (terms unseen in the corpus get the largest idf).
  SparseVector Vector(const std::string& text) const;
  static float Cosine(const SparseVector& a, const SparseVector& b);
  static std::vector<std::string> Terms(const std::string& text);

 private:
  std::unordered_map<std::string, int> term_id_;
  std::vector<float> idf_;
  float unseen_idf_ = 1;
  mutable std::unordered_map<std::string, int> unseen_;  // ids for terms outside the corpus
};

}  // namespace moeedb::eval
