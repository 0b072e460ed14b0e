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
#include <functional>
#include <map>
#include <memory>

#include "plugin/server/protocols/qdrant_router.h"

namespace moeedb::qdrant {

namespace {

// Adds "not these ids" to a spec's filter (the examples a query named by id).
Status LeaveOut(const std::vector<std::string>& ids, SearchSpec* spec) {
  if (ids.empty()) return Status::OK();
  return spec->NarrowFilter(json{{"$not", {{"$id", {{"$in", ids}}}}}}.dump());
}

}  // namespace

namespace {

// A query input that is a point id (an unsigned integer or a UUID string).
bool IsPointId(const json& x) { return x.is_number_unsigned() || x.is_string(); }

}  // namespace

Result<json> QdrantRouter::ResolveIds(VectorCollection* c, const json& request, const json& query,
                                      std::vector<std::string>* mentioned) {
  if (query.is_null()) return query;
  MOEEDB_ASSIGN_OR_RETURN(const std::string use, Using(request));
  // lookup_from: the examples' points are another collection's (or another vector's).
  VectorCollection* from = c;
  std::shared_ptr<VectorCollection> other;
  std::string vector = use;
  if (request.contains("lookup_from") && !request["lookup_from"].is_null()) {
    const json& l = request["lookup_from"];
    if (!l.is_object() || !l.contains("collection") || !l["collection"].is_string())
      return Bad("'lookup_from' must be {\"collection\": a name, \"vector\": a name}");
    if (l.contains("vector") && !l["vector"].is_null()) {
      if (!l["vector"].is_string()) return Bad("'lookup_from.vector' must be a vector's name");
      vector = l["vector"].get<std::string>();
    }
    if (l["collection"] != c->name()) {
      const std::string name = l["collection"].get<std::string>();
      auto opened = core_->OpenCollection(name);
      if (!opened.ok() && opened.status().code() == Status::Code::kNotFound)
        return Status::NotFound("Collection `" + name.substr(0, 80) + "` doesn't exist!");
      MOEEDB_ASSIGN_OR_RETURN(other, std::move(opened));
      from = other.get();
    }
  }
  std::function<Result<json>(const json&)> resolve = [&](const json& x) -> Result<json> {
    if (!IsPointId(x)) return x;
    MOEEDB_ASSIGN_OR_RETURN(std::string id, PointId(x));
    MOEEDB_ASSIGN_OR_RETURN(std::vector<float> v, StoredVector(*from, id, vector));
    if (from == c) mentioned->push_back(id);  // Qdrant leaves the examples out of the answer
    return json(v);
  };
  auto pairs = [&](const json& p) -> Result<json> {
    json out = json::array();
    for (const json& pair : p.is_array() ? p : json::array({p})) {
      if (!pair.is_object() || !pair.contains("positive") || !pair.contains("negative"))
        return Bad("a context pair is {\"positive\", \"negative\"}");
      MOEEDB_ASSIGN_OR_RETURN(json pos, resolve(pair["positive"]));
      MOEEDB_ASSIGN_OR_RETURN(json neg, resolve(pair["negative"]));
      out.push_back({{"positive", pos}, {"negative", neg}});
    }
    return out;
  };
  json q = query;
  if (IsPointId(q)) return resolve(q);
  if (!q.is_object()) return q;
  if (q.contains("nearest")) { MOEEDB_ASSIGN_OR_RETURN(q["nearest"], resolve(q["nearest"])); }
  if (q.contains("recommend") && q["recommend"].is_object())
    for (const char* side : {"positive", "negative"}) {
      json& list = q["recommend"][side];
      if (list.is_null()) continue;
      if (!list.is_array()) return Bad(std::string("'recommend.") + side + "' must be a list of point ids or vectors");
      for (json& x : list) { MOEEDB_ASSIGN_OR_RETURN(x, resolve(x)); }
    }
  if (q.contains("discover") && !q["discover"].is_object()) return Bad("'discover' must be {\"target\", \"context\"}");
  if (q.contains("recommend") && !q["recommend"].is_object())
    return Bad("'recommend' must be {\"positive\", \"negative\", \"strategy\"}");
  if (q.contains("discover")) {
    json& d = q["discover"];
    if (!d.contains("target") || d["target"].is_null()) return Bad("'discover' needs a 'target'");
    MOEEDB_ASSIGN_OR_RETURN(d["target"], resolve(d["target"]));
    if (!d.contains("context") || d["context"].is_null()) d["context"] = json::array();  // the target alone
    MOEEDB_ASSIGN_OR_RETURN(d["context"], pairs(d["context"]));
  }
  if (q.contains("context")) { MOEEDB_ASSIGN_OR_RETURN(q["context"], pairs(q["context"])); }
  if (q.contains("relevance_feedback")) {
    json& f = q["relevance_feedback"];
    if (!f.is_object() || !f.contains("target") || f["target"].is_null())
      return Bad("'relevance_feedback' must be {\"target\", \"feedback\", \"strategy\"}");
    MOEEDB_ASSIGN_OR_RETURN(f["target"], resolve(f["target"]));
    if (f.contains("feedback") && !f["feedback"].is_array())
      return Bad("'relevance_feedback.feedback' must be a list of {\"example\", \"score\"}");
    for (json& item : f.value("feedback", json::array())) {
      if (!item.is_object() || !item.contains("example") || !item.contains("score") || !item["score"].is_number())
        return Bad("a feedback item is {\"example\": a point id or vector, \"score\": a number}");
    }
    if (f.contains("feedback"))
      for (json& item : f["feedback"]) { MOEEDB_ASSIGN_OR_RETURN(item["example"], resolve(item["example"])); }
  }
  return q;
}

Result<ExampleQuery> QdrantRouter::ExamplesOf(const json& q, const std::string& use) {
  ExampleQuery e;
  e.use = use;
  auto vec = [](const json& x, const std::string& what) { return Floats(x, what); };
  auto pairs = [&](const json& list) -> Status {
    for (const json& p : list) {
      MOEEDB_ASSIGN_OR_RETURN(std::vector<float> pos, vec(p["positive"], "a context pair's positive"));
      MOEEDB_ASSIGN_OR_RETURN(std::vector<float> neg, vec(p["negative"], "a context pair's negative"));
      e.pairs.emplace_back(std::move(pos), std::move(neg));
    }
    return Status::OK();
  };
  if (q.contains("recommend")) {
    const json& r = q["recommend"];
    if (!r.is_object()) return Bad("'recommend' must be an object {\"positive\", \"negative\", \"strategy\"}");
    MOEEDB_RETURN_IF_ERROR(RefuseUnknown(r, {"positive", "negative", "strategy"}, "a recommend query"));
    const std::string strategy = r.contains("strategy") && r["strategy"].is_string() ? r["strategy"].get<std::string>() : "average_vector";
    if (strategy == "average_vector") e.kind = ExampleQuery::Kind::kAverage;
    else if (strategy == "best_score") e.kind = ExampleQuery::Kind::kBestScore;
    else if (strategy == "sum_scores") e.kind = ExampleQuery::Kind::kSumScores;
    else return Bad("'recommend.strategy' must be average_vector, best_score or sum_scores");
    for (const char* side : {"positive", "negative"})
      if (r.contains(side) && r[side].is_array())
        for (const json& x : r[side]) {
          MOEEDB_ASSIGN_OR_RETURN(std::vector<float> v, vec(x, std::string("a ") + side + " example"));
          (std::string(side) == "positive" ? e.positive : e.negative).push_back(std::move(v));
        }
    return e;
  }
  if (q.contains("discover")) {
    e.kind = ExampleQuery::Kind::kDiscover;
    MOEEDB_ASSIGN_OR_RETURN(e.target, vec(q["discover"]["target"], "the discover target"));
    MOEEDB_RETURN_IF_ERROR(pairs(q["discover"]["context"]));
    return e;
  }
  if (q.contains("relevance_feedback")) {
    const json& f = q["relevance_feedback"];
    MOEEDB_RETURN_IF_ERROR(RefuseUnknown(f, {"target", "feedback", "strategy"}, "a relevance feedback query"));
    e.kind = ExampleQuery::Kind::kFeedback;
    MOEEDB_ASSIGN_OR_RETURN(e.target, vec(f["target"], "the relevance feedback target"));
    for (const json& item : f.value("feedback", json::array())) {
      MOEEDB_ASSIGN_OR_RETURN(std::vector<float> v, vec(item["example"], "a feedback example"));
      e.feedback.emplace_back(std::move(v), item["score"].get<double>());
    }
    // The naive strategy is Qdrant's only one: {"naive": {"a", "b", "c"}}.
    const json strategy = f.value("strategy", json(nullptr));
    if (!strategy.is_object() || !strategy.contains("naive") || !strategy["naive"].is_object())
      return Bad("'relevance_feedback.strategy' must be {\"naive\": {\"a\", \"b\", \"c\"}}");
    for (const auto& [name, slot] : {std::pair<const char*, double*>{"a", &e.a}, {"b", &e.b}, {"c", &e.c}}) {
      const json& x = strategy["naive"].value(name, json(nullptr));
      if (!x.is_number()) return Bad(std::string("'relevance_feedback.strategy.naive.") + name + "' must be a number");
      *slot = x.get<double>();
    }
    return e;
  }
  e.kind = ExampleQuery::Kind::kContext;
  MOEEDB_RETURN_IF_ERROR(pairs(q["context"]));
  return e;
}

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

Status QdrantRouter::ParsePrefetches(VectorCollection* c, QueryCache* cache, const std::vector<json>& prefetches,
                                     const json& query, bool vectorless, ClientQuery* q) {
  for (const auto& p : prefetches) {
    if (!p.is_object()) return Bad("a prefetch must be an object");
    MOEEDB_RETURN_IF_ERROR(RefuseUnknown(
        p, {"query", "using", "limit", "filter", "params", "score_threshold", "lookup_from", "prefetch"}, "a prefetch"));
    std::vector<std::string> prefetch_mentioned;
    MOEEDB_ASSIGN_OR_RETURN(const json pq, ResolveIds(c, p, p.contains("query") ? p["query"] : json(nullptr), &prefetch_mentioned));
    std::vector<json> inner;
    if (p.contains("prefetch") && !p["prefetch"].is_null()) {
      if (p["prefetch"].is_array()) for (const auto& x : p["prefetch"]) inner.push_back(x);
      else inner.push_back(p["prefetch"]);
    }
    const bool none = pq.is_null() || (pq.is_object() && (pq.contains("order_by") || pq.contains("sample")));
    if (inner.empty() && none) {
      // No vector and no prefetch: the points its filter keeps, in id order,
      // by a payload field or at random, each scored 1.
      auto sub = std::make_shared<ClientQuery>();
      MOEEDB_ASSIGN_OR_RETURN(sub->search, SearchOf(c, cache, p, json(nullptr), 0));
      MOEEDB_RETURN_IF_ERROR(LeaveOut(prefetch_mentioned, &sub->search.spec));
      if (pq.is_object() && pq.contains("order_by")) {
        MOEEDB_ASSIGN_OR_RETURN(sub->order_by, OrderBySpecFromJson(pq["order_by"]));
      } else if (pq.is_object() && pq.contains("sample")) {
        sub->sample = true;
      } else {
        sub->scroll = true;
      }
      ClientSearch s;
      s.spec = sub->search.spec;
      s.inner = std::move(sub);
      q->prefetches.push_back(std::move(s));
      continue;
    }
    if (inner.empty()) {
      MOEEDB_ASSIGN_OR_RETURN(ClientSearch s, SearchOf(c, cache, p, pq, 0));
      MOEEDB_RETURN_IF_ERROR(LeaveOut(prefetch_mentioned, &s.spec));
      if (p.contains("score_threshold") && !p["score_threshold"].is_null()) {
        if (!p["score_threshold"].is_number()) return Bad("a prefetch's 'score_threshold' must be a number");
        s.score_threshold = p["score_threshold"].get<double>();
      }
      q->prefetches.push_back(std::move(s));
      continue;
    }
    // A prefetch of prefetches: a query of its own, whose answer (up to its limit) is this list.
    const bool combines = pq.is_object() && (pq.contains("fusion") || pq.contains("rrf") || pq.contains("formula"));
    auto sub = std::make_shared<ClientQuery>();
    MOEEDB_ASSIGN_OR_RETURN(sub->search, SearchOf(c, cache, p, combines || none ? json(nullptr) : pq, 0));
    MOEEDB_RETURN_IF_ERROR(LeaveOut(prefetch_mentioned, &sub->search.spec));
    if (pq.is_object() && pq.contains("order_by")) { MOEEDB_ASSIGN_OR_RETURN(sub->order_by, OrderBySpecFromJson(pq["order_by"])); }
    if (pq.is_object() && pq.contains("sample")) sub->sample = true;
    MOEEDB_RETURN_IF_ERROR(ParsePrefetches(c, cache, inner, pq, none, sub.get()));
    ClientSearch s;
    s.spec = sub->search.spec;
    s.query = sub->search.query;
    s.inner = std::move(sub);
    q->prefetches.push_back(std::move(s));
  }
  if (query.is_object() && (query.contains("fusion") || query.contains("rrf"))) {
    if (query.contains("rrf")) {
      const json& r = query["rrf"];
      if (!r.is_object() || (r.contains("k") && (!r["k"].is_number_integer() || r["k"].get<int64_t>() < 1)))
        return Bad("'rrf' is {\"k\": a positive integer}");
      q->combine = Combine::kRrf;
      q->rrf_k = static_cast<int>(std::min<int64_t>(r.value("k", int64_t{2}), kMaxRrfK));
    } else {
      auto kind = kListFusions.Parse(query["fusion"].is_string() ? query["fusion"].get<std::string>() : "");
      if (!kind.ok()) return Bad("'fusion' must be \"rrf\" or \"dbsf\"");
      q->combine = *kind == ListFusion::kRrf ? Combine::kRrf : Combine::kDbsf;
    }
  } else if (query.is_object() && query.contains("formula")) {
    q->combine = Combine::kFormula;
    MOEEDB_RETURN_IF_ERROR(RefuseUnknown(query, {"formula", "defaults"}, "a formula query"));
    MOEEDB_ASSIGN_OR_RETURN(q->formula, ParseFormula(query["formula"]));
    const json defaults = query.value("defaults", json::object());
    if (!defaults.is_object() && !defaults.is_null()) return Bad("'defaults' must be an object of variable: value");
    q->formula.SetDefaults(defaults.is_null() ? json::object() : defaults);
  } else if (vectorless && !query.is_null()) {
    // the prefetched points ordered or sampled (ClientQuery)
  } else if (!query.is_null()) {
    q->combine = Combine::kRescore;  // the prefetched candidates ranked by this query's vector
  } else {
    return Bad("with prefetch, 'query' is a fusion, a formula, a vector, a Document, order_by or sample");
  }
  return Status::OK();
}

Result<QdrantRouter::ParsedQuery> QdrantRouter::ParseQuery(VectorCollection* c, const json& j, QueryCache* cache,
                                                         ReadConsistency consistency) {
  MOEEDB_RETURN_IF_ERROR(RefuseUnknown(j, {"query", "prefetch", "using", "filter", "limit", "offset", "with_payload", "with_vector",
                                           "score_threshold", "params", "lookup_from", "shard_key", "consistency", "timeout"},
                                       "a query"));
  ParsedQuery parsed;
  ClientQuery& q = parsed.query;
  MOEEDB_ASSIGN_OR_RETURN(q.offset, qdrant::Count(j, "offset", 0, kMaxSearchK));
  if (j.contains("score_threshold") && !j["score_threshold"].is_null()) {
    if (!j["score_threshold"].is_number()) return Bad("'score_threshold' must be a number");
    q.score_threshold = j["score_threshold"].get<double>();
  }
  MOEEDB_ASSIGN_OR_RETURN(parsed.payload, PayloadSelector::Parse(j.value("with_payload", json(false)), false));
  MOEEDB_ASSIGN_OR_RETURN(parsed.vectors, VectorSelector::Parse(j.value("with_vector", json(false))));
  std::vector<std::string> mentioned;  // points given by id as examples: left out of the answer
  MOEEDB_ASSIGN_OR_RETURN(const json query, ResolveIds(c, j, j.contains("query") ? j["query"] : json(nullptr), &mentioned));
  const bool by_examples = query.is_object() && (query.contains("recommend") || query.contains("discover") ||
                                                 query.contains("context") || query.contains("relevance_feedback"));
  const bool combines = query.is_object() && (query.contains("fusion") || query.contains("rrf") || query.contains("formula"));
  // No vector: points in id order, by a payload field, or at random.
  const bool vectorless = query.is_null() || (query.is_object() && (query.contains("order_by") || query.contains("sample")));
  std::vector<json> prefetches;
  if (j.contains("prefetch") && !j["prefetch"].is_null()) {
    if (j["prefetch"].is_array()) for (const auto& p : j["prefetch"]) prefetches.push_back(p);
    else prefetches.push_back(j["prefetch"]);
  }
  if (prefetches.empty() && combines) return Bad("a fusion or a formula combines prefetches: give 'prefetch'");
  MOEEDB_ASSIGN_OR_RETURN(q.search, SearchOf(c, cache, j, combines || by_examples || vectorless ? json(nullptr) : query, q.offset));
  if (vectorless) {
    if (query.is_object() && query.contains("order_by")) {
      MOEEDB_ASSIGN_OR_RETURN(q.order_by, OrderBySpecFromJson(query["order_by"]));
    } else if (query.is_object() && query.contains("sample")) {
      if (query["sample"] != "random") return Bad("'sample' must be \"random\"");
      q.sample = true;
    } else {
      q.scroll = true;
    }
  }
  MOEEDB_RETURN_IF_ERROR(LeaveOut(mentioned, &q.search.spec));
  if (by_examples) {
    if (!prefetches.empty()) return Bad("recommend, discover and context queries take no prefetch in moeedb");
    MOEEDB_ASSIGN_OR_RETURN(const std::string use, Using(j));
    MOEEDB_ASSIGN_OR_RETURN(q.examples, ExamplesOf(query, use));
  } else if (prefetches.empty()) {
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
    MOEEDB_RETURN_IF_ERROR(ParsePrefetches(c, cache, prefetches, query, vectorless, &q));
  }
  q.search.spec.consistency = consistency;
  for (auto& p : q.prefetches) p.spec.consistency = consistency;
  return parsed;
}

Result<json> QdrantRouter::RunQuery(VectorCollection* c, const json& j, QueryCache* cache, ReadConsistency consistency) {
  MOEEDB_ASSIGN_OR_RETURN(ParsedQuery parsed, ParseQuery(c, j, cache, consistency));
  MOEEDB_ASSIGN_OR_RETURN(auto hits, RunClientQuery(&core_->db(), c, parsed.query));
  json points = json::array();
  for (const auto& h : hits) {
    points.push_back(PointJson(c, h.id, h.score, h.metadata_json, parsed.payload, parsed.vectors, true));
    if (!h.order_value.is_null()) points.back()["order_value"] = h.order_value;
  }
  return points;
}

HttpResponse QdrantRouter::QueryGroups(const Call& call) {
  json j = call.body;
  if (!j.is_object() || !j.contains("group_by") || !j["group_by"].is_string())
    return QdrantError(400, "Bad request: 'group_by' must be a payload key");
  GroupSpec groups;
  groups.key = j["group_by"].get<std::string>();
  auto size = qdrant::Count(j, "group_size", 3, kMaxSearchK);
  auto limit = qdrant::Count(j, "limit", 10, kMaxSearchK);
  if (!size.ok()) return FromStatus(size.status());
  if (!limit.ok()) return FromStatus(limit.status());
  groups.group_size = *size;
  groups.limit = *limit;
  // with_lookup: each group's id as a point id of another collection, read from it.
  json lookup = j.contains("with_lookup") ? j["with_lookup"] : json(nullptr);
  for (const char* k : {"group_by", "group_size", "limit", "with_lookup"}) j.erase(k);
  std::string lookup_name;
  json lookup_payload = true, lookup_vectors = false;
  if (lookup.is_string()) {
    lookup_name = lookup.get<std::string>();
  } else if (lookup.is_object() && lookup.contains("collection") && lookup["collection"].is_string()) {
    lookup_name = lookup["collection"].get<std::string>();
    if (lookup.contains("with_payload") && !lookup["with_payload"].is_null()) lookup_payload = lookup["with_payload"];
    if (lookup.contains("with_vectors") && !lookup["with_vectors"].is_null()) lookup_vectors = lookup["with_vectors"];
  } else if (!lookup.is_null()) {
    return QdrantError(400, "Bad request: 'with_lookup' is a collection name or {\"collection\", \"with_payload\", \"with_vectors\"}");
  }
  auto consistency = Consistency(call);
  if (!consistency.ok()) return FromStatus(consistency.status());
  auto c = core_->OpenCollection(call.name());
  if (!c.ok()) return FromStatus(c.status());
  QueryCache cache;
  auto parsed = ParseQuery(c->get(), j, &cache, *consistency);
  if (!parsed.ok()) return FromStatus(parsed.status());
  auto result = RunGroupedQuery(&core_->db(), c->get(), parsed->query, groups);
  if (!result.ok()) return FromStatus(result.status());
  std::shared_ptr<VectorCollection> from;
  PayloadSelector from_payload;
  VectorSelector from_vectors;
  if (!lookup_name.empty()) {
    auto l = core_->OpenCollection(lookup_name);
    if (!l.ok()) return FromStatus(l.status());
    from = *l;
    auto p = PayloadSelector::Parse(lookup_payload, true);
    auto v = VectorSelector::Parse(lookup_vectors);
    if (!p.ok()) return FromStatus(p.status());
    if (!v.ok()) return FromStatus(v.status());
    from_payload = *p;
    from_vectors = *v;
  }
  json out = json::array();
  for (const auto& g : *result) {
    json hits = json::array();
    for (const auto& h : g.hits)
      hits.push_back(PointJson(c->get(), h.id, h.score, h.metadata_json, parsed->payload, parsed->vectors, true));
    json group = {{"id", g.value}, {"hits", hits}};
    if (from) {
      group["lookup"] = nullptr;
      auto id = PointId(g.value);
      if (id.ok()) {
        auto d = from->Get(*id);
        if (!d.ok()) return FromStatus(d.status());
        if (*d) {
          json p = PointJson(from.get(), *id, 0, (**d).metadata_json, from_payload, from_vectors, false);
          p.erase("version");
          group["lookup"] = std::move(p);
        }
      }
    }
    out.push_back(std::move(group));
  }
  return Ok({{"groups", out}}, call.t0);
}

HttpResponse QdrantRouter::Matrix(const Call& call, bool pairs) {
  const json& j = call.body;
  if (Status s = RefuseUnknown(j, {"filter", "sample", "limit", "using", "shard_key", "consistency", "timeout"}, "a search matrix");
      !s.ok())
    return FromStatus(s);
  auto sample = qdrant::Count(j, "sample", 10, kMaxSearchK);
  auto limit = qdrant::Count(j, "limit", 3, kMaxSearchK);
  if (!sample.ok()) return FromStatus(sample.status());
  if (!limit.ok()) return FromStatus(limit.status());
  auto use = Using(j);
  if (!use.ok()) return FromStatus(use.status());
  SearchSpec filter;
  auto f = FilterOf(j);
  if (!f.ok()) return FromStatus(f.status());
  if (Status s = filter.SetFilter(*f); !s.ok()) return FromStatus(s);
  auto c = core_->OpenCollection(call.name());
  if (!c.ok()) return FromStatus(c.status());
  auto rows = DistanceMatrix(&core_->db(), c->get(), filter, *use, *sample, *limit);
  if (!rows.ok()) return FromStatus(rows.status());
  if (pairs) {
    json out = json::array();
    for (const auto& r : *rows)
      for (const auto& h : r.nearest) out.push_back({{"a", QdrantId(r.id)}, {"b", QdrantId(h.id)}, {"score", h.score}});
    return Ok({{"pairs", out}}, call.t0);
  }
  std::map<std::string, size_t> at;
  json ids = json::array();
  for (const auto& r : *rows) {
    at[r.id] = ids.size();
    ids.push_back(QdrantId(r.id));
  }
  json row = json::array(), col = json::array(), scores = json::array();
  for (size_t i = 0; i < rows->size(); ++i)
    for (const auto& h : (*rows)[i].nearest) {
      row.push_back(i);
      col.push_back(at[h.id]);
      scores.push_back(h.score);
    }
  return Ok({{"offsets_row", row}, {"offsets_col", col}, {"scores", scores}, {"ids", ids}}, call.t0);
}

HttpResponse QdrantRouter::MatrixPairs(const Call& call) { return Matrix(call, true); }
HttpResponse QdrantRouter::MatrixOffsets(const Call& call) { return Matrix(call, false); }


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
