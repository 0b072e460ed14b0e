// EmbeddingSpec's table: every field round-trips through JSON and the CLI's
// flags; values its parsers refuse (routing specs, prompt names, enum
// names) are errors naming the field in each front end's spelling.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "database/spec/embedding_spec.h"
#include "plugin/cli/spec_flags.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

json Members(const EmbeddingSpec& s) {
  return {{"model", s.model_dir},        {"routing", s.routing},       {"prompt", s.prompt},
          {"hs_pooling", s.hs_pooling},  {"rw_pooling", s.rw_pooling}, {"dtype", s.dtype},
          {"quant", s.quant},            {"device", s.device},         {"threads", s.threads},
          {"workers", s.workers},        {"batch_tokens", s.batch_tokens}, {"instruction", s.instruction},
          {"tokenizer", s.tokenizer_path}, {"expert_dispatch", s.expert_dispatch}, {"cache_dir", s.cache_dir}};
}

EmbeddingSpec Full() {
  EmbeddingSpec s;
  s.model_dir = "/models/olmoe";
  s.routing = "ssmoe:c=0.3,k=20,sign=reference";
  s.prompt = "none";
  s.hs_pooling = "layers-mean";
  s.rw_pooling = "mean";
  s.dtype = "bf16";
  s.quant = "int8";
  s.device = "cuda:1";
  s.threads = 3;
  s.workers = 2;
  s.batch_tokens = 1024;
  s.instruction = "Retrieve semantically similar text.";
  s.tokenizer_path = "/tmp/tokenizer.json";
  s.expert_dispatch = "packed";
  s.cache_dir = "/tmp/cache";
  return s;
}

TEST(EmbeddingSpecTest, EveryFieldRoundTripsThroughJsonAndTheCommandLine) {
  const EmbeddingSpec full = Full();
  const json wire = spec::WriteJson(EmbeddingFields(), full);
  EXPECT_EQ(wire.size(), EmbeddingFields().size());
  EXPECT_EQ(Members(full).size(), EmbeddingFields().size());  // the test reads every member
  EmbeddingSpec back;
  ASSERT_TRUE(spec::ReadJson(EmbeddingFields(), json::parse(wire.dump()), true, &back).ok());
  EXPECT_EQ(Members(back), Members(full));
  std::vector<std::string> argv;
  for (auto it = wire.begin(); it != wire.end(); ++it) {
    argv.push_back("--" + spec::FlagName(it.key()));
    argv.push_back(it.value().is_string() ? it.value().get<std::string>() : it.value().dump());
  }
  auto args = cli::Args::Parse(argv, cli::SpecFlags(EmbeddingFields()));
  ASSERT_TRUE(args.ok()) << args.status().message();
  EmbeddingSpec from_flags;
  ASSERT_TRUE(cli::ReadSpecFlags(*args, EmbeddingFields(), &from_flags).ok());
  EXPECT_EQ(Members(from_flags), Members(full));
}

TEST(EmbeddingSpecTest, RefusedValuesNameTheField) {
  for (auto [field, value, words] : {std::tuple{"routing", "greedy", "routing"}, std::tuple{"prompt", "haiku", "prompt"},
                                     std::tuple{"hs_pooling", "max", "one of last, mean, layers-mean, trained"},
                                     std::tuple{"dtype", "fp8", "one of f32, bf16"},
                                     std::tuple{"threads", "-1", "an integer in [0, 1024]"}}) {
    EmbeddingSpec s;
    json body = {{field, value}};
    if (std::string(field) == "threads") body = {{field, -1}};
    Status j = spec::ReadJson(EmbeddingFields(), body, true, &s);
    ASSERT_FALSE(j.ok()) << field;
    EXPECT_NE(j.message().find("'" + std::string(field) + "'"), std::string::npos) << j.message();
    EXPECT_NE(j.message().find(words), std::string::npos) << j.message();
    auto args = cli::Args::Parse({"--" + spec::FlagName(field), value}, cli::SpecFlags(EmbeddingFields()));
    ASSERT_TRUE(args.ok());
    Status f = cli::ReadSpecFlags(*args, EmbeddingFields(), &s);
    ASSERT_FALSE(f.ok()) << field;
    EXPECT_NE(f.message().find("option --" + spec::FlagName(field)), std::string::npos) << f.message();
    EXPECT_NE(f.message().find(words), std::string::npos) << f.message();
  }
  // An alias parses but is not listed.
  EmbeddingSpec s;
  EXPECT_TRUE(spec::ReadJson(EmbeddingFields(), {{"dtype", "bfloat16"}}, true, &s).ok());
  EXPECT_EQ(s.dtype, "bfloat16");
}

}  // namespace
}  // namespace moeedb
