#include "cluster/cluster_view.h"

#include <algorithm>

namespace moeedb::cluster {

ClusterView::ClusterView(const PlacementStore* keys) : keys_(keys), current_(std::make_shared<ClusterKeys>()) {}

Status ClusterView::Refresh() {
  MOEEDB_ASSIGN_OR_RETURN(ClusterKeys keys, keys_->ReadAll());
  auto next = std::make_shared<const ClusterKeys>(std::move(keys));
  std::lock_guard lock(mu_);
  // Two reads in flight (the poll's, a search's) may finish out of order.
  if (next->revision >= current_->revision) current_ = std::move(next);
  return Status::OK();
}

std::shared_ptr<const ClusterKeys> ClusterView::Current() const {
  std::lock_guard lock(mu_);
  return current_;
}

void ClusterView::SetPlacement(const std::string& collection, const ClusterKeys::Placed& placed) {
  std::lock_guard lock(mu_);
  auto it = current_->placements.find(collection);
  if (it != current_->placements.end() && it->second.revision >= placed.revision) return;
  auto next = std::make_shared<ClusterKeys>(*current_);
  next->placements[collection] = placed;
  // A read from before this placement's write would bring the old one back.
  next->revision = std::max(next->revision, placed.revision);
  current_ = std::move(next);
}

}  // namespace moeedb::cluster
