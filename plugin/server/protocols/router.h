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

// One route of a protocol's route table: a method, a path pattern and the
// handler its router runs. A pattern is the path's segments after the
// router's prefix ("/collections/{name}/search"): "{x}" matches any one
// segment, a trailing "/*" the rest (none or more). Rows are tried in order,
// so a literal segment listed before a placeholder wins.
template <typename Handler>
struct Route {
  const char* method;
  const char* pattern;
  Handler handle;
};

// Whether `parts` from `skip` on match `pattern`; fills *args with the
// segments "{x}" matched (and, for "/*", the rest joined by '/').
bool MatchRoute(const char* pattern, const std::vector<std::string>& parts, size_t skip, std::vector<std::string>* args);

class ProtocolRouter;

// Runs the first row of `table` whose pattern and method match `req` (its
// parts from `skip` on): `run(row.handle, args)`; *route is `prefix` + the
// pattern (the metrics label). A path no pattern matches is 404, one matched
// only under other methods 405 naming them: both in `router`'s error shape.
template <typename Handler, size_t N, typename Run>
HttpResponse RouteTo(const ProtocolRouter& router, const Route<Handler> (&table)[N], const RouteRequest& req, size_t skip,
                     const std::string& prefix, std::string* route, Run&& run);

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

template <typename Handler, size_t N, typename Run>
HttpResponse RouteTo(const ProtocolRouter& router, const Route<Handler> (&table)[N], const RouteRequest& req, size_t skip,
                     const std::string& prefix, std::string* route, Run&& run) {
  std::vector<std::string> args;
  std::string allowed;
  for (const Route<Handler>& r : table) {
    if (!MatchRoute(r.pattern, req.parts, skip, &args)) continue;
    if (req.method() != r.method) {
      if (allowed.find(r.method) == std::string::npos) allowed += (allowed.empty() ? "" : " or ") + std::string(r.method);
      continue;
    }
    *route = prefix + r.pattern;
    return run(r.handle, args);
  }
  *route = "unknown";
  if (!allowed.empty()) return router.Error(405, "method " + req.method().substr(0, 16) + " not allowed here: use " + allowed);
  std::string path;
  for (size_t i = skip; i < req.parts.size(); ++i) path += "/" + req.parts[i];
  return router.Error(404, "no route " + req.method().substr(0, 16) + " " + prefix + path.substr(0, 160));
}

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
