// moeedb's collections API under /collections (docs/server.md).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <initializer_list>
#include <optional>

#include "database/document_scan.h"
#include "database/document_update.h"
#include "database/payload_facet.h"
#include "database/payload_order.h"
#include "database/spec/collection_spec.h"
#include "plugin/server/protocols/router.h"
#include "database/search_hit_json.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

class CollectionsRouter final : public ProtocolRouter {
 public:
  using ProtocolRouter::ProtocolRouter;
  bool Owns(const std::vector<std::string>& parts) const override { return !parts.empty() && parts[0] == "collections"; }
  HttpResponse Handle(const RouteRequest& req, std::string* route) override;

  // The route handlers (the table in Handle).
  HttpResponse List();
  HttpResponse Collection(const std::string& method, const std::string& name, const std::string& body);
  HttpResponse Upsert(const std::string& name, const std::string& body);
  HttpResponse Document(const std::string& method, const std::string& name, const std::string& id);
  HttpResponse ListDocuments(const std::string& name, const std::map<std::string, std::string>& query);
  // Documents a filter keeps, in id order or ordered by a payload field.
  HttpResponse ScrollDocuments(const std::string& name, const std::string& body);
  // How many documents hold each value of a payload field.
  HttpResponse Facet(const std::string& name, const std::string& body);
  // PUT {"kind"} / DELETE /collections/{name}/payload_indexes/{key}.
  HttpResponse PayloadIndex(const std::string& method, const std::string& name, const std::string& key,
                            const std::string& body);
  HttpResponse Search(const std::string& name, const std::string& body);
  HttpResponse DeleteMany(const std::string& name, const std::string& body);
  // Another node's search of this node's shard replicas (ShardPeers, vector_collection.h).
  HttpResponse Shards(const std::string& what, const std::string& name, const std::string& body);
  // GET /collections/{name}/shards: the internal ids each local replica holds.
  HttpResponse ShardContents(const std::string& name);
  // PUT /collections/{name}/shards {"shards": N}: splits the collection anew.
  HttpResponse Reshard(const std::string& name, const std::string& body);
};

// A collection that could not be opened: a missing one is a 404 whose code
// tells it from a missing document.
HttpResponse OpenFailed(const Status& s) {
  if (s.code() == Status::Code::kNotFound) return NativeError(404, s.message(), "not_found_error", "collection_not_found");
  return NativeFromStatus(s);
}

// An object body ("" counts as {}); nullopt otherwise.
std::optional<json> ObjectBody(const std::string& body) {
  if (body.empty()) return json::object();
  auto j = ParseJson(body);
  if (!j || !j->is_object()) return std::nullopt;
  return j;
}

// The 400 naming the first field of `j` not in `known` (and listing them); nullopt when there is none.
std::optional<HttpResponse> UnknownField(const json& j, std::initializer_list<const char*> known) {
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return it.key() == k; })) {
      std::string list;
      for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      return NativeBadRequest("unknown field '" + it.key().substr(0, 80) + "' (" + list + ")");
    }
  return std::nullopt;
}

// The body's "filter" (absent or null: none) into `scan`; the 400 for a bad one.
std::optional<HttpResponse> FilterInto(const json& j, ScanSpec* scan) {
  if (!j.contains("filter") || j["filter"].is_null()) return std::nullopt;
  if (!j["filter"].is_object()) return NativeBadRequest("'filter' must be an object");
  if (Status s = scan->SetFilter(j["filter"].dump()); !s.ok()) return NativeBadRequest(s.message());
  return std::nullopt;
}

// A stored document as this API answers it.
using Args = std::vector<std::string>;
using Handler = HttpResponse (*)(CollectionsRouter&, const RouteRequest&, const Args&);

