// The C API's JSON entry point reads a spec exactly as the collections API
// and the CLI do (tests/database/spec_test.cpp): the same spec back, and the
// same rule's error for a bad value, as a status code and a message naming
// the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "database/spec/collection_spec.h"
#include "database/spec/search_spec.h"
#include "moeedb/moeedb.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

// The spec the C API reads `text` as, or its status and message.
std::pair<moeedb_status, std::string> ThroughC(const char* kind, const json& text) {
  char* out = nullptr;
  const moeedb_status st = moeedb_spec_json(kind, text.dump().c_str(), &out);
  std::string s = st == MOEEDB_OK ? std::string(out) : std::string(moeedb_last_error());
  moeedb_free(out);
  return {st, s};
}

TEST(CApiSpec, EverySearchFieldRoundTrips) {
  const json full = {{"query", "card not delivered"}, {"k", 7}, {"mode", "hybrid"}, {"alpha", 0.5},
                     {"beta", 2.5}, {"w_hs", 0.75}, {"fusion", "weighted"}, {"norm", "zscore"}, {"rrf_k", 30},
                     {"filter", {{"topic", "banking"}}}, {"exact", true}, {"oversample", 6.5}, {"partial", true},
                     {"min_seq", 42}, {"consistency", "head"}};
  for (const auto& f : SearchFields()) ASSERT_TRUE(full.contains(f.name)) << "the test misses field " << f.name;
  auto [st, text] = ThroughC("search", full);
  ASSERT_EQ(st, MOEEDB_OK) << text;
  const json back = json::parse(text);
  EXPECT_EQ(back, full);  // every field, as given
  // And what the collections API reads from the C API's answer is the same spec.
  auto spec = SearchSpecFromJson(back);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->k, 7u);
  EXPECT_EQ(spec->fusion, FusionKind::kWeighted);
  EXPECT_EQ(spec->rrf_k, 30);
  EXPECT_TRUE(spec->exact);
}

TEST(CApiSpec, EveryCollectionFieldRoundTrips) {
  const json full = {{"index_hs", "hnsw"}, {"index_rw", "ivf"}, {"sq8", true}, {"codes", "sq8"}, {"pq_dims", 4},
                     {"oversample", 12}, {"on_disk", true}, {"fp16_rows", true}, {"alpha", 0.25},
                     {"lexical", false}, {"language", "french"}, {"bm25_k1", 0.9}, {"bm25_b", 0.5},
                     {"vector_size", 384}, {"distance", "Euclid"}, {"text_key", "body"}, {"shards", 6},
                     {"replicas", 2}};
  for (const auto& f : CollectionFields()) ASSERT_TRUE(full.contains(f.name)) << "the test misses field " << f.name;
  auto [st, text] = ThroughC("collection", full);
  ASSERT_EQ(st, MOEEDB_OK) << text;
  EXPECT_EQ(json::parse(text), full);
}

TEST(CApiSpec, ABadValueIsTheSameRulesError) {
  for (auto [body, field, rule] : {std::tuple{json{{"query", "x"}, {"k", 0}}, "'k'", "must be an integer in [1, 10000]"},
                                   std::tuple{json{{"query", "x"}, {"mode", "hybrid"}, {"rrf_k", 0}}, "'rrf_k'",
                                              "must be an integer in [1, 100000]"},
                                   std::tuple{json{{"query", "x"}, {"fusion", "rrf"}}, "'fusion'", "applies to"}}) {
    auto [st, message] = ThroughC("search", body);
    EXPECT_EQ(st, MOEEDB_INVALID_ARGUMENT) << body;
    EXPECT_NE(message.find(field), std::string::npos) << message;
    EXPECT_NE(message.find(rule), std::string::npos) << message;
    // The collections API's reader gives the very same message.
    EXPECT_EQ(SearchSpecFromJson(body).status().message(), message);
  }
  auto [st, message] = ThroughC("collection", {{"bm25_b", 2}});
  EXPECT_EQ(st, MOEEDB_INVALID_ARGUMENT);
  EXPECT_NE(message.find("'bm25_b'"), std::string::npos) << message;
  char* out = nullptr;
  EXPECT_EQ(moeedb_spec_json("index", "{}", &out), MOEEDB_INVALID_ARGUMENT);
  EXPECT_EQ(moeedb_spec_json("search", "[1]", &out), MOEEDB_INVALID_ARGUMENT);
  EXPECT_EQ(out, nullptr);
}

}  // namespace
}  // namespace moeedb
