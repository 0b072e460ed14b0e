#include "cluster/etcd_client.h"

#include <nlohmann/json.hpp>

#include "base/http_client.h"

namespace moeedb::cluster {

using json = nlohmann::json;

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The gateway writes int64 as strings and leaves out fields at their zero value.
int64_t Int64(const json& j, const char* field) {
  if (!j.contains(field)) return 0;
  const json& v = j[field];
  return v.is_string() ? std::stoll(v.get<std::string>()) : v.get<int64_t>();
}

// The first key after every key that starts with `prefix`.
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) < 0xff) {
      prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

Result<KeyValue> KeyValueOf(const json& kv) {
  KeyValue out;
  MOEEDB_ASSIGN_OR_RETURN(out.key, Base64Decode(kv.value("key", "")));
  MOEEDB_ASSIGN_OR_RETURN(out.value, Base64Decode(kv.value("value", "")));
  out.create_revision = Int64(kv, "create_revision");
  out.mod_revision = Int64(kv, "mod_revision");
  out.version = Int64(kv, "version");
  out.lease = Int64(kv, "lease");
  return out;
}

json OpJson(const TxnOp& op) {
  if (op.kind == TxnOp::Kind::kDelete) return json{{"request_delete_range", {{"key", Base64Encode(op.key)}}}};
  json put = {{"key", Base64Encode(op.key)}, {"value", Base64Encode(op.value)}};
  if (op.lease != 0) put["lease"] = std::to_string(op.lease);
  return json{{"request_put", put}};
}

}  // namespace

std::string Base64Encode(const std::string& bytes) {
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (i + 1 == bytes.size()) {
    const uint32_t v = uint8_t(bytes[i]) << 16;
    out += kAlphabet[(v >> 18) & 63], out += kAlphabet[(v >> 12) & 63], out += "==";
  } else if (i + 2 == bytes.size()) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63], out += kAlphabet[(v >> 12) & 63], out += kAlphabet[(v >> 6) & 63], out += '=';
  }
  return out;
}

Result<std::string> Base64Decode(const std::string& text) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=') break;
    const char* at = std::char_traits<char>::find(kAlphabet, 64, c);
    if (at == nullptr) return Status::InvalidArgument("etcd: a value is not base64");
    acc = (acc << 6) | static_cast<uint32_t>(at - kAlphabet);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

EtcdClient::EtcdClient(std::vector<std::string> endpoints, std::chrono::milliseconds deadline,
                       std::shared_ptr<const TlsContext> tls)
    : endpoints_(std::move(endpoints)), deadline_(deadline), tls_(std::move(tls)) {}

Result<std::string> EtcdClient::Call(const std::string& path, const std::string& body) const {
  if (endpoints_.empty()) return Status::InvalidArgument("no etcd endpoint given");
  Status last;
  for (const std::string& e : endpoints_) {
    auto r = HttpPost(e, path, body, deadline_, "", tls_.get());
    if (!r.ok()) {
      last = r.status();
      continue;
    }
    if (r->status == 200) return std::move(r->body);
    // A member without a leader (a partition, an election) answers 503; another may not.
    last = Status::Unavailable("etcd " + e + path + ": HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 300));
    if (r->status < 500) return Status::InvalidArgument(last.message());
  }
  return Status::Unavailable("no etcd member answered: " + last.message());
}

Result<std::optional<KeyValue>> EtcdClient::Get(const std::string& key) const {
  MOEEDB_ASSIGN_OR_RETURN(std::string body, Call("/v3/kv/range", json{{"key", Base64Encode(key)}}.dump()));
  try {
    const json j = json::parse(body);
    if (!j.contains("kvs") || j["kvs"].empty()) return std::optional<KeyValue>();
    MOEEDB_ASSIGN_OR_RETURN(KeyValue kv, KeyValueOf(j["kvs"][0]));
    return std::optional<KeyValue>(std::move(kv));
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("etcd range reply: ") + e.what());
  }
}