constexpr Route<Handler> kRoutes[] = {
    {"GET", "/collections", [](CollectionsRouter& r, const RouteRequest&, const Args&) { return r.List(); }},
    {"GET", "/collections/{name}",
     [](CollectionsRouter& r, const RouteRequest& q, const Args& a) { return r.Collection("GET", a[0], q.body()); }},
    {"PUT", "/collections/{name}",
     [](CollectionsRouter& r, const RouteRequest& q, const Args& a) { return r.Collection("PUT", a[0], q.body()); }},
    {"DELETE", "/collections/{name}",
     [](CollectionsRouter& r, const RouteRequest& q, const Args& a) { return r.Collection("DELETE", a[0], q.body()); }},
    {"GET", "/collections/{name}/documents",
     [](CollectionsRouter& r, const RouteRequest& q, const Args& a) { return r.ListDocuments(a[0], q.query); }},
    {"POST", "/collections/{name}/documents",
     [](CollectionsRouter& r, const RouteRequest& q, const Args& a) { return r.Upsert(a[0], q.body()); }},
    {"POST", "/collections/{name}/documents/delete",
     [](CollectionsRouter& r, const RouteRequest& q, const Args& a) { return r.DeleteMany(a[0], q.body()); }},
    {"POST", "/collections/{name}/documents/scroll",
     [](CollectionsRouter& r, const RouteRequest& q, const Args& a) { return r.ScrollDocuments(a[0], q.http.body); }},
    {"POST", "/collections/{name}/facet",
     [](CollectionsRouter& r, const RouteRequest& q, const Args& a) { return r.Facet(a[0], q.http.body); }},
    {"PUT", "/collections/{name}/payload_indexes/{key}",
     [](CollectionsRouter& r, const RouteRequest& q, const Args& a) { return r.PayloadIndex("PUT", a[0], a[1], q.http.body); }},
    {"DELETE", "/collections/{name}/payload_indexes/{key}",
     [](CollectionsRouter& r, const RouteRequest& q, const Args& a) { return r.PayloadIndex("DELETE", a[0], a[1], q.http.body); }},
    {"GET", "/collections/{name}/documents/{id}",
     [](CollectionsRouter& r, const RouteRequest&, const Args& a) { return r.Document("GET", a[0], a[1]); }},
    {"DELETE", "/collections/{name}/documents/{id}",
     [](CollectionsRouter& r, const RouteRequest&, const Args& a) { return r.Document("DELETE", a[0], a[1]); }},
    {"GET", "/collections/{name}/shards",
     [](CollectionsRouter& r, const RouteRequest&, const Args& a) { return r.ShardContents(a[0]); }},
    {"PUT", "/collections/{name}/shards",
     [](CollectionsRouter& r, const RouteRequest& q, const Args& a) { return r.Reshard(a[0], q.http.body); }},
    {"POST", "/collections/{name}/shards/search",
     [](CollectionsRouter& r, const RouteRequest& q, const Args& a) { return r.Shards("search", a[0], q.body()); }},
    {"POST", "/collections/{name}/shards/stats",
     [](CollectionsRouter& r, const RouteRequest& q, const Args& a) { return r.Shards("stats", a[0], q.body()); }},
    {"POST", "/collections/{name}/search",
     [](CollectionsRouter& r, const RouteRequest& q, const Args& a) { return r.Search(a[0], q.body()); }},
};

HttpResponse CollectionsRouter::Handle(const RouteRequest& req, std::string* route) {
  return RouteTo(*this, kRoutes, req, 0, "", route, [&](Handler h, const Args& args) { return h(*this, req, args); });
}

HttpResponse CollectionsRouter::List() {
  auto all = core_->ListCollections();
  if (!all.ok()) return NativeFromStatus(all.status());
  json out = json::array();
  for (const auto& c : *all) out.push_back({{"name", c.name}, {"documents", c.count}});
  return JsonResponse({{"collections", out}});
}

