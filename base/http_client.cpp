#include <utility>  // before Asio with C++20 and Boost 1.74 (docs/stack.md)

#include "base/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace moeedb {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;

namespace {

bool IsIpAddress(const std::string& host) {
  boost::system::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

// Writes `req` and reads the answer on `stream`, once `open` has connected
// it (and shaken hands), all asynchronous so the stream's deadline holds.
template <typename Stream, typename Open>
Result<HttpReply> Exchange(asio::io_context& io, Stream& stream, Open&& open,
                           const http::request<http::string_body>& req, const std::string& where) {
  beast::error_code failed;
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(256u << 20);
  open([&](beast::error_code ec) {
    if (ec) { failed = ec; return; }
    http::async_write(stream, req, [&](beast::error_code ec2, size_t) {
      if (ec2) { failed = ec2; return; }
      http::async_read(stream, buffer, parser, [&](beast::error_code ec3, size_t) { failed = ec3; });
    });
  });
  io.run();
  if (failed) return Status::Unavailable(where + ": " + failed.message());
  http::response<http::string_body> res = parser.release();
  // No TLS close_notify exchange: the peer may never answer it, and the
  // answer is already whole.
  beast::error_code ignored;
  beast::get_lowest_layer(stream).socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  return HttpReply{static_cast<int>(res.result_int()), std::move(res.body())};
}

Result<HttpReply> Request(http::verb verb, const std::string& host_port, const std::string& target,
                          const std::string& body, std::chrono::milliseconds deadline, const std::string& bearer,
                          const TlsContext* tls) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == host_port.size())
    return Status::InvalidArgument("'" + host_port + "' is not HOST:PORT");
  const std::string host = host_port.substr(0, colon), port = host_port.substr(colon + 1);
  const std::string where = (tls ? "https://" : "http://") + host_port + target;
  try {
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, host);
    if (verb == http::verb::post) {
      req.set(http::field::content_type, "application/json");
      req.body() = body;
    }
    if (!bearer.empty()) req.set(http::field::authorization, "Bearer " + bearer);
    req.prepare_payload();
    auto results = resolver.resolve(host, port);
    if (tls == nullptr) {
      beast::tcp_stream stream(io);
      stream.expires_after(deadline);
      return Exchange(io, stream, [&](auto done) {
        stream.async_connect(results, [done](beast::error_code ec, const asio::ip::tcp::endpoint&) { done(ec); });
      }, req, where);
    }
    beast::ssl_stream<beast::tcp_stream> stream(io, tls->native());
    beast::get_lowest_layer(stream).expires_after(deadline);
    // The certificate must name the host (or the address) asked for.
    if (!IsIpAddress(host) && !SSL_set_tlsext_host_name(stream.native_handle(), host.c_str()))
      return Status::Unavailable(where + ": cannot set the TLS server name");
    stream.set_verify_callback(asio::ssl::host_name_verification(host));
    return Exchange(io, stream, [&](auto done) {
      beast::get_lowest_layer(stream).async_connect(results, [&, done](beast::error_code ec, const asio::ip::tcp::endpoint&) {
        if (ec) return done(ec);
        stream.async_handshake(asio::ssl::stream_base::client, [done](beast::error_code ec2) { done(ec2); });
      });
    }, req, where);
  } catch (const std::exception& e) {
    return Status::Unavailable(where + ": " + e.what());
  }
}

}  // namespace

Result<HttpReply> HttpPost(const std::string& host_port, const std::string& target, const std::string& body,
                           std::chrono::milliseconds deadline, const std::string& bearer, const TlsContext* tls) {
  return Request(http::verb::post, host_port, target, body, deadline, bearer, tls);
}

Result<HttpReply> HttpGet(const std::string& host_port, const std::string& target,
                          std::chrono::milliseconds deadline, const TlsContext* tls) {
  return Request(http::verb::get, host_port, target, "", deadline, "", tls);
}

}  // namespace moeedb
