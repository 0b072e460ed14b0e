// moeedb cluster status / drain: a cluster's state in etcd, and draining a
// node before maintenance (docs/cluster.md).
#include <iostream>
#include <sstream>

#include "cluster/cluster_status.h"
#include "plugin/cli/commands.h"

namespace moeedb::cli {

namespace {

cluster::EtcdClient EtcdOf(const Args& args) {
  std::vector<std::string> endpoints;
  std::stringstream in(args.Get("etcd"));
  for (std::string e; std::getline(in, e, ',');)
    if (!e.empty()) endpoints.push_back(e);
  return cluster::EtcdClient(endpoints);
}

}  // namespace

int RunClusterStatus(const Args& args) {
  const cluster::EtcdClient etcd = EtcdOf(args);
  auto status = cluster::ReadClusterStatusAt(etcd, args.Get("cluster", "moeedb"), args.Has("db") ? args.Get("db") : "");
  if (!status.ok()) return Fail("cluster status", status.status().message());
  std::cout << status->dump(2) << std::endl;
  return 0;
}

int RunClusterDrain(const Args& args) {
  if (args.positional().size() != 1) return UsageError("cluster drain", "needs one node ID");
  const cluster::EtcdClient etcd = EtcdOf(args);
  Status s = cluster::SetDraining(etcd, args.Get("cluster", "moeedb"), args.positional()[0], !args.Has("undo"));
  if (!s.ok()) return Fail("cluster drain", s.message());
  std::cout << (args.Has("undo") ? "node " + args.positional()[0] + " takes replicas again"
                                 : "node " + args.positional()[0] + " is draining: its replicas move to the others")
            << std::endl;
  return 0;
}

}  // namespace moeedb::cli
