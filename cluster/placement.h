// Placement: which nodes hold each shard of a sharded collection, as etcd
// keeps it, and how the next placement follows from the last one.
//
// Keys, under /moeedb/<cluster>/:
//   nodes/<node>                      the node's address, on the node's lease
//   placement/<collection>            a Placement (JSON): the nodes each shard
//                                     is assigned to, and the ones leaving it
//   replicas/<collection>/<shards>/<shard>/<node>
//                                     a node's claim that it holds a caught-up
//                                     replica of shard <shard> of the split
//                                     into <shards>, on the node's lease: when
//                                     the node's lease expires, its claims go too
// A placement changes only by an etcd transaction comparing the
// mod_revision the writer read (PlacementStore::Write): two coordinators
// acting on the same state cannot both win, and one acting on a placement
// that has changed since it read it is refused and must read again. A node
// claims a replica only by a transaction comparing the placement's revision
// too, so no claim outlives the placement that assigned it unnoticed.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/etcd_client.h"
#include "cluster/replica_claim.h"
#include "database/shard_query.h"

namespace moeedb::cluster {

struct Placement {
  uint32_t store_id = 0;  // the collection's store id: a recreated collection starts anew
  uint32_t shards = 1, replicas = 1;  // the split searches use, and the copies of each shard
  // Per shard: the nodes assigned to hold it, and the nodes leaving it, which
  // keep serving it until the nodes that replace them are ready.
  std::vector<std::vector<std::string>> assigned, leaving;
  // Another split of the collection and, per shard, its nodes.
  struct Split {
    uint32_t shards = 0;
    std::vector<std::vector<std::string>> nodes;
    bool operator==(const Split& o) const = default;
  };
  // A reshard under way: the split being built. Searches switch to it (the
  // plan that names it `shards`) once each of its shards has its replicas ready.
  std::optional<Split> next;
  // The split searches used before the last switch: its nodes keep serving
  // it until `retire_at_ms` (Unix time), for nodes that act on a view from
  // before the switch.
  std::optional<Split> previous;
  int64_t retire_at_ms = 0;
  // Nodes gone (their lease expired) that keep their assignments for a
  // while, and when a plan first found each gone (Unix ms): a node that
  // comes back within the delay keeps its replicas and catches them up.
  std::map<std::string, int64_t> lost;

  nlohmann::json ToJson() const;
  static Result<Placement> FromJson(const std::string& text);
  // The replicas `node` holds (of the split in use: assigned or leaving; of
  // the next split and the previous one), ascending.
  std::vector<ShardRef> ShardsOf(const std::string& node) const;
  bool operator==(const Placement& o) const;
};

// How long a split searches no longer use keeps serving after a switch:
// every node's view (read every poll_ms, and afresh on a miss) moves on well within it.
inline constexpr int64_t kRetireSplitAfterMs = 10 * 1000;  // 10 s

// Which nodes have claimed a ready replica of each shard of a collection.
using ReadyReplicas = std::map<ShardRef, std::set<std::string>>;

// The next placement of a collection, from the current one (or an empty
// one of `shards` x `replicas`), the live nodes and the ready replicas:
//  - dead nodes leave every list;
//  - a shard whose assigned ready nodes number `replicas` lets its leaving ones go;
//  - a shard short of replicas gets the least-loaded live nodes that do not
//    hold it (load: replicas assigned, over every collection in `load`);
//  - while one live node holds two more replicas than another, one replica
//    moves: the lighter node is assigned, the heavier one leaves once it is
//    ready (one move per shard at a time);
//  - a draining node is assigned nothing new, and leaves every shard it holds
//    (serving it until the nodes that replace it are ready);
//  - a reshard's next split gets `replicas` live nodes per shard (the
//    least loaded); once every one of its shards has them ready (as many as
//    there are live nodes, if fewer) and no previous split is still
//    retiring, the plan switches to it: the split in use becomes `previous`,
//    retiring at `now_ms` + kRetireSplitAfterMs; no rebalancing meanwhile;
//  - a previous split past its retirement is dropped.
//  - a dead node stays assigned for `node_left_delay_ms` after a plan first
//    found it gone (as Elasticsearch's index.unassigned.node_left.delayed_timeout),
//    so that one restarting keeps its replicas and catches them up rather
//    than rebuild them all; meanwhile the surviving replicas answer. A shard
//    the dead node held the only other ready replica of is replaced at once;
//    past the delay all its replicas are;
// `shards` is the split of a collection without a placement (its record's):
// a placement's own split holds until a reshard switches it. `load` counts
// each node's assigned replicas of the other collections and is updated
// with this one's. Deterministic: ties go to the lower node id.
Placement Plan(const std::optional<Placement>& current, uint32_t store_id, uint32_t shards, uint32_t replicas,
               const std::vector<std::string>& live_nodes, const ReadyReplicas& ready,
               std::map<std::string, size_t>* load, const std::set<std::string>& draining = {}, int64_t now_ms = 0,
               int64_t node_left_delay_ms = 0);

// Asks for collection `collection`'s placement (of store id `store_id`; 0:
// whichever is placed) to be split into `shards`: writes its next split by a
// transaction on the revision read. OK when that split is in use or being
// built already; Conflict while a reshard to another count is under way;
// Unavailable without a placement (a node places a collection when it opens it).
Status RequestReshard(const class PlacementStore& keys, const std::string& collection, uint32_t store_id,
                      uint32_t shards);

// Every key of a cluster (one etcd range over PlacementStore::prefix()), read back.
struct ClusterKeys {
  struct Node {
    std::string address;
    int64_t lease = 0;
  };
  struct Placed {
    Placement placement;
    int64_t revision = 0;  // the placement key's mod_revision: what a change compares
  };
  std::map<std::string, Node> nodes;          // live node id -> its registration
  std::map<std::string, Placed> placements;  // by collection
  // collection -> replica (split, shard) -> node -> its claim
  std::map<std::string, std::map<ShardRef, std::map<std::string, ReplicaClaim>>> claims;
  std::set<std::string> draining;            // nodes being drained
  int64_t revision = 0;  // etcd's revision these keys were read at (at least: see ClusterView)

