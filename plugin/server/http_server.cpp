#include <utility>  // before Asio with C++20 and Boost 1.74 (docs/stack.md)

#include "plugin/server/http_server.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>

#include "base/tls.h"

namespace moeedb {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct HttpServer::Impl {
  asio::io_context io;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::shared_ptr<const TlsContext> tls;  // null: plain HTTP
};

HttpServer::HttpServer(HttpServerOptions options, Api* api)
    : options_(std::move(options)), api_(api), impl_(std::make_unique<Impl>()) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() {
  if (!options_.tls_cert_file.empty() || !options_.tls_key_file.empty()) {
    MOEEDB_ASSIGN_OR_RETURN(impl_->tls, TlsContext::Server({"", options_.tls_cert_file, options_.tls_key_file}));
  }
  try {
    tcp::endpoint ep(asio::ip::make_address(options_.host), static_cast<unsigned short>(options_.port));
    impl_->acceptor = std::make_unique<tcp::acceptor>(impl_->io);
    impl_->acceptor->open(ep.protocol());
    impl_->acceptor->set_option(asio::socket_base::reuse_address(true));
    impl_->acceptor->bind(ep);
    impl_->acceptor->listen(asio::socket_base::max_listen_connections);
    bound_port_ = impl_->acceptor->local_endpoint().port();
  } catch (const std::exception& e) {
    return Status::IOError("cannot listen on " + options_.host + ":" + std::to_string(options_.port) + ": " + e.what());
  }
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  reap_thread_ = std::thread([this] { ReapLoop(); });
  return Status::OK();
}

void HttpServer::ReapLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    const auto now = std::chrono::steady_clock::now();
    for (auto it = read_deadline_.begin(); it != read_deadline_.end();) {
      if (it->second > now) {
        ++it;
        continue;
      }
      ::shutdown(it->first, SHUT_RD);  // its blocked read returns; Serve closes it
      api_->Record("request_timeout", 408, 0);
      it = read_deadline_.erase(it);
    }
    cv_.wait_for(lock, std::chrono::milliseconds(250));
  }
}

void HttpServer::ArmReadDeadline(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  read_deadline_[fd] = std::chrono::steady_clock::now() + std::chrono::seconds(options_.request_timeout_s);
}

bool HttpServer::DisarmReadDeadline(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  return read_deadline_.erase(fd) == 0;
}

void HttpServer::AcceptLoop() {
  while (!stopping_) {
    boost::system::error_code ec;
    tcp::socket socket(impl_->io);
    impl_->acceptor->accept(socket, ec);
    if (ec) {
      if (stopping_) break;
      continue;
    }
    const int fd = socket.release();
    std::unique_lock<std::mutex> lock(mu_);
    if (open_fds_.size() >= options_.max_connections) {
      lock.unlock();
      static const char kBusy[] =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: 83\r\n\r\n"
          "{\"error\":{\"message\":\"too many connections\",\"type\":\"server_busy\",\"code\":null}}   ";
      (void)!::write(fd, kBusy, sizeof(kBusy) - 1);
      ::close(fd);
      api_->Record("connection_limit", 503, 0);
      continue;
    }
    open_fds_.insert(fd);
    std::thread([this, fd] { Serve(fd); }).detach();
  }
}

void HttpServer::Serve(int fd) {
  timeval tv{options_.idle_timeout_s, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  {
    asio::io_context io;
    tcp::socket socket(io);
    boost::system::error_code ec;
    socket.assign(tcp::v4(), fd, ec);
    if (!ec && impl_->tls) {
      asio::ssl::stream<tcp::socket&> tls(socket, impl_->tls->native());
      ArmReadDeadline(fd);
      do {
        ec.clear();
        tls.handshake(asio::ssl::stream_base::server, ec);
      } while (ec == asio::error::interrupted);
      (void)DisarmReadDeadline(fd);
      // A client that does not speak TLS, or fails it, is closed unanswered.
      if (ec) api_->Record("tls_handshake", 400, 0);
      else ServeRequests(tls, fd);
    } else if (!ec) {
      ServeRequests(socket, fd);
    }
    // No TLS close_notify: a client gone would leave it waiting out the idle timeout.
    boost::system::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);  // closes fd
  }
  std::lock_guard<std::mutex> lock(mu_);
  open_fds_.erase(fd);
  read_deadline_.erase(fd);
  cv_.notify_all();
}

