// The bert_moe family (an encoder: BERT's post-norm layers with each
// feed-forward block split into experts, eval/teacher/moefy.py) against a
// forward written here with plain loops in double precision, on random
// weights this test writes: learned positions and the embeddings' LayerNorm,
// attention with biases seeing the whole text, LayerNorm after each residual
// add, a router with a bias, the top-k experts by logit each with weight 1,
// exact-GELU experts with their up bias, the block's output bias once, no
// final norm. Every expert dispatch path and both attention paths must agree
// with it; eval/teacher/moefy.py check compares real all-MiniLM-L6-v2 folders.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "engine/model/model.h"
#include "engine/model/model_defaults.h"
#include "tests/engine/reference_weights.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

struct Dims {
  int64_t V = 61, H = 32, L = 2, NH = 4, HD = 8, E = 8, K = 2, I = 16, P = 12;
  double eps = 1e-12;
};

using test::MaxAbsDiff;
using test::RefWeights;

RefWeights MakeWeights(const Dims& d, unsigned seed) {
  test::RandomWeights random(seed);
  auto rnd = [&](const std::string& name, std::vector<int64_t> shape, float base = 0.0f) {
    random.Add(name, std::move(shape), base);
  };
  // Norm weights near 1 and biases of their own: their use is checked too.
  auto norm = [&](const std::string& name) {
    rnd(name + ".weight", {d.H}, 1.0f);
    rnd(name + ".bias", {d.H});
  };
  rnd("model.embed_tokens.weight", {d.V, d.H});
  rnd("model.embed_positions.weight", {d.P, d.H});
  norm("model.embed_norm");
  for (int l = 0; l < d.L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      rnd(p + "self_attn." + proj + ".weight", {d.H, d.H});
      rnd(p + "self_attn." + proj + ".bias", {d.H});
    }
    norm(p + "post_attention_layernorm");
    norm(p + "post_mlp_layernorm");
    rnd(p + "mlp.gate.weight", {d.E, d.H});
    rnd(p + "mlp.gate.bias", {d.E});
    for (int e = 0; e < d.E; ++e) {
      const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
      rnd(x + "up_proj.weight", {d.I, d.H});
      rnd(x + "up_proj.bias", {d.I});
      rnd(x + "down_proj.weight", {d.H, d.I});
    }
    rnd(p + "mlp.output_bias", {d.H});
  }
  return random.weights;
}

std::string BertMoeConfig(const Dims& d) {
  char buf[900];
  std::snprintf(buf, sizeof(buf),
                R"({"model_type": "bert_moe", "vocab_size": %ld, "hidden_size": %ld, "intermediate_size": %ld,
  "num_hidden_layers": %ld, "num_attention_heads": %ld, "num_experts": %ld, "expert_intermediate_size": %ld,
  "num_experts_per_tok": %ld, "max_position_embeddings": %ld, "layer_norm_eps": %g, "attention_bias": true,
  "tie_word_embeddings": true})",
                d.V, d.H, d.E * d.I, d.L, d.NH, d.E, d.I, d.K, d.P, d.eps);
  return buf;
}

// y[o] = sum_i W[o, i] x[i] + b[o]
std::vector<double> Affine(const std::vector<float>& W, const std::vector<float>& b, const std::vector<double>& x,
                           int64_t out) {
  const int64_t in = static_cast<int64_t>(x.size());
  std::vector<double> y(out, 0.0);
  for (int64_t o = 0; o < out; ++o) {
    y[o] = b.empty() ? 0.0 : b[o];
    for (int64_t i = 0; i < in; ++i) y[o] += static_cast<double>(W[o * in + i]) * x[i];
  }
  return y;
}

std::vector<double> LayerNorm(const std::vector<double>& x, const RefWeights& w, const std::string& name, double eps) {
  double mean = 0, var = 0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(x.size());
  for (double v : x) var += (v - mean) * (v - mean);
  var /= static_cast<double>(x.size());
  const auto& g = w[name + ".weight"];
  const auto& b = w[name + ".bias"];
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) / std::sqrt(var + eps) * g[i] + b[i];
  return y;
}

struct RefOutput {
  std::vector<double> hs_mean, hs_last, rw_mean, rw_last;  // rw: router logits, layers concatenated
};

