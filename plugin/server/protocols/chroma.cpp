// Chroma's HTTP API (v2) as the `chromadb` 3.x client calls it, under
// /api/v2 on the main port (it does not clash with Ollama's /api/...) and
// on `--chroma-port`. Tenants and databases need no creating (creating one
// is accepted): default_tenant / default_database hold the moeedb
// collections of plain names, any other pair the collections named
// "TENANT:DATABASE:NAME" (':' is in no Chroma name). A Chroma collection is
// a moeedb collection:
//   - its embeddings are the client's own (client_vectors.h): the served
//     model's fused size makes a fused collection (searched by cos_HS +
//     alpha * cos_RW, as a text search would be), any other size a plain
//     one; records given without embeddings in a collection of the served
//     model are embedded by moeedb;
//   - its documents are the texts (the lexical index reads them), its
//     metadatas the metadata;
//   - its id, metadata and configuration are recorded in the collection's
//     info ("chroma"); a collection made through another API gets an id
//     derived from its name and store id.
// A collection is created fused; if its first embeddings have another size
// it is made again, empty, as a plain collection of that size (Chroma fixes a
// collection's dimension at its first add the same way).
//
// Distances as Chroma reports them, by the collection's space
// (configuration_json.hnsw.space or metadata "hnsw:space"; default l2):
// plain: l2 the squared Euclidean distance, cosine 1 - cos, ip 1 - dot;
// fused, with s = cos_HS + alpha * cos_RW: l2 2(1 + alpha) - 2s, cosine
// 1 - s / (1 + alpha), ip 1 - s, which at alpha 1 are exactly what Chroma
// computes on the fused vectors. Errors are Chroma's {"error", "message"}.
#include <chrono>
#include <cmath>
#include <mutex>
#include <optional>
#include <regex>
#include <set>

#include "database/document_scan.h"
#include "plugin/server/protocols/chroma_wire.h"
#include "plugin/server/protocols/router.h"

namespace moeedb {
namespace {

using json = nlohmann::json;
using namespace chroma;

struct Found {
  std::string name, id;   // the moeedb collection's name; the Chroma id
  std::string chroma_name;
  Scope scope;
  json metadata, configuration;
  std::shared_ptr<VectorCollection> c;  // opened (null: only listed)
};

HttpResponse Named(const RouteRequest& req, const char* what);

class ChromaRouter final : public ProtocolRouter {
 public:
  using ProtocolRouter::ProtocolRouter;
  bool Owns(const std::vector<std::string>& parts) const override {
    return parts.size() >= 2 && parts[0] == "api" && parts[1] == "v2";
  }
  HttpResponse Error(int status, const std::string& message) const override { return ChromaError(status, message); }
  HttpResponse Handle(const RouteRequest& req, std::string* route) override;

  // The route handlers (the table in Handle): a database's routes (`what`
  // database, drop, count, list, create) and a collection's (describe, drop,
  // count, or a records route: add, upsert, update, get, query, delete).
  HttpResponse PreFlight() const;
  HttpResponse InDatabase(const RouteRequest& req, const std::vector<std::string>& args, const std::string& what);
  HttpResponse InCollection(const RouteRequest& req, const std::vector<std::string>& args, const std::string& what);

