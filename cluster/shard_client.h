// ShardClient: asks other nodes for the shards this node does not hold
// (POST /collections/<name>/shards/search or /shards/stats). Each shard goes
// to one ready replica of a live node, spread round-robin over them; a node
// that fails or misses the deadline is skipped for a while and its shards
// asked elsewhere, up to three rounds.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/tls.h"
#include "cluster/cluster_view.h"
#include "database/vector_collection.h"

namespace moeedb::cluster {

class ShardClient {
 public:
  // `api_key`: sent to the other nodes (they share it); `deadline`: per
  // request; `tls`: the nodes are asked over https (null: http).
  ShardClient(ClusterView* view, std::string node_id, std::string api_key, std::chrono::milliseconds deadline,
              std::shared_ptr<const TlsContext> tls = nullptr);

  // The lexical statistics of each shard that answered.
  std::vector<std::pair<uint32_t, LexicalStats>> Stats(const ShardQuery& q, const std::vector<uint32_t>& shards);
  // The answers of the shards that answered; a shard no replica answered is missing.
  std::vector<ShardAnswer> Search(const ShardQuery& q, const std::vector<uint32_t>& shards);

 private:
  // Asks the nodes holding `shards` (`what`: "search" or "stats"); each
  // reply's body, by the shards it answered.
  std::vector<std::pair<std::vector<uint32_t>, nlohmann::json>> Ask(const ShardQuery& q,
                                                                    const std::vector<uint32_t>& shards,
                                                                    const std::string& what);

  ClusterView* view_;
  const std::string node_id_, api_key_;
  const std::chrono::milliseconds deadline_;
  const std::shared_ptr<const TlsContext> tls_;

  std::mutex mu_;
  std::map<std::string, std::chrono::steady_clock::time_point> suspect_;  // node -> skipped until
  uint64_t spread_ = 0;
};

}  // namespace moeedb::cluster
