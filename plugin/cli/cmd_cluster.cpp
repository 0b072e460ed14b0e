// moeedb cluster status / drain: a cluster's state in etcd, and draining a
// node before maintenance (docs/cluster.md).
#include <iostream>
#include <sstream>

#include "cluster/cluster_status.h"
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

}  // namespace moeedb::cli