 private:
  HttpResponse Records(const std::string& what, Found& f, const json& body);
  // The collections of `scope`, in name order; with a `key`, the one named
  // or with that id (if any); `open` opens them.
  Result<std::vector<Found>> InScope(const Scope& scope, const std::string& key, bool open);
  // The collection of `scope` named or with the id `key`; NotFound otherwise.
  Result<Found> Find(const Scope& scope, const std::string& key);
  json CollectionJson(const Found& f) const;
  Space SpaceOf(const Found& f) const;
  HttpResponse Create(const Scope& scope, const json& body);
  HttpResponse Write(Found& f, const json& body, const std::string& how);
  HttpResponse Get(Found& f, const json& body);
  HttpResponse Query(Found& f, const json& body);
  HttpResponse Delete(Found& f, const json& body);
  // The ids matching where / where_document (all when neither), in id order.
  Result<std::vector<StoredDocument>> Matching(Found& f, const json& body);
  // Make an empty collection again as a plain one of `size` (its first add).
  Status Retype(Found& f, size_t size);

};

Result<std::vector<Found>> ChromaRouter::InScope(const Scope& scope, const std::string& key, bool open) {
  MOEEDB_ASSIGN_OR_RETURN(auto all, core_->ListCollections());
  std::vector<Found> out;
  for (const auto& rec : all) {
    const std::optional<std::string> chroma_name = scope.ChromaName(rec.name);
    if (!chroma_name) continue;
    MOEEDB_ASSIGN_OR_RETURN(std::string info_text, VectorCollection::RecordedInfo(rec));
    const json info = json::parse(info_text, nullptr, false);
    const json chroma = info.is_object() && info.contains("chroma") ? info["chroma"] : json::object();
    const std::string id = chroma.contains("id") && chroma["id"].is_string() ? chroma["id"].get<std::string>() : DerivedId(rec.name, rec.id);
    if (!key.empty() && *chroma_name != key && id != key) continue;
    Found f{rec.name, id, *chroma_name, scope, chroma.value("metadata", json(nullptr)),
            chroma.value("configuration", json::object()), nullptr};
    if (open) { MOEEDB_ASSIGN_OR_RETURN(f.c, core_->OpenCollection(rec.name)); }
    out.push_back(std::move(f));
    if (!key.empty()) break;
  }
  return out;
}

Result<Found> ChromaRouter::Find(const Scope& scope, const std::string& key) {
  MOEEDB_ASSIGN_OR_RETURN(std::vector<Found> found, InScope(scope, key, true));
  if (found.empty()) return Status::NotFound("Collection [" + key.substr(0, 120) + "] does not exist");
  return std::move(found[0]);
}

Space ChromaRouter::SpaceOf(const Found& f) const {
  std::string s = "l2";
  if (f.configuration.is_object() && f.configuration.contains("hnsw") && f.configuration["hnsw"].is_object() &&
      f.configuration["hnsw"].contains("space") && f.configuration["hnsw"]["space"].is_string())
    s = f.configuration["hnsw"]["space"].get<std::string>();
  else if (f.metadata.is_object() && f.metadata.contains("hnsw:space") && f.metadata["hnsw:space"].is_string())
    s = f.metadata["hnsw:space"].get<std::string>();
  return s == "cosine" ? Space::kCosine : s == "ip" ? Space::kIp : Space::kL2;
}

json ChromaRouter::CollectionJson(const Found& f) const {
  const char* names[] = {"l2", "cosine", "ip"};
  json config = f.configuration.is_object() ? f.configuration : json::object();
  if (!config.contains("hnsw") || !config["hnsw"].is_object()) config["hnsw"] = json::object();
  config["hnsw"]["space"] = names[static_cast<int>(SpaceOf(f))];
  if (!config.contains("embedding_function")) config["embedding_function"] = nullptr;
  const VectorSchema& s = f.c->schema();
  json dim = s.kind == VectorKind::kPlain ? json(s.size) : json(f.c->dim_hs() + f.c->dim_rw());
  return {{"id", f.id}, {"name", f.chroma_name}, {"configuration_json", config}, {"metadata", f.metadata},
          {"tenant", f.scope.tenant}, {"database", f.scope.database}, {"log_position", 0}, {"version", 0}, {"dimension", dim},
          {"schema", nullptr}};
}

using Args = std::vector<std::string>;
using Handler = HttpResponse (*)(ChromaRouter&, const RouteRequest&, const Args&);

// The collection routes' shared prefix, after /api/v2.
#define CHROMA_DB "/tenants/{tenant}/databases/{database}"

constexpr Route<Handler> kRoutes[] = {
    {"GET", "/heartbeat", [](ChromaRouter&, const RouteRequest&, const Args&) {
       const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch());
       return JsonResponse({{"nanosecond heartbeat", ns.count()}});
     }},
    {"GET", "/version", [](ChromaRouter&, const RouteRequest&, const Args&) { return JsonResponse("1.0.0"); }},
    {"GET", "/healthcheck", [](ChromaRouter&, const RouteRequest&, const Args&) {
       return JsonResponse({{"is_executor_ready", true}, {"is_log_client_ready", true}});
     }},
    {"GET", "/pre-flight-checks", [](ChromaRouter& r, const RouteRequest&, const Args&) { return r.PreFlight(); }},
    {"GET", "/auth/identity", [](ChromaRouter&, const RouteRequest&, const Args&) {
       return JsonResponse({{"user_id", ""}, {"tenant", kTenant}, {"databases", {kDatabase}}});
     }},
    {"POST", "/tenants", [](ChromaRouter&, const RouteRequest& q, const Args&) { return Named(q, "tenant"); }},
    {"GET", "/tenants/{tenant}", [](ChromaRouter&, const RouteRequest&, const Args& a) {
       if (!ValidScopeName(a[0])) return ChromaError(400, "a tenant name is 1-64 characters from [a-zA-Z0-9_-]");
       return JsonResponse({{"name", a[0]}});
     }},
    {"POST", "/tenants/{tenant}/databases", [](ChromaRouter&, const RouteRequest& q, const Args& a) {
       if (!ValidScopeName(a[0])) return ChromaError(400, "a tenant name is 1-64 characters from [a-zA-Z0-9_-]");
       return Named(q, "database");
     }},
    {"GET", CHROMA_DB, [](ChromaRouter& r, const RouteRequest& q, const Args& a) { return r.InDatabase(q, a, "database"); }},
    {"DELETE", CHROMA_DB, [](ChromaRouter& r, const RouteRequest& q, const Args& a) { return r.InDatabase(q, a, "drop"); }},
    {"GET", CHROMA_DB "/collections_count",
     [](ChromaRouter& r, const RouteRequest& q, const Args& a) { return r.InDatabase(q, a, "count"); }},
    {"GET", CHROMA_DB "/collections", [](ChromaRouter& r, const RouteRequest& q, const Args& a) { return r.InDatabase(q, a, "list"); }},
    {"POST", CHROMA_DB "/collections",
     [](ChromaRouter& r, const RouteRequest& q, const Args& a) { return r.InDatabase(q, a, "create"); }},
    {"GET", CHROMA_DB "/collections/{id}",
     [](ChromaRouter& r, const RouteRequest& q, const Args& a) { return r.InCollection(q, a, "describe"); }},
    {"DELETE", CHROMA_DB "/collections/{id}",
     [](ChromaRouter& r, const RouteRequest& q, const Args& a) { return r.InCollection(q, a, "drop"); }},
    {"GET", CHROMA_DB "/collections/{id}/count",
     [](ChromaRouter& r, const RouteRequest& q, const Args& a) { return r.InCollection(q, a, "count"); }},
    {"POST", CHROMA_DB "/collections/{id}/{records}",
     [](ChromaRouter& r, const RouteRequest& q, const Args& a) { return r.InCollection(q, a, a[3]); }},
};

#undef CHROMA_DB

HttpResponse ChromaRouter::Handle(const RouteRequest& req, std::string* route) {
  return RouteTo(*this, kRoutes, req, 2, "/api/v2", route, [&](Handler h, const Args& args) { return h(*this, req, args); });
}

HttpResponse ChromaRouter::PreFlight() const {
  return JsonResponse({{"max_batch_size", core_->options().max_documents}, {"supports_base64_encoding", false}});
}

// Tenants and databases exist as soon as they are named: creating one is accepted.
HttpResponse Named(const RouteRequest& req, const char* what) {
  std::optional<json> body = req.body().empty() ? std::optional<json>(json::object()) : ParseJson(req.body());
  if (!body || !body->is_object() || !body->contains("name") || !(*body)["name"].is_string() ||
      !ValidScopeName((*body)["name"].get<std::string>()))
    return ChromaError(400, std::string("a ") + what + " name is 1-64 characters from [a-zA-Z0-9_-]");
  return JsonResponse(json::object());
}

HttpResponse ChromaRouter::InDatabase(const RouteRequest& req, const std::vector<std::string>& args, const std::string& what) {
  if (!ValidScopeName(args[0])) return ChromaError(400, "a tenant name is 1-64 characters from [a-zA-Z0-9_-]");
  if (!ValidScopeName(args[1])) return ChromaError(400, "a database name is 1-64 characters from [a-zA-Z0-9_-]");
  const Scope scope{args[0], args[1]};
  if (what == "database") return JsonResponse({{"id", DerivedId(args[0] + ":" + args[1], 0)}, {"name", args[1]}, {"tenant", args[0]}});
  if (what == "create") {
    std::optional<json> body = req.body().empty() ? std::optional<json>(json::object()) : ParseJson(req.body());
    if (!body || !body->is_object()) return ChromaError(400, "the body must be a JSON object");
    return Create(scope, *body);
  }
  auto here = InScope(scope, "", false);
  if (!here.ok()) return FromStatus(here.status());
  if (what == "count") return JsonResponse(here->size());
  if (what == "drop") {
    for (const Found& f : *here)
      if (Status st = core_->DropCollection(f.name); !st.ok()) return FromStatus(st);
    return JsonResponse(json::object());
  }
  size_t limit = here->size(), offset = 0;
  for (auto [key, out] : {std::pair{"limit", &limit}, std::pair{"offset", &offset}})
    if (req.query.count(key)) {
      char* end = nullptr;
      const long v = std::strtol(req.query.at(key).c_str(), &end, 10);
      if (*end != '\0' || v < 0) return ChromaError(400, std::string("'") + key + "' must be a non-negative integer");
      *out = static_cast<size_t>(v);
    }
  json out = json::array();
  for (size_t i = offset; i < here->size() && out.size() < limit; ++i) {
    Found& f = (*here)[i];
    auto c = core_->OpenCollection(f.name);  // the page's collections only
    if (!c.ok()) continue;
    f.c = *c;
    out.push_back(CollectionJson(f));
  }
  return JsonResponse(out);
}

HttpResponse ChromaRouter::InCollection(const RouteRequest& req, const std::vector<std::string>& args, const std::string& what) {
  if (!ValidScopeName(args[0])) return ChromaError(400, "a tenant name is 1-64 characters from [a-zA-Z0-9_-]");
  if (!ValidScopeName(args[1])) return ChromaError(400, "a database name is 1-64 characters from [a-zA-Z0-9_-]");
  std::optional<json> body = json::object();
  if (!req.body().empty()) body = ParseJson(req.body());
  if (!body || !body->is_object()) return ChromaError(400, "the body must be a JSON object");
  auto f = Find(Scope{args[0], args[1]}, args[2]);
  if (!f.ok()) return FromStatus(f.status());
  if (what == "describe") return JsonResponse(CollectionJson(*f));
  if (what == "count") return JsonResponse(f->c->size());
  if (what == "drop") {
    Status s = core_->DropCollection(f->name);
    if (!s.ok()) return FromStatus(s);
    return JsonResponse(json::object());
  }
  return Records(what, *f, *body);
}

HttpResponse ChromaRouter::Create(const Scope& scope, const json& body) {
  if (!body.contains("name") || !body["name"].is_string()) return ChromaError(400, "'name' must be a string");
  const std::string name = body["name"].get<std::string>();
  static const std::regex kName("^[a-zA-Z0-9][a-zA-Z0-9._-]{1,510}[a-zA-Z0-9]$");
  if (!std::regex_match(name, kName))
    return ChromaError(400, "Expected a name of 3-512 characters from [a-zA-Z0-9._-], starting and ending with [a-zA-Z0-9]");
  if (body.contains("metadata") && !body["metadata"].is_null() && !body["metadata"].is_object())
    return ChromaError(400, "'metadata' must be an object");
  if (body.contains("configuration") && !body["configuration"].is_null() && !body["configuration"].is_object())
    return ChromaError(400, "'configuration' must be an object");
  const bool get_or_create = body.value("get_or_create", false);
  const std::string store_name = scope.StoreName(name);
  if (core_->GetCollection(store_name).ok()) {
    if (!get_or_create) return ChromaError(409, "Collection [" + name + "] already exists");
    auto f = Find(scope, name);
    if (!f.ok()) return FromStatus(f.status());
    return JsonResponse(CollectionJson(*f));
  }
  json chroma = {{"id", NewId()}, {"metadata", body.value("metadata", json(nullptr))},
                 {"configuration", body.value("configuration", json::object())}};
  if (chroma["configuration"].is_null()) chroma["configuration"] = json::object();
  const json space = chroma["configuration"].contains("hnsw") && chroma["configuration"]["hnsw"].is_object()
                         ? chroma["configuration"]["hnsw"].value("space", json("l2")) : json("l2");
  if (space != "l2" && space != "cosine" && space != "ip") return ChromaError(400, "hnsw.space must be l2, cosine or ip");
  CollectionOptions o = core_->NewCollectionOptions();
  VectorSchema schema;
  schema.kind = VectorKind::kFused;
  json info = json::parse(schema.RecordIn(o.info_json).value());
  info["chroma"] = chroma;
  o.info_json = info.dump();
  o.lexical = LexicalSpec{true};
  auto c = core_->CreateCollection(store_name, o);
  if (!c.ok()) return FromStatus(c.status());
  auto f = Find(scope, name);
  if (!f.ok()) return FromStatus(f.status());
  return JsonResponse(CollectionJson(*f));
}

Status ChromaRouter::Retype(Found& f, size_t size) {
  const std::string& info_text = f.c->info_json();
  json chroma = json::parse(info_text)["chroma"];
  VectorSchema schema;
  schema.kind = VectorKind::kPlain;
  schema.size = size;
  const Space space = SpaceOf(f);
  schema.distance = space == Space::kL2 ? Distance::kEuclid : space == Space::kCosine ? Distance::kCosine : Distance::kDot;
  MOEEDB_ASSIGN_OR_RETURN(CollectionOptions o, PlainCollectionOptions(schema));
  json info = json::parse(o.info_json);
  info["chroma"] = chroma;
  o.info_json = info.dump();
  MOEEDB_RETURN_IF_ERROR(core_->DropCollection(f.name));
  MOEEDB_ASSIGN_OR_RETURN(f.c, core_->CreateCollection(f.name, o));
  return Status::OK();
}

HttpResponse ChromaRouter::Records(const std::string& what, Found& f, const json& body) {
  if (what == "add" || what == "upsert" || what == "update") return Write(f, body, what);
  if (what == "get") return Get(f, body);
  if (what == "query") return Query(f, body);
  if (what == "delete") return Delete(f, body);
  return ChromaError(404, "no record route '" + what.substr(0, 40) + "'");
}

HttpResponse ChromaRouter::Write(Found& f, const json& body, const std::string& how) {
  for (auto it = body.begin(); it != body.end(); ++it)
    if (it.key() != "ids" && it.key() != "embeddings" && it.key() != "documents" && it.key() != "metadatas" && it.key() != "uris")
      return ChromaError(400, "unknown field '" + it.key().substr(0, 80) + "'");
  if (!body.contains("ids") || !body["ids"].is_array() || body["ids"].empty()) return ChromaError(400, "'ids' must be a non-empty list");
  const json& ids = body["ids"];
  const size_t n = ids.size();
  if (n > core_->options().max_documents)
    return ChromaError(400, "batch of " + std::to_string(n) + " records is over max_batch_size " + std::to_string(core_->options().max_documents));
  auto column = [&](const char* key) -> Result<json> {
    if (!body.contains(key) || body[key].is_null()) return json();
    if (!body[key].is_array() || body[key].size() != n)
      return Status::InvalidArgument(std::string("'") + key + "' must be a list as long as 'ids'");
    return body[key];
  };
  auto embeddings = column("embeddings"), documents = column("documents"), metadatas = column("metadatas");
  for (auto* c : {&embeddings, &documents, &metadatas})
    if (!c->ok()) return FromStatus(c->status());
  if (body.contains("uris") && !body["uris"].is_null()) return ChromaError(400, "uris are not supported by moeedb");
  if (how != "update" && embeddings->is_null() && documents->is_null())
    return ChromaError(400, "give 'embeddings' or 'documents' for each record");
  // The first embeddings of a new collection fix its kind.
  if (!embeddings->is_null() && f.c->size() == 0 && f.c->schema().kind != VectorKind::kPlain && (*embeddings)[0].is_array() &&
      (*embeddings)[0].size() != f.c->dim_hs() + f.c->dim_rw() && !(*embeddings)[0].empty())
    if (Status s = Retype(f, (*embeddings)[0].size()); !s.ok()) return FromStatus(s);
  std::vector<StoredDocument> docs;
  std::set<std::string> seen;
  for (size_t i = 0; i < n; ++i) {
    const std::string where = "record " + std::to_string(i) + ": ";
    if (!ids[i].is_string() || ids[i].get<std::string>().empty()) return ChromaError(400, where + "ids must be non-empty strings");
    const std::string id = ids[i].get<std::string>();
    if (!seen.insert(id).second) return ChromaError(400, "Expected IDs to be unique, found duplicates of: " + id.substr(0, 80));
    auto old = f.c->Get(id);
    if (!old.ok()) return FromStatus(old.status());
    if (how == "add" && old->has_value()) continue;    // add never overwrites
    if (how == "update" && !old->has_value()) continue;  // update touches existing records only
    StoredDocument d = old->has_value() ? std::move(**old) : StoredDocument{id, "", "{}", {}, {}};
    if (!documents->is_null() && !(*documents)[i].is_null()) {
      if (!(*documents)[i].is_string()) return ChromaError(400, where + "documents must be strings");
      d.text = (*documents)[i].get<std::string>();
      if (embeddings->is_null()) d.hs.clear(), d.rw.clear();  // moeedb embeds the new text
    }
    if (!metadatas->is_null() && !(*metadatas)[i].is_null()) {
      const json& md = (*metadatas)[i];
      if (!md.is_object()) return ChromaError(400, where + "metadatas must be objects");
      json merged = old->has_value() && how != "add" ? json::parse(d.metadata_json) : json::object();
      for (auto it = md.begin(); it != md.end(); ++it) {
        if (it.value().is_null()) merged.erase(it.key());  // Chroma: a null value removes the key
        else if (it.value().is_object()) return ChromaError(400, where + "metadata values must be strings, numbers, booleans or lists");
        else merged[it.key()] = it.value();
      }
      d.metadata_json = merged.dump();
    }
    if (!embeddings->is_null() && !(*embeddings)[i].is_null()) {
      ClientVector v;
      auto e = Floats((*embeddings)[i], "the embedding");
      if (!e.ok()) return ChromaError(400, where + e.status().message());
      v.unnamed = std::move(e).value();
      if (Status s = ToStoredVectors(*f.c, v, &d); !s.ok()) return ChromaError(400, where + s.message());
    } else if (d.hs.empty() && f.c->schema().kind == VectorKind::kPlain) {
      return ChromaError(400, where + "this collection holds the client's own embeddings: give 'embeddings'");
    }
    docs.push_back(std::move(d));
  }
  if (!docs.empty()) {
    auto w = core_->db().Upsert(f.name, std::move(docs), true);  // records without vectors embedded by moeedb
    if (!w.ok()) return FromStatus(w.status());
    core_->CountStored(w->added.size());
  }
  return JsonResponse(json::object());
}

Result<std::vector<StoredDocument>> ChromaRouter::Matching(Found& f, const json& body) {
  ScanSpec scan;
  if (body.contains("where") && !body["where"].is_null()) MOEEDB_RETURN_IF_ERROR(scan.SetFilter(body["where"].dump()));
  if (body.contains("where_document") && !body["where_document"].is_null() &&
      !(body["where_document"].is_object() && body["where_document"].empty())) {
    MOEEDB_ASSIGN_OR_RETURN(scan.text_test, DocumentTest(body["where_document"], 0));
  }
  if (body.contains("ids") && !body["ids"].is_null()) {
    if (!body["ids"].is_array()) return Status::InvalidArgument("'ids' must be a list of strings");
    scan.ids.emplace();
    for (const auto& id : body["ids"]) {
      if (!id.is_string()) return Status::InvalidArgument("'ids' must be a list of strings");
      scan.ids->push_back(id.get<std::string>());
    }
  }
  MOEEDB_ASSIGN_OR_RETURN(ScanPage page, Scan(*f.c, scan));
  return std::move(page.documents);
}

HttpResponse ChromaRouter::Get(Found& f, const json& body) {
  auto include = Include(body, {"documents", "metadatas"});
  if (!include.ok()) return FromStatus(include.status());
  auto docs = Matching(f, body);
  if (!docs.ok()) return FromStatus(docs.status());
  size_t offset = 0, limit = docs->size();
  if (body.contains("offset") && !body["offset"].is_null()) {
    if (!body["offset"].is_number_unsigned()) return ChromaError(400, "'offset' must be a non-negative integer");
    offset = body["offset"].get<size_t>();
  }
  if (body.contains("limit") && !body["limit"].is_null()) {
    if (!body["limit"].is_number_unsigned()) return ChromaError(400, "'limit' must be a non-negative integer");
    limit = body["limit"].get<size_t>();
  }
  json ids = json::array(), documents = json::array(), metadatas = json::array(), embeddings = json::array();
  for (size_t i = offset; i < docs->size() && ids.size() < limit; ++i) {
    const StoredDocument& d = (*docs)[i];
    ids.push_back(d.id);
    documents.push_back(d.text.empty() ? json(nullptr) : json(d.text));
    metadatas.push_back(MetadataOut(d.metadata_json));
    if (include->count("embeddings")) {
      auto full = f.c->Get(d.id);
      if (full.ok() && full->has_value()) embeddings.push_back(FromStoredVectors(*f.c, **full).unnamed);
    }
  }
  json out = {{"ids", ids}, {"include", *include}, {"uris", nullptr}, {"data", nullptr}};
  out["documents"] = include->count("documents") ? documents : json(nullptr);
  out["metadatas"] = include->count("metadatas") ? metadatas : json(nullptr);
  out["embeddings"] = include->count("embeddings") ? embeddings : json(nullptr);
  return JsonResponse(out);
}

HttpResponse ChromaRouter::Query(Found& f, const json& body) {
  auto include = Include(body, {"documents", "metadatas", "distances"});
  if (!include.ok()) return FromStatus(include.status());
  if (!body.contains("query_embeddings") || !body["query_embeddings"].is_array() || body["query_embeddings"].empty())
    return ChromaError(400, "'query_embeddings' must be a non-empty list of embeddings");
  size_t n_results = 10;
  if (body.contains("n_results") && !body["n_results"].is_null()) {
    if (!body["n_results"].is_number_unsigned() || body["n_results"].get<size_t>() > kMaxSearchK)
      return ChromaError(400, "'n_results' must be an integer in [0, " + std::to_string(kMaxSearchK) + "]");
    n_results = body["n_results"].get<size_t>();
  }
  // where_document and ids restrict by text and id, which the index's filter
  // does not see: the query then ranks every record and keeps the matching ones.
  const bool narrowed = (body.contains("where_document") && !body["where_document"].is_null() && !body["where_document"].empty()) ||
                        (body.contains("ids") && !body["ids"].is_null());
  std::set<std::string> allowed;
  if (narrowed) {
    auto m = Matching(f, body);
    if (!m.ok()) return FromStatus(m.status());
    for (const auto& d : *m) allowed.insert(d.id);
  }
  SearchSpec so;
  so.k = narrowed ? f.c->size() : n_results;
  if (body.contains("where") && !body["where"].is_null())
    if (Status st = so.SetFilter(body["where"].dump()); !st.ok()) return FromStatus(st);
  const Space space = SpaceOf(f);
  const bool plain = f.c->schema().kind == VectorKind::kPlain;
  const double alpha = f.c->default_alpha();
  json ids = json::array(), distances = json::array(), documents = json::array(), metadatas = json::array(),
       embeddings = json::array();
  for (const auto& e : body["query_embeddings"]) {
    ClientVector v;
    auto floats = Floats(e, "the query embedding");
    if (!floats.ok()) return FromStatus(floats.status());
    v.unnamed = std::move(floats).value();
    auto q = ToVectorQuery(*f.c, v, "");
    if (!q.ok()) return FromStatus(q.status());
    auto hits = core_->db().SearchVectors(f.name, *q, so);
    if (!hits.ok()) return FromStatus(hits.status());
    json qi = json::array(), qd = json::array(), qdoc = json::array(), qm = json::array(), qe = json::array();
    for (const auto& h : *hits) {
      if (narrowed && !allowed.count(h.id)) continue;
      if (qi.size() == n_results) break;
      // A fused score comes over 1 + |alpha|: a cosine of the fused vectors.
      const double s = ClientScore(*f.c, *q, h.score, alpha);
      const double scale = 1 + std::fabs(alpha);
      double distance;
      if (plain) distance = space == Space::kL2 ? s * s : 1 - s;
      else distance = space == Space::kL2 ? 2 * scale * (1 - s) : space == Space::kCosine ? 1 - s : 1 - scale * s;
      qi.push_back(h.id);
      qd.push_back(distance);
      qdoc.push_back(h.text.empty() ? json(nullptr) : json(h.text));
      qm.push_back(MetadataOut(h.metadata_json));
      if (include->count("embeddings")) {
        auto full = f.c->Get(h.id);
        if (full.ok() && full->has_value()) qe.push_back(FromStoredVectors(*f.c, **full).unnamed);
      }
    }
    ids.push_back(qi), distances.push_back(qd), documents.push_back(qdoc), metadatas.push_back(qm), embeddings.push_back(qe);
  }
  json out = {{"ids", ids}, {"include", *include}, {"uris", nullptr}, {"data", nullptr}};
  out["distances"] = include->count("distances") ? distances : json(nullptr);
  out["documents"] = include->count("documents") ? documents : json(nullptr);
  out["metadatas"] = include->count("metadatas") ? metadatas : json(nullptr);
  out["embeddings"] = include->count("embeddings") ? embeddings : json(nullptr);
  return JsonResponse(out);
}

HttpResponse ChromaRouter::Delete(Found& f, const json& body) {
  const bool any = (body.contains("ids") && !body["ids"].is_null()) || (body.contains("where") && !body["where"].is_null()) ||
                   (body.contains("where_document") && !body["where_document"].is_null());
  if (!any) return ChromaError(400, "give 'ids', 'where' or 'where_document' (moeedb does not delete a whole collection this way)");
  auto docs = Matching(f, body);
  if (!docs.ok()) return FromStatus(docs.status());
  size_t limit = docs->size();
  if (body.contains("limit") && body["limit"].is_number_unsigned()) limit = std::min(limit, body["limit"].get<size_t>());
  std::vector<std::string> ids;
  for (size_t i = 0; i < limit; ++i) ids.push_back((*docs)[i].id);
  size_t deleted = 0;
  if (!ids.empty()) {
    auto w = f.c->Delete(ids, true);
    if (!w.ok()) return FromStatus(w.status());
    deleted = w->removed.size();
  }
  return JsonResponse({{"deleted", deleted}});
}

}  // namespace

std::unique_ptr<ProtocolRouter> NewChromaRouter(ServerCore* core) { return std::make_unique<ChromaRouter>(core); }

}  // namespace moeedb
