// Qdrant's REST API (qdrant_router.h): query, search, their batches.
//
// Queries: a Document (embedded with the collection's setup), numbers (the
// client's own vector), {"nearest": either} with an optional {"mmr":
// {"diversity", "candidates_limit"}}; `using` "hs" or "rw" searches one
// half (no `using`: moeedb's fused cos_HS + alpha * cos_RW, alpha from
// params.alpha or the collection). Prefetches fuse by {"fusion": "rrf"}
// (Qdrant's 1 / (k + position), k = 2, or {"rrf": {"k"}}), {"fusion":
// "dbsf"} (each list's scores mapped by mean +- 3 std, summed) or a
// {"formula"} over $score[i], where every candidate of the union is scored
// exactly on each prefetch's signal (Qdrant would need a default for a point
// one prefetch did not return).
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "index/metadata_filter.h"
#include "index/mmr.h"
#include "plugin/server/protocols/qdrant_router.h"

namespace moeedb::qdrant {

namespace {

bool WithVector(const json& j) {
  return j.contains("with_vector") && ((j["with_vector"].is_boolean() && j["with_vector"].get<bool>()) || j["with_vector"].is_array());
}

}  // namespace

Result<VectorQuery> QdrantRouter::QueryVectors(VectorCollection* c, QueryCache* cache, const json& q, const std::string& use) {
  const json& v = q.is_object() && q.contains("nearest") ? q["nearest"] : q;
  ClientVector cv;
  if (v.is_array()) {
    MOEEDB_ASSIGN_OR_RETURN(cv.unnamed, Floats(v, "the query vector"));
    return ToVectorQuery(*c, cv, use);
  }
  MOEEDB_ASSIGN_OR_RETURN(std::string text, DocumentText(v));
  auto it = cache->find(text);
  if (it == cache->end()) {
    MOEEDB_ASSIGN_OR_RETURN(auto e, core_->EmbedQuery(c->name(), text));
    it = cache->emplace(text, std::move(e[0])).first;
  }
  VectorQuery out;
  out.hs = it->second.hs;
  out.rw = it->second.rw;
  out.mode = use == "hs" ? QueryMode::kHs : use == "rw" ? QueryMode::kRw : QueryMode::kFused;
  return out;
}

Result<std::vector<QdrantRouter::Candidate>> QdrantRouter::Dense(VectorCollection* c, const VectorQuery& q,
                                                                 const SearchSpec& spec) {
  MOEEDB_ASSIGN_OR_RETURN(auto hits, core_->db().SearchVectors(c->name(), q, spec));
  std::vector<Candidate> out;
  for (const auto& h : hits) out.push_back({h.id, h.score_hs, h.score_rw, h.score, ClientScore(*c, q, h.score), h.metadata_json});
  return out;
}

Result<std::vector<QdrantRouter::Candidate>> QdrantRouter::Mmr(VectorCollection* c, const VectorQuery& q, const json& mmr,
                                                               const SearchSpec& spec) {
  const size_t want = spec.k;
  if (!mmr.is_object()) return Bad("'mmr' must be an object {\"diversity\", \"candidates_limit\"}");
  double diversity = 0.5;  // Qdrant's default
  if (mmr.contains("diversity") && !mmr["diversity"].is_null()) {
    if (!mmr["diversity"].is_number() || mmr["diversity"].get<double>() < 0 || mmr["diversity"].get<double>() > 1)
      return Bad("'mmr.diversity' must be a number in [0, 1]");
    diversity = mmr["diversity"].get<double>();
  }
  MOEEDB_ASSIGN_OR_RETURN(size_t pool, qdrant::Count(mmr, "candidates_limit", want, kMaxSearchK));
  SearchSpec pooled = spec;
  pooled.k = std::max(pool, want);
  MOEEDB_ASSIGN_OR_RETURN(auto candidates, Dense(c, q, pooled));
  std::vector<ComparablePoint> points;
  std::vector<double> relevance;
  for (const auto& x : candidates) {
    MOEEDB_ASSIGN_OR_RETURN(auto d, c->Get(x.id));
    points.push_back(d ? Comparable(*c, *d) : ComparablePoint{});
    relevance.push_back(HigherIsBetter(*c) ? x.shown : -x.shown);
  }
  const float a = spec.alpha.value_or(c->default_alpha());
  const auto order = SelectMmr(
      relevance, [&](size_t i, size_t j) { return PointSimilarity(*c, points[i], points[j], a); }, want, diversity);
  std::vector<Candidate> out;
  for (size_t i : order) out.push_back(candidates[i]);
  return out;
}

Result<json> QdrantRouter::RunQuery(VectorCollection* c, const json& j, QueryCache* cache) {
  MOEEDB_RETURN_IF_ERROR(RefuseUnknown(j, {"query", "prefetch", "using", "filter", "limit", "offset", "with_payload", "with_vector",
                                           "score_threshold", "params", "lookup_from", "shard_key", "consistency", "timeout"},
                                       "a query"));
  if (j.contains("lookup_from") && !j["lookup_from"].is_null()) return Bad("lookup_from is not supported");
  MOEEDB_ASSIGN_OR_RETURN(size_t offset, qdrant::Count(j, "offset", 0, kMaxSearchK));
  MOEEDB_ASSIGN_OR_RETURN(SearchSpec spec, QuerySpec(j, offset));
  const size_t limit = spec.k - std::min(spec.k, offset);
  if (j.contains("score_threshold") && !j["score_threshold"].is_null() && !j["score_threshold"].is_number())
    return Bad("'score_threshold' must be a number");
  MOEEDB_ASSIGN_OR_RETURN(PayloadSelector payload, PayloadSelector::Parse(j.value("with_payload", json(false)), false));
  const std::string use = spec.mode == QueryMode::kHs ? "hs" : spec.mode == QueryMode::kRw ? "rw" : "";
  std::vector<Candidate> ranked;

  std::vector<json> prefetches;
  const json query = j.contains("query") ? j["query"] : json(nullptr);
  // A fusion or a formula scores the prefetched candidates itself (higher is
  // better); a vector or Document query reports its own scores (distances in
  // a Euclid collection).
  const bool fused = query.is_object() && (query.contains("fusion") || query.contains("rrf") || query.contains("formula"));
  if (j.contains("prefetch") && !j["prefetch"].is_null()) {
    if (j["prefetch"].is_array()) for (const auto& p : j["prefetch"]) prefetches.push_back(p);
    else prefetches.push_back(j["prefetch"]);
  }
  if (prefetches.empty()) {
    if (query.is_null()) return Bad("give a 'query' (a vector or a Document)");
    MOEEDB_ASSIGN_OR_RETURN(VectorQuery q, QueryVectors(c, cache, query, use));
    if (query.is_object() && query.contains("mmr")) {
      MOEEDB_ASSIGN_OR_RETURN(ranked, Mmr(c, q, query["mmr"], spec));
    } else {
      MOEEDB_ASSIGN_OR_RETURN(ranked, Dense(c, q, spec));
    }
  } else {
    // Each prefetch: its own query and signal, the request's filter and its own.
    std::vector<std::vector<Candidate>> lists;
    std::vector<std::string> signals;
    for (const auto& p : prefetches) {
      if (!p.is_object()) return Bad("a prefetch must be an object");
      MOEEDB_RETURN_IF_ERROR(RefuseUnknown(p, {"query", "using", "limit", "filter", "params", "score_threshold"}, "a prefetch"));
      MOEEDB_ASSIGN_OR_RETURN(SearchSpec ps, QuerySpec(p));
      const std::string pu = ps.mode == QueryMode::kHs ? "hs" : ps.mode == QueryMode::kRw ? "rw" : "";
      MOEEDB_ASSIGN_OR_RETURN(VectorQuery q, QueryVectors(c, cache, p.contains("query") ? p["query"] : json(nullptr), pu));
      // The request's filter and the prefetch's own, both.
      if (!spec.filter_json.empty())
        MOEEDB_RETURN_IF_ERROR(ps.SetFilter(ps.filter_json.empty() ? spec.filter_json
                                            : json{{"$and", {json::parse(spec.filter_json), json::parse(ps.filter_json)}}}.dump()));
      if (!ps.alpha) ps.alpha = spec.alpha;
      ps.exact = ps.exact || spec.exact;
      MOEEDB_ASSIGN_OR_RETURN(auto hits, Dense(c, q, ps));
      lists.push_back(std::move(hits));
      signals.push_back(pu);
    }
    std::unordered_map<std::string, size_t> at;
    std::vector<Candidate> all;
    for (const auto& l : lists)
      for (const auto& h : l)
        if (at.emplace(h.id, all.size()).second) all.push_back(h);
    for (auto& x : all) x.score = 0;
    const double a = spec.alpha.value_or(c->default_alpha());
    auto signal_score = [&](const Candidate& x, const std::string& s) { return s == "hs" ? x.hs : s == "rw" ? x.rw : x.hs + a * x.rw; };
    if (query.is_object() && (query.contains("fusion") || query.contains("rrf"))) {
      const std::string fusion = query.contains("rrf") ? "rrf" : query["fusion"].is_string() ? query["fusion"].get<std::string>() : "";
      if (fusion == "rrf") {
        int64_t k = 2;  // Qdrant's default
        if (query.contains("rrf")) {
          const json& r = query["rrf"];
          if (!r.is_object() || (r.contains("k") && (!r["k"].is_number_integer() || r["k"].get<int64_t>() < 1)))
            return Bad("'rrf' is {\"k\": a positive integer}");
          k = r.value("k", int64_t{2});
        }
        for (const auto& l : lists)
          for (size_t pos = 0; pos < l.size(); ++pos) all[at[l[pos].id]].score += 1.0 / (static_cast<double>(pos) + k);
      } else if (fusion == "dbsf") {
        for (const auto& l : lists) {
          if (l.empty()) continue;
          double mean = 0, var = 0;
          for (const auto& h : l) mean += h.score;
          mean /= l.size();
          for (const auto& h : l) var += (h.score - mean) * (h.score - mean);
          const double sd = std::sqrt(var / l.size());
          const double lo = mean - 3 * sd, hi = mean + 3 * sd;
          for (const auto& h : l) all[at[h.id]].score += hi > lo ? (h.score - lo) / (hi - lo) : 0.5;
        }
      } else {
        return Bad("'fusion' must be \"rrf\" or \"dbsf\"");
      }
    } else if (query.is_object() && query.contains("formula")) {
      for (auto& x : all) {
        std::vector<double> scores;
        for (const auto& s : signals) scores.push_back(signal_score(x, s));
        MOEEDB_ASSIGN_OR_RETURN(x.score, Evaluate(query["formula"], scores, 0));
      }
    } else if (!query.is_null()) {
      // A vector or Document: the prefetched candidates ranked by this query on `using`.
      MOEEDB_ASSIGN_OR_RETURN(VectorQuery q, QueryVectors(c, cache, query, use));
      // Over kMaxSearchK documents, a candidate outside the exact top
      // kMaxSearchK ranks below every kept one, past any page asked for
      // unless fewer candidates than the page fall inside it.
      SearchSpec every = spec;
      every.k = std::max<size_t>(1, std::min(c->size(), kMaxSearchK));
      every.exact = true;
      MOEEDB_ASSIGN_OR_RETURN(auto exact_hits, Dense(c, q, every));
      std::vector<Candidate> rescored;
      for (const auto& h : exact_hits)
        if (at.count(h.id)) rescored.push_back(h);
      all = std::move(rescored);
    } else {
      return Bad("with prefetch, 'query' is a fusion, a formula, a vector or a Document");
    }
    if (fused) for (auto& x : all) x.shown = x.score;
    std::stable_sort(all.begin(), all.end(), [](const Candidate& x, const Candidate& y) { return x.score > y.score; });
    ranked = std::move(all);
  }
  const bool threshold = j.contains("score_threshold") && j["score_threshold"].is_number();
  const double bound = threshold ? j["score_threshold"].get<double>() : 0.0;
  const bool higher = HigherIsBetter(*c) || fused;
  json points = json::array();
  for (size_t i = offset; i < ranked.size() && points.size() < limit; ++i) {
    if (threshold && (higher ? ranked[i].shown < bound : ranked[i].shown > bound)) continue;
    points.push_back(PointJson(c, ranked[i].id, ranked[i].shown, ranked[i].metadata_json, payload, WithVector(j), true));
  }
  return points;
}

Result<json> QdrantRouter::RunSearch(VectorCollection* c, const json& j, QueryCache* cache) {
  MOEEDB_RETURN_IF_ERROR(RefuseUnknown(j, {"vector", "filter", "limit", "offset", "with_payload", "with_vector", "score_threshold",
                                           "params", "shard_key", "consistency", "timeout"},
                                       "a search"));
  if (!j.contains("vector")) return Bad("'vector' is required");
  // {"vector": [..]} or {"vector": {"name": "hs", "vector": [..]}} as a query.
  json q = j;
  q.erase("vector");
  const json& v = j["vector"];
  if (v.is_object() && v.contains("name") && v.contains("vector")) {
    q["query"] = v["vector"];
    q["using"] = v["name"];
  } else {
    q["query"] = v;
  }
  if (!q.contains("with_payload")) q["with_payload"] = false;
  return RunQuery(c, q, cache);
}

// One request (`batch`: {"searches": [...]}, answered in order), run as a
// query (answered {"points": [...]}) or as the older search (a bare list).
HttpResponse QdrantRouter::Answer(const Call& call, bool older_search, bool batch) {
  if (batch) {
    if (Status s = RefuseUnknown(call.body, {"searches", "consistency", "timeout"}, "a batch"); !s.ok()) return FromStatus(s);
    if (!call.body.contains("searches") || !call.body["searches"].is_array())
      return QdrantError(400, "Bad request: 'searches' must be an array");
  }
  auto c = core_->OpenCollection(call.name());
  if (!c.ok()) return FromStatus(c.status());
  QueryCache cache;  // a Document embedded once per request
  json out = json::array();
  for (const auto& s : batch ? call.body["searches"] : json::array({call.body})) {
    if (!s.is_object()) return QdrantError(400, "Bad request: each search must be an object");
    auto points = older_search ? RunSearch(*c, s, &cache) : RunQuery(*c, s, &cache);
    if (!points.ok()) return FromStatus(points.status());
    out.push_back(older_search ? *points : json{{"points", *points}});
  }
  return Ok(batch ? out : out[0], call.t0);
}

HttpResponse QdrantRouter::Query(const Call& call) { return Answer(call, false, false); }
HttpResponse QdrantRouter::Search(const Call& call) { return Answer(call, true, false); }
HttpResponse QdrantRouter::QueryBatch(const Call& call) { return Answer(call, false, true); }
HttpResponse QdrantRouter::SearchBatch(const Call& call) { return Answer(call, true, true); }

}  // namespace moeedb::qdrant
