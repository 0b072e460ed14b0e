// Api: every HTTP route of `moeedb serve`, as a pure function from a parsed
// request to a response (the socket layer is http_server.cpp), so routes are
// tested without sockets. Never throws.
//
// It answers GET /health, /metrics and the web console under /console
// itself, and hands every other path to the protocol router that owns it
// (protocols/): OpenAI (/v1), TEI (/, /embed, /rerank, ...), the collections
// API (/collections), Ollama (/api), Weaviate's inference protocol
// (/.well-known, /meta, /vectors), a Qdrant REST subset (/qdrant);
// docs/server.md lists them. With an API key
// set, every route but /health and /console needs "Authorization: Bearer KEY"
// (or "api-key: KEY"); a refusal comes in the owning protocol's error shape.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plugin/server/protocols/router.h"
#include "plugin/server/server_core.h"

namespace moeedb {

class Api {
 public:
  // All pointers must outlive the Api; `db` embeds through `queues`
  // (QueuedEmbedFunction). `served` is the setup of the embedding routes;
  // the calibration statistics standardize its fused vectors
  // ([z(hs)/|.|; z(rw)/|.|]).
  Api(ApiOptions options, Database* db, const EmbeddingSetup* served, EmbedQueues* queues, std::string std_hs_json,
      std::string std_rw_json);
  ~Api();

  HttpResponse Handle(const HttpRequest& request);
  // Called by the socket layer for requests it rejects itself (body too large, ...).
  void Record(const std::string& route, int status, double seconds);
  std::string MetricsText();

  // Collections opened so far (for a graceful shutdown: snapshot them).
  Status SaveIndexes() { return core_.SaveIndexes(); }

 private:
  struct Metrics;
  HttpResponse Route(const HttpRequest& request, std::string* route);

  ServerCore core_;
  std::vector<std::unique_ptr<ProtocolRouter>> routers_;
  std::unique_ptr<Metrics> metrics_;
};

}  // namespace moeedb
