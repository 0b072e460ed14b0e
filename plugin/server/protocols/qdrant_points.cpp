// Qdrant's REST API (qdrant_router.h): the point routes, and the payload
// routes (set, overwrite, delete keys, clear) over database/document_update.h.
#include <map>
#include <set>

#include "database/document_scan.h"
#include "database/document_update.h"
#include "database/payload_facet.h"
#include "database/payload_order.h"
#include "plugin/server/protocols/qdrant_router.h"

namespace moeedb::qdrant {

namespace {

// A write's answer: its change-log entry as the operation id; acknowledged,
// or completed when the request waited for a synced write.
HttpResponse Updated(const Result<WriteResult>& w, const Call& call) {
  if (!w.ok()) return FromStatus(w.status());
  return Ok({{"operation_id", w->seq}, {"status", call.wait ? "completed" : "acknowledged"}}, call.t0);
}

// A request's "update_filter" as a metadata filter.
Result<std::shared_ptr<const MetadataFilter>> UpdateFilter(const json& j) {
  MOEEDB_ASSIGN_OR_RETURN(json f, TranslateFilter(j["update_filter"], 0));
  return MetadataFilter::Parse(f.empty() ? "{}" : f.dump());
}

}  // namespace

Result<std::string> QdrantRouter::DocumentText(const json& d) const {
  const json& doc = d.is_object() && d.contains("nearest") ? d["nearest"] : d;
  if (!doc.is_object() || !doc.contains("text") || !doc["text"].is_string())
    return Bad("expected a Document {\"text\": \"...\", \"model\": \"" + core_->options().served_model_name +
               "\"} or a vector of numbers");
  if (doc.contains("model") && !doc["model"].is_null() && doc["model"] != core_->options().served_model_name)
    return Bad("model " + doc["model"].dump().substr(0, 80) + " is not served here; this server embeds with '" +
               core_->options().served_model_name + "'");
  const std::string text = doc["text"].get<std::string>();
  const std::string problem = TextProblem(text);
  if (!problem.empty()) return Bad("the Document's text " + problem);
  return text;
}

Result<PointVector> QdrantRouter::PointVectorOf(const json& v) const {
  PointVector pv;
  if (v.is_array()) {
    MOEEDB_ASSIGN_OR_RETURN(pv.numbers.unnamed, Floats(v, "the vector"));
    return pv;
  }
  if (v.is_object() && !(v.contains("text") && v["text"].is_string())) {
    // Named vectors: numbers under any declared name ("" the unnamed one),
    // or the model's hs and rw as numbers or one Document.
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string& name = it.key();
      if (it.value().is_array()) {
        MOEEDB_ASSIGN_OR_RETURN(std::vector<float> f,
                                Floats(it.value(), name.empty() ? "the vector" : "vector '" + name.substr(0, 80) + "'"));
        if (name == "hs") pv.numbers.hs = std::move(f);
        else if (name == "rw") pv.numbers.rw = std::move(f);
        else if (name.empty()) pv.numbers.unnamed = std::move(f);
        else pv.numbers.named[name] = std::move(f);
        continue;
      }
      if (name != "hs" && name != "rw")
        return Bad("vector '" + name.substr(0, 80) + "' must be a list of numbers (Documents are embedded into hs and rw)");
      MOEEDB_ASSIGN_OR_RETURN(std::string t, DocumentText(it.value()));
      if (!pv.text.empty() && t != pv.text) return Bad("hs and rw come from one forward pass: give both the same text");
      pv.text = t;
    }
    if (!pv.text.empty() && !pv.numbers.empty()) return Bad("give hs and rw both as numbers or both as the same Document");
    return pv;
  }
  MOEEDB_ASSIGN_OR_RETURN(pv.text, DocumentText(v));
  return pv;
}

