// How a collection answers a query: one ShardQuery to every shard (the local
// replicas here, the others through ShardPeers), the answers merged into one
// index's answer (shard_query.h), then the documents of the best hits read
// from the store.
#include <algorithm>
#include <cmath>
#include <mutex>
#include <set>

#include "database/vector_collection.h"

namespace moeedb {

namespace {

std::string ShardList(const std::vector<uint32_t>& shards) {
  std::string out;
  for (uint32_t k : shards) out += (out.empty() ? "" : ", ") + std::to_string(k);
  return out;
}

}  // namespace

Result<std::vector<SearchHit>> VectorCollection::Search(const float* hs, const float* rw, const SearchSpec& o,
                                                        SearchInfo* info) const {
  uint32_t used = 0;
  auto hits = SearchSplit(hs, rw, o, info, 0, &used);
  if (hits.ok() || hits.status().code() != Status::Code::kUnavailable) return hits;
  // Shards missing because searches moved to another split meanwhile (a
  // reshard's switch this node has not acted on yet, or did under the
  // search): the split the cluster uses now is asked.
  if (used != shards_.load()) return SearchSplit(hs, rw, o, info, 0, &used);
  if (peers_ != nullptr && placed_)
    if (auto now = peers_->SplitInUse(layout_); now && *now != used) return SearchSplit(hs, rw, o, info, *now, &used);
  return hits;
}

Result<std::vector<SearchHit>> VectorCollection::SearchSplit(const float* hs, const float* rw, const SearchSpec& o,
                                                             SearchInfo* info, uint32_t split, uint32_t* used) const {
  if (o.k > kMaxSearchK) return Status::InvalidArgument("k must be at most " + std::to_string(kMaxSearchK));
  if (o.alpha && !std::isfinite(*o.alpha)) return Status::InvalidArgument("alpha must be finite");
  // What every shard would refuse is refused here, before any is asked.
  if ((o.mode == QueryMode::kLexical || o.mode == QueryMode::kHybrid) && !layout_.lexical.enabled)
    return Status::InvalidArgument("collection '" + name_ + "' has no lexical index (it was created with lexical off" +
                                   " or before lexical search existed): " + kQueryModes.Name(o.mode) +
                                   " search needs one");
  ShardQuery q;
  q.collection = name_;
  q.store_id = layout_.store_id;
  if (hs != nullptr && rw != nullptr) q.hs.assign(hs, hs + layout_.dim_hs), q.rw.assign(rw, rw + layout_.dim_rw);
  q.spec = o;
  q.min_seq = o.min_seq;
  q.max_staleness_ms = max_staleness_ms_;
  if (o.consistency == ReadConsistency::kHead) {
    // The log's head as of now: every write acknowledged before this search is at or below it.
    MOEEDB_ASSIGN_OR_RETURN(CollectionRecord rec, store_->GetCollection(name_));
    q.min_seq = std::max(q.min_seq, rec.last_op);
  }
  if (o.mode == QueryMode::kHybrid) q.candidates = HybridCandidates(o.k, layout_.index.oversample);

  std::shared_lock lock(replicas_mu_);
  // Every shard of the split searches use now (a reshard swaps it under the lock).
  const uint32_t shards = split > 0 ? split : shards_.load();
  q.shards = shards;
  *used = shards;
  // A local replica being rebuilt refuses searches: its shard goes to a
  // peer's replica, when the node has peers.
  std::vector<uint32_t> remote;
  std::vector<ShardReplica*> local;
  for (uint32_t k = 0; k < shards; ++k) {
    auto it = replicas_.find(ShardRef{shards, k});
    if (it == replicas_.end() || (peers_ != nullptr && it->second->building())) remote.push_back(k);
    else local.push_back(it->second.get());
  }
  // Peers' replicas may not lag this node's newest by more than the bound:
  // one further behind catches up first or is passed over.
  if (!remote.empty() && peers_ != nullptr) {
    uint64_t newest = 0;
    for (ShardReplica* r : local) newest = std::max(newest, r->applied_seq());
    const uint64_t lag = max_lag_entries_;
    if (newest > lag) q.min_seq = std::max(q.min_seq, newest - lag);
  }
  std::set<uint32_t> answered;
  // BM25 over the whole collection: every shard's statistics of the query's
  // terms, summed, so each shard scores as one index would.
  if (shards > 1 && layout_.lexical.enabled && !o.query.empty()) {
    LexicalStats sum;
    for (ShardReplica* r : local) {
      MOEEDB_ASSIGN_OR_RETURN(LexicalStats s, r->Stats(q));
      sum.Add(s);
    }
    if (!remote.empty() && peers_ != nullptr)
      for (const auto& [k, s] : peers_->Stats(q, remote)) sum.Add(s), answered.insert(k);
    q.stats = sum;
  }
  std::vector<ShardAnswer> answers;
  for (ShardReplica* r : local) {
    MOEEDB_ASSIGN_OR_RETURN(ShardAnswer a, r->Answer(q));
    answers.push_back(std::move(a));
  }
  if (!remote.empty() && peers_ != nullptr) {
    // A shard whose statistics did not come back is missing: its answer
    // would be scored without itself.
    std::vector<uint32_t> ask = remote;
    if (q.stats) ask.assign(answered.begin(), answered.end());
    for (auto& a : peers_->Search(q, ask)) answers.push_back(std::move(a));
  }
  std::vector<uint32_t> missing;
  for (uint32_t k : remote) {
    bool found = false;
    for (const auto& a : answers) found |= a.shard == k;
    if (!found) missing.push_back(k);
  }
  if (!missing.empty() && !o.partial)
    return Status::Unavailable("collection '" + name_ + "': no live replica of shard" +
                               (missing.size() > 1 ? "s " : " ") + ShardList(missing) +
                               " answered (search with partial to accept the other shards' hits)");
  if (info != nullptr) info->missing_shards = missing;
  lock.unlock();

  std::vector<FusedCandidate> merged;
  if (o.mode == QueryMode::kHybrid) {
    const FusionOptions fo = FusionOf(o, layout_.default_alpha);
    merged = MergeHybrid(answers, fo, q.candidates, o.k);
  } else {
    merged = MergeRanked(answers, o.mode, o.alpha.value_or(layout_.default_alpha), o.k);
  }
  return ToSearchHits(merged);
}

Result<std::vector<ShardAnswer>> VectorCollection::AnswerShards(const ShardQuery& q,
                                                                const std::vector<uint32_t>& shards) const {
  if (q.store_id != layout_.store_id)
    return Status::NotFound("collection '" + name_ + "' was dropped and created again");
  std::shared_lock lock(replicas_mu_);
  const uint32_t split = q.shards > 0 ? q.shards : shards_.load();
  std::vector<ShardAnswer> out;
  for (uint32_t k : shards) {
    auto it = replicas_.find(ShardRef{split, k});
    if (it == replicas_.end())
      return Status::NotFound("this node holds no replica of shard " + std::to_string(k) + " of " +
                              std::to_string(split) + " of '" + name_ + "'");
    MOEEDB_ASSIGN_OR_RETURN(ShardAnswer a, it->second->Answer(q));
    out.push_back(std::move(a));
  }
  return out;
}

Result<std::vector<std::pair<uint32_t, LexicalStats>>> VectorCollection::ShardStats(
    const ShardQuery& q, const std::vector<uint32_t>& shards) const {
  if (q.store_id != layout_.store_id)
    return Status::NotFound("collection '" + name_ + "' was dropped and created again");
  std::shared_lock lock(replicas_mu_);
  const uint32_t split = q.shards > 0 ? q.shards : shards_.load();
  std::vector<std::pair<uint32_t, LexicalStats>> out;
  for (uint32_t k : shards) {
    auto it = replicas_.find(ShardRef{split, k});
    if (it == replicas_.end())
      return Status::NotFound("this node holds no replica of shard " + std::to_string(k) + " of " +
                              std::to_string(split) + " of '" + name_ + "'");
    MOEEDB_ASSIGN_OR_RETURN(LexicalStats s, it->second->Stats(q));
    out.emplace_back(k, std::move(s));
  }
  return out;
}

Result<std::vector<SearchHit>> VectorCollection::ToSearchHits(const std::vector<FusedCandidate>& hits) const {
  std::vector<uint64_t> ids;
  for (const auto& h : hits) ids.push_back(h.id);
  MOEEDB_ASSIGN_OR_RETURN(auto docs, store_->GetManyByInternal(name_, ids, false));
  std::vector<SearchHit> out;
  for (size_t i = 0; i < hits.size(); ++i) {
    // A write (this node's, or another's the replica had not followed yet)
    // removed it after the replicas answered: not an answer any more.
    if (!docs[i]) continue;
    const auto& h = hits[i];
    SearchHit hit;
    hit.id = docs[i]->id;
    hit.score = static_cast<float>(h.fused);
    hit.score_hs = static_cast<float>(h.hs);
    hit.score_rw = static_cast<float>(h.rw);
    hit.score_lex = static_cast<float>(h.lex);
    hit.part_hs = static_cast<float>(h.part_hs);
    hit.part_rw = static_cast<float>(h.part_rw);
    hit.part_lex = static_cast<float>(h.part_lex);
    hit.text = docs[i]->text;
    hit.metadata_json = docs[i]->metadata_json;
    out.push_back(std::move(hit));
  }
  return out;
}

}  // namespace moeedb
