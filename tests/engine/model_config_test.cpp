// config.json -> ModelConfig through the family table.
#include <gtest/gtest.h>

#include "engine/model/model_config.h"
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace moeedb {
namespace {

TEST(ModelConfig, UnknownModelTypeListsSupportedOnes) {
  auto c = ModelConfig::FromJson(R"({"model_type": "llama", "vocab_size": 10})", "cfg.json");
  ASSERT_FALSE(c.ok());
  const std::string& m = c.status().message();
  EXPECT_NE(m.find("unknown model_type 'llama'"), std::string::npos);
  for (const char* t : {"olmoe", "qwen2_moe", "qwen3_moe", "mixtral", "deepseek"}) EXPECT_NE(m.find(t), std::string::npos) << t;
}

TEST(ModelConfig, OlmoeShapedConfig) {
  auto c = ModelConfig::FromFile(test::Data("configs/olmoe-tiny.json"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->family->qk_norm, QkNorm::kFullProjection);
  EXPECT_FALSE(c->norm_topk_prob);
  EXPECT_EQ(c->expert_intermediate, 32);  // OLMoE: intermediate_size is per expert
  EXPECT_EQ(c->rw_dim(), 2 * 8);
  EXPECT_EQ(c->head_dim, 16);
}

TEST(ModelConfig, FamilyRulesForMoeLayersAndRenormalisation) {
  auto ds = ModelConfig::FromFile(test::Data("configs/deepseek-tiny.json"));
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ(ds->moe_layer, (std::vector<bool>{false, true, true}));
  EXPECT_EQ(ds->family->rw_readout, RouterReadout::kProbs);
  auto q3 = ModelConfig::FromFile(test::Data("configs/qwen3-moe-tiny.json"));
  ASSERT_TRUE(q3.ok());
  EXPECT_EQ(q3->moe_layer, (std::vector<bool>{true, false, true}));
  EXPECT_TRUE(q3->norm_topk_prob);
  auto mx = ModelConfig::FromFile(test::Data("hf-moe/full_mixtral/config.json"));
  ASSERT_TRUE(mx.ok());
  EXPECT_TRUE(mx->norm_topk_prob);  // Mixtral always renormalises
  auto qw = ModelConfig::FromFile(test::Data("hf-moe/qwen_moe_tiny/config.json"));
  ASSERT_TRUE(qw.ok());
  EXPECT_TRUE(qw->qkv_bias);
  EXPECT_FALSE(qw->o_bias);
  EXPECT_EQ(qw->shared_intermediate, 24);
}

TEST(ModelConfig, BadFieldsAreNamed) {
  auto a = ModelConfig::FromJson(R"({"model_type": "olmoe", "vocab_size": 10})", "cfg.json");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("cfg.json: missing required field 'hidden_size'"), std::string::npos);
  auto b = ModelConfig::FromJson(R"({"model_type": "olmoe", "vocab_size": "ten"})", "cfg.json");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("'vocab_size' must be an integer"), std::string::npos);
  EXPECT_FALSE(ModelConfig::FromJson("not json", "cfg.json").ok());
  EXPECT_FALSE(ModelConfig::FromFile("/nonexistent/config.json").ok());
}

// Found by tests/fuzz (fuzz_model_config): fields of the wrong type were
// exceptions out of FromJson; they are errors naming the field.
TEST(ModelConfig, WrongTypedOptionalFieldsAreErrorsNotExceptions) {
  const std::string base = test::ReadFile(test::Data("configs/deepseek-tiny.json"));
  for (const auto& [field, value] : std::vector<std::pair<std::string, std::string>>{
           {"scoring_func", "3"}, {"use_sliding_window", "\"yes\""}, {"rope_scaling", "{\"rope_type\": 1}"}}) {
    nlohmann::json j = nlohmann::json::parse(base);
    j[field] = nlohmann::json::parse(value);
    auto c = ModelConfig::FromJson(j.dump(), "cfg.json");
    ASSERT_FALSE(c.ok()) << field;
    EXPECT_EQ(c.status().code(), Status::Code::kInvalidArgument) << field;
  }
}

// Found by tests/fuzz (fuzz_model_config): n_routed_experts of 5.5e18 passed,
// and rw_dim() (experts x MoE layers) overflowed int64. Shapes have a ceiling;
// one above it is an error naming the field, one at it still loads.
TEST(ModelConfig, ShapesAboveTheCeilingAreNamedErrors) {
  const std::string base = test::ReadFile(test::Data("configs/deepseek-tiny.json"));
  for (const char* field : {"n_routed_experts", "vocab_size", "hidden_size", "num_hidden_layers", "moe_intermediate_size"}) {
    nlohmann::json j = nlohmann::json::parse(base);
    j[field] = int64_t{5555555555555555552};
    auto c = ModelConfig::FromJson(j.dump(), "cfg.json");
    ASSERT_FALSE(c.ok()) << field;
    EXPECT_NE(c.status().message().find(std::string("'") + field + "' is 5555555555555555552, above the largest supported"),
              std::string::npos) << c.status().message();
  }
  nlohmann::json j = nlohmann::json::parse(base);
  j["n_routed_experts"] = 65536;
  auto c = ModelConfig::FromJson(j.dump(), "cfg.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rw_dim(), 65536 * c->num_moe_layers());
  // Each field within its ceiling, their product not: the router rows
  // (experts x MoE layers) and a shared expert's width.
  j["num_hidden_layers"] = 4096;
  auto rows = ModelConfig::FromJson(j.dump(), "cfg.json");
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.status().message().find("router rows"), std::string::npos) << rows.status().message();
  j = nlohmann::json::parse(base);
  j["n_shared_experts"] = 4096;
  j["moe_intermediate_size"] = 1 << 20;
  auto shared = ModelConfig::FromJson(j.dump(), "cfg.json");
  ASSERT_FALSE(shared.ok());
  EXPECT_NE(shared.status().message().find("n_shared_experts x moe_intermediate_size"), std::string::npos);
}

}  // namespace
}  // namespace moeedb
