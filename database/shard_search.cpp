// How one shard replica answers its part of a search (shard_query.h): the
// dense modes through the DualIndex, lexical through the LexicalIndex, and
// hybrid as every signal's candidate list, each candidate scored exactly on
// all three signals.
#include <algorithm>
#include <cmath>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "database/shard_replica.h"
#include "database/vector_schema.h"

namespace moeedb {

using json = nlohmann::json;

namespace {
Status BeingRebuilt(const ShardReplica& r, const std::string& collection) {
  return Status::Unavailable("shard " + std::to_string(r.shard()) + " of " + collection +
                             " is being rebuilt from the store (its change log went back, or a change failed)");
}
}  // namespace

Status ShardReplica::CatchUpTo(uint64_t seq) {
  if (needs_rebuild_) return BeingRebuilt(*this, layout_.name);
  if (applied_seq() >= seq) return Status::OK();
  // The write the caller saw acknowledged is committed, so the log holds it.
  MOEEDB_RETURN_IF_ERROR(CatchUp().status());
  if (applied_seq() < seq)
    return Status::Unavailable("shard " + std::to_string(shard_) + " of " + layout_.name + " has applied entry " +
                               std::to_string(applied_seq()) + ", not yet " + std::to_string(seq));
  return Status::OK();
}

Status ShardReplica::WithinStaleness(uint64_t max_staleness_ms) {
  // Refused at once rather than after waiting out the rebuild.
  if (needs_rebuild_) return BeingRebuilt(*this, layout_.name);
  if (max_staleness_ms == 0 || !store_->shared() || log_read_age_ms() <= max_staleness_ms) return Status::OK();
  const uint64_t age = log_read_age_ms();
  Status s = CatchUp().status();
  if (s.ok() || log_read_age_ms() <= max_staleness_ms) return Status::OK();  // caught up, or fresh by the log's head
  return Status::Unavailable("shard " + std::to_string(shard_) + " of " + layout_.name + " has not read the change log for " +
                             std::to_string(age) + " ms (the bound is " + std::to_string(max_staleness_ms) +
                             " ms) and cannot read it now: " + s.message());
}

uint64_t ShardReplica::log_read_age_ms() const {
  if (!store_->shared()) return 0;
  std::shared_lock lock(mu_);
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - log_read_at_).count());
}

Result<LexicalStats> ShardReplica::Stats(const ShardQuery& q) {
  // Statistics without the writes the caller requires would score their
  // words as absent from the collection.
  MOEEDB_RETURN_IF_ERROR(WithinStaleness(q.max_staleness_ms));
  MOEEDB_RETURN_IF_ERROR(CatchUpTo(q.min_seq));
  std::shared_lock lock(mu_);
  if (needs_rebuild_) return BeingRebuilt(*this, layout_.name);  // set under mu_: checked under it
  if (!lexical_) return LexicalStats{};
  std::lock_guard lex(lexical_mu_);
  return lexical_->Stats(q.spec.query);
}

void ShardReplica::FilterOf(const ShardQuery& q, QueryFilter* out) const {
  if (!q.spec.filter) return;
  const MetadataFilter* f = q.spec.filter.get();
  // The payload index's candidates: only they are tested (and, when few,
  // scored) rather than every document.
  bool decided = false;
  if (payload_) out->among = payload_->Candidates(f->Requirements(), &decided);
  if (decided && f->OnlyEqualities()) {
    // The index answered the whole filter exactly: its candidates are the
    // documents it keeps, with no payload to read.
    out->keep = [out](uint64_t id) { return std::binary_search(out->among->begin(), out->among->end(), id); };
    return;
  }
  // A $has_vector condition reads which vectors a point has from its RW row.
  std::shared_ptr<const VectorSchema> schema;
  if (f->UsesVectors()) {
    auto s = VectorSchema::FromInfo(layout_.info_json);
    schema = std::make_shared<const VectorSchema>(s.ok() ? *s : VectorSchema());
  }
  out->keep = [this, f, out, schema](uint64_t id) {
    if (out->among && !std::binary_search(out->among->begin(), out->among->end(), id)) return false;
    auto it = metadata_.find(id);
    if (it == metadata_.end()) return false;
    auto p = out->parsed.find(id);
    if (p == out->parsed.end()) {
      p = out->parsed.emplace(id, json::parse(it->second)).first;
      // An id condition reads the document's external id from the store.
      if (f->UsesIds() && p->second.is_object()) {
        auto doc = store_->GetByInternal(layout_.name, id, /*with_vectors=*/false);
        if (doc.ok()) p->second["$id"] = doc->id;
      }
      if (schema && p->second.is_object()) {
        std::vector<float> rw;
        if (index_) index_->RwRow(id, &rw);
        p->second["$vectors"] = schema->CarriedBy(rw);
      }
    }
    return f->Matches(p->second);
  };
}

