#include "cluster/replica_holder.h"

#include <algorithm>
#include <set>


namespace moeedb::cluster {

using Clock = std::chrono::steady_clock;

namespace {
// A claim unchanged but for its counters is rewritten at most this often.
constexpr auto kClaimRefresh = std::chrono::seconds(2);
}  // namespace

ReplicaHolder::ReplicaHolder(const EtcdClient* etcd, const PlacementStore* keys, const ClusterView* view,
                             std::string node_id, std::string address)
    : etcd_(etcd), keys_(keys), view_(view), node_id_(std::move(node_id)), address_(std::move(address)) {}

void ReplicaHolder::Forget() {
  std::lock_guard lock(mu_);
  claimed_.clear();
  written_at_.clear();
  building_at_.clear();
  ++forgotten_;
}

ReplicaClaim ReplicaHolder::ClaimOf(const VectorCollection& c, const VectorCollection::ReplicaState& r) const {
  ReplicaClaim claim;
  // A replica that has not read the change log within the staleness bound
  // (cut off from PostgreSQL, stalled) claims "stale", one being rebuilt
  // "building": coordinators pass both over.
  const uint64_t bound = c.max_staleness_ms();
  const bool fresh_log = bound == 0 || r.log_read_age_ms <= bound;
  claim.state = r.building ? ReplicaClaim::State::kBuilding
                : fresh_log ? ReplicaClaim::State::kReady
                            : ReplicaClaim::State::kStale;
  claim.store_id = c.store_id();
  claim.applied_seq = r.applied_seq;
  claim.documents = r.documents;
  claim.index_bytes = r.index_bytes;
  claim.address = address_;
  return claim;
}

Status ReplicaHolder::ClaimBuilding(const CollectionLayout& layout, ShardRef shard, uint64_t seq, int64_t lease) {
  ReplicaClaim claim;
  claim.state = ReplicaClaim::State::kBuilding;
  claim.store_id = layout.store_id;
  claim.applied_seq = seq;
  claim.address = address_;
  Status last = Status::Unavailable("its placement kept changing");
  for (int attempt = 0; attempt < 4; ++attempt) {
    // The placement as etcd holds it now (the view may be a poll behind).
    auto read = keys_->Read(layout.name);
    if (!read.ok()) {
      last = read.status();
      continue;
    }
    const auto& [placement, revision] = *read;
    if (!placement || placement->store_id != layout.store_id) return Status::OK();  // not placed: no claims to keep
    const std::vector<ShardRef> held = placement->ShardsOf(node_id_);
    if (std::find(held.begin(), held.end(), shard) == held.end()) return Status::OK();  // not this node's (now)
    // Written and remembered under delete_mu_: a round deletes nothing in between.
    std::lock_guard writing(delete_mu_);
    auto won = keys_->Claim(layout.name, shard, node_id_, lease, claim, revision);
    if (!won.ok()) last = won.status();
    if (!won.ok() || !*won) continue;  // an error, or the placement changed under the write: read it again
    const std::string key = keys_->ReplicaKey(layout.name, shard, node_id_);
    const auto now = Clock::now();
    std::lock_guard lock(mu_);
    claimed_[key] = claim, written_at_[key] = now, building_at_[key] = now;
    return Status::OK();
  }
  return Status::Unavailable("collection '" + layout.name + "': shard " + std::to_string(shard.shard) + " of " +
                             std::to_string(shard.shards) + " is not claimed as building (" + last.message() +
                             "); its log is kept by the retention window alone");
}

Status ReplicaHolder::HoldAndClaim(Database* db, int64_t lease) {
  const auto round_start = Clock::now();
  const auto keys = view_->Current();
  std::map<std::string, ReplicaClaim> claimed;
  std::map<std::string, Clock::time_point> written_at;
  uint64_t forgotten = 0;
  {
    std::lock_guard lock(mu_);
    claimed = claimed_, written_at = written_at_, forgotten = forgotten_;
  }
  // The collections this node holds shards of, or has claims in.
  std::map<std::string, int64_t> mine;  // collection -> placement revision; -1: holds nothing now
  for (const auto& [name, p] : keys->placements)
    if (!p.placement.ShardsOf(node_id_).empty()) mine[name] = p.revision;
  for (const auto& [key, claim] : claimed)
    if (auto r = keys_->ParseReplicaKey(key); r && !mine.count(r->collection)) mine[r->collection] = -1;
  std::set<std::string> in_etcd;  // this node's claims as last read
  for (const auto& [name, shards] : keys->claims)
    for (const auto& [shard, by_node] : shards)
      if (by_node.count(node_id_)) in_etcd.insert(keys_->ReplicaKey(name, shard, node_id_));

  Status first;
  std::map<std::string, std::pair<ReplicaClaim, int64_t>> to_claim;  // key -> (claim, placement revision)
  for (const auto& [name, revision] : mine) {
    auto c = db->OpenCollection(name);
    if (!c.ok()) {
      if (c.status().code() != Status::Code::kNotFound && first.ok()) first = c.status();
      continue;
    }
    Status synced = (*c)->SyncShards();  // opens and closes replicas as placed
    if (!synced.ok() && first.ok()) first = synced;
    if (revision < 0) continue;
    (*c)->RefreshStaleReplicas();  // a replica behind only because its follower was busy is not stale
    for (const auto& r : (*c)->ReplicaStates())
      to_claim[keys_->ReplicaKey(name, ShardRef{r.shards, r.shard}, node_id_)] = {ClaimOf(**c, r), revision};
  }
  for (const auto& [key, v] : to_claim) {
    const auto& [claim, revision] = v;
    auto it = claimed.find(key);
    // Written but gone from etcd (its lease expired while this node was
    // stopped or cut off): written again, whatever this node remembers.
    const bool fresh = it == claimed.end() || !in_etcd.count(key);
    if (!fresh && it->second == claim) continue;
    // A change of state is written at once; the counters at most every kClaimRefresh.
    if (!fresh && it->second.state == claim.state && Clock::now() - written_at[key] < kClaimRefresh) continue;
    const auto r = keys_->ParseReplicaKey(key);  // a key this node made
    auto won = keys_->Claim(r->collection, r->shard, node_id_, lease, claim, revision);
    if (!won.ok()) {
      if (first.ok()) first = won.status();
      continue;
    }
    if (*won) claimed[key] = claim, written_at[key] = Clock::now();
  }
  // A replica opened on another thread while this round ran (a follower's
  // SyncShards) claimed itself building after this round's reads: its claim
  // is not this round's to delete.
  const auto claimed_during_round = [&](const std::string& key) {
    std::lock_guard lock(mu_);
    auto it = building_at_.find(key);
    return it != building_at_.end() && it->second >= round_start;
  };
  std::unique_lock deleting(delete_mu_);  // no building claim is written meanwhile
  for (auto it = claimed.begin(); it != claimed.end();) {
    if (to_claim.count(it->first) || claimed_during_round(it->first)) {
      ++it;
      continue;
    }
    (void)etcd_->Delete(it->first);
    written_at.erase(it->first);
    it = claimed.erase(it);
  }
  // Claims in etcd this node did not write in this process's memory (a
  // build's claim from an opening thread, lost to this round's copy, of a
  // replica whose opening failed): they would hold the log back for good.
  for (const std::string& key : in_etcd)
    if (!to_claim.count(key) && !claimed.count(key) && !claimed_during_round(key)) (void)etcd_->Delete(key);
  deleting.unlock();
  std::lock_guard lock(mu_);
  if (forgotten_ == forgotten) {
    // Claims written during the round by opening threads, newer than the
    // round's own for the key, stay remembered.
    for (const auto& [key, at] : building_at_)
      if (at >= round_start && claimed_.count(key) && (!written_at.count(key) || written_at_[key] > written_at[key]))
        claimed[key] = claimed_[key], written_at[key] = written_at_[key];
    claimed_ = std::move(claimed), written_at_ = std::move(written_at);
  }
  for (auto it = building_at_.begin(); it != building_at_.end();)
    it = it->second < round_start ? building_at_.erase(it) : std::next(it);
  return first;
}

}  // namespace moeedb::cluster