template <typename Stream>
void HttpServer::ServeRequests(Stream& socket, int fd) {
  boost::system::error_code ec;
  beast::flat_buffer buffer;
  while (!ec && !stopping_) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(options_.max_body_bytes);
    parser.header_limit(64 * 1024);
    ArmReadDeadline(fd);
    // A signal (SIGCONT after a SIGSTOP, a profiler's) interrupts a blocking
    // receive that has a timeout (SO_RCVTIMEO): the parser and the buffer
    // keep what arrived, so the read goes on.
    do {
      ec.clear();
      http::read(socket, buffer, parser, ec);
    } while (ec == asio::error::interrupted);
    const bool reaped = DisarmReadDeadline(fd);
    if (ec && reaped && parser.got_some()) {
      // Past the request deadline halfway through a request: say so, close.
      http::response<http::string_body> res{http::status::request_timeout, 11};
      res.set(http::field::content_type, "application/json");
      res.set(http::field::server, "moeedb");
      res.body() = "{\"error\":{\"message\":\"request not received in time\",\"type\":\"invalid_request_error\",\"code\":null}}";
      res.keep_alive(false);
      res.prepare_payload();
      boost::system::error_code wec;
      http::write(socket, res, wec);
      break;
    }
    // A TLS client may close without close_notify (moeedb's own does): an end, not a malformed request.
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
        (ec == asio::ssl::error::stream_truncated && !parser.got_some()))
      break;
    http::response<http::string_body> res;
    bool close = false;
    if (ec) {
      // Malformed, oversized, or timed out: answer if we still can, then close.
      const bool too_big = ec == http::error::body_limit || ec == http::error::header_limit;
      if (ec == asio::error::would_block || ec == asio::error::timed_out || ec == asio::error::try_again) break;
      res.result(too_big ? http::status::payload_too_large : http::status::bad_request);
      res.set(http::field::content_type, "application/json");
      res.body() = std::string("{\"error\":{\"message\":\"") +
                   (too_big ? "request too large" : "malformed HTTP request") +
                   "\",\"type\":\"invalid_request_error\",\"code\":null}}";
      api_->Record("http_error", static_cast<int>(res.result_int()), 0);
      close = true;
    } else {
      const auto& req = parser.get();
      HttpRequest r;
      r.method = std::string(req.method_string());
      r.target = options_.path_prefix + std::string(req.target());
      for (const auto& f : req) {
        std::string name(f.name_string());
        for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        r.headers[name] = std::string(f.value());
      }
      r.body = req.body();
      HttpResponse out = api_->Handle(r);
      res.result(static_cast<unsigned>(out.status));
      res.set(http::field::content_type, out.content_type);
      // 503 is what a write gets while the store has no primary or no
      // synchronous standby: a failover takes seconds.
      if (out.status == 503) res.set(http::field::retry_after, "1");
      res.body() = std::move(out.body);
      res.version(req.version());
      close = !req.keep_alive() || stopping_;
    }
    res.set(http::field::server, "moeedb");
    res.keep_alive(!close);
    res.prepare_payload();
    boost::system::error_code wec;
    http::write(socket, res, wec);
    if (wec || close) break;
    ec = {};
  }
}

void HttpServer::Stop() {
  if (stopping_.exchange(true)) return;
  if (impl_->acceptor) {
    boost::system::error_code ec;
    ::shutdown(impl_->acceptor->native_handle(), SHUT_RDWR);
    impl_->acceptor->close(ec);
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  cv_.notify_all();
  if (reap_thread_.joinable()) reap_thread_.join();
  std::unique_lock<std::mutex> lock(mu_);
  // Wake connections blocked reading the next request; a request being
  // handled finishes and is answered first (its thread checks stopping_).
  for (int fd : open_fds_) ::shutdown(fd, SHUT_RD);
  cv_.wait_for(lock, std::chrono::seconds(60), [&] { return open_fds_.empty(); });
}

}  // namespace moeedb
