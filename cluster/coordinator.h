// Coordinator: every node plans each placed collection (placement.h's Plan,
// deterministic) from the cluster as it last read it, and writes a changed
// plan by a transaction on the revision it read: of nodes acting on the same
// state one write wins and the others find it done. A placed collection
// gets its first placement when a node first opens it; a dropped one's
// placement is deleted.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/cluster_view.h"
#include "cluster/placement.h"
#include "database/vector_collection.h"

namespace moeedb::cluster {

// A collection placed through etcd: one recorded with more than one shard or replica.
bool IsPlaced(const CollectionLayout& layout);

class Coordinator {
 public:
  // `node_left_delay_ms`: how long a gone node keeps its assignments (Plan).
  Coordinator(const EtcdClient* etcd, const PlacementStore* keys, ClusterView* view, int64_t node_left_delay_ms = 0);

  // Plans every placed collection among `records` (the store's), writes the
  // changed plans and deletes the placements in `before` (the view taken
  // before `records` were listed) of collections not among them: a placement
  // written since, for a collection created since, is not taken for a
  // dropped one's. The first error, after trying every collection.
  Status CoordinateAll(const std::vector<CollectionRecord>& records, const ClusterKeys& before);
  // Places `layout` now unless the view holds a placement of its store id
  // (a collection new to the cluster, so its creator holds its share at once).
  Status PlaceIfNew(const CollectionLayout& layout);

 private:
  // Plans one collection from the view; writes it if it changed. `load`:
  // each node's assigned replicas of the collections planned before this one.
  Status PlanCollection(const CollectionLayout& layout, std::map<std::string, size_t>* load);

  const EtcdClient* etcd_;
  const PlacementStore* keys_;
  ClusterView* view_;
  const int64_t node_left_delay_ms_;
};

}  // namespace moeedb::cluster