RefOutput ReferenceForward(const Dims& d, const RefWeights& w, const std::vector<int>& ids) {
  const int64_t T = static_cast<int64_t>(ids.size());
  std::vector<std::vector<double>> h(T, std::vector<double>(d.H));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < d.H; ++j)
      h[t][j] = w["model.embed_tokens.weight"][ids[t] * d.H + j] + w["model.embed_positions.weight"][t * d.H + j];
    h[t] = LayerNorm(h[t], w, "model.embed_norm", d.eps);
  }
  RefOutput out;
  const std::vector<float> none;
  for (int l = 0; l < d.L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".", a = p + "self_attn.";
    std::vector<std::vector<double>> q(T), k(T), v(T);
    for (int64_t t = 0; t < T; ++t) {
      q[t] = Affine(w[a + "q_proj.weight"], w[a + "q_proj.bias"], h[t], d.H);
      k[t] = Affine(w[a + "k_proj.weight"], w[a + "k_proj.bias"], h[t], d.H);
      v[t] = Affine(w[a + "v_proj.weight"], w[a + "v_proj.bias"], h[t], d.H);
    }
    std::vector<std::vector<double>> next(T);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> attn(d.H, 0.0);
      for (int64_t hh = 0; hh < d.NH; ++hh) {
        std::vector<double> s(T);
        double mx = -1e300;
        for (int64_t u = 0; u < T; ++u) {  // every key of the text
          double dot = 0;
          for (int64_t i = 0; i < d.HD; ++i) dot += q[t][hh * d.HD + i] * k[u][hh * d.HD + i];
          s[u] = dot / std::sqrt(static_cast<double>(d.HD));
          mx = std::max(mx, s[u]);
        }
        double z = 0;
        for (auto& x : s) z += (x = std::exp(x - mx));
        for (int64_t u = 0; u < T; ++u)
          for (int64_t i = 0; i < d.HD; ++i) attn[hh * d.HD + i] += s[u] / z * v[u][hh * d.HD + i];
      }
      auto o = Affine(w[a + "o_proj.weight"], w[a + "o_proj.bias"], attn, d.H);
      for (int64_t j = 0; j < d.H; ++j) o[j] += h[t][j];
      next[t] = LayerNorm(o, w, p + "post_attention_layernorm", d.eps);
    }
    h = next;
    std::vector<double> rw_sum(d.E, 0.0);
    for (int64_t t = 0; t < T; ++t) {
      auto z = Affine(w[p + "mlp.gate.weight"], w[p + "mlp.gate.bias"], h[t], d.E);
      for (int64_t e = 0; e < d.E; ++e) rw_sum[e] += z[e] / static_cast<double>(T);
      if (t == T - 1) out.rw_last.insert(out.rw_last.end(), z.begin(), z.end());
      std::vector<int> order(d.E);
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](int x, int y) { return z[x] > z[y]; });
      std::vector<double> y(d.H, 0.0);
      for (int64_t r = 0; r < d.K; ++r) {  // each chosen expert with weight 1
        const std::string x = p + "mlp.experts." + std::to_string(order[r]) + ".";
        auto up = Affine(w[x + "up_proj.weight"], w[x + "up_proj.bias"], h[t], d.I);
        for (auto& u : up) u = 0.5 * u * (1.0 + std::erf(u / std::sqrt(2.0)));
        auto part = Affine(w[x + "down_proj.weight"], none, up, d.H);
        for (int64_t j = 0; j < d.H; ++j) y[j] += part[j];
      }
      for (int64_t j = 0; j < d.H; ++j) y[j] += w[p + "mlp.output_bias"][j] + h[t][j];
      h[t] = LayerNorm(y, w, p + "post_mlp_layernorm", d.eps);
    }
    out.rw_mean.insert(out.rw_mean.end(), rw_sum.begin(), rw_sum.end());
  }
  out.hs_mean.assign(d.H, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < d.H; ++j) out.hs_mean[j] += h[t][j] / static_cast<double>(T);
  out.hs_last = h[T - 1];
  return out;
}

// HS and RW read as the mean over a text's tokens (the folder's embedding.json setting).
ForwardOptions MeanReadouts() {
  ForwardOptions o;
  o.hs_pooling = HsPooling::kMean;
  o.rw_pooling = RwPooling::kMean;
  return o;
}

class BertMoeReference : public ::testing::Test {
 protected:
  void SetUp() override {
    w_ = MakeWeights(d_, 4321);
    test::WriteF32Safetensors(dir_ / "model.safetensors", w_.tensors);
    test::WriteFile(dir_ / "config.json", BertMoeConfig(d_));
  }
  Dims d_;
  test::TempDir dir_;
  RefWeights w_;
  // Texts of different lengths, one at the position table's last row.
  const std::vector<std::vector<int32_t>> batch_ = {{5, 17, 42, 3, 60, 0, 33}, {11, 2}, {7, 7, 7, 51},
                                                    {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}};
};

TEST_F(BertMoeReference, EveryDispatchAndAttentionPathMatchesPlainLoops) {
  auto model = MoeModel::LoadDir(dir_.path());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_FALSE((*model)->config().causal) << "an encoder attends both ways by default";
  for (auto kernel : {MoeModel::AttentionKernel::kAuto, MoeModel::AttentionKernel::kGrid}) {
    (*model)->set_attention_kernel(kernel);
    for (auto dispatch : {ExpertDispatch::kAuto, ExpertDispatch::kLoop, ExpertDispatch::kGrouped,
                          ExpertDispatch::kBatched, ExpertDispatch::kPacked}) {
      (*model)->set_expert_dispatch(dispatch);
      const ForwardOptions mean = MeanReadouts();
      // Default options read the last token, which prunes the last layer to it.
      for (const ForwardOptions& opt : {mean, ForwardOptions()}) {
        auto out = (*model)->Forward(batch_, opt);
        ASSERT_TRUE(out.ok()) << out.status().ToString();
        for (size_t b = 0; b < batch_.size(); ++b) {
          RefOutput ref = ReferenceForward(d_, w_, std::vector<int>(batch_[b].begin(), batch_[b].end()));
          const bool is_mean = opt.hs_pooling == HsPooling::kMean;
          const std::string where = "attention " + std::to_string(static_cast<int>(kernel)) + ", dispatch " +
                                    std::to_string(static_cast<int>(dispatch)) + (is_mean ? ", mean" : ", last") +
                                    ", row " + std::to_string(b);
          EXPECT_LT(MaxAbsDiff(out->hs[b], is_mean ? ref.hs_mean : ref.hs_last), 1e-4) << where;
          EXPECT_LT(MaxAbsDiff(out->router_logits[b], is_mean ? ref.rw_mean : ref.rw_last), 1e-4) << where;
        }
      }
    }
  }
}