Result<ShardAnswer> ShardReplica::Answer(const ShardQuery& q) {
  MOEEDB_RETURN_IF_ERROR(WithinStaleness(q.max_staleness_ms));
  MOEEDB_RETURN_IF_ERROR(CatchUpTo(q.min_seq));
  const SearchSpec& o = q.spec;
  if (o.k > kMaxSearchK) return Status::InvalidArgument("k must be at most " + std::to_string(kMaxSearchK));
  if (o.alpha && !std::isfinite(*o.alpha)) return Status::InvalidArgument("alpha must be finite");
  const bool has_vectors = !q.hs.empty() && !q.rw.empty();
  if (has_vectors && (q.hs.size() != layout_.dim_hs || q.rw.size() != layout_.dim_rw))
    return Status::InvalidArgument("query vectors of " + std::to_string(q.hs.size()) + " and " +
                                   std::to_string(q.rw.size()) + " dims; the collection has " +
                                   std::to_string(layout_.dim_hs) + " and " + std::to_string(layout_.dim_rw));
  std::shared_lock lock(mu_);
  if (needs_rebuild_) return BeingRebuilt(*this, layout_.name);  // set under mu_: checked under it
  ShardAnswer a;
  a.shard = shard_;
  a.applied_seq = applied_seq_;
  QueryFilter filter;
  FilterOf(q, &filter);
  if (o.mode == QueryMode::kLexical || o.mode == QueryMode::kHybrid) {
    if (!lexical_)
      return Status::InvalidArgument("collection '" + layout_.name +
                                     "' has no lexical index (it was created with lexical off" +
                                     std::string(layout_.lexical.enabled ? "" : " or before lexical search existed") +
                                     "): " + kQueryModes.Name(o.mode) + " search needs one");
    if (o.query.empty()) return Status::InvalidArgument(std::string(kQueryModes.Name(o.mode)) + " search needs the query text");
  }
  if (o.mode == QueryMode::kHybrid && !has_vectors) return Status::InvalidArgument("hybrid search needs the query's vectors");
  if (o.mode != QueryMode::kLexical && o.mode != QueryMode::kHybrid && !has_vectors)
    return Status::InvalidArgument(std::string(kQueryModes.Name(o.mode)) + " search needs the query's vectors");
  if (o.mode == QueryMode::kLexical) {
    MOEEDB_ASSIGN_OR_RETURN(a.hits, Lexical(q, filter));
  } else if (o.mode == QueryMode::kHybrid) {
    MOEEDB_ASSIGN_OR_RETURN(a.hits, Hybrid(q, filter));
  } else {
    MOEEDB_ASSIGN_OR_RETURN(a.hits, Dense(q, filter));
  }
  return a;
}

Result<std::vector<ShardCandidate>> ShardReplica::Dense(const ShardQuery& q,
                                                        const QueryFilter& filter) const {
  const SearchSpec& o = q.spec;
  SearchRequest req;
  req.hs = q.hs.data();
  req.rw = q.rw.data();
  req.k = o.k;
  req.alpha = o.alpha.value_or(layout_.default_alpha);
  req.mode = o.mode;
  req.exact = o.exact;
  req.oversample = o.oversample.value_or(0);
  req.filter = filter.keep;
  if (filter.among) req.among = &*filter.among;
  MOEEDB_ASSIGN_OR_RETURN(std::vector<Hit> hits, batcher_.Search(*index_, req));
  std::vector<ShardCandidate> out;
  for (const Hit& h : hits) out.push_back(ShardCandidate{h.id, h.score, h.score_hs, h.score_rw});
  // The lexical score is reported beside the dense ones when the query has a text.
  if (lexical_ && !o.query.empty() && !out.empty()) {
    std::vector<uint64_t> ids;
    for (const auto& c : out) ids.push_back(c.id);
    std::lock_guard lex(lexical_mu_);
    MOEEDB_ASSIGN_OR_RETURN(std::vector<double> s, lexical_->Score(o.query, ids, q.stats ? &*q.stats : nullptr));
    for (size_t i = 0; i < out.size(); ++i) out[i].lex = s[i];
  }
  return out;
}

Result<std::vector<ShardCandidate>> ShardReplica::BestLexical(const ShardQuery& q, size_t k,
                                                              const QueryFilter& filter) const {
  // Ranked by Score(), which sums a document's terms in one order. The
  // matcher's sums follow its query tree, which each shard shapes by its own
  // term frequencies, so they differ from one index's in the last bit, and
  // near ties would fall differently at the cut: the matcher proposes a few
  // more than k, Score() ranks them, the cut is made on its scores.
  constexpr size_t kTieMargin = 16;
  const LexicalStats* stats = q.stats ? &*q.stats : nullptr;
  MOEEDB_ASSIGN_OR_RETURN(std::vector<LexicalHit> hits, lexical_->Search(q.spec.query, k + kTieMargin, filter.keep, stats));
  std::vector<uint64_t> ids;
  for (const auto& h : hits) ids.push_back(h.id);
  MOEEDB_ASSIGN_OR_RETURN(std::vector<double> scores, lexical_->Score(q.spec.query, ids, stats));
  std::vector<ShardCandidate> out;
  for (size_t i = 0; i < ids.size(); ++i) out.push_back(ShardCandidate{ids[i], scores[i], 0.0, 0.0, scores[i]});
  std::sort(out.begin(), out.end(), [](const ShardCandidate& a, const ShardCandidate& b) {
    return a.score != b.score ? a.score > b.score : a.id < b.id;
  });
  if (out.size() > k) out.resize(k);
  return out;
}

