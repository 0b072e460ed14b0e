#include "cluster/placement.h"

#include <algorithm>

#include "database/vector_collection.h"

namespace moeedb::cluster {

using json = nlohmann::json;

json Placement::ToJson() const {
  json j{{"store_id", store_id}, {"shards", shards}, {"replicas", replicas}, {"assigned", assigned}, {"leaving", leaving}};
  if (next) j["next"] = {{"shards", next->shards}, {"nodes", next->nodes}};
  if (previous) j["previous"] = {{"shards", previous->shards}, {"nodes", previous->nodes}, {"retire_at_ms", retire_at_ms}};
  if (!lost.empty()) j["lost"] = lost;
  return j;
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
    if (j.contains("next"))
      p.next = Placement::Split{j["next"].at("shards").get<uint32_t>(),
                                j["next"].at("nodes").get<std::vector<std::vector<std::string>>>()};
    if (j.contains("previous")) {
      p.previous = Placement::Split{j["previous"].at("shards").get<uint32_t>(),
                                    j["previous"].at("nodes").get<std::vector<std::vector<std::string>>>()};
      p.retire_at_ms = j["previous"].at("retire_at_ms").get<int64_t>();
    }
    if (j.contains("lost")) p.lost = j["lost"].get<std::map<std::string, int64_t>>();
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("placement: ") + e.what());
  }
  if (p.shards == 0 || p.assigned.size() != p.shards || p.leaving.size() != p.shards)
    return Status::Corruption("placement: lists do not match its shard count");
  for (const auto& split : {p.next, p.previous})
    if (split && (split->shards == 0 || split->nodes.size() != split->shards))
      return Status::Corruption("placement: a split's lists do not match its shard count");
  return p;
}

