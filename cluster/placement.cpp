#include "cluster/placement.h"

#include <algorithm>

namespace moeedb::cluster {

using json = nlohmann::json;

json Placement::ToJson() const {
  return json{{"store_id", store_id}, {"shards", shards}, {"replicas", replicas},
              {"assigned", assigned}, {"leaving", leaving}};
}

Result<Placement> Placement::FromJson(const std::string& text) {
  Placement p;
  try {
    const json j = json::parse(text);
    p.store_id = j.at("store_id").get<uint32_t>();
    p.shards = j.at("shards").get<uint32_t>();
    p.replicas = j.at("replicas").get<uint32_t>();
    p.assigned = j.at("assigned").get<std::vector<std::vector<std::string>>>();
    p.leaving = j.at("leaving").get<std::vector<std::vector<std::string>>>();
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("placement: ") + e.what());
  }
  if (p.shards == 0 || p.assigned.size() != p.shards || p.leaving.size() != p.shards)
    return Status::Corruption("placement: lists do not match its shard count");
  return p;
}

std::vector<uint32_t> Placement::ShardsOf(const std::string& node) const {
  std::vector<uint32_t> out;
  for (uint32_t k = 0; k < shards; ++k) {
    const auto has = [&](const std::vector<std::string>& v) { return std::find(v.begin(), v.end(), node) != v.end(); };
    if (has(assigned[k]) || has(leaving[k])) out.push_back(k);
  }
  return out;
}

bool Placement::operator==(const Placement& o) const {
  return store_id == o.store_id && shards == o.shards && replicas == o.replicas && assigned == o.assigned &&
         leaving == o.leaving;
}

namespace {

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

void Erase(std::vector<std::string>* v, const std::string& x) { v->erase(std::remove(v->begin(), v->end(), x), v->end()); }

}  // namespace

Placement Plan(const std::optional<Placement>& current, uint32_t store_id, uint32_t shards, uint32_t replicas,
               const std::vector<std::string>& live_nodes, const ReadyReplicas& ready,
               std::map<std::string, size_t>* load, const std::set<std::string>& draining) {
  Placement p;
  if (current && current->store_id == store_id && current->shards == shards) p = *current;
  p.store_id = store_id;
  p.shards = shards;
  p.replicas = replicas;
  p.assigned.resize(shards);
  p.leaving.resize(shards);
  std::vector<std::string> live = live_nodes;
  std::sort(live.begin(), live.end());
  const auto alive = [&](const std::string& n) { return std::binary_search(live.begin(), live.end(), n); };
  const auto is_ready = [&](uint32_t k, const std::string& n) {
    auto it = ready.find(k);
    return it != ready.end() && it->second.count(n) > 0;
  };
  // Draining nodes serve what they hold (as leaving) and take nothing new.
  std::vector<std::string> takers;
  for (const auto& n : live)
    if (!draining.count(n)) takers.push_back(n);
  for (const auto& n : takers) (*load)[n];  // every node that takes replicas has a count
  for (uint32_t k = 0; k < shards; ++k) {
    auto& a = p.assigned[k];
    auto& l = p.leaving[k];
    a.erase(std::remove_if(a.begin(), a.end(), [&](const std::string& n) { return !alive(n); }), a.end());
    l.erase(std::remove_if(l.begin(), l.end(), [&](const std::string& n) { return !alive(n); }), l.end());
    for (auto it = a.begin(); it != a.end();) {
      if (!draining.count(*it)) {
        ++it;
        continue;
      }
      if (!Contains(l, *it)) l.push_back(*it);
      it = a.erase(it);
    }
    size_t ready_assigned = 0;
    for (const auto& n : a) ready_assigned += is_ready(k, n);
    if (ready_assigned >= std::min<size_t>(replicas, a.size()) && a.size() >= std::min<size_t>(replicas, takers.size()))
      l.clear();
    for (const auto& n : a) ++(*load)[n];
  }
  const auto lightest_without = [&](uint32_t k) -> std::optional<std::string> {
    std::optional<std::string> best;
    for (const auto& n : takers) {
      if (Contains(p.assigned[k], n) || Contains(p.leaving[k], n)) continue;
      if (!best || (*load)[n] < (*load)[*best]) best = n;
    }
    return best;
  };
  // Shards short of replicas.
  for (uint32_t k = 0; k < shards; ++k) {
    while (p.assigned[k].size() < replicas) {
      // A node leaving the shard comes back before a new one is built.
      std::optional<std::string> n;
      for (const auto& back : p.leaving[k])
        if (!draining.count(back)) {
          n = back;
          break;
        }
      if (n) Erase(&p.leaving[k], *n);
      else n = lightest_without(k);
      if (!n) break;  // fewer live nodes than replicas
      p.assigned[k].push_back(*n);
      ++(*load)[*n];
    }
  }
  // Rebalance: one move per shard, from the heaviest node to the lightest.
  for (bool moved = true; moved;) {
    moved = false;
    std::string heavy, light;
    for (const auto& n : takers) {
      if (heavy.empty() || (*load)[n] > (*load)[heavy]) heavy = n;
      if (light.empty() || (*load)[n] < (*load)[light]) light = n;
    }
    if (heavy.empty() || (*load)[heavy] < (*load)[light] + 2) break;
    for (uint32_t k = 0; k < shards && !moved; ++k) {
      if (!p.leaving[k].empty() || !Contains(p.assigned[k], heavy) || Contains(p.assigned[k], light)) continue;
      Erase(&p.assigned[k], heavy);
      p.assigned[k].push_back(light);
      p.leaving[k].push_back(heavy);
      --(*load)[heavy];
      ++(*load)[light];
      moved = true;
    }
  }
  for (auto& a : p.assigned) std::sort(a.begin(), a.end());
  for (auto& l : p.leaving) std::sort(l.begin(), l.end());
  return p;
}

