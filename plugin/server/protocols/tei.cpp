// Hugging Face text-embeddings-inference (TEI): POST / and /embed (the fused
// vector), /embed_sparse, /rerank, /tokenize, /decode, GET /info. Errors are
// TEI's {"error", "error_type"}: 422 validation or tokenizer, 413 a batch
// over the client batch size, 429 overloaded, 500 backend.
#include <algorithm>
#include <cmath>

#include "engine/tokenizer/tokenizer.h"
#include "plugin/server/protocols/router.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

HttpResponse TeiError(int status, const std::string& message, const std::string& type) {
  return {status, "application/json", json{{"error", message}, {"error_type", type}}.dump()};
}
HttpResponse Invalid(const std::string& message) { return TeiError(422, message, "validation"); }
HttpResponse FromStatus(const Status& s) {
  switch (s.code()) {
    case Status::Code::kInvalidArgument:
    case Status::Code::kNotSupported: return TeiError(422, s.message(), "tokenizer");
    case Status::Code::kResourceExhausted: return TeiError(429, s.message(), "overloaded");
    case Status::Code::kUnavailable:
    case Status::Code::kOutcomeUnknown: return TeiError(503, s.message(), "unhealthy");
    default: return TeiError(500, s.message(), "backend");
  }
}
// Token texts may be partial UTF-8 sequences: replace rather than fail.
HttpResponse Json(const json& j) { return {200, "application/json", j.dump(-1, ' ', false, json::error_handler_t::replace)}; }

class TeiRouter final : public ProtocolRouter {
 public:
  using ProtocolRouter::ProtocolRouter;
  bool Owns(const std::vector<std::string>& parts) const override {
    static const char* kNames[] = {"embed", "embed_sparse", "embed_all", "rerank", "tokenize", "decode", "info"};
    return parts.empty() || (parts.size() == 1 && std::any_of(std::begin(kNames), std::end(kNames),
                                                              [&](const char* r) { return parts[0] == r; }));
  }
  HttpResponse Error(int status, const std::string& message) const override {
    return TeiError(status, message, status == 401 ? "unauthorized" : status >= 500 ? "backend" : "validation");
  }
  HttpResponse Handle(const RouteRequest& req, std::string* route) override;

  // The route handlers (the table in Handle): each POST takes a JSON object.
  HttpResponse Info() const;
  HttpResponse Embed(const json& j, bool sparse);
  HttpResponse EmbedAll(const json& j);
  HttpResponse Rerank(const json& j);
  HttpResponse Tokenize(const json& j) const;
  HttpResponse Decode(const json& j) const;

 private:
  // The inputs of a request (a string or strings), or the error to answer.
  std::optional<HttpResponse> ReadInputs(const json& j, const char* key, std::vector<std::string>* texts) const;
  // The request's truncate / truncation_direction / prompt_name, or the error to answer.
  std::optional<HttpResponse> ReadEmbedOptions(const json& j, bool* truncate, bool* keep_end) const;
};

// A POST route's handler, given the body as a JSON object.
using Handler = HttpResponse (*)(TeiRouter&, const json&);
constexpr Route<Handler> kRoutes[] = {
    {"GET", "/info", nullptr},
    {"POST", "/", [](TeiRouter& r, const json& j) { return r.Embed(j, false); }},
    {"POST", "/embed", [](TeiRouter& r, const json& j) { return r.Embed(j, false); }},
    {"POST", "/embed_sparse", [](TeiRouter& r, const json& j) { return r.Embed(j, true); }},
    {"POST", "/embed_all", [](TeiRouter& r, const json& j) { return r.EmbedAll(j); }},
    {"POST", "/rerank", [](TeiRouter& r, const json& j) { return r.Rerank(j); }},
    {"POST", "/tokenize", [](TeiRouter& r, const json& j) { return r.Tokenize(j); }},
    {"POST", "/decode", [](TeiRouter& r, const json& j) { return r.Decode(j); }},
};

HttpResponse TeiRouter::Handle(const RouteRequest& req, std::string* route) {
  return RouteTo(*this, kRoutes, req, 0, "", route, [&](Handler h, const std::vector<std::string>&) {
    if (h == nullptr) return Info();  // the one GET
    auto j = ParseJson(req.body());
    if (!j || !j->is_object()) return Invalid("the body must be a JSON object");
    return h(*this, *j);
  });
}

