// Rank statistics shared by the trainer's validation, the label-free alpha
// and the evaluation harness.
#pragma once

#include <vector>

namespace moeedb {

// Spearman rank correlation with average ranks for ties; 0 when either side
// is constant (undefined correlation).
double Spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace moeedb