  // The live nodes with a ready claim on the shard of the collection as
  // created `store_id` (a collection dropped and created again has another).
  std::vector<std::string> ReadyNodes(const std::string& collection, ShardRef shard, uint32_t store_id) const;
  // The lowest change-log entry a live node other than `except` claims a
  // replica of the collection (as created `store_id`) at: applied, or, for
  // one being built, the entry its build reads the log from; std::nullopt
  // when no such claim exists. Log retention keeps that entry.
  std::optional<uint64_t> LowestApplied(const std::string& collection, uint32_t store_id,
                                        const std::string& except) const;
};

// A replica claim's key, taken apart.
struct ReplicaKeyParts {
  std::string collection;
  ShardRef shard;
  std::string node;
};

class PlacementStore {
 public:
  PlacementStore(const EtcdClient* etcd, std::string cluster);

  std::string NodeKey(const std::string& node) const;
  std::string PlacementKey(const std::string& collection) const;
  std::string ReplicaKey(const std::string& collection, ShardRef shard, const std::string& node) const;
  // A node being drained (`moeedb cluster drain`): its key exists while it drains.
  std::string DrainKey(const std::string& node) const;
  const std::string& prefix() const { return prefix_; }
  const std::string& cluster() const { return cluster_; }

  // The collection, shard and node of a replica claim's key; std::nullopt
  // for any other key (or a damaged one).
  std::optional<ReplicaKeyParts> ParseReplicaKey(const std::string& key) const;
  // Every key of the cluster, classified; keys it cannot read are skipped.
  Result<ClusterKeys> ReadAll() const;

  // The collection's placement and the mod_revision it was read at (0 and
  // std::nullopt when there is none).
  Result<std::pair<std::optional<Placement>, int64_t>> Read(const std::string& collection) const;
  // Writes `next` if the placement is still at `read_revision` (0: still
  // absent); false when it changed meanwhile (refused: read it again).
  Result<bool> Write(const std::string& collection, const Placement& next, int64_t read_revision) const;
  // Claims a ready replica of `shard` for `node` on its lease, if the
  // placement is still at `placement_revision`; false when it changed.
  Result<bool> Claim(const std::string& collection, ShardRef shard, const std::string& node, int64_t lease,
                     const ReplicaClaim& claim, int64_t placement_revision) const;

 private:
  const EtcdClient* etcd_;
  std::string cluster_, prefix_;
};

}  // namespace moeedb::cluster
