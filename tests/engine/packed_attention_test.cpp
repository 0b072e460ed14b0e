// Packed attention (engine/kernels/packed_attention.h): the kernel against a plain
// double-precision loop written here, its exponential (vector_exp.h) and
// SwiGLU against std::exp, and
// whole forwards with it against the grid path (batched GEMMs over a padded,
// masked [B, T] grid) on random checkpoints of three families.
#include "engine/kernels/packed_attention.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "engine/model/moe_block.h"
#include "engine/model/moe_dispatch.h"
#include "engine/kernels/panel_gemm.h"
#include "engine/model/random_checkpoint.h"
#include "engine/kernels/vector_exp.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

// out[r, h] by the definition: softmax over the text's keys 0..pos, in double.
std::vector<double> ReferenceAttention(const PackedAttentionShape& s, const std::vector<float>& q,
                                       const std::vector<float>& k, const std::vector<float>& v,
                                       const std::vector<int64_t>& q_text, const std::vector<int64_t>& q_pos,
                                       const std::vector<int64_t>& start) {
  const int64_t nh = s.heads, nkv = s.kv_heads, hd = s.head_dim;
  std::vector<double> out(q_text.size() * static_cast<size_t>(nh * hd), 0.0);
  for (size_t r = 0; r < q_text.size(); ++r)
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t kvh = h / (nh / nkv);
      std::vector<double> sc;
      for (int64_t j = 0; j <= q_pos[r]; ++j) {
        const int64_t row = start[static_cast<size_t>(q_text[r])] + j;
        double dot = 0;
        for (int64_t d = 0; d < hd; ++d)
          dot += double(q[(r * nh + h) * hd + d]) * double(k[(row * nkv + kvh) * hd + d]);
        sc.push_back(dot * s.scale);
      }
      double m = -1e300, sum = 0;
      for (double x : sc) m = std::max(m, x);
      for (double& x : sc) sum += (x = std::exp(x - m));
      for (int64_t j = 0; j <= q_pos[r]; ++j) {
        const int64_t row = start[static_cast<size_t>(q_text[r])] + j;
        for (int64_t d = 0; d < hd; ++d)
          out[(r * nh + h) * hd + d] += sc[static_cast<size_t>(j)] / sum * double(v[(row * nkv + kvh) * hd + d]);
      }
    }
  return out;
}

// Every query row, causal (full layers) and bidirectional (every query sees
// its whole text), and each text's last row only (the last layer), with GQA,
// once per kernel this CPU runs. head_dim 64 and 32 take the AVX-512 tiles
// where they run, 48 too with a single vector in its last value sums; 24 the
// AVX2 paths (a half vector pair in the value sums), 12 the scalar one;
// lengths cover the 4-key and 8/16-score remainders, the 8- and 4-query
// tiles' leftovers and a text longer than one 256-query block.
std::vector<SimdLevel> KernelsThisCpuRuns() {
  std::vector<SimdLevel> out;
  for (auto k : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512})
    if (SimdLevelRuns(k)) out.push_back(k);
  return out;
}

TEST(PackedAttention, KernelInUseIsTheWidestThisCpuRuns) {
  const char* cap = std::getenv("MOEEDB_ATTENTION_KERNEL");
  if (cap == nullptr) EXPECT_EQ(AttentionKernelInUse(), KernelsThisCpuRuns().back());
  else EXPECT_STREQ(SimdLevelName(AttentionKernelInUse()), cap);
}

class PackedAttentionKernels : public ::testing::TestWithParam<SimdLevel> {};

