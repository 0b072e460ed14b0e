// ClusterView: the cluster's keys (placement.h's ClusterKeys) as this node
// last read them from etcd, shared by the node's jobs: the coordinator, the
// replica holder and the shard client. A reader takes an immutable snapshot
// and holds no lock while it uses it; a refresh swaps in a new one. The view
// never goes back: a read older (by etcd's revision) than what the view
// holds is dropped, and so is a placement older than the one it holds.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "cluster/placement.h"

namespace moeedb::cluster {

class ClusterView {
 public:
  explicit ClusterView(const PlacementStore* keys);

  // Reads every key of the cluster afresh; the view is unchanged on an error
  // or when a newer view came in meanwhile.
  Status Refresh();
  // The keys as last read (empty before the first Refresh). Never null.
  std::shared_ptr<const ClusterKeys> Current() const;
  // Records a collection's placement as just read back after a write, so
  // this node acts on it before its next Refresh.
  void SetPlacement(const std::string& collection, const ClusterKeys::Placed& placed);

 private:
  const PlacementStore* keys_;
  mutable std::mutex mu_;
  std::shared_ptr<const ClusterKeys> current_;
};

}  // namespace moeedb::cluster
