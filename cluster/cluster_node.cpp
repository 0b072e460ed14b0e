#include "cluster/cluster_node.h"

#include <regex>

#include "base/log.h"
#include "cluster/cluster_status.h"

namespace moeedb::cluster {

using Clock = std::chrono::steady_clock;

ClusterNode::ClusterNode(ClusterOptions options)
    : options_(std::move(options)),
      etcd_(options_.etcd, EtcdClient::kDefaultDeadline, options_.tls),
      keys_(&etcd_, options_.cluster),
      view_(&keys_),
      coordinator_(&etcd_, &keys_, &view_, int64_t{options_.node_left_delay_s} * 1000),
      holder_(&etcd_, &keys_, &view_, options_.node_id, options_.address),
      shards_(&view_, options_.node_id, options_.api_key, std::chrono::milliseconds(options_.peer_deadline_ms),
              options_.tls) {}

Result<std::unique_ptr<ClusterNode>> ClusterNode::Join(ClusterOptions options) {
  if (!std::regex_match(options.node_id, std::regex("[A-Za-z0-9_.-]{1,64}")))
    return Status::InvalidArgument("node id '" + options.node_id + "' must be 1-64 of [A-Za-z0-9_.-]");
  if (!std::regex_match(options.cluster, std::regex("[A-Za-z0-9_.-]{1,64}")))
    return Status::InvalidArgument("cluster name '" + options.cluster + "' must be 1-64 of [A-Za-z0-9_.-]");
  if (options.etcd.empty()) return Status::InvalidArgument("no etcd endpoint given");
  std::unique_ptr<ClusterNode> node(new ClusterNode(std::move(options)));
  ReplicaHolder* holder = &node->holder_;
  std::string instance, previous;
  if (!node->options_.index_dir.empty()) {
    MOEEDB_ASSIGN_OR_RETURN(node->lock_, NodeLock::Acquire(node->options_.index_dir));
    instance = NodeLock::NewToken();
    // Only a token of this boot proves its process gone (node_lock.h).
    if (NodeLock::OfThisBoot(node->lock_->previous())) previous = node->lock_->previous();
  }
  MOEEDB_ASSIGN_OR_RETURN(node->membership_,
                          Membership::Register(&node->etcd_, &node->keys_, node->options_.node_id,
                                               node->options_.address, node->options_.lease_ttl_s,
                                               [holder] { holder->Forget(); }, instance, previous));
  if (node->lock_) MOEEDB_RETURN_IF_ERROR(node->lock_->Record(instance));
  // The cluster as it is before this node answers anything: the replicas to ask.
  MOEEDB_RETURN_IF_ERROR(node->view_.Refresh());
  return node;
}

ClusterNode::~ClusterNode() { Leave(); }  // then the folder's lock goes

void ClusterNode::Leave() {
  {
    std::lock_guard lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (poll_.joinable()) poll_.join();
  membership_.reset();  // revokes the lease: the node and its claims go at once
}

void ClusterNode::Attach(Database* db) {
  db_ = db;
  poll_ = std::thread([this] { PollLoop(); });
}

void ClusterNode::PollLoop() {
  std::string last_error;
  for (;;) {
    {
      std::unique_lock lock(stop_mu_);
      if (stop_cv_.wait_for(lock, std::chrono::milliseconds(options_.poll_ms), [&] { return stopping_; })) return;
    }
    Status s = view_.Refresh();
    if (s.ok()) {
      const auto before = view_.Current();  // taken before the store is listed: see CoordinateAll
      auto records = db_->ListCollections();
      s = records.ok() ? coordinator_.CoordinateAll(*records, *before) : records.status();
      if (s.ok()) s = RecordSplits(*records);
    }
    if (s.ok()) s = holder_.HoldAndClaim(db_, membership_->lease());
    if (!s.ok() && s.message() != last_error) LogLine("moeedb cluster: " + s.message());
    last_error = s.ok() ? "" : s.message();
  }
}

Status ClusterNode::RecordSplits(const std::vector<CollectionRecord>& records) {
  const auto keys = view_.Current();
  Status first;
  for (const CollectionRecord& rec : records) {
    auto layout = CollectionLayout::FromRecord(rec);
    auto it = keys->placements.find(rec.name);
    if (!layout.ok() || it == keys->placements.end()) continue;
    const Placement& p = it->second.placement;
    if (p.store_id != rec.id || p.next || p.shards == layout->shards) continue;
    Status s = VectorCollection::RecordSplit(db_->store(), rec.name, rec.id, p.shards);
    if (!s.ok() && s.code() != Status::Code::kNotFound && first.ok()) first = s;
  }
  return first;
}

std::optional<PlacedShards> ClusterNode::HeldShards(const CollectionLayout& layout) {
  if (!IsPlaced(layout)) return std::nullopt;
  Status s = coordinator_.PlaceIfNew(layout);
  if (!s.ok()) LogLine("moeedb cluster: placing " + layout.name + ": " + s.message());
  const auto keys = view_.Current();
  auto it = keys->placements.find(layout.name);
  if (it == keys->placements.end() || it->second.placement.store_id != layout.store_id)
    return PlacedShards{layout.shards, {}};
  const Placement& p = it->second.placement;
  return PlacedShards{p.shards, p.ShardsOf(options_.node_id)};
}

std::optional<uint32_t> ClusterNode::SplitInUse(const CollectionLayout& layout) {
  if (!view_.Refresh().ok()) return std::nullopt;
  const auto keys = view_.Current();
  auto it = keys->placements.find(layout.name);
  if (it == keys->placements.end() || it->second.placement.store_id != layout.store_id) return std::nullopt;
  return it->second.placement.shards;
}

std::optional<uint64_t> ClusterNode::LowestApplied(const CollectionLayout& layout) {
  {
    // Read afresh (at most once a second): the poll loop that refreshes the
    // view waits while this node builds replicas, and a claim another node
    // made meanwhile (a new node's build) must count. Unread: keep it all.
    // A failed read counts as one too: an unreachable etcd costs one timeout
    // a second, not one per collection.
    std::lock_guard lock(lowest_mu_);
    if (Clock::now() - lowest_read_at_ >= std::chrono::seconds(1)) {
      lowest_read_ok_ = view_.Refresh().ok();
      lowest_read_at_ = Clock::now();
    }
    if (!lowest_read_ok_) return 0;
  }
  return view_.Current()->LowestApplied(layout.name, layout.store_id, options_.node_id);
}

void ClusterNode::HoldLogFrom(const CollectionLayout& layout, ShardRef shard, uint64_t seq) {
  int64_t lease = 0;
  {
    std::lock_guard lock(stop_mu_);
    if (stopping_ || !membership_) return;  // leaving: the claims go with the lease
    lease = membership_->lease();
  }
  Status s = holder_.ClaimBuilding(layout, shard, seq, lease);
  if (!s.ok()) LogLine("moeedb cluster: " + s.message());
}

Status ClusterNode::Reshard(const CollectionLayout& layout, uint32_t shards) {
  MOEEDB_RETURN_IF_ERROR(RequestReshard(keys_, layout.name, layout.store_id, shards));
  return view_.Refresh();  // this node acts on it at once
}

void ClusterNode::AwaitReplicas(const CollectionLayout& layout, std::chrono::milliseconds timeout) {
  if (!IsPlaced(layout) || db_ == nullptr) return;
  const auto until = Clock::now() + timeout;
  while (Clock::now() < until) {
    if (view_.Refresh().ok()) {
      const auto keys = view_.Current();
      const size_t want = std::min<size_t>(layout.replicas, keys->nodes.size());
      auto placed = keys->placements.find(layout.name);
      const uint32_t shards = placed != keys->placements.end() ? placed->second.placement.shards : layout.shards;
      bool ready = true;
      for (uint32_t k = 0; k < shards && ready; ++k)
        ready = keys->ReadyNodes(layout.name, ShardRef{shards, k}, layout.store_id).size() >= want;
      if (ready) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(options_.poll_ms / 3 + 1));
  }
}

std::vector<std::pair<uint32_t, LexicalStats>> ClusterNode::Stats(const ShardQuery& q,
                                                                  const std::vector<uint32_t>& shards) {
  return shards_.Stats(q, shards);
}

std::vector<ShardAnswer> ClusterNode::Search(const ShardQuery& q, const std::vector<uint32_t>& shards) {
  return shards_.Search(q, shards);
}

Result<std::string> ClusterNode::ClusterStatus() {
  MOEEDB_ASSIGN_OR_RETURN(nlohmann::json status,
                          ReadClusterStatus(etcd_, options_.cluster, db_ ? db_->store() : nullptr));
  status["node"] = options_.node_id;
  return status.dump();
}

}  // namespace moeedb::cluster
