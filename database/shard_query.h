// A search of a sharded collection, split into what each shard answers and
// how the answers merge into one node's answer.
//
// The coordinator (any node) embeds the query once and sends the vectors
// with the typed search spec, never the text's embedding work, to one
// replica of every shard. Each shard returns candidates with exact scores:
//  - fused, hs, rw: its best k by the mode's score; the merge takes the best
//    k of all (descending score, ties by ascending internal id, as one
//    index orders them), so exact indexes give exactly one node's answer;
//  - lexical: its best k by BM25 scored with the collection's statistics
//    (the coordinator sums every shard's first: LexicalStats), merged alike;
//  - hybrid: the union of its best `candidates` by each signal, each
//    candidate with all three exact scores and the lists it was in. The
//    merge cuts every signal to its best `candidates` over all shards, which
//    is the list one index would have proposed, then fuses their union
//    (min-max, z-score or rrf over exactly the candidates one node fuses).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "database/spec/search_spec.h"
#include "index/fusion.h"
#include "index/lexical_index.h"

namespace moeedb {

// The most shards a collection is split into.
inline constexpr uint32_t kMaxShards = 256;

// One replica's place in a collection: shard `shard` of the collection split
// into `shards`. A collection being resharded has replicas of two splits at
// once (the one searches use and the one being built); each keeps the
// documents of its own shard (ShardOfId(id, shards, the collection's layout) == shard).
struct ShardRef {
  uint32_t shards = 1, shard = 0;
  auto operator<=>(const ShardRef&) const = default;
};

struct ShardQuery {
  std::string collection;
  uint32_t store_id = 0;        // the collection's store id: a recreated one is another collection
  uint32_t shards = 0;          // the split the shards asked for are of (0: the answering node's current one)
  std::vector<float> hs, rw;    // raw query vectors; empty: none (a lexical search of text alone)
  SearchSpec spec;
  size_t candidates = 0;        // hybrid: each signal's list length
  std::optional<LexicalStats> stats;  // the collection's BM25 statistics; unset: the shard's own
  uint64_t min_seq = 0;         // answer only once the replica has applied this change-log entry
  // A replica of a shared store that has not read the change log for longer
  // than this reads it first, or answers Unavailable (0: no bound).
  uint64_t max_staleness_ms = 0;
};

// Which of a hybrid search's lists a candidate was in.
inline constexpr uint8_t kInHs = 1, kInRw = 2, kInLex = 4;

struct ShardCandidate {
  uint64_t id = 0;          // internal id
  double score = 0;         // the mode's ranking score (dense: the index's; lexical: BM25)
  double hs = 0, rw = 0, lex = 0;
  uint8_t lists = 0;        // hybrid only
};

struct ShardAnswer {
  uint32_t shard = 0;
  uint64_t applied_seq = 0;
  std::vector<ShardCandidate> hits;
};

nlohmann::json ShardQueryToJson(const ShardQuery& q);
Result<ShardQuery> ShardQueryFromJson(const nlohmann::json& j);
nlohmann::json ShardAnswerToJson(const ShardAnswer& a);
Result<ShardAnswer> ShardAnswerFromJson(const nlohmann::json& j);
nlohmann::json LexicalStatsToJson(const LexicalStats& s);
Result<LexicalStats> LexicalStatsFromJson(const nlohmann::json& j);

// The candidates each signal proposes in a hybrid search of k hits.
size_t HybridCandidates(size_t k, int oversample);

// The best k of every shard's ranked hits (fused, hs, rw, lexical), each
// with its signals' scores and parts (alpha: the RW weight of fused mode).
std::vector<FusedCandidate> MergeRanked(const std::vector<ShardAnswer>& answers, QueryMode mode, float alpha, size_t k);
// Hybrid: each signal's best `candidates` over all shards, their union
// fused by `fusion`, the best k.
std::vector<FusedCandidate> MergeHybrid(const std::vector<ShardAnswer>& answers, const FusionOptions& fusion,
                                        size_t candidates, size_t k);

}  // namespace moeedb
