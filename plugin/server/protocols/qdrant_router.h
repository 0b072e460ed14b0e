// The Qdrant router's class, shared by its three files: qdrant.cpp (the
// route table, collections), qdrant_points.cpp (upsert, retrieve, scroll,
// count, delete) and qdrant_query.cpp (query, search, MMR, prefetch fusion).
//
// A subset of Qdrant's REST API, under /qdrant on the main port (the JS
// client's `prefix` option) and at the root of `--qdrant-port`, over the
// same collections as moeedb's own API. A collection is one of
// (vector_schema.h):
//   - created with no vectors or named "hs"/"rw" of the served model's sizes:
//     points are Documents {"text", "model"} moeedb embeds, or the named
//     vectors as numbers;
//   - created with one unnamed vector of the served model's fused size
//     (Cosine): points are that fused vector (what moeedb's /v1/embeddings
//     returns) or Documents; a search scores cos_HS + alpha * cos_RW with the
//     collection's alpha (params.alpha picks another), as a text search would;
//   - created with any other size: a plain vector collection, searched by
//     Cosine, Dot or Euclid as asked (Euclid reports the distance).
// A point given as numbers takes its text (for the lexical index) from its
// payload: "content" (LangChain), or "_node_content"'s "text" (LlamaIndex).
//
// Point ids: an unsigned integer is stored as its decimal string ("42"), a
// UUID as its lower-case hyphenated form; ids read back are numbers when
// they are all digits, strings otherwise. Answers are {"result", "status":
// "ok", "time"}; errors {"status": {"error": "..."}, "time"}.
#pragma once

#include <chrono>
#include <string>
#include <unordered_map>
#include <vector>

#include "database/client_vectors.h"
#include "plugin/server/protocols/qdrant_wire.h"
#include "plugin/server/protocols/router.h"

namespace moeedb::qdrant {

using Clock = std::chrono::steady_clock;

HttpResponse QdrantError(int status, const std::string& message, double seconds = 0);
HttpResponse Ok(const json& result, Clock::time_point t0);
HttpResponse FromStatus(const Status& s);

// One request as a route handler sees it.
struct Call {
  const RouteRequest& req;
  std::vector<std::string> args;  // the path's {placeholders}, in order
  json body;                      // {} when empty
  bool wait = false;              // ?wait=true
  Clock::time_point t0;
  const std::string& name() const { return args.at(0); }
};

class QdrantRouter final : public ProtocolRouter {
 public:
  using ProtocolRouter::ProtocolRouter;
  bool Owns(const std::vector<std::string>& parts) const override { return !parts.empty() && parts[0] == "qdrant"; }
  HttpResponse Error(int status, const std::string& message) const override { return QdrantError(status, message); }
  HttpResponse Handle(const RouteRequest& req, std::string* route) override;

  // Route handlers (qdrant.cpp).
  HttpResponse Root(const Call& call);
  HttpResponse ListCollections(const Call& call);
  HttpResponse GetCollection(const Call& call);
  HttpResponse CreateCollection(const Call& call);
  HttpResponse UpdateCollection(const Call& call);
  HttpResponse DeleteCollection(const Call& call);
  HttpResponse CollectionExists(const Call& call);
  HttpResponse CreatePayloadIndex(const Call& call);
  HttpResponse DeletePayloadIndex(const Call& call);
  // qdrant_points.cpp
  HttpResponse Upsert(const Call& call);
  HttpResponse Retrieve(const Call& call);
  HttpResponse GetPoint(const Call& call);
  HttpResponse Delete(const Call& call);
  HttpResponse Scroll(const Call& call);
  HttpResponse Count(const Call& call);
  // qdrant_query.cpp
  HttpResponse Query(const Call& call);
  HttpResponse QueryBatch(const Call& call);
  HttpResponse Search(const Call& call);
  HttpResponse SearchBatch(const Call& call);

 private:
  // A scored candidate: its id, both exact cosines, the score that ranks it
  // (higher is better) and the score the client sees.
  struct Candidate {
    std::string id;
    double hs = 0, rw = 0, score = 0, shown = 0;
    std::string metadata_json;
  };
  // Query vectors by a Document's text, embedded once per request.
  using QueryCache = std::unordered_map<std::string, Embedding>;

  // The point's vector as JSON as the client reads it back.
  json VectorJson(const VectorCollection& c, const StoredDocument& d) const;
  // A point of an answer; `scored` adds its score.
  json PointJson(VectorCollection* c, const std::string& id, double score, const std::string& metadata_json,
                 const PayloadSelector& payload, bool vectors, bool scored) const;
  // The text of a Document {"text", "model"}.
  Result<std::string> DocumentText(const json& d) const;
  // A query's vectors: a Document, numbers, or {"nearest": either}; `use`
  // names the vector searched ("", "hs" or "rw").
  Result<VectorQuery> QueryVectors(VectorCollection* c, QueryCache* cache, const json& q, const std::string& use);
  // One dense search by `q` with the spec's k, filter, alpha and exact.
  Result<std::vector<Candidate>> Dense(VectorCollection* c, const VectorQuery& q, const SearchSpec& spec);
  // A query request's answer (Query and Search share it); `points` the
  // scored points, or an error.
  Result<json> RunQuery(VectorCollection* c, const json& j, QueryCache* cache);
  // A search request (the older API) as its scored points.
  Result<json> RunSearch(VectorCollection* c, const json& j, QueryCache* cache);
  // Query, Search and their batches: each search run as a query or as the older search.
  HttpResponse Answer(const Call& call, bool older_search, bool batch);
  // MMR over the candidates of `q` (Query with {"nearest", "mmr"}).
  Result<std::vector<Candidate>> Mmr(VectorCollection* c, const VectorQuery& q, const json& mmr, const SearchSpec& spec);

};

}  // namespace moeedb::qdrant
