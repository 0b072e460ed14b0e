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
//   - created with one vector of the served model's fused size and Cosine,
//     unnamed or under a name of the client's ("" is Qdrant's unnamed one):
//     points are that fused vector (what moeedb's /v1/embeddings returns) or
//     Documents; a search ranks by cos_HS + alpha * cos_RW with the
//     collection's alpha (params.alpha picks another) and reports that score
//     over 1 + |alpha|, a cosine in [-1, 1];
//   - created with any other vectors (one, or up to 64 named, each its own
//     size and distance, each optional per point): a plain vector
//     collection, searched by Cosine, Dot or Euclid as declared (Euclid
//     reports the distance).
// Cosine vectors are answered at unit length, as Qdrant stores them. A point
// given as numbers takes its text (for the lexical index) from its payload:
// "content" (LangChain.js, Haystack), "page_content" (LangChain), or
// "_node_content"'s "text" (LlamaIndex).
//
// Point ids: an unsigned integer is stored as its decimal string ("42"), a
// UUID in any of its forms as its lower-case hyphenated one; ids read back
// are numbers when they are all digits, strings otherwise. Answers are
// {"result", "status": "ok", "time"}; errors {"status": {"error": "..."}, "time"}.
#pragma once

#include <chrono>
#include <string>
#include <unordered_map>
#include <vector>

#include "database/client_query.h"
#include "database/client_vectors.h"
#include "database/document_update.h"
#include "plugin/server/protocols/qdrant_wire.h"
#include "plugin/server/protocols/router.h"

namespace moeedb::qdrant {

using Clock = std::chrono::steady_clock;

// A point's "vector" as the client gave it: a Document (text), numbers, or
// named vectors each a Document or numbers.
struct PointVector {
  std::string text;      // a Document's
  ClientVector numbers;  // the client's own
};

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
  HttpResponse UpdateAliases(const Call& call);
  HttpResponse ListAliases(const Call& call);
  HttpResponse CreatePayloadIndex(const Call& call);
  HttpResponse DeletePayloadIndex(const Call& call);
  // qdrant_points.cpp
  HttpResponse Upsert(const Call& call);
  HttpResponse Retrieve(const Call& call);
  HttpResponse GetPoint(const Call& call);
  HttpResponse Delete(const Call& call);
  HttpResponse Scroll(const Call& call);
  HttpResponse Count(const Call& call);
  HttpResponse SetPayload(const Call& call);
  HttpResponse OverwritePayload(const Call& call);
  HttpResponse DeletePayload(const Call& call);
  HttpResponse ClearPayload(const Call& call);
  HttpResponse Facet(const Call& call);
  HttpResponse UpdateVectors(const Call& call);
  HttpResponse DeleteVectors(const Call& call);
  // A list of the point routes' operations, applied in order.
  HttpResponse Batch(const Call& call);
  // qdrant_query.cpp
  HttpResponse Query(const Call& call);
  HttpResponse QueryBatch(const Call& call);
  HttpResponse Search(const Call& call);
  HttpResponse SearchBatch(const Call& call);
  HttpResponse QueryGroups(const Call& call);
  HttpResponse MatrixPairs(const Call& call);
  HttpResponse MatrixOffsets(const Call& call);

 private:
  // Query vectors by a Document's text, embedded once per request.
  using QueryCache = std::unordered_map<std::string, Embedding>;

  // The point's vector as JSON as the client reads it back.
  json VectorJson(const VectorCollection& c, const StoredDocument& d, const VectorSelector& which) const;
  // A point of an answer; `scored` adds its score.
  json PointJson(VectorCollection* c, const std::string& id, double score, const std::string& metadata_json,
                 const PayloadSelector& payload, const VectorSelector& vectors, bool scored) const;
  // A point's "vector" (numbers, named vectors, or Documents).
  Result<PointVector> PointVectorOf(const json& v) const;
  // The text of a Document {"text", "model"}.
  Result<std::string> DocumentText(const json& d) const;
  // A query's vectors: a Document, numbers, or {"nearest": either}; `use`
  // names the vector searched (`using`).
  Result<VectorQuery> QueryVectors(VectorCollection* c, QueryCache* cache, const json& q, const std::string& use);
  // `query` with every point id in it (nearest, recommend's examples,
  // discover's target, context pairs) replaced by that point's vector, read
  // from the request's `lookup_from` collection and vector if any, else the
  // vector `using` names; the ids of this collection's points so named are
  // appended to `mentioned` (Qdrant leaves them out of the answer).
  Result<json> ResolveIds(VectorCollection* c, const json& request, const json& query, std::vector<std::string>* mentioned);
  // A recommend, discover or context query (its examples numbers) as an ExampleQuery.
  Result<ExampleQuery> ExamplesOf(const json& query, const std::string& use);
  // One search of a query or prefetch `j`: its spec (k counting `offset`)
  // and, unless `query` is null, the vectors of `query`.
  Result<ClientSearch> SearchOf(VectorCollection* c, QueryCache* cache, const json& j, const json& query, size_t offset);
  // The payload routes: `kind` of change to the selected points.
  HttpResponse ChangePayload(const Call& call, MetadataChange::Kind kind);
  // A query request read into a ClientQuery, with what its points answer.
  struct ParsedQuery {
    ClientQuery query;
    PayloadSelector payload;
    VectorSelector vectors;
  };
  Result<ParsedQuery> ParseQuery(VectorCollection* c, const json& j, QueryCache* cache, ReadConsistency consistency);
  // A query's prefetches (each a search, or a query of its own when it has
  // prefetches) and how `query` combines them, into `q`.
  Status ParsePrefetches(VectorCollection* c, QueryCache* cache, const std::vector<json>& prefetches, const json& query,
                         bool vectorless, ClientQuery* q);
  // The search matrix as pairs or as offsets.
  HttpResponse Matrix(const Call& call, bool pairs);
  // A query request's answer (Query and Search share it); `points` the
  // scored points, or an error.
  Result<json> RunQuery(VectorCollection* c, const json& j, QueryCache* cache, ReadConsistency consistency);
  // A search request (the older API) as its scored points.
  Result<json> RunSearch(VectorCollection* c, const json& j, QueryCache* cache, ReadConsistency consistency);
  // The request's `?consistency=` as moeedb's read consistency.
  Result<ReadConsistency> Consistency(const Call& call);
  // Query, Search and their batches: each search run as a query or as the older search.
  HttpResponse Answer(const Call& call, bool older_search, bool batch);
};

}  // namespace moeedb::qdrant
