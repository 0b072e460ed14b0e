// Qdrant's requests carry part of the SearchSpec (docs/layout.md): read
// through QuerySpec they give the same spec as moeedb's own JSON for the
// same search, and a bad value gets the spec table's rule, named as Qdrant
// names the field.
#include <gtest/gtest.h>

#include "database/spec/search_spec.h"
#include "plugin/server/protocols/qdrant_wire.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

TEST(QdrantSpec, EveryFieldQdrantCarriesReadsAsMoeedbsJson) {
  const json qdrant = {{"limit", 7},
                       {"offset", 3},
                       {"using", "rw"},
                       {"params", {{"alpha", 0.3}, {"exact", true}, {"hnsw_ef", 128}}},
                       {"filter", {{"must", {{{"key", "metadata.topic"}, {"match", {{"value", "animals"}}}}}},
                                   {"must_not", {{{"key", "n"}, {"range", {{"gte", 5}}}}}}}}};
  auto got = qdrant::QuerySpec(qdrant, 3);
  ASSERT_TRUE(got.ok()) << got.status().message();
  const json own = {{"query", ""},
                    {"k", 10},
                    {"mode", "rw"},
                    {"alpha", 0.3},
                    {"exact", true},
                    {"filter", {{"$and", {{{"metadata.topic", {{"$eq", "animals"}}}},
                                          {{"$not", {{"$or", {{{"n", {{"$gte", 5}}}}}}}}}}}}}};
  auto want = SearchSpecFromJson(own);
  ASSERT_TRUE(want.ok()) << want.status().message();
  EXPECT_EQ(SearchSpecToJson(*got), SearchSpecToJson(*want));
  // Defaults: limit 10, fused, no filter, the collection's alpha.
  auto plain = qdrant::QuerySpec(json::object());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(SearchSpecToJson(*plain), SearchSpecToJson(*SearchSpecFromJson({{"query", ""}})));
}

TEST(QdrantSpec, ABadValueGetsTheTablesRuleUnderQdrantsName) {
  const std::string k_rule = SearchSpecFromJson({{"query", ""}, {"k", 10001}}).status().message();
  const std::string rule = k_rule.substr(k_rule.find(' '));  // "'k' must be ..." without the name
  for (auto [request, offset, label] : {std::tuple{json{{"limit", 10001}}, size_t{0}, "'limit'"},
                                        std::tuple{json{{"limit", 0}}, size_t{0}, "'limit'"},
                                        std::tuple{json{{"limit", 9999}}, size_t{2}, "'limit' + 'offset'"}}) {
    auto s = qdrant::QuerySpec(request, offset);
    ASSERT_FALSE(s.ok()) << request;
    EXPECT_EQ(s.status().message(), label + rule) << request;
  }
  auto alpha = qdrant::QuerySpec({{"params", {{"alpha", "high"}}}});
  ASSERT_FALSE(alpha.ok());
  const std::string own = SearchSpecFromJson({{"query", ""}, {"alpha", "high"}}).status().message();
  EXPECT_EQ(alpha.status().message(), "'params.alpha'" + own.substr(own.find(' ')));
  EXPECT_FALSE(qdrant::QuerySpec({{"using", 5}}).ok());
  // Paths into lists are Qdrant's; a malformed one is refused naming the key.
  EXPECT_TRUE(qdrant::QuerySpec({{"filter", {{"must", {{{"key", "a[].b"}, {"match", {{"value", 1}}}}}}}}}).ok());
  auto bad_path = qdrant::QuerySpec({{"filter", {{"must", {{{"key", "a[x].b"}, {"match", {{"value", 1}}}}}}}}});
  ASSERT_FALSE(bad_path.ok());
  EXPECT_NE(bad_path.status().message().find("'a[x].b'"), std::string::npos) << bad_path.status().message();
}

// quantization_config onto the index spec, and back as the collection reports it.
TEST(QdrantSpec, QuantizationConfigChoosesTheCodes) {
  for (auto [config, codes, pq_dims] : {std::tuple{json{{"scalar", {{"type", "int8"}, {"quantile", 0.99}}}}, CodeKind::kSq8, 8},
                                        std::tuple{json{{"product", {{"compression", "x16"}}}}, CodeKind::kPq, 4},
                                        std::tuple{json{{"product", {{"compression", "x64"}, {"always_ram", false}}}}, CodeKind::kPq, 16},
                                        std::tuple{json{{"binary", {{"always_ram", true}}}}, CodeKind::kBinary, 8},
                                        std::tuple{json(nullptr), CodeKind::kNone, 8}}) {
    DualIndexSpec index;
    ASSERT_TRUE(qdrant::ApplyQuantizationConfig(config, &index).ok()) << config;
    EXPECT_EQ(index.hs.codes, codes) << config;
    EXPECT_EQ(index.rw.codes, codes) << config;
    EXPECT_EQ(index.hs.pq_dims, pq_dims) << config;
    if (!config.is_null()) EXPECT_EQ(qdrant::QuantizationConfig(index.hs).begin().key(), config.begin().key());
  }
  for (const json& bad : {json{{"product", {{"compression", "x3"}}}}, json{{"scalar", {{"type", "uint4"}}}},
                          json{{"binary", {{"encoding", "two_bits"}}}}, json{{"binary", {{"bits", 1}}}}, json{{"pq", json::object()}},
                          json::array(), json{{"binary", json::object()}, {"scalar", json::object()}}}) {
    DualIndexSpec index;
    Status st = qdrant::ApplyQuantizationConfig(bad, &index);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("quantization_config"), std::string::npos) << st.message();
    EXPECT_EQ(index.hs.codes, CodeKind::kNone);
  }
  EXPECT_TRUE(qdrant::QuantizationConfig(SignalIndexSpec{}).is_null());
}

// params.quantization: oversampling is the spec's oversample (its range,
// named as Qdrant names it), ignore an exact search, rescore accepted.
TEST(QdrantSpec, SearchParamsQuantizationReadsAsTheSpec) {
  auto s = qdrant::QuerySpec({{"params", {{"quantization", {{"oversampling", 2.5}, {"rescore", false}}}}}});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->oversample, 2.5);
  EXPECT_FALSE(s->exact);
  auto ignore = qdrant::QuerySpec({{"params", {{"quantization", {{"ignore", true}}}}}});
  ASSERT_TRUE(ignore.ok());
  EXPECT_TRUE(ignore->exact);
  for (const json& bad : {json{{"oversampling", 0.5}}, json{{"oversampling", "x"}}, json{{"rescore", 1}}, json{{"fast", true}}}) {
    auto b = qdrant::QuerySpec({{"params", {{"quantization", bad}}}});
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find("params.quantization"), std::string::npos) << b.status().message();
  }
}

}  // namespace
}  // namespace moeedb
