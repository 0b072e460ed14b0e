// A ShardPeers for tests: this node holds shards `held` of every collection's
// split, and no other node answers (Stats and Search find nothing). Tests
// derive from it to watch or hold up what the collection tells its peers.
#pragma once

#include <mutex>
#include <vector>

#include "database/vector_collection.h"

namespace moeedb::test {

class HeldShardsPeers : public ShardPeers {
 public:
  std::optional<PlacedShards> HeldShards(const CollectionLayout& layout) override {
    std::lock_guard lock(mu);
    PlacedShards p{layout.shards, {}};
    for (uint32_t k : held) p.held.push_back(ShardRef{layout.shards, k});
    return p;
  }
  std::vector<std::pair<uint32_t, LexicalStats>> Stats(const ShardQuery&, const std::vector<uint32_t>&) override {
    return {};
  }
  std::vector<ShardAnswer> Search(const ShardQuery&, const std::vector<uint32_t>&) override { return {}; }

  std::mutex mu;               // guards `held` (and what derived fakes add)
  std::vector<uint32_t> held;  // shard numbers of the split in use
};

}  // namespace moeedb::test
