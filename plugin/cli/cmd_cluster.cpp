// moeedb cluster status / drain / reshard: a cluster's state in etcd,
// draining a node before maintenance, splitting a collection anew
// (docs/cluster.md).
#include <chrono>
#include <iostream>
#include <sstream>
#include <thread>

#include "cluster/cluster_status.h"
#include "cluster/placement.h"
#include "plugin/cli/commands.h"
#include "plugin/cli/common.h"

namespace moeedb::cli {

namespace {

Result<cluster::EtcdClient> EtcdOf(const Args& args) {
  std::vector<std::string> endpoints;
  std::stringstream in(args.Get("etcd"));
  for (std::string e; std::getline(in, e, ',');)
    if (!e.empty()) endpoints.push_back(e);
  MOEEDB_ASSIGN_OR_RETURN(auto tls, TlsClientFromFlags(args));
  return cluster::EtcdClient(endpoints, cluster::EtcdClient::kDefaultDeadline, tls);
}

}  // namespace

int RunClusterStatus(const Args& args) {
  auto etcd = EtcdOf(args);
  if (!etcd.ok()) return UsageError("cluster status", etcd.status().message());
  auto status = cluster::ReadClusterStatusAt(*etcd, args.Get("cluster", "moeedb"), args.Has("db") ? args.Get("db") : "");
  if (!status.ok()) return Fail("cluster status", status.status().message());
  std::cout << status->dump(2) << std::endl;
  return 0;
}

int RunClusterDrain(const Args& args) {
  if (args.positional().size() != 1) return UsageError("cluster drain", "needs one node ID");
  auto etcd = EtcdOf(args);
  if (!etcd.ok()) return UsageError("cluster drain", etcd.status().message());
  Status s = cluster::SetDraining(*etcd, args.Get("cluster", "moeedb"), args.positional()[0], !args.Has("undo"));
  if (!s.ok()) return Fail("cluster drain", s.message());
  std::cout << (args.Has("undo") ? "node " + args.positional()[0] + " takes replicas again"
                                 : "node " + args.positional()[0] + " is draining: its replicas move to the others")
            << std::endl;
  return 0;
}

int RunClusterReshard(const Args& args) {
  if (args.positional().size() != 1) return UsageError("cluster reshard", "needs one COLLECTION");
  auto etcd = EtcdOf(args);
  if (!etcd.ok()) return UsageError("cluster reshard", etcd.status().message());
  const std::string name = args.positional()[0];
  const auto shards = static_cast<uint32_t>(args.Int("shards"));
  cluster::PlacementStore keys(&*etcd, args.Get("cluster", "moeedb"));
  Status s = cluster::RequestReshard(keys, name, 0, shards);
  if (!s.ok()) return Fail("cluster reshard", s.message());
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(args.Int("wait"));
  for (;;) {
    auto read = keys.Read(name);
    if (!read.ok()) return Fail("cluster reshard", read.status().message());
    const auto& p = read->first;
    if (p && p->shards == shards && !p->next) {
      std::cout << "collection " << name << " is split into " << shards << " shards" << std::endl;
      return 0;
    }
    if (std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (args.Int("wait") > 0) return Fail("cluster reshard", "the new split of " + name + " is not in use yet (cluster status shows its replicas)");
  std::cout << "collection " << name << " is being split into " << shards
            << " shards: cluster status shows its new replicas" << std::endl;
  return 0;
}

}  // namespace moeedb::cli
