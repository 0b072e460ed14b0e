#include "cluster/cluster_status.h"

#include <map>

#include "cluster/placement.h"

namespace moeedb::cluster {

using json = nlohmann::json;

Result<json> ReadClusterStatus(const EtcdClient& etcd, const std::string& cluster, const Store* store) {
  PlacementStore keys(&etcd, cluster);
  MOEEDB_ASSIGN_OR_RETURN(std::vector<KeyValue> kvs, etcd.List(keys.prefix()));
  json nodes = json::array();
  std::map<std::string, Placement> placed;
  std::map<std::string, std::map<uint32_t, json>> claims;  // collection -> shard -> [claims]
  std::set<std::string> draining;
  for (const KeyValue& kv : kvs) {
    const std::string rest = kv.key.substr(keys.prefix().size());
    if (rest.rfind("drain/", 0) == 0) draining.insert(rest.substr(6));
  }
  for (const KeyValue& kv : kvs) {
    const std::string rest = kv.key.substr(keys.prefix().size());
    const json value = json::parse(kv.value, nullptr, false);
    if (rest.rfind("nodes/", 0) == 0) {
      const std::string id = rest.substr(6);
      auto ttl = etcd.LeaseTimeToLive(kv.lease);
      nodes.push_back({{"id", id}, {"address", value.is_object() ? value.value("address", "") : ""},
                       {"lease", kv.lease}, {"ttl_s", ttl.ok() ? json(*ttl) : json(nullptr)},
                       {"draining", draining.count(id) > 0}});
    } else if (rest.rfind("placement/", 0) == 0) {
      auto p = Placement::FromJson(kv.value);
      if (p.ok()) placed[rest.substr(10)] = *p;
    } else if (rest.rfind("replicas/", 0) == 0 && value.is_object()) {
      const std::string path = rest.substr(9);
      const size_t a = path.find('/'), b = path.rfind('/');
      if (a == std::string::npos || a == b) continue;
      json claim = value;
      claim["node"] = path.substr(b + 1);
      claims[path.substr(0, a)][static_cast<uint32_t>(std::stoul(path.substr(a + 1, b - a - 1)))].push_back(claim);
    }
  }
  json collections = json::array();
  for (const auto& [name, p] : placed) {
    int64_t last_op = -1;
    if (store != nullptr) {
      auto rec = store->GetCollection(name);
      if (rec.ok()) last_op = static_cast<int64_t>(rec->last_op);
    }
    json shards = json::array();
    for (uint32_t k = 0; k < p.shards; ++k) {
      json replicas = json::array();
      for (const json& c : claims[name][k]) {
        json r = {{"node", c.value("node", "")}, {"applied_seq", c.value("applied_seq", 0)},
                  {"documents", c.value("documents", 0)}, {"index_bytes", c.value("index_bytes", 0)}};
        if (last_op >= 0) r["lag"] = last_op - c.value("applied_seq", int64_t{0});
        replicas.push_back(r);
      }
      shards.push_back({{"shard", k}, {"assigned", p.assigned[k]}, {"leaving", p.leaving[k]}, {"replicas", replicas}});
    }
    json c = {{"name", name}, {"shards", p.shards}, {"replicas", p.replicas}, {"store_id", p.store_id},
              {"shard_list", shards}};
    if (last_op >= 0) c["last_op"] = last_op;
    collections.push_back(c);
  }
  return json{{"cluster", cluster}, {"nodes", nodes}, {"collections", collections}};
}

Status SetDraining(const EtcdClient& etcd, const std::string& cluster, const std::string& node, bool drain) {
  PlacementStore keys(&etcd, cluster);
  if (!drain) return etcd.Delete(keys.DrainKey(node));
  MOEEDB_ASSIGN_OR_RETURN(std::optional<KeyValue> n, etcd.Get(keys.NodeKey(node)));
  if (!n) return Status::NotFound("no live node '" + node + "' in cluster '" + cluster + "'");
  return etcd.Put(keys.DrainKey(node), "{}").status();
}

}  // namespace moeedb::cluster