HttpResponse CollectionsRouter::Collection(const std::string& m, const std::string& name, const std::string& body) {
  if (m == "PUT") {
    auto j = ObjectBody(body);
    if (!j) return NativeBadRequest("the body must be a JSON object");
    const std::string& routing = core_->setup().routing();
    if (j->contains("routing") && (!(*j)["routing"].is_string() ||
                                   [&] { auto p = RoutingPolicy::Parse((*j)["routing"].get<std::string>());
                                         return !p.ok() || p->ToString() != routing; }()))
      return NativeBadRequest("this server embeds with routing " + routing + "; a collection must use it");
    auto spec = CollectionSpecFromJson(*j);
    if (!spec.ok()) return NativeBadRequest(spec.status().message());
    auto o = spec->NewOptions(core_->NewCollectionOptions());
    if (!o.ok()) return NativeFromStatus(o.status());
    if (core_->GetCollection(name).ok())
      return NativeError(409, "collection '" + name + "' already exists", "invalid_request_error", "conflict");
    auto c = core_->CreateCollection(name, *o);
    if (!c.ok()) return OpenFailed(c.status());
    return JsonResponse({{"name", name}, {"created", true}}, 201);
  }
  if (m == "GET") {
    auto c = core_->GetCollection(name);
    if (!c.ok()) return OpenFailed(c.status());
    json spec = json::parse(c->spec_json);
    spec.erase("std_hs");
    spec.erase("std_rw");
    json out = {{"name", name}, {"documents", c->count}, {"last_op", c->last_op}, {"spec", spec}};
    // This node's indexes (opened if they were not): over a shared store they
    // follow the change log and may trail last_op for a moment.
    auto open = core_->db().OpenCollection(name);
    if (open.ok()) {
      // Its replicas: each shard this node holds, with what its indexes hold.
      json replicas = json::array();
      size_t indexed = 0;
      for (const auto& r : (*open)->ReplicaStates()) {
        replicas.push_back({{"shard", r.shard}, {"of", r.shards}, {"documents", r.documents}, {"applied_seq", r.applied_seq},
                            {"index_bytes", r.index_bytes}, {"payload_index_bytes", r.payload_index_bytes},
                            {"log_rewinds", r.log_rewinds}, {"building", r.building}});
        indexed += r.documents;
      }
      // How its replicas opened in this process: from their snapshots (and
      // the change-log entries replayed on top), or rebuilt from the store.
      out["node"] = {{"applied_seq", (*open)->applied_seq()}, {"indexed", indexed}, {"replicas", replicas},
                     {"payload_index_points", (*open)->PayloadIndexPoints()},
                     {"opened_from_snapshot", (*open)->opened_from_snapshot()},
                     {"replayed_entries", (*open)->replayed_ops()}, {"index_rebuilds", (*open)->index_rebuilds()}};
    }
    return JsonResponse(out);
  }
  if (m == "DELETE") {
    Status s = core_->DropCollection(name);
    if (!s.ok()) return NativeFromStatus(s);
    return JsonResponse({{"name", name}, {"dropped", true}});
  }
  return NativeError(405, "use PUT, GET or DELETE", "invalid_request_error");
}

// A document's or a search's "vector": numbers (one unnamed vector: the
// served model's fused vector, or a plain collection's), or {"hs": [...],
// "rw": [...]} (either alone for a search).
Result<ClientVector> ClientVectorOf(const json& v) {
  ClientVector cv;
  if (v.is_array()) {
    MOEEDB_ASSIGN_OR_RETURN(cv.unnamed, Floats(v, "'vector'"));
    return cv;
  }
  if (!v.is_object()) return Status::InvalidArgument("'vector' must be an array of numbers or {\"hs\": [...], \"rw\": [...]}");
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.key() != "hs" && it.key() != "rw") return Status::InvalidArgument("unknown vector '" + it.key().substr(0, 80) + "' (hs, rw)");
    MOEEDB_ASSIGN_OR_RETURN((it.key() == "hs" ? cv.hs : cv.rw), Floats(it.value(), "'vector." + it.key() + "'"));
  }
  return cv;
}

