// TlsContext: a TLS configuration (OpenSSL through Asio), loaded once and
// shared by every connection made with it (OpenSSL's context is safe to
// share once configured).
//  - A client's: the CA certificates the servers' certificates must chain
//    to (the server's host name or IP address is checked against its
//    certificate too), and optionally the client's own certificate and key
//    for servers that ask for one (etcd with --client-cert-auth).
//  - A server's: its certificate chain and private key.
// TLS 1.2 at least; files are PEM.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"

namespace boost::asio::ssl {
class context;
}

namespace moeedb {

struct TlsFiles {
  std::string ca_file;    // a client's trust anchors (required for a client)
  std::string cert_file;  // the certificate chain presented (required for a server)
  std::string key_file;   // its private key (with cert_file)
};

class TlsContext {
 public:
  // InvalidArgument naming the file that is missing, unreadable or not PEM,
  // or a certificate without its key (and the other way round).
  static Result<std::shared_ptr<const TlsContext>> Client(const TlsFiles& files);
  static Result<std::shared_ptr<const TlsContext>> Server(const TlsFiles& files);
  ~TlsContext();

  // The loaded context, for the streams made with it.
  boost::asio::ssl::context& native() const { return *context_; }

 private:
  explicit TlsContext(std::unique_ptr<boost::asio::ssl::context> context);
  std::unique_ptr<boost::asio::ssl::context> context_;
};

}  // namespace moeedb
