// The server's routes through Api::Handle (no sockets), and the socket layer
// with real connections: formats, limits and errors, API keys, concurrency,
// and a stream of hostile requests that must all get a 4xx.
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

#include "engine/random_checkpoint.h"
#include "plugin/server/api.h"
#include "plugin/server/embed_queue.h"
#include "plugin/server/http_server.h"
#include "plugin/service/embedding_setup.h"
#include "tests/server_fixture.h"
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
  Api api(o, setup_, queue_.get(), store_.get(), stats_->first, stats_->second);
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
  Api api(small, setup_, queue_.get(), store_.get(), stats_->first, stats_->second);
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
    EXPECT_LE(st.batches, static_cast<uint64_t>(kSubmitters * kJobs));
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

// Raw HTTP over a loopback socket; returns the status code (0 if none).
int RawHttp(int port, const std::string& request, bool half_close = false) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) { close(fd); return 0; }
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  (void)!send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  if (half_close) shutdown(fd, SHUT_WR);
  std::string resp;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
    resp.append(buf, static_cast<size_t>(n));
    if (resp.find("\r\n\r\n") != std::string::npos) break;
  }
  close(fd);
  if (resp.compare(0, 9, "HTTP/1.1 ") != 0) return 0;
  return std::atoi(resp.c_str() + 9);
}

// The body of the answer to a Connection: close request ("" if none).
std::string HttpBody(int port, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) { close(fd); return ""; }
  timeval tv{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  (void)!send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string resp;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  const size_t at = resp.find("\r\n\r\n");
  return at == std::string::npos ? "" : resp.substr(at + 4);
}

