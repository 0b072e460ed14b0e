// One HTTP/1.1 request to a server on host:port and its reply, within a
// deadline (Boost.Beast, a connection of its own): what a node says to etcd's
// JSON gateway, to the other nodes' shard routes and to Patroni's REST API. A
// server that does not answer in time, or cannot be reached, is Unavailable:
// a server stopped without dying (SIGSTOP) costs the caller one deadline, not
// a hang. With a TlsContext (tls.h) the request goes over TLS (https) and the
// server's certificate is verified, its host name or address included: a
// server that fails the check is Unavailable, as one that cannot be reached.
#pragma once

#include <chrono>
#include <string>

#include "base/status.h"
#include "base/tls.h"

namespace moeedb {

struct HttpReply {
  int status = 0;
  std::string body;
};

// POSTs `body` (JSON) to http://host_port/target (https with `tls`), with
// `Authorization: Bearer <bearer>` unless bearer is empty.
Result<HttpReply> HttpPost(const std::string& host_port, const std::string& target, const std::string& body,
                           std::chrono::milliseconds deadline, const std::string& bearer = "",
                           const TlsContext* tls = nullptr);

// GETs http://host_port/target (https with `tls`). Any status is a reply;
// only a server that cannot be reached or does not answer within `deadline`
// is an error.
Result<HttpReply> HttpGet(const std::string& host_port, const std::string& target,
                          std::chrono::milliseconds deadline, const TlsContext* tls = nullptr);

}  // namespace moeedb