// Top-k of E must matter (the reference with every expert differs), and a
// text longer than the position table is an error, not a read past it.
TEST_F(BertMoeReference, RoutingMattersAndLongTextsAreRefused) {
  auto model = MoeModel::LoadDir(dir_.path());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ForwardOptions mean;
  mean.hs_pooling = HsPooling::kMean;
  auto out = (*model)->Forward({batch_[0]}, mean);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  Dims all = d_;
  all.K = all.E;
  RefOutput dense = ReferenceForward(all, w_, std::vector<int>(batch_[0].begin(), batch_[0].end()));
  EXPECT_GT(MaxAbsDiff(out->hs[0], dense.hs_mean), 1e-3);

  std::vector<int32_t> too_long(static_cast<size_t>(d_.P + 1), 3);
  auto refused = (*model)->Forward({too_long});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("positions"), std::string::npos) << refused.status().ToString();
}

// A router whose logits are far apart (MoEfication's are fitted to the
// experts' contribution sizes, not to a softmax): every probability but the
// top one is 0 in float32, and the second expert must still be the second
// largest logit's.
TEST_F(BertMoeReference, ExpertsAreChosenByLogitWhenProbabilitiesUnderflow) {
  RefWeights loud = w_;
  for (int l = 0; l < d_.L; ++l)
    for (const char* part : {"weight", "bias"})
      for (float& v : loud.tensors["model.layers." + std::to_string(l) + ".mlp.gate." + part].second) v *= 1000.0f;
  test::TempDir dir;
  test::WriteF32Safetensors(dir / "model.safetensors", loud.tensors);
  test::WriteFile(dir / "config.json", BertMoeConfig(d_));
  auto model = MoeModel::LoadDir(dir.path());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto out = (*model)->Forward(batch_, MeanReadouts());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (size_t b = 0; b < batch_.size(); ++b) {
    RefOutput ref = ReferenceForward(d_, loud, std::vector<int>(batch_[b].begin(), batch_[b].end()));
    EXPECT_LT(MaxAbsDiff(out->hs[b], ref.hs_mean), 1e-4) << "row " << b;
  }
}

// Without embedding.json an encoder folder pools as sentence-transformers
// does (the mean of its tokens, no prompt), not as a decoder (a prompt and
// the last token); the file's fields still win.
TEST_F(BertMoeReference, AnEncoderFolderDefaultsToTheMeanWithoutAPrompt) {
  auto d = ModelEmbeddingDefaults(dir_.path());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->prompt, "raw");
  EXPECT_EQ(d->hs_pooling, "mean");
  EXPECT_EQ(d->rw_pooling, "mean");
  test::WriteFile(dir_ / "embedding.json", R"({"hs_pooling": "last"})");
  d = ModelEmbeddingDefaults(dir_.path());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->hs_pooling, "last");
  EXPECT_EQ(d->prompt, "raw");
}

// bf16 and int8 weights run the same family (the packed kernels' GELU path):
// close to the float reference, not equal. Every expert is chosen here, so
// that rounding cannot flip a routing decision (random routers at top-2 of 4
// flip some, and one flip moves a row far).
TEST_F(BertMoeReference, Bf16AndInt8WeightsStayCloseToTheReference) {
  Dims all = d_;
  all.K = all.E;
  test::TempDir dir;
  test::WriteF32Safetensors(dir / "model.safetensors", w_.tensors);
  test::WriteFile(dir / "config.json", BertMoeConfig(all));
  for (const char* which : {"bf16", "int8"}) {
    LoadOptions load;
    if (std::string(which) == "bf16") load.format.dtype = ComputeDtype::kBF16;
    else load.format.quant = WeightQuant::kInt8;
    auto model = MoeModel::LoadDir(dir.path(), load);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    auto out = (*model)->Forward(batch_, MeanReadouts());
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    for (size_t b = 0; b < batch_.size(); ++b) {
      RefOutput ref = ReferenceForward(all, w_, std::vector<int>(batch_[b].begin(), batch_[b].end()));
      at::Tensor want = at::tensor(ref.hs_mean, at::kDouble);
      const double cos = at::cosine_similarity(out->hs[b].to(at::kDouble), want, 0).item<double>();
      EXPECT_GT(cos, 0.995) << which << ", row " << b;
    }
  }
}

}  // namespace
}  // namespace moeedb
