// OpenAI embeddings: POST /v1/embeddings, GET /v1/models.
#include "plugin/server/protocols/router.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

std::string Base64(const std::vector<float>& v) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());  // little-endian hosts
  const size_t n = v.size() * sizeof(float);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t b = (uint32_t(p[i]) << 16) | (i + 1 < n ? uint32_t(p[i + 1]) << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
    out += kAlphabet[(b >> 18) & 63];
    out += kAlphabet[(b >> 12) & 63];
    out += i + 1 < n ? kAlphabet[(b >> 6) & 63] : '=';
    out += i + 2 < n ? kAlphabet[b & 63] : '=';
  }
  return out;
}

class OpenAiRouter final : public ProtocolRouter {
 public:
  using ProtocolRouter::ProtocolRouter;
  bool Owns(const std::vector<std::string>& parts) const override { return !parts.empty() && parts[0] == "v1"; }
  HttpResponse Handle(const RouteRequest& req, std::string* route) override;

  // The route handlers (the table in Handle).
  HttpResponse Embeddings(const std::string& body);
  HttpResponse Models() const;
};

using Handler = HttpResponse (*)(OpenAiRouter&, const RouteRequest&);
constexpr Route<Handler> kRoutes[] = {
    {"POST", "/v1/embeddings", [](OpenAiRouter& r, const RouteRequest& q) { return r.Embeddings(q.body()); }},
    {"GET", "/v1/models", [](OpenAiRouter& r, const RouteRequest&) { return r.Models(); }},
};

HttpResponse OpenAiRouter::Handle(const RouteRequest& req, std::string* route) {
  return RouteTo(*this, kRoutes, req, 0, "", route, [&](Handler h, const std::vector<std::string>&) { return h(*this, req); });
}

HttpResponse OpenAiRouter::Models() const {
  json data = json::array();
  for (const char* suffix : {"", ":hs", ":rw", ":fused"})
    data.push_back({{"id", core_->options().served_model_name + suffix}, {"object", "model"}, {"owned_by", "moeedb"}});
  return JsonResponse({{"object", "list"}, {"data", data}});
}

