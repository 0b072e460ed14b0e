// The trained pooler written from its definition with plain loops in
// double precision: the reference the engine's pooler and the trainer's
// output are checked against (tests/engine/trained_pooler_test.cpp,
// embed_train_test.cpp).
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "engine/model/trained_pooler.h"

namespace moeedb::test {

using Mat = std::vector<std::vector<double>>;

inline std::vector<double> ToVec(const at::Tensor& t) {
  at::Tensor d = t.to(at::kDouble).contiguous();
  return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
}

// y = W x for W [out, in] stored row-major.
inline std::vector<double> MatVec(const std::vector<double>& w, int64_t out, int64_t in, const std::vector<double>& x) {
  std::vector<double> y(out, 0.0);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) y[o] += w[o * in + i] * x[i];
  return y;
}

inline std::vector<double> RmsNormRef(const std::vector<double>& x, const std::vector<double>& w) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss / x.size() + 1e-6);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = w[i] * x[i] * r;
  return y;
}

inline double GeluRef(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

// The pooler of one text, written from its definition with plain loops.
inline std::vector<double> PoolerRef(const PoolerSpec& s, const std::map<std::string, at::Tensor>& w, const Mat& layer_rows,
                              const Mat& router_rows, const std::vector<double>& lexical = {}) {
  std::map<std::string, std::vector<double>> W;
  for (const auto& [k, v] : w) W[k] = ToVec(v);
  const int64_t H = s.hidden, nh = s.heads, hd = H / nh, n = s.latents, F = s.ffn;
  Mat x = layer_rows;
  for (const auto& r : router_rows) x.push_back(MatVec(W["router_proj"], H, s.router_dim, r));
  const int64_t R = static_cast<int64_t>(x.size());
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t i = 0; i < H; ++i) x[r][i] += W["row_pos"][r * H + i];
    x[r] = RmsNormRef(x[r], W["kv_norm"]);
  }
  Mat k(R), v(R);
  for (int64_t r = 0; r < R; ++r) {
    k[r] = MatVec(W["k"], H, H, x[r]);
    v[r] = MatVec(W["v"], H, H, x[r]);
  }
  std::vector<double> mean(H, 0.0);
  for (int64_t l = 0; l < n; ++l) {
    std::vector<double> lat(W["latents"].begin() + l * H, W["latents"].begin() + (l + 1) * H);
    std::vector<double> q = MatVec(W["q"], H, H, lat), att(H, 0.0);
    for (int64_t h = 0; h < nh; ++h) {
      std::vector<double> sc(R);
      double mx = -1e300;
      for (int64_t r = 0; r < R; ++r) {
        double d = 0;
        for (int64_t j = 0; j < hd; ++j) d += q[h * hd + j] * k[r][h * hd + j];
        sc[r] = d / std::sqrt(static_cast<double>(hd));
        mx = std::max(mx, sc[r]);
      }
      double z = 0;
      for (auto& e : sc) z += (e = std::exp(e - mx));
      for (int64_t r = 0; r < R; ++r)
        for (int64_t j = 0; j < hd; ++j) att[h * hd + j] += sc[r] / z * v[r][h * hd + j];
    }
    std::vector<double> o = MatVec(W["o"], H, H, att), zl(H);
    for (int64_t i = 0; i < H; ++i) zl[i] = lat[i] + o[i];
    std::vector<double> g = MatVec(W["ffn_in"], 2 * F, H, RmsNormRef(zl, W["ffn_norm"])), act(F);
    for (int64_t f = 0; f < F; ++f) act[f] = GeluRef(g[f]) * g[F + f];
    std::vector<double> down = MatVec(W["ffn_out"], H, F, act);
    for (int64_t i = 0; i < H; ++i) mean[i] += (zl[i] + down[i]) / static_cast<double>(n);
  }
  std::vector<double> out = MatVec(W["out"], s.out_dim, H, RmsNormRef(mean, W["out_norm"]));
  if (s.lexical_dim == 0) return out;
  // [n / |n|; gain * l / |l|]
  auto unit = [](std::vector<double> v) {
    double n = 0;
    for (double x : v) n += x * x;
    for (double& x : v) x /= std::sqrt(n);
    return v;
  };
  out = unit(out);
  for (double x : unit(lexical)) out.push_back(W["lexical_gain"][0] * x);
  return out;
}

inline std::map<std::string, at::Tensor> RandomPooler(const PoolerSpec& s, uint64_t seed) {
  at::manual_seed(seed);
  std::map<std::string, at::Tensor> w;
  // Larger than the training initialisation, so attention is far from uniform.
  for (const auto& t : PoolerTensors(s))
    w[t.name] = t.init_std == 0 ? 1.0 + 0.1 * at::randn(t.shape) : 0.3 * at::randn(t.shape);
  return w;
}

}  // namespace moeedb::test
