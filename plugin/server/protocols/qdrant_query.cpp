// Qdrant's REST API (qdrant_router.h): query, search, their batches, read
// into a ClientQuery (database/client_query.h), which runs the searches,
// MMR and prefetch fusion below the router.
//
// Queries: a Document (embedded with the collection's setup), numbers (the
// client's own vector), {"nearest": either} with an optional {"mmr":
// {"diversity", "candidates_limit"}}; `using` names the vector searched (a
// declared name, "" the unnamed one; "hs" or "rw" one half of the model's;
// none: moeedb's fused cos_HS + alpha * cos_RW, alpha from params.alpha or
// the collection). Prefetches fuse by {"fusion": "rrf"} (Qdrant's
// 1 / (k + position), k = 2, or {"rrf": {"k"}}), {"fusion": "dbsf"} or a
// {"formula"} over $score[i].
#include <algorithm>

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
  cv.hs = it->second.hs;
  cv.rw = it->second.rw;
  // A Document searches the fused pair unless `using` names one half.
  const bool half = use == "hs" || use == "rw";
  if (!use.empty() && !half) MOEEDB_RETURN_IF_ERROR(c->schema().Find(use).status());
  return ToVectorQuery(*c, cv, half ? use : "");
}

// Qdrant's read consistency (`?consistency=` a replica count, majority, quorum
// or all): anything beyond one replica reads at the log's head in moeedb,
// which is at least as strong (every write acknowledged before the search).
Result<ReadConsistency> QdrantRouter::Consistency(const Call& call) {
  auto it = call.req.query.find("consistency");
  if (it == call.req.query.end() || it->second.empty()) return ReadConsistency::kAny;
  const std::string& v = it->second;
  if (v == "majority" || v == "quorum" || v == "all") return ReadConsistency::kHead;
  if (std::all_of(v.begin(), v.end(), ::isdigit) && v.size() < 10) return std::stoi(v) > 1 ? ReadConsistency::kHead : ReadConsistency::kAny;
  return Bad("'consistency' is a replica count, majority, quorum or all");
}

Result<ClientSearch> QdrantRouter::SearchOf(VectorCollection* c, QueryCache* cache, const json& j, const json& query,
                                            size_t offset) {
  ClientSearch s;
  MOEEDB_ASSIGN_OR_RETURN(s.spec, QuerySpec(j, offset));
  MOEEDB_ASSIGN_OR_RETURN(const std::string use, Using(j));
  if (!query.is_null()) { MOEEDB_ASSIGN_OR_RETURN(s.query, QueryVectors(c, cache, query, use)); }
  return s;
}

