#include "engine/kernels/router_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <numeric>

#include "engine/kernels/vector_exp.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace moeedb {

namespace {

constexpr int64_t kPad = 16;  // experts per AVX-512 vector; the AVX2 path reads half

#if defined(__x86_64__)

// Rows [0, R) of x (hidden H, rows H apart) against experts [c0, c0 + 16 V)
// of wt ([H][P]); writes the experts below E. Each lane is one row's chain of
// FMAs over h in order, so it equals the scalar loop bit for bit.
template <int R, int V>
__attribute__((target("avx512f"))) void TileAvx512(const float* x, int64_t H, const float* wt, int64_t P, int64_t E,
                                                   int64_t c0, float* z) {
  __m512 a[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) a[r][v] = _mm512_setzero_ps();
  for (int64_t h = 0; h < H; ++h) {
    const float* w = wt + h * P + c0;
    __m512 wv[V];
    for (int v = 0; v < V; ++v) wv[v] = _mm512_loadu_ps(w + 16 * v);
    for (int r = 0; r < R; ++r) {
      const __m512 b = _mm512_set1_ps(x[r * H + h]);
      for (int v = 0; v < V; ++v) a[r][v] = _mm512_fmadd_ps(b, wv[v], a[r][v]);
    }
  }
  for (int v = 0; v < V; ++v) {
    const int64_t e = c0 + 16 * v, left = E - e;
    if (left <= 0) break;
    const __mmask16 m = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(z + r * E + e, m, a[r][v]);
  }
}

// The same eight lanes a vector: experts [c0, c0 + 8 V).
template <int R, int V>
__attribute__((target("avx2,fma"))) void TileAvx2(const float* x, int64_t H, const float* wt, int64_t P, int64_t E,
                                                  int64_t c0, float* z) {
  __m256 a[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) a[r][v] = _mm256_setzero_ps();
  for (int64_t h = 0; h < H; ++h) {
    const float* w = wt + h * P + c0;
    __m256 wv[V];
    for (int v = 0; v < V; ++v) wv[v] = _mm256_loadu_ps(w + 8 * v);
    for (int r = 0; r < R; ++r) {
      const __m256 b = _mm256_set1_ps(x[r * H + h]);
      for (int v = 0; v < V; ++v) a[r][v] = _mm256_fmadd_ps(b, wv[v], a[r][v]);
    }
  }
  for (int v = 0; v < V; ++v) {
    const int64_t e = c0 + 8 * v, left = std::min<int64_t>(8, E - e);
    if (left <= 0) break;
    for (int r = 0; r < R; ++r) {
      alignas(32) float out[8];
      _mm256_store_ps(out, a[r][v]);
      std::copy(out, out + left, z + r * E + e);
    }
  }
}

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, int64_t, float*);

template <int R>
TileFn Avx512For(int v) {
  switch (v) {
    case 1: return TileAvx512<R, 1>;
    case 2: return TileAvx512<R, 2>;
    case 3: return TileAvx512<R, 3>;
    default: return TileAvx512<R, 4>;
  }
}

template <int R>
TileFn Avx2For(int v) {
  return v == 1 ? TileAvx2<R, 1> : TileAvx2<R, 2>;
}

// Tile function for r rows (1..4) and v vectors of experts.
TileFn TileFor(SimdLevel path, int r, int v) {
  if (path == SimdLevel::kAvx512) {
    switch (r) {
      case 1: return Avx512For<1>(v);
      case 2: return Avx512For<2>(v);
      case 3: return Avx512For<3>(v);
      default: return Avx512For<4>(v);
    }
  }
  switch (r) {
    case 1: return Avx2For<1>(v);
    case 2: return Avx2For<2>(v);
    case 3: return Avx2For<3>(v);
    default: return Avx2For<4>(v);
  }
}

#endif  // __x86_64__

void RowScalar(const float* x, int64_t H, const float* wt, int64_t P, int64_t E, float* z) {
  for (int64_t e = 0; e < E; ++e) {
    float s = 0.0f;
    for (int64_t h = 0; h < H; ++h) s = std::fma(x[h], wt[h * P + e], s);
    z[e] = s;
  }
}

}  // namespace

RouterKernel::RouterKernel(const float* w, int64_t experts, int64_t hidden)
    : experts_(experts), hidden_(hidden), padded_((experts + kPad - 1) / kPad * kPad) {
  wt_.assign(static_cast<size_t>(hidden_ * padded_), 0.0f);
  norm_.assign(static_cast<size_t>(experts_), 0.0);
  for (int64_t e = 0; e < experts_; ++e) {
    double ss = 0;
    for (int64_t h = 0; h < hidden_; ++h) {
      const float v = w[e * hidden_ + h];
      wt_[static_cast<size_t>(h * padded_ + e)] = v;
      ss += static_cast<double>(v) * v;
    }
    norm_[static_cast<size_t>(e)] = std::sqrt(ss);
  }
}

void RouterKernel::Logits(const float* x, int64_t n, float* z) const {
  static const SimdLevel best = WidestSimdLevel("MOEEDB_ROUTER_KERNEL");
  Logits(best, x, n, z);
}

