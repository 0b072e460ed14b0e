// EtcdClient: the calls moeedb makes to etcd, over its v3 JSON gateway
// (POST /v3/kv/range, /v3/kv/put, /v3/kv/txn, /v3/kv/deleterange,
// /v3/lease/grant, /v3/lease/keepalive, /v3/lease/revoke; keys and values
// base64, int64 fields JSON strings). Any member of the etcd cluster
// answers; a call tries the endpoints in turn until one does. With a
// TlsContext the calls go over https (etcd's client URLs with --cert-file;
// the context's own certificate answers --client-cert-auth).
// Thread-safe (every call is its own HTTP exchange).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tls.h"

namespace moeedb::cluster {

struct KeyValue {
  std::string key, value;
  int64_t create_revision = 0, mod_revision = 0, version = 0, lease = 0;
};

// A transaction's condition on one key. A key that does not exist has
// mod_revision and create_revision 0, so {key, kModRevision, 0} means "absent".
struct Compare {
  enum class Target { kModRevision, kCreateRevision, kVersion, kValue };
  std::string key;
  Target target = Target::kModRevision;
  int64_t revision = 0;  // kModRevision, kCreateRevision, kVersion
  std::string value;     // kValue
  static Compare ModRevision(std::string key, int64_t revision) {
    return Compare{std::move(key), Target::kModRevision, revision, ""};
  }
};

// A transaction's write: a put (with the lease, 0 for none) or a delete.
struct TxnOp {
  enum class Kind { kPut, kDelete };
  Kind kind = Kind::kPut;
  std::string key, value;
  int64_t lease = 0;
  static TxnOp Put(std::string key, std::string value, int64_t lease = 0) {
    return TxnOp{Kind::kPut, std::move(key), std::move(value), lease};
  }
  static TxnOp Delete(std::string key) { return TxnOp{Kind::kDelete, std::move(key), "", 0}; }
};

class EtcdClient {
 public:
  static constexpr std::chrono::milliseconds kDefaultDeadline{2000};
  // endpoints: "host:port" of etcd's client URLs; `tls`: null for http.
  explicit EtcdClient(std::vector<std::string> endpoints, std::chrono::milliseconds deadline = kDefaultDeadline,
                      std::shared_ptr<const TlsContext> tls = nullptr);

  // The key's value, std::nullopt when absent.
  Result<std::optional<KeyValue>> Get(const std::string& key) const;
  // Every key starting with `prefix`, in key order, and the store's revision they were read at.
  Result<std::vector<KeyValue>> List(const std::string& prefix, int64_t* revision = nullptr) const;
  // Puts key = value (attached to `lease` unless 0); the new revision.
  Result<int64_t> Put(const std::string& key, const std::string& value, int64_t lease = 0) const;
  Status Delete(const std::string& key) const;
  // All `compares` true: runs `success` and returns true; else runs
  // `failure` and returns false. Atomic: etcd's transaction.
  Result<bool> Txn(const std::vector<Compare>& compares, const std::vector<TxnOp>& success,
                   const std::vector<TxnOp>& failure = {}) const;

  // A lease of `ttl_s` seconds; its id.
  Result<int64_t> GrantLease(int64_t ttl_s) const;
  // Renews the lease; NotFound once it has expired (its keys are gone).
  Status KeepAlive(int64_t lease) const;
  Status RevokeLease(int64_t lease) const;
  // Seconds the lease has left; NotFound once it has expired.
  Result<int64_t> LeaseTimeToLive(int64_t lease) const;

  const std::vector<std::string>& endpoints() const { return endpoints_; }

 private:
  // POSTs to the first endpoint that answers.
  Result<std::string> Call(const std::string& path, const std::string& body) const;
  std::vector<std::string> endpoints_;
  std::chrono::milliseconds deadline_;
  std::shared_ptr<const TlsContext> tls_;
};

// Base64 (RFC 4648, padded), as the gateway carries keys and values.
std::string Base64Encode(const std::string& bytes);
Result<std::string> Base64Decode(const std::string& text);

}  // namespace moeedb::cluster