HttpResponse TeiRouter::Info() const {
  const EmbeddingSetup& s = core_->setup();
  const ApiOptions& o = core_->options();
  const ModelConfig& c = s.model().config();
  const std::string& prompt = s.config().prompt;
  return Json({{"model_id", o.served_model_name},
               {"model_sha", nullptr},
               {"model_dtype", "float32"},
               {"model_type", {{"embedding", {{"pooling", s.config().hs_pooling}}}}},
               {"prompts", prompt.empty() || prompt == "none" ? json(nullptr) : json{{prompt, prompt}}},
               {"default_prompt_name", prompt.empty() || prompt == "none" ? json(nullptr) : json(prompt)},
               {"default_prompt", nullptr},
               {"max_concurrent_requests", 512},
               {"max_input_length", o.max_tokens_per_input},
               {"max_batch_tokens", s.config().batch_tokens},
               {"max_batch_requests", nullptr},
               {"max_client_batch_size", o.tei_max_batch},
               {"auto_truncate", o.truncate},
               {"tokenization_workers", 1},
               {"version", "0.1.0"},
               {"sha", nullptr},
               {"docker_label", nullptr},
               // moeedb's own fields, beside TEI's.
               {"model_family", c.model_type},
               {"model_dir", s.config().model_dir},
               {"routing", s.routing()},
               {"prompt", prompt},
               {"dim_hs", s.dim_hs()},
               {"dim_rw", s.dim_rw()},
               {"dim_fused", core_->dim_fused()},
               {"default_alpha", s.default_alpha()},
               {"max_inputs", o.max_inputs}});
}

std::optional<HttpResponse> TeiRouter::ReadInputs(const json& j, const char* key, std::vector<std::string>* texts) const {
  if (!j.contains(key)) return Invalid(std::string("missing '") + key + "'");
  const json& in = j[key];
  if (in.is_string()) texts->push_back(in.get<std::string>());
  else if (in.is_array()) {
    for (const auto& x : in) {
      if (!x.is_string()) return Invalid(std::string("'") + key + "' must be a string or an array of strings");
      texts->push_back(x.get<std::string>());
    }
  } else {
    return Invalid(std::string("'") + key + "' must be a string or an array of strings");
  }
  if (texts->empty()) return TeiError(400, std::string("'") + key + "' is empty", "empty");
  const size_t max = core_->options().tei_max_batch;
  if (texts->size() > max)
    return TeiError(413, "batch size " + std::to_string(texts->size()) + " > maximum allowed batch size " + std::to_string(max), "validation");
  for (size_t i = 0; i < texts->size(); ++i) {
    const std::string problem = TextProblem((*texts)[i]);
    if (!problem.empty()) return problem == "is empty" ? TeiError(400, "input " + std::to_string(i) + " is empty", "empty")
                                                       : Invalid("input " + std::to_string(i) + " " + problem);
  }
  return std::nullopt;
}

std::optional<HttpResponse> TeiRouter::ReadEmbedOptions(const json& j, bool* truncate, bool* keep_end) const {
  *truncate = core_->options().truncate;
  *keep_end = false;
  if (j.contains("truncate") && !j["truncate"].is_null()) {
    if (!j["truncate"].is_boolean()) return Invalid("'truncate' must be true or false");
    *truncate = j["truncate"].get<bool>();
  }
  if (j.contains("truncation_direction") && !j["truncation_direction"].is_null()) {
    const json& d = j["truncation_direction"];
    if (!d.is_string() || (d != "Left" && d != "Right" && d != "left" && d != "right"))
      return Invalid("'truncation_direction' must be \"Left\" or \"Right\"");
    *keep_end = d == "Left" || d == "left";  // cut from the left: keep the end
  }
  if (j.contains("prompt_name") && !j["prompt_name"].is_null()) {
    const std::string& served = core_->setup().config().prompt;
    if (!j["prompt_name"].is_string() || j["prompt_name"].get<std::string>() != served)
      return Invalid("prompt_name: this server embeds with the prompt '" + served + "' only");
  }
  return std::nullopt;
}