HttpResponse CollectionsRouter::Upsert(const std::string& name, const std::string& body) {
  auto parsed = ObjectBody(body);
  if (!parsed) return NativeBadRequest("the body must be a JSON object");
  const json& j = *parsed;
  if (!j.contains("documents") || !j["documents"].is_array()) return NativeBadRequest("'documents' must be an array");
  const ApiOptions& opt = core_->options();
  if (j["documents"].size() > opt.max_documents)
    return NativeError(413, "too many documents in one request (max " + std::to_string(opt.max_documents) + ")", "invalid_request_error");
  if (j.contains("wait") && !j["wait"].is_boolean()) return NativeBadRequest("'wait' must be true or false");
  const bool wait = !j.contains("wait") || j["wait"].get<bool>();
  auto c = core_->OpenCollection(name);
  if (!c.ok()) return OpenFailed(c.status());
  std::vector<StoredDocument> docs;
  for (size_t i = 0; i < j["documents"].size(); ++i) {
    const json& d = j["documents"][i];
    const std::string where = "document " + std::to_string(i) + ": ";
    if (!d.is_object()) return NativeBadRequest(where + "must be an object");
    if (!d.contains("id") || !d["id"].is_string() || d["id"].get<std::string>().empty()) return NativeBadRequest(where + "'id' must be a non-empty string");
    const bool has_vector = d.contains("vector") && !d["vector"].is_null();
    // With the client's own vector the text is optional (it feeds the lexical index).
    if (d.contains("text") ? !d["text"].is_string() : !has_vector) return NativeBadRequest(where + "'text' must be a string");
    if (d.contains("metadata") && !d["metadata"].is_object()) return NativeBadRequest(where + "'metadata' must be an object");
    StoredDocument doc{d["id"].get<std::string>(), d.value("text", ""), d.value("metadata", json::object()).dump(), {}, {}};
    if (has_vector) {
      auto v = ClientVectorOf(d["vector"]);
      if (!v.ok()) return NativeBadRequest(where + v.status().message());
      if (Status st = ToStoredVectors(**c, *v, &doc); !st.ok()) return NativeBadRequest(where + st.message());
    }
    docs.push_back(std::move(doc));
  }
  if (docs.empty()) return NativeBadRequest("'documents' is empty");
  const size_t n = docs.size();
  auto w = core_->db().Upsert(name, std::move(docs), wait);  // embedded with the collection's setup
  if (!w.ok()) {
    if (w.status().code() == Status::Code::kNotSupported) return NativeError(422, w.status().message(), "invalid_request_error", "too_many_tokens");
    return NativeFromStatus(w.status());
  }
  core_->CountStored(n);
  // seq: the write's change-log entry; a search with "min_seq" reads it back on any node.
  return JsonResponse({{"upserted", n}, {"replaced", w->removed.size()}, {"durable", wait}, {"seq", w->seq}});
}

HttpResponse CollectionsRouter::Document(const std::string& m, const std::string& name, const std::string& id) {
  auto c = core_->OpenCollection(name);
  if (!c.ok()) return OpenFailed(c.status());
  if (m == "GET") {
    auto d = (*c)->Get(id);
    if (!d.ok()) return NativeFromStatus(d.status());
    if (!d->has_value()) return NativeError(404, "no document '" + id + "'", "not_found_error", "document_not_found");
    return JsonResponse({{"id", (*d)->id}, {"text", (*d)->text}, {"metadata", json::parse((*d)->metadata_json)}});
  }
  if (m == "DELETE") {
    auto r = (*c)->Delete({id}, true);
    if (!r.ok()) return NativeFromStatus(r.status());
    if (r->removed.empty()) return NativeError(404, "no document '" + id + "'", "not_found_error", "document_not_found");
    return JsonResponse({{"id", id}, {"deleted", true}, {"seq", r->seq}});
  }
  return NativeError(405, "use GET or DELETE", "invalid_request_error");
}

