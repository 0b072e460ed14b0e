// Parity with HuggingFace transformers: the fixtures' float64 references
// (computed by transformers on the same weights) against the engine in f32.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>

#include "engine/model/model.h"
#include "engine/model/model_family.h"
#include "engine/model/moe_block.h"
#include "engine/io/safetensors.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

// Each fixture: its transformers reference, the model loaded from its
// folder, and the reference's input ids.
class FullModelParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string dir = test::Data("hf-moe/" + GetParam());
    ref_ = json::parse(test::ReadFile(dir + "/reference.json"));
    auto model = MoeModel::LoadDir(dir);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_ = std::move(model).value();
    ids_ = ref_["input_ids"].get<std::vector<int32_t>>();
  }
  json ref_;
  std::unique_ptr<MoeModel> model_;
  std::vector<int32_t> ids_;
};

TEST_P(FullModelParity, LogitsMatchTransformersWithin1e4) {
  const std::vector<int32_t>& ids = ids_;
  const std::vector<double> hf = ref_["hf_logits"].get<std::vector<double>>();
  ForwardOptions opt;
  opt.want_logits = true;
  auto out = model_->Forward({ids}, opt);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  at::Tensor logits = out->logits.to(at::kDouble).contiguous();
  const int64_t V = model_->config().vocab_size;
  ASSERT_EQ(logits.numel(), static_cast<int64_t>(hf.size()));
  ASSERT_EQ(static_cast<int64_t>(hf.size()), static_cast<int64_t>(ids.size()) * V);
  const double* p = logits.data_ptr<double>();
  double max_err = 0;
  for (size_t i = 0; i < hf.size(); ++i) max_err = std::max(max_err, std::abs(p[i] - hf[i]));
  EXPECT_LT(max_err, 1e-4) << GetParam();
  // The logits are not trivially small: the comparison has teeth.
  double max_abs = 0;
  for (double v : hf) max_abs = std::max(max_abs, std::abs(v));
  EXPECT_GT(max_abs, 1e-2);
  RecordProperty("max_abs_error", std::to_string(max_err));
}

// Without logits the last layer runs only for each row's last token (its
// keys and values still from every token): HS and RW must equal the full
// forward's, which the test above ties to transformers. Two rows of
// different lengths, so padding and per-row query positions are exercised.
TEST_P(FullModelParity, LastTokenOnlyLastLayerGivesTheFullForwardsReadouts) {
  const std::vector<int32_t>& ids = ids_;
  std::vector<int32_t> prefix(ids.begin(), ids.begin() + static_cast<int64_t>(ids.size() / 2 + 1));
  ForwardOptions full;
  full.want_logits = true;
  auto a = model_->Forward({ids, prefix}, full);
  auto b = model_->Forward({ids, prefix});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LT((a->hs - b->hs).abs().max().item<double>(), 1e-5) << GetParam();
  EXPECT_LT((a->router_logits - b->router_logits).abs().max().item<double>(), 1e-5) << GetParam();
  EXPECT_GT(a->hs.abs().max().item<double>(), 1e-2);
  EXPECT_GT((a->hs[0] - a->hs[1]).abs().max().item<double>(), 1e-3);  // the rows really differ
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FullModelParity,
                         ::testing::Values("full_mixtral", "gqa_mixtral", "mixtral_classic", "qwen_moe_tiny"));

struct BlockCase {
  std::string name;
  std::string model_type;
};

void PrintTo(const BlockCase& c, std::ostream* os) { *os << c.name; }

class MoeBlockParity : public ::testing::TestWithParam<BlockCase> {};

TEST_P(MoeBlockParity, OutputMatchesTransformersWithin1e5) {
  const BlockCase& bc = GetParam();
  const std::string base = test::Data("hf-moe/blocks/" + bc.name);
  const json ref = json::parse(test::ReadFile(base + ".json"));
  auto ckpt = Checkpoint::OpenFiles({base + ".safetensors"});
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  const ModelFamily* fam = FindFamily(bc.model_type);
  ASSERT_NE(fam, nullptr);
  MoeBlockSpec spec;
  spec.hidden = ref["d_model"];
  spec.num_experts = ref["num_experts"];
  spec.top_k = ref["experts_per_token"];
  spec.expert_intermediate = ref["d_ff"];
  spec.renormalize = fam->renormalize_always || ref["norm_topk_prob"].get<bool>();
  if (ref["has_shared"].get<bool>()) {
    const TensorView* sh = (*ckpt)->Find("model.layers.0.mlp.shared_expert.gate_proj.weight");
    ASSERT_NE(sh, nullptr);
    spec.shared_intermediate = sh->shape[0];
  }
  auto block = MoeBlock::Load(**ckpt, *fam, "model.layers.0.mlp.", spec);
  ASSERT_TRUE(block.ok()) << block.status().ToString();
  const std::vector<float> input = ref["input"].get<std::vector<float>>();
  const std::vector<double> expected = ref["hf_ref"].get<std::vector<double>>();
  at::Tensor x = at::tensor(input, at::kFloat).view({1, spec.hidden});
  at::Tensor y = block->Forward(x, nullptr).to(at::kDouble).contiguous();
  ASSERT_EQ(y.numel(), static_cast<int64_t>(expected.size()));
  double max_err = 0;
  for (size_t i = 0; i < expected.size(); ++i) max_err = std::max(max_err, std::abs(y.data_ptr<double>()[i] - expected[i]));
  EXPECT_LT(max_err, 1e-5) << bc.name;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MoeBlockParity,
                         ::testing::Values(BlockCase{"mixtral_layer0", "mixtral"}, BlockCase{"qwen15_moe_layer0", "qwen2_moe"},
                                           BlockCase{"qwen2_moe_layer0", "qwen2_moe"},
                                           BlockCase{"qwen3_moe_layer0", "qwen3_moe"}),
                         [](const auto& info) { return info.param.name; });

// The same weights under per-expert and packed names give the same model.
TEST(HfParity, PackedAndPerExpertLayoutsAgree) {
  auto packed = MoeModel::LoadDir(test::Data("hf-moe/full_mixtral"));
  auto classic = MoeModel::LoadDir(test::Data("hf-moe/mixtral_classic"));
  ASSERT_TRUE(packed.ok() && classic.ok());
  auto a = (*packed)->Forward({{1, 2, 3, 4}, {5, 6}});
  auto b = (*classic)->Forward({{1, 2, 3, 4}, {5, 6}});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LT((a->hs - b->hs).abs().max().item<double>(), 1e-6);
  EXPECT_LT((a->router_logits - b->router_logits).abs().max().item<double>(), 1e-6);
}

}  // namespace
}  // namespace moeedb
