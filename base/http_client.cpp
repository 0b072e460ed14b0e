#include "base/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace moeedb {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;

namespace {

Result<HttpReply> Request(http::verb verb, const std::string& host_port, const std::string& target,
                          const std::string& body, std::chrono::milliseconds deadline, const std::string& bearer) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == host_port.size())
    return Status::InvalidArgument("'" + host_port + "' is not HOST:PORT");
  const std::string host = host_port.substr(0, colon), port = host_port.substr(colon + 1);
  try {
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(deadline);
    // Asynchronous calls run to the deadline: a synchronous read would wait
    // on a stopped peer for ever.
    beast::error_code failed;
    beast::flat_buffer buffer;
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, host);
    if (verb == http::verb::post) {
      req.set(http::field::content_type, "application/json");
      req.body() = body;
    }
    if (!bearer.empty()) req.set(http::field::authorization, "Bearer " + bearer);
    req.prepare_payload();
    http::response<http::string_body> res;
    http::response_parser<http::string_body> parser;
    parser.body_limit(256u << 20);
    auto results = resolver.resolve(host, port);
    stream.async_connect(results, [&](beast::error_code ec, const asio::ip::tcp::endpoint&) {
      if (ec) { failed = ec; return; }
      http::async_write(stream, req, [&](beast::error_code ec2, size_t) {
        if (ec2) { failed = ec2; return; }
        http::async_read(stream, buffer, parser, [&](beast::error_code ec3, size_t) { failed = ec3; });
      });
    });
    io.run();
    if (failed) return Status::Unavailable(host_port + target + ": " + failed.message());
    res = parser.release();
    beast::error_code ignored;
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    return HttpReply{static_cast<int>(res.result_int()), std::move(res.body())};
  } catch (const std::exception& e) {
    return Status::Unavailable(host_port + target + ": " + e.what());
  }
}

}  // namespace

Result<HttpReply> HttpPost(const std::string& host_port, const std::string& target, const std::string& body,
                           std::chrono::milliseconds deadline, const std::string& bearer) {
  return Request(http::verb::post, host_port, target, body, deadline, bearer);
}

Result<HttpReply> HttpGet(const std::string& host_port, const std::string& target,
                          std::chrono::milliseconds deadline) {
  return Request(http::verb::get, host_port, target, "", deadline, "");
}

}  // namespace moeedb