std::vector<std::string> ClusterKeys::ReadyNodes(const std::string& collection, uint32_t shard,
                                                uint32_t store_id) const {
  std::vector<std::string> out;
  auto coll = claims.find(collection);
  if (coll == claims.end()) return out;
  auto sh = coll->second.find(shard);
  if (sh == coll->second.end()) return out;
  for (const auto& [node, claim] : sh->second)
    if (nodes.count(node) && claim.state == ReplicaClaim::State::kReady && claim.store_id == store_id)
      out.push_back(node);
  return out;
}

PlacementStore::PlacementStore(const EtcdClient* etcd, std::string cluster)
    : etcd_(etcd), cluster_(std::move(cluster)), prefix_("/moeedb/" + cluster_ + "/") {}

std::string PlacementStore::NodeKey(const std::string& node) const { return prefix_ + "nodes/" + node; }
std::string PlacementStore::PlacementKey(const std::string& collection) const {
  return prefix_ + "placement/" + collection;
}
std::string PlacementStore::DrainKey(const std::string& node) const { return prefix_ + "drain/" + node; }

std::string PlacementStore::ReplicaKey(const std::string& collection, uint32_t shard, const std::string& node) const {
  return prefix_ + "replicas/" + collection + "/" + std::to_string(shard) + "/" + node;
}

std::optional<ReplicaKeyParts> PlacementStore::ParseReplicaKey(const std::string& key) const {
  const std::string head = prefix_ + "replicas/";
  if (key.rfind(head, 0) != 0) return std::nullopt;
  // <collection>/<shard>/<node>: collection names and node ids hold no '/'.
  const std::string path = key.substr(head.size());
  const size_t a = path.find('/'), b = path.rfind('/');
  if (a == std::string::npos || a == 0 || a == b || b + 1 == path.size()) return std::nullopt;
  const std::string shard = path.substr(a + 1, b - a - 1);
  if (shard.empty() || shard.size() > 9 || shard.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return ReplicaKeyParts{path.substr(0, a), static_cast<uint32_t>(std::stoul(shard)), path.substr(b + 1)};
}

Result<ClusterKeys> PlacementStore::ReadAll() const {
  ClusterKeys out;
  MOEEDB_ASSIGN_OR_RETURN(std::vector<KeyValue> kvs, etcd_->List(prefix_, &out.revision));
  for (const KeyValue& kv : kvs) {
    const std::string rest = kv.key.substr(prefix_.size());
    const json value = json::parse(kv.value, nullptr, false);
    if (rest.rfind("nodes/", 0) == 0) {
      if (value.is_object()) out.nodes[rest.substr(6)] = ClusterKeys::Node{value.value("address", ""), kv.lease};
    } else if (rest.rfind("drain/", 0) == 0) {
      out.draining.insert(rest.substr(6));
    } else if (rest.rfind("placement/", 0) == 0) {
      auto p = Placement::FromJson(kv.value);
      if (p.ok()) out.placements[rest.substr(10)] = ClusterKeys::Placed{*p, kv.mod_revision};
    } else if (auto r = ParseReplicaKey(kv.key)) {
      if (auto claim = ReplicaClaim::FromJson(value)) out.claims[r->collection][r->shard][r->node] = *claim;
    }
  }
  return out;
}

Result<std::pair<std::optional<Placement>, int64_t>> PlacementStore::Read(const std::string& collection) const {
  MOEEDB_ASSIGN_OR_RETURN(std::optional<KeyValue> kv, etcd_->Get(PlacementKey(collection)));
  if (!kv) return std::make_pair(std::optional<Placement>(), int64_t{0});
  MOEEDB_ASSIGN_OR_RETURN(Placement p, Placement::FromJson(kv->value));
  return std::make_pair(std::optional<Placement>(std::move(p)), kv->mod_revision);
}

Result<bool> PlacementStore::Write(const std::string& collection, const Placement& next, int64_t read_revision) const {
  const std::string key = PlacementKey(collection);
  return etcd_->Txn({Compare::ModRevision(key, read_revision)},
                    {TxnOp::Put(key, next.ToJson().dump())});
}

Result<bool> PlacementStore::Claim(const std::string& collection, uint32_t shard, const std::string& node,
                                   int64_t lease, const ReplicaClaim& claim, int64_t placement_revision) const {
  return etcd_->Txn({Compare::ModRevision(PlacementKey(collection), placement_revision)},
                    {TxnOp::Put(ReplicaKey(collection, shard, node), claim.ToJson().dump(), lease)});
}

}  // namespace moeedb::cluster
