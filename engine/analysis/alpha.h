// Label-free choice of alpha for score = cos_HS + alpha * cos_RW (method.md
// A.4): on unlabeled pairs, the alpha in a grid over [0, 3] that maximises
// rho(s_f, s_HS) + rho(s_f, s_RW), rho = Spearman. An interpretation of the
// camera-ready's description; the authors' tuning code is not released.
#pragma once

#include <vector>

#include "base/statistics.h"

namespace moeedb {

struct AlphaChoice {
  double alpha = 1.0;
  double objective = 0;  // rho(s_f, s_HS) + rho(s_f, s_RW) at alpha
};

// Grid 0, step, 2*step, ..., max_alpha; the first best wins ties.
AlphaChoice ChooseAlphaLabelFree(const std::vector<double>& cos_hs, const std::vector<double>& cos_rw,
                                 double max_alpha = 3.0, double step = 0.05);

}  // namespace moeedb
