// The collections API through Api::Handle: create, upsert, get, delete,
// dense, lexical and hybrid search, filters, and the 4xx answers to bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

#include "tests/plugin/server_fixture.h"

namespace moeedb {
namespace {

using json = nlohmann::json;
using servertest::ServerTest;

TEST_F(ServerTest, CollectionsApi) {
  EXPECT_EQ(Call("PUT", "/collections/docs", R"({"index": {"rw": "hnsw"}, "alpha": 0.5})").status, 201);
  EXPECT_EQ(Call("PUT", "/collections/docs", "{}").status, 409);
  EXPECT_EQ(Call("PUT", "/collections/bad", R"({"routing": "top1"})").status, 400);
  EXPECT_EQ(Call("PUT", "/collections/bad", R"({"index": {"hs": "annoy"}})").status, 400);
  json docs = {{"documents", {{{"id", "a"}, {"text", "A man is playing a flute."}, {"metadata", {{"lang", "en"}}}},
                              {{"id", "b"}, {"text", "Stock markets fell sharply."}, {"metadata", {{"lang", "fr"}}}},
                              {{"id", "c"}, {"text", "A woman slices an onion."}}}},
               {"wait", true}};
  auto r = Call("POST", "/collections/docs/documents", docs.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["upserted"], 3);
  r = Call("POST", "/collections/docs/search", R"({"query": "Stock markets fell sharply.", "k": 2})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["hits"][0]["id"], "b");
  r = Call("POST", "/collections/docs/search", R"({"query": "Stock markets fell sharply.", "filter": {"lang": "en"}})");
  ASSERT_EQ(Body(r)["hits"].size(), 1u);
  EXPECT_EQ(Body(r)["hits"][0]["id"], "a");
  EXPECT_EQ(Body(Call("GET", "/collections/docs/documents/a"))["metadata"]["lang"], "en");
  EXPECT_EQ(Call("DELETE", "/collections/docs/documents/a").status, 200);
  EXPECT_EQ(Call("GET", "/collections/docs/documents/a").status, 404);
  EXPECT_EQ(Call("DELETE", "/collections/docs/documents/a").status, 404);
  EXPECT_EQ(Body(Call("GET", "/collections/docs"))["documents"], 2);
  EXPECT_EQ(Body(Call("GET", "/collections"))["collections"].size(), 1u);
  // Bad input changes nothing.
  EXPECT_EQ(Call("POST", "/collections/docs/documents", R"({"documents": [{"id": "z", "text": 3}]})").status, 400);
  EXPECT_EQ(Call("POST", "/collections/docs/documents", R"({"documents": [{"id": "", "text": "x"}]})").status, 400);
  EXPECT_EQ(Call("POST", "/collections/docs/search", R"({"query": "x", "k": 0})").status, 400);
  EXPECT_EQ(Call("POST", "/collections/docs/search", R"({"query": "x", "mode": "both"})").status, 400);
  EXPECT_EQ(Call("POST", "/collections/docs/search", R"({"query": "x", "filter": {"n": {"$near": 1}}})").status, 400);
  EXPECT_EQ(Call("POST", "/collections/nope/search", R"({"query": "x"})").status, 404);
  EXPECT_EQ(Body(Call("GET", "/collections/docs"))["documents"], 2);
  EXPECT_EQ(Call("DELETE", "/collections/docs").status, 200);
  EXPECT_EQ(Call("GET", "/collections/docs").status, 404);
}

// Collection names are checked once (database/spec/collection_name.h) for
// every protocol: a NUL, a newline, a path separator or a dot-only name is a
// 400 in each protocol's own shape that names no server path, and nothing is
// created; Qdrant adds its own characters, Chroma its own pattern.
TEST_F(ServerTest, BadCollectionNamesAreRefusedByEveryProtocol) {
  for (const std::string& bad : std::vector<std::string>{"con%00x", "two%0Alines", "..", ".", "a%5Cb", std::string(129, 'n')}) {
    for (const std::string& prefix : {std::string("/collections/"), std::string("/qdrant/collections/")}) {
      auto r = Call("PUT", prefix + bad, "{}");
      EXPECT_EQ(r.status, 400) << prefix << bad << ": " << r.body;
      EXPECT_EQ(r.body.find("/indexes"), std::string::npos) << r.body;  // no server path
      EXPECT_EQ(r.body.find(db_.path()), std::string::npos) << r.body;
      const json body = Body(r);
      if (prefix == "/collections/") EXPECT_TRUE(body["error"]["message"].is_string()) << r.body;
      else EXPECT_TRUE(body["status"]["error"].is_string()) << r.body;
    }
  }
  EXPECT_EQ(Call("PUT", "/qdrant/collections/what%3F", "{}").status, 400);
  auto chroma = Call("POST", "/api/v2/tenants/default_tenant/databases/default_database/collections", R"({"name": "a\u0000b"})");
  EXPECT_EQ(chroma.status, 400) << chroma.body;
  EXPECT_TRUE(Body(chroma)["error"].is_string() || Body(chroma)["message"].is_string()) << chroma.body;
  EXPECT_EQ(Body(Call("GET", "/collections"))["collections"].size(), 0u);  // nothing was created
  EXPECT_EQ(Call("PUT", "/collections/ok.name-1", "{}").status, 201);
}

// What a client could get silently wrong is a 400 instead: a misspelt
// search field, `using` without a vector, a lexical search given a vector, a
// `wait` that is not a boolean. A missing collection and a missing document
// are 404s told apart by their codes. Many documents are deleted in one
// atomic write, by ids or by a filter.
TEST_F(ServerTest, CollectionsApiRefusesWhatItWouldIgnoreAndDeletesMany) {
  ASSERT_EQ(Call("PUT", "/collections/p", R"({"vector_size": 3, "distance": "Dot"})").status, 201);
  json docs = {{"documents", json::array()}};
  for (int i = 0; i < 6; ++i)
    docs["documents"].push_back({{"id", "d" + std::to_string(i)}, {"text", "text " + std::to_string(i)},
                                 {"vector", {1.0, i, 0.5}}, {"metadata", {{"even", i % 2 == 0}}}});
  ASSERT_EQ(Call("POST", "/collections/p/documents", docs.dump()).status, 200);
  auto fliter = Call("POST", "/collections/p/search", R"({"vector": [1, 0, 0], "fliter": {"even": true}})");
  EXPECT_EQ(fliter.status, 400);
  EXPECT_NE(Body(fliter)["error"]["message"].get<std::string>().find("fliter"), std::string::npos);
  EXPECT_EQ(Call("POST", "/collections/p/search", R"({"query": "text", "using": "hs"})").status, 400);
  EXPECT_EQ(Call("POST", "/collections/p/search", R"({"query": "text", "vector": [1, 0, 0], "mode": "lexical"})").status, 400);
  EXPECT_EQ(Call("POST", "/collections/p/documents", R"({"documents": [{"id": "x", "vector": [1, 2, 3]}], "wait": "yes"})").status, 400);
  EXPECT_EQ(Body(Call("GET", "/collections/p/documents/x"))["error"]["code"], "document_not_found");
  EXPECT_EQ(Body(Call("GET", "/collections/none/documents/x"))["error"]["code"], "collection_not_found");
  auto by_ids = Call("POST", "/collections/p/documents/delete", R"({"ids": ["d0", "d1", "d1", "nope"]})");
  ASSERT_EQ(by_ids.status, 200) << by_ids.body;
  EXPECT_EQ(Body(by_ids)["deleted"], 2);
  EXPECT_EQ(Body(by_ids)["missing"], 1);
  auto by_filter = Call("POST", "/collections/p/documents/delete", R"({"filter": {"even": true}})");
  ASSERT_EQ(by_filter.status, 200) << by_filter.body;
  EXPECT_EQ(Body(by_filter)["deleted"], 2);  // d2, d4
  EXPECT_GT(Body(by_filter)["seq"], Body(by_ids)["seq"]);
  EXPECT_EQ(Body(Call("GET", "/collections/p"))["documents"], 2);  // d3, d5
  EXPECT_EQ(Call("POST", "/collections/p/documents/delete", R"({"ids": ["d3"], "filter": {}})").status, 400);
  EXPECT_EQ(Call("POST", "/collections/p/documents/delete", R"({"filter": {"n": {"$near": 1}}})").status, 400);
  EXPECT_EQ(Body(Call("GET", "/collections/p"))["documents"], 2);
}

// A sharded collection through the collections API: its shards recorded, a
// write's seq read back with min_seq, a partial search naming no missing
// shard on one node that holds them all, the same hits as one shard's.
TEST_F(ServerTest, AShardedCollectionAnswersAsOneShard) {
  EXPECT_EQ(Call("PUT", "/collections/six", R"({"shards": 6, "replicas": 2})").status, 201);
  EXPECT_EQ(Call("PUT", "/collections/one", "{}").status, 201);
  EXPECT_EQ(Call("PUT", "/collections/bad", R"({"shards": 0})").status, 400);
  EXPECT_EQ(Call("PUT", "/collections/bad", R"({"shards": 100000})").status, 400);
  json docs = {{"documents", json::array()}, {"wait", true}};
  const char* texts[] = {"A man is playing a flute.", "Stock markets fell sharply.", "A woman slices an onion.",
                         "The cat sleeps on the warm windowsill.", "Markets rallied after the report.",
                         "A dog runs through the snow.", "Heat transfer in supersonic flow.", "A man plays a guitar."};
  for (int i = 0; i < 8; ++i) docs["documents"].push_back({{"id", "d" + std::to_string(i)}, {"text", texts[i]}});
  uint64_t seq = 0;
  for (const char* c : {"six", "one"}) {
    auto r = Call("POST", std::string("/collections/") + c + "/documents", docs.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    seq = Body(r)["seq"].get<uint64_t>();
    EXPECT_GT(seq, 0u);
  }
  for (const char* mode : {"fused", "lexical", "hybrid"}) {
    const json q = {{"query", "stock markets"}, {"k", 5}, {"mode", mode}, {"min_seq", seq}, {"partial", true}};
    auto a = Call("POST", "/collections/six/search", q.dump());
    auto b = Call("POST", "/collections/one/search", q.dump());
    ASSERT_EQ(a.status, 200) << a.body;
    ASSERT_EQ(b.status, 200) << b.body;
    EXPECT_EQ(Body(a)["missing_shards"], json::array());
    ASSERT_EQ(Body(a)["hits"].size(), Body(b)["hits"].size()) << mode;
    for (size_t i = 0; i < Body(a)["hits"].size(); ++i) {
      EXPECT_EQ(Body(a)["hits"][i]["id"], Body(b)["hits"][i]["id"]) << mode;
      EXPECT_NEAR(Body(a)["hits"][i]["score"].get<double>(), Body(b)["hits"][i]["score"].get<double>(), 1e-6) << mode;
    }
  }
  EXPECT_EQ(Body(Call("GET", "/collections/six"))["documents"], 8);
  // /metrics per shard replica: six's 6 replicas hold its 8 documents.
  const std::string m = Call("GET", "/metrics").body;
  size_t in_replicas = 0, replicas = 0;
  for (size_t at = 0; (at = m.find("moeedb_shard_documents{collection=\"six\"", at)) != std::string::npos; ++at) {
    in_replicas += std::stoul(m.substr(m.find("} ", at) + 2));
    ++replicas;
  }
  EXPECT_EQ(replicas, 6u) << m;
  EXPECT_EQ(in_replicas, 8u);
  EXPECT_NE(m.find("moeedb_shard_index_bytes{collection=\"six\",shard=\"5\"}"), std::string::npos);
}

TEST_F(ServerTest, LexicalAndHybridSearch) {
  ASSERT_EQ(Call("PUT", "/collections/h", R"({"lexical": {"language": "english", "k1": 1.5, "b": 0.6}})").status, 201);
  EXPECT_EQ(Body(Call("GET", "/collections/h"))["spec"]["lexical"]["k1"], 1.5);
  json docs = {{"documents", {{{"id", "a"}, {"text", "The supersonic wind tunnel started."}, {"metadata", {{"n", 1}}}},
                              {{"id", "b"}, {"text", "Dogs running in the snow."}, {"metadata", {{"n", 2}}}},
                              {{"id", "c"}, {"text", "A dog sleeps by the fire."}, {"metadata", {{"n", 3}}}}}}};
  ASSERT_EQ(Call("POST", "/collections/h/documents", docs.dump()).status, 200);
  auto r = Call("POST", "/collections/h/search", R"({"query": "running dogs", "mode": "lexical"})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto hits = Body(r)["hits"];
  ASSERT_EQ(hits.size(), 2u);  // "wind tunnel" shares no word with the query
  EXPECT_EQ(hits[0]["id"], "b");
  EXPECT_GT(hits[0]["score_lex"].get<double>(), hits[1]["score_lex"].get<double>());
  EXPECT_EQ(hits[0]["score"], hits[0]["score_lex"]);
  for (const char* fusion : {"weighted", "rrf"}) {
    json q = {{"query", "running dogs"}, {"mode", "hybrid"}, {"beta", 2.0}, {"fusion", fusion}, {"k", 3}};
    r = Call("POST", "/collections/h/search", q.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    hits = Body(r)["hits"];
    ASSERT_EQ(hits.size(), 3u);
    for (const auto& h : hits)
      for (const char* f : {"score", "score_hs", "score_rw", "score_lex"}) EXPECT_TRUE(h.contains(f)) << f;
  }
  r = Call("POST", "/collections/h/search", R"({"query": "dog", "mode": "hybrid", "filter": {"n": {"$gte": 3}}})");
  ASSERT_EQ(r.status, 200);
  ASSERT_EQ(Body(r)["hits"].size(), 1u);
  EXPECT_EQ(Body(r)["hits"][0]["id"], "c");
  // An update replaces the words the lexical index finds.
  ASSERT_EQ(Call("POST", "/collections/h/documents", R"({"documents": [{"id": "b", "text": "A parrot talks."}]})").status, 200);
  r = Call("POST", "/collections/h/search", R"({"query": "running", "mode": "lexical"})");
  EXPECT_TRUE(Body(r)["hits"].empty()) << r.body;
  // Bad input: 400 with the protocol's error shape.
  for (const char* bad : {R"({"query": "x", "mode": "hybrid", "fusion": "borda"})",
                          R"({"query": "x", "mode": "hybrid", "beta": -1})",
                          R"({"query": "x", "mode": "hybrid", "rrf_k": 0})",
                          R"({"query": "x", "mode": "hybrid", "norm": "l2"})",
                          R"({"query": "x", "beta": 1})",
                          R"({"query": "x", "mode": "hybrid", "w_hs": 0, "alpha": 0, "beta": 0})"}) {
    r = Call("POST", "/collections/h/search", bad);
    EXPECT_EQ(r.status, 400) << bad << " " << r.body;
    EXPECT_TRUE(Body(r)["error"].contains("message")) << r.body;
  }
  EXPECT_EQ(Call("PUT", "/collections/bad", R"({"lexical": {"language": "klingon"}})").status, 400);
  EXPECT_EQ(Call("PUT", "/collections/bad", R"({"lexical": "yes"})").status, 400);
  ASSERT_EQ(Call("PUT", "/collections/plain", R"({"lexical": false})").status, 201);
  r = Call("POST", "/collections/plain/search", R"({"query": "x", "mode": "lexical"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("no lexical index"), std::string::npos) << r.body;
  EXPECT_EQ(Call("DELETE", "/collections/h").status, 200);
  EXPECT_EQ(Call("PUT", "/collections/h", "{}").status, 201);  // the lexical folder went with the old one
  r = Call("POST", "/collections/h/search", R"({"query": "dog", "mode": "lexical"})");
  EXPECT_TRUE(Body(r)["hits"].empty()) << r.body;
}

TEST_F(ServerTest, DocumentsArePagedInIdOrder) {
  ASSERT_EQ(Call("PUT", "/collections/p", "{}").status, 201);
  json docs = {{"documents", json::array()}};
  std::vector<std::string> ids;
  for (int i = 0; i < 7; ++i) {
    ids.push_back("doc-" + std::to_string(i * 3 % 7));
    docs["documents"].push_back({{"id", ids.back()}, {"text", "text number " + std::to_string(i)}, {"metadata", {{"i", i}}}});
  }
  ASSERT_EQ(Call("POST", "/collections/p/documents", docs.dump()).status, 200);
  std::sort(ids.begin(), ids.end());
  std::vector<std::string> seen;
  std::string after;
  for (int page = 0; page < 10; ++page) {
    auto r = Call("GET", "/collections/p/documents?limit=3" + (after.empty() ? "" : "&after=" + after));
    ASSERT_EQ(r.status, 200) << r.body;
    json j = Body(r);
    EXPECT_EQ(j["total"], 7);
    for (const auto& d : j["documents"]) {
      seen.push_back(d["id"]);
      EXPECT_TRUE(d["text"].get<std::string>().starts_with("text number"));
      EXPECT_TRUE(d["metadata"].contains("i"));
    }
    if (j["next_after"].is_null()) break;
    after = j["next_after"];
  }
  EXPECT_EQ(seen, ids);
  // Default page size, %-encoded cursors, and the 4xx answers.
  EXPECT_EQ(Body(Call("GET", "/collections/p/documents"))["documents"].size(), 7u);
  EXPECT_EQ(Body(Call("GET", "/collections/p/documents?after=doc%2D5"))["documents"].size(), 1u);
  for (const char* bad : {"limit=0", "limit=1001", "limit=abc", "limit=", "offset=3"})
    EXPECT_EQ(Call("GET", std::string("/collections/p/documents?") + bad).status, 400) << bad;
  EXPECT_EQ(Call("GET", "/collections/nope/documents").status, 404);
  EXPECT_EQ(Call("DELETE", "/collections/p/documents").status, 405);
}

TEST_F(ServerTest, HitsCarryEachSignalsShareOfTheScore) {
  ASSERT_EQ(Call("PUT", "/collections/s", R"({"alpha": 0.25})").status, 201);
  json docs = {{"documents", {{{"id", "a"}, {"text", "A dog runs in the snow."}},
                              {{"id", "b"}, {"text", "Markets fell sharply on Monday."}},
                              {{"id", "c"}, {"text", "A dog sleeps by the fire."}}}}};
  ASSERT_EQ(Call("POST", "/collections/s/documents", docs.dump()).status, 200);
  auto r = Call("POST", "/collections/s/search", R"({"query": "dog in the snow"})");
  ASSERT_EQ(r.status, 200) << r.body;
  json body;  // the loops iterate its member: a temporary's would be destroyed first
  for (const auto& h : (body = Body(r))["hits"]) {
    EXPECT_DOUBLE_EQ(h["parts"]["hs"].get<double>(), h["score_hs"].get<double>());
    EXPECT_NEAR(h["parts"]["rw"].get<double>(), 0.25 * h["score_rw"].get<double>(), 1e-6);
    EXPECT_EQ(h["parts"]["lex"].get<double>(), 0.0);
  }
  r = Call("POST", "/collections/s/search", R"({"query": "dog in the snow", "mode": "hybrid", "fusion": "rrf"})");
  ASSERT_EQ(r.status, 200) << r.body;
  for (const auto& h : (body = Body(r))["hits"]) {
    const json& p = h["parts"];
    EXPECT_NEAR(p["hs"].get<double>() + p["rw"].get<double>() + p["lex"].get<double>(), h["score"].get<double>(), 1e-6);
    EXPECT_LE(p["hs"].get<double>(), 1.0 / 61 + 1e-7);  // w_hs / (60 + rank), rank >= 1
  }
}

TEST_F(ServerTest, ConsoleFilesAreServed) {
  auto r = Call("GET", "/console");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  EXPECT_NE(r.body.find("<script src=\"/console/console.js\">"), std::string::npos);
  EXPECT_EQ(Call("GET", "/console/").body, r.body);
  r = Call("GET", "/console/console.js");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/javascript; charset=utf-8");
  EXPECT_NE(r.body.find("Authorization"), std::string::npos);
  EXPECT_EQ(Call("GET", "/console/console.css").content_type, "text/css; charset=utf-8");
  EXPECT_EQ(Call("GET", "/console/nope.js").status, 404);
  EXPECT_EQ(Call("GET", "/console/../api.h").status, 404);
  EXPECT_EQ(Call("POST", "/console").status, 405);
}

}  // namespace
}  // namespace moeedb

namespace moeedb {
namespace {

using json = nlohmann::json;
using servertest::ServerTest;

// The cosine of two of the client's vectors, in double: what every hit's score must be.
double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t j = 0; j < a.size(); ++j) ab += double(a[j]) * b[j], aa += double(a[j]) * a[j], bb += double(b[j]) * b[j];
  return ab / std::sqrt(aa * bb);
}

// Qdrant's quantization_config chooses the codes (binary here) and a vector's
// on_disk puts the full rows in files; a search's params.quantization sets
// the oversampling. Every returned score is the exact cosine, computed here
// from the upserted vectors; a bad config is Qdrant's 400; the collection
// reports the codes it holds.
TEST_F(ServerTest, QdrantQuantizationKeepsScoresExact) {
  const size_t dim = 16, points = 400;
  auto r = Call("PUT", "/qdrant/collections/q",
                R"({"vectors": {"size": 16, "distance": "Cosine", "on_disk": true},
                    "quantization_config": {"binary": {"always_ram": true}}})");
  ASSERT_EQ(r.status, 200) << r.body;
  for (const char* bad : {R"({"product": {"compression": "x3"}})", R"({"scalar": {"type": "int4"}})",
                          R"({"rabitq": {}})", R"({"binary": {}, "scalar": {}})"}) {
    r = Call("PUT", "/qdrant/collections/bad",
             std::string(R"({"vectors": {"size": 16, "distance": "Cosine"}, "quantization_config": )") + bad + "}");
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
    EXPECT_TRUE(Body(r)["status"]["error"].is_string()) << r.body;
  }
  EXPECT_EQ(Call("GET", "/qdrant/collections/bad").status, 404);  // nothing was created
  EXPECT_EQ(Body(Call("GET", "/qdrant/collections/q"))["result"]["config"]["quantization_config"],
            json({{"binary", {{"always_ram", true}}}}));
  std::mt19937 rng(4);
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<std::vector<float>> vectors(points, std::vector<float>(dim));
  json batch = json::array();
  for (size_t i = 0; i < points; ++i) {
    for (auto& x : vectors[i]) x = g(rng) + (i % 4 == 0 ? 1.0f : -0.5f);
    batch.push_back({{"id", i + 1}, {"vector", vectors[i]}, {"payload", {{"n", i}}}});
  }
  r = Call("PUT", "/qdrant/collections/q/points?wait=true", json{{"points", batch}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  for (size_t q = 0; q < 5; ++q) {
    std::vector<float> v(dim);
    for (auto& x : v) x = g(rng);
    for (const char* params : {R"({"quantization": {"oversampling": 3, "rescore": true}})",
                               R"({"quantization": {"ignore": true}})", R"({"exact": true})"}) {
      r = Call("POST", "/qdrant/collections/q/points/search",
               json{{"vector", v}, {"limit", 5}, {"params", json::parse(params)}}.dump());
      ASSERT_EQ(r.status, 200) << r.body;
      const json hits = Body(r)["result"];
      ASSERT_EQ(hits.size(), 5u) << params;
      for (const json& h : hits)
        EXPECT_NEAR(h["score"].get<double>(), Cosine(v, vectors[h["id"].get<size_t>() - 1]), 1e-5) << params;
    }
  }
  r = Call("POST", "/qdrant/collections/q/points/search",
           R"({"vector": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16], "params": {"quantization": {"oversampling": 0}}})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("oversampling"), std::string::npos) << r.body;
  // The codes are chosen at creation: an update that asks for the same is
  // accepted, another is refused rather than ignored.
  EXPECT_EQ(Call("PATCH", "/qdrant/collections/q", R"({"quantization_config": {"binary": {"always_ram": false}}})").status, 200);
  r = Call("PATCH", "/qdrant/collections/q", R"({"quantization_config": {"scalar": {"type": "int8"}}})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("binary"), std::string::npos) << r.body;
  // A vector's own quantization_config is refused before anything is written.
  r = Call("PUT", "/qdrant/collections/dots",
           R"({"vectors": {"size": 8, "distance": "Cosine", "quantization_config": {"binary": {}}}})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(Call("GET", "/qdrant/collections/dots").status, 404);
  // Qdrant quantizes Dot vectors; moeedb's codes need unit vectors, so the
  // collection is made without codes and says so.
  r = Call("PUT", "/qdrant/collections/dots", R"({"vectors": {"size": 8, "distance": "Dot"}, "quantization_config": {"binary": {}}})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(Body(Call("GET", "/qdrant/collections/dots"))["result"]["config"]["quantization_config"].is_null());
  // moeedb's own API refuses codes it cannot hold, before anything is written: the name stays free.
  r = Call("PUT", "/collections/dots2", R"({"vector_size": 8, "distance": "Dot", "index": {"codes": "pq"}})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(Call("GET", "/collections/dots2").status, 404);
  EXPECT_EQ(Call("PUT", "/collections/dots2", R"({"vector_size": 8, "distance": "Dot"})").status, 201);
}

// A sharded collection with codes answers as a cluster does (database/
// shard_query.h): each shard re-scores its candidates exactly and the merge
// is exact, so every score is the cosine computed here, and with candidates
// enough to cover every shard the answer is a one-shard exact collection's.
TEST_F(ServerTest, AShardedCollectionWithCodesMergesExactScores) {
  ASSERT_EQ(Call("PUT", "/collections/coded",
                 R"({"vector_size": 16, "distance": "Cosine", "shards": 3, "index": {"codes": "binary", "on_disk": true}})").status, 201);
  ASSERT_EQ(Call("PUT", "/collections/exact", R"({"vector_size": 16, "distance": "Cosine"})").status, 201);
  const size_t dim = 16, n = 1200;  // about 400 a shard: past the 256 rows the codes train on
  std::mt19937 rng(8);
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<std::vector<float>> vectors(n, std::vector<float>(dim));
  for (size_t i = 0; i < n; ++i)
    for (auto& x : vectors[i]) x = g(rng) + (i % 3 == 0 ? 0.7f : 0.0f);
  for (size_t at = 0; at < n; at += 100) {  // the API's batch limit
    json docs = {{"documents", json::array()}, {"wait", true}};
    for (size_t i = at; i < at + 100; ++i) docs["documents"].push_back({{"id", std::to_string(i)}, {"vector", vectors[i]}});
    for (const char* c : {"coded", "exact"}) {
      auto r = Call("POST", std::string("/collections/") + c + "/documents", docs.dump());
      ASSERT_EQ(r.status, 200) << r.body;
    }
  }
  for (int q = 0; q < 5; ++q) {
    std::vector<float> v(dim);
    for (auto& x : v) x = g(rng);
    json coded = Body(Call("POST", "/collections/coded/search", json{{"vector", v}, {"k", 10}}.dump()))["hits"];
    ASSERT_EQ(coded.size(), 10u);
    for (const json& h : coded)
      EXPECT_NEAR(h["score"].get<double>(), Cosine(v, vectors[std::stoul(h["id"].get<std::string>())]), 1e-5);
    coded = Body(Call("POST", "/collections/coded/search", json{{"vector", v}, {"k", 10}, {"oversample", 1000}}.dump()))["hits"];
    const json exact = Body(Call("POST", "/collections/exact/search", json{{"vector", v}, {"k", 10}}.dump()))["hits"];
    ASSERT_EQ(coded.size(), exact.size());
    for (size_t i = 0; i < exact.size(); ++i) {
      EXPECT_EQ(coded[i]["id"], exact[i]["id"]) << "rank " << i;
      EXPECT_NEAR(coded[i]["score"].get<double>(), exact[i]["score"].get<double>(), 1e-6);
    }
  }
  EXPECT_EQ(Call("POST", "/collections/coded/search", R"({"query": "", "vector": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16], "oversample": 0})").status, 400);
}

}  // namespace
}  // namespace moeedb
