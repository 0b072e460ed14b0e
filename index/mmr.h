// Maximal marginal relevance (Carbonell and Goldstein, 1998) as Qdrant's
// query API applies it: from the candidates of a nearest-neighbour search,
// pick up to k one at a time, each the candidate that maximises
//   (1 - diversity) * relevance(c) - diversity * max over picked p of similarity(c, p)
// (the first pick is the most relevant). diversity 0 keeps the relevance
// order; 1 spreads the picks as far apart as the candidates allow.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace moeedb {

// Indexes into `relevance`, in pick order; ties go to the earlier candidate.
// `similarity(i, j)` is called only for i != j, at most k * n times.
std::vector<size_t> SelectMmr(const std::vector<double>& relevance, const std::function<double(size_t, size_t)>& similarity,
                              size_t k, double diversity);

}  // namespace moeedb
