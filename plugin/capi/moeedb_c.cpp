// The C API over the service layer. Every entry point catches everything:
// no exception crosses extern "C".
#include "moeedb/moeedb.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "database/database.h"
#include "database/embedding_setup.h"
#include "database/spec/collection_spec.h"
#include "database/spec/search_spec.h"
#include "database/vector_collection.h"

using namespace moeedb;

// The C API serves one setup: the model folder moeedb_open names, with its
// own defaults; its collections must have been built with it.
struct moeedb_db {
  std::unique_ptr<Database> db;
  const EmbeddingSetup* setup = nullptr;  // owned by db
};

struct moeedb_hits {
  std::vector<SearchHit> hits;
};

namespace {

thread_local std::string g_last_error;

moeedb_status Code(const Status& s) {
  g_last_error = s.ok() ? "" : s.message();
  switch (s.code()) {
    case Status::Code::kOk: return MOEEDB_OK;
    case Status::Code::kInvalidArgument: return MOEEDB_INVALID_ARGUMENT;
    case Status::Code::kNotFound: return MOEEDB_NOT_FOUND;
    case Status::Code::kCorruption: return MOEEDB_CORRUPTION;
    case Status::Code::kNotSupported: return MOEEDB_NOT_SUPPORTED;
    case Status::Code::kIOError: return MOEEDB_IO_ERROR;
    case Status::Code::kResourceExhausted: return MOEEDB_RESOURCE_EXHAUSTED;
    case Status::Code::kUnavailable: return MOEEDB_UNAVAILABLE;
    case Status::Code::kOutcomeUnknown: return MOEEDB_OUTCOME_UNKNOWN;
    default: return MOEEDB_INTERNAL;
  }
}

template <typename F>
moeedb_status Guard(F&& f) {
  try {
    return Code(f());
  } catch (const std::exception& e) {
    g_last_error = std::string("internal error: ") + e.what();
    return MOEEDB_INTERNAL;
  } catch (...) {
    g_last_error = "internal error";
    return MOEEDB_INTERNAL;
  }
}

using json = nlohmann::json;

// A JSON object's text, parsed; InvalidArgument otherwise.
Result<json> ParseObject(const char* text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument("the spec must be a JSON object");
  return j;
}

// The collection (created with the served setup when `create` and absent);
// InvalidArgument when it was built with another setup.
Result<std::shared_ptr<VectorCollection>> GetCollection(moeedb_db* db, const std::string& name, bool create) {
  auto c = db->db->OpenCollection(name);
  if (!c.ok() && c.status().code() == Status::Code::kNotFound && create) {
    MOEEDB_ASSIGN_OR_RETURN(CollectionOptions o, db->db->NewCollectionOptions(*db->setup));
    c = db->db->CreateCollection(name, o);
  }
  if (!c.ok()) return c.status();
  MOEEDB_RETURN_IF_ERROR(db->setup->CheckMatches((*c)->info_json()));
  return c;
}

}  // namespace