std::vector<ShardRef> Placement::ShardsOf(const std::string& node) const {
  const auto has = [&](const std::vector<std::string>& v) { return std::find(v.begin(), v.end(), node) != v.end(); };
  std::vector<ShardRef> out;
  for (uint32_t k = 0; k < shards; ++k)
    if (has(assigned[k]) || has(leaving[k])) out.push_back(ShardRef{shards, k});
  // A split of the same count as the one in use is the same replicas.
  for (const auto& split : {next, previous})
    if (split && split->shards != shards)
      for (uint32_t k = 0; k < split->shards; ++k)
        if (has(split->nodes[k])) out.push_back(ShardRef{split->shards, k});
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool Placement::operator==(const Placement& o) const {
  return store_id == o.store_id && shards == o.shards && replicas == o.replicas && assigned == o.assigned &&
         leaving == o.leaving && next == o.next && previous == o.previous && retire_at_ms == o.retire_at_ms &&
         lost == o.lost;
}

namespace {

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

void Erase(std::vector<std::string>* v, const std::string& x) { v->erase(std::remove(v->begin(), v->end(), x), v->end()); }

}  // namespace

Placement Plan(const std::optional<Placement>& current, uint32_t store_id, uint32_t shards, uint32_t replicas,
               const std::vector<std::string>& live_nodes, const ReadyReplicas& ready,
               std::map<std::string, size_t>* load, const std::set<std::string>& draining, int64_t now_ms,
               int64_t node_left_delay_ms) {
  Placement p;
  if (current && current->store_id == store_id) p = *current;
  else p.shards = shards;
  p.store_id = store_id;
  p.replicas = replicas;
  std::vector<std::string> live = live_nodes;
  std::sort(live.begin(), live.end());
  const auto alive = [&](const std::string& n) { return std::binary_search(live.begin(), live.end(), n); };
  const auto is_ready = [&](ShardRef r, const std::string& n) {
    auto it = ready.find(r);
    return it != ready.end() && it->second.count(n) > 0;
  };
  const auto drop_dead = [&](std::vector<std::string>* v) {
    v->erase(std::remove_if(v->begin(), v->end(), [&](const std::string& n) { return !alive(n); }), v->end());
  };
  // Draining nodes serve what they hold (as leaving) and take nothing new.
  std::vector<std::string> takers;
  for (const auto& n : live)
    if (!draining.count(n)) takers.push_back(n);
  for (const auto& n : takers) (*load)[n];  // every node that takes replicas has a count
  // A previous split past its time goes; a next one every shard of which is
  // ready becomes the split in use.
  if (p.previous) {
    for (auto& nodes : p.previous->nodes) drop_dead(&nodes);
    if (now_ms >= p.retire_at_ms) p.previous.reset(), p.retire_at_ms = 0;
  }
  if (p.next && !p.previous) {
    const size_t want = std::max<size_t>(1, std::min<size_t>(replicas, takers.size()));
    bool ready_all = true;
    for (uint32_t k = 0; k < p.next->shards && ready_all; ++k) {
      size_t n = 0;
      for (const auto& node : p.next->nodes[k]) n += alive(node) && is_ready(ShardRef{p.next->shards, k}, node);
      ready_all = n >= want;
    }
    if (ready_all) {
      Placement::Split before{p.shards, p.assigned};
      for (uint32_t k = 0; k < p.shards && k < p.leaving.size(); ++k)
        before.nodes[k].insert(before.nodes[k].end(), p.leaving[k].begin(), p.leaving[k].end());
      p.shards = p.next->shards;
      p.assigned = p.next->nodes;
      p.leaving.assign(p.shards, {});
      p.next.reset();
      p.previous = std::move(before);
      p.retire_at_ms = now_ms + kRetireSplitAfterMs;
    }
  }
  p.assigned.resize(p.shards);
  p.leaving.resize(p.shards);
  const uint32_t shards_now = p.shards;
  // Dead nodes assigned a shard: when each was first found gone; back, it is not lost.
  for (auto it = p.lost.begin(); it != p.lost.end();) it = alive(it->first) ? p.lost.erase(it) : std::next(it);
  for (const auto& a : p.assigned)
    for (const auto& n : a)
      if (!alive(n) && !p.lost.count(n)) p.lost[n] = now_ms;
  const auto delay_over = [&](const std::string& n) {
    auto it = p.lost.find(n);
    return node_left_delay_ms <= 0 || it == p.lost.end() || now_ms - it->second >= node_left_delay_ms;
  };
  for (uint32_t k = 0; k < shards_now; ++k) {
    auto& a = p.assigned[k];
    auto& l = p.leaving[k];
    // A dead node keeps its assignment within the delay while another live
    // replica of the shard is ready to answer for it.
    bool answered = false;
    for (const auto& n : a) answered |= alive(n) && is_ready(ShardRef{shards_now, k}, n);
    for (const auto& n : l) answered |= alive(n) && is_ready(ShardRef{shards_now, k}, n);
    a.erase(std::remove_if(a.begin(), a.end(),
                           [&](const std::string& n) { return !alive(n) && (!answered || delay_over(n)); }),
            a.end());
    drop_dead(&l);
    for (auto it = a.begin(); it != a.end();) {
      if (!draining.count(*it)) {
        ++it;
        continue;
      }
      if (!Contains(l, *it)) l.push_back(*it);
      it = a.erase(it);
    }
    size_t ready_assigned = 0;
    for (const auto& n : a) ready_assigned += is_ready(ShardRef{shards_now, k}, n);
    if (ready_assigned >= std::min<size_t>(replicas, a.size()) && a.size() >= std::min<size_t>(replicas, takers.size()))
      l.clear();
    for (const auto& n : a)
      if (alive(n)) ++(*load)[n];
  }
  // A lost node no shard keeps waiting for is forgotten.
  for (auto it = p.lost.begin(); it != p.lost.end();) {
    bool kept = false;
    for (const auto& a : p.assigned) kept |= Contains(a, it->first);
    it = kept ? std::next(it) : p.lost.erase(it);
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
  for (uint32_t k = 0; k < shards_now; ++k) {
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
  // The next split's shards short of replicas: the lightest live nodes.
  if (p.next) {
    for (uint32_t k = 0; k < p.next->shards; ++k) {
      auto& nodes = p.next->nodes[k];
      drop_dead(&nodes);
      nodes.erase(std::remove_if(nodes.begin(), nodes.end(), [&](const std::string& n) { return draining.count(n) > 0; }),
                  nodes.end());
      for (const auto& n : nodes) ++(*load)[n];
    }
    for (uint32_t k = 0; k < p.next->shards; ++k) {
      auto& nodes = p.next->nodes[k];
      while (nodes.size() < replicas) {
        std::optional<std::string> best;
        for (const auto& n : takers)
          if (!Contains(nodes, n) && (!best || (*load)[n] < (*load)[*best])) best = n;
        if (!best) break;
        nodes.push_back(*best);
        ++(*load)[*best];
      }
      std::sort(nodes.begin(), nodes.end());
    }
  }
  // Rebalance (not while a reshard is under way): one move per shard, from
  // the heaviest node to the lightest.
  for (bool moved = !p.next.has_value(); moved;) {
    moved = false;
    std::string heavy, light;
    for (const auto& n : takers) {
      if (heavy.empty() || (*load)[n] > (*load)[heavy]) heavy = n;
      if (light.empty() || (*load)[n] < (*load)[light]) light = n;
    }
    if (heavy.empty() || (*load)[heavy] < (*load)[light] + 2) break;
    for (uint32_t k = 0; k < shards_now && !moved; ++k) {
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

std::vector<std::string> ClusterKeys::ReadyNodes(const std::string& collection, ShardRef shard,
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

std::optional<uint64_t> ClusterKeys::LowestApplied(const std::string& collection, uint32_t store_id,
                                                   const std::string& except) const {
  auto coll = claims.find(collection);
  if (coll == claims.end()) return std::nullopt;
  std::optional<uint64_t> low;
  for (const auto& [ref, by_node] : coll->second)
    for (const auto& [node, claim] : by_node)
      if (node != except && nodes.count(node) && claim.store_id == store_id)
        low = std::min(low.value_or(UINT64_MAX), claim.applied_seq);
  return low;
}

PlacementStore::PlacementStore(const EtcdClient* etcd, std::string cluster)
    : etcd_(etcd), cluster_(std::move(cluster)), prefix_("/moeedb/" + cluster_ + "/") {}

std::string PlacementStore::NodeKey(const std::string& node) const { return prefix_ + "nodes/" + node; }
std::string PlacementStore::PlacementKey(const std::string& collection) const {
  return prefix_ + "placement/" + collection;
}
std::string PlacementStore::DrainKey(const std::string& node) const { return prefix_ + "drain/" + node; }

std::string PlacementStore::ReplicaKey(const std::string& collection, ShardRef shard, const std::string& node) const {
  return prefix_ + "replicas/" + collection + "/" + std::to_string(shard.shards) + "/" + std::to_string(shard.shard) +
         "/" + node;
}

std::optional<ReplicaKeyParts> PlacementStore::ParseReplicaKey(const std::string& key) const {
  const std::string head = prefix_ + "replicas/";
  if (key.rfind(head, 0) != 0) return std::nullopt;
  // <collection>/<shards>/<shard>/<node>: collection names and node ids hold no '/'.
  std::vector<std::string> parts;
  const std::string path = key.substr(head.size());
  for (size_t at = 0;;) {
    const size_t slash = path.find('/', at);
    parts.push_back(path.substr(at, slash == std::string::npos ? std::string::npos : slash - at));
    if (slash == std::string::npos) break;
    at = slash + 1;
  }
  if (parts.size() != 4 || parts[0].empty() || parts[3].empty()) return std::nullopt;
  const auto number = [](const std::string& t) -> std::optional<uint32_t> {
    if (t.empty() || t.size() > 9 || t.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return static_cast<uint32_t>(std::stoul(t));
  };
  const auto shards = number(parts[1]), shard = number(parts[2]);
  if (!shards || !shard || *shards == 0 || *shard >= *shards) return std::nullopt;
  return ReplicaKeyParts{parts[0], ShardRef{*shards, *shard}, parts[3]};
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

Result<bool> PlacementStore::Claim(const std::string& collection, ShardRef shard, const std::string& node,
                                   int64_t lease, const ReplicaClaim& claim, int64_t placement_revision) const {
  return etcd_->Txn({Compare::ModRevision(PlacementKey(collection), placement_revision)},
                    {TxnOp::Put(ReplicaKey(collection, shard, node), claim.ToJson().dump(), lease)});
}

}  // namespace moeedb::cluster

namespace moeedb::cluster {

Status RequestReshard(const PlacementStore& keys, const std::string& collection, uint32_t store_id, uint32_t shards) {
  if (shards == 0 || shards > kMaxShards)
    return Status::InvalidArgument("a collection has 1 to " + std::to_string(kMaxShards) +
                                   " shards, not " + std::to_string(shards));
  for (int attempt = 0; attempt < 8; ++attempt) {
    MOEEDB_ASSIGN_OR_RETURN(auto read, keys.Read(collection));
    auto& [placement, revision] = read;
    if (!placement || (store_id != 0 && placement->store_id != store_id))
      return Status::Unavailable("collection '" + collection + "' is not placed in cluster '" + keys.cluster() +
                                 "' (yet: a node places it when it opens it); try again");
    Placement next = *placement;
    if (next.next) {
      if (next.next->shards == shards) return Status::OK();
      return Status::Conflict("collection '" + collection + "' is being split into " +
                              std::to_string(next.next->shards) + " shards; reshard again once that is done");
    }
    if (next.shards == shards) return Status::OK();
    next.next = Placement::Split{shards, std::vector<std::vector<std::string>>(shards)};
    MOEEDB_ASSIGN_OR_RETURN(bool won, keys.Write(collection, next, revision));
    if (won) return Status::OK();
  }
  return Status::Unavailable("collection '" + collection + "': its placement kept changing; try again");
}

}  // namespace moeedb::cluster
