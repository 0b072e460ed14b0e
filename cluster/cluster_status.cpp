#include "cluster/cluster_status.h"

#include "cluster/placement.h"

namespace moeedb::cluster {

using json = nlohmann::json;

Result<json> ReadClusterStatus(const EtcdClient& etcd, const std::string& cluster, const Store* store) {
  PlacementStore keys(&etcd, cluster);
  MOEEDB_ASSIGN_OR_RETURN(ClusterKeys all, keys.ReadAll());
  json nodes = json::array();
  for (const auto& [id, node] : all.nodes) {
    auto ttl = etcd.LeaseTimeToLive(node.lease);
    nodes.push_back({{"id", id}, {"address", node.address}, {"lease", node.lease},
                     {"ttl_s", ttl.ok() ? json(*ttl) : json(nullptr)}, {"draining", all.draining.count(id) > 0}});
  }
  json collections = json::array();
  for (const auto& [name, placed] : all.placements) {
    const Placement& p = placed.placement;
    int64_t last_op = -1;
    if (store != nullptr) {
      auto rec = store->GetCollection(name);
      if (rec.ok()) last_op = static_cast<int64_t>(rec->last_op);
    }
    // Every claimed replica of shard k of the split into `count`.
    const auto replicas_of = [&](uint32_t count, uint32_t k) {
      json replicas = json::array();
      for (const auto& [node, c] : all.claims[name][ShardRef{count, k}]) {
        json r = {{"node", node}, {"state", StateName(c.state)}, {"applied_seq", c.applied_seq},
                  {"documents", c.documents}, {"index_bytes", c.index_bytes}};
        if (last_op >= 0) r["lag"] = last_op - static_cast<int64_t>(c.applied_seq);
        replicas.push_back(r);
      }
      return replicas;
    };
    json shards = json::array();
    for (uint32_t k = 0; k < p.shards; ++k)
      shards.push_back(
          {{"shard", k}, {"assigned", p.assigned[k]}, {"leaving", p.leaving[k]}, {"replicas", replicas_of(p.shards, k)}});
    json c = {{"name", name}, {"shards", p.shards}, {"replicas", p.replicas}, {"store_id", p.store_id},
              {"shard_list", shards}};
    // A reshard under way: the split being built, each shard's nodes and replicas.
    if (p.next) {
      json next = json::array();
      for (uint32_t k = 0; k < p.next->shards; ++k)
        next.push_back({{"shard", k}, {"assigned", p.next->nodes[k]}, {"replicas", replicas_of(p.next->shards, k)}});
      c["resharding_to"] = {{"shards", p.next->shards}, {"shard_list", next}};
    }
    if (p.previous) c["retiring"] = {{"shards", p.previous->shards}, {"retire_at_ms", p.retire_at_ms}};
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

Result<json> ReadClusterStatusAt(const EtcdClient& etcd, const std::string& cluster, const std::string& db_location) {
  std::unique_ptr<Store> store;
  if (!db_location.empty()) { MOEEDB_ASSIGN_OR_RETURN(store, Store::Open(db_location)); }
  return ReadClusterStatus(etcd, cluster, store.get());
}

}  // namespace moeedb::cluster
