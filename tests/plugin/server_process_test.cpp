// The server over real sockets and as a process: a stream of hostile
// requests that must all get a 4xx, the request deadline, `moeedb serve`
// serving each collection with the setup it recorded, and SIGTERM keeping
// every acknowledged write.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "base/http_client.h"
#include "base/tls.h"
#include "plugin/server/api.h"
#include "plugin/server/http_server.h"
#include "tests/plugin/server_fixture.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

using servertest::ServerTest;
using json = nlohmann::json;

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

// HTTPS: with a certificate the server speaks TLS only; a client trusting
// its CA is answered, one trusting another CA, or asking under a name the
// certificate does not hold, is refused before any request is sent.
TEST_F(ServerTest, HttpsAnswersAClientThatTrustsItsCaAndOnlyThat) {
  const std::string tls = test::DataDir() + "/tls/";
  HttpServerOptions so;
  so.port = 0;
  so.tls_cert_file = tls + "node.pem";
  so.tls_key_file = tls + "node-key.pem";
  HttpServer server(so, api_.get());
  ASSERT_TRUE(server.Start().ok());
  const std::string at = "127.0.0.1:" + std::to_string(server.port());
  auto trusted = TlsContext::Client({tls + "ca.pem", "", ""});
  ASSERT_TRUE(trusted.ok()) << trusted.status().ToString();
  auto health = HttpGet(at, "/health", std::chrono::seconds(10), trusted->get());
  ASSERT_TRUE(health.ok()) << health.status().ToString();
  EXPECT_EQ(health->status, 200);
  auto embedded = HttpPost(at, "/v1/embeddings", R"({"input": "over tls", "model": "tiny"})", std::chrono::seconds(30),
                           "", trusted->get());
  ASSERT_TRUE(embedded.ok()) << embedded.status().ToString();
  EXPECT_EQ(embedded->status, 200) << embedded->body;
  EXPECT_EQ(json::parse(embedded->body)["data"][0]["embedding"].size(), Body(Call("POST", "/v1/embeddings",
            R"({"input": "over tls", "model": "tiny"})"))["data"][0]["embedding"].size());

  auto untrusted = TlsContext::Client({tls + "other-ca.pem", "", ""});
  ASSERT_TRUE(untrusted.ok());
  auto refused = HttpGet(at, "/health", std::chrono::seconds(10), untrusted->get());
  EXPECT_EQ(refused.status().code(), Status::Code::kUnavailable) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("certificate verify failed"), std::string::npos) << refused.status().ToString();
  // The certificate names 127.0.0.1 only: under another name the same server is refused.
  auto misnamed = HttpGet("localhost:" + std::to_string(server.port()), "/health", std::chrono::seconds(10),
                          trusted->get());
  EXPECT_EQ(misnamed.status().code(), Status::Code::kUnavailable) << "the host name was not checked";
  EXPECT_NE(misnamed.status().message().find("certificate verify failed"), std::string::npos) << misnamed.status().ToString();
  // Plain HTTP gets no answer from a TLS port.
  EXPECT_EQ(RawHttp(server.port(), "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), 0);
  // And the server still answers the trusted client afterwards.
  EXPECT_EQ(HttpGet(at, "/health", std::chrono::seconds(10), trusted->get())->status, 200);
  server.Stop();
  // moeedb's client closes without TLS's close_notify: the end of a
  // connection, not a malformed request (none was counted as one).
  const std::string metrics = Call("GET", "/metrics", "").body;
  EXPECT_EQ(metrics.find("route=\"http_error\""), std::string::npos) << metrics.substr(0, 2000);
}

TEST(TlsFiles, AMissingOrMismatchedFileIsRefusedByName) {
  const std::string tls = test::DataDir() + "/tls/";
  auto missing = TlsContext::Server({"", tls + "nope.pem", tls + "node-key.pem"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("nope.pem"), std::string::npos) << missing.status().ToString();
  auto no_key = TlsContext::Server({"", tls + "node.pem", ""});
  EXPECT_EQ(no_key.status().code(), Status::Code::kInvalidArgument);
  // The CA's key is no key of the node's certificate.
  auto mismatched = TlsContext::Server({"", tls + "node.pem", tls + "ca-key.pem"});
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(mismatched.status().message().find("ca-key.pem"), std::string::npos) << mismatched.status().ToString();
  auto not_pem = TlsContext::Client({tls + "make.sh", "", ""});
  EXPECT_EQ(not_pem.status().code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(TlsContext::Client({tls + "ca.pem", tls + "node.pem", tls + "node-key.pem"}).ok());
  HttpServerOptions so;
  so.port = 0;
  so.tls_cert_file = tls + "nope.pem";
  so.tls_key_file = tls + "node-key.pem";
  HttpServer server(so, nullptr);
  EXPECT_FALSE(server.Start().ok());
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

// One database, two collections ingested by the CLI with different setups
// (one with a non-default prompt, routing and HS pooling), served with no
// setup flags by one server: each collection is embedded with the setup it
// recorded, and its hits and scores equal the CLI's.
TEST_F(ServerTest, ServesEachCollectionWithTheSetupItRecorded) {
  test::TempDir t;
  const std::string db = t / "db";
  std::string jsonl;
  const std::vector<std::string> texts = {"A man is playing a flute.", "Two dogs run in the park.",
                                          "The stock market fell today.", "A woman slices an onion.",
                                          "Rain is expected tonight.", "He plays the guitar on stage."};
  for (size_t i = 0; i < texts.size(); ++i)
    jsonl += json{{"id", "d" + std::to_string(i)}, {"text", texts[i]}}.dump() + "\n";
  test::WriteFile(t / "docs.jsonl", jsonl);
  const std::string model = *dir_ / "model";
  auto r = test::Run({test::Binary(), "ingest", "--db", db, "--collection", "c", "--model", model, "--prompt",
                      "prompteol", "--routing", "top1", "--hs-pooling", "mean", t / "docs.jsonl"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = test::Run({test::Binary(), "ingest", "--db", db, "--collection", "d", "--model", model, "--prompt", "none",
                 "--routing", "learned", "--hs-pooling", "last", t / "docs.jsonl"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string query = "Someone is playing music.";
  std::map<std::string, json> want;
  for (const char* c : {"c", "d"}) {
    auto cli = test::Run({test::Binary(), "search", "--db", db, "--collection", c, "--k", "4", query});
    ASSERT_EQ(cli.exit_code, 0) << cli.err;
    want[c] = json::parse(cli.out)["hits"];
  }
  // The two setups rank differently (else the test could not tell them apart).
  EXPECT_NE(want["c"][0]["score"], want["d"][0]["score"]);
  ServeProcess server = StartServe(db, "");
  ASSERT_GT(server.port, 0);
  std::map<std::string, std::string> body;
  for (const char* c : {"c", "d"})
    body[c] = HttpBody(server.port, Post(std::string("/collections/") + c + "/search", json{{"query", query}, {"k", 4}}.dump()));
  EXPECT_EQ(Terminate(server), 0);
  for (const char* c : {"c", "d"}) {
    const json got = json::parse(body[c], nullptr, false);
    ASSERT_FALSE(got.is_discarded()) << body[c];
    ASSERT_EQ(got["hits"].size(), want[c].size()) << body[c];
    for (size_t i = 0; i < want[c].size(); ++i) {
      EXPECT_EQ(got["hits"][i]["id"], want[c][i]["id"]) << c << " " << i;
      EXPECT_NEAR(got["hits"][i]["score"].get<double>(), want[c][i]["score"].get<double>(), 1e-5) << c << " " << i;
    }
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
