#include <utility>  // before Asio with C++20 and Boost 1.74 (docs/stack.md)

#include "base/tls.h"

#include <boost/asio/ssl.hpp>
#include <filesystem>

namespace moeedb {

namespace ssl = boost::asio::ssl;

namespace {

Status Readable(const std::string& what, const std::string& path) {
  std::error_code ec;
  if (path.empty()) return Status::InvalidArgument(what + ": no file given");
  if (!std::filesystem::is_regular_file(path, ec)) return Status::InvalidArgument(what + ": no file " + path);
  return Status::OK();
}

// The certificate and key (both or neither), checked against each other.
Status UseCertificate(ssl::context* c, const TlsFiles& files) {
  if (files.cert_file.empty() != files.key_file.empty())
    return Status::InvalidArgument("TLS: a certificate needs its key and a key its certificate");
  if (files.cert_file.empty()) return Status::OK();
  MOEEDB_RETURN_IF_ERROR(Readable("TLS certificate", files.cert_file));
  MOEEDB_RETURN_IF_ERROR(Readable("TLS key", files.key_file));
  boost::system::error_code ec;
  c->use_certificate_chain_file(files.cert_file, ec);
  if (ec) return Status::InvalidArgument("TLS certificate " + files.cert_file + ": " + ec.message());
  c->use_private_key_file(files.key_file, ssl::context::pem, ec);
  if (ec) return Status::InvalidArgument("TLS key " + files.key_file + ": " + ec.message());
  if (SSL_CTX_check_private_key(c->native_handle()) != 1)
    return Status::InvalidArgument("TLS key " + files.key_file + " does not match the certificate " + files.cert_file);
  return Status::OK();
}

std::unique_ptr<ssl::context> NewContext(ssl::context::method method) {
  auto c = std::make_unique<ssl::context>(method);
  c->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                 ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  return c;
}

}  // namespace

TlsContext::TlsContext(std::unique_ptr<ssl::context> context) : context_(std::move(context)) {}
TlsContext::~TlsContext() = default;

Result<std::shared_ptr<const TlsContext>> TlsContext::Client(const TlsFiles& files) {
  MOEEDB_RETURN_IF_ERROR(Readable("TLS CA", files.ca_file));
  auto c = NewContext(ssl::context::tls_client);
  boost::system::error_code ec;
  c->load_verify_file(files.ca_file, ec);
  if (ec) return Status::InvalidArgument("TLS CA " + files.ca_file + ": " + ec.message());
  c->set_verify_mode(ssl::verify_peer, ec);
  MOEEDB_RETURN_IF_ERROR(UseCertificate(c.get(), files));
  return std::shared_ptr<const TlsContext>(new TlsContext(std::move(c)));
}

Result<std::shared_ptr<const TlsContext>> TlsContext::Server(const TlsFiles& files) {
  if (files.cert_file.empty()) return Status::InvalidArgument("TLS: a server needs a certificate and its key");
  auto c = NewContext(ssl::context::tls_server);
  // A client closing without close_notify ends its connection as a plain EOF would.
  SSL_CTX_set_options(c->native_handle(), SSL_OP_IGNORE_UNEXPECTED_EOF);
  MOEEDB_RETURN_IF_ERROR(UseCertificate(c.get(), files));
  return std::shared_ptr<const TlsContext>(new TlsContext(std::move(c)));
}

}  // namespace moeedb
