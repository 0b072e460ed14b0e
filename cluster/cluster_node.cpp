#include "cluster/cluster_node.h"

#include <algorithm>
#include <regex>

#include "base/http_client.h"
#include "base/log.h"
#include "cluster/cluster_status.h"

namespace moeedb::cluster {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// A collection placed through etcd: one recorded with more than one shard or replica.
bool IsPlaced(const CollectionLayout& l) { return l.shards > 1 || l.replicas > 1; }

std::string PercentEncode(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out += static_cast<char>(c);
    else out += '%', out += kHex[c >> 4], out += kHex[c & 15];
  }
  return out;
}

// How long a node that failed a request is skipped.
constexpr auto kSuspectFor = std::chrono::seconds(5);
// A claim unchanged but for its counters is rewritten at most this often.
constexpr auto kClaimRefresh = std::chrono::seconds(2);

}  // namespace

ClusterNode::ClusterNode(ClusterOptions options)
    : options_(std::move(options)), etcd_(options_.etcd), placements_store_(&etcd_, options_.cluster) {}

Result<std::unique_ptr<ClusterNode>> ClusterNode::Join(ClusterOptions options) {
  if (!std::regex_match(options.node_id, std::regex("[A-Za-z0-9_.-]{1,64}")))
    return Status::InvalidArgument("node id '" + options.node_id + "' must be 1-64 of [A-Za-z0-9_.-]");
  if (!std::regex_match(options.cluster, std::regex("[A-Za-z0-9_.-]{1,64}")))
    return Status::InvalidArgument("cluster name '" + options.cluster + "' must be 1-64 of [A-Za-z0-9_.-]");
  if (options.etcd.empty()) return Status::InvalidArgument("no etcd endpoint given");
  if (options.lease_ttl_s < 2) return Status::InvalidArgument("the lease TTL must be at least 2 seconds");
  std::unique_ptr<ClusterNode> node(new ClusterNode(std::move(options)));
  MOEEDB_RETURN_IF_ERROR(node->Register());
  // The cluster as it is before this node answers anything: the replicas to ask.
  MOEEDB_RETURN_IF_ERROR(node->Refresh());
  node->keepalive_ = std::thread([n = node.get()] { n->KeepAliveLoop(); });
  return node;
}