json QdrantRouter::VectorJson(const VectorCollection& c, const StoredDocument& d, const VectorSelector& which) const {
  // Cosine vectors at unit length: Qdrant normalises them when they are stored.
  if (!which.any()) return nullptr;
  ClientVector v = FromStoredVectors(c, d, /*unit_length=*/true);
  const VectorSchema& s = c.schema();
  if (s.kind == VectorKind::kModel) {
    json out = json::object();
    if (which.Keeps("hs")) out["hs"] = v.hs;
    if (which.Keeps("rw")) out["rw"] = v.rw;
    return out;
  }
  // The unnamed vector alone is a list, declared by name ("") or not.
  if (!s.named || (s.rest.empty() && s.name.empty()))
    return v.unnamed.empty() || !which.Keeps("") ? json(nullptr) : json(v.unnamed);
  json out = json::object();  // only the vectors the point has, of those asked for
  if (!v.unnamed.empty() && which.Keeps("")) out[""] = v.unnamed;
  for (const auto& [name, x] : v.named)
    if (which.Keeps(name)) out[name] = x;
  return out;
}

json QdrantRouter::PointJson(VectorCollection* c, const std::string& id, double score, const std::string& metadata_json,
                             const PayloadSelector& payload, const VectorSelector& vectors, bool scored) const {
  json p = {{"id", QdrantId(id)}, {"version", 0}};
  if (scored) p["score"] = score;
  p["payload"] = payload.Apply(json::parse(metadata_json, nullptr, false));
  p["vector"] = nullptr;
  if (vectors.any()) {
    auto d = c->Get(id);
    if (d.ok() && d->has_value()) p["vector"] = VectorJson(*c, **d, vectors);
  }
  return p;
}

