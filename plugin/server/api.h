// Api: every HTTP route of `moeedb serve`, as a pure function from a parsed
// request to a response (the socket layer is http_server.cpp), so routes are
// tested without sockets. Never throws; errors are {"error": {"message",
// "type", "code"}} with a 4xx status for the caller's mistakes, 5xx for ours.
//
// Routes (docs/api.md): OpenAI POST /v1/embeddings and GET /v1/models; TEI
// POST /embed; GET /health, /info, /metrics; the collections API under
// /collections; the web console's files under /console. With an API key set,
// every route but /health and /console needs "Authorization: Bearer KEY".
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plugin/server/embed_queue.h"
#include "plugin/service/embedding_setup.h"
#include "index/standardizer.h"
#include "plugin/service/vector_collection.h"

namespace moeedb {

struct HttpRequest {
  std::string method;                         // "GET", "POST", ...
  std::string target;                         // path and query
  std::map<std::string, std::string> headers; // lower-case names
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

struct ApiOptions {
  std::string served_model_name = "moeedb";
  std::string api_key;                 // empty: no authentication
  size_t max_inputs = 2048;            // OpenAI's limit per request
  size_t tei_max_batch = 32;           // TEI's max client batch size
  size_t max_tokens_per_input = 8192;
  bool truncate = false;               // over-long inputs: truncate (true) or 422 (false)
  size_t max_documents = 1000;         // per upsert request
};

class Api {
 public:
  // All pointers must outlive the Api. The calibration statistics standardize
  // the fused vectors ([z(hs)/|.|; z(rw)/|.|]).
  Api(ApiOptions options, const EmbeddingSetup* setup, EmbedQueue* queue, Store* store, std::string std_hs_json,
      std::string std_rw_json);
  ~Api();

  HttpResponse Handle(const HttpRequest& request);
  // Called by the socket layer for requests it rejects itself (body too large, ...).
  void Record(const std::string& route, int status, double seconds);
  std::string MetricsText();

  // Collections opened so far (for a graceful shutdown: snapshot them).
  Status SaveIndexes();

 private:
  struct Metrics;
  HttpResponse Route(const HttpRequest& request, std::string* route);
  HttpResponse Embeddings(const std::string& body);
  HttpResponse TeiEmbed(const std::string& body);
  HttpResponse Info();
  HttpResponse Collections(const std::string& method, const std::vector<std::string>& parts,
                           const std::map<std::string, std::string>& query, const std::string& body, std::string* route);
  HttpResponse ListDocuments(const std::string& name, const std::map<std::string, std::string>& query);
  Result<std::vector<Embedding>> EmbedTexts(const std::vector<std::string>& texts, bool allow_truncate);
  Result<VectorCollection*> OpenCollection(const std::string& name);
  std::vector<float> Fused(const Embedding& e) const;

  ApiOptions options_;
  const EmbeddingSetup* setup_;
  EmbedQueue* queue_;
  Store* store_;
  Standardizer std_hs_, std_rw_;
  std::mutex collections_mu_;
  std::map<std::string, std::unique_ptr<VectorCollection>> collections_;
  std::unique_ptr<Metrics> metrics_;
};

}  // namespace moeedb