Result<json> QdrantRouter::RunQuery(VectorCollection* c, const json& j, QueryCache* cache, ReadConsistency consistency) {
  MOEEDB_RETURN_IF_ERROR(RefuseUnknown(j, {"query", "prefetch", "using", "filter", "limit", "offset", "with_payload", "with_vector",
                                           "score_threshold", "params", "lookup_from", "shard_key", "consistency", "timeout"},
                                       "a query"));
  if (j.contains("lookup_from") && !j["lookup_from"].is_null()) return Bad("lookup_from is not supported");
  ClientQuery q;
  MOEEDB_ASSIGN_OR_RETURN(q.offset, qdrant::Count(j, "offset", 0, kMaxSearchK));
  if (j.contains("score_threshold") && !j["score_threshold"].is_null()) {
    if (!j["score_threshold"].is_number()) return Bad("'score_threshold' must be a number");
    q.score_threshold = j["score_threshold"].get<double>();
  }
  MOEEDB_ASSIGN_OR_RETURN(PayloadSelector payload, PayloadSelector::Parse(j.value("with_payload", json(false)), false));
  const json query = j.contains("query") ? j["query"] : json(nullptr);
  const bool combines = query.is_object() && (query.contains("fusion") || query.contains("rrf") || query.contains("formula"));
  std::vector<json> prefetches;
  if (j.contains("prefetch") && !j["prefetch"].is_null()) {
    if (j["prefetch"].is_array()) for (const auto& p : j["prefetch"]) prefetches.push_back(p);
    else prefetches.push_back(j["prefetch"]);
  }
  if (prefetches.empty() && (query.is_null() || combines)) return Bad("give a 'query' (a vector or a Document)");
  MOEEDB_ASSIGN_OR_RETURN(q.search, SearchOf(c, cache, j, combines ? json(nullptr) : query, q.offset));
  if (prefetches.empty()) {
    if (query.is_object() && query.contains("mmr")) {
      const json& m = query["mmr"];
      if (!m.is_object()) return Bad("'mmr' must be an object {\"diversity\", \"candidates_limit\"}");
      MmrSpec mmr;
      if (m.contains("diversity") && !m["diversity"].is_null()) {
        if (!m["diversity"].is_number()) return Bad("'mmr.diversity' must be a number in [0, 1]");
        mmr.diversity = m["diversity"].get<double>();
      }
      MOEEDB_ASSIGN_OR_RETURN(mmr.candidates, qdrant::Count(m, "candidates_limit", 0, kMaxSearchK));
      q.mmr = mmr;
    }
  } else {
    for (const auto& p : prefetches) {
      if (!p.is_object()) return Bad("a prefetch must be an object");
      MOEEDB_RETURN_IF_ERROR(RefuseUnknown(p, {"query", "using", "limit", "filter", "params", "score_threshold"}, "a prefetch"));
      MOEEDB_ASSIGN_OR_RETURN(ClientSearch s, SearchOf(c, cache, p, p.contains("query") ? p["query"] : json(nullptr), 0));
      if (!p.contains("query")) return Bad("a prefetch needs a 'query' (a vector or a Document)");
      q.prefetches.push_back(std::move(s));
    }
    if (query.is_object() && (query.contains("fusion") || query.contains("rrf"))) {
      if (query.contains("rrf")) {
        const json& r = query["rrf"];
        if (!r.is_object() || (r.contains("k") && (!r["k"].is_number_integer() || r["k"].get<int64_t>() < 1)))
          return Bad("'rrf' is {\"k\": a positive integer}");
        q.combine = Combine::kRrf;
        q.rrf_k = static_cast<int>(std::min<int64_t>(r.value("k", int64_t{2}), kMaxRrfK));
      } else {
        auto kind = kListFusions.Parse(query["fusion"].is_string() ? query["fusion"].get<std::string>() : "");
        if (!kind.ok()) return Bad("'fusion' must be \"rrf\" or \"dbsf\"");
        q.combine = *kind == ListFusion::kRrf ? Combine::kRrf : Combine::kDbsf;
      }
    } else if (query.is_object() && query.contains("formula")) {
      q.combine = Combine::kFormula;
      MOEEDB_ASSIGN_OR_RETURN(q.formula, ParseFormula(query["formula"]));
    } else if (!query.is_null()) {
      q.combine = Combine::kRescore;  // the prefetched candidates ranked by this query's vector
    } else {
      return Bad("with prefetch, 'query' is a fusion, a formula, a vector or a Document");
    }
  }
  q.search.spec.consistency = consistency;
  for (auto& p : q.prefetches) p.spec.consistency = consistency;
  MOEEDB_ASSIGN_OR_RETURN(auto hits, RunClientQuery(&core_->db(), c, q));
  json points = json::array();
  for (const auto& h : hits) points.push_back(PointJson(c, h.id, h.score, h.metadata_json, payload, WithVector(j), true));
  return points;
}

Result<json> QdrantRouter::RunSearch(VectorCollection* c, const json& j, QueryCache* cache, ReadConsistency consistency) {
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
  return RunQuery(c, q, cache, consistency);
}

// One request (`batch`: {"searches": [...]}, answered in order), run as a
// query (answered {"points": [...]}) or as the older search (a bare list).
HttpResponse QdrantRouter::Answer(const Call& call, bool older_search, bool batch) {
  if (batch) {
    if (Status s = RefuseUnknown(call.body, {"searches", "consistency", "timeout"}, "a batch"); !s.ok()) return FromStatus(s);
    if (!call.body.contains("searches") || !call.body["searches"].is_array())
      return QdrantError(400, "Bad request: 'searches' must be an array");
  }
  auto consistency = Consistency(call);
  if (!consistency.ok()) return FromStatus(consistency.status());
  auto c = core_->OpenCollection(call.name());
  if (!c.ok()) return FromStatus(c.status());
  QueryCache cache;  // a Document embedded once per request
  json out = json::array();
  for (const auto& s : batch ? call.body["searches"] : json::array({call.body})) {
    if (!s.is_object()) return QdrantError(400, "Bad request: each search must be an object");
    auto points = older_search ? RunSearch(c->get(), s, &cache, *consistency) : RunQuery(c->get(), s, &cache, *consistency);
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
