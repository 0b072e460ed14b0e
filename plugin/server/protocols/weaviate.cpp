// Weaviate's text2vec-transformers inference protocol: GET /.well-known/live
// and /.well-known/ready (204), GET /meta, POST /vectors with one text
// ({"text", "config"} -> {"text", "vector", "dim"}) or a batch
// ({"texts", "config"} -> {"vectors", "dims"}). The vector is the fused one;
// config.pooling_strategy and task_type are accepted and change nothing (the
// served setup fixes the pooling). Errors are {"error": "..."}.
#include "plugin/server/protocols/router.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

class WeaviateRouter final : public ProtocolRouter {
 public:
  using ProtocolRouter::ProtocolRouter;
  bool Owns(const std::vector<std::string>& parts) const override {
    return (!parts.empty() && parts[0] == ".well-known") || (parts.size() == 1 && (parts[0] == "meta" || parts[0] == "vectors"));
  }
  HttpResponse Error(int status, const std::string& message) const override { return MessageError(status, message); }
  HttpResponse Handle(const RouteRequest& req, std::string* route) override;

  // The route handlers (the table in Handle).
  HttpResponse Meta() const {
    const EmbeddingSetup& s = core_->setup();
    return JsonResponse({{"model", {{"name", core_->options().served_model_name}, {"model_type", s.model().config().model_type},
                                    {"routing", s.routing()}, {"dim", core_->dim_fused()}, {"dim_hs", s.dim_hs()},
                                    {"dim_rw", s.dim_rw()}}}});
  }
  HttpResponse VectorsRequest(const std::string& body) {
    auto j = ParseJson(body);
    if (!j || !j->is_object()) return MessageError(422, "the body must be a JSON object");
    return Vectors(*j);
  }

 private:
  HttpResponse Vectors(const json& j);
};

using Handler = HttpResponse (*)(WeaviateRouter&, const RouteRequest&);
constexpr Route<Handler> kRoutes[] = {
    {"GET", "/.well-known/live", [](WeaviateRouter&, const RouteRequest&) { return HttpResponse{204, "application/json", ""}; }},
    {"GET", "/.well-known/ready", [](WeaviateRouter&, const RouteRequest&) { return HttpResponse{204, "application/json", ""}; }},
    {"GET", "/meta", [](WeaviateRouter& r, const RouteRequest&) { return r.Meta(); }},
    {"POST", "/vectors", [](WeaviateRouter& r, const RouteRequest& q) { return r.VectorsRequest(q.body()); }},
};

HttpResponse WeaviateRouter::Handle(const RouteRequest& req, std::string* route) {
  return RouteTo(*this, kRoutes, req, 0, "", route, [&](Handler h, const std::vector<std::string>&) { return h(*this, req); });
}

HttpResponse WeaviateRouter::Vectors(const json& j) {
  const bool batch = j.contains("texts");
  if (batch == j.contains("text")) return MessageError(422, "give either 'text' (a string) or 'texts' (an array of strings)");
  std::vector<std::string> texts;
  if (batch) {
    if (!j["texts"].is_array()) return MessageError(422, "'texts' must be an array of strings");
    for (const auto& x : j["texts"]) {
      if (!x.is_string()) return MessageError(422, "'texts' must be an array of strings");
      texts.push_back(x.get<std::string>());
    }
    if (texts.size() > core_->options().max_inputs)
      return MessageError(413, "too many texts: " + std::to_string(texts.size()) + " > " + std::to_string(core_->options().max_inputs));
  } else {
    if (!j["text"].is_string()) return MessageError(422, "'text' must be a string");
    texts.push_back(j["text"].get<std::string>());
  }
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string problem = TextProblem(texts[i]);
    if (!problem.empty()) return MessageError(422, "text " + std::to_string(i) + " " + problem);
  }
  if (j.contains("config") && !j["config"].is_null()) {
    const json& c = j["config"];
    if (!c.is_object()) return MessageError(422, "'config' must be an object");
    for (const char* key : {"pooling_strategy", "task_type"})
      if (c.contains(key) && !c[key].is_null() && !c[key].is_string()) return MessageError(422, std::string("'") + key + "' must be a string");
    if (c.contains("dimensions") && !c["dimensions"].is_null() &&
        (!c["dimensions"].is_number_integer() || c["dimensions"].get<int64_t>() != static_cast<int64_t>(core_->dim_fused())))
      return MessageError(422, "dimensions must be the native " + std::to_string(core_->dim_fused()));
  }
  auto embs = core_->EmbedTexts(texts, true);
  if (!embs.ok()) return MessageError(embs.status().code() == Status::Code::kResourceExhausted ? 429 : 500, embs.status().message());
  const size_t dim = core_->dim_fused();
  if (!batch) {
    const std::vector<float> v = core_->Fused((*embs)[0]);
    return JsonResponse({{"text", texts[0]}, {"vector", v}, {"dim", dim}, {"dims", dim}});
  }
  json vectors = json::array();
  for (const auto& e : *embs) vectors.push_back(core_->Fused(e));
  return JsonResponse({{"vectors", vectors}, {"dims", dim}, {"dim", dim}});
}

}  // namespace

std::unique_ptr<ProtocolRouter> NewWeaviateRouter(ServerCore* core) { return std::make_unique<WeaviateRouter>(core); }

}  // namespace moeedb