TEST_P(PackedAttentionKernels, MatchesTheDefinitionInDouble) {
  const std::vector<int64_t> lengths = {1, 5, 13, 40, 8, 3, 260};
  std::vector<int64_t> start, row_text, row_pos, row_end, last_text, last_pos;
  int64_t n = 0;
  for (size_t b = 0; b < lengths.size(); ++b) {
    start.push_back(n);
    for (int64_t t = 0; t < lengths[b]; ++t) {
      row_text.push_back(static_cast<int64_t>(b));
      row_pos.push_back(t);
      row_end.push_back(lengths[b] - 1);
    }
    last_text.push_back(static_cast<int64_t>(b));
    last_pos.push_back(lengths[b] - 1);
    n += lengths[b];
  }
  for (int64_t hd : {64, 48, 32, 24, 12}) {
    const PackedAttentionShape s{8, 2, hd, 1.0f / std::sqrt(static_cast<float>(hd))};
    std::mt19937 rng(static_cast<uint32_t>(hd));
    std::normal_distribution<float> g(0.0f, 2.0f);  // large enough that softmaxes are peaked
    std::vector<float> k(static_cast<size_t>(n * s.kv_heads * hd)), v(k.size()), q(static_cast<size_t>(n * s.heads * hd));
    for (auto* t : {&k, &v, &q})
      for (float& x : *t) x = g(rng);
    for (const char* mode : {"causal", "bidirectional", "last rows"}) {
      const bool last_only = std::string(mode) == "last rows";
      const auto& qt = last_only ? last_text : row_text;
      const auto& qp = last_only ? last_pos : std::string(mode) == "causal" ? row_pos : row_end;
      // The last-only query rows are the texts' last rows of q.
      std::vector<float> qr;
      for (size_t r = 0; r < qt.size(); ++r) {
        const int64_t row = last_only ? start[r] + lengths[r] - 1 : static_cast<int64_t>(r);
        qr.insert(qr.end(), q.begin() + row * s.heads * hd, q.begin() + (row + 1) * s.heads * hd);
      }
      std::vector<float> out(qt.size() * static_cast<size_t>(s.heads * hd), std::nanf(""));
      PackedAttentionF32(GetParam(), s, qr.data(), s.heads * hd, k.data(), v.data(), s.kv_heads * hd, qt.data(),
                         qp.data(), static_cast<int64_t>(qt.size()), start.data(), out.data());
      const std::vector<double> ref = ReferenceAttention(s, qr, k, v, qt, qp, start);
      double worst = 0;
      for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::abs(out[i] - ref[i]));
      EXPECT_LT(worst, 2e-5) << "head_dim " << hd << ", " << mode;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EachKernelThisCpuRuns, PackedAttentionKernels, ::testing::ValuesIn(KernelsThisCpuRuns()),
                         [](const ::testing::TestParamInfo<SimdLevel>& i) {
                           return std::string(SimdLevelName(i.param));
                         });

TEST(PackedAttention, ExponentialIsAccurateAndZeroBelowTheFloatRange) {
  std::vector<float> x;
  for (float t = -100.0f; t <= 0.0f; t += 0.01f) x.push_back(t);
  x.push_back(0.0f);
  x.push_back(-std::numeric_limits<float>::infinity());
  std::vector<float> y(x.size());
  ExpArray(x.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] < -87.5f) {
      EXPECT_EQ(y[i], 0.0f) << x[i];
    } else if (x[i] > -87.0f) {
      const double e = std::exp(double(x[i]));
      EXPECT_LE(std::abs(y[i] - e), 4e-7 * e) << x[i];
    }
  }
  EXPECT_EQ(y[y.size() - 2], 1.0f);
}

