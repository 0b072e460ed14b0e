// A subset of Qdrant's REST API under /qdrant (the JS client's `prefix`
// option), over the same collections as moeedb's own API. Each collection
// has two named dense vectors, "hs" and "rw" (Cosine; a collection made here
// takes the served setup's dims); points carry their text as a Document {"text", "model"} that moeedb
// embeds, and their payload as the document's metadata.
//
// Point ids: an unsigned integer is stored as its decimal string ("42"), a
// UUID as its lower-case hyphenated form; ids read back are numbers when
// they are all digits, strings otherwise. Answers are {"result", "status":
// "ok", "time"}; errors {"status": {"error": "..."}, "time"}.
//
// Queries: a Document with `using` "hs" or "rw" (or no `using`: moeedb's
// fused cos_HS + alpha * cos_RW); prefetches fused by {"fusion": "rrf"}
// (Qdrant's 1 / (k + position), k = 2, or {"rrf": {"k"}}), {"fusion":
// "dbsf"} (each list's scores mapped by mean +- 3 std, summed) or a
// {"formula"} over $score[i], where every candidate of the union is scored
// exactly on each prefetch's signal (Qdrant would need a default for a point
// one prefetch did not return).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <set>
#include <unordered_map>

#include "index/metadata_filter.h"
#include "plugin/server/protocols/qdrant_wire.h"
#include "plugin/server/protocols/router.h"

namespace moeedb {
namespace {

using namespace qdrant;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kVersion = "1.18.0";  // the Qdrant API version this subset follows

HttpResponse QdrantError(int status, const std::string& message, double seconds = 0) {
  return {status, "application/json", json{{"status", {{"error", message}}}, {"time", seconds}}.dump()};
}
HttpResponse Ok(const json& result, Clock::time_point t0) {
  return JsonResponse({{"result", result}, {"status", "ok"},
                       {"time", std::chrono::duration<double>(Clock::now() - t0).count()}});
}
HttpResponse FromStatus(const Status& s) {
  switch (s.code()) {
    case Status::Code::kInvalidArgument:
    case Status::Code::kNotSupported: return QdrantError(400, "Bad request: " + s.message());
    case Status::Code::kNotFound: return QdrantError(404, "Not found: " + s.message());
    case Status::Code::kResourceExhausted: return QdrantError(429, s.message());
    default: return QdrantError(500, "Service internal error: " + s.message());
  }
}

class QdrantRouter final : public ProtocolRouter {
 public:
  explicit QdrantRouter(ServerCore* core) : core_(core) {}
  bool Owns(const std::vector<std::string>& parts) const override { return !parts.empty() && parts[0] == "qdrant"; }
  HttpResponse Error(int status, const std::string& message) const override { return QdrantError(status, message); }
  HttpResponse Handle(const RouteRequest& req, std::string* route) override;

 private:
  // A scored candidate of a query: its id and both exact cosines.
  struct Candidate {
    std::string id;
    double hs = 0, rw = 0, score = 0;
    std::string metadata_json;
  };
  HttpResponse Collection(const std::string& m, const std::string& name, const std::string& body, Clock::time_point t0);
  HttpResponse Upsert(const std::string& name, const json& j, bool wait, Clock::time_point t0);
  HttpResponse Retrieve(const std::string& name, const json& ids, bool payload, bool vectors, Clock::time_point t0);
  HttpResponse Delete(const std::string& name, const json& j, bool wait, Clock::time_point t0);
  HttpResponse Scroll(const std::string& name, const json& j, bool count_only, Clock::time_point t0);
  HttpResponse Query(const std::string& name, const json& j, Clock::time_point t0);
  // The text of a Document {"text", "model"} (or {"nearest": Document}).
  Result<std::string> DocumentText(const json& d) const;
  // Query vectors by text, embedded once per request.
  using QueryCache = std::unordered_map<std::string, std::pair<std::vector<float>, std::vector<float>>>;
  // One dense search: `using` hs | rw | "" (fused), k hits, moeedb filter.
  Result<std::vector<Candidate>> Dense(VectorCollection* c, QueryCache* cache, const std::string& text,
                                       const std::string& use, size_t k, const std::string& filter);
  json PointJson(const std::string& id, double score, const std::string& metadata_json, bool payload, bool vectors,
                 VectorCollection* c, bool scored) const;

