// How a collection answers a query: the dense modes (fused, hs, rw) through
// the DualIndex, lexical through the LexicalIndex, and hybrid by taking
// candidates from every signal's index, re-scoring the union exactly on all
// three signals and fusing them (index/fusion.h).
#include <algorithm>
#include <cmath>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "index/metadata_filter.h"
#include "database/vector_collection.h"

namespace moeedb {

using json = nlohmann::json;

namespace {

// Candidates each signal proposes in hybrid mode: oversample * k, and at
// least this many, so the per-query normalisation sees a stable population.
constexpr size_t kMinHybridCandidates = 100;

}  // namespace

Result<std::vector<SearchHit>> VectorCollection::Search(const float* hs, const float* rw, const SearchSpec& o) const {
  if (o.k > kMaxSearchK) return Status::InvalidArgument("k must be at most " + std::to_string(kMaxSearchK));
  if (o.alpha && !std::isfinite(*o.alpha)) return Status::InvalidArgument("alpha must be finite");
  std::shared_lock lock(mu_);
  // The filter lives for this call only: it may capture by reference.
  std::function<bool(uint64_t)> filter;
  std::unordered_map<uint64_t, json> parsed;
  if (o.filter) {
    filter = [&](uint64_t id) {
      auto it = metadata_.find(id);
      if (it == metadata_.end()) return false;
      auto p = parsed.find(id);
      if (p == parsed.end()) {
        p = parsed.emplace(id, json::parse(it->second)).first;
        // An id condition reads the document's external id from the store.
        if (o.filter->UsesIds() && p->second.is_object()) {
          auto doc = store_->GetByInternal(name_, id, /*with_vectors=*/false);
          if (doc.ok()) p->second["$id"] = doc->id;
        }
      }
      return o.filter->Matches(p->second);
    };
  }
  if (o.mode == QueryMode::kLexical || o.mode == QueryMode::kHybrid) return SearchLexicalOrHybrid(hs, rw, o, filter);

  SearchRequest req;
  req.hs = hs;
  req.rw = rw;
  req.k = o.k;
  req.alpha = o.alpha.value_or(default_alpha_);
  req.mode = o.mode;
  req.exact = o.exact;
  req.filter = filter;
  MOEEDB_ASSIGN_OR_RETURN(std::vector<Hit> hits, batcher_.Search(*index_, req));
  std::vector<FusedCandidate> out;
  for (const Hit& h : hits) {
    FusedCandidate c{h.id, h.score_hs, h.score_rw, 0.0, h.score};
    if (o.mode == QueryMode::kFused) c.part_hs = h.score_hs, c.part_rw = req.alpha * h.score_rw;
    else if (o.mode == QueryMode::kHs) c.part_hs = h.score;
    else c.part_rw = h.score;
    out.push_back(c);
  }
  // The lexical score is reported beside the dense ones when the query has a text.
  if (lexical_ && !o.query.empty() && !out.empty()) {
    std::vector<uint64_t> ids;
    for (const auto& c : out) ids.push_back(c.id);
    std::lock_guard lex(lexical_mu_);
    MOEEDB_ASSIGN_OR_RETURN(std::vector<double> s, lexical_->Score(o.query, ids));
    for (size_t i = 0; i < out.size(); ++i) out[i].lex = s[i];
  }
  return ToSearchHits(out);
}

Result<std::vector<SearchHit>> VectorCollection::SearchLexicalOrHybrid(const float* hs, const float* rw,
                                                                       const SearchSpec& o,
                                                                       const std::function<bool(uint64_t)>& filter) const {
  if (!lexical_)
    return Status::InvalidArgument("collection '" + name_ + "' has no lexical index (it was created with lexical off" +
                                   std::string(lexical_spec_.enabled ? "" : " or before lexical search existed") +
                                   "): " + kQueryModes.Name(o.mode) + " search needs one");
  if (o.query.empty()) return Status::InvalidArgument(std::string(kQueryModes.Name(o.mode)) + " search needs the query text");
  const float alpha = o.alpha.value_or(default_alpha_);
  std::vector<FusedCandidate> cands;
  if (o.mode == QueryMode::kLexical) {
    {
      std::lock_guard lex(lexical_mu_);
      MOEEDB_ASSIGN_OR_RETURN(std::vector<LexicalHit> hits, lexical_->Search(o.query, o.k, filter));
      for (const auto& h : hits) {
        cands.push_back(FusedCandidate{h.id, 0.0, 0.0, h.score, h.score});
        cands.back().part_lex = h.score;
      }
    }
    if (hs != nullptr && rw != nullptr && !cands.empty()) {  // report the dense cosines too
      std::vector<uint64_t> ids;
      for (const auto& c : cands) ids.push_back(c.id);
      MOEEDB_ASSIGN_OR_RETURN(std::vector<Hit> dense, index_->Score(hs, rw, alpha, ids));
      std::unordered_map<uint64_t, const Hit*> by_id;
      for (const auto& h : dense) by_id[h.id] = &h;
      for (auto& c : cands)
        if (auto it = by_id.find(c.id); it != by_id.end()) c.hs = it->second->score_hs, c.rw = it->second->score_rw;
    }
    return ToSearchHits(cands);
  }

  if (hs == nullptr || rw == nullptr) return Status::InvalidArgument("hybrid search needs the query's vectors");
  const FusionOptions fo = FusionOf(o, default_alpha_);
  MOEEDB_RETURN_IF_ERROR(fo.Validate());
  if (o.k == 0) return std::vector<SearchHit>{};
  const size_t kk = std::max(o.k * static_cast<size_t>(std::max(1, index_->spec().oversample)), kMinHybridCandidates);

  // Candidates: each dense signal's best kk (both cosines come exact) and the
  // lexical index's best kk; then the missing scores of the union.
  std::unordered_map<uint64_t, size_t> at;  // id -> position in cands
  std::vector<bool> has_dense, has_lex;
  auto add = [&](uint64_t id) {
    auto [it, fresh] = at.emplace(id, cands.size());
    if (fresh) cands.push_back(FusedCandidate{id}), has_dense.push_back(false), has_lex.push_back(false);
    return it->second;
  };
  for (QueryMode m : {QueryMode::kHs, QueryMode::kRw}) {
    if ((m == QueryMode::kHs ? fo.w_hs : fo.w_rw) == 0) continue;
    SearchRequest req;
    req.hs = hs;
    req.rw = rw;
    req.k = kk;
    req.mode = m;
    req.exact = o.exact;
    req.filter = filter;
    MOEEDB_ASSIGN_OR_RETURN(std::vector<Hit> hits, index_->Search(req));
    for (const Hit& h : hits) {
      const size_t i = add(h.id);
      cands[i].hs = h.score_hs, cands[i].rw = h.score_rw, has_dense[i] = true;
    }
  }
  std::lock_guard lex(lexical_mu_);
  if (fo.w_lex > 0) {
    MOEEDB_ASSIGN_OR_RETURN(std::vector<LexicalHit> hits, lexical_->Search(o.query, kk, filter));
    for (const auto& h : hits) {
      const size_t i = add(h.id);
      cands[i].lex = h.score, has_lex[i] = true;
    }
  }
  std::vector<uint64_t> need_dense, need_lex;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (!has_dense[i]) need_dense.push_back(cands[i].id);
    if (!has_lex[i]) need_lex.push_back(cands[i].id);
  }
  if (!need_dense.empty()) {
    MOEEDB_ASSIGN_OR_RETURN(std::vector<Hit> dense, index_->Score(hs, rw, alpha, need_dense));
    for (const Hit& h : dense) cands[at[h.id]].hs = h.score_hs, cands[at[h.id]].rw = h.score_rw;
  }
  if (!need_lex.empty()) {
    MOEEDB_ASSIGN_OR_RETURN(std::vector<double> s, lexical_->Score(o.query, need_lex));
    for (size_t i = 0; i < need_lex.size(); ++i) cands[at[need_lex[i]]].lex = s[i];
  }
  Fuse(fo, &cands);
  if (cands.size() > o.k) cands.resize(o.k);
  return ToSearchHits(cands);
}

Result<std::vector<SearchHit>> VectorCollection::ToSearchHits(const std::vector<FusedCandidate>& hits) const {
  std::vector<uint64_t> ids;
  for (const auto& h : hits) ids.push_back(h.id);
  MOEEDB_ASSIGN_OR_RETURN(auto docs, store_->GetManyByInternal(name_, ids, false));
  std::vector<SearchHit> out;
  for (size_t i = 0; i < hits.size(); ++i) {
    if (!docs[i]) {
      // Another node's write removed it since this node's index last
      // followed the log: not an answer any more.
      if (store_->shared()) continue;
      return Status::Corruption("indexed document " + std::to_string(ids[i]) + " of " + name_ + " is not stored");
    }
    const auto& h = hits[i];
    SearchHit hit{docs[i]->id, static_cast<float>(h.fused), static_cast<float>(h.hs), static_cast<float>(h.rw),
                  static_cast<float>(h.lex)};
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
