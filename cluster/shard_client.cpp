#include "cluster/shard_client.h"

#include <set>
#include <thread>

#include "base/http_client.h"

namespace moeedb::cluster {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// How long a node that failed a request is skipped.
constexpr auto kSuspectFor = std::chrono::seconds(5);

std::string PercentEncode(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out += static_cast<char>(c);
    else out += '%', out += kHex[c >> 4], out += kHex[c & 15];
  }
  return out;
}

}  // namespace

ShardClient::ShardClient(ClusterView* view, std::string node_id, std::string api_key,
                         std::chrono::milliseconds deadline, std::shared_ptr<const TlsContext> tls)
    : view_(view), node_id_(std::move(node_id)), api_key_(std::move(api_key)), deadline_(deadline), tls_(std::move(tls)) {}

std::vector<std::pair<std::vector<uint32_t>, json>> ShardClient::Ask(const ShardQuery& q,
                                                                     const std::vector<uint32_t>& shards,
                                                                     const std::string& what) {
  const std::string target = "/collections/" + PercentEncode(q.collection) + "/shards/" + what;
  const std::string body_query = ShardQueryToJson(q).dump();
  std::vector<std::pair<std::vector<uint32_t>, json>> out;
  std::set<std::string> failed;
  std::vector<uint32_t> pending = shards;
  for (int round = 0; round < 3 && !pending.empty(); ++round) {
    auto keys = view_->Current();
    // Past the first round, or with a shard no replica is known of (a
    // placement newer than this node's last poll): the cluster read afresh.
    bool unknown = round > 0;
    auto coll = keys->claims.find(q.collection);
    const uint32_t split = q.shards > 0 ? q.shards : 1;
    for (uint32_t k : pending) unknown |= coll == keys->claims.end() || !coll->second.count(ShardRef{split, k});
    if (unknown && view_->Refresh().ok()) keys = view_->Current();
    // One live, claimed replica of each shard, round-robin, skipping suspects while others exist.
    std::map<std::string, std::vector<uint32_t>> by_node;
    std::map<std::string, std::string> address;
    {
      std::lock_guard lock(mu_);
      const auto now = Clock::now();
      for (uint32_t k : pending) {
        std::vector<std::string> good, suspect;
        for (const std::string& node : keys->ReadyNodes(q.collection, ShardRef{split, k}, q.store_id)) {
          if (node == node_id_ || failed.count(node)) continue;
          auto s = suspect_.find(node);
          (s != suspect_.end() && s->second > now ? suspect : good).push_back(node);
        }
        const auto& pick_from = good.empty() ? suspect : good;
        if (pick_from.empty()) continue;
        const std::string& node = pick_from[(spread_ + k) % pick_from.size()];
        by_node[node].push_back(k);
        address[node] = keys->nodes.at(node).address;  // ReadyNodes lists live nodes only
      }
      ++spread_;
    }
    pending.clear();
    std::vector<std::string> order;
    for (const auto& [node, ks] : by_node) order.push_back(node);
    std::vector<Result<HttpReply>> replies(order.size(), Status::Unavailable("not asked"));
    std::vector<std::thread> threads;
    for (size_t i = 0; i < order.size(); ++i)
      threads.emplace_back([&, i] {
        const std::string body =
            "{\"query\":" + body_query + ",\"shards\":" + json(by_node[order[i]]).dump() + "}";
        replies[i] = HttpPost(address[order[i]], target, body, deadline_, api_key_, tls_.get());
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

std::vector<std::pair<uint32_t, LexicalStats>> ShardClient::Stats(const ShardQuery& q,
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

std::vector<ShardAnswer> ShardClient::Search(const ShardQuery& q, const std::vector<uint32_t>& shards) {
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