  ServerCore* core_;
};

HttpResponse QdrantRouter::Handle(const RouteRequest& req, std::string* route) {
  const auto t0 = Clock::now();
  const auto& p = req.parts;
  const std::string& m = req.method();
  auto body = [&]() -> std::optional<json> {
    if (req.body().empty()) return json::object();
    auto j = ParseJson(req.body());
    if (!j || !j->is_object()) return std::nullopt;
    return j;
  };
  const bool wait = req.query.count("wait") && (req.query.at("wait") == "true" || req.query.at("wait") == "1");
  if (p.size() == 1) {
    *route = "/qdrant";
    if (m != "GET") return QdrantError(405, "use GET");
    return JsonResponse({{"title", "qdrant - vector search engine (moeedb)"}, {"version", kVersion}, {"commit", nullptr}});
  }
  if (p[1] != "collections") {
    *route = "unknown";
    return QdrantError(404, "Not found: no route /qdrant/" + p[1].substr(0, 80));
  }
  if (p.size() == 2) {
    *route = "/qdrant/collections";
    if (m != "GET") return QdrantError(405, "use GET");
    auto all = core_->ListCollections();
    if (!all.ok()) return FromStatus(all.status());
    json list = json::array();
    for (const auto& c : *all) list.push_back({{"name", c.name}});
    return Ok({{"collections", list}}, t0);
  }
  const std::string& name = p[2];
  if (p.size() == 3) {
    *route = "/qdrant/collections/{name}";
    return Collection(m, name, req.body(), t0);
  }
  if (p.size() == 4 && p[3] == "exists") {
    *route = "/qdrant/collections/{name}/exists";
    if (m != "GET") return QdrantError(405, "use GET");
    return Ok({{"exists", core_->GetCollection(name).ok()}}, t0);
  }
  if (p[3] != "points") {
    *route = "unknown";
    return QdrantError(404, "Not found: no route /qdrant/collections/{name}/" + p[3].substr(0, 80));
  }
  auto j = body();
  if (p.size() == 4) {
    *route = "/qdrant/collections/{name}/points";
    if (!j) return QdrantError(400, "Bad request: the body must be a JSON object");
    if (m == "PUT") return Upsert(name, *j, wait, t0);
    if (m == "POST") {
      if (Status s = RefuseUnknown(*j, {"ids", "with_payload", "with_vector", "shard_key", "consistency"}, "a points request"); !s.ok())
        return FromStatus(s);
      if (!j->contains("ids") || !(*j)["ids"].is_array()) return QdrantError(400, "Bad request: 'ids' must be an array");
      return Retrieve(name, (*j)["ids"], j->value("with_payload", true), j->value("with_vector", false), t0);
    }
    return QdrantError(405, "use PUT (upsert) or POST (retrieve)");
  }
  if (p.size() == 5) {
    const std::string& what = p[4];
    *route = "/qdrant/collections/{name}/points/" + std::string(what == "delete" || what == "scroll" || what == "count" || what == "query" ? what : "{id}");
    if (what == "delete" || what == "scroll" || what == "count" || what == "query") {
      if (m != "POST") return QdrantError(405, "use POST");
      if (!j) return QdrantError(400, "Bad request: the body must be a JSON object");
      if (what == "delete") return Delete(name, *j, wait, t0);
      if (what == "query") return Query(name, *j, t0);
      return Scroll(name, *j, what == "count", t0);
    }
    if (m != "GET") return QdrantError(405, "use GET");
    json id = json(what);
    if (!what.empty() && std::all_of(what.begin(), what.end(), ::isdigit) && what.size() <= 19) id = std::stoull(what);
    HttpResponse r = Retrieve(name, json::array({id}), true, true, t0);
    if (r.status != 200) return r;
    json result = json::parse(r.body)["result"];
    if (result.empty()) return QdrantError(404, "Not found: no point with id " + what.substr(0, 80));
    return Ok(result[0], t0);
  }
  *route = "unknown";
  return QdrantError(404, "Not found: no such route");
}

HttpResponse QdrantRouter::Collection(const std::string& m, const std::string& name, const std::string& text,
                                      Clock::time_point t0) {
  const EmbeddingSetup& s = core_->setup();
  if (m == "GET") {
    auto rec = core_->GetCollection(name);
    if (!rec.ok()) return QdrantError(404, "Not found: Collection `" + name + "` doesn't exist!");
    auto c = core_->OpenCollection(name);
    if (!c.ok()) return FromStatus(c.status());
    const json vectors = {{"hs", {{"size", (*c)->dim_hs()}, {"distance", "Cosine"}}},
                          {"rw", {{"size", (*c)->dim_rw()}, {"distance", "Cosine"}}}};
    return Ok({{"status", "green"}, {"optimizer_status", "ok"}, {"points_count", rec->count},
               {"indexed_vectors_count", rec->count}, {"segments_count", 1},
               {"config", {{"params", {{"vectors", vectors}}}}}, {"payload_schema", json::object()}}, t0);
  }
  if (m == "DELETE") {
    if (!core_->GetCollection(name).ok()) return Ok(false, t0);
    Status st = core_->DropCollection(name);
    if (!st.ok()) return FromStatus(st);
    return Ok(true, t0);
  }
  if (m != "PUT") return QdrantError(405, "use PUT, GET or DELETE");
  auto parsed = text.empty() ? std::optional<json>(json::object()) : ParseJson(text);
  if (!parsed || !parsed->is_object()) return QdrantError(400, "Bad request: the body must be a JSON object");
  const json& j = *parsed;
  if (Status st = RefuseUnknown(j, {"vectors", "sparse_vectors", "hnsw_config", "optimizers_config", "wal_config",
                                    "quantization_config", "shard_number", "sharding_method", "replication_factor",
                                    "write_consistency_factor", "on_disk_payload", "strict_mode_config", "timeout"},
                                "a collection"); !st.ok())
    return FromStatus(st);
  if (j.contains("vectors") && !j["vectors"].is_null()) {
    const json& v = j["vectors"];
    const std::string want = "moeedb collections have two named vectors: hs (" + std::to_string(s.dim_hs()) +
                             ", Cosine) and rw (" + std::to_string(s.dim_rw()) + ", Cosine)";
    if (!v.is_object() || v.contains("size")) return QdrantError(400, "Bad request: " + want);
    for (auto it = v.begin(); it != v.end(); ++it) {
      const size_t dim = it.key() == "hs" ? s.dim_hs() : it.key() == "rw" ? s.dim_rw() : 0;
      if (dim == 0) return QdrantError(400, "Bad request: unknown vector '" + it.key().substr(0, 80) + "'; " + want);
      const json& p = it.value();
      if (!p.is_object() || !p.contains("size") || !p["size"].is_number_integer() || p["size"].get<int64_t>() != static_cast<int64_t>(dim))
        return QdrantError(400, "Bad request: vector '" + it.key() + "' must have size " + std::to_string(dim) + " (the served model's)");
      if (p.contains("distance") && p["distance"] != "Cosine")
        return QdrantError(400, "Bad request: vector '" + it.key() + "' must use distance Cosine");
    }
  }
  if (core_->GetCollection(name).ok())
    return QdrantError(409, "Wrong input: Collection `" + name + "` already exists!");
  CollectionOptions o = core_->NewCollectionOptions();
  o.lexical = LexicalSpec{true};
  auto c = core_->CreateCollection(name, o);
  if (!c.ok()) return FromStatus(c.status());
  return Ok(true, t0);
}

Result<std::string> QdrantRouter::DocumentText(const json& d) const {
  const json& doc = d.is_object() && d.contains("nearest") ? d["nearest"] : d;
  if (doc.is_array())
    return Bad("moeedb embeds points and queries itself: give the vector as a Document {\"text\", \"model\"}, not " +
               std::to_string(doc.size()) + " numbers");
  if (!doc.is_object() || !doc.contains("text") || !doc["text"].is_string())
    return Bad("expected a Document {\"text\": \"...\", \"model\": \"" + core_->options().served_model_name + "\"}");
  if (doc.contains("model") && !doc["model"].is_null() && doc["model"] != core_->options().served_model_name)
    return Bad("model " + doc["model"].dump().substr(0, 80) + " is not served here; this server embeds with '" +
               core_->options().served_model_name + "'");
  const std::string text = doc["text"].get<std::string>();
  const std::string problem = TextProblem(text);
  if (!problem.empty()) return Bad("the Document's text " + problem);
  return text;
}

HttpResponse QdrantRouter::Upsert(const std::string& name, const json& j, bool wait, Clock::time_point t0) {
  if (j.contains("batch")) return QdrantError(400, "Bad request: moeedb takes the 'points' form of an upsert");
  if (Status s = RefuseUnknown(j, {"points", "shard_key", "update_filter"}, "an upsert"); !s.ok()) return FromStatus(s);
  if (!j.contains("points") || !j["points"].is_array() || j["points"].empty())
    return QdrantError(400, "Bad request: 'points' must be a non-empty array");
  if (j["points"].size() > core_->options().max_documents)
    return QdrantError(400, "Bad request: too many points in one request (max " + std::to_string(core_->options().max_documents) + ")");
  std::vector<StoredDocument> docs;
  std::set<std::string> seen;
  for (size_t i = 0; i < j["points"].size(); ++i) {
    const json& pt = j["points"][i];
    const std::string where = "point " + std::to_string(i) + ": ";
    if (!pt.is_object()) return QdrantError(400, "Bad request: " + where + "must be an object");
    for (auto it = pt.begin(); it != pt.end(); ++it)
      if (it.key() != "id" && it.key() != "vector" && it.key() != "payload")
        return QdrantError(400, "Bad request: " + where + "unknown field '" + it.key().substr(0, 80) + "'");
    if (!pt.contains("id")) return QdrantError(400, "Bad request: " + where + "'id' is required");
    auto id = PointId(pt["id"]);
    if (!id.ok()) return QdrantError(400, "Bad request: " + where + id.status().message());
    if (!seen.insert(*id).second) return QdrantError(400, "Bad request: " + where + "id " + *id + " appears twice");
    if (!pt.contains("vector")) return QdrantError(400, "Bad request: " + where + "'vector' is required (a Document)");
    const json& v = pt["vector"];
    std::string text;
    if (v.is_object() && (v.contains("hs") || v.contains("rw")) && !v.contains("text")) {
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (it.key() != "hs" && it.key() != "rw") return QdrantError(400, "Bad request: " + where + "unknown vector '" + it.key().substr(0, 80) + "'");
        auto t = DocumentText(it.value());
        if (!t.ok()) return QdrantError(400, "Bad request: " + where + t.status().message());
        if (!text.empty() && *t != text)
          return QdrantError(400, "Bad request: " + where + "hs and rw come from one forward pass: give both the same text");
        text = *t;
      }
    } else {
      auto t = DocumentText(v);
      if (!t.ok()) return QdrantError(400, "Bad request: " + where + t.status().message());
      text = *t;
    }
    if (pt.contains("payload") && !pt["payload"].is_null() && !pt["payload"].is_object())
      return QdrantError(400, "Bad request: " + where + "'payload' must be an object");
    const json payload = pt.contains("payload") && pt["payload"].is_object() ? pt["payload"] : json::object();
    docs.push_back({*id, text, payload.dump(), {}, {}});
  }
  const size_t n = docs.size();
  auto w = core_->db().Upsert(name, std::move(docs), wait);  // embedded with the collection's setup
  if (!w.ok()) return FromStatus(w.status());
  core_->CountStored(n);
  return Ok({{"operation_id", w->seq}, {"status", wait ? "completed" : "acknowledged"}}, t0);
}

json QdrantRouter::PointJson(const std::string& id, double score, const std::string& metadata_json, bool payload,
                             bool vectors, VectorCollection* c, bool scored) const {
  json p = {{"id", QdrantId(id)}, {"version", 0}};
  if (scored) p["score"] = score;
  p["payload"] = payload ? json::parse(metadata_json, nullptr, false) : json(nullptr);
  if (vectors) {
    auto d = c->Get(id);
    if (d.ok() && d->has_value()) p["vector"] = {{"hs", (*d)->hs}, {"rw", (*d)->rw}};
  } else {
    p["vector"] = nullptr;
  }
  return p;
}

HttpResponse QdrantRouter::Retrieve(const std::string& name, const json& ids, bool payload, bool vectors, Clock::time_point t0) {
  auto c = core_->OpenCollection(name);
  if (!c.ok()) return FromStatus(c.status());
  json out = json::array();
  for (const auto& raw : ids) {
    auto id = PointId(raw);
    if (!id.ok()) return FromStatus(id.status());
    auto d = (*c)->Get(*id);
    if (!d.ok()) return FromStatus(d.status());
    if (!d->has_value()) continue;
    json p = {{"id", QdrantId(*id)}, {"payload", payload ? json::parse((*d)->metadata_json) : json(nullptr)}};
    p["vector"] = vectors ? json{{"hs", (*d)->hs}, {"rw", (*d)->rw}} : json(nullptr);
    out.push_back(std::move(p));
  }
  return Ok(out, t0);
}

HttpResponse QdrantRouter::Delete(const std::string& name, const json& j, bool wait, Clock::time_point t0) {
  if (Status s = RefuseUnknown(j, {"points", "filter", "shard_key"}, "a delete"); !s.ok()) return FromStatus(s);
  if (j.contains("points") == j.contains("filter")) return QdrantError(400, "Bad request: give either 'points' (ids) or 'filter'");
  auto c = core_->OpenCollection(name);
  if (!c.ok()) return FromStatus(c.status());
  std::vector<std::string> ids;
  if (j.contains("points")) {
    if (!j["points"].is_array()) return QdrantError(400, "Bad request: 'points' must be an array of ids");
    for (const auto& raw : j["points"]) {
      auto id = PointId(raw);
      if (!id.ok()) return FromStatus(id.status());
      ids.push_back(*id);
    }
  } else {
    auto filter = FilterOf(j);
    if (!filter.ok()) return FromStatus(filter.status());
    auto parsed = MetadataFilter::Parse(filter->empty() ? "{}" : *filter);
    if (!parsed.ok()) return FromStatus(parsed.status());
    std::string after;
    do {
      auto page = (*c)->List(after, 1000);
      if (!page.ok()) return FromStatus(page.status());
      for (const auto& d : page->documents) {
        const json meta = json::parse(d.metadata_json);
        if ((*parsed)->Matches(meta)) ids.push_back(d.id);
      }
      after = page->next_after;
    } while (!after.empty());
  }
  uint64_t seq = 0;
  if (!ids.empty()) {
    auto w = (*c)->Delete(ids, wait);
    if (!w.ok()) return FromStatus(w.status());
    seq = w->seq;
  }
  return Ok({{"operation_id", seq}, {"status", wait ? "completed" : "acknowledged"}}, t0);
}

HttpResponse QdrantRouter::Scroll(const std::string& name, const json& j, bool count_only, Clock::time_point t0) {
  if (Status s = count_only ? RefuseUnknown(j, {"filter", "exact", "shard_key"}, "a count")
                            : RefuseUnknown(j, {"filter", "limit", "offset", "with_payload", "with_vector", "order_by",
                                                "shard_key", "consistency"}, "a scroll");
      !s.ok())
    return FromStatus(s);
  if (j.contains("order_by") && !j["order_by"].is_null())
    return QdrantError(400, "Bad request: order_by is not supported; points come in id order (bytes of the id's decimal or UUID form)");
  auto limit = Count(j, "limit", 10, kMaxSearchK);
  if (!limit.ok()) return FromStatus(limit.status());
  if (!count_only && *limit == 0) return QdrantError(400, "Bad request: 'limit' must be at least 1");
  auto filter = FilterOf(j);
  if (!filter.ok()) return FromStatus(filter.status());
  std::shared_ptr<const MetadataFilter> parsed;
  if (!filter->empty()) {
    auto f = MetadataFilter::Parse(*filter);
    if (!f.ok()) return FromStatus(f.status());
    parsed = *f;
  }
  auto c = core_->OpenCollection(name);
  if (!c.ok()) return FromStatus(c.status());
  if (count_only && !parsed) return Ok({{"count", (*c)->size()}}, t0);
  // `offset` is the first point of the page: it, then the ids after it.
  std::string after;
  std::vector<StoredDocument> first;
  if (j.contains("offset") && !j["offset"].is_null()) {
    auto id = PointId(j["offset"]);
    if (!id.ok()) return FromStatus(id.status());
    auto got = (*c)->Get(*id);
    if (!got.ok()) return FromStatus(got.status());
    if (got->has_value()) first.push_back(std::move(**got));
    after = *id;
  }
  const bool payload = j.value("with_payload", true), vectors = j.value("with_vector", false);
  json points = json::array();
  size_t count = 0;
  json next = nullptr;
  auto take = [&](const StoredDocument& d) {  // false once the page is full
    if (parsed) {
      const json meta = json::parse(d.metadata_json);
      if (!parsed->Matches(meta)) return true;
    }
    if (count_only) return ++count, true;
    if (points.size() == *limit) {
      next = QdrantId(d.id);
      return false;
    }
    json p = {{"id", QdrantId(d.id)}, {"payload", payload ? json::parse(d.metadata_json) : json(nullptr)}};
    p["vector"] = nullptr;
    if (vectors) {
      auto full = (*c)->Get(d.id);
      if (full.ok() && full->has_value()) p["vector"] = {{"hs", (*full)->hs}, {"rw", (*full)->rw}};
    }
    points.push_back(std::move(p));
    return true;
  };
  bool more = true;
  for (const auto& d : first) more = take(d);
  while (more) {
    auto page = (*c)->List(after, 500);
    if (!page.ok()) return FromStatus(page.status());
    for (const auto& d : page->documents)
      if (!(more = take(d))) break;
    after = page->next_after;
    if (after.empty()) break;
  }
  if (count_only) return Ok({{"count", count}}, t0);
  return Ok({{"points", points}, {"next_page_offset", next}}, t0);
}

Result<std::vector<QdrantRouter::Candidate>> QdrantRouter::Dense(VectorCollection* c, QueryCache* cache,
                                                                 const std::string& text, const std::string& use, size_t k,
                                                                 const std::string& filter) {
  if (!use.empty() && use != "hs" && use != "rw") return Bad("vector '" + use + "' does not exist; the vectors are hs and rw");
  auto it = cache->find(text);
  if (it == cache->end()) {
    MOEEDB_ASSIGN_OR_RETURN(auto e, core_->EmbedQuery(c->name(), text));
    it = cache->emplace(text, std::make_pair(std::move(e[0].hs), std::move(e[0].rw))).first;
  }
  SearchSpec so;
  so.k = k;
  so.mode = use == "hs" ? QueryMode::kHs : use == "rw" ? QueryMode::kRw : QueryMode::kFused;
  if (!filter.empty()) { MOEEDB_ASSIGN_OR_RETURN(so.filter, MetadataFilter::Parse(filter)); }
  MOEEDB_ASSIGN_OR_RETURN(auto hits, c->Search(it->second.first.data(), it->second.second.data(), so));
  std::vector<Candidate> out;
  for (const auto& h : hits) out.push_back({h.id, h.score_hs, h.score_rw, h.score, h.metadata_json});
  return out;
}

HttpResponse QdrantRouter::Query(const std::string& name, const json& j, Clock::time_point t0) {
  if (Status s = RefuseUnknown(j, {"query", "prefetch", "using", "filter", "limit", "offset", "with_payload", "with_vector",
                                   "score_threshold", "params", "lookup_from", "shard_key", "consistency", "timeout"},
                               "a query");
      !s.ok())
    return FromStatus(s);
  if (j.contains("lookup_from") && !j["lookup_from"].is_null()) return QdrantError(400, "Bad request: lookup_from is not supported");
  auto limit = Count(j, "limit", 10, kMaxSearchK);
  auto offset = Count(j, "offset", 0, kMaxSearchK);
  if (!limit.ok()) return FromStatus(limit.status());
  if (!offset.ok()) return FromStatus(offset.status());
  auto filter = FilterOf(j);
  if (!filter.ok()) return FromStatus(filter.status());
  if (j.contains("score_threshold") && !j["score_threshold"].is_null() && !j["score_threshold"].is_number())
    return QdrantError(400, "Bad request: 'score_threshold' must be a number");
  const bool payload = j.contains("with_payload") && j["with_payload"].is_boolean() && j["with_payload"].get<bool>();
  const bool vectors = j.contains("with_vector") && j["with_vector"].is_boolean() && j["with_vector"].get<bool>();
  const std::string use = j.contains("using") && j["using"].is_string() ? j["using"].get<std::string>() : "";
  if (j.contains("using") && !j["using"].is_null() && !j["using"].is_string()) return QdrantError(400, "Bad request: 'using' must be a string");
  auto c = core_->OpenCollection(name);
  if (!c.ok()) return FromStatus(c.status());
  const size_t want = *limit + *offset;
  std::vector<Candidate> ranked;
  QueryCache cache;

  std::vector<json> prefetches;
  if (j.contains("prefetch") && !j["prefetch"].is_null()) {
    if (j["prefetch"].is_array()) for (const auto& p : j["prefetch"]) prefetches.push_back(p);
    else prefetches.push_back(j["prefetch"]);
  }
  const json query = j.contains("query") ? j["query"] : json(nullptr);
  if (prefetches.empty()) {
    if (query.is_null()) return QdrantError(400, "Bad request: give a 'query' (a Document)");
    auto text = DocumentText(query);
    if (!text.ok()) return FromStatus(text.status());
    auto hits = Dense(*c, &cache, *text, use, want, *filter);
    if (!hits.ok()) return FromStatus(hits.status());
    ranked = std::move(hits).value();
  } else {
    // Each prefetch: its own query and signal, the request's filter and its own.
    std::vector<std::vector<Candidate>> lists;
    std::vector<std::string> signals;
    for (const auto& p : prefetches) {
      if (!p.is_object()) return QdrantError(400, "Bad request: a prefetch must be an object");
      if (Status s = RefuseUnknown(p, {"query", "using", "limit", "filter", "params", "score_threshold"}, "a prefetch"); !s.ok())
        return FromStatus(s);
      auto text = DocumentText(p.contains("query") ? p["query"] : json(nullptr));
      if (!text.ok()) return FromStatus(text.status());
      const std::string pu = p.contains("using") && p["using"].is_string() ? p["using"].get<std::string>() : "";
      auto pl = Count(p, "limit", 10, kMaxSearchK);
      if (!pl.ok()) return FromStatus(pl.status());
      auto pf = FilterOf(p);
      if (!pf.ok()) return FromStatus(pf.status());
      std::string f = *filter;
      if (!pf->empty()) f = f.empty() ? *pf : json{{"$and", {json::parse(f), json::parse(*pf)}}}.dump();
      auto hits = Dense(*c, &cache, *text, pu, *pl, f);
      if (!hits.ok()) return FromStatus(hits.status());
      lists.push_back(std::move(hits).value());
      signals.push_back(pu);
    }
    std::unordered_map<std::string, size_t> at;
    std::vector<Candidate> all;
    for (const auto& l : lists)
      for (const auto& h : l)
        if (at.emplace(h.id, all.size()).second) all.push_back(h);
    for (auto& x : all) x.score = 0;
    const double alpha = (*c)->default_alpha();
    auto signal_score = [&](const Candidate& x, const std::string& s) {
      return s == "hs" ? x.hs : s == "rw" ? x.rw : x.hs + alpha * x.rw;
    };
    if (query.is_object() && (query.contains("fusion") || query.contains("rrf"))) {
      std::string fusion = query.contains("rrf") ? "rrf" : query["fusion"].is_string() ? query["fusion"].get<std::string>() : "";
      if (fusion == "rrf") {
        int64_t k = 2;  // Qdrant's default
        if (query.contains("rrf")) {
          const json& r = query["rrf"];
          if (!r.is_object() || (r.contains("k") && (!r["k"].is_number_integer() || r["k"].get<int64_t>() < 1)))
            return QdrantError(400, "Bad request: 'rrf' is {\"k\": a positive integer}");
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
        return QdrantError(400, "Bad request: 'fusion' must be \"rrf\" or \"dbsf\"");
      }
    } else if (query.is_object() && query.contains("formula")) {
      for (auto& x : all) {
        std::vector<double> scores;
        for (const auto& s : signals) scores.push_back(signal_score(x, s));
        auto v = Evaluate(query["formula"], scores, 0);
        if (!v.ok()) return FromStatus(v.status());
        x.score = *v;
      }
    } else if (!query.is_null()) {
      // A Document: the prefetched candidates ranked by this query on `using`.
      auto text = DocumentText(query);
      if (!text.ok()) return FromStatus(text.status());
      auto exact = Dense(*c, &cache, *text, use, std::max<size_t>(1, (*c)->size()), *filter);
      if (!exact.ok()) return FromStatus(exact.status());
      std::vector<Candidate> rescored;
      for (const auto& h : *exact)
        if (at.count(h.id)) rescored.push_back(h);
      all = std::move(rescored);
    } else {
      return QdrantError(400, "Bad request: with prefetch, 'query' is a fusion, a formula or a Document");
    }
    std::stable_sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
    ranked = std::move(all);
  }
  const bool threshold = j.contains("score_threshold") && j["score_threshold"].is_number();
  const double min_score = threshold ? j["score_threshold"].get<double>() : 0.0;
  json points = json::array();
  for (size_t i = *offset; i < ranked.size() && points.size() < *limit; ++i) {
    if (threshold && ranked[i].score < min_score) break;
    points.push_back(PointJson(ranked[i].id, ranked[i].score, ranked[i].metadata_json, payload, vectors, *c, true));
  }
  return Ok({{"points", points}}, t0);
}

}  // namespace

std::unique_ptr<ProtocolRouter> NewQdrantRouter(ServerCore* core) { return std::make_unique<QdrantRouter>(core); }

}  // namespace moeedb
