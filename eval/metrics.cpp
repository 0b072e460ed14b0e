#include "eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace moeedb::eval {

double NdcgAt(const std::vector<std::string>& ranking, const std::map<std::string, int>& gains, size_t k) {
  auto gain = [](int g) { return std::pow(2.0, g) - 1.0; };
  double dcg = 0;
  for (size_t i = 0; i < std::min(k, ranking.size()); ++i) {
    auto it = gains.find(ranking[i]);
    if (it != gains.end() && it->second > 0) dcg += gain(it->second) / std::log2(static_cast<double>(i) + 2.0);
  }
  std::vector<int> ideal;
  for (const auto& [id, g] : gains)
    if (g > 0) ideal.push_back(g);
  std::sort(ideal.rbegin(), ideal.rend());
  double idcg = 0;
  for (size_t i = 0; i < std::min(k, ideal.size()); ++i) idcg += gain(ideal[i]) / std::log2(static_cast<double>(i) + 2.0);
  return idcg > 0 ? dcg / idcg : 0;
}

double MrrAt(const std::vector<std::string>& ranking, const std::map<std::string, int>& gains, size_t k) {
  for (size_t i = 0; i < std::min(k, ranking.size()); ++i) {
    auto it = gains.find(ranking[i]);
    if (it != gains.end() && it->second > 0) return 1.0 / static_cast<double>(i + 1);
  }
  return 0;
}

double RecallAt(const std::vector<std::string>& ranking, const std::map<std::string, int>& gains, size_t k) {
  size_t relevant = 0, found = 0;
  for (const auto& [id, g] : gains) relevant += g > 0;
  if (relevant == 0) return 0;
  for (size_t i = 0; i < std::min(k, ranking.size()); ++i) {
    auto it = gains.find(ranking[i]);
    found += it != gains.end() && it->second > 0;
  }
  return static_cast<double>(found) / static_cast<double>(relevant);
}

int KnnVote(const std::vector<std::pair<float, int>>& neighbours, size_t k) {
  std::unordered_map<int, std::pair<int, double>> votes;  // label -> (count, summed similarity)
  const size_t n = std::min(k, neighbours.size());
  for (size_t i = 0; i < n; ++i) {
    auto& v = votes[neighbours[i].second];
    ++v.first;
    v.second += neighbours[i].first;
  }
  int best = n > 0 ? neighbours[0].second : -1;
  for (size_t i = 0; i < n; ++i) {  // visiting in neighbour order makes "nearest" the last tie-break
    const int label = neighbours[i].second;
    const auto& v = votes[label], &b = votes[best];
    if (v.first > b.first || (v.first == b.first && v.second > b.second)) best = label;
  }
  return best;
}

}  // namespace moeedb::eval
