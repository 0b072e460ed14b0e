// A fake Patroni for the store's tests: its REST API on a loopback port,
// answering what the test sets, and GET /cluster's member entries.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio.hpp>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>

namespace moeedb::test {

namespace asio = boost::asio;

// A Patroni REST API on a loopback port: GET path -> (status, body) as set;
// any other path answers 404. stop() closes the port (a dead Patroni).
class FakePatroni {
 public:
  FakePatroni() : acceptor_(io_, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakePatroni() { Stop(); }
  std::string host_port() const { return "127.0.0.1:" + std::to_string(port_); }
  void Set(const std::string& path, int status, const std::string& body = "{}") {
    std::lock_guard<std::mutex> lock(mu_);
    answers_[path] = {status, body};
  }
  void Stop() {
    if (stopped_.exchange(true)) return;
    {  // a blocked accept() wakes only for a connection
      asio::io_context io;
      asio::ip::tcp::socket wake(io);
      boost::system::error_code ignored;
      wake.connect(acceptor_.local_endpoint(), ignored);
    }
    if (thread_.joinable()) thread_.join();
    boost::system::error_code ignored;
    acceptor_.close(ignored);
  }

 private:
  void Serve() {
    while (!stopped_) {
      asio::ip::tcp::socket socket(io_);
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec || stopped_) return;
      asio::streambuf buf;
      asio::read_until(socket, buf, "\r\n\r\n", ec);
      if (ec) continue;
      std::istream in(&buf);
      std::string method, path;
      in >> method >> path;
      std::pair<int, std::string> answer{404, "{}"};
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (answers_.count(path)) answer = answers_[path];
      }
      const std::string reply = "HTTP/1.1 " + std::to_string(answer.first) + " X\r\nContent-Type: application/json\r\n"
                                "Content-Length: " + std::to_string(answer.second.size()) +
                                "\r\nConnection: close\r\n\r\n" + answer.second;
      asio::write(socket, asio::buffer(reply), ec);
    }
  }

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> stopped_{false};
  std::mutex mu_;
  std::map<std::string, std::pair<int, std::string>> answers_;
};

// One member of GET /cluster as Patroni 3 writes it: `role` leader,
// sync_standby or replica; its PostgreSQL at pg_host_port, its REST API at rest.
inline nlohmann::json Member(const std::string& name, const std::string& role, const std::string& pg_host_port,
                             const std::string& rest = "127.0.0.1:1") {
  const size_t colon = pg_host_port.rfind(':');
  nlohmann::json m = {{"name", name},
                      {"role", role},
                      {"state", role == "leader" ? "running" : "streaming"},
                      {"api_url", "http://" + rest + "/patroni"},
                      {"host", pg_host_port.substr(0, colon)},
                      {"port", std::stoi(pg_host_port.substr(colon + 1))}};
  if (role == "leader") m["timeline"] = 3;
  else m["lag"] = 0;
  return m;
}

// The test server's host:port, from its URI.
inline std::string PgHostPort(const std::string& uri) {
  std::smatch m;
  const std::regex at(R"(@([^/?]+)/)");
  EXPECT_TRUE(std::regex_search(uri, m, at)) << uri;
  return m[1];
}

}  // namespace moeedb::test
