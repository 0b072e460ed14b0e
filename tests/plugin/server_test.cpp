// The server's routes through Api::Handle (no sockets): formats, limits and
// errors, API keys, metrics, the embedding queue, concurrency.
// Sockets and `moeedb serve` processes: server_process_test.cpp.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <atomic>
#include <mutex>
#include <random>
#include <thread>

#include "engine/model/random_checkpoint.h"
#include "plugin/server/api.h"
#include "plugin/server/embed_queue.h"
#include "plugin/server/http_server.h"
#include "database/embedding_setup.h"
#include "tests/plugin/server_fixture.h"
#include "tests/test_util.h"

namespace moeedb {
namespace servertest {
test::TempDir* ServerTest::dir_ = nullptr;
EmbeddingSetup* ServerTest::setup_ = nullptr;
std::pair<std::string, std::string>* ServerTest::stats_ = nullptr;
}  // namespace servertest
namespace {

using servertest::ServerTest;

using json = nlohmann::json;

std::vector<float> DecodeBase64Floats(const std::string& s) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::string bytes;
  for (size_t i = 0; i + 3 < s.size(); i += 4) {
    const int a = val(s[i]), b = val(s[i + 1]), c = val(s[i + 2]), d = val(s[i + 3]);
    bytes += static_cast<char>((a << 2) | (b >> 4));
    if (s[i + 2] != '=') bytes += static_cast<char>(((b & 15) << 4) | (c >> 2));
    if (s[i + 3] != '=') bytes += static_cast<char>(((c & 3) << 6) | d);
  }
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}



TEST_F(ServerTest, OpenAiEmbeddingsFloatAndBase64MatchTheEmbedder) {
  const std::vector<std::string> texts = {"A man is playing a flute.", "Stock markets fell."};
  auto expect = setup_->Embed(texts);
  ASSERT_TRUE(expect.ok());
  auto r = Call("POST", "/v1/embeddings", json{{"input", texts}, {"model", "tiny:hs"}, {"encoding_format", "float"}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json j = Body(r);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 2u);
  int64_t tokens = 0;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(j["data"][i]["index"], i);
    auto v = j["data"][i]["embedding"].get<std::vector<float>>();
    ASSERT_EQ(v.size(), (*expect)[i].hs.size());
    for (size_t k = 0; k < v.size(); ++k) EXPECT_NEAR(v[k], (*expect)[i].hs[k], 1e-5);
    tokens += (*expect)[i].tokens;
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], tokens);
  // base64 (the openai client's default) carries the same floats, little-endian f32.
  r = Call("POST", "/v1/embeddings", json{{"input", texts[0]}, {"model", "tiny:rw"}, {"encoding_format", "base64"}}.dump());
  ASSERT_EQ(r.status, 200);
  auto b64 = DecodeBase64Floats(Body(r)["data"][0]["embedding"].get<std::string>());
  ASSERT_EQ(b64.size(), (*expect)[0].rw.size());
  for (size_t k = 0; k < b64.size(); ++k) EXPECT_NEAR(b64[k], (*expect)[0].rw[k], 1e-5);
  // The default vector is fused: two unit halves.
  r = Call("POST", "/v1/embeddings", json{{"input", texts[0]}, {"model", "tiny"}}.dump());
  ASSERT_EQ(r.status, 200);
  auto fused = Body(r)["data"][0]["embedding"].get<std::vector<float>>();
  ASSERT_EQ(fused.size(), setup_->dim_hs() + setup_->dim_rw());
  double nh = 0, nr = 0;
  for (size_t k = 0; k < setup_->dim_hs(); ++k) nh += fused[k] * fused[k];
  for (size_t k = setup_->dim_hs(); k < fused.size(); ++k) nr += fused[k] * fused[k];
  EXPECT_NEAR(nh, 1.0, 1e-4);
  EXPECT_NEAR(nr, 1.0, 1e-4);
  // Token-id input.
  r = Call("POST", "/v1/embeddings", json{{"input", json::array({json::array({1, 2, 3})})}, {"model", "default"}}.dump());
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(ServerTest, OpenAiErrorsHaveTheRightStatus) {
  auto status_of = [&](const std::string& body) { return Call("POST", "/v1/embeddings", body).status; };
  EXPECT_EQ(status_of("{not json"), 400);
  EXPECT_EQ(status_of("[1]"), 400);
  EXPECT_EQ(status_of(R"({"model": "tiny"})"), 400);
  EXPECT_EQ(status_of(R"({"input": "", "model": "tiny"})"), 400);
  EXPECT_EQ(status_of(R"({"input": ["ok", "  "], "model": "tiny"})"), 400);
  EXPECT_EQ(status_of(R"({"input": 5, "model": "tiny"})"), 400);
  EXPECT_EQ(status_of(R"({"input": [1, "a"], "model": "tiny"})"), 400);
  EXPECT_EQ(status_of(R"({"input": "x", "model": 3})"), 400);
  EXPECT_EQ(status_of(R"({"input": "x", "model": "gpt-4"})"), 404);
  EXPECT_EQ(status_of(R"({"input": "x", "model": "tiny", "encoding_format": "hex"})"), 400);
  EXPECT_EQ(status_of(R"({"input": "x", "model": "tiny:hs", "dimensions": 3})"), 400);
  EXPECT_EQ(status_of(R"({"input": ["a","b","c","d","e","f","g","h","i"], "model": "tiny"})"), 413);
  EXPECT_EQ(status_of(json{{"input", std::string(2000, 'a') + " b"}, {"model", "tiny"}}.dump()), 422);
  EXPECT_EQ(status_of(R"({"input": [[1, 99999999]], "model": "tiny"})"), 400);
  auto r = Call("POST", "/v1/embeddings", "{bad");
  json e = Body(r)["error"];
  EXPECT_TRUE(e["message"].is_string());
  EXPECT_TRUE(e["type"].is_string());
  EXPECT_EQ(Call("GET", "/v1/embeddings").status, 405);
  EXPECT_EQ(Call("GET", "/nowhere").status, 404);
}

TEST_F(ServerTest, ApiKeyGuardsEveryRouteButHealth) {
  ApiOptions o;
  o.api_key = "s3cret";
  o.served_model_name = "tiny";
  auto owned = NewApi(o);
  Api& api = *owned;
  const std::vector<std::pair<std::string, std::string>> routes = {
      {"POST", "/v1/embeddings"}, {"GET", "/v1/models"}, {"POST", "/embed"}, {"GET", "/info"}, {"GET", "/metrics"},
      {"GET", "/collections"}, {"PUT", "/collections/x"}, {"POST", "/collections/x/search"}, {"GET", "/nowhere"},
      {"POST", "/"}, {"POST", "/rerank"}, {"POST", "/api/embed"}, {"POST", "/vectors"}, {"GET", "/.well-known/ready"},
      {"GET", "/qdrant/collections"}, {"POST", "/qdrant/collections/x/points/query"}};
  for (const auto& [m, t] : routes) {
    EXPECT_EQ(api.Handle({m, t, {}, "{}"}).status, 401) << m << " " << t;
    EXPECT_EQ(api.Handle({m, t, {{"authorization", "Bearer wrong"}}, "{}"}).status, 401) << m << " " << t;
    EXPECT_NE(api.Handle({m, t, {{"authorization", "Bearer s3cret"}}, "{}"}).status, 401) << m << " " << t;
  }
  EXPECT_EQ(api.Handle({"GET", "/health", {}, ""}).status, 200);
  // Qdrant-style "api-key: KEY" is accepted too; refusals come in the route's protocol shape.
  EXPECT_EQ(api.Handle({"GET", "/info", {{"api-key", "s3cret"}}, ""}).status, 200);
  EXPECT_EQ(api.Handle({"GET", "/info", {{"api-key", "nope"}}, ""}).status, 401);
  EXPECT_TRUE(json::parse(api.Handle({"POST", "/embed", {}, "{}"}).body)["error"].is_string());           // TEI
  EXPECT_TRUE(json::parse(api.Handle({"POST", "/api/embed", {}, "{}"}).body)["error"].is_string());       // Ollama
  EXPECT_TRUE(json::parse(api.Handle({"POST", "/v1/embeddings", {}, "{}"}).body)["error"].is_object());   // OpenAI
  EXPECT_TRUE(json::parse(api.Handle({"GET", "/qdrant/collections", {}, ""}).body)["status"]["error"].is_string());  // Qdrant
  // The console's files hold no data and are served without the key; the
  // documents list they page through is guarded like every data route.
  EXPECT_EQ(api.Handle({"GET", "/console", {}, ""}).status, 200);
  EXPECT_EQ(api.Handle({"GET", "/collections/x/documents?limit=5", {}, ""}).status, 401);
}

TEST_F(ServerTest, TeiEmbedAllIsBoundedAndShaped) {
  auto r = Call("POST", "/embed_all", R"({"inputs": ["hello there", "general kenobi"]})");
  ASSERT_EQ(r.status, 200) << r.body;
  json j = Body(r);
  ASSERT_EQ(j.size(), 2u);
  for (const auto& text : j) {
    ASSERT_FALSE(text.empty());
    for (const auto& token : text) EXPECT_EQ(token.size(), static_cast<size_t>(setup_->model().config().hidden_size));
  }
  ApiOptions small;
  small.served_model_name = "tiny";
  small.max_embed_all_floats = 64 * 3;  // three tokens of this 64-wide model
  auto owned = NewApi(small);
  Api& api = *owned;
  auto big = api.Handle({"POST", "/embed_all", {}, R"({"inputs": ["a sentence that has more than three tokens"]})"});
  EXPECT_EQ(big.status, 413);
  EXPECT_EQ(Body(big)["error_type"], "validation");
}

TEST_F(ServerTest, TeiEmbedInfoAndMetrics) {
  auto r = Call("POST", "/embed", R"({"inputs": ["hello there", "general kenobi"]})");
  ASSERT_EQ(r.status, 200) << r.body;
  json j = Body(r);
  ASSERT_EQ(j.size(), 2u);
  double n = 0;
  for (float x : j[0].get<std::vector<float>>()) n += x * x;
  EXPECT_NEAR(n, 1.0, 1e-4);
  json many = {{"inputs", std::vector<std::string>(33, "x")}};
  EXPECT_EQ(Call("POST", "/embed", many.dump()).status, 413);
  EXPECT_EQ(Call("POST", "/embed", R"({"inputs": 3})").status, 422);
  json info = Body(Call("GET", "/info"));
  EXPECT_EQ(info["model_id"], "tiny");
  EXPECT_EQ(info["max_client_batch_size"], 32);
  EXPECT_EQ(info["dim_hs"], setup_->dim_hs());
  const std::string m = Call("GET", "/metrics").body;
  EXPECT_NE(m.find("moeedb_requests_total{route=\"/embed\",status=\"200\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("moeedb_requests_total{route=\"/embed\",status=\"413\"} 1"), std::string::npos);
  EXPECT_NE(m.find("moeedb_tokens_embedded_total"), std::string::npos);
  EXPECT_NE(m.find("moeedb_batch_size_texts_count"), std::string::npos);
  EXPECT_NE(m.find("moeedb_queue_depth 0"), std::string::npos);
}

// Several workers taking shares of the queue: every job, from many concurrent
// submitters, gets exactly its own texts' embeddings (as the embedder gives
// them alone), whichever forwards its texts landed in; bad ids are refused up
// front.
TEST_F(ServerTest, EmbedQueueWithSeveralWorkersAnswersEachJobWithItsOwnTexts) {
  const Embedder& embedder = setup_->embedder();
  const int32_t vocab = static_cast<int32_t>(setup_->model().config().vocab_size);
  for (int workers : {2, 3}) {
    EmbedQueue queue(&embedder, 256, 4096, 2000, workers, 1);
    EXPECT_EQ(queue.Submit({}).status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(queue.Submit({{1, 2}, {vocab}}).status().code(), Status::Code::kInvalidArgument);
    constexpr int kSubmitters = 6, kJobs = 12;
    std::vector<std::vector<std::vector<std::vector<int32_t>>>> jobs(kSubmitters);
    std::vector<std::vector<Result<std::vector<Embedding>>>> got(kSubmitters);
    std::mt19937 rng(7 + workers);
    for (auto& js : jobs)
      for (int j = 0; j < kJobs; ++j) {
        std::vector<std::vector<int32_t>> job(1 + rng() % 4);
        for (auto& ids : job) {
          ids.resize(1 + rng() % 40);
          for (auto& id : ids) id = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
        }
        js.push_back(std::move(job));
      }
    std::vector<std::thread> threads;
    for (int s = 0; s < kSubmitters; ++s)
      threads.emplace_back([&, s] {
        for (const auto& job : jobs[s]) {
          auto f = queue.Submit(job);
          if (!f.ok()) {
            got[s].push_back(f.status());
            continue;
          }
          got[s].push_back(f->get());
        }
      });
    for (auto& t : threads) t.join();
    size_t texts = 0;
    for (int s = 0; s < kSubmitters; ++s)
      for (int j = 0; j < kJobs; ++j) {
        ASSERT_TRUE(got[s][j].ok()) << got[s][j].status().ToString();
        auto alone = embedder.EmbedIds(jobs[s][j]);
        ASSERT_TRUE(alone.ok());
        ASSERT_EQ(got[s][j]->size(), alone->size());
        for (size_t i = 0; i < alone->size(); ++i) {
          const Embedding &a = (*got[s][j])[i], &b = (*alone)[i];
          EXPECT_EQ(a.tokens, static_cast<int64_t>(jobs[s][j][i].size()));
          ASSERT_EQ(a.hs.size(), b.hs.size());
          ASSERT_EQ(a.rw.size(), b.rw.size());
          for (size_t d = 0; d < a.hs.size(); ++d) ASSERT_NEAR(a.hs[d], b.hs[d], 1e-4) << "job " << s << "/" << j;
          for (size_t d = 0; d < a.rw.size(); ++d) ASSERT_NEAR(a.rw[d], b.rw[d], 1e-4) << "job " << s << "/" << j;
        }
        texts += alone->size();
      }
    const EmbedQueue::Stats st = queue.stats();
    EXPECT_EQ(st.texts, texts);
    // Every forward carries at least one text; a job's texts may be split
    // across workers' shares, so forwards can outnumber jobs.
    EXPECT_GE(st.batches, 1u);
    EXPECT_LE(st.batches, static_cast<uint64_t>(texts));
    EXPECT_GT(st.busy_seconds, 0.0);
    EXPECT_EQ(st.depth, 0u);

    // One large job on an idle queue: a worker takes its share of it, not
    // all, so it runs as several forwards, and comes back whole, in order.
    std::vector<std::vector<int32_t>> big(40);
    for (auto& ids : big) {
      ids.resize(1 + rng() % 30);
      for (auto& id : ids) id = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
    }
    auto f = queue.Submit(big);
    ASSERT_TRUE(f.ok());
    auto got_big = f->get();
    ASSERT_TRUE(got_big.ok()) << got_big.status().ToString();
    auto alone = embedder.EmbedIds(big);
    ASSERT_TRUE(alone.ok());
    ASSERT_EQ(got_big->size(), big.size());
    for (size_t i = 0; i < big.size(); ++i) {
      EXPECT_EQ((*got_big)[i].tokens, static_cast<int64_t>(big[i].size()));
      for (size_t d = 0; d < (*alone)[i].hs.size(); ++d) ASSERT_NEAR((*got_big)[i].hs[d], (*alone)[i].hs[d], 1e-4) << i;
    }
    EXPECT_GE(queue.stats().batches, st.batches + 2);
  }
}

TEST_F(ServerTest, ConcurrentSearchesAndIngestsMatchSequentialOnes) {
  ASSERT_EQ(Call("PUT", "/collections/cc", R"({"index": {"hs": "hnsw", "rw": "hnsw"}})").status, 201);
  const int kClients = 6, kPerClient = 5;
  auto doc_batch = [](int c) {
    json docs = json::array();
    for (int i = 0; i < kPerClient; ++i)
      docs.push_back({{"id", "c" + std::to_string(c) + "-" + std::to_string(i)},
                      {"text", "client " + std::to_string(c) + " writes document number " + std::to_string(i)}});
    return json{{"documents", docs}, {"wait", true}}.dump();
  };
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int c = 0; c < kClients; ++c)
    threads.emplace_back([&, c] {
      if (Call("POST", "/collections/cc/documents", doc_batch(c)).status != 200) ++failures;
      if (Call("POST", "/collections/cc/search", R"({"query": "client writes", "k": 3})").status != 200) ++failures;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(Body(Call("GET", "/collections/cc"))["documents"], kClients * kPerClient);
  // Concurrent searches give exactly what one search alone gives.
  const std::string q = R"({"query": "client 3 writes document number 2", "k": 5})";
  const json alone = Body(Call("POST", "/collections/cc/search", q))["hits"];
  std::vector<json> got(8);
  threads.clear();
  for (int i = 0; i < 8; ++i) threads.emplace_back([&, i] { got[i] = Body(Call("POST", "/collections/cc/search", q))["hits"]; });
  for (auto& t : threads) t.join();
  for (const auto& g : got) {
    ASSERT_EQ(g.size(), alone.size());
    for (size_t k = 0; k < g.size(); ++k) {
      EXPECT_EQ(g[k]["id"], alone[k]["id"]);
      EXPECT_NEAR(g[k]["score"].get<double>(), alone[k]["score"].get<double>(), 1e-5);
    }
  }
  EXPECT_EQ(alone[0]["id"], "c3-2");
}

}  // namespace
}  // namespace moeedb
