#include "engine/model/spectral_router.h"

#include <ATen/ATen.h>

#include "engine/model/moe_block.h"

namespace moeedb {

at::Tensor SpectralCentroid(const at::Tensor& m_in, const at::Tensor& router_row, int k, RoutingPolicy::Sign sign) {
  at::Tensor m = m_in.to(at::kDouble);
  at::Tensor r = router_row.to(at::kDouble);
  const int64_t rows = m.size(0), cols = m.size(1);
  at::Tensor v;  // [H, rank]: right singular vectors with non-zero singular value
  if (sign == RoutingPolicy::Sign::kReference) {
    auto [u, s, vh] = at::linalg_svd(m, /*full_matrices=*/false);
    const double tol = s.max().item<double>() * 1e-10;
    v = vh.transpose(0, 1).index({at::indexing::Slice(), s > tol});
  } else if (rows <= cols) {
    auto [lambda, u] = at::linalg_eigh(at::matmul(m, m.transpose(0, 1)));  // ascending
    const double tol = lambda.max().item<double>() * 1e-12;
    at::Tensor keep = lambda > tol;
    at::Tensor sigma = lambda.index({keep}).sqrt();
    v = at::matmul(m.transpose(0, 1), u.index({at::indexing::Slice(), keep})) / sigma;
  } else {
    auto [lambda, vv] = at::linalg_eigh(at::matmul(m.transpose(0, 1), m));
    const double tol = lambda.max().item<double>() * 1e-12;
    v = vv.index({at::indexing::Slice(), lambda > tol});
  }
  at::Tensor dots = at::matmul(r, v);  // [rank]
  at::Tensor score;
  if (sign == RoutingPolicy::Sign::kCanonical) {
    at::Tensor flip = at::where(dots < 0, -at::ones_like(dots), at::ones_like(dots));
    v = v * flip;
    score = dots.abs();
  } else {
    score = dots;
  }
  const int64_t take = std::min<int64_t>(k, v.size(1));
  at::Tensor idx = std::get<1>(score.topk(take));
  return v.index_select(1, idx).mean(1).to(at::kFloat);
}

at::Tensor SpectralCentroids(const MoeBlock& block, int k, RoutingPolicy::Sign sign) {
  const int64_t E = block.spec().num_experts, I = block.spec().expert_intermediate;
  std::vector<at::Tensor> out;
  for (int64_t e = 0; e < E; ++e) {
    const at::Tensor& gu = block.expert_gate_up(e);
    at::Tensor r = block.router()[e];
    // The mean over the expert's matrices: gate, up and down for SwiGLU; up and down for GELU.
    at::Tensor down = SpectralCentroid(block.expert_down(e).transpose(0, 1), r, k, sign);
    if (block.expert_mlp() == ExpertMlp::kSwiGlu) {
      out.push_back((SpectralCentroid(gu.narrow(0, 0, I), r, k, sign) + SpectralCentroid(gu.narrow(0, I, I), r, k, sign) +
                     down) / 3.0);
    } else {
      out.push_back((SpectralCentroid(gu, r, k, sign) + down) / 2.0);
    }
  }
  return at::stack(out, 0);
}

}  // namespace moeedb