HttpResponse TeiRouter::Embed(const json& j, bool sparse) {
  std::vector<std::string> texts;
  if (auto e = ReadInputs(j, "inputs", &texts)) return *e;
  bool truncate = false, keep_end = false;
  if (auto e = ReadEmbedOptions(j, &truncate, &keep_end)) return *e;
  bool normalize = true;
  if (j.contains("normalize") && !j["normalize"].is_null()) {
    if (!j["normalize"].is_boolean()) return Invalid("'normalize' must be true or false");
    normalize = j["normalize"].get<bool>();
  }
  if (j.contains("dimensions") && !j["dimensions"].is_null() &&
      (!j["dimensions"].is_number_integer() || j["dimensions"].get<int64_t>() != static_cast<int64_t>(core_->dim_fused())))
    return Invalid("'dimensions' must be the native " + std::to_string(core_->dim_fused()) + " (moeedb does not cut vectors)");
  auto embs = core_->EmbedTexts(texts, truncate, keep_end);
  if (!embs.ok()) return FromStatus(embs.status());
  json out = json::array();
  if (sparse) {
    // The routing decision as a sparse vector: per MoE layer, the top-k
    // experts' softmax probabilities; index = layer * E + expert.
    const ModelConfig& c = core_->setup().model().config();
    const int64_t experts = c.num_experts, k = std::max<int64_t>(1, c.top_k);
    for (const auto& e : *embs) {
      json row = json::array();
      for (size_t base = 0; base + experts <= e.rw.size(); base += experts) {
        std::vector<double> p(experts);
        const float mx = *std::max_element(e.rw.begin() + base, e.rw.begin() + base + experts);
        double sum = 0;
        for (int64_t x = 0; x < experts; ++x) sum += p[x] = std::exp(double(e.rw[base + x]) - mx);
        std::vector<int64_t> order(experts);
        for (int64_t x = 0; x < experts; ++x) order[x] = x;
        std::partial_sort(order.begin(), order.begin() + std::min(k, experts), order.end(),
                          [&](int64_t a, int64_t b) { return p[a] != p[b] ? p[a] > p[b] : a < b; });
        std::vector<int64_t> top(order.begin(), order.begin() + std::min(k, experts));
        std::sort(top.begin(), top.end());
        for (int64_t x : top) row.push_back({{"index", base + x}, {"value", p[x] / sum}});
      }
      out.push_back(std::move(row));
    }
    return Json(out);
  }
  for (const auto& e : *embs) {
    std::vector<float> v = core_->Fused(e);
    if (normalize) {
      double s = 0;
      for (float x : v) s += double(x) * x;
      if (s > 0) for (float& x : v) x = static_cast<float>(x / std::sqrt(s));
    }
    out.push_back(v);
  }
  return Json(out);
}

// Every token's final-normed hidden state (the prompt's tokens included):
// [[[f32; hidden_size]; tokens]; inputs].
HttpResponse TeiRouter::EmbedAll(const json& j) {
  std::vector<std::string> texts;
  if (auto e = ReadInputs(j, "inputs", &texts)) return *e;
  bool truncate = false, keep_end = false;
  if (auto e = ReadEmbedOptions(j, &truncate, &keep_end)) return *e;
  // hidden_size floats per token: the answer is bounded (ApiOptions::max_embed_all_floats).
  const int64_t H = core_->setup().model().config().hidden_size;
  const int64_t budget = std::max<int64_t>(1, static_cast<int64_t>(core_->options().max_embed_all_floats) / std::max<int64_t>(1, H));
  auto ids = core_->TokenizeTexts(texts, truncate, keep_end);
  if (!ids.ok()) return FromStatus(ids.status());
  int64_t tokens = 0;
  for (const auto& t : *ids) tokens += static_cast<int64_t>(t.size());
  if (tokens > budget)
    return TeiError(413, "/embed_all answers at most " + std::to_string(budget) + " tokens per request (this one has " +
                             std::to_string(tokens) + "); send fewer or shorter inputs", "validation");
  auto embs = core_->EmbedIds(std::move(ids).value(), /*token_states=*/true);
  if (!embs.ok()) return FromStatus(embs.status());
  const size_t width = static_cast<size_t>(H);
  json out = json::array();
  for (const auto& e : *embs) {
    json rows = json::array();
    for (size_t t = 0; t + width <= e.token_states.size(); t += width)
      rows.push_back(std::vector<float>(e.token_states.begin() + t, e.token_states.begin() + t + width));
    out.push_back(std::move(rows));
  }
  return Json(out);
}

