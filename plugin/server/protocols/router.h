// A protocol router: one wire protocol of `moeedb serve` (OpenAI, TEI, the
// collections API, Ollama, Weaviate's inference protocol), as a thin layer
// over ServerCore (and a subset of Qdrant's REST API). Api (api.h) gives each request to the router that owns
// its path, after authenticating it in that router's error shape.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plugin/server/server_core.h"

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

// A request as the routers see it: the path's segments %-decoded, the query's parameters.
struct RouteRequest {
  const HttpRequest& http;
  std::vector<std::string> parts;
  std::map<std::string, std::string> query;
  const std::string& method() const { return http.method; }
  const std::string& body() const { return http.body; }
};

class ProtocolRouter {
 public:
  explicit ProtocolRouter(ServerCore* core) : core_(core) {}
  virtual ~ProtocolRouter() = default;
  // Whether this protocol answers the path.
  virtual bool Owns(const std::vector<std::string>& parts) const = 0;
  // This protocol's error body for `status` (authentication, internal
  // errors); moeedb's own shape (NativeStatusError) unless it has another.
  virtual HttpResponse Error(int status, const std::string& message) const;
  // The answer to a request for a path it owns; *route is the metrics label.
  virtual HttpResponse Handle(const RouteRequest& request, std::string* route) = 0;

 protected:
  ServerCore* const core_;  // every route calls the service core, nothing below it
};

std::unique_ptr<ProtocolRouter> NewOpenAiRouter(ServerCore* core);
std::unique_ptr<ProtocolRouter> NewTeiRouter(ServerCore* core);
std::unique_ptr<ProtocolRouter> NewCollectionsRouter(ServerCore* core);
std::unique_ptr<ProtocolRouter> NewClusterRouter(ServerCore* core);
std::unique_ptr<ProtocolRouter> NewOllamaRouter(ServerCore* core);
std::unique_ptr<ProtocolRouter> NewWeaviateRouter(ServerCore* core);
std::unique_ptr<ProtocolRouter> NewQdrantRouter(ServerCore* core);
std::unique_ptr<ProtocolRouter> NewChromaRouter(ServerCore* core);

// moeedb's own error shape, which OpenAI's clients read too:
// {"error": {"message", "type", "code"}}.
HttpResponse NativeError(int status, const std::string& message, const std::string& type, const std::string& code = "");
HttpResponse NativeBadRequest(const std::string& message, const std::string& code = "");
// The error of a status alone (what ProtocolRouter::Error gives for moeedb's shape):
// 401 an invalid API key, 5xx a server error, else an invalid request.
HttpResponse NativeStatusError(int status, const std::string& message);
// 400 / 404 / 429 / 500 by the status's code.
HttpResponse NativeFromStatus(const Status& s);
// {"error": "message"}: the error shape of Ollama and of Weaviate's inference modules.
HttpResponse MessageError(int status, const std::string& message);
HttpResponse JsonResponse(const nlohmann::json& j, int status = 200);
// The body as a JSON value; nullopt when it is not JSON.
std::optional<nlohmann::json> ParseJson(const std::string& body);
// A client's vector (a JSON array of numbers) as floats; InvalidArgument
// naming `what` for anything else (empty, null as JSON writes NaN, a string,
// a number beyond float range).
Result<std::vector<float>> Floats(const nlohmann::json& a, const std::string& what);
// A text the model can embed: not blank, valid UTF-8. Empty when fine, else why not.
std::string TextProblem(const std::string& text);

}  // namespace moeedb
