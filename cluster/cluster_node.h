// ClusterNode: this node's part in a cluster of moeedb nodes over one
// PostgreSQL store, with membership and placement in etcd (placement.h).
// It puts together one object per job and runs them:
//  - Membership (membership.h): the node's registration, on a lease;
//  - ClusterView (cluster_view.h): the cluster's keys as last read;
//  - Coordinator (coordinator.h): plans and writes placements;
//  - ReplicaHolder (replica_holder.h): opens, closes and claims replicas;
//  - ShardClient (shard_client.h): asks other nodes for the shards not held here.
// Everything is polled (every poll_ms): etcd's watch over the JSON gateway
// would save the reads, at a cluster's size here they are a few per second.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster/cluster_view.h"
#include "cluster/coordinator.h"
#include "cluster/etcd_client.h"
#include "cluster/membership.h"
#include "cluster/node_lock.h"
#include "cluster/placement.h"
#include "cluster/replica_holder.h"
#include "cluster/shard_client.h"
#include "database/database.h"

namespace moeedb::cluster {

struct ClusterOptions {
  std::vector<std::string> etcd;  // etcd client endpoints, host:port
  std::string cluster = "moeedb";  // the key prefix: several clusters may share an etcd
  std::string node_id;             // unique in the cluster: [A-Za-z0-9_.-]
  std::string address;             // host:port the other nodes reach this node's API at
  std::string api_key;             // sent to the other nodes (they share the key)
  int lease_ttl_s = 5;             // a node silent this long is gone
  // The node's index folder: locked while the node runs (node_lock.h), so a
  // node restarted on it takes its registration over at once. "": no lock.
  std::string index_dir;
  // A gone node's replicas are placed elsewhere this long after it went
  // (where the shard has another ready replica): one back sooner keeps them.
  int node_left_delay_s = 60;
  int poll_ms = 300;
  int peer_deadline_ms = 2000;     // a shard request not answered by then goes elsewhere
  // Set: etcd and the other nodes are asked over https, their certificates
  // checked against its CA (every node of a cluster serves https then).
  std::shared_ptr<const TlsContext> tls;
};

class ClusterNode : public ShardPeers {
 public:
  // Registers the node (a lease, its key); Unavailable without etcd,
  // InvalidArgument for a bad id or an id another live node holds.
  static Result<std::unique_ptr<ClusterNode>> Join(ClusterOptions options);
  // Leaves: stops the loops and revokes the lease (its claims go at once).
  ~ClusterNode() override;
  // Starts placing, building and claiming replicas for `db` (which must
  // outlive this node, or be detached by destroying this node first).
  void Attach(Database* db);

  std::optional<PlacedShards> HeldShards(const CollectionLayout& layout) override;
  Status Reshard(const CollectionLayout& layout, uint32_t shards) override;
  std::optional<uint32_t> SplitInUse(const CollectionLayout& layout) override;
  std::optional<uint64_t> LowestApplied(const CollectionLayout& layout) override;
  void HoldLogFrom(const CollectionLayout& layout, ShardRef shard, uint64_t seq) override;
  std::vector<std::pair<uint32_t, LexicalStats>> Stats(const ShardQuery& q, const std::vector<uint32_t>& shards) override;
  std::vector<ShardAnswer> Search(const ShardQuery& q, const std::vector<uint32_t>& shards) override;
  void AwaitReplicas(const CollectionLayout& layout, std::chrono::milliseconds timeout) override;
  // ReadClusterStatus (cluster_status.h), lag included, with "node": this node's id.
  Result<std::string> ClusterStatus() override;

  const std::string& node_id() const { return options_.node_id; }
  // Leaves the cluster (stops polling, revokes the lease: the node and its
  // claims go at once) but keeps the index folder's lock until destroyed,
  // so the process may still save its snapshots there. Idempotent.
  void Leave();

 private:
  explicit ClusterNode(ClusterOptions options);
  // One round every poll_ms: read the cluster, coordinate, hold and claim.
  void PollLoop();
  // Records in the store the split each placement uses where the record
  // names another (after a reshard's switch): a node that opens the
  // collection without a placement, or a placement made anew, starts from it.
  Status RecordSplits(const std::vector<CollectionRecord>& records);

  ClusterOptions options_;
  EtcdClient etcd_;
  PlacementStore keys_;
  ClusterView view_;
  Coordinator coordinator_;
  ReplicaHolder holder_;
  ShardClient shards_;
  std::unique_ptr<NodeLock> lock_;          // before membership_: held while registered
  std::unique_ptr<Membership> membership_;  // after holder_: its lease-lost callback forgets holder_'s claims
  Database* db_ = nullptr;

  std::mutex lowest_mu_;
  std::chrono::steady_clock::time_point lowest_read_at_;  // LowestApplied's last refresh of view_
  bool lowest_read_ok_ = false;                           // and whether it succeeded

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread poll_;
};

}  // namespace moeedb::cluster