// {"ids": [...]} or {"filter": {...}} (one of them), "wait": one atomic delete.
HttpResponse CollectionsRouter::DeleteMany(const std::string& name, const std::string& body) {
  auto j = ObjectBody(body);
  if (!j) return NativeBadRequest("the body must be a JSON object");
  if (auto bad = UnknownField(*j, {"ids", "filter", "wait"})) return *bad;
  if (j->contains("ids") == j->contains("filter")) return NativeBadRequest("give either 'ids' or 'filter'");
  if (j->contains("wait") && !(*j)["wait"].is_boolean()) return NativeBadRequest("'wait' must be true or false");
  const bool wait = j->value("wait", true);
  ScanSpec scan;
  if (j->contains("ids")) {
    if (!(*j)["ids"].is_array()) return NativeBadRequest("'ids' must be an array of strings");
    scan.ids.emplace();
    for (const auto& id : (*j)["ids"]) {
      if (!id.is_string()) return NativeBadRequest("'ids' must be an array of strings");
      scan.ids->push_back(id.get<std::string>());
    }
    if (scan.ids->size() > core_->options().max_documents)
      return NativeError(413, "too many ids in one request (max " + std::to_string(core_->options().max_documents) + ")",
                         "invalid_request_error");
  } else if (Status st = scan.SetFilter((*j)["filter"].dump()); !st.ok()) {
    return NativeBadRequest(st.message());
  }
  auto c = core_->OpenCollection(name);
  if (!c.ok()) return OpenFailed(c.status());
  if (scan.ids) {
    std::sort(scan.ids->begin(), scan.ids->end());
    scan.ids->erase(std::unique(scan.ids->begin(), scan.ids->end()), scan.ids->end());
  }
  auto w = DeleteDocuments(c->get(), scan, wait);
  if (!w.ok()) return NativeFromStatus(w.status());
  const size_t deleted = w->removed.size();
  const uint64_t seq = w->seq;
  return JsonResponse({{"deleted", deleted}, {"missing", w->not_found}, {"durable", wait}, {"seq", seq}});
}

HttpResponse CollectionsRouter::ListDocuments(const std::string& name, const std::map<std::string, std::string>& query) {
  size_t limit = 20;
  for (const auto& [key, value] : query) {
    if (key == "limit") {
      char* end = nullptr;
      const long v = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v < 1 || v > 1000) return NativeBadRequest("'limit' must be an integer in [1, 1000]");
      limit = static_cast<size_t>(v);
    } else if (key != "after") {
      return NativeBadRequest("unknown parameter '" + key.substr(0, 100) + "' (limit, after)");
    }
  }
  auto c = core_->OpenCollection(name);
  if (!c.ok()) return OpenFailed(c.status());
  auto page = (*c)->List(query.count("after") ? query.at("after") : "", limit);
  if (!page.ok()) return NativeFromStatus(page.status());
  json docs = json::array();
  for (const auto& d : page->documents) docs.push_back(DocumentJson(d));
  return JsonResponse({{"documents", docs},
                       {"next_after", page->next_after.empty() ? json(nullptr) : json(page->next_after)},
                       {"total", (*c)->size()}});
}