HttpResponse TeiRouter::Rerank(const json& j) {
  if (!j.contains("query") || !j["query"].is_string()) return Invalid("'query' must be a string");
  const std::string query = j["query"].get<std::string>();
  if (!TextProblem(query).empty()) return TeiError(400, "'query' " + TextProblem(query), "empty");
  if (!j.contains("texts") || !j["texts"].is_array()) return Invalid("'texts' must be an array of strings");
  std::vector<std::string> texts;
  if (auto e = ReadInputs(j, "texts", &texts)) return *e;
  bool truncate = false, keep_end = false;
  if (auto e = ReadEmbedOptions(j, &truncate, &keep_end)) return *e;
  for (const char* key : {"raw_scores", "return_text"})
    if (j.contains(key) && !j[key].is_null() && !j[key].is_boolean()) return Invalid(std::string("'") + key + "' must be true or false");
  const bool return_text = j.value("return_text", false);
  std::vector<std::string> all = {query};
  all.insert(all.end(), texts.begin(), texts.end());
  auto embs = core_->EmbedTexts(all, truncate, keep_end);
  if (!embs.ok()) return FromStatus(embs.status());
  // The collections' score: cos_HS + alpha * cos_RW, alpha the model's default.
  const double alpha = core_->setup().default_alpha();
  auto cosine = [](const std::vector<float>& a, const std::vector<float>& b) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < a.size(); ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
    return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
  };
  const Embedding& q = (*embs)[0];
  std::vector<std::pair<double, size_t>> scored;
  for (size_t i = 0; i < texts.size(); ++i) {
    const Embedding& d = (*embs)[i + 1];
    scored.push_back({cosine(q.hs, d.hs) + alpha * cosine(q.rw, d.rw), i});
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  json out = json::array();
  for (const auto& [score, i] : scored) {
    json r = {{"index", i}, {"score", score}};
    if (return_text) r["text"] = texts[i];
    out.push_back(std::move(r));
  }
  return Json(out);
}

HttpResponse TeiRouter::Tokenize(const json& j) const {
  std::vector<std::string> texts;
  if (auto e = ReadInputs(j, "inputs", &texts)) return *e;
  if (j.contains("add_special_tokens") && !j["add_special_tokens"].is_boolean()) return Invalid("'add_special_tokens' must be true or false");
  const bool special = j.value("add_special_tokens", true);
  const bool prompted = j.contains("prompt_name") && !j["prompt_name"].is_null();
  bool unused_truncate, unused_keep_end;
  if (prompted) {
    if (auto e = ReadEmbedOptions(json{{"prompt_name", j["prompt_name"]}}, &unused_truncate, &unused_keep_end)) return *e;
  }
  const Tokenizer& tok = core_->setup().tokenizer();
  json out = json::array();
  for (const auto& text : texts) {
    auto ids = prompted ? core_->setup().Tokenize(text) : tok.Encode(text, special);
    if (!ids.ok()) return FromStatus(ids.status());
    json row = json::array();
    size_t at = 0;  // byte offset in `text` while the tokens spell it out
    bool aligned = !prompted;
    for (int32_t id : *ids) {
      auto piece = tok.Decode({id});
      const std::string t = piece.ok() ? *piece : "";
      const bool is_special = tok.IsAdded(id);
      json token = {{"id", id}, {"text", t}, {"special", is_special}, {"start", nullptr}, {"stop", nullptr}};
      if (aligned && !is_special) {
        if (text.compare(at, t.size(), t) == 0) {
          token["start"] = at;
          token["stop"] = at + t.size();
          at += t.size();
        } else {
          aligned = false;  // a normalizer changed the text: offsets unknown from here on
        }
      }
      row.push_back(std::move(token));
    }
    out.push_back(std::move(row));
  }
  return Json(out);
}

HttpResponse TeiRouter::Decode(const json& j) const {
  if (!j.contains("ids") || !j["ids"].is_array()) return Invalid("'ids' must be an array of token ids or of arrays of them");
  if (j.contains("skip_special_tokens") && !j["skip_special_tokens"].is_boolean()) return Invalid("'skip_special_tokens' must be true or false");
  const bool skip = j.value("skip_special_tokens", true);
  const json& in = j["ids"];
  const bool batch = !in.empty() && in[0].is_array();
  std::vector<std::vector<int32_t>> rows;
  auto read = [&](const json& arr) -> bool {
    std::vector<int32_t> r;
    for (const auto& x : arr) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= core_->setup().tokenizer().vocab_size()) return false;
      r.push_back(x.get<int32_t>());
    }
    rows.push_back(std::move(r));
    return true;
  };
  if (batch) {
    for (const auto& row : in)
      if (!row.is_array() || !read(row)) return Invalid("'ids' must hold token ids of the vocabulary");
  } else if (!read(in)) {
    return Invalid("'ids' must hold token ids of the vocabulary");
  }
  const Tokenizer& tok = core_->setup().tokenizer();
  json out = json::array();
  for (auto& r : rows) {
    if (skip) r.erase(std::remove_if(r.begin(), r.end(), [&](int32_t id) { return tok.IsAdded(id); }), r.end());
    auto text = tok.Decode(r);
    if (!text.ok()) return Invalid(text.status().message());
    out.push_back(*text);
  }
  return Json(batch ? out : out[0]);
}

}  // namespace

std::unique_ptr<ProtocolRouter> NewTeiRouter(ServerCore* core) { return std::make_unique<TeiRouter>(core); }

}  // namespace moeedb
