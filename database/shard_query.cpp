#include "database/shard_query.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace moeedb {

using json = nlohmann::json;

namespace {

// Best first: descending `key`, ties by ascending internal id (how every
// index of one node orders its hits).
template <typename Key>
void SortBest(std::vector<const ShardCandidate*>* v, Key key) {
  std::sort(v->begin(), v->end(), [&](const ShardCandidate* a, const ShardCandidate* b) {
    const double ka = key(*a), kb = key(*b);
    return ka != kb ? ka > kb : a->id < b->id;
  });
}

}  // namespace

json LexicalStatsToJson(const LexicalStats& s) {
  json terms = json::object();
  for (const auto& [t, n] : s.term_docs) terms[t] = n;
  return json{{"docs", s.docs}, {"total_length", s.total_length}, {"term_docs", terms}};
}

Result<LexicalStats> LexicalStatsFromJson(const json& j) {
  LexicalStats s;
  try {
    s.docs = j.at("docs").get<uint64_t>();
    s.total_length = j.at("total_length").get<uint64_t>();
    for (auto it = j.at("term_docs").begin(); it != j.at("term_docs").end(); ++it)
      s.term_docs[it.key()] = it.value().get<uint64_t>();
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("lexical statistics: ") + e.what());
  }
  return s;
}

json ShardQueryToJson(const ShardQuery& q) {
  json j = {{"collection", q.collection}, {"store_id", q.store_id}, {"hs", q.hs},
            {"rw", q.rw},                 {"spec", SearchSpecToJson(q.spec)},
            {"candidates", q.candidates}, {"min_seq", q.min_seq}, {"max_staleness_ms", q.max_staleness_ms}};
  if (q.stats) j["stats"] = LexicalStatsToJson(*q.stats);
  if (q.shards > 0) j["shards"] = q.shards;
  return j;
}

Result<ShardQuery> ShardQueryFromJson(const json& j) {
  ShardQuery q;
  try {
    q.collection = j.at("collection").get<std::string>();
    q.store_id = j.at("store_id").get<uint32_t>();
    q.hs = j.at("hs").get<std::vector<float>>();
    q.rw = j.at("rw").get<std::vector<float>>();
    q.candidates = j.at("candidates").get<size_t>();
    q.min_seq = j.at("min_seq").get<uint64_t>();
    q.max_staleness_ms = j.value("max_staleness_ms", uint64_t{0});
    q.shards = j.value("shards", uint32_t{0});
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("shard query: ") + e.what());
  }
  if (!j.contains("spec")) return Status::InvalidArgument("shard query: no spec");
  MOEEDB_ASSIGN_OR_RETURN(q.spec, SearchSpecFromJson(j["spec"]));
  if (j.contains("stats")) { MOEEDB_ASSIGN_OR_RETURN(q.stats, LexicalStatsFromJson(j["stats"])); }
  return q;
}

json ShardAnswerToJson(const ShardAnswer& a) {
  // Columns rather than objects: a hybrid answer holds hundreds of candidates.
  json ids = json::array(), score = json::array(), hs = json::array(), rw = json::array(), lex = json::array(),
       lists = json::array();
  for (const auto& c : a.hits) {
    ids.push_back(c.id), score.push_back(c.score), hs.push_back(c.hs), rw.push_back(c.rw), lex.push_back(c.lex);
    lists.push_back(c.lists);
  }
  return json{{"shard", a.shard}, {"applied_seq", a.applied_seq}, {"ids", ids}, {"score", score},
              {"hs", hs},         {"rw", rw},                     {"lex", lex}, {"lists", lists}};
}

Result<ShardAnswer> ShardAnswerFromJson(const json& j) {
  ShardAnswer a;
  try {
    a.shard = j.at("shard").get<uint32_t>();
    a.applied_seq = j.at("applied_seq").get<uint64_t>();
    const auto& ids = j.at("ids");
    const auto &score = j.at("score"), &hs = j.at("hs"), &rw = j.at("rw"), &lex = j.at("lex"), &lists = j.at("lists");
    if (score.size() != ids.size() || hs.size() != ids.size() || rw.size() != ids.size() ||
        lex.size() != ids.size() || lists.size() != ids.size())
      return Status::InvalidArgument("shard answer: columns of different lengths");
    for (size_t i = 0; i < ids.size(); ++i)
      a.hits.push_back(ShardCandidate{ids[i].get<uint64_t>(), score[i].get<double>(), hs[i].get<double>(),
                                      rw[i].get<double>(), lex[i].get<double>(), lists[i].get<uint8_t>()});
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("shard answer: ") + e.what());
  }
  return a;
}

size_t HybridCandidates(size_t k, int oversample) {
  // At least this many, so the per-query normalisation sees a stable population.
  constexpr size_t kMinHybridCandidates = 100;
  return std::max(k * static_cast<size_t>(std::max(1, oversample)), kMinHybridCandidates);
}

std::vector<FusedCandidate> MergeRanked(const std::vector<ShardAnswer>& answers, QueryMode mode, float alpha, size_t k) {
  std::vector<const ShardCandidate*> all;
  for (const auto& a : answers)
    for (const auto& c : a.hits) all.push_back(&c);
  SortBest(&all, [](const ShardCandidate& c) { return c.score; });
  if (all.size() > k) all.resize(k);
  std::vector<FusedCandidate> out;
  for (const ShardCandidate* c : all) {
    FusedCandidate f{c->id, c->hs, c->rw, c->lex, c->score};
    if (mode == QueryMode::kFused) f.part_hs = c->hs, f.part_rw = alpha * c->rw;
    else if (mode == QueryMode::kHs) f.part_hs = c->score;
    else if (mode == QueryMode::kRw) f.part_rw = c->score;
    else f.part_lex = c->score;
    out.push_back(f);
  }
  return out;
}

std::vector<FusedCandidate> MergeHybrid(const std::vector<ShardAnswer>& answers, const FusionOptions& fusion,
                                        size_t candidates, size_t k) {
  std::unordered_map<uint64_t, const ShardCandidate*> chosen;
  const struct {
    uint8_t list;
    double weight;
    double ShardCandidate::*score;
  } signals[] = {{kInHs, fusion.w_hs, &ShardCandidate::hs},
                 {kInRw, fusion.w_rw, &ShardCandidate::rw},
                 {kInLex, fusion.w_lex, &ShardCandidate::lex}};
  for (const auto& s : signals) {
    if (s.weight == 0) continue;
    std::vector<const ShardCandidate*> list;
    for (const auto& a : answers)
      for (const auto& c : a.hits)
        if (c.lists & s.list) list.push_back(&c);
    SortBest(&list, [&](const ShardCandidate& c) { return c.*s.score; });
    if (list.size() > candidates) list.resize(candidates);
    for (const ShardCandidate* c : list) chosen.emplace(c->id, c);
  }
  std::vector<FusedCandidate> cands;
  for (const auto& [id, c] : chosen) cands.push_back(FusedCandidate{id, c->hs, c->rw, c->lex});
  // One order whatever the shards' (the normalisations sum over it).
  std::sort(cands.begin(), cands.end(), [](const FusedCandidate& a, const FusedCandidate& b) { return a.id < b.id; });
  Fuse(fusion, &cands);
  if (cands.size() > k) cands.resize(k);
  return cands;
}

}  // namespace moeedb
