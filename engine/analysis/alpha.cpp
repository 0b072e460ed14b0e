#include "engine/analysis/alpha.h"

#include <cmath>

namespace moeedb {

AlphaChoice ChooseAlphaLabelFree(const std::vector<double>& cos_hs, const std::vector<double>& cos_rw, double max_alpha,
                                 double step) {
  AlphaChoice best;
  best.objective = -1e300;
  const int steps = static_cast<int>(std::floor(max_alpha / step + 1e-9));
  std::vector<double> fused(cos_hs.size());
  for (int i = 0; i <= steps; ++i) {
    const double alpha = i * step;
    for (size_t j = 0; j < fused.size(); ++j) fused[j] = cos_hs[j] + alpha * cos_rw[j];
    const double obj = Spearman(fused, cos_hs) + Spearman(fused, cos_rw);
    if (obj > best.objective + 1e-12) best = {alpha, obj};
  }
  return best;
}

}  // namespace moeedb
