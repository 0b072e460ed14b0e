#include "cluster/coordinator.h"

#include <chrono>
#include <set>

namespace moeedb::cluster {

bool IsPlaced(const CollectionLayout& l) { return l.placed || l.shards > 1 || l.replicas > 1; }

Coordinator::Coordinator(const EtcdClient* etcd, const PlacementStore* keys, ClusterView* view,
                         int64_t node_left_delay_ms)
    : etcd_(etcd), keys_(keys), view_(view), node_left_delay_ms_(node_left_delay_ms) {}

Status Coordinator::PlanCollection(const CollectionLayout& layout, std::map<std::string, size_t>* load) {
  const auto keys = view_->Current();
  std::optional<Placement> current;
  int64_t revision = 0;
  if (auto it = keys->placements.find(layout.name); it != keys->placements.end())
    current = it->second.placement, revision = it->second.revision;
  std::vector<std::string> live;
  for (const auto& [id, node] : keys->nodes) live.push_back(id);
  if (live.empty()) return Status::OK();
  ReadyReplicas ready;  // of every split claimed (the one in use, a next one)
  if (auto claims = keys->claims.find(layout.name); claims != keys->claims.end())
    for (const auto& [ref, by_node] : claims->second)
      for (const std::string& node : keys->ReadyNodes(layout.name, ref, layout.store_id)) ready[ref].insert(node);
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const Placement next =
      Plan(current, layout.store_id, layout.shards, layout.replicas, live, ready, load, keys->draining, now_ms,
           node_left_delay_ms_);
  if (current && *current == next) return Status::OK();
  MOEEDB_ASSIGN_OR_RETURN(bool won, keys_->Write(layout.name, next, revision));
  (void)won;  // lost: another node's plan from the same state is written; read it either way
  MOEEDB_ASSIGN_OR_RETURN(auto now, keys_->Read(layout.name));
  if (now.first) view_->SetPlacement(layout.name, ClusterKeys::Placed{*now.first, now.second});
  return Status::OK();
}

Status Coordinator::CoordinateAll(const std::vector<CollectionRecord>& records, const ClusterKeys& before) {
  std::map<std::string, size_t> load;
  Status first;
  std::set<std::string> present;
  for (const CollectionRecord& rec : records) {
    auto layout = CollectionLayout::FromRecord(rec);
    if (!layout.ok() || !IsPlaced(*layout)) continue;
    present.insert(rec.name);
    Status s = PlanCollection(*layout, &load);
    if (!s.ok() && first.ok()) first = s;
  }
  // Placements of dropped collections go (by the revision read, like any change).
  for (const auto& [name, p] : before.placements)
    if (!present.count(name))
      (void)etcd_->Txn({Compare::ModRevision(keys_->PlacementKey(name), p.revision)},
                       {TxnOp::Delete(keys_->PlacementKey(name))});
  return first;
}

Status Coordinator::PlaceIfNew(const CollectionLayout& layout) {
  const auto keys = view_->Current();
  auto it = keys->placements.find(layout.name);
  if (it != keys->placements.end() && it->second.placement.store_id == layout.store_id) return Status::OK();
  std::map<std::string, size_t> load;
  for (const auto& [name, p] : keys->placements)
    if (name != layout.name)
      for (const auto& a : p.placement.assigned)
        for (const auto& n : a) ++load[n];
  return PlanCollection(layout, &load);
}

}  // namespace moeedb::cluster