Status ClusterNode::Register() {
  const std::string key = placements_store_.NodeKey(options_.node_id);
  const std::string value = json{{"address", options_.address}}.dump();
  // The same id still registered (this node restarted within its old
  // lease's TTL): wait for that lease to expire rather than take it over.
  const auto until = Clock::now() + std::chrono::seconds(options_.lease_ttl_s + 2);
  for (;;) {
    MOEEDB_ASSIGN_OR_RETURN(int64_t lease, etcd_.GrantLease(options_.lease_ttl_s));
    MOEEDB_ASSIGN_OR_RETURN(bool put, etcd_.Txn({Compare::ModRevision(key, 0)}, {TxnOp::Put(key, value, lease)}));
    if (put) {
      lease_ = lease;
      return Status::OK();
    }
    (void)etcd_.RevokeLease(lease);
    if (Clock::now() > until)
      return Status::InvalidArgument("node id '" + options_.node_id + "' is held by a live node of cluster '" +
                                     options_.cluster + "'");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

ClusterNode::~ClusterNode() {
  {
    std::lock_guard lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (keepalive_.joinable()) keepalive_.join();
  if (poll_.joinable()) poll_.join();
  (void)etcd_.RevokeLease(lease_);
}

void ClusterNode::Attach(Database* db) {
  db_ = db;
  poll_ = std::thread([this] { PollLoop(); });
}

void ClusterNode::KeepAliveLoop() {
  const auto period = std::chrono::milliseconds(options_.lease_ttl_s * 1000 / 3);
  std::string last_error;
  for (;;) {
    {
      std::unique_lock lock(stop_mu_);
      if (stop_cv_.wait_for(lock, period, [&] { return stopping_; })) return;
    }
    Status s = etcd_.KeepAlive(lease_);
    // Expired (this node was stopped, or etcd unreachable, past the TTL): its
    // claims are gone; it registers anew and claims again what it holds.
    if (s.code() == Status::Code::kNotFound) {
      LogLine("moeedb cluster: the lease of node " + options_.node_id + " expired; registering again");
      s = Register();
      std::lock_guard lock(mu_);
      claimed_.clear();
    }
    if (!s.ok() && s.message() != last_error) LogLine("moeedb cluster: " + s.message());
    last_error = s.ok() ? "" : s.message();
  }
}

void ClusterNode::PollLoop() {
  std::string last_error;
  for (;;) {
    {
      std::unique_lock lock(stop_mu_);
      if (stop_cv_.wait_for(lock, std::chrono::milliseconds(options_.poll_ms), [&] { return stopping_; })) return;
    }
    Status s = Refresh();
    if (s.ok()) s = Coordinate();
    if (s.ok()) s = HoldAndClaim();
    if (!s.ok() && s.message() != last_error) LogLine("moeedb cluster: " + s.message());
    last_error = s.ok() ? "" : s.message();
  }
}

Status ClusterNode::Refresh() {
  MOEEDB_ASSIGN_OR_RETURN(ClusterKeys keys, placements_store_.ReadAll());
  std::lock_guard lock(mu_);
  keys_ = std::move(keys);
  return Status::OK();
}

Status ClusterNode::PlanCollection(const CollectionLayout& layout, std::map<std::string, size_t>* load) {
  std::optional<Placement> current;
  int64_t revision = 0;
  std::vector<std::string> live;
  ReadyReplicas ready;
  std::set<std::string> draining;
  {
    std::lock_guard lock(mu_);
    draining = keys_.draining;
    if (auto it = keys_.placements.find(layout.name); it != keys_.placements.end()) current = it->second.placement, revision = it->second.revision;
    for (const auto& [id, node] : keys_.nodes) live.push_back(id);
    for (uint32_t k = 0; k < layout.shards; ++k)
      for (const std::string& node : keys_.ReadyNodes(layout.name, k, layout.store_id)) ready[k].insert(node);
  }
  if (live.empty()) return Status::OK();
  const Placement next = Plan(current, layout.store_id, layout.shards, layout.replicas, live, ready, load, draining);
  if (current && *current == next) return Status::OK();
  MOEEDB_ASSIGN_OR_RETURN(bool won, placements_store_.Write(layout.name, next, revision));
  (void)won;  // lost: another node's plan from the same state is written; read it either way
  MOEEDB_ASSIGN_OR_RETURN(auto now, placements_store_.Read(layout.name));
  std::lock_guard lock(mu_);
  if (now.first) keys_.placements[layout.name] = ClusterKeys::Placed{*now.first, now.second};
  return Status::OK();
}

Status ClusterNode::Coordinate() {
  MOEEDB_ASSIGN_OR_RETURN(std::vector<CollectionRecord> records, db_->ListCollections());
  std::map<std::string, size_t> load;
  Status first;
  std::set<std::string> present;
  for (const CollectionRecord& rec : records) {
    auto layout = CollectionLayout::FromRecord(rec);
    if (!layout.ok() || !IsPlaced(*layout)) continue;
    present.insert(rec.name);
    Status s = PlanCollection(*layout, &load);
    if (!s.ok() && first.ok()) first = s;
  }
  // Placements of dropped collections go (by the revision read, like any change).
  std::vector<std::pair<std::string, int64_t>> stale;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, p] : keys_.placements)
      if (!present.count(name)) stale.emplace_back(name, p.revision);
  }
  for (const auto& [name, revision] : stale)
    (void)etcd_.Txn({Compare::ModRevision(placements_store_.PlacementKey(name), revision)},
                    {TxnOp::Delete(placements_store_.PlacementKey(name))});
  return first;
}

