// What an operator reads and sets about a cluster in etcd: its nodes and
// their leases, each sharded collection's placement with every replica's
// claim (applied change-log entry, documents, index bytes, and its lag
// behind the store when one is given), and which nodes are draining.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "cluster/etcd_client.h"
#include "storage/store.h"

namespace moeedb::cluster {

// The cluster's state as JSON: {"nodes": [{id, address, lease, ttl_s,
// draining}], "collections": [{name, shards, replicas, store_id, last_op,
// shard_list: [{shard, assigned, leaving, replicas: [{node, applied_seq, lag,
// documents, index_bytes}]}]}]}; `store` (may be nullptr) gives last_op and lag.
Result<nlohmann::json> ReadClusterStatus(const EtcdClient& etcd, const std::string& cluster, const Store* store);
// The same, with the store opened at `db_location` ("" none): `moeedb cluster status --db`.
Result<nlohmann::json> ReadClusterStatusAt(const EtcdClient& etcd, const std::string& cluster, const std::string& db_location);
// Starts (or, with drain false, ends) draining `node`: the placement moves
// its replicas to the other nodes, which it serves until they are ready.
Status SetDraining(const EtcdClient& etcd, const std::string& cluster, const std::string& node, bool drain);

}  // namespace moeedb::cluster