HttpResponse QdrantRouter::Upsert(const Call& call) {
  const json& j = call.body;
  if (Status s = RefuseUnknown(j, {"points", "batch", "shard_key", "update_filter", "update_mode"}, "an upsert"); !s.ok())
    return FromStatus(s);
  // Conditional upserts: update_mode and update_filter (which stored points may be replaced).
  UpsertCondition condition;
  bool conditional = false;
  if (j.contains("update_mode") && !j["update_mode"].is_null()) {
    const json& m = j["update_mode"];
    if (m != "upsert" && m != "insert_only" && m != "update_only")
      return QdrantError(400, "Bad request: 'update_mode' must be \"upsert\", \"insert_only\" or \"update_only\"");
    condition.insert_only = m == "insert_only";
    condition.update_only = m == "update_only";
    conditional = m != "upsert";
  }
  if (j.contains("update_filter") && !j["update_filter"].is_null()) {
    auto f = UpdateFilter(j);
    if (!f.ok()) return FromStatus(f.status());
    condition.filter = *f;
    conditional = true;
  }
  auto c = core_->OpenCollection(call.name());
  if (!c.ok()) return FromStatus(c.status());
  // The batch form {"ids", "vectors", "payloads"} as points; "vectors" a
  // list (one per id) or, for named vectors, a list per name.
  json points = j.contains("points") ? j["points"] : json();
  if (j.contains("batch")) {
    const json& b = j["batch"];
    const size_t n = b.is_object() && b.contains("ids") && b["ids"].is_array() ? b["ids"].size() : 0;
    const json& vs = b.is_object() && b.contains("vectors") ? b["vectors"] : json();
    bool fits = n > 0 && ((vs.is_array() && vs.size() == n) || (vs.is_object() && !vs.empty()));
    if (vs.is_object())
      for (auto it = vs.begin(); it != vs.end(); ++it) fits = fits && it.value().is_array() && it.value().size() == n;
    if (!fits) return QdrantError(400, "Bad request: 'batch' needs 'ids' and 'vectors' of one length (a list, or a list per vector name)");
    points = json::array();
    for (size_t i = 0; i < n; ++i) {
      json vector = json::object();
      if (vs.is_array()) vector = vs[i];
      else
        for (auto it = vs.begin(); it != vs.end(); ++it)
          if (!it.value()[i].is_null()) vector[it.key()] = it.value()[i];
      json p = {{"id", b["ids"][i]}, {"vector", vector}};
      if (b.contains("payloads") && b["payloads"].is_array() && i < b["payloads"].size()) p["payload"] = b["payloads"][i];
      points.push_back(std::move(p));
    }
  }
  if (!points.is_array() || points.empty()) return QdrantError(400, "Bad request: 'points' must be a non-empty array");
  std::vector<StoredDocument> docs;
  std::set<std::string> seen;
  size_t documents = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const json& pt = points[i];
    const std::string where = "point " + std::to_string(i) + ": ";
    auto fail = [&](const std::string& m) { return QdrantError(400, "Bad request: " + where + m); };
    if (!pt.is_object()) return fail("must be an object");
    for (auto it = pt.begin(); it != pt.end(); ++it)
      if (it.key() != "id" && it.key() != "vector" && it.key() != "payload")
        return fail("unknown field '" + it.key().substr(0, 80) + "'");
    if (!pt.contains("id")) return fail("'id' is required");
    auto id = PointId(pt["id"]);
    if (!id.ok()) return fail(id.status().message());
    if (!seen.insert(*id).second) return fail("id " + *id + " appears twice");
    if (!pt.contains("vector")) return fail("'vector' is required (numbers or a Document)");
    if (pt.contains("payload") && !pt["payload"].is_null() && !pt["payload"].is_object()) return fail("'payload' must be an object");
    const json payload = pt.contains("payload") && pt["payload"].is_object() ? pt["payload"] : json::object();
    auto parsed = PointVectorOf(pt["vector"]);
    if (!parsed.ok()) return fail(parsed.status().message());
    const PointVector& pv = *parsed;
    StoredDocument doc{*id, pv.text, payload.dump(), {}, {}};
    // A collection of the client's own vectors takes a point with none of them ({}).
    if (!pv.numbers.empty() || ((*c)->schema().kind == VectorKind::kPlain && pv.text.empty())) {
      if (Status s = ToStoredVectors(**c, pv.numbers, &doc); !s.ok()) return fail(s.message());
      doc.text = PayloadText((*c)->schema(), payload);
    }
    documents += doc.hs.empty() ? 1 : 0;
    docs.push_back(std::move(doc));
  }
  // Documents are embedded here: their count is bounded as every embedding
  // request's; points given as numbers only by the request's size.
  if (documents > core_->options().max_documents)
    return QdrantError(400, "Bad request: too many points given as Documents in one request (max " +
                                std::to_string(core_->options().max_documents) + "; each is embedded here)");
  const size_t n = docs.size();
  // Documents embedded with the collection's setup.
  auto w = core_->db().Upsert(call.name(), std::move(docs), call.wait, conditional ? &condition : nullptr);
  if (w.ok()) core_->CountStored(n);
  return Updated(w, call);
}

HttpResponse QdrantRouter::Retrieve(const Call& call) {
  const json& j = call.body;
  if (Status s = RefuseUnknown(j, {"ids", "with_payload", "with_vector", "shard_key", "consistency"}, "a points request"); !s.ok())
    return FromStatus(s);
  if (!j.contains("ids") || !j["ids"].is_array()) return QdrantError(400, "Bad request: 'ids' must be an array");
  auto payload = PayloadSelector::Parse(j.value("with_payload", json(true)), true);
  if (!payload.ok()) return FromStatus(payload.status());
  auto vectors = VectorSelector::Parse(j.value("with_vector", json(false)));
  if (!vectors.ok()) return FromStatus(vectors.status());
  auto c = core_->OpenCollection(call.name());
  if (!c.ok()) return FromStatus(c.status());
  json out = json::array();
  for (const auto& raw : j["ids"]) {
    auto id = PointId(raw);
    if (!id.ok()) return FromStatus(id.status());
    auto d = (*c)->Get(*id);
    if (!d.ok()) return FromStatus(d.status());
    if (!d->has_value()) continue;
    json p = {{"id", QdrantId(*id)}, {"payload", payload->Apply(json::parse((*d)->metadata_json))}};
    p["vector"] = VectorJson(**c, **d, *vectors);
    out.push_back(std::move(p));
  }
  return Ok(out, call.t0);
}