Result<std::vector<ShardCandidate>> ShardReplica::Lexical(const ShardQuery& q,
                                                          const QueryFilter& filter) const {
  const SearchSpec& o = q.spec;
  std::vector<ShardCandidate> out;
  {
    std::lock_guard lex(lexical_mu_);
    MOEEDB_ASSIGN_OR_RETURN(out, BestLexical(q, o.k, filter));
  }
  if (!q.hs.empty() && !q.rw.empty() && !out.empty()) {  // report the dense cosines too
    std::vector<uint64_t> ids;
    for (const auto& c : out) ids.push_back(c.id);
    const float alpha = o.alpha.value_or(layout_.default_alpha);
    MOEEDB_ASSIGN_OR_RETURN(std::vector<Hit> dense, index_->Score(q.hs.data(), q.rw.data(), alpha, ids));
    std::unordered_map<uint64_t, const Hit*> by_id;
    for (const auto& h : dense) by_id[h.id] = &h;
    for (auto& c : out)
      if (auto it = by_id.find(c.id); it != by_id.end()) c.hs = it->second->score_hs, c.rw = it->second->score_rw;
  }
  return out;
}

Result<std::vector<ShardCandidate>> ShardReplica::Hybrid(const ShardQuery& q,
                                                         const QueryFilter& filter) const {
  const SearchSpec& o = q.spec;
  const FusionOptions fo = FusionOf(o, layout_.default_alpha);
  MOEEDB_RETURN_IF_ERROR(fo.Validate());
  std::vector<ShardCandidate> cands;
  if (o.k == 0) return cands;
  const size_t kk = q.candidates > 0 ? q.candidates : HybridCandidates(o.k, layout_.index.oversample);
  const float alpha = o.alpha.value_or(layout_.default_alpha);

  // Each dense signal's best kk (both cosines come exact) and the lexical
  // index's best kk; then the missing scores of the union.
  std::unordered_map<uint64_t, size_t> at;  // id -> position in cands
  std::vector<bool> has_dense;
  auto add = [&](uint64_t id) {
    auto [it, fresh] = at.emplace(id, cands.size());
    if (fresh) cands.push_back(ShardCandidate{id}), has_dense.push_back(false);
    return it->second;
  };
  for (QueryMode m : {QueryMode::kHs, QueryMode::kRw}) {
    if ((m == QueryMode::kHs ? fo.w_hs : fo.w_rw) == 0) continue;
    SearchRequest req;
    req.hs = q.hs.data();
    req.rw = q.rw.data();
    req.k = kk;
    req.mode = m;
    req.exact = o.exact;
    req.oversample = o.oversample.value_or(0);
    req.filter = filter.keep;
    if (filter.among) req.among = &*filter.among;
    MOEEDB_ASSIGN_OR_RETURN(std::vector<Hit> hits, index_->Search(req));
    for (const Hit& h : hits) {
      const size_t i = add(h.id);
      cands[i].hs = h.score_hs, cands[i].rw = h.score_rw, has_dense[i] = true;
      cands[i].lists |= m == QueryMode::kHs ? kInHs : kInRw;
    }
  }
  const LexicalStats* stats = q.stats ? &*q.stats : nullptr;
  std::lock_guard lex(lexical_mu_);
  if (fo.w_lex > 0) {
    MOEEDB_ASSIGN_OR_RETURN(std::vector<ShardCandidate> best, BestLexical(q, kk, filter));
    for (const auto& h : best) cands[add(h.id)].lists |= kInLex;
  }
  // Every lexical score from Score() (see Lexical()), the matcher's included.
  std::vector<uint64_t> need_dense, need_lex;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (!has_dense[i]) need_dense.push_back(cands[i].id);
    need_lex.push_back(cands[i].id);
  }
  if (!need_dense.empty()) {
    MOEEDB_ASSIGN_OR_RETURN(std::vector<Hit> dense, index_->Score(q.hs.data(), q.rw.data(), alpha, need_dense));
    for (const Hit& h : dense) cands[at[h.id]].hs = h.score_hs, cands[at[h.id]].rw = h.score_rw;
  }
  if (!need_lex.empty()) {
    MOEEDB_ASSIGN_OR_RETURN(std::vector<double> s, lexical_->Score(o.query, need_lex, stats));
    for (size_t i = 0; i < need_lex.size(); ++i) cands[at[need_lex[i]]].lex = s[i];
  }
  return cands;
}

}  // namespace moeedb
