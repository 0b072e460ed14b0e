// HttpServer: HTTP/1.1 with keep-alive on Boost.Beast, one thread per
// connection (bounded), each request handed to Api::Handle. The socket layer
// enforces what must be enforced before a body is read: the body size (413),
// well-formed HTTP (400), idle clients (a receive timeout), slow clients (a
// deadline for each whole request: a client trickling bytes cannot hold a
// connection), the connection cap (503). HTTP threads never run the model: Api waits on the
// EmbedQueue's worker. With a certificate and key it speaks HTTPS only (TLS
// 1.2+, the handshake within the request deadline).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "base/status.h"
#include "plugin/server/api.h"

namespace moeedb {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0: an ephemeral port (see port())
  size_t max_body_bytes = 2000000;  // TEI's default payload limit
  size_t max_connections = 256;
  int idle_timeout_s = 30;          // a connection silent this long is closed
  int request_timeout_s = 60;       // a request not fully received this long after the last answer: closed
  // Put before every request's path: "/qdrant" serves the Qdrant REST API
  // at the root of this listener's port, as Qdrant does (--qdrant-port).
  std::string path_prefix;
  // HTTPS: the certificate chain and private key (PEM); both empty: plain HTTP.
  std::string tls_cert_file, tls_key_file;
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, Api* api);
  ~HttpServer();

  // Loads the TLS files if any (InvalidArgument naming a bad one), binds and
  // starts accepting in the background.
  Status Start();
  // Stops accepting, lets in-flight requests finish and answer, closes idle
  // connections, and returns when every connection thread has ended.
  void Stop();
  int port() const { return bound_port_; }

 private:
  struct Impl;
  void AcceptLoop();
  void Serve(int fd);
  // Reads requests from `stream` (a socket, or TLS over it) and answers them
  // until the client closes, fails, idles out or the server stops.
  template <typename Stream>
  void ServeRequests(Stream& stream, int fd);
  // Shuts down the reading side of connections past their request deadline.
  void ReapLoop();
  // Starts `fd`'s deadline for what it must receive next (a request, a TLS
  // handshake); Disarm ends it and says whether the reaper got there first.
  void ArmReadDeadline(int fd);
  bool DisarmReadDeadline(int fd);

  HttpServerOptions options_;
  Api* api_;
  std::unique_ptr<Impl> impl_;
  int bound_port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  std::thread reap_thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<int> open_fds_;
  // fd -> when its request must have arrived (absent while it is handled).
  std::map<int, std::chrono::steady_clock::time_point> read_deadline_;
};

}  // namespace moeedb
