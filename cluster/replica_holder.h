// ReplicaHolder: keeps this node's replicas as placed. It opens the
// replicas of the shards assigned to the node (the collection builds them
// from the store), closes the ones it no longer holds, and claims each open
// replica in etcd (a ReplicaClaim on the node's lease). A replica claims
// "ready" only while it reads the change log within its staleness bound,
// "stale" past it, and "building" while a rebuild is due or under way:
// coordinators ask only the ready ones.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "base/status.h"
#include "cluster/cluster_view.h"
#include "cluster/placement.h"
#include "database/database.h"

namespace moeedb::cluster {

class ReplicaHolder {
 public:
  ReplicaHolder(const EtcdClient* etcd, const PlacementStore* keys, const ClusterView* view, std::string node_id,
                std::string address);

  // One round: opens and closes `db`'s replicas as the view places them and
  // writes the claims that changed under `lease` (a claim whose counters
  // alone changed at most every few seconds); deletes this node's claims
  // (as written, or as etcd held them when the round began) of replicas it
  // neither holds nor opens. The first error, after trying every
  // collection. One caller at a time.
  Status HoldAndClaim(Database* db, int64_t lease);
  // Claims replica `shard` of the collection "building" at change-log entry
  // `seq` (where the replica being opened reads the log from: other nodes'
  // log retention keeps it) under the placement's current revision, at once,
  // if the placement gives it to this node; HoldAndClaim replaces the claim
  // once the replica is open, or deletes it. Safe beside a round (from the
  // threads opening replicas). Unavailable if etcd failed or the placement
  // kept changing, four times.
  Status ClaimBuilding(const CollectionLayout& layout, ShardRef shard, uint64_t seq, int64_t lease);
  // The lease the claims were on has expired (they are gone from etcd):
  // the next round writes every claim again.
  void Forget();

 private:
  // The claim of one open replica, from its state.
  ReplicaClaim ClaimOf(const VectorCollection& c, const VectorCollection::ReplicaState& r) const;

  const EtcdClient* etcd_;
  const PlacementStore* keys_;
  const ClusterView* view_;
  const std::string node_id_, address_;

  std::mutex mu_;  // Forget comes from the membership's thread
  // Held by ClaimBuilding across its write and building_at_'s entry, and by
  // a round across its deletes: a claim written during the deletes would be
  // neither seen as new nor spared.
  std::mutex delete_mu_;
  std::map<std::string, ReplicaClaim> claimed_;  // claim key -> the claim this node last wrote
  std::map<std::string, std::chrono::steady_clock::time_point> written_at_;
  // Claims ClaimBuilding wrote -> when: a round that began before must not
  // delete them (kept until a round that began after has seen them).
  std::map<std::string, std::chrono::steady_clock::time_point> building_at_;
  uint64_t forgotten_ = 0;  // Forget calls: a round that began before one writes nothing back
};

}  // namespace moeedb::cluster