HttpResponse QdrantRouter::GetPoint(const Call& call) {
  const std::string& raw = call.args.at(1);
  json id = json(raw);
  if (!raw.empty() && raw.size() <= 19 && std::all_of(raw.begin(), raw.end(), ::isdigit)) id = std::stoull(raw);
  auto pid = PointId(id);
  if (!pid.ok()) return FromStatus(pid.status());
  auto c = core_->OpenCollection(call.name());
  if (!c.ok()) return FromStatus(c.status());
  auto d = (*c)->Get(*pid);
  if (!d.ok()) return FromStatus(d.status());
  if (!d->has_value()) return QdrantError(404, "Not found: no point with id " + raw.substr(0, 80));
  return Ok({{"id", QdrantId(*pid)}, {"payload", json::parse((*d)->metadata_json)}, {"vector", VectorJson(**c, **d, *VectorSelector::Parse(true))}}, call.t0);
}

namespace {

// The ScanSpec of a request's "filter" (every document without one).
Result<ScanSpec> FilterScan(const json& j) {
  ScanSpec scan;
  MOEEDB_ASSIGN_OR_RETURN(std::string filter, FilterOf(j));
  MOEEDB_RETURN_IF_ERROR(scan.SetFilter(filter));
  return scan;
}

// The points a request selects: "points" (ids) or "filter", one of them.
Result<ScanSpec> Selected(const json& j) {
  const bool by_ids = j.contains("points") && !j["points"].is_null();
  const bool by_filter = j.contains("filter") && !j["filter"].is_null();
  if (by_ids == by_filter) return Bad("give either 'points' (ids) or 'filter'");
  if (by_filter) return FilterScan(j);
  if (!j["points"].is_array()) return Bad("'points' must be an array of ids");
  ScanSpec scan;
  scan.ids.emplace();
  for (const auto& raw : j["points"]) {
    MOEEDB_ASSIGN_OR_RETURN(std::string id, PointId(raw));
    scan.ids->push_back(std::move(id));
  }
  return scan;
}

}  // namespace

HttpResponse QdrantRouter::Delete(const Call& call) {
  const json& j = call.body;
  if (Status s = RefuseUnknown(j, {"points", "filter", "shard_key"}, "a delete"); !s.ok()) return FromStatus(s);
  auto scan = Selected(j);
  if (!scan.ok()) return FromStatus(scan.status());
  auto c = core_->OpenCollection(call.name());
  if (!c.ok()) return FromStatus(c.status());
  return Updated(DeleteDocuments(c->get(), *scan, call.wait), call);
}