void RouterKernel::Logits(SimdLevel path, const float* x, int64_t n, float* z) const {
  if (!SimdLevelRuns(path)) path = SimdLevel::kScalar;
  const int64_t H = hidden_, E = experts_, P = padded_;
  constexpr int64_t kRows = 4;
  at::parallel_for(0, (n + kRows - 1) / kRows, 4, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t i = b * kRows, rows = std::min(kRows, n - i);
#if defined(__x86_64__)
      if (path != SimdLevel::kScalar) {
        const int64_t lanes = path == SimdLevel::kAvx512 ? 16 : 8, chunk = path == SimdLevel::kAvx512 ? 64 : 16;
        for (int64_t c0 = 0; c0 < E; c0 += chunk) {
          const int v = static_cast<int>(std::min(chunk, (E - c0 + lanes - 1) / lanes * lanes) / lanes);
          TileFor(path, static_cast<int>(rows), v)(x + i * H, H, wt_.data(), P, E, c0, z + i * E);
        }
        continue;
      }
#endif
      for (int64_t r = 0; r < rows; ++r) RowScalar(x + (i + r) * H, H, wt_.data(), P, E, z + (i + r) * E);
    }
  });
}

int64_t RouterKernel::TopK(const float* x, const float* z, int64_t n, int64_t k, int64_t* experts) const {
  const int64_t E = experts_, H = hidden_;
  // |fl(chain) - exact| <= gamma_H * sum |x_h w_h| <= gamma_H * |x| |w|
  // (Higham, Accuracy and Stability of Numerical Algorithms, 3.1; an FMA
  // chain rounds once a step). The factor covers the norms' own rounding.
  const double u = std::ldexp(1.0, -24), gamma = H * u / (1.0 - H * u) * (1.0 + 1e-6);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::atomic<int64_t> redone{0};
  at::parallel_for(0, n, 64, [&](int64_t r0, int64_t r1) {
    std::vector<int64_t> idx(static_cast<size_t>(E));
    std::vector<double> exact(static_cast<size_t>(E));
    std::vector<char> chosen(static_cast<size_t>(E));
    for (int64_t i = r0; i < r1; ++i) {
      const float* zi = z + i * E;
      const float* xi = x + i * H;
      auto key = [&](int64_t e) {  // NaN ranks last
        const float v = zi[e];
        return std::isnan(v) ? -kInf : static_cast<double>(v);
      };
      auto by_z = [&](int64_t a, int64_t b) {
        const double ka = key(a), kb = key(b);
        return ka > kb || (ka == kb && a < b);
      };
      // The k first by z: insertion into idx[0, k), kept ordered (k is small;
      // most experts fail the first comparison).
      int64_t m = 0;
      for (int64_t e = 0; e < E; ++e) {
        if (m == k && !by_z(e, idx[static_cast<size_t>(k - 1)])) continue;
        int64_t p = m < k ? m++ : k - 1;
        for (; p > 0 && by_z(e, idx[static_cast<size_t>(p - 1)]); --p) idx[static_cast<size_t>(p)] = idx[static_cast<size_t>(p - 1)];
        idx[static_cast<size_t>(p)] = e;
      }
      bool decided = true;
      if (k < E) {
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;  // |x|^2, four chains
        int64_t h = 0;
        for (; h + 4 <= H; h += 4) {
          s0 += static_cast<double>(xi[h]) * xi[h];
          s1 += static_cast<double>(xi[h + 1]) * xi[h + 1];
          s2 += static_cast<double>(xi[h + 2]) * xi[h + 2];
          s3 += static_cast<double>(xi[h + 3]) * xi[h + 3];
        }
        for (; h < H; ++h) s0 += static_cast<double>(xi[h]) * xi[h];
        const double scale = gamma * std::sqrt((s0 + s1) + (s2 + s3));
        std::fill(chosen.begin(), chosen.end(), 0);
        double low = kInf, high = -kInf;
        for (int64_t j = 0; j < k; ++j) {
          const int64_t e = idx[static_cast<size_t>(j)];
          chosen[static_cast<size_t>(e)] = 1;
          low = std::min(low, key(e) - scale * norm_[static_cast<size_t>(e)]);
        }
        for (int64_t e = 0; e < E; ++e)
          if (!chosen[static_cast<size_t>(e)]) high = std::max(high, key(e) + scale * norm_[static_cast<size_t>(e)]);
        decided = low > high;  // false for NaN or an infinite logit too
      }
      if (!decided) {
        std::fill(exact.begin(), exact.end(), 0.0);
        for (int64_t h = 0; h < H; ++h) {
          const double xh = xi[h];
          const float* w = wt_.data() + h * padded_;
          for (int64_t e = 0; e < E; ++e) exact[static_cast<size_t>(e)] += xh * w[e];
        }
        std::iota(idx.begin(), idx.end(), 0);
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t a, int64_t b) {
          double ka = exact[static_cast<size_t>(a)], kb = exact[static_cast<size_t>(b)];
          if (std::isnan(ka)) ka = -kInf;
          if (std::isnan(kb)) kb = -kInf;
          return ka > kb || (ka == kb && a < b);
        });
        std::sort(idx.begin(), idx.begin() + k, by_z);
        redone.fetch_add(1, std::memory_order_relaxed);
      }
      std::copy(idx.begin(), idx.begin() + k, experts + i * k);
    }
  });
  return redone.load();
}

}  // namespace moeedb
