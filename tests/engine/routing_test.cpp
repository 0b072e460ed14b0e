// Routing policies: SSMoE (spectral router), top-1 expert mode, parsing,
// and the on-disk cache of the spectral centroids.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/model/model.h"
#include "engine/model/moe_block.h"
#include "engine/model/random_checkpoint.h"
#include "engine/model/routing_policy.h"
#include "engine/model/spectral_router.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

TEST(RoutingPolicy, ParseAndPrint) {
  auto a = RoutingPolicy::Parse("ssmoe");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->ToString(), "ssmoe:c=0.5,k=50,sign=canonical");
  auto b = RoutingPolicy::Parse("ssmoe:c=0.25,k=8,sign=reference");
  ASSERT_TRUE(b.ok());
  EXPECT_DOUBLE_EQ(b->c, 0.25);
  EXPECT_EQ(b->k, 8);
  EXPECT_EQ(b->sign, RoutingPolicy::Sign::kReference);
  EXPECT_EQ(RoutingPolicy::Parse(b->ToString())->ToString(), b->ToString());
  EXPECT_EQ(RoutingPolicy::Parse("top1:weight=one")->top1_weight, RoutingPolicy::Top1Weight::kOne);
  EXPECT_EQ(RoutingPolicy::Parse("learned")->kind, RoutingPolicy::Kind::kLearned);
  for (const char* bad : {"ssmoe:c=2", "ssmoe:k=0", "ssmoe:sign=x", "top1:weight=half", "top2", "learned:c=1",
                          "ssmoe:", "ssmoe:c"})
    EXPECT_FALSE(RoutingPolicy::Parse(bad).ok()) << bad;
}

// The centroid through another decomposition: eigh of the *other* Gram
// matrix (M^T M, H x H) when the engine uses M M^T, and the SVD otherwise.
at::Tensor IndependentCentroid(const at::Tensor& m, const at::Tensor& r, int k) {
  at::Tensor md = m.to(at::kDouble), rd = r.to(at::kDouble);
  at::Tensor v;
  if (m.size(0) <= m.size(1)) {
    auto [lambda, vecs] = at::linalg_eigh(at::matmul(md.transpose(0, 1), md));
    v = vecs.index({at::indexing::Slice(), lambda > lambda.max() * 1e-9});
  } else {
    auto [u, s, vh] = at::linalg_svd(md, false);
    v = vh.transpose(0, 1);
  }
  std::vector<std::pair<double, int64_t>> scored;
  at::Tensor dots = at::matmul(rd, v);
  for (int64_t j = 0; j < v.size(1); ++j) {
    const double d = dots[j].item<double>();
    if (d < 0) v.select(1, j).mul_(-1);
    scored.push_back({std::abs(d), j});
  }
  std::sort(scored.begin(), scored.end(), std::greater<>());
  at::Tensor sum = at::zeros({m.size(1)}, at::kDouble);
  for (int j = 0; j < k && j < static_cast<int>(scored.size()); ++j) sum += v.select(1, scored[j].second);
  return (sum / std::min<int64_t>(k, static_cast<int64_t>(scored.size()))).to(at::kFloat);
}

TEST(SpectralRouter, CentroidEqualsAnIndependentDecomposition) {
  at::manual_seed(3);
  for (auto shape : {std::pair<int64_t, int64_t>{12, 20}, {20, 12}}) {
    at::Tensor m = at::randn({shape.first, shape.second});
    at::Tensor r = at::randn({shape.second});
    for (int k : {1, 5, 50}) {
      at::Tensor mine = SpectralCentroid(m, r, k, RoutingPolicy::Sign::kCanonical);
      at::Tensor ref = IndependentCentroid(m, r, k);
      EXPECT_LT((mine - ref).abs().max().item<double>(), 1e-5) << shape.first << "x" << shape.second << " k=" << k;
      // Canonical sign: every selected vector has a non-negative dot with r.
      EXPECT_GE(at::dot(mine, r).item<double>(), 0.0);
    }
  }
}

class RoutedModel : public ::testing::Test {
 protected:
  static std::string MakeModel(const test::TempDir& dir, int top_k, uint64_t seed) {
    nlohmann::json cfg = nlohmann::json::parse(test::ReadFile(test::Data("configs/olmoe-tiny.json")));
    cfg["vocab_size"] = 400;
    cfg["num_experts_per_tok"] = top_k;
    test::WriteFile(dir / "config.json", cfg.dump());
    RandomCheckpointOptions opt;
    opt.seed = seed;
    EXPECT_TRUE(WriteRandomCheckpoint(dir / "config.json", "", dir / "model", opt).ok());
    return dir / "model";
  }
  static ForwardOutput Run(MoeModel& m, const RoutingPolicy& p) {
    EXPECT_TRUE(m.SetRouting(p).ok());
    auto out = m.Forward({{3, 1, 4, 1, 5, 9, 2, 6}, {5, 3, 5}});
    EXPECT_TRUE(out.ok());
    return std::move(out).value();
  }
};

TEST_F(RoutedModel, SsmoeWithCZeroIsLearnedRouting) {
  test::TempDir dir;
  auto m = MoeModel::LoadDir(MakeModel(dir, 4, 1));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ForwardOutput learned = Run(**m, RoutingPolicy{});
  ForwardOutput c0 = Run(**m, *RoutingPolicy::Parse("ssmoe:c=0,k=8"));
  ForwardOutput c5 = Run(**m, *RoutingPolicy::Parse("ssmoe:c=0.5,k=8"));
  EXPECT_EQ((learned.hs - c0.hs).abs().max().item<float>(), 0.0f);
  EXPECT_EQ((learned.router_logits - c0.router_logits).abs().max().item<float>(), 0.0f);
  EXPECT_GT((learned.hs - c5.hs).abs().max().item<float>(), 1e-6);  // c > 0 changes the forward pass
}

