// The trained pooler (engine/model/trained_pooler.h) against the plain-loop
// reference (pooler_reference.h), its spec's round trip, and the model
// folder's embedding defaults (engine/model/model_defaults.h).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <map>
#include <random>
#include <set>

#include "engine/model/model.h"
#include "engine/model/model_defaults.h"
#include "engine/io/safetensors.h"
#include "engine/io/tensor_from_view.h"
#include "engine/kernels/tensor_ops.h"
#include "engine/train/embed_trainer.h"
#include "engine/train/lm_trainer.h"
#include "engine/model/trained_pooler.h"
#include "tests/engine/pooler_reference.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

using namespace test;  // the pooler reference (pooler_reference.h)

TEST(TrainedPooler, ForwardEqualsAPlainLoopReference) {
  for (int64_t router_rows : {0, 3}) {
    for (int64_t lexical_dim : {0, 5}) {
      PoolerSpec s;
      s.hidden = 12;
      s.layer_rows = 4;
      s.router_rows = router_rows;
      s.router_dim = router_rows ? 5 : 0;
      s.latents = 3;
      s.heads = 3;
      s.ffn = 7;
      s.out_dim = 6;
      if (lexical_dim) {
        s.token_pooling = TokenPooling::kWeighted;
        s.vocab = 20;
        s.lexical_dim = lexical_dim;
      }
      ASSERT_TRUE(s.Validate().ok());
      auto w = RandomPooler(s, 11 + router_rows);
      at::Tensor layers = at::randn({2, s.layer_rows, s.hidden});
      at::Tensor router = router_rows ? at::randn({2, router_rows, 5}) * 3.0 : at::Tensor();
      at::Tensor lexical = lexical_dim ? at::randn({2, lexical_dim}) : at::Tensor();
      at::Tensor got = PoolerForward(s, w, layers, router, lexical);
      ASSERT_EQ(got.sizes().vec(), (std::vector<int64_t>{2, 6 + lexical_dim}));
      for (int64_t b = 0; b < 2; ++b) {
        Mat lr, rr;
        for (int64_t r = 0; r < s.layer_rows; ++r) lr.push_back(ToVec(layers[b][r]));
        for (int64_t r = 0; r < router_rows; ++r) rr.push_back(ToVec(router[b][r]));
        const auto want = PoolerRef(s, w, lr, rr, lexical_dim ? ToVec(lexical[b]) : std::vector<double>{});
        const auto row = ToVec(got[b]);
        ASSERT_EQ(row.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i)
          EXPECT_NEAR(row[i], want[i], 1e-4 * (1 + std::abs(want[i]))) << b << " " << i << " lexical " << lexical_dim;
      }
    }
  }
}

TEST(TrainedPooler, SpecRoundTripsAndBadSpecsAreRefused) {
  PoolerSpec s;
  s.hidden = 16;
  s.layer_rows = 3;
  s.router_rows = 2;
  s.router_dim = 4;
  auto back = PoolerSpec::FromJson(s.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->rows(), 5);
  EXPECT_EQ(back->router_dim, 4);
  PoolerSpec bad = s;
  bad.heads = 3;  // does not divide 16
  EXPECT_EQ(bad.Validate().code(), Status::Code::kInvalidArgument);
  PoolerSpec weighted = s;
  weighted.lexical_dim = 3;  // needs weighted token pooling
  EXPECT_EQ(weighted.Validate().code(), Status::Code::kInvalidArgument);
  weighted.token_pooling = TokenPooling::kWeighted;
  EXPECT_EQ(weighted.Validate().code(), Status::Code::kInvalidArgument);  // no vocabulary size
  weighted.vocab = 50;
  back = PoolerSpec::FromJson(weighted.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->token_pooling, TokenPooling::kWeighted);
  EXPECT_EQ(back->vocab, 50);
  EXPECT_EQ(back->lexical_dim, 3);
  EXPECT_EQ(back->output_dim(), back->out_dim + 3);
  EXPECT_EQ(PoolerTensors(*back)[1].name, "token_log_weight");
  EXPECT_FALSE(PoolerSpec::FromJson(R"({"type":"multi_layer_cross_attention","hidden":16,"layer_rows":3,
    "latents":16,"heads":4,"ffn":8,"out_dim":8,"token_pooling":"max"})").ok());
  EXPECT_FALSE(PoolerSpec::FromJson("{\"type\":\"something else\"}").ok());
  EXPECT_FALSE(PoolerSpec::FromJson("[1,2]").ok());
}

TEST(ModelDefaults, FollowTheFolder) {
  test::TempDir dir;
  auto d = ModelEmbeddingDefaults(dir.path());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->prompt, "prompteol");
  EXPECT_EQ(d->hs_pooling, "last");
  test::WriteFile(dir / "pooler.json", "{}");
  EXPECT_EQ(ModelEmbeddingDefaults(dir.path())->hs_pooling, "trained");
  test::WriteFile(dir / "embedding.json", R"({"prompt":"none","rw_pooling":"mean"})");
  d = ModelEmbeddingDefaults(dir.path());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->prompt, "none");
  EXPECT_EQ(d->hs_pooling, "trained");
  EXPECT_EQ(d->rw_pooling, "mean");
  test::WriteFile(dir / "embedding.json", R"({"prompt":3})");
  EXPECT_EQ(ModelEmbeddingDefaults(dir.path()).status().code(), Status::Code::kCorruption);
}

}  // namespace
}  // namespace moeedb