HttpResponse CollectionsRouter::ScrollDocuments(const std::string& name, const std::string& body) {
  auto j = ObjectBody(body);
  if (!j) return NativeBadRequest("the body must be a JSON object");
  if (auto bad = UnknownField(*j, {"filter", "limit", "after", "order_by"})) return *bad;
  const json limit = j->value("limit", json(20));
  if (!limit.is_number_unsigned() || limit.get<size_t>() < 1 || limit.get<size_t>() > 1000)
    return NativeBadRequest("'limit' must be an integer in [1, 1000]");
  ScanSpec scan;
  if (auto bad = FilterInto(*j, &scan)) return *bad;
  auto c = core_->OpenCollection(name);
  if (!c.ok()) return OpenFailed(c.status());
  json docs = json::array();
  if (j->contains("order_by") && !(*j)["order_by"].is_null()) {
    if (j->contains("after")) return NativeBadRequest("'after' pages by id; with 'order_by' use order_by.start_from");
    auto order = OrderBySpecFromJson((*j)["order_by"]);
    if (!order.ok()) return NativeBadRequest(order.status().message());
    auto ordered = ScanOrdered(**c, scan, *order, limit.get<size_t>());
    if (!ordered.ok()) return NativeFromStatus(ordered.status());
    for (const auto& o : *ordered) {
      json d = DocumentJson(o.doc);
      d["order_value"] = o.value;
      docs.push_back(std::move(d));
    }
    return JsonResponse({{"documents", docs}, {"next_after", nullptr}});
  }
  if (j->contains("after")) {
    if (!(*j)["after"].is_string()) return NativeBadRequest("'after' must be a document id");
    scan.start = (*j)["after"].get<std::string>();
    scan.skip = 1;  // the page starts after it
    auto first = (*c)->Get(scan.start);
    if (!first.ok()) return NativeFromStatus(first.status());
    if (!*first || (scan.filter && !FilterKeeps(**c, *scan.filter, **first))) scan.skip = 0;
  }
  scan.limit = limit.get<size_t>();
  auto page = Scan(**c, scan);
  if (!page.ok()) return NativeFromStatus(page.status());
  for (const auto& d : page->documents) docs.push_back(DocumentJson(d));
  const bool more = !page->next.empty();
  return JsonResponse({{"documents", docs}, {"next_after", more ? json(page->documents.back().id) : json(nullptr)}});
}

HttpResponse CollectionsRouter::PayloadIndex(const std::string& method, const std::string& name, const std::string& key,
                                             const std::string& body) {
  std::optional<PayloadFieldKind> kind;
  if (method == "PUT") {
    auto j = ObjectBody(body);
    if (!j) return NativeBadRequest("the body must be a JSON object {\"kind\": ...}");
    if (auto bad = UnknownField(*j, {"kind"})) return *bad;
    if (!j->contains("kind") || !(*j)["kind"].is_string())
      return NativeBadRequest("'kind' must be one of " + kPayloadFieldKinds.Alternatives());
    auto k = kPayloadFieldKinds.Parse((*j)["kind"].get<std::string>());
    if (!k.ok()) return NativeBadRequest("kind: " + k.status().message());
    kind = *k;
  }
  if (auto rec = core_->GetCollection(name); !rec.ok()) return OpenFailed(rec.status());
  Status s = core_->db().SetPayloadIndex(name, key, kind);
  if (!s.ok()) return NativeFromStatus(s);
  auto c = core_->OpenCollection(name);
  if (!c.ok()) return OpenFailed(c.status());
  json fields = PayloadIndexFieldsToJson((*c)->payload_indexes());
  return JsonResponse({{"name", name}, {"payload_indexes", fields}, {"points", (*c)->PayloadIndexPoints()}});
}

HttpResponse CollectionsRouter::Reshard(const std::string& name, const std::string& body) {
  auto j = ObjectBody(body);
  if (!j) return NativeBadRequest("the body must be a JSON object {\"shards\": N}");
  if (auto bad = UnknownField(*j, {"shards"})) return *bad;
  if (!j->contains("shards") || !(*j)["shards"].is_number_unsigned())
    return NativeBadRequest("'shards' must be a whole number from 1 to " + std::to_string(kMaxShards));
  const uint64_t shards = (*j)["shards"].get<uint64_t>();
  if (shards == 0 || shards > kMaxShards)
    return NativeBadRequest("'shards' must be from 1 to " + std::to_string(kMaxShards));
  auto c = core_->OpenCollection(name);
  if (!c.ok()) return OpenFailed(c.status());
  Status s = core_->db().Reshard(name, static_cast<uint32_t>(shards));
  if (!s.ok()) return NativeFromStatus(s);
  // Here the new split is in use; a cluster builds it first (GET /cluster shows it).
  if ((*c)->shards() == shards) return JsonResponse({{"name", name}, {"shards", shards}});
  return JsonResponse({{"name", name}, {"shards", (*c)->shards()}, {"resharding_to", shards}}, 202);
}