extern "C" {

const char* moeedb_last_error(void) { return g_last_error.c_str(); }

moeedb_status moeedb_open(const char* db_path, const char* model_dir, int threads, moeedb_db** out) {
  return Guard([&]() -> Status {
    if (db_path == nullptr || model_dir == nullptr || out == nullptr) return Status::InvalidArgument("NULL argument");
    *out = nullptr;
    auto db = std::make_unique<moeedb_db>();
    DatabaseOptions o;
    o.compute.threads = threads;
    MOEEDB_ASSIGN_OR_RETURN(db->db, Database::Open(db_path, std::move(o)));
    EmbeddingSpec cfg;
    cfg.model_dir = model_dir;
    MOEEDB_ASSIGN_OR_RETURN(db->setup, db->db->LoadSetup(cfg));
    *out = db.release();
    return Status::OK();
  });
}

void moeedb_close(moeedb_db* db) {
  if (db == nullptr) return;
  try {
    delete db;  // the database snapshots its collections' indexes
  } catch (...) {
  }
}

size_t moeedb_dim_hs(const moeedb_db* db) { return db ? db->setup->dim_hs() : 0; }
size_t moeedb_dim_rw(const moeedb_db* db) { return db ? db->setup->dim_rw() : 0; }

moeedb_status moeedb_embed(moeedb_db* db, const char* text, float* hs, float* rw, int* tokens) {
  return Guard([&]() -> Status {
    if (db == nullptr || text == nullptr || hs == nullptr || rw == nullptr) return Status::InvalidArgument("NULL argument");
    MOEEDB_ASSIGN_OR_RETURN(std::vector<Embedding> e, db->setup->Embed({text}));
    std::copy(e[0].hs.begin(), e[0].hs.end(), hs);
    std::copy(e[0].rw.begin(), e[0].rw.end(), rw);
    if (tokens) *tokens = static_cast<int>(e[0].tokens);
    return Status::OK();
  });
}

moeedb_status moeedb_upsert(moeedb_db* db, const char* collection, size_t n, const char* const* ids,
                            const char* const* texts, const char* const* metadata_json) {
  return Guard([&]() -> Status {
    if (db == nullptr || collection == nullptr || (n > 0 && (ids == nullptr || texts == nullptr)))
      return Status::InvalidArgument("NULL argument");
    std::vector<StoredDocument> docs;
    for (size_t i = 0; i < n; ++i) {
      if (ids[i] == nullptr || texts[i] == nullptr) return Status::InvalidArgument("NULL id or text at " + std::to_string(i));
      docs.push_back({ids[i], texts[i], metadata_json && metadata_json[i] ? metadata_json[i] : "{}", {}, {}});
    }
    MOEEDB_RETURN_IF_ERROR(GetCollection(db, collection, true).status());
    return db->db->Upsert(collection, std::move(docs), /*sync=*/true).status();
  });
}

moeedb_status moeedb_delete(moeedb_db* db, const char* collection, size_t n, const char* const* ids, size_t* deleted) {
  return Guard([&]() -> Status {
    if (db == nullptr || collection == nullptr || (n > 0 && ids == nullptr)) return Status::InvalidArgument("NULL argument");
    std::vector<std::string> v;
    for (size_t i = 0; i < n; ++i) {
      if (ids[i] == nullptr) return Status::InvalidArgument("NULL id at " + std::to_string(i));
      v.push_back(ids[i]);
    }
    MOEEDB_ASSIGN_OR_RETURN(std::shared_ptr<VectorCollection> c, GetCollection(db, collection, false));
    MOEEDB_ASSIGN_OR_RETURN(WriteResult r, c->Delete(v, true));
    if (deleted) *deleted = r.removed.size();
    return Status::OK();
  });
}

namespace {

Status SearchInto(moeedb_db* db, const char* collection, const char* query, const SearchSpec& so, moeedb_hits** out) {
  if (db == nullptr || collection == nullptr || query == nullptr || out == nullptr) return Status::InvalidArgument("NULL argument");
  *out = nullptr;
  MOEEDB_RETURN_IF_ERROR(GetCollection(db, collection, false).status());
  MOEEDB_ASSIGN_OR_RETURN(std::vector<SearchHit> hits, db->db->Search(collection, so));
  *out = new moeedb_hits{std::move(hits)};
  return Status::OK();
}

}  // namespace

moeedb_status moeedb_search(moeedb_db* db, const char* collection, const char* query, size_t k, float alpha,
                            const char* mode, const char* filter_json, moeedb_hits** out) {
  return Guard([&]() -> Status {
    SearchSpec so;
    so.k = k;
    so.alpha = alpha;
    MOEEDB_ASSIGN_OR_RETURN(so.mode, kQueryModes.Parse(mode ? mode : "fused"));
    if (query) so.query = query;
    if (filter_json) MOEEDB_RETURN_IF_ERROR(so.SetFilter(filter_json));
    return SearchInto(db, collection, query, so, out);
  });
}

moeedb_status moeedb_search_hybrid(moeedb_db* db, const char* collection, const char* query, size_t k, float alpha,
                                   float beta, const char* fusion, const char* filter_json, moeedb_hits** out) {
  return Guard([&]() -> Status {
    SearchSpec so;
    so.k = k;
    so.mode = QueryMode::kHybrid;
    so.alpha = alpha;
    so.beta = beta;
    if (fusion) { MOEEDB_ASSIGN_OR_RETURN(so.fusion, kFusionKinds.Parse(fusion)); }
    if (query) so.query = query;
    if (filter_json) MOEEDB_RETURN_IF_ERROR(so.SetFilter(filter_json));
    MOEEDB_RETURN_IF_ERROR(so.Check(spec::Spelling::kJson));
    return SearchInto(db, collection, query, so, out);
  });
}

moeedb_status moeedb_search_json(moeedb_db* db, const char* collection, const char* spec_json, moeedb_hits** out) {
  return Guard([&]() -> Status {
    if (spec_json == nullptr) return Status::InvalidArgument("NULL argument");
    MOEEDB_ASSIGN_OR_RETURN(json body, ParseObject(spec_json));
    MOEEDB_ASSIGN_OR_RETURN(SearchSpec so, SearchSpecFromJson(body));
    return SearchInto(db, collection, so.query.c_str(), so, out);
  });
}

moeedb_status moeedb_create_collection_json(moeedb_db* db, const char* collection, const char* spec_json) {
  return Guard([&]() -> Status {
    if (db == nullptr || collection == nullptr || spec_json == nullptr) return Status::InvalidArgument("NULL argument");
    MOEEDB_ASSIGN_OR_RETURN(json body, ParseObject(spec_json));
    MOEEDB_ASSIGN_OR_RETURN(CollectionSpec spec, CollectionSpecFromJson(body));
    MOEEDB_ASSIGN_OR_RETURN(CollectionOptions model, db->db->NewCollectionOptions(*db->setup));
    MOEEDB_ASSIGN_OR_RETURN(CollectionOptions o, spec.NewOptions(model));
    return db->db->CreateCollection(collection, o).status();
  });
}

moeedb_status moeedb_spec_json(const char* kind, const char* spec_json, char** out) {
  return Guard([&]() -> Status {
    if (kind == nullptr || spec_json == nullptr || out == nullptr) return Status::InvalidArgument("NULL argument");
    *out = nullptr;
    MOEEDB_ASSIGN_OR_RETURN(json body, ParseObject(spec_json));
    json written;
    if (std::strcmp(kind, "search") == 0) {
      MOEEDB_ASSIGN_OR_RETURN(SearchSpec s, SearchSpecFromJson(body));
      written = SearchSpecToJson(s);
    } else if (std::strcmp(kind, "collection") == 0) {
      MOEEDB_ASSIGN_OR_RETURN(CollectionSpec s, CollectionSpecFromJson(body));
      written = CollectionSpecToJson(s);
    } else {
      return Status::InvalidArgument("unknown spec kind '" + std::string(kind).substr(0, 40) + "' (search or collection)");
    }
    *out = strdup(written.dump().c_str());
    return *out ? Status::OK() : Status::ResourceExhausted("out of memory");
  });
}

void moeedb_free(void* p) { std::free(p); }

size_t moeedb_hits_count(const moeedb_hits* h) { return h ? h->hits.size() : 0; }
const char* moeedb_hit_id(const moeedb_hits* h, size_t i) { return h && i < h->hits.size() ? h->hits[i].id.c_str() : nullptr; }
const char* moeedb_hit_text(const moeedb_hits* h, size_t i) { return h && i < h->hits.size() ? h->hits[i].text.c_str() : nullptr; }
const char* moeedb_hit_metadata(const moeedb_hits* h, size_t i) {
  return h && i < h->hits.size() ? h->hits[i].metadata_json.c_str() : nullptr;
}
float moeedb_hit_score(const moeedb_hits* h, size_t i) { return h && i < h->hits.size() ? h->hits[i].score : 0.0f; }
float moeedb_hit_score_hs(const moeedb_hits* h, size_t i) { return h && i < h->hits.size() ? h->hits[i].score_hs : 0.0f; }
float moeedb_hit_score_rw(const moeedb_hits* h, size_t i) { return h && i < h->hits.size() ? h->hits[i].score_rw : 0.0f; }
float moeedb_hit_score_lex(const moeedb_hits* h, size_t i) { return h && i < h->hits.size() ? h->hits[i].score_lex : 0.0f; }
void moeedb_hits_free(moeedb_hits* h) { delete h; }

}  // extern "C"
