// ForwardProfile's work counts: each stage's arithmetic and weight bytes,
// as the kernels' callers report them, against the same counts worked out
// here from the config and the texts' lengths alone.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/model/forward_profile.h"
#include "engine/model/model.h"
#include "engine/model/random_checkpoint.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

constexpr size_t Stage(ForwardStage s) { return static_cast<size_t>(s); }

TEST(ForwardProfile, CountsEachStagesArithmeticAndWeightBytes) {
  test::TempDir dir;
  nlohmann::json cfg = nlohmann::json::parse(test::ReadFile(test::Data("configs/olmoe-tiny.json")));
  cfg["vocab_size"] = 400;
  test::WriteFile(dir / "config.json", cfg.dump());
  ASSERT_TRUE(WriteRandomCheckpoint(dir / "config.json", "", dir / "model", {}).ok());
  const std::vector<std::vector<int32_t>> texts = {{3, 1, 4, 1, 5, 9, 2, 6}, {5, 3, 5}};
  ForwardOptions every_token;  // every layer on every token: no last-token shortcut in the last layer
  every_token.want_token_states = true;

  ForwardProfileTotals totals[2];
  for (int f = 0; f < 2; ++f) {
    LoadOptions o;
    o.format.quant = f == 0 ? WeightQuant::kNone : WeightQuant::kInt8;
    auto m = MoeModel::LoadDir(dir / "model", o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EnableForwardProfile(true);
    (void)TakeForwardProfile();
    ASSERT_TRUE((*m)->Forward(texts, every_token).ok());
    totals[f] = TakeForwardProfile();
    EnableForwardProfile(false);
  }
  const double H = 64, I = 32, E = 8, k = 4, L = 2, heads_dim = 64;  // olmoe-tiny: 4 heads x 16, every layer MoE
  const double N = 11;
  double keys = 0;  // causal: token t of a text sees t + 1 keys
  for (const auto& t : texts)
    for (size_t i = 0; i < t.size(); ++i) keys += static_cast<double>(i + 1);
  for (const ForwardProfileTotals& p : totals) {
    EXPECT_EQ(p.forwards, 1);
    EXPECT_EQ(p.rows, 11);
    EXPECT_DOUBLE_EQ(p.flops[Stage(ForwardStage::kExpertGemm)], L * N * k * 2 * (H * 2 * I + I * H));
    EXPECT_DOUBLE_EQ(p.flops[Stage(ForwardStage::kProjections)], L * N * 2 * 4 * H * heads_dim);
    EXPECT_DOUBLE_EQ(p.flops[Stage(ForwardStage::kAttention)], L * 4 * heads_dim * keys);
    EXPECT_DOUBLE_EQ(p.flops[Stage(ForwardStage::kRouting)], L * N * 2 * H * E);
    EXPECT_DOUBLE_EQ(p.flops[Stage(ForwardStage::kExpertBookkeeping)], 0);
  }
  // Weight bytes: each projection matrix read once per layer; each expert
  // with rows read once (at least one, at most all of them, per layer).
  EXPECT_DOUBLE_EQ(totals[0].weight_bytes[Stage(ForwardStage::kProjections)], L * 4 * H * heads_dim * 4);
  EXPECT_DOUBLE_EQ(totals[1].weight_bytes[Stage(ForwardStage::kProjections)], L * 4 * H * heads_dim * 1);
  EXPECT_DOUBLE_EQ(totals[0].weight_bytes[Stage(ForwardStage::kRouting)], L * H * E * 4);
  const double expert_bytes = 3 * H * I * 4;
  EXPECT_GE(totals[0].weight_bytes[Stage(ForwardStage::kExpertGemm)], L * expert_bytes);
  EXPECT_LE(totals[0].weight_bytes[Stage(ForwardStage::kExpertGemm)], L * E * expert_bytes);
  EXPECT_DOUBLE_EQ(totals[1].weight_bytes[Stage(ForwardStage::kExpertGemm)] * 4,
                   totals[0].weight_bytes[Stage(ForwardStage::kExpertGemm)]);
}

TEST(ForwardProfile, CountsNothingWhenOff) {
  EnableForwardProfile(false);
  (void)TakeForwardProfile();
  {
    StageTimer timer(ForwardStage::kExpertGemm);
    CountStageWork(100, 10);
  }
  EnableForwardProfile(true);
  CountStageWork(100, 10);  // outside every timer: no stage to count it to
  {
    StageTimer outer(ForwardStage::kProjections);
    {
      StageTimer inner(ForwardStage::kAttention);
      CountStageWork(7, 0);
    }
    CountStageWork(5, 3);  // back to the enclosing timer's stage
  }
  const ForwardProfileTotals p = TakeForwardProfile();
  EnableForwardProfile(false);
  EXPECT_EQ(p.flops[Stage(ForwardStage::kExpertGemm)], 0);
  EXPECT_EQ(p.flops[Stage(ForwardStage::kAttention)], 7);
  EXPECT_EQ(p.flops[Stage(ForwardStage::kProjections)], 5);
  EXPECT_EQ(p.weight_bytes[Stage(ForwardStage::kProjections)], 3);
}

}  // namespace
}  // namespace moeedb
