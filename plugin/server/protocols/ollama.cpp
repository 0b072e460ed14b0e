// Ollama's embedding API: POST /api/embed (unit-length vectors, as Ollama
// returns), POST /api/embeddings (the older single-prompt form, vectors as
// they are), GET /api/tags, GET /api/version. Errors are {"error": "..."}.
// Model names: NAME (or NAME:latest, what Ollama calls an untagged name) and
// NAME:fused for the fused vector, NAME:hs and NAME:rw for the raw ones.
#include <chrono>
#include <cmath>

#include "plugin/server/protocols/router.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

class OllamaRouter final : public ProtocolRouter {
 public:
  using ProtocolRouter::ProtocolRouter;
  bool Owns(const std::vector<std::string>& parts) const override { return !parts.empty() && parts[0] == "api"; }
  HttpResponse Error(int status, const std::string& message) const override { return MessageError(status, message); }
  HttpResponse Handle(const RouteRequest& req, std::string* route) override;

  // The route handlers (the table in Handle).
  HttpResponse Tags() const {
    json models = json::array();
    const auto& s = core_->setup();
    for (const char* tag : {"latest", "hs", "rw", "fused"})
      models.push_back({{"name", core_->options().served_model_name + ":" + tag},
                        {"model", core_->options().served_model_name + ":" + tag},
                        {"details", {{"family", s.model().config().model_type}, {"format", "safetensors"}}}});
    return JsonResponse({{"models", models}});
  }
  HttpResponse EmbedRequest(const std::string& body, bool batch_form) {
    auto j = ParseJson(body);
    if (!j || !j->is_object()) return MessageError(400, "the body must be a JSON object");
    return Embed(*j, batch_form);
  }

 private:
  HttpResponse Embed(const json& j, bool batch_form);
};

using Handler = HttpResponse (*)(OllamaRouter&, const RouteRequest&);
constexpr Route<Handler> kRoutes[] = {
    {"GET", "/api/version", [](OllamaRouter&, const RouteRequest&) { return JsonResponse({{"version", "0.6.4"}}); }},
    {"GET", "/api/tags", [](OllamaRouter& r, const RouteRequest&) { return r.Tags(); }},
    {"POST", "/api/embed", [](OllamaRouter& r, const RouteRequest& q) { return r.EmbedRequest(q.body(), true); }},
    {"POST", "/api/embeddings", [](OllamaRouter& r, const RouteRequest& q) { return r.EmbedRequest(q.body(), false); }},
};

HttpResponse OllamaRouter::Handle(const RouteRequest& req, std::string* route) {
  return RouteTo(*this, kRoutes, req, 0, "", route, [&](Handler h, const std::vector<std::string>&) { return h(*this, req); });
}

HttpResponse OllamaRouter::Embed(const json& j, bool batch_form) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!j.contains("model") || !j["model"].is_string()) return MessageError(400, "model is required");
  const std::string model = j["model"].get<std::string>();
  const std::string& name = core_->options().served_model_name;
  std::string vector;
  if (model == name || model == name + ":latest" || model == name + ":fused") vector = "fused";
  else if (model == name + ":hs") vector = "hs";
  else if (model == name + ":rw") vector = "rw";
  else return MessageError(404, "model \"" + model + "\" not found; this server serves " + name + ", " + name + ":hs, " + name + ":rw");
  std::vector<std::string> texts;
  const char* key = batch_form ? "input" : "prompt";
  if (!j.contains(key)) return MessageError(400, std::string(key) + " is required");
  const json& in = j[key];
  if (in.is_string()) texts.push_back(in.get<std::string>());
  else if (batch_form && in.is_array()) {
    for (const auto& x : in) {
      if (!x.is_string()) return MessageError(400, "input must be a string or an array of strings");
      texts.push_back(x.get<std::string>());
    }
  } else {
    return MessageError(400, std::string(key) + (batch_form ? " must be a string or an array of strings" : " must be a string"));
  }
  if (texts.empty()) return MessageError(400, "input is empty");
  if (texts.size() > core_->options().max_inputs)
    return MessageError(400, "too many inputs: " + std::to_string(texts.size()) + " > " + std::to_string(core_->options().max_inputs));
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string problem = TextProblem(texts[i]);
    if (!problem.empty()) return MessageError(400, "input " + std::to_string(i) + " " + problem);
  }
  bool truncate = true;  // Ollama's default
  if (j.contains("truncate") && !j["truncate"].is_null()) {
    if (!j["truncate"].is_boolean()) return MessageError(400, "truncate must be true or false");
    truncate = j["truncate"].get<bool>();
  }
  const EmbeddingSetup& s = core_->setup();
  const size_t native = vector == "hs" ? s.dim_hs() : vector == "rw" ? s.dim_rw() : core_->dim_fused();
  if (j.contains("dimensions") && !j["dimensions"].is_null() &&
      (!j["dimensions"].is_number_integer() || j["dimensions"].get<int64_t>() != static_cast<int64_t>(native)))
    return MessageError(400, "dimensions must be the native " + std::to_string(native) + " for " + model);
  auto embs = core_->EmbedTexts(texts, truncate);
  if (!embs.ok()) {
    const Status& st = embs.status();
    return MessageError(st.code() == Status::Code::kResourceExhausted ? 503 : st.code() == Status::Code::kInternal ? 500 : 400,
                       st.message());
  }
  json vectors = json::array();
  int64_t tokens = 0;
  for (const auto& e : *embs) {
    tokens += e.tokens;
    std::vector<float> v = vector == "hs" ? e.hs : vector == "rw" ? e.rw : core_->Fused(e);
    if (batch_form) {
      double n = 0;
      for (float x : v) n += double(x) * x;
      if (n > 0) for (float& x : v) x = static_cast<float>(x / std::sqrt(n));
    }
    vectors.push_back(std::move(v));
  }
  if (!batch_form) return JsonResponse({{"embedding", vectors[0]}});
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  return JsonResponse({{"model", model}, {"embeddings", vectors}, {"total_duration", ns}, {"load_duration", 0},
                       {"prompt_eval_count", tokens}});
}

}  // namespace

std::unique_ptr<ProtocolRouter> NewOllamaRouter(ServerCore* core) { return std::make_unique<OllamaRouter>(core); }

}  // namespace moeedb