HttpResponse QdrantRouter::ChangePayload(const Call& call, MetadataChange::Kind kind) {
  const json& j = call.body;
  MetadataChange change;
  change.kind = kind;
  Status known = kind == MetadataChange::Kind::kDeleteKeys ? RefuseUnknown(j, {"keys", "points", "filter", "shard_key"}, "a payload delete")
                 : kind == MetadataChange::Kind::kClear   ? RefuseUnknown(j, {"points", "filter", "shard_key"}, "a payload clear")
                                                          : RefuseUnknown(j, {"payload", "points", "filter", "key", "shard_key"}, "a payload update");
  if (!known.ok()) return FromStatus(known);
  if (kind == MetadataChange::Kind::kSet || kind == MetadataChange::Kind::kOverwrite) {
    if (!j.contains("payload") || !j["payload"].is_object()) return QdrantError(400, "Bad request: 'payload' must be an object");
    change.values = j["payload"];
    if (j.contains("key") && !j["key"].is_null()) {
      if (!j["key"].is_string()) return QdrantError(400, "Bad request: 'key' must be a string");
      if (kind == MetadataChange::Kind::kOverwrite) return QdrantError(400, "Bad request: 'key' belongs to set_payload, not overwrite_payload");
      change.at = j["key"].get<std::string>();
      // "" is no path (the top is no key at all); a key named "" is spelled '""'.
      if (change.at.empty()) return QdrantError(400, "Bad request: 'key' is an empty path (a key named \"\" is spelled '\"\"')");
    }
  }
  if (kind == MetadataChange::Kind::kDeleteKeys) {
    if (!j.contains("keys") || !j["keys"].is_array()) return QdrantError(400, "Bad request: 'keys' must be an array of payload keys");
    for (const auto& k : j["keys"]) {
      if (!k.is_string()) return QdrantError(400, "Bad request: 'keys' must be an array of payload keys");
      change.keys.push_back(k.get<std::string>());
    }
  }
  auto scan = Selected(j);
  if (!scan.ok()) return FromStatus(scan.status());
  auto c = core_->OpenCollection(call.name());
  if (!c.ok()) return FromStatus(c.status());
  return Updated(ChangeMetadata(c->get(), *scan, change, call.wait), call);
}

HttpResponse QdrantRouter::SetPayload(const Call& call) { return ChangePayload(call, MetadataChange::Kind::kSet); }
HttpResponse QdrantRouter::OverwritePayload(const Call& call) { return ChangePayload(call, MetadataChange::Kind::kOverwrite); }
HttpResponse QdrantRouter::DeletePayload(const Call& call) { return ChangePayload(call, MetadataChange::Kind::kDeleteKeys); }
HttpResponse QdrantRouter::ClearPayload(const Call& call) { return ChangePayload(call, MetadataChange::Kind::kClear); }

HttpResponse QdrantRouter::Count(const Call& call) {
  const json& j = call.body;
  if (Status s = RefuseUnknown(j, {"filter", "exact", "shard_key"}, "a count"); !s.ok()) return FromStatus(s);
  auto scan = FilterScan(j);
  if (!scan.ok()) return FromStatus(scan.status());
  auto c = core_->OpenCollection(call.name());
  if (!c.ok()) return FromStatus(c.status());
  auto n = CountMatching(**c, *scan);
  if (!n.ok()) return FromStatus(n.status());
  return Ok({{"count", *n}}, call.t0);
}

