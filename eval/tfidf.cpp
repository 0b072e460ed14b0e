#include "eval/tfidf.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <unordered_set>

namespace moeedb::eval {

std::vector<std::string> TfIdf::Terms(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (unsigned char ch : text) {
    if (std::isalnum(ch)) {
      cur.push_back(static_cast<char>(std::tolower(ch)));
    } else if (!cur.empty()) {
      out.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

TfIdf::TfIdf(const std::vector<std::string>& corpus) {
  std::vector<int> df;
  for (const auto& text : corpus) {
    std::unordered_set<std::string> seen;
    for (auto& t : Terms(text)) {
      if (!seen.insert(t).second) continue;
      auto [it, fresh] = term_id_.emplace(t, static_cast<int>(df.size()));
      if (fresh) df.push_back(0);
      ++df[it->second];
    }
  }
  const double n = static_cast<double>(corpus.size());
  for (int d : df) idf_.push_back(static_cast<float>(std::log((1.0 + n) / (1.0 + d)) + 1.0));
  unseen_idf_ = static_cast<float>(std::log(1.0 + n) + 1.0);
}

SparseVector TfIdf::Vector(const std::string& text) const {
  std::map<int, int> tf;
  for (const auto& t : Terms(text)) {
    auto it = term_id_.find(t);
    int id;
    if (it != term_id_.end()) {
      id = it->second;
    } else {
      auto [u, fresh] = unseen_.emplace(t, static_cast<int>(idf_.size() + unseen_.size()));
      id = u->second;
    }
    ++tf[id];
  }
  SparseVector v;
  double norm = 0;
  for (const auto& [id, count] : tf) {
    const float idf = id < static_cast<int>(idf_.size()) ? idf_[id] : unseen_idf_;
    const float w = static_cast<float>((1.0 + std::log(static_cast<double>(count))) * idf);
    v.emplace_back(id, w);
    norm += static_cast<double>(w) * w;
  }
  if (norm > 0)
    for (auto& [id, w] : v) w = static_cast<float>(w / std::sqrt(norm));
  return v;
}

float TfIdf::Cosine(const SparseVector& a, const SparseVector& b) {
  double dot = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i].first == b[j].first) {
      dot += static_cast<double>(a[i].second) * b[j].second;
      ++i;
      ++j;
    } else if (a[i].first < b[j].first) {
      ++i;
    } else {
      ++j;
    }
  }
  return static_cast<float>(dot);
}

}  // namespace moeedb::eval