TEST_F(RoutedModel, SsmoeWithCOneFollowsTheSpectralRouterOnly) {
  test::TempDir dir;
  auto m = MoeModel::LoadDir(MakeModel(dir, 2, 2));
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE((*m)->SetRouting(*RoutingPolicy::Parse("ssmoe:c=1,k=4")).ok());
  const MoeBlock* block = (*m)->MoeBlocks()[0];
  at::manual_seed(9);
  at::Tensor x = at::randn({64, block->spec().hidden});
  auto ssmoe = block->Route(x, *RoutingPolicy::Parse("ssmoe:c=1,k=4"));
  auto learned = block->Route(x, RoutingPolicy{});
  // Independent expectation: the top-2 of x . cbar_e, cbar_e from the other decomposition.
  const int64_t I = block->spec().expert_intermediate;
  std::vector<at::Tensor> cbar;
  for (int64_t e = 0; e < block->spec().num_experts; ++e) {
    at::Tensor r = block->router()[e];
    const at::Tensor& gu = block->expert_gate_up(e);
    cbar.push_back((IndependentCentroid(gu.narrow(0, 0, I), r, 4) + IndependentCentroid(gu.narrow(0, I, I), r, 4) +
                    IndependentCentroid(block->expert_down(e).transpose(0, 1), r, 4)) / 3.0);
  }
  at::Tensor f_ev = at::matmul(x, at::stack(cbar, 0).transpose(0, 1));
  at::Tensor expected = std::get<1>(f_ev.topk(2, -1));
  EXPECT_TRUE(at::equal(std::get<0>(ssmoe.experts.sort(-1)), std::get<0>(expected.sort(-1))));
  // ... and the learned router disagrees on some tokens, so this says something.
  EXPECT_FALSE(at::equal(std::get<0>(ssmoe.experts.sort(-1)), std::get<0>(learned.experts.sort(-1))));
  // RW still reads the learned logits.
  EXPECT_TRUE(at::equal(ssmoe.logits, learned.logits));
}

TEST_F(RoutedModel, Top1OnATopOneModelIsLearnedRouting) {
  test::TempDir dir;
  auto m = MoeModel::LoadDir(MakeModel(dir, 1, 3));
  ASSERT_TRUE(m.ok());
  ForwardOutput learned = Run(**m, RoutingPolicy{});
  ForwardOutput top1 = Run(**m, *RoutingPolicy::Parse("top1:weight=raw"));
  EXPECT_LT((learned.hs - top1.hs).abs().max().item<float>(), 1e-6);
  EXPECT_LT((learned.router_logits - top1.router_logits).abs().max().item<float>(), 1e-6);
  ForwardOutput one = Run(**m, *RoutingPolicy::Parse("top1:weight=one"));
  EXPECT_GT((learned.hs - one.hs).abs().max().item<float>(), 1e-6);  // weight 1 is not the raw probability
}

TEST_F(RoutedModel, Top1OnATopFourModelRunsOneExpert) {
  test::TempDir dir;
  auto m = MoeModel::LoadDir(MakeModel(dir, 4, 4));
  ASSERT_TRUE(m.ok());
  const MoeBlock* block = (*m)->MoeBlocks()[0];
  at::Tensor x = at::randn({16, block->spec().hidden});
  auto r = block->Route(x, *RoutingPolicy::Parse("top1"));
  auto l = block->Route(x, RoutingPolicy{});
  EXPECT_EQ(r.experts.size(1), 1);
  EXPECT_TRUE(at::equal(r.experts.select(1, 0), l.experts.select(1, 0)));  // the best expert of top-k
  EXPECT_TRUE(at::allclose(r.weights.select(1, 0), l.weights.select(1, 0)));  // raw probability (no renorm in OLMoE)
}

TEST_F(RoutedModel, SpectralCentroidsAreCachedByWeightFingerprint) {
  test::TempDir dir;
  const std::string model_dir = MakeModel(dir, 4, 5);
  const std::string cache = dir / "cache";
  auto policy = *RoutingPolicy::Parse("ssmoe:k=8");
  auto a = MoeModel::LoadDir(model_dir);
  auto b = MoeModel::LoadDir(model_dir);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->WeightFingerprint(), (*b)->WeightFingerprint());
  auto first = (*a)->SetRouting(policy, cache);
  auto second = (*b)->SetRouting(policy, cache);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_FALSE(first->from_cache);
  EXPECT_TRUE(second->from_cache);
  EXPECT_EQ(first->cache_file, second->cache_file);
  for (size_t i = 0; i < (*a)->MoeBlocks().size(); ++i)
    EXPECT_TRUE(at::equal((*a)->MoeBlocks()[i]->spectral_centroids(), (*b)->MoeBlocks()[i]->spectral_centroids()));
  // Another k, or another model, is another cache entry.
  auto other_k = (*b)->SetRouting(*RoutingPolicy::Parse("ssmoe:k=4"), cache);
  ASSERT_TRUE(other_k.ok());
  EXPECT_FALSE(other_k->from_cache);
  test::TempDir dir2;
  auto c = MoeModel::LoadDir(MakeModel(dir2, 4, 6));
  ASSERT_TRUE(c.ok());
  EXPECT_NE((*a)->WeightFingerprint(), (*c)->WeightFingerprint());
}

}  // namespace
}  // namespace moeedb