HttpResponse QdrantRouter::Scroll(const Call& call) {
  const json& j = call.body;
  if (Status s = RefuseUnknown(j, {"filter", "limit", "offset", "with_payload", "with_vector", "order_by", "shard_key", "consistency"},
                               "a scroll");
      !s.ok())
    return FromStatus(s);
  auto limit = qdrant::Count(j, "limit", 10, kMaxSearchK);
  if (!limit.ok()) return FromStatus(limit.status());
  if (*limit == 0) return QdrantError(400, "Bad request: 'limit' must be at least 1");
  auto scan = FilterScan(j);
  if (!scan.ok()) return FromStatus(scan.status());
  auto payload = PayloadSelector::Parse(j.value("with_payload", json(true)), true);
  if (!payload.ok()) return FromStatus(payload.status());
  auto vectors = VectorSelector::Parse(j.value("with_vector", json(false)));
  if (!vectors.ok()) return FromStatus(vectors.status());
  // `offset` is the first point of the page: it, then the ids after it.
  if (j.contains("offset") && !j["offset"].is_null()) {
    auto id = PointId(j["offset"]);
    if (!id.ok()) return FromStatus(id.status());
    scan->start = *id;
  }
  auto c = core_->OpenCollection(call.name());
  if (!c.ok()) return FromStatus(c.status());
  if (j.contains("order_by") && !j["order_by"].is_null()) {
    // Ordered by a payload field: one page, no next offset (Qdrant's rule; start_from pages on).
    if (!scan->start.empty()) return QdrantError(400, "Bad request: 'offset' does not apply with 'order_by' (use order_by.start_from)");
    auto order = OrderBySpecFromJson(j["order_by"]);
    if (!order.ok()) return FromStatus(order.status());
    auto ordered = ScanOrdered(**c, *scan, *order, *limit);
    if (!ordered.ok()) return FromStatus(ordered.status());
    json points = json::array();
    for (const auto& o : *ordered) {
      json p = PointJson(c->get(), o.doc.id, 0, o.doc.metadata_json, *payload, *vectors, false);
      p["order_value"] = o.value;
      points.push_back(std::move(p));
    }
    return Ok({{"points", points}, {"next_page_offset", nullptr}}, call.t0);
  }
  scan->limit = *limit;
  auto page = Scan(**c, *scan);
  if (!page.ok()) return FromStatus(page.status());
  json points = json::array();
  for (const auto& d : page->documents) points.push_back(PointJson(c->get(), d.id, 0, d.metadata_json, *payload, *vectors, false));
  return Ok({{"points", points}, {"next_page_offset", page->next.empty() ? json(nullptr) : QdrantId(page->next)}}, call.t0);
}

HttpResponse QdrantRouter::Facet(const Call& call) {
  const json& j = call.body;
  if (Status s = RefuseUnknown(j, {"key", "filter", "limit", "exact", "shard_key", "consistency", "timeout"}, "a facet request"); !s.ok())
    return FromStatus(s);
  if (!j.contains("key") || !j["key"].is_string()) return QdrantError(400, "Bad request: 'key' must be a payload key");
  auto limit = qdrant::Count(j, "limit", 10, kMaxSearchK);
  if (!limit.ok()) return FromStatus(limit.status());
  auto scan = FilterScan(j);
  if (!scan.ok()) return FromStatus(scan.status());
  auto c = core_->OpenCollection(call.name());
  if (!c.ok()) return FromStatus(c.status());
  auto hits = moeedb::Facet(**c, *scan, j["key"].get<std::string>(), *limit);
  if (!hits.ok()) return FromStatus(hits.status());
  json out = json::array();
  for (const auto& h : *hits) {
    // A UUID value is answered in its hyphenated form, as Qdrant's UUID index holds it.
    const std::string uuid = h.value.is_string() ? CanonicalUuid(h.value.get<std::string>()) : std::string();
    out.push_back({{"value", uuid.empty() ? h.value : json(uuid)}, {"count", h.count}});
  }
  return Ok({{"hits", out}}, call.t0);
}

HttpResponse QdrantRouter::UpdateVectors(const Call& call) {
  const json& j = call.body;
  if (Status s = RefuseUnknown(j, {"points", "shard_key", "update_filter"}, "a vectors update"); !s.ok()) return FromStatus(s);
  std::shared_ptr<const MetadataFilter> only_where;
  if (j.contains("update_filter") && !j["update_filter"].is_null()) {
    auto f = UpdateFilter(j);
    if (!f.ok()) return FromStatus(f.status());
    only_where = *f;
  }
  if (!j.contains("points") || !j["points"].is_array() || j["points"].empty())
    return QdrantError(400, "Bad request: 'points' must be a non-empty array of {\"id\", \"vector\"}");
  std::map<std::string, ClientVector> vectors;
  for (size_t i = 0; i < j["points"].size(); ++i) {
    const json& pt = j["points"][i];
    const std::string where = "point " + std::to_string(i) + ": ";
    if (!pt.is_object() || !pt.contains("id") || !pt.contains("vector"))
      return QdrantError(400, "Bad request: " + where + "needs 'id' and 'vector'");
    auto id = PointId(pt["id"]);
    if (!id.ok()) return QdrantError(400, "Bad request: " + where + id.status().message());
    auto pv = PointVectorOf(pt["vector"]);
    if (!pv.ok()) return QdrantError(400, "Bad request: " + where + pv.status().message());
    if (!pv->text.empty()) return QdrantError(400, "Bad request: " + where + "give the vectors as numbers");
    if (!vectors.emplace(*id, pv->numbers).second) return QdrantError(400, "Bad request: " + where + "id " + *id + " appears twice");
  }
  auto c = core_->OpenCollection(call.name());
  if (!c.ok()) return FromStatus(c.status());
  return Updated(SetVectors(c->get(), vectors, call.wait, only_where), call);
}