TEST(PackedAttention, SiluGluMatchesItsDefinition) {
  std::vector<float> g, u;
  for (float t = -120.0f; t <= 120.0f; t += 0.37f) {
    g.push_back(t);
    u.push_back(0.5f - t / 50.0f);
  }
  std::vector<float> out(g.size());
  SiluGluArray(g.data(), u.data(), out.data(), static_cast<int64_t>(g.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    const double want = double(g[i]) * double(u[i]) / (1.0 + std::exp(-double(g[i])));
    EXPECT_NEAR(out[i], want, 1e-6 * std::max(1.0, std::abs(want))) << g[i];
  }
}

// Whole forwards: packed attention and packed experts (the defaults for f32
// on the CPU), on one and two threads, against the grid path and the ATen
// grouped experts, on a batch of different lengths, reading out at the last
// token only (the last layer attends for the last rows only) and with every
// token's logits (every layer attends for every row). OLMoE has full-width
// QK norms, Qwen3-MoE per-head ones and grouped KV heads, DeepSeek a dense
// first layer.
TEST(PackedAttention, ForwardsMatchTheGridPath) {
  for (const char* config : {"olmoe-tiny", "qwen3-moe-tiny", "deepseek-tiny"}) {
    test::TempDir dir;
    RandomCheckpointOptions opt;
    opt.seed = 11;
    ASSERT_TRUE(WriteRandomCheckpoint(test::Data(std::string("configs/") + config + ".json"),
                                      test::Data("tokenizers/olmoe/tokenizer.json"), dir.path(), opt)
                    .ok());
    auto model = MoeModel::LoadDir(dir.path());
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const int32_t vocab = static_cast<int32_t>((*model)->config().vocab_size);
    std::mt19937 rng(5);
    std::vector<std::vector<int32_t>> ids;
    for (int len : {7, 1, 23, 12, 23, 2}) {
      ids.emplace_back(static_cast<size_t>(len));
      for (auto& id : ids.back()) id = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
    }
    // The tiny models' expert matrices are small enough for packed copies.
    EXPECT_TRUE((*model)->MoeBlocks().back()->has_packed_experts() || !PanelGemmAvailable()) << config;
    const int threads = at::get_num_threads();
    for (bool logits : {false, true}) {
      ForwardOptions fo;
      fo.want_logits = logits;
      // The reference: grid attention and the ATen grouped experts, one thread.
      at::set_num_threads(1);
      (*model)->set_attention_kernel(MoeModel::AttentionKernel::kGrid);
      (*model)->set_expert_dispatch(ExpertDispatch::kGrouped);
      auto grid = (*model)->Forward(ids, fo);
      (*model)->set_attention_kernel(MoeModel::AttentionKernel::kAuto);
      (*model)->set_expert_dispatch(ExpertDispatch::kAuto);
      ASSERT_TRUE(grid.ok());
      // The packed paths on one thread and split over two (query rows,
      // experts and tokens in parallel).
      for (int t : {1, 2}) {
        at::set_num_threads(t);
        auto packed = (*model)->Forward(ids, fo);
        ASSERT_TRUE(packed.ok());
        EXPECT_LT((packed->hs - grid->hs).abs().max().item<float>(), 1e-5) << config << ", threads " << t;
        EXPECT_LT((packed->router_logits - grid->router_logits).abs().max().item<float>(), 1e-5)
            << config << ", threads " << t;
        if (logits)
          EXPECT_LT((packed->logits - grid->logits).abs().max().item<float>(), 1e-4) << config << ", threads " << t;
      }
    }
    at::set_num_threads(threads);
  }
}

// bf16 compute on the CPU attends on the packed rows too (in float32, the
// rows widened): against the grid path's bf16 batched matmuls the vectors
// agree to bf16 rounding.
TEST(PackedAttention, Bf16ForwardsStayCloseToTheGridPath) {
  test::TempDir dir;
  RandomCheckpointOptions opt;
  opt.seed = 11;
  ASSERT_TRUE(WriteRandomCheckpoint(test::Data("configs/olmoe-tiny.json"), test::Data("tokenizers/olmoe/tokenizer.json"),
                                    dir.path(), opt)
                  .ok());
  LoadOptions lo;
  lo.format.dtype = ComputeDtype::kBF16;
  auto model = MoeModel::LoadDir(dir.path(), lo);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const int32_t vocab = static_cast<int32_t>((*model)->config().vocab_size);
  std::mt19937 rng(6);
  std::vector<std::vector<int32_t>> ids;
  for (int len : {9, 1, 30, 14}) {
    ids.emplace_back(static_cast<size_t>(len));
    for (auto& id : ids.back()) id = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  }
  (*model)->set_attention_kernel(MoeModel::AttentionKernel::kGrid);
  auto grid = (*model)->Forward(ids, {});
  (*model)->set_attention_kernel(MoeModel::AttentionKernel::kAuto);
  auto packed = (*model)->Forward(ids, {});
  ASSERT_TRUE(grid.ok() && packed.ok());
  auto min_cos = [](const at::Tensor& a, const at::Tensor& b) {
    const at::Tensor x = a.to(at::kDouble), y = b.to(at::kDouble);
    return ((x * y).sum(-1) / (x.norm(2, -1) * y.norm(2, -1))).min().item<double>();
  };
  // Another path ran (float32 scores, not bf16 ones)...
  EXPECT_FALSE(at::equal(packed->hs, grid->hs));
  // ... to the same vectors, up to bf16 rounding.
  EXPECT_GT(min_cos(packed->hs, grid->hs), 0.999);
  EXPECT_GT(min_cos(packed->router_logits, grid->router_logits), 0.999);
}

}  // namespace
}  // namespace moeedb
