#include "index/fusion.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace moeedb {

Status FusionOptions::Validate() const {
  for (double w : {w_hs, w_rw, w_lex})
    if (!std::isfinite(w) || w < 0) return Status::InvalidArgument("fusion weights must be finite and >= 0");
  if (w_hs == 0 && w_rw == 0 && w_lex == 0) return Status::InvalidArgument("at least one fusion weight must be positive");
  if (rrf_k < kMinRrfK || rrf_k > kMaxRrfK)
    return Status::InvalidArgument("rrf k must be in [" + std::to_string(kMinRrfK) + ", " + std::to_string(kMaxRrfK) + "]");
  return Status::OK();
}

namespace {

double FusedCandidate::*const kSignals[3] = {&FusedCandidate::hs, &FusedCandidate::rw, &FusedCandidate::lex};
double FusedCandidate::*const kParts[3] = {&FusedCandidate::part_hs, &FusedCandidate::part_rw, &FusedCandidate::part_lex};

// The signal normalised over the candidates, in candidate order.
std::vector<double> Normalise(const std::vector<FusedCandidate>& c, double FusedCandidate::*s, ScoreNorm norm) {
  std::vector<double> out(c.size(), 0.0);
  if (c.empty()) return out;
  if (norm == ScoreNorm::kMinMax) {
    double lo = c[0].*s, hi = c[0].*s;
    for (const auto& x : c) lo = std::min(lo, x.*s), hi = std::max(hi, x.*s);
    if (hi > lo)
      for (size_t i = 0; i < c.size(); ++i) out[i] = (c[i].*s - lo) / (hi - lo);
    return out;
  }
  double mean = 0;
  for (const auto& x : c) mean += x.*s;
  mean /= c.size();
  double var = 0;
  for (const auto& x : c) var += (x.*s - mean) * (x.*s - mean);
  const double sd = std::sqrt(var / c.size());
  if (sd > 0)
    for (size_t i = 0; i < c.size(); ++i) out[i] = (c[i].*s - mean) / sd;
  return out;
}

}  // namespace

void Fuse(const FusionOptions& o, std::vector<FusedCandidate>* cands) {
  auto& c = *cands;
  const double w[3] = {o.w_hs, o.w_rw, o.w_lex};
  for (auto& x : c) x.fused = x.part_hs = x.part_rw = x.part_lex = 0;
  for (int s = 0; s < 3; ++s) {
    if (w[s] == 0) continue;
    if (o.kind == FusionKind::kWeighted) {
      const std::vector<double> n = Normalise(c, kSignals[s], o.norm);
      for (size_t i = 0; i < c.size(); ++i) c[i].*kParts[s] = w[s] * n[i];
      continue;
    }
    std::vector<size_t> order(c.size());
    std::iota(order.begin(), order.end(), size_t{0});
    auto sig = kSignals[s];
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return c[a].*sig != c[b].*sig ? c[a].*sig > c[b].*sig : c[a].id < c[b].id;
    });
    for (size_t r = 0; r < order.size(); ++r) {
      FusedCandidate& x = c[order[r]];
      if (s == 2 && x.lex <= 0) continue;  // no query word: not retrieved lexically
      x.*kParts[s] = w[s] / (o.rrf_k + static_cast<double>(r + 1));
    }
  }
  for (auto& x : c) x.fused = x.part_hs + x.part_rw + x.part_lex;
  std::sort(c.begin(), c.end(), [](const FusedCandidate& a, const FusedCandidate& b) {
    return a.fused != b.fused ? a.fused > b.fused : a.id < b.id;
  });
}

std::vector<double> FuseLists(ListFusion kind, const std::vector<std::vector<RankedItem>>& lists, size_t keys, int rrf_k) {
  std::vector<double> fused(keys, 0.0);
  for (const auto& list : lists) {
    if (kind == ListFusion::kRrf) {
      for (size_t pos = 0; pos < list.size(); ++pos) fused[list[pos].key] += 1.0 / (static_cast<double>(pos) + rrf_k);
      continue;
    }
    if (list.empty()) continue;
    if (list.size() == 1) {
      fused[list[0].key] += 0.5;
      continue;
    }
    double mean = 0, var = 0;
    for (const auto& x : list) mean += x.score;
    mean /= list.size();
    for (const auto& x : list) var += (x.score - mean) * (x.score - mean);
    const double sd = std::sqrt(var / (list.size() - 1));  // the sample deviation, as Qdrant's
    const double lo = mean - 3 * sd, hi = mean + 3 * sd;
    for (const auto& x : list) fused[x.key] += hi > lo ? (x.score - lo) / (hi - lo) : 0.5;
  }
  return fused;
}

}  // namespace moeedb