std::string Post(const std::string& target, const std::string& body, const std::string& extra = "") {
  return "POST " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST_F(ServerTest, SocketLayerSurvivesHostileRequests) {
  ASSERT_EQ(Call("PUT", "/collections/keep", "{}").status, 201);
  ASSERT_EQ(Call("POST", "/collections/keep/documents", R"({"documents": [{"id": "k1", "text": "kept document"}]})").status, 200);
  const json before = Body(Call("POST", "/collections/keep/search", R"({"query": "kept", "k": 5})"))["hits"];
  HttpServerOptions so;
  so.port = 0;
  so.max_body_bytes = 64 * 1024;
  so.idle_timeout_s = 1;
  HttpServer server(so, api_.get());
  ASSERT_TRUE(server.Start().ok());
  const int port = server.port();
  EXPECT_EQ(RawHttp(port, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), 200);
  EXPECT_EQ(RawHttp(port, Post("/v1/embeddings", R"({"input": "hi", "model": "tiny"})")), 200);

  // Hostile traffic, bounded in count: every answer must be a 4xx.
  std::mt19937 rng(5);
  const std::vector<std::string> bodies = {
      "{", "[]", "null", "{\"input\": null, \"model\": \"tiny\"}", "{\"input\": [[]], \"model\": \"tiny\"}",
      "{\"input\": {\"a\": 1}, \"model\": \"tiny\"}", "{\"input\": \"x\", \"model\": \"nope\"}",
      "{\"input\": [\"\\u0000\"], \"model\": \"tiny:hs\", \"encoding_format\": 7}", "\xff\xfe\xfd",
      "{\"documents\": 5}", "{\"query\": []}", "{\"inputs\": [1, 2]}", "{\"input\": [-1], \"model\": \"tiny\"}"};
  const std::vector<std::string> targets = {"/v1/embeddings", "/embed", "/collections/keep/documents",
                                            "/collections/keep/search", "/collections/%ZZ/search", "/v1/../etc/passwd",
                                            "/collections/keep/documents/%00", "/nowhere", "/", "/rerank",
                                            "/tokenize", "/decode", "/embed_sparse", "/embed_all", "/api/embed",
                                            "/api/embeddings", "/vectors", "/meta", "/.well-known/x",
                                            "/qdrant/collections/keep/points/query", "/qdrant/collections/keep/points",
                                            "/qdrant/collections/keep/points/scroll", "/qdrant/collections/%ZZ"};
  int bad = 0, total = 0;
  const int kRequests = 10000;
  // Most hostile requests go straight to the router (fast); a share crosses real sockets.
  for (int i = 0; i < kRequests; ++i) {
    const std::string& body = bodies[rng() % bodies.size()];
    const std::string& target = targets[rng() % targets.size()];
    const char* methods[] = {"POST", "GET", "PATCH", "DELETE", "OPTIONS"};
    const std::string method = methods[rng() % 5];
    int status;
    if (i % 20 == 0) {
      std::string req;
      switch (rng() % 5) {
        case 0: req = Post(target, body); break;
        case 1: req = method + " " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 10\r\n\r\n{\"a\""; break;  // truncated, then half-closed
        case 2: req = "GARBAGE\r\n\r\n"; break;
        case 3: req = Post(target, std::string(70 * 1024, 'x')); break;  // over the body limit
        default: req = "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n"; break;
      }
      status = RawHttp(port, req, /*half_close=*/true);
      if (status == 0) continue;  // the connection closed without an answer (truncated body, timeout): allowed
      if (status == 200 && target == "/api/embed" && req.rfind("POST", 0) == 0 && body.find("\"model\": \"tiny") != std::string::npos)
        continue;  // Ollama ignores unknown fields: a valid request
    } else {
      status = Call(method, target, body).status;
      if ((target == "/v1/embeddings" || target == "/api/embed") && method == "POST" && body.find("\"model\": \"tiny") != std::string::npos &&
          status == 200)
        continue;  // a request that happens to be valid
      if ((target == "/collections/keep/documents" || target == "/meta") && method == "GET" && status == 200)
        continue;  // reads that ignore bodies
      if (target == "/qdrant/collections/%ZZ" && method == "DELETE" && status == 200) continue;  // Qdrant: {"result": false}
    }
    ++total;
    if (status < 400 || status >= 500) {
      ++bad;
      ADD_FAILURE() << method << " " << target << " " << body << " -> " << status;
      if (bad > 5) break;
    }
  }
  EXPECT_GE(total, 9000);
  EXPECT_EQ(bad, 0);
  // A slow client that sends half a request and stalls is dropped; the server still answers.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  (void)!send(fd, "POST /v1/embeddings HTTP/1.1\r\nHost", 33, MSG_NOSIGNAL);
  EXPECT_EQ(RawHttp(port, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), 200);
  close(fd);
  // Keep-alive: two requests on one connection.
  EXPECT_EQ(RawHttp(port, "GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), 200);
  server.Stop();
  const json after = Body(Call("POST", "/collections/keep/search", R"({"query": "kept", "k": 5})"))["hits"];
  EXPECT_EQ(before, after);
  EXPECT_EQ(Body(Call("GET", "/collections/keep"))["documents"], 1);
}


// A client that trickles its request a byte at a time, each within the idle
// timeout, is cut off at the request deadline with a 408; others are served.
TEST_F(ServerTest, SlowClientHitsTheRequestDeadline) {
  HttpServerOptions so;
  so.port = 0;
  so.idle_timeout_s = 2;
  so.request_timeout_s = 1;
  HttpServer server(so, api_.get());
  ASSERT_TRUE(server.Start().ok());
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string request = Post("/v1/embeddings", R"({"input": "a slowly sent text", "model": "tiny"})");
  size_t sent = 0;
  std::string answer;
  for (; sent < request.size() && answer.empty(); ++sent) {
    if (send(fd, request.data() + sent, 1, MSG_NOSIGNAL) != 1) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 300) > 0) {  // 300 ms per byte: each gap under the idle timeout
      char buf[4096];
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n > 0) answer.assign(buf, static_cast<size_t>(n));
      else break;
    }
  }
  close(fd);
  EXPECT_LT(sent, request.size()) << "the whole trickled request was accepted";
  EXPECT_EQ(answer.rfind("HTTP/1.1 408", 0), 0u) << answer;
  EXPECT_EQ(RawHttp(server.port(), "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), 200);
  server.Stop();
}

// `moeedb serve` as a process, its stdout read until it says where it listens.
struct ServeProcess {
  pid_t pid = -1;
  int port = 0;
};
ServeProcess StartServe(const std::string& db, const std::string& model) {
  int out[2];
  if (pipe(out) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    if (model.empty())  // the setup the database's collections recorded
      execl(test::Binary().c_str(), test::Binary().c_str(), "serve", "--db", db.c_str(), "--port", "0",
            "--served-model-name", "tiny", static_cast<char*>(nullptr));
    else
      execl(test::Binary().c_str(), test::Binary().c_str(), "serve", "--db", db.c_str(), "--model", model.c_str(),
            "--port", "0", "--served-model-name", "tiny", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  std::string text;
  char buf[256];
  ssize_t n;
  while (text.find('\n') == std::string::npos && (n = read(out[0], buf, sizeof(buf))) > 0) text.append(buf, n);
  close(out[0]);  // the server's later writes to stdout go nowhere (it ignores SIGPIPE)
  const size_t at = text.find("127.0.0.1:");
  ServeProcess p;
  p.pid = pid;
  if (at != std::string::npos) p.port = std::atoi(text.c_str() + at + 10);
  return p;
}

int Terminate(const ServeProcess& p) {
  kill(p.pid, SIGTERM);
  int status = 0;
  waitpid(p.pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A database ingested by the CLI with a non-default prompt, routing and HS
// pooling, served with no setup flags: the server embeds with the setup the
// collection recorded, and its hits and scores equal the CLI's.
TEST_F(ServerTest, ServesTheSetupACollectionRecorded) {
  test::TempDir t;
  const std::string db = t / "db";
  std::string jsonl;
  const std::vector<std::string> texts = {"A man is playing a flute.", "Two dogs run in the park.",
                                          "The stock market fell today.", "A woman slices an onion.",
                                          "Rain is expected tonight.", "He plays the guitar on stage."};
  for (size_t i = 0; i < texts.size(); ++i)
    jsonl += json{{"id", "d" + std::to_string(i)}, {"text", texts[i]}}.dump() + "\n";
  test::WriteFile(t / "docs.jsonl", jsonl);
  auto r = test::Run({test::Binary(), "ingest", "--db", db, "--collection", "c", "--model", *dir_ / "model", "--prompt",
                      "prompteol", "--routing", "top1", "--hs-pooling", "mean", t / "docs.jsonl"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string query = "Someone is playing music.";
  auto cli = test::Run({test::Binary(), "search", "--db", db, "--collection", "c", "--k", "4", query});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  const json want = json::parse(cli.out)["hits"];
  ServeProcess server = StartServe(db, "");
  ASSERT_GT(server.port, 0);
  const std::string body = HttpBody(server.port, Post("/collections/c/search", json{{"query", query}, {"k", 4}}.dump()));
  EXPECT_EQ(Terminate(server), 0);
  const json got = json::parse(body, nullptr, false);
  ASSERT_FALSE(got.is_discarded()) << body;
  ASSERT_EQ(got["hits"].size(), want.size()) << body;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got["hits"][i]["id"], want[i]["id"]) << i;
    EXPECT_NEAR(got["hits"][i]["score"].get<double>(), want[i]["score"].get<double>(), 1e-5) << i;
  }
}

// SIGTERM while four clients upsert with "wait": the server stops accepting,
// answers what it took in, exits 0, and every upsert it acknowledged (200)
// is there when the database is served again. Answers other than 200, a
// shutdown 429 or a refused/closed connection are failures.
TEST_F(ServerTest, SigtermKeepsEveryAcknowledgedWrite) {
  test::TempDir db;
  ServeProcess server = StartServe(db / "db", *dir_ / "model");
  ASSERT_GT(server.port, 0);
  const std::string put = "PUT /collections/c HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}";
  ASSERT_EQ(RawHttp(server.port, put), 201);
  std::mutex mu;
  std::vector<std::string> acked, unexpected;
  std::atomic<int> n_acked{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c)
    clients.emplace_back([&, c] {
      for (int i = 0; i < 100000; ++i) {
        const std::string id = "t" + std::to_string(c) + "-" + std::to_string(i);
        const json body = {{"documents", {{{"id", id}, {"text", "client " + std::to_string(c) + " wrote document " +
                                                                 std::to_string(i)}}}},
                           {"wait", true}};
        const int status = RawHttp(server.port, Post("/collections/c/documents", body.dump()));
        std::lock_guard<std::mutex> lock(mu);
        if (status == 200) {
          acked.push_back(id);
          ++n_acked;
        } else if (status == 0) {
          return;  // refused or closed: the server is going or gone
        } else if (status != 429) {
          unexpected.push_back(id + " -> " + std::to_string(status));
        }
      }
    });
  for (int wait = 0; wait < 3000 && n_acked < 24; ++wait) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GE(n_acked.load(), 24);
  EXPECT_EQ(Terminate(server), 0);
  for (auto& t : clients) t.join();
  EXPECT_TRUE(unexpected.empty()) << unexpected.front();
  RecordProperty("acknowledged", static_cast<int>(acked.size()));

  ServeProcess again = StartServe(db / "db", *dir_ / "model");
  ASSERT_GT(again.port, 0);
  for (const std::string& id : acked)
    EXPECT_EQ(RawHttp(again.port, "GET /collections/c/documents/" + id +
                                      " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
              200)
        << id;
  EXPECT_EQ(Terminate(again), 0);
}

}  // namespace
}  // namespace moeedb