Status ClusterNode::HoldAndClaim() {
  // The collections this node holds shards of, or has claims in.
  std::map<std::string, int64_t> mine;  // collection -> placement revision
  std::set<std::string> claimed_collections;
  std::set<std::string> in_etcd;  // this node's claims as last read
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, p] : keys_.placements)
      if (!p.placement.ShardsOf(options_.node_id).empty()) mine[name] = p.revision;
    for (const auto& [key, value] : claimed_)
      if (auto r = placements_store_.ParseReplicaKey(key)) claimed_collections.insert(r->collection);
    for (const auto& [name, shards] : keys_.claims)
      for (const auto& [shard, by_node] : shards)
        if (by_node.count(options_.node_id)) in_etcd.insert(placements_store_.ReplicaKey(name, shard, options_.node_id));
  }
  Status first;
  std::set<std::string> keep;
  std::map<std::string, std::pair<std::string, int64_t>> to_claim;  // key -> (value, placement revision)
  for (const auto& name : claimed_collections)
    if (!mine.count(name)) mine[name] = -1;  // holds nothing now: its replicas close
  for (const auto& [name, revision] : mine) {
    auto c = db_->OpenCollection(name);
    if (!c.ok()) {
      if (c.status().code() != Status::Code::kNotFound && first.ok()) first = c.status();
      continue;
    }
    Status synced = (*c)->SyncShards();
    if (!synced.ok() && first.ok()) first = synced;
    if (revision < 0) continue;
    (*c)->RefreshStaleReplicas();  // a replica behind only because its follower was busy is not stale
    for (const auto& r : (*c)->ReplicaStates()) {
      const std::string key = placements_store_.ReplicaKey(name, r.shard, options_.node_id);
      // A replica that has not read the change log within the staleness bound
      // (cut off from PostgreSQL, stalled) claims "stale", one being rebuilt
      // "building": coordinators pass both over.
      const uint64_t bound = (*c)->max_staleness_ms();
      const bool fresh_log = bound == 0 || r.log_read_age_ms <= bound;
      const char* state = r.building ? "building" : fresh_log ? "ready" : "stale";
      const json value = {{"state", state}, {"store_id", (*c)->store_id()}, {"applied_seq", r.applied_seq},
                          {"documents", r.documents}, {"index_bytes", r.index_bytes}, {"address", options_.address}};
      keep.insert(key);
      to_claim[key] = {value.dump(), revision};
    }
  }
  // Claims: new or changed ones written (counters at most every kClaimRefresh),
  // those of replicas closed deleted.
  auto& written_at = claim_written_at_;
  std::map<std::string, std::string> claimed;
  {
    std::lock_guard lock(mu_);
    claimed = claimed_;
  }
  for (const auto& [key, v] : to_claim) {
    auto it = claimed.find(key);
    // Written but gone from etcd (its lease expired while this node was
    // stopped or cut off): written again, whatever this node remembers.
    const bool fresh = it == claimed.end() || !in_etcd.count(key);
    // A change of state is written at once; the counters at most every kClaimRefresh.
    const bool same_state = !fresh && json::parse(it->second, nullptr, false).value("state", "") ==
                                          json::parse(v.first, nullptr, false).value("state", "");
    if (!fresh && (it->second == v.first || (same_state && Clock::now() - written_at[key] < kClaimRefresh))) continue;
    const auto r = placements_store_.ParseReplicaKey(key);  // a key this node made
    auto won = placements_store_.Claim(r->collection, r->shard, options_.node_id, lease_, v.first, v.second);
    if (!won.ok()) {
      if (first.ok()) first = won.status();
      continue;
    }
    if (*won) claimed[key] = v.first, written_at[key] = Clock::now();
  }
  for (auto it = claimed.begin(); it != claimed.end();) {
    if (keep.count(it->first)) {
      ++it;
      continue;
    }
    (void)etcd_.Delete(it->first);
    written_at.erase(it->first);
    it = claimed.erase(it);
  }
  std::lock_guard lock(mu_);
  claimed_ = std::move(claimed);
  return first;
}

std::optional<std::vector<uint32_t>> ClusterNode::HeldShards(const CollectionLayout& layout) {
  if (!IsPlaced(layout)) return std::nullopt;
  bool planned = false;
  {
    std::lock_guard lock(mu_);
    auto it = keys_.placements.find(layout.name);
    planned = it != keys_.placements.end() && it->second.placement.store_id == layout.store_id;
  }
  if (!planned) {
    // A collection new to the cluster: placed now, so its creator holds its share at once.
    std::map<std::string, size_t> load;
    {
      std::lock_guard lock(mu_);
      for (const auto& [name, p] : keys_.placements)
        if (name != layout.name)
          for (const auto& a : p.placement.assigned)
            for (const auto& n : a) ++load[n];
    }
    Status s = PlanCollection(layout, &load);
    if (!s.ok()) LogLine("moeedb cluster: placing " + layout.name + ": " + s.message());
  }
  std::lock_guard lock(mu_);
  auto it = keys_.placements.find(layout.name);
  if (it == keys_.placements.end() || it->second.placement.store_id != layout.store_id) return std::vector<uint32_t>{};
  return it->second.placement.ShardsOf(options_.node_id);
}

void ClusterNode::AwaitReplicas(const CollectionLayout& layout, std::chrono::milliseconds timeout) {
  if (!IsPlaced(layout) || db_ == nullptr) return;
  const auto until = Clock::now() + timeout;
  while (Clock::now() < until) {
    if (Refresh().ok()) {
      std::lock_guard lock(mu_);
      const size_t want = std::min<size_t>(layout.replicas, keys_.nodes.size());
      bool ready = true;
      for (uint32_t k = 0; k < layout.shards && ready; ++k)
        ready = keys_.ReadyNodes(layout.name, k, layout.store_id).size() >= want;
      if (ready) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(options_.poll_ms / 3 + 1));
  }
}

