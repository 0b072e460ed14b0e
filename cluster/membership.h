// Membership: this node's registration in its cluster, nodes/<id> = its
// address, on an etcd lease renewed every third of the lease's TTL. A node
// that stops renewing (killed, stopped, cut off) drops out when the lease
// expires, and its claims with it. A node that finds its own lease expired
// registers again under a new one, after telling its owner (`on_lease_lost`):
// whatever it had put on the old lease is gone. The registration names the
// process's instance token; a node that finds its id registered under
// `previous_instance` (a process of its own folder it knows is gone:
// node_lock.h) revokes that lease and registers at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.h"
#include "cluster/etcd_client.h"
#include "cluster/placement.h"

namespace moeedb::cluster {

class Membership {
 public:
  // Registers `node_id` at `address` as `instance` and starts renewing its
  // lease. InvalidArgument while another live node holds the id (a node
  // restarted within its old lease's TTL waits that TTL out first, unless
  // the id is registered under `previous_instance`); Unavailable without etcd.
  static Result<std::unique_ptr<Membership>> Register(const EtcdClient* etcd, const PlacementStore* keys,
                                                      std::string node_id, std::string address, int lease_ttl_s,
                                                      std::function<void()> on_lease_lost, std::string instance = "",
                                                      std::string previous_instance = "");
  // Stops renewing and revokes the lease: the node and its claims go at once.
  ~Membership();

  // The lease the node's keys are on now (it changes when the node registers again).
  int64_t lease() const { return lease_.load(); }

 private:
  Membership(const EtcdClient* etcd, const PlacementStore* keys, std::string node_id, std::string address,
             int lease_ttl_s, std::function<void()> on_lease_lost, std::string instance, std::string previous_instance);
  Status Put();
  void KeepAliveLoop();

  const EtcdClient* etcd_;
  const PlacementStore* keys_;
  const std::string node_id_, address_, instance_, previous_instance_;
  const int lease_ttl_s_;
  const std::function<void()> on_lease_lost_;
  std::atomic<int64_t> lease_{0};

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread keepalive_;
};

}  // namespace moeedb::cluster
