// ClusterNode: this node's part in a cluster of moeedb nodes over one
// PostgreSQL store, with membership and placement in etcd (placement.h).
//  - Membership: the node registers nodes/<id> (its address) under a lease it
//    renews every third of its TTL; a node that stops renewing it (killed,
//    stopped, cut off) drops out when the lease expires, with its claims.
//  - Placement: every node plans (placement.h's Plan, deterministic) from
//    what it last read and writes a changed plan by a transaction on the
//    revision it read; of nodes acting on the same state one write wins and
//    the others find it done. A sharded collection gets its first placement
//    when a node first opens it.
//  - Replicas: the node opens the replicas of the shards assigned to it
//    (building them from the store), closes the ones it no longer holds,
//    and claims each open replica (replicas/<collection>/<shard>/<id>, on
//    its lease) once it is caught up: only claimed replicas are asked.
//  - Search (ShardPeers): each shard not held here goes to one claimed
//    replica of a live node, spread round-robin; a node that fails or misses
//    the deadline is skipped for a while and its shards asked elsewhere.
// Everything is polled (every poll_ms): etcd's watch over the JSON gateway
// would save the reads, at a cluster's size here they are a few per second.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cluster/etcd_client.h"
#include "cluster/placement.h"
#include "database/database.h"

namespace moeedb::cluster {

struct ClusterOptions {
  std::vector<std::string> etcd;  // etcd client endpoints, host:port
  std::string cluster = "moeedb";  // the key prefix: several clusters may share an etcd
  std::string node_id;             // unique in the cluster: [A-Za-z0-9_.-]
  std::string address;             // host:port the other nodes reach this node's API at
  std::string api_key;             // sent to the other nodes (they share the key)
  int lease_ttl_s = 5;             // a node silent this long is gone
  int poll_ms = 300;
  int peer_deadline_ms = 2000;     // a shard request not answered by then goes elsewhere
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

  std::optional<std::vector<uint32_t>> HeldShards(const CollectionLayout& layout) override;
  std::vector<std::pair<uint32_t, LexicalStats>> Stats(const ShardQuery& q, const std::vector<uint32_t>& shards) override;
  std::vector<ShardAnswer> Search(const ShardQuery& q, const std::vector<uint32_t>& shards) override;
  void AwaitReplicas(const CollectionLayout& layout, std::chrono::milliseconds timeout) override;
  // ReadClusterStatus (cluster_status.h), lag included, with "node": this node's id.
  Result<std::string> ClusterStatus() override;

  const std::string& node_id() const { return options_.node_id; }

 private:
  explicit ClusterNode(ClusterOptions options);
  Status Register();
  void KeepAliveLoop();
  void PollLoop();
  // Reads the cluster's keys into the cache.
  Status Refresh();
  // Plans every sharded collection of the store and writes the changed plans.
  Status Coordinate();
  // Plans one collection from the cache; writes it if it changed.
  Status PlanCollection(const CollectionLayout& layout, std::map<std::string, size_t>* load);
  // Opens and closes replicas as placed; claims the ready ones.
  Status HoldAndClaim();
  // Asks the nodes holding `shards` (path: shards/search or shards/stats);
  // each reply's body, by the shards it answered.
  std::vector<std::pair<std::vector<uint32_t>, nlohmann::json>> Ask(const ShardQuery& q,
                                                                    const std::vector<uint32_t>& shards,
                                                                    const std::string& what);

  ClusterOptions options_;
  EtcdClient etcd_;
  PlacementStore placements_store_;
  Database* db_ = nullptr;
  std::atomic<int64_t> lease_{0};

  mutable std::mutex mu_;
  ClusterKeys keys_;  // the cluster as last read from etcd
  std::map<std::string, std::chrono::steady_clock::time_point> suspect_;  // node -> skipped until
  std::map<std::string, std::string> claimed_;  // claim key -> the value this node last wrote
  std::map<std::string, std::chrono::steady_clock::time_point> claim_written_at_;  // the poll thread's
  uint64_t spread_ = 0;

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread keepalive_, poll_;
};

}  // namespace moeedb::cluster