HttpResponse OpenAiRouter::Embeddings(const std::string& body) {
  auto parsed = ParseJson(body);
  if (!parsed) return NativeBadRequest("the body is not valid JSON");
  const json& j = *parsed;
  if (!j.is_object()) return NativeBadRequest("the body must be a JSON object");
  if (!j.contains("input")) return NativeBadRequest("missing 'input'", "missing_input");
  if (!j.contains("model") || !j["model"].is_string()) return NativeBadRequest("'model' must be a string");
  const std::string model = j["model"].get<std::string>();
  const ApiOptions& opt = core_->options();
  const EmbeddingSetup& setup = core_->setup();
  std::string vector = "fused";
  const std::string& name = opt.served_model_name;
  if (model == name || model == "default") vector = "fused";
  else if (model == name + ":hs") vector = "hs";
  else if (model == name + ":rw") vector = "rw";
  else if (model == name + ":fused") vector = "fused";
  else return NativeError(404, "model '" + model + "' does not exist; this server serves " + name + ", " + name + ":hs, " + name +
                                   ":rw, " + name + ":fused", "invalid_request_error", "model_not_found");
  std::string format = "float";
  if (j.contains("encoding_format") && !j["encoding_format"].is_null()) {
    if (!j["encoding_format"].is_string()) return NativeBadRequest("'encoding_format' must be \"float\" or \"base64\"");
    format = j["encoding_format"].get<std::string>();
    if (format != "float" && format != "base64") return NativeBadRequest("'encoding_format' must be \"float\" or \"base64\"");
  }
  const size_t native = vector == "hs" ? setup.dim_hs() : vector == "rw" ? setup.dim_rw() : core_->dim_fused();
  if (j.contains("dimensions") && !j["dimensions"].is_null()) {
    if (!j["dimensions"].is_number_integer() || j["dimensions"].get<int64_t>() != static_cast<int64_t>(native))
      return NativeBadRequest("'dimensions' must be the native " + std::to_string(native) + " for " + model);
  }
  // input: string | [string] | [int] | [[int]]
  const json& in = j["input"];
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> ids;
  bool token_input = false;
  if (in.is_string()) {
    texts.push_back(in.get<std::string>());
  } else if (in.is_array()) {
    if (in.empty()) return NativeBadRequest("'input' is empty", "empty_input");
    if (in[0].is_number_integer()) {
      token_input = true;
      std::vector<int32_t> one;
      for (const auto& x : in) {
        if (!x.is_number_integer()) return NativeBadRequest("'input' mixes token ids and other values");
        one.push_back(x.get<int32_t>());
      }
      ids.push_back(std::move(one));
    } else if (in[0].is_array()) {
      token_input = true;
      for (const auto& row : in) {
        if (!row.is_array() || row.empty()) return NativeBadRequest("each token list in 'input' must be a non-empty array of integers");
        std::vector<int32_t> one;
        for (const auto& x : row) {
          if (!x.is_number_integer()) return NativeBadRequest("token lists must hold integers");
          one.push_back(x.get<int32_t>());
        }
        ids.push_back(std::move(one));
      }
    } else {
      for (const auto& x : in) {
        if (!x.is_string()) return NativeBadRequest("'input' must be a string or an array of strings or of token ids");
        texts.push_back(x.get<std::string>());
      }
    }
  } else {
    return NativeBadRequest("'input' must be a string or an array of strings or of token ids");
  }
  const size_t n = token_input ? ids.size() : texts.size();
  if (n > opt.max_inputs)
    return NativeError(413, "too many inputs: " + std::to_string(n) + " > " + std::to_string(opt.max_inputs),
                       "invalid_request_error", "too_many_inputs");
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string problem = TextProblem(texts[i]);
    if (!problem.empty()) return NativeBadRequest("input " + std::to_string(i) + " " + problem, problem == "is empty" ? "empty_input" : "");
  }
  Result<std::vector<Embedding>> embs = Status::Internal("unset");
  if (token_input) {
    const int64_t vocab = setup.model().config().vocab_size;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i].size() > opt.max_tokens_per_input) {
        if (!opt.truncate) return NativeError(422, "input " + std::to_string(i) + " is too long", "invalid_request_error", "too_many_tokens");
        ids[i].resize(opt.max_tokens_per_input);
      }
      for (int32_t id : ids[i])
        if (id < 0 || id >= vocab) return NativeBadRequest("input " + std::to_string(i) + ": token id " + std::to_string(id) + " is outside the vocabulary");
    }
    embs = core_->EmbedIds(std::move(ids));
  } else {
    embs = core_->EmbedTexts(texts, opt.truncate);
  }
  if (!embs.ok()) {
    if (embs.status().code() == Status::Code::kNotSupported) return NativeError(422, embs.status().message(), "invalid_request_error", "too_many_tokens");
    return NativeFromStatus(embs.status());
  }
  json data = json::array();
  int64_t tokens = 0;
  for (size_t i = 0; i < embs->size(); ++i) {
    const Embedding& e = (*embs)[i];
    tokens += e.tokens;
    const std::vector<float> v = vector == "hs" ? e.hs : vector == "rw" ? e.rw : core_->Fused(e);
    json item = {{"object", "embedding"}, {"index", i}};
    if (format == "base64") item["embedding"] = Base64(v);
    else item["embedding"] = v;
    data.push_back(std::move(item));
  }
  return JsonResponse({{"object", "list"}, {"data", data}, {"model", model}, {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
}

}  // namespace

std::unique_ptr<ProtocolRouter> NewOpenAiRouter(ServerCore* core) { return std::make_unique<OpenAiRouter>(core); }

}  // namespace moeedb