Result<std::string> ClusterNode::ClusterStatus() {
  MOEEDB_ASSIGN_OR_RETURN(json status, ReadClusterStatus(etcd_, options_.cluster, db_ ? db_->store() : nullptr));
  status["node"] = options_.node_id;
  return status.dump();
}

std::vector<std::pair<std::vector<uint32_t>, json>> ClusterNode::Ask(const ShardQuery& q,
                                                                     const std::vector<uint32_t>& shards,
                                                                     const std::string& what) {
  const std::string target = "/collections/" + PercentEncode(q.collection) + "/shards/" + what;
  const std::string body_query = ShardQueryToJson(q).dump();
  std::vector<std::pair<std::vector<uint32_t>, json>> out;
  std::set<std::string> failed;
  std::vector<uint32_t> pending = shards;
  for (int round = 0; round < 3 && !pending.empty(); ++round) {
    // One live, claimed replica of each shard, round-robin, skipping suspects while others exist.
    std::map<std::string, std::vector<uint32_t>> by_node;
    std::map<std::string, std::string> address;
    // Past the first round, or with a shard no replica is known of (a
    // placement newer than this node's last poll): the cluster read afresh.
    bool unknown = round > 0;
    {
      std::lock_guard lock(mu_);
      auto coll = keys_.claims.find(q.collection);
      for (uint32_t k : pending) unknown |= coll == keys_.claims.end() || !coll->second.count(k);
    }
    if (unknown) (void)Refresh();
    {
      std::lock_guard lock(mu_);
      const auto now = Clock::now();
      for (uint32_t k : pending) {
        std::vector<std::string> good, suspect;
        for (const std::string& node : keys_.ReadyNodes(q.collection, k, q.store_id)) {
          if (node == options_.node_id || failed.count(node)) continue;
          auto s = suspect_.find(node);
          (s != suspect_.end() && s->second > now ? suspect : good).push_back(node);
        }
        const auto& pick_from = good.empty() ? suspect : good;
        if (pick_from.empty()) continue;
        const std::string& node = pick_from[(spread_ + k) % pick_from.size()];
        by_node[node].push_back(k);
        address[node] = keys_.nodes[node].address;
      }
      ++spread_;
    }
    pending.clear();
    std::vector<std::thread> threads;
    std::vector<Result<HttpReply>> replies(by_node.size(), Status::Unavailable("not asked"));
    std::vector<std::string> order;
    for (const auto& [node, ks] : by_node) order.push_back(node);
    for (size_t i = 0; i < order.size(); ++i)
      threads.emplace_back([&, i] {
        const json body = {{"shards", by_node[order[i]]}};
        replies[i] = HttpPost(address[order[i]], target,
                              "{\"query\":" + body_query + ",\"shards\":" + body["shards"].dump() + "}",
                              std::chrono::milliseconds(options_.peer_deadline_ms), options_.api_key);
      });
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < order.size(); ++i) {
      const auto& ks = by_node[order[i]];
      json parsed;
      if (replies[i].ok() && replies[i]->status == 200) parsed = json::parse(replies[i]->body, nullptr, false);
      if (!parsed.is_object()) {
        failed.insert(order[i]);
        std::lock_guard lock(mu_);
        suspect_[order[i]] = Clock::now() + kSuspectFor;
        pending.insert(pending.end(), ks.begin(), ks.end());
        continue;
      }
      out.emplace_back(ks, std::move(parsed));
    }
  }
  return out;
}

std::vector<std::pair<uint32_t, LexicalStats>> ClusterNode::Stats(const ShardQuery& q,
                                                                  const std::vector<uint32_t>& shards) {
  std::vector<std::pair<uint32_t, LexicalStats>> out;
  for (const auto& [ks, body] : Ask(q, shards, "stats")) {
    if (!body.contains("stats") || !body["stats"].is_array()) continue;
    for (const json& s : body["stats"]) {
      auto stats = LexicalStatsFromJson(s.value("stats", json::object()));
      if (stats.ok()) out.emplace_back(s.value("shard", 0u), std::move(*stats));
    }
  }
  return out;
}

std::vector<ShardAnswer> ClusterNode::Search(const ShardQuery& q, const std::vector<uint32_t>& shards) {
  std::vector<ShardAnswer> out;
  for (const auto& [ks, body] : Ask(q, shards, "search")) {
    if (!body.contains("answers") || !body["answers"].is_array()) continue;
    for (const json& a : body["answers"]) {
      auto answer = ShardAnswerFromJson(a);
      if (answer.ok()) out.push_back(std::move(*answer));
    }
  }
  return out;
}

}  // namespace moeedb::cluster
