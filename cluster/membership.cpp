#include "cluster/membership.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "base/log.h"

namespace moeedb::cluster {

using Clock = std::chrono::steady_clock;

Membership::Membership(const EtcdClient* etcd, const PlacementStore* keys, std::string node_id, std::string address,
                       int lease_ttl_s, std::function<void()> on_lease_lost, std::string instance,
                       std::string previous_instance)
    : etcd_(etcd),
      keys_(keys),
      node_id_(std::move(node_id)),
      address_(std::move(address)),
      instance_(std::move(instance)),
      previous_instance_(std::move(previous_instance)),
      lease_ttl_s_(lease_ttl_s),
      on_lease_lost_(std::move(on_lease_lost)) {}

Result<std::unique_ptr<Membership>> Membership::Register(const EtcdClient* etcd, const PlacementStore* keys,
                                                         std::string node_id, std::string address, int lease_ttl_s,
                                                         std::function<void()> on_lease_lost, std::string instance,
                                                         std::string previous_instance) {
  if (lease_ttl_s < 2) return Status::InvalidArgument("the lease TTL must be at least 2 seconds");
  std::unique_ptr<Membership> m(new Membership(etcd, keys, std::move(node_id), std::move(address), lease_ttl_s,
                                               std::move(on_lease_lost), std::move(instance),
                                               std::move(previous_instance)));
  MOEEDB_RETURN_IF_ERROR(m->Put());
  m->keepalive_ = std::thread([p = m.get()] { p->KeepAliveLoop(); });
  return m;
}

Status Membership::Put() {
  const std::string key = keys_->NodeKey(node_id_);
  nlohmann::json registration{{"address", address_}};
  if (!instance_.empty()) registration["instance"] = instance_;
  const std::string value = registration.dump();
  // The same id still registered (this node restarted within its old
  // lease's TTL): wait for that lease to expire rather than take it over.
  const auto until = Clock::now() + std::chrono::seconds(lease_ttl_s_ + 2);
  for (;;) {
    MOEEDB_ASSIGN_OR_RETURN(int64_t lease, etcd_->GrantLease(lease_ttl_s_));
    MOEEDB_ASSIGN_OR_RETURN(bool put, etcd_->Txn({Compare::ModRevision(key, 0)}, {TxnOp::Put(key, value, lease)}));
    if (put) {
      lease_ = lease;
      return Status::OK();
    }
    (void)etcd_->RevokeLease(lease);
    // Registered by this folder's previous process, which is gone: its lease goes now.
    if (!previous_instance_.empty()) {
      MOEEDB_ASSIGN_OR_RETURN(std::optional<KeyValue> held, etcd_->Get(key));
      if (held) {
        const auto j = nlohmann::json::parse(held->value, nullptr, false);
        // (Revoked meanwhile by its expiry: the next attempt finds the id free.)
        if (j.is_object() && j.value("instance", "") == previous_instance_ && etcd_->RevokeLease(held->lease).ok())
          continue;
      }
    }
    if (Clock::now() > until)
      return Status::InvalidArgument("node id '" + node_id_ + "' is held by a live node of cluster '" + keys_->cluster() + "'");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

Membership::~Membership() {
  {
    std::lock_guard lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (keepalive_.joinable()) keepalive_.join();
  (void)etcd_->RevokeLease(lease_);
}

void Membership::KeepAliveLoop() {
  const auto period = std::chrono::milliseconds(lease_ttl_s_ * 1000 / 3);
  std::string last_error;
  for (;;) {
    {
      std::unique_lock lock(stop_mu_);
      if (stop_cv_.wait_for(lock, period, [&] { return stopping_; })) return;
    }
    Status s = etcd_->KeepAlive(lease_);
    // Expired (this node was stopped, or etcd unreachable, past the TTL): its
    // claims are gone; it registers anew and claims again what it holds.
    if (s.code() == Status::Code::kNotFound) {
      LogLine("moeedb cluster: the lease of node " + node_id_ + " expired; registering again");
      if (on_lease_lost_) on_lease_lost_();
      s = Put();
    }
    if (!s.ok() && s.message() != last_error) LogLine("moeedb cluster: " + s.message());
    last_error = s.ok() ? "" : s.message();
  }
}

}  // namespace moeedb::cluster