HttpResponse CollectionsRouter::Facet(const std::string& name, const std::string& body) {
  auto j = ObjectBody(body);
  if (!j) return NativeBadRequest("the body must be a JSON object");
  if (auto bad = UnknownField(*j, {"key", "filter", "limit"})) return *bad;
  if (!j->contains("key") || !(*j)["key"].is_string()) return NativeBadRequest("'key' must be a payload key");
  const json limit = j->value("limit", json(10));
  if (!limit.is_number_unsigned() || limit.get<size_t>() > kMaxSearchK)
    return NativeBadRequest("'limit' must be an integer in [0, " + std::to_string(kMaxSearchK) + "]");
  ScanSpec scan;
  if (auto bad = FilterInto(*j, &scan)) return *bad;
  auto c = core_->OpenCollection(name);
  if (!c.ok()) return OpenFailed(c.status());
  auto hits = moeedb::Facet(**c, scan, (*j)["key"].get<std::string>(), limit.get<size_t>());
  if (!hits.ok()) return NativeFromStatus(hits.status());
  json out = json::array();
  for (const auto& h : *hits) out.push_back({{"value", h.value}, {"count", h.count}});
  return JsonResponse({{"hits", out}});
}

HttpResponse CollectionsRouter::Shards(const std::string& what, const std::string& name, const std::string& body) {
  auto j = ObjectBody(body);
  if (!j || !j->contains("query") || !j->contains("shards") || !(*j)["shards"].is_array())
    return NativeBadRequest("the body must be {\"query\": a shard query, \"shards\": [...]}");
  auto q = ShardQueryFromJson((*j)["query"]);
  if (!q.ok()) return NativeBadRequest(q.status().message());
  std::vector<uint32_t> shards;
  try {
    shards = (*j)["shards"].get<std::vector<uint32_t>>();
  } catch (const std::exception&) {
    return NativeBadRequest("'shards' must be shard numbers");
  }
  auto c = core_->OpenCollection(name);
  if (!c.ok()) return OpenFailed(c.status());
  json out = json::array();
  if (what == "stats") {
    auto stats = (*c)->ShardStats(*q, shards);
    if (!stats.ok()) return NativeFromStatus(stats.status());
    for (const auto& [k, s] : *stats) out.push_back({{"shard", k}, {"stats", LexicalStatsToJson(s)}});
    return JsonResponse({{"stats", out}});
  }
  auto answers = (*c)->AnswerShards(*q, shards);
  if (!answers.ok()) return NativeFromStatus(answers.status());
  for (const auto& a : *answers) out.push_back(ShardAnswerToJson(a));
  return JsonResponse({{"answers", out}});
}

HttpResponse CollectionsRouter::ShardContents(const std::string& name) {
  auto c = core_->OpenCollection(name);
  if (!c.ok()) return OpenFailed(c.status());
  json out = json::array();
  for (const auto& r : (*c)->Contents())
    out.push_back({{"shard", r.shard}, {"of", r.shards}, {"applied_seq", r.applied_seq}, {"ids", r.dense}, {"lexical_ids", r.lexical}});
  return JsonResponse({{"replicas", out}});
}

