// The trainer's decoder (TrainNet) against the engine's (MoeModel, checked
// against HuggingFace elsewhere), for every family the engine loads and each
// architecture feature the family table and config allow: a config the
// trainer accepts must give the engine's logits; one it cannot train must be
// refused by CheckTrainable. A feature added to the engine but not to the
// trainer fails here instead of training a different network.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "engine/model/random_checkpoint.h"
#include "engine/model/model.h"
#include "engine/model/model_config.h"
#include "engine/model/model_family.h"
#include "engine/train/train_net.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

// A small config of `family` with the given feature switched on.
json TinyConfig(const std::string& family, const std::string& feature) {
  json c = {{"model_type", family},        {"vocab_size", 96},          {"hidden_size", 32},
            {"intermediate_size", 48},     {"moe_intermediate_size", 24}, {"num_hidden_layers", 2},
            {"num_attention_heads", 4},    {"num_key_value_heads", 2},  {"num_experts", 4},
            {"num_local_experts", 4},      {"n_routed_experts", 4},     {"num_experts_per_tok", 2},
            {"norm_topk_prob", false},     {"rms_norm_eps", 1e-5},      {"rope_theta", 10000.0},
            {"tie_word_embeddings", false}, {"initializer_range", 0.2},  {"attention_bias", false},
            {"shared_expert_intermediate_size", 0}, {"n_shared_experts", 0}, {"first_k_dense_replace", 0},
            {"decoder_sparse_step", 1},    {"mlp_only_layers", json::array()}, {"moe_layer_freq", 1},
            {"expert_intermediate_size", 24}, {"max_position_embeddings", 64}};
  if (family == "deepseek") c["n_group"] = 1, c["topk_group"] = 1;
  if (feature == "norm_topk_prob") c["norm_topk_prob"] = true;
  if (feature == "attention_bias") c["attention_bias"] = true;
  if (feature == "clip_qkv") c["clip_qkv"] = 0.5;
  if (feature == "shared_expert") c["shared_expert_intermediate_size"] = 40, c["n_shared_experts"] = 1;
  if (feature == "dense_layer") c["first_k_dense_replace"] = 1, c["mlp_only_layers"] = {0};
  if (feature == "tied") c["tie_word_embeddings"] = true;
  return c;
}

TEST(TrainNetCoverage, EveryFamilyAndFeatureTrainsTheEnginesNetworkOrIsRefused) {
  const std::vector<std::string> features = {"plain", "norm_topk_prob", "attention_bias", "clip_qkv",
                                             "shared_expert", "dense_layer", "tied"};
  std::set<std::string> trained, refused;
  for (const ModelFamily& fam : SupportedFamilies()) {
    for (const std::string& feature : features) {
      const std::string label = std::string(fam.model_type) + "/" + feature;
      test::TempDir dir;
      test::WriteFile(dir / "config.json", TinyConfig(fam.model_type, feature).dump());
      auto config = ModelConfig::FromFile(dir / "config.json");
      if (!config.ok()) continue;  // the family has no such option
      RandomCheckpointOptions ro;
      ro.seed = 5;
      ASSERT_TRUE(WriteRandomCheckpoint(dir / "config.json", "", dir / "m", ro).ok())
          << label;
      auto c = ModelConfig::FromFile(dir / "m/config.json");
      ASSERT_TRUE(c.ok()) << label << ": " << c.status().ToString();
      Status trainable = TrainNet::CheckTrainable(*c);
      if (!trainable.ok()) {
        EXPECT_EQ(trainable.code(), Status::Code::kNotSupported) << label;
        refused.insert(label);
        continue;
      }
      TrainNet net(*c);
      ASSERT_TRUE(net.Load(dir / "m/model.safetensors").ok()) << label;
      auto model = MoeModel::LoadDir(dir / "m");
      ASSERT_TRUE(model.ok()) << label << ": " << model.status().ToString();
      const std::vector<std::vector<int32_t>> ids = {{3, 17, 42, 8, 77, 5, 61}, {9, 33, 2, 90, 14, 28, 50}};
      ForwardOptions fo;
      fo.want_logits = true;
      auto want = (*model)->Forward(ids, fo);
      ASSERT_TRUE(want.ok()) << label;
      at::Tensor tok = at::tensor(std::vector<int64_t>{3, 17, 42, 8, 77, 5, 61, 9, 33, 2, 90, 14, 28, 50}).view({2, 7});
      at::NoGradGuard no_grad;
      TrainForwardOptions to;
      TrainForwardOutput got = net.Forward(tok, to);
      EXPECT_TRUE(at::allclose(got.logits, want->logits, 1e-3, 1e-3))
          << label << ": the trainer's network differs from the engine's (max |diff| "
          << (got.logits - want->logits).abs().max().item<float>() << ")";
      trained.insert(label);
    }
  }
  // What the trainer covers today; a change to either list is deliberate.
  EXPECT_TRUE(trained.count("olmoe/plain") && trained.count("mixtral/plain") && trained.count("qwen3_moe/plain"));
  EXPECT_TRUE(refused.count("qwen2_moe/shared_expert") || !trained.count("qwen2_moe/shared_expert"));
  EXPECT_TRUE(refused.count("bert_moe/plain")) << "the encoder family is refused until the trainer runs it";
  std::cout << "trained: " << trained.size() << ", refused: " << refused.size() << "\n";
  for (const auto& r : refused) std::cout << "  refused " << r << "\n";
}

}  // namespace
}  // namespace moeedb
