// bench/load: N concurrent clients on loopback, each on one keep-alive
// connection, POST /v1/embeddings with T texts per request, for a bounded
// time, or until every text was sent once (SECONDS "all"). Prints requests/s,
// texts/s, tokens/s (the responses' usage.prompt_tokens), p50/p99 latency and
// the client's own CPU time (it shares the machine with the server).
// Usage: load_bench PORT CLIENTS SECONDS|all TEXTS_FILE [TEXTS_PER_REQUEST=1] [MODEL=default] [API_KEY]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

using Clock = std::chrono::steady_clock;

static int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) { close(fd); return -1; }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

// Sends one request and reads one response (Content-Length framed). Returns the status.
static int RoundTrip(int fd, const std::string& req, std::string* buf) {
  if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) return -1;
  buf->clear();
  char tmp[65536];
  size_t header_end = std::string::npos, need = 0;
  while (true) {
    ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
    if (n <= 0) return -1;
    buf->append(tmp, static_cast<size_t>(n));
    if (header_end == std::string::npos) {
      header_end = buf->find("\r\n\r\n");
      if (header_end == std::string::npos) continue;
      const size_t cl = buf->find("Content-Length: ");
      need = header_end + 4 + (cl == std::string::npos ? 0 : std::strtoul(buf->c_str() + cl + 16, nullptr, 10));
    }
    if (buf->size() >= need) return std::atoi(buf->c_str() + 9);
  }
}

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: load_bench PORT CLIENTS SECONDS TEXTS_FILE [MODEL] [API_KEY]\n");
    return 2;
  }
  const int port = std::atoi(argv[1]), clients = std::atoi(argv[2]);
  const bool once = std::string(argv[3]) == "all";
  const double seconds = once ? 1e9 : std::atof(argv[3]);
  const int per_request = argc > 5 ? std::max(1, std::atoi(argv[5])) : 1;
  const std::string model = argc > 6 ? argv[6] : "default", key = argc > 7 ? argv[7] : "";
  std::vector<std::string> texts;
  std::ifstream in(argv[4]);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) texts.push_back(l);
  if (texts.empty()) return 2;
  std::atomic<size_t> next{0}, ok{0}, errors{0}, tokens{0};
  std::mutex mu;
  std::vector<double> latencies;
  const auto start = Clock::now();
  const auto stop_at = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&] {
      int fd = Connect(port);
      std::string buf;
      std::vector<double> mine;
      while (fd >= 0 && Clock::now() < stop_at) {
        std::vector<std::string> batch;
        for (int i = 0; i < per_request; ++i) {
          const size_t t = next++;
          if (once && t >= texts.size()) break;
          batch.push_back(texts[t % texts.size()]);
        }
        if (batch.empty()) break;
        const std::string body = nlohmann::json{{"input", batch}, {"model", model}, {"encoding_format", "base64"}}.dump();
        std::string req = "POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n";
        if (!key.empty()) req += "Authorization: Bearer " + key + "\r\n";
        req += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
        const auto t0 = Clock::now();
        const int status = RoundTrip(fd, req, &buf);
        mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        if (status == 200) {
          ++ok;
          const size_t at = buf.find("\"prompt_tokens\":");
          if (at != std::string::npos) tokens += std::strtoul(buf.c_str() + at + 16, nullptr, 10);
        }
        else { ++errors; if (status < 0) { close(fd); fd = Connect(port); } }
      }
      if (fd >= 0) close(fd);
      std::lock_guard<std::mutex> lock(mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  std::sort(latencies.begin(), latencies.end());
  auto pct = [&](double p) { return latencies.empty() ? 0.0 : latencies[std::min(latencies.size() - 1, size_t(p * latencies.size()))]; };
  std::printf("clients %d x %d texts/request, %.1f s: %zu ok, %zu errors; %.1f requests/s, %.1f texts/s; "
              "latency p50 %.1f ms, p99 %.1f ms\n",
              clients, per_request, wall, ok.load(), errors.load(), ok / wall, ok * per_request / wall, pct(0.50), pct(0.99));
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                     (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  std::printf("tokens %zu, %.1f tokens/s; client CPU %.2f s (%.1f %% of one core)\n", tokens.load(), tokens / wall, cpu,
              100 * cpu / wall);
  std::printf("server_texts_per_s %.3f\n", ok * per_request / wall);
  std::printf("server_tokens_per_s %.3f\n", tokens / wall);
  return errors.load() == 0 ? 0 : 1;
}