HttpResponse CollectionsRouter::Search(const std::string& name, const std::string& body) {
  const auto t0 = std::chrono::steady_clock::now();
  auto j = ObjectBody(body);
  if (!j) return NativeBadRequest("the body must be a JSON object");
  // The client's own query vector, beside the spec (the spec says how to search, not what with).
  json request = *j;
  std::optional<ClientVector> vector;
  std::string use;
  if (request.contains("vector") && !request["vector"].is_null()) {
    auto v = ClientVectorOf(request["vector"]);
    if (!v.ok()) return NativeBadRequest(v.status().message());
    vector = std::move(v).value();
    if (request.contains("using") && !request["using"].is_string()) return NativeBadRequest("'using' must be \"hs\" or \"rw\"");
    use = request.value("using", "");
    if (!request.contains("query")) request["query"] = "";
  } else if (request.contains("using") && !request["using"].is_null()) {
    return NativeBadRequest("'using' names the vector a 'vector' searches; give 'vector', or 'mode' hs or rw to search a text by one half");
  }
  request.erase("vector");
  request.erase("using");
  // Groups: "group_by" a payload key, "group_size" hits each (3), "k" groups.
  std::optional<GroupSpec> groups;
  if (request.contains("group_by") && !request["group_by"].is_null()) {
    if (!request["group_by"].is_string()) return NativeBadRequest("'group_by' must be a payload key");
    const json size = request.value("group_size", json(3));
    if (!size.is_number_unsigned() || size.get<size_t>() < 1 || size.get<size_t>() > kMaxSearchK)
      return NativeBadRequest("'group_size' must be an integer in [1, " + std::to_string(kMaxSearchK) + "]");
    groups = GroupSpec{request["group_by"].get<std::string>(), size.get<size_t>(), 10};
  } else if (request.contains("group_size")) {
    return NativeBadRequest("'group_size' belongs to a search with 'group_by'");
  }
  request.erase("group_by");
  request.erase("group_size");
  auto so = SearchSpecFromJson(request);
  if (!so.ok()) return NativeBadRequest(so.status().message());
  auto c = core_->OpenCollection(name);
  if (!c.ok()) return OpenFailed(c.status());
  Result<std::vector<SearchHit>> hits = Status::OK();
  std::optional<VectorQuery> vq;
  SearchInfo info;
  if (vector) {
    auto q = ToVectorQuery(**c, *vector, use);
    if (!q.ok()) return NativeBadRequest(q.status().message());
    vq = std::move(q).value();
    if (so->mode == QueryMode::kLexical)
      return NativeBadRequest("a lexical search reads 'query' only: leave out 'vector' (or use mode hybrid to fuse both)");
  }
  auto hit_json = [&](const SearchHit& h) {
    json hit = SearchHitJson(h, (*c)->has_lexical());
    // A plain Euclid collection ranks by (|q|^2 - d^2)/2: report the distance too.
    if (vq && !HigherIsBetter(**c, *vq)) hit["distance"] = ClientScore(**c, *vq, h.score, 1.0);
    return hit;
  };
  json reply;
  if (groups) {
    groups->limit = so->k;
    auto found = core_->db().SearchGroups(name, *so, *groups, vq ? &*vq : nullptr, &info);
    if (!found.ok()) return NativeFromStatus(found.status());
    json out = json::array();
    for (const auto& g : *found) {
      json group_hits = json::array();
      for (const auto& h : g.hits) group_hits.push_back(hit_json(h));
      out.push_back({{"value", g.value}, {"hits", group_hits}});
    }
    reply["groups"] = out;
  } else {
    // The query embedded with the collection's setup (none if lexical).
    hits = vq ? core_->db().SearchVectors(name, *vq, *so, &info) : core_->db().Search(name, *so, &info);
    if (!hits.ok()) return NativeFromStatus(hits.status());
    json out = json::array();
    for (const auto& h : *hits) out.push_back(hit_json(h));
    reply["hits"] = out;
  }
  reply["took_ms"] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // A partial answer says which shards it lacks.
  if (so->partial) reply["missing_shards"] = info.missing_shards;
  return JsonResponse(reply);
}

}  // namespace

std::unique_ptr<ProtocolRouter> NewCollectionsRouter(ServerCore* core) { return std::make_unique<CollectionsRouter>(core); }

}  // namespace moeedb
