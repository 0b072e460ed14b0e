#include "index/mmr.h"

#include <algorithm>
#include <limits>

namespace moeedb {

std::vector<size_t> SelectMmr(const std::vector<double>& relevance, const std::function<double(size_t, size_t)>& similarity,
                              size_t k, double diversity) {
  const size_t n = relevance.size();
  std::vector<size_t> picked;
  std::vector<bool> taken(n, false);
  // Each candidate's largest similarity to the picks so far, updated per pick.
  std::vector<double> closest(n, -std::numeric_limits<double>::infinity());
  while (picked.size() < std::min(k, n)) {
    size_t best = n;
    double best_score = -std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < n; ++i) {
      if (taken[i]) continue;
      const double penalty = picked.empty() ? 0.0 : closest[i];
      const double score = (1 - diversity) * relevance[i] - diversity * penalty;
      if (best == n || score > best_score) {
        best = i;
        best_score = score;
      }
    }
    taken[best] = true;
    picked.push_back(best);
    for (size_t i = 0; i < n; ++i)
      if (!taken[i]) closest[i] = std::max(closest[i], similarity(i, best));
  }
  return picked;
}

}  // namespace moeedb