HttpResponse QdrantRouter::DeleteVectors(const Call& call) {
  const json& j = call.body;
  if (Status s = RefuseUnknown(j, {"points", "filter", "vector", "shard_key"}, "a vectors delete"); !s.ok()) return FromStatus(s);
  if (!j.contains("vector") || !j["vector"].is_array() || j["vector"].empty())
    return QdrantError(400, "Bad request: 'vector' must be a non-empty array of vector names");
  std::vector<std::string> names;
  for (const auto& n : j["vector"]) {
    if (!n.is_string()) return QdrantError(400, "Bad request: 'vector' must be a non-empty array of vector names");
    names.push_back(n.get<std::string>());
  }
  auto scan = Selected(j);
  if (!scan.ok()) return FromStatus(scan.status());
  auto c = core_->OpenCollection(call.name());
  if (!c.ok()) return FromStatus(c.status());
  return Updated(RemoveVectors(c->get(), *scan, names, call.wait), call);
}

HttpResponse QdrantRouter::Batch(const Call& call) {
  const json& j = call.body;
  if (Status s = RefuseUnknown(j, {"operations"}, "a batch update"); !s.ok()) return FromStatus(s);
  if (!j.contains("operations") || !j["operations"].is_array())
    return QdrantError(400, "Bad request: 'operations' must be an array");
  using Handler = HttpResponse (QdrantRouter::*)(const Call&);
  const std::pair<const char*, Handler> kinds[] = {
      {"upsert", &QdrantRouter::Upsert},           {"delete", &QdrantRouter::Delete},
      {"set_payload", &QdrantRouter::SetPayload},  {"overwrite_payload", &QdrantRouter::OverwritePayload},
      {"delete_payload", &QdrantRouter::DeletePayload}, {"clear_payload", &QdrantRouter::ClearPayload},
      {"update_vectors", &QdrantRouter::UpdateVectors}, {"delete_vectors", &QdrantRouter::DeleteVectors}};
  // Each operation in order, as its own route answers it; the first that
  // fails ends the batch with its error, those before it stay applied
  // (Qdrant's rule: a batch is a sequence, not a transaction).
  json results = json::array();
  for (size_t i = 0; i < j["operations"].size(); ++i) {
    const json& op = j["operations"][i];
    if (!op.is_object() || op.size() != 1)
      return QdrantError(400, "Bad request: operation " + std::to_string(i) + " must be an object of one operation");
    Handler handler = nullptr;
    for (const auto& [kind, h] : kinds)
      if (op.begin().key() == kind) handler = h;
    if (handler == nullptr)
      return QdrantError(400, "Bad request: operation " + std::to_string(i) + ": unknown operation '" +
                                  op.begin().key().substr(0, 40) +
                                  "' (upsert, delete, set_payload, overwrite_payload, delete_payload, clear_payload, "
                                  "update_vectors, delete_vectors)");
    Call one{call.req, call.args, op.begin().value(), call.wait, call.t0};
    HttpResponse r = (this->*handler)(one);
    if (r.status != 200) return r;
    results.push_back(json::parse(r.body)["result"]);
  }
  return Ok(results, call.t0);
}

}  // namespace moeedb::qdrant