Result<std::vector<KeyValue>> EtcdClient::List(const std::string& prefix, int64_t* revision) const {
  MOEEDB_ASSIGN_OR_RETURN(std::string body, Call("/v3/kv/range", json{{"key", Base64Encode(prefix)},
                                                                      {"range_end", Base64Encode(PrefixEnd(prefix))}}
                                                                         .dump()));
  std::vector<KeyValue> out;
  try {
    const json j = json::parse(body);
    if (revision != nullptr) *revision = Int64(j.at("header"), "revision");
    if (j.contains("kvs"))
      for (const json& kv : j["kvs"]) {
        MOEEDB_ASSIGN_OR_RETURN(KeyValue v, KeyValueOf(kv));
        out.push_back(std::move(v));
      }
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("etcd range reply: ") + e.what());
  }
  return out;
}

Result<int64_t> EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) const {
  json req = {{"key", Base64Encode(key)}, {"value", Base64Encode(value)}};
  if (lease != 0) req["lease"] = std::to_string(lease);
  MOEEDB_ASSIGN_OR_RETURN(std::string body, Call("/v3/kv/put", req.dump()));
  try {
    return Int64(json::parse(body).at("header"), "revision");
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("etcd put reply: ") + e.what());
  }
}

Status EtcdClient::Delete(const std::string& key) const {
  return Call("/v3/kv/deleterange", json{{"key", Base64Encode(key)}}.dump()).status();
}

Result<bool> EtcdClient::Txn(const std::vector<Compare>& compares, const std::vector<TxnOp>& success,
                             const std::vector<TxnOp>& failure) const {
  json cmp = json::array(), ok = json::array(), fail = json::array();
  for (const Compare& c : compares) {
    json x = {{"key", Base64Encode(c.key)}, {"result", "EQUAL"}};
    switch (c.target) {
      case Compare::Target::kModRevision: x["target"] = "MOD", x["mod_revision"] = std::to_string(c.revision); break;
      case Compare::Target::kCreateRevision: x["target"] = "CREATE", x["create_revision"] = std::to_string(c.revision); break;
      case Compare::Target::kVersion: x["target"] = "VERSION", x["version"] = std::to_string(c.revision); break;
      case Compare::Target::kValue: x["target"] = "VALUE", x["value"] = Base64Encode(c.value); break;
    }
    cmp.push_back(x);
  }
  for (const TxnOp& op : success) ok.push_back(OpJson(op));
  for (const TxnOp& op : failure) fail.push_back(OpJson(op));
  MOEEDB_ASSIGN_OR_RETURN(std::string body,
                          Call("/v3/kv/txn", json{{"compare", cmp}, {"success", ok}, {"failure", fail}}.dump()));
  try {
    return json::parse(body).value("succeeded", false);  // left out when false
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("etcd txn reply: ") + e.what());
  }
}

Result<int64_t> EtcdClient::GrantLease(int64_t ttl_s) const {
  MOEEDB_ASSIGN_OR_RETURN(std::string body, Call("/v3/lease/grant", json{{"TTL", std::to_string(ttl_s)}}.dump()));
  try {
    const json j = json::parse(body);
    if (j.contains("error") && !j["error"].get<std::string>().empty())
      return Status::Unavailable("etcd lease grant: " + j["error"].get<std::string>());
    return Int64(j, "ID");
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("etcd lease grant reply: ") + e.what());
  }
}

Status EtcdClient::KeepAlive(int64_t lease) const {
  MOEEDB_ASSIGN_OR_RETURN(std::string body, Call("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}}.dump()));
  try {
    // A stream of replies; the first line is this renewal's. TTL 0 (left out): expired.
    const json j = json::parse(body.substr(0, body.find('\n')));
    const json& r = j.contains("result") ? j["result"] : j;
    if (Int64(r, "TTL") <= 0) return Status::NotFound("etcd lease " + std::to_string(lease) + " has expired");
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("etcd keepalive reply: ") + e.what());
  }
  return Status::OK();
}

Result<int64_t> EtcdClient::LeaseTimeToLive(int64_t lease) const {
  MOEEDB_ASSIGN_OR_RETURN(std::string body, Call("/v3/lease/timetolive", json{{"ID", std::to_string(lease)}}.dump()));
  try {
    const int64_t ttl = Int64(json::parse(body), "TTL");
    if (ttl < 0) return Status::NotFound("etcd lease " + std::to_string(lease) + " has expired");
    return ttl;
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("etcd timetolive reply: ") + e.what());
  }
}

Status EtcdClient::RevokeLease(int64_t lease) const {
  return Call("/v3/lease/revoke", json{{"ID", std::to_string(lease)}}.dump()).status();
}

}  // namespace moeedb::cluster
