// Ranking and classification metrics of the evaluation harness, each with the
// textbook definition (comments give it), so the numbers compare with
// published ones.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace moeedb::eval {

// nDCG@k with graded gains: DCG = sum_{i<k} (2^g_i - 1) / log2(i + 2) over the
// ranking, divided by the DCG of the ideal ordering of the judged gains.
// 0 when the query has no relevant document.
double NdcgAt(const std::vector<std::string>& ranking, const std::map<std::string, int>& gains, size_t k);
// 1 / rank of the first relevant document within the top k, else 0.
double MrrAt(const std::vector<std::string>& ranking, const std::map<std::string, int>& gains, size_t k);
// Fraction of the relevant documents found in the top k (0 when none is relevant).
double RecallAt(const std::vector<std::string>& ranking, const std::map<std::string, int>& gains, size_t k);

// Majority label among the k nearest neighbours (ties: the label with the
// larger summed similarity, then the nearest). `neighbours` are (similarity,
// label index) sorted by decreasing similarity.
int KnnVote(const std::vector<std::pair<float, int>>& neighbours, size_t k);

}  // namespace moeedb::eval
