#include "plugin/server/api.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/utf8.h"
#include "plugin/server/collection_requests.h"
#include "plugin/server/console_assets.h"
#include "plugin/service/search_hit_json.h"

namespace moeedb {

using json = nlohmann::json;

namespace {

HttpResponse Error(int status, const std::string& message, const std::string& type, const std::string& code = "") {
  json e = {{"message", message}, {"type", type}};
  e["code"] = code.empty() ? json(nullptr) : json(code);
  return {status, "application/json", json{{"error", e}}.dump()};
}
HttpResponse BadRequest(const std::string& m, const std::string& code = "") {
  return Error(400, m, "invalid_request_error", code);
}
HttpResponse Json(const json& j, int status = 200) { return {status, "application/json", j.dump()}; }

HttpResponse FromStatus(const Status& s) {
  switch (s.code()) {
    case Status::Code::kInvalidArgument: return BadRequest(s.message());
    case Status::Code::kNotFound: return Error(404, s.message(), "not_found_error");
    case Status::Code::kResourceExhausted: return Error(429, s.message(), "rate_limit_error");
    case Status::Code::kNotSupported: return BadRequest(s.message());
    default: return Error(500, s.message(), "server_error");
  }
}

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

std::vector<std::string> SplitPath(const std::string& target) {
  std::string path = target.substr(0, target.find('?'));
  std::vector<std::string> parts;
  std::stringstream ss(path);
  std::string p;
  while (std::getline(ss, p, '/'))
    if (!p.empty()) parts.push_back(p);
  return parts;
}

// %XX decoding for ids in paths.
std::string UrlDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The query string's parameters (%XX and '+' decoded); later keys win.
std::map<std::string, std::string> QueryParams(const std::string& target) {
  std::map<std::string, std::string> out;
  const size_t q = target.find('?');
  if (q == std::string::npos) return out;
  std::stringstream ss(target.substr(q + 1));
  std::string kv;
  while (std::getline(ss, kv, '&')) {
    if (kv.empty()) continue;
    std::replace(kv.begin(), kv.end(), '+', ' ');
    const size_t eq = kv.find('=');
    out[UrlDecode(kv.substr(0, eq))] = eq == std::string::npos ? "" : UrlDecode(kv.substr(eq + 1));
  }
  return out;
}

// The web console's files, served without the API key: they hold no data,
// and the page asks for the key before it calls the API.
HttpResponse Console(const std::string& method, const std::vector<std::string>& parts) {
  if (method != "GET" && method != "HEAD") return Error(405, "use GET", "invalid_request_error");
  const std::string name = parts.size() == 1 ? "index.html" : parts.size() == 2 ? parts[1] : "";
  const ConsoleAsset* a = FindConsoleAsset(name);
  if (a == nullptr) return Error(404, "no console file '" + name.substr(0, 100) + "'", "not_found_error");
  return {200, std::string(a->content_type), std::string(a->body)};
}

}  // namespace

struct Api::Metrics {
  std::mutex mu;
  std::map<std::pair<std::string, int>, uint64_t> requests;
  static constexpr double kBuckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  std::map<std::string, std::vector<uint64_t>> latency;  // per route: bucket counts + total count
  std::map<std::string, double> latency_sum;
  std::vector<uint64_t> batch_hist = std::vector<uint64_t>(8, 0);  // 1,2,4,...,64,+Inf texts per forward
  uint64_t batch_count = 0, batch_sum = 0, documents_stored = 0;
};

Api::Api(ApiOptions options, const EmbeddingSetup* setup, EmbedQueue* queue, Store* store, std::string std_hs_json,
         std::string std_rw_json)
    : options_(std::move(options)), setup_(setup), queue_(queue), store_(store), metrics_(std::make_unique<Metrics>()) {
  auto h = Standardizer::FromJson(std_hs_json);
  auto r = Standardizer::FromJson(std_rw_json);
  std_hs_ = h.ok() ? *h : Standardizer::Identity(setup->dim_hs());
  std_rw_ = r.ok() ? *r : Standardizer::Identity(setup->dim_rw());
}

Api::~Api() = default;

void Api::Record(const std::string& route, int status, double seconds) {
  std::lock_guard<std::mutex> lock(metrics_->mu);
  metrics_->requests[{route, status}]++;
  auto& b = metrics_->latency[route];
  if (b.empty()) b.assign(std::size(Metrics::kBuckets) + 1, 0);
  for (size_t i = 0; i < std::size(Metrics::kBuckets); ++i)
    if (seconds <= Metrics::kBuckets[i]) b[i]++;
  b.back()++;
  metrics_->latency_sum[route] += seconds;
}

std::string Api::MetricsText() {
  for (size_t n : queue_->TakeForwardSizes()) {
    std::lock_guard<std::mutex> lock(metrics_->mu);
    size_t bucket = 0;
    while (bucket < 7 && n > (size_t(1) << bucket)) ++bucket;
    metrics_->batch_hist[bucket]++;
    metrics_->batch_count++;
    metrics_->batch_sum += n;
  }
  const EmbedQueue::Stats qs = queue_->stats();
  std::ostringstream o;
  std::lock_guard<std::mutex> lock(metrics_->mu);
  o << "# HELP moeedb_requests_total HTTP requests by route and status.\n# TYPE moeedb_requests_total counter\n";
  for (const auto& [k, v] : metrics_->requests)
    o << "moeedb_requests_total{route=\"" << k.first << "\",status=\"" << k.second << "\"} " << v << "\n";
  o << "# HELP moeedb_request_duration_seconds Request latency.\n# TYPE moeedb_request_duration_seconds histogram\n";
  for (const auto& [route, b] : metrics_->latency) {
    for (size_t i = 0; i < std::size(Metrics::kBuckets); ++i)
      o << "moeedb_request_duration_seconds_bucket{route=\"" << route << "\",le=\"" << Metrics::kBuckets[i] << "\"} " << b[i] << "\n";
    o << "moeedb_request_duration_seconds_bucket{route=\"" << route << "\",le=\"+Inf\"} " << b.back() << "\n";
    o << "moeedb_request_duration_seconds_sum{route=\"" << route << "\"} " << metrics_->latency_sum[route] << "\n";
    o << "moeedb_request_duration_seconds_count{route=\"" << route << "\"} " << b.back() << "\n";
  }
  o << "# HELP moeedb_batch_size_texts Texts per model forward, gathered across requests (dynamic batching).\n# TYPE moeedb_batch_size_texts histogram\n";
  uint64_t cum = 0;
  for (size_t i = 0; i < 7; ++i) {
    cum += metrics_->batch_hist[i];
    o << "moeedb_batch_size_texts_bucket{le=\"" << (size_t(1) << i) << "\"} " << cum << "\n";
  }
  cum += metrics_->batch_hist[7];
  o << "moeedb_batch_size_texts_bucket{le=\"+Inf\"} " << cum << "\n";
  o << "moeedb_batch_size_texts_sum " << metrics_->batch_sum << "\nmoeedb_batch_size_texts_count " << metrics_->batch_count << "\n";
  o << "# HELP moeedb_tokens_embedded_total Tokens run through the model.\n# TYPE moeedb_tokens_embedded_total counter\n";
  o << "moeedb_tokens_embedded_total " << qs.tokens << "\n";
  o << "# HELP moeedb_texts_embedded_total Texts embedded.\n# TYPE moeedb_texts_embedded_total counter\n";
  o << "moeedb_texts_embedded_total " << qs.texts << "\n";
  o << "# HELP moeedb_documents_stored_total Documents written by this server.\n# TYPE moeedb_documents_stored_total counter\n";
  o << "moeedb_documents_stored_total " << metrics_->documents_stored << "\n";
  o << "# HELP moeedb_queue_depth Embedding jobs waiting.\n# TYPE moeedb_queue_depth gauge\n";
  o << "moeedb_queue_depth " << qs.depth << "\n";
  o << "# HELP moeedb_model_busy_seconds_total Time the model workers spent embedding, summed over workers.\n"
       "# TYPE moeedb_model_busy_seconds_total counter\n";
  o << "moeedb_model_busy_seconds_total " << qs.busy_seconds << "\n";
  return o.str();
}

HttpResponse Api::Handle(const HttpRequest& request) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string route = "unknown";
  HttpResponse r;
  try {
    r = Route(request, &route);
  } catch (const std::exception& e) {
    r = Error(500, std::string("internal error: ") + e.what(), "server_error");
  }
  Record(route, r.status, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return r;
}

HttpResponse Api::Route(const HttpRequest& req, std::string* route) {
  const std::vector<std::string> parts = SplitPath(req.target);
  const std::string& m = req.method;
  if (parts.size() == 1 && parts[0] == "health") {
    *route = "/health";
    if (m != "GET" && m != "HEAD") return Error(405, "use GET", "invalid_request_error");
    return Json({{"status", "ok"}});
  }
  if (!parts.empty() && parts[0] == "console") {
    *route = "/console";
    return Console(m, parts);
  }
  if (!options_.api_key.empty()) {
    auto it = req.headers.find("authorization");
    if (it == req.headers.end() || it->second != "Bearer " + options_.api_key) {
      *route = "auth";
      return Error(401, it == req.headers.end() ? "missing API key (Authorization: Bearer ...)" : "invalid API key",
                   "authentication_error", "invalid_api_key");
    }
  }
  auto method_is = [&](const char* want) { return m == want; };
  if (parts.size() == 2 && parts[0] == "v1" && parts[1] == "embeddings") {
    *route = "/v1/embeddings";
    if (!method_is("POST")) return Error(405, "use POST", "invalid_request_error");
    return Embeddings(req.body);
  }
  if (parts.size() == 2 && parts[0] == "v1" && parts[1] == "models") {
    *route = "/v1/models";
    if (!method_is("GET")) return Error(405, "use GET", "invalid_request_error");
    json data = json::array();
    for (const char* suffix : {"", ":hs", ":rw", ":fused"})
      data.push_back({{"id", options_.served_model_name + suffix}, {"object", "model"}, {"owned_by", "moeedb"}});
    return Json({{"object", "list"}, {"data", data}});
  }
  if (parts.size() == 1 && parts[0] == "embed") {
    *route = "/embed";
    if (!method_is("POST")) return Error(405, "use POST", "invalid_request_error");
    return TeiEmbed(req.body);
  }
  if (parts.size() == 1 && parts[0] == "info") {
    *route = "/info";
    if (!method_is("GET")) return Error(405, "use GET", "invalid_request_error");
    return Info();
  }
  if (parts.size() == 1 && parts[0] == "metrics") {
    *route = "/metrics";
    if (!method_is("GET")) return Error(405, "use GET", "invalid_request_error");
    return {200, "text/plain; version=0.0.4", MetricsText()};
  }
  if (!parts.empty() && parts[0] == "collections") return Collections(m, parts, QueryParams(req.target), req.body, route);
  *route = "unknown";
  return Error(404, "no route " + m + " " + req.target.substr(0, 200), "not_found_error");
}

HttpResponse Api::Info() {
  const ModelConfig& c = setup_->model().config();
  return Json({{"model_id", options_.served_model_name},
               {"model_type", c.model_type},
               {"model_dir", setup_->config().model_dir},
               {"routing", setup_->routing()},
               {"prompt", setup_->config().prompt},
               {"dim_hs", setup_->dim_hs()},
               {"dim_rw", setup_->dim_rw()},
               {"dim_fused", setup_->dim_hs() + setup_->dim_rw()},
               {"model_dtype", "float32"},
               {"max_input_length", options_.max_tokens_per_input},
               {"max_batch_tokens", setup_->config().batch_tokens},
               {"max_client_batch_size", options_.tei_max_batch},
               {"max_inputs", options_.max_inputs},
               {"version", "0.1.0"}});
}

std::vector<float> Api::Fused(const Embedding& e) const {
  std::vector<float> out(e.hs.size() + e.rw.size());
  std_hs_.Apply(e.hs.data(), out.data());
  std_rw_.Apply(e.rw.data(), out.data() + e.hs.size());
  return out;
}

Result<std::vector<Embedding>> Api::EmbedTexts(const std::vector<std::string>& texts, bool allow_truncate) {
  std::vector<std::vector<int32_t>> ids;
  for (size_t i = 0; i < texts.size(); ++i) {
    auto t = setup_->Tokenize(texts[i]);
    if (!t.ok()) return Status::InvalidArgument("input " + std::to_string(i) + ": " + t.status().message());
    if (t->size() > options_.max_tokens_per_input) {
      if (!allow_truncate)
        return Status::NotSupported("input " + std::to_string(i) + " has " + std::to_string(t->size()) +
                                    " tokens, more than the limit of " + std::to_string(options_.max_tokens_per_input));
      t->resize(options_.max_tokens_per_input);
    }
    ids.push_back(std::move(t).value());
  }
  MOEEDB_ASSIGN_OR_RETURN(auto future, queue_->Submit(std::move(ids)));
  return future.get();
}

HttpResponse Api::Embeddings(const std::string& body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const std::exception&) {
    return BadRequest("the body is not valid JSON");
  }
  if (!j.is_object()) return BadRequest("the body must be a JSON object");
  if (!j.contains("input")) return BadRequest("missing 'input'", "missing_input");
  if (!j.contains("model") || !j["model"].is_string()) return BadRequest("'model' must be a string");
  const std::string model = j["model"].get<std::string>();
  std::string vector = "fused";
  const std::string& name = options_.served_model_name;
  if (model == name || model == "default") vector = "fused";
  else if (model == name + ":hs") vector = "hs";
  else if (model == name + ":rw") vector = "rw";
  else if (model == name + ":fused") vector = "fused";
  else return Error(404, "model '" + model + "' does not exist; this server serves " + name + ", " + name + ":hs, " + name +
                              ":rw, " + name + ":fused", "invalid_request_error", "model_not_found");
  std::string format = "float";
  if (j.contains("encoding_format") && !j["encoding_format"].is_null()) {
    if (!j["encoding_format"].is_string()) return BadRequest("'encoding_format' must be \"float\" or \"base64\"");
    format = j["encoding_format"].get<std::string>();
    if (format != "float" && format != "base64") return BadRequest("'encoding_format' must be \"float\" or \"base64\"");
  }
  const size_t native = vector == "hs" ? setup_->dim_hs() : vector == "rw" ? setup_->dim_rw() : setup_->dim_hs() + setup_->dim_rw();
  if (j.contains("dimensions") && !j["dimensions"].is_null()) {
    if (!j["dimensions"].is_number_integer() || j["dimensions"].get<int64_t>() != static_cast<int64_t>(native))
      return BadRequest("'dimensions' must be the native " + std::to_string(native) + " for " + model);
  }
  // input: string | [string] | [int] | [[int]]
  const json& in = j["input"];
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> ids;
  bool token_input = false;
  if (in.is_string()) {
    texts.push_back(in.get<std::string>());
  } else if (in.is_array()) {
    if (in.empty()) return BadRequest("'input' is empty", "empty_input");
    if (in[0].is_number_integer()) {
      token_input = true;
      std::vector<int32_t> one;
      for (const auto& x : in) {
        if (!x.is_number_integer()) return BadRequest("'input' mixes token ids and other values");
        one.push_back(x.get<int32_t>());
      }
      ids.push_back(std::move(one));
    } else if (in[0].is_array()) {
      token_input = true;
      for (const auto& row : in) {
        if (!row.is_array() || row.empty()) return BadRequest("each token list in 'input' must be a non-empty array of integers");
        std::vector<int32_t> one;
        for (const auto& x : row) {
          if (!x.is_number_integer()) return BadRequest("token lists must hold integers");
          one.push_back(x.get<int32_t>());
        }
        ids.push_back(std::move(one));
      }
    } else {
      for (const auto& x : in) {
        if (!x.is_string()) return BadRequest("'input' must be a string or an array of strings or of token ids");
        texts.push_back(x.get<std::string>());
      }
    }
  } else {
    return BadRequest("'input' must be a string or an array of strings or of token ids");
  }
  const size_t n = token_input ? ids.size() : texts.size();
  if (n > options_.max_inputs)
    return Error(413, "too many inputs: " + std::to_string(n) + " > " + std::to_string(options_.max_inputs),
                 "invalid_request_error", "too_many_inputs");
  for (size_t i = 0; i < texts.size(); ++i) {
    if (texts[i].find_first_not_of(" \t\r\n") == std::string::npos)
      return BadRequest("input " + std::to_string(i) + " is empty", "empty_input");
    if (!IsValidUtf8(texts[i])) return BadRequest("input " + std::to_string(i) + " is not valid UTF-8");
  }
  Result<std::vector<Embedding>> embs = Status::Internal("unset");
  if (token_input) {
    const int64_t vocab = setup_->model().config().vocab_size;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i].size() > options_.max_tokens_per_input) {
        if (!options_.truncate) return Error(422, "input " + std::to_string(i) + " is too long", "invalid_request_error", "too_many_tokens");
        ids[i].resize(options_.max_tokens_per_input);
      }
      for (int32_t id : ids[i])
        if (id < 0 || id >= vocab) return BadRequest("input " + std::to_string(i) + ": token id " + std::to_string(id) + " is outside the vocabulary");
    }
    auto f = queue_->Submit(std::move(ids));
    if (!f.ok()) return FromStatus(f.status());
    embs = f->get();
  } else {
    embs = EmbedTexts(texts, options_.truncate);
  }
  if (!embs.ok()) {
    if (embs.status().code() == Status::Code::kNotSupported) return Error(422, embs.status().message(), "invalid_request_error", "too_many_tokens");
    return FromStatus(embs.status());
  }
  json data = json::array();
  int64_t tokens = 0;
  for (size_t i = 0; i < embs->size(); ++i) {
    const Embedding& e = (*embs)[i];
    tokens += e.tokens;
    const std::vector<float> v = vector == "hs" ? e.hs : vector == "rw" ? e.rw : Fused(e);
    json item = {{"object", "embedding"}, {"index", i}};
    if (format == "base64") item["embedding"] = Base64(v);
    else item["embedding"] = v;
    data.push_back(std::move(item));
  }
  return Json({{"object", "list"}, {"data", data}, {"model", model}, {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
}

HttpResponse Api::TeiEmbed(const std::string& body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const std::exception&) {
    return Error(422, "the body is not valid JSON", "validation");
  }
  if (!j.is_object() || !j.contains("inputs")) return Error(422, "missing 'inputs'", "validation");
  std::vector<std::string> texts;
  if (j["inputs"].is_string()) texts.push_back(j["inputs"].get<std::string>());
  else if (j["inputs"].is_array()) {
    for (const auto& x : j["inputs"]) {
      if (!x.is_string()) return Error(422, "'inputs' must be a string or an array of strings", "validation");
      texts.push_back(x.get<std::string>());
    }
  } else {
    return Error(422, "'inputs' must be a string or an array of strings", "validation");
  }
  if (texts.empty()) return Error(422, "'inputs' is empty", "validation");
  if (texts.size() > options_.tei_max_batch)
    return Error(413, "batch size " + std::to_string(texts.size()) + " > maximum allowed batch size " + std::to_string(options_.tei_max_batch), "validation");
  for (size_t i = 0; i < texts.size(); ++i) {
    if (texts[i].find_first_not_of(" \t\r\n") == std::string::npos) return Error(422, "input " + std::to_string(i) + " is empty", "validation");
    if (!IsValidUtf8(texts[i])) return Error(422, "input " + std::to_string(i) + " is not valid UTF-8", "validation");
  }
  const bool normalize = j.value("normalize", true);
  const bool truncate = j.contains("truncate") && j["truncate"].is_boolean() ? j["truncate"].get<bool>() : options_.truncate;
  auto embs = EmbedTexts(texts, truncate);
  if (!embs.ok()) {
    if (embs.status().code() == Status::Code::kNotSupported || embs.status().code() == Status::Code::kInvalidArgument)
      return Error(422, embs.status().message(), "tokenizer");
    return FromStatus(embs.status());
  }
  json out = json::array();
  for (const auto& e : *embs) {
    std::vector<float> v = Fused(e);
    if (normalize) {
      double s = 0;
      for (float x : v) s += double(x) * x;
      if (s > 0) for (float& x : v) x = static_cast<float>(x / std::sqrt(s));
    }
    out.push_back(v);
  }
  return Json(out);
}

HttpResponse Api::ListDocuments(const std::string& name, const std::map<std::string, std::string>& query) {
  size_t limit = 20;
  for (const auto& [key, value] : query) {
    if (key == "limit") {
      char* end = nullptr;
      const long v = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v < 1 || v > 1000) return BadRequest("'limit' must be an integer in [1, 1000]");
      limit = static_cast<size_t>(v);
    } else if (key != "after") {
      return BadRequest("unknown parameter '" + key.substr(0, 100) + "' (limit, after)");
    }
  }
  auto c = OpenCollection(name);
  if (!c.ok()) return FromStatus(c.status());
  auto page = (*c)->List(query.count("after") ? query.at("after") : "", limit);
  if (!page.ok()) return FromStatus(page.status());
  json docs = json::array();
  for (const auto& d : page->documents)
    docs.push_back({{"id", d.id}, {"text", d.text}, {"metadata", json::parse(d.metadata_json)}});
  return Json({{"documents", docs},
               {"next_after", page->next_after.empty() ? json(nullptr) : json(page->next_after)},
               {"total", (*c)->size()}});
}

Result<VectorCollection*> Api::OpenCollection(const std::string& name) {
  std::lock_guard<std::mutex> lock(collections_mu_);
  auto it = collections_.find(name);
  if (it != collections_.end()) return it->second.get();
  MOEEDB_ASSIGN_OR_RETURN(std::unique_ptr<VectorCollection> c, VectorCollection::Open(store_, name));
  MOEEDB_RETURN_IF_ERROR(setup_->CheckMatches(c->info_json()));
  VectorCollection* raw = c.get();
  collections_[name] = std::move(c);
  return raw;
}

Status Api::SaveIndexes() {
  std::lock_guard<std::mutex> lock(collections_mu_);
  Status first;
  for (auto& [name, c] : collections_) {
    Status s = c->SaveIndex();
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

HttpResponse Api::Collections(const std::string& m, const std::vector<std::string>& parts,
                              const std::map<std::string, std::string>& query, const std::string& body, std::string* route) {
  auto parse = [&](json* j) -> bool {
    try {
      *j = body.empty() ? json::object() : json::parse(body);
      return j->is_object();
    } catch (...) {
      return false;
    }
  };
  if (parts.size() == 1) {
    *route = "/collections";
    if (m != "GET") return Error(405, "use GET", "invalid_request_error");
    auto all = store_->ListCollections();
    if (!all.ok()) return FromStatus(all.status());
    json out = json::array();
    for (const auto& c : *all) out.push_back({{"name", c.name}, {"documents", c.count}});
    return Json({{"collections", out}});
  }
  const std::string name = UrlDecode(parts[1]);
  if (parts.size() == 2) {
    *route = "/collections/{name}";
    if (m == "PUT") {
      json j;
      if (!parse(&j)) return BadRequest("the body must be a JSON object");
      if (j.contains("routing") && (!j["routing"].is_string() ||
                                    [&] { auto p = RoutingPolicy::Parse(j["routing"].get<std::string>());
                                          return !p.ok() || p->ToString() != setup_->routing(); }()))
        return BadRequest("this server embeds with routing " + setup_->routing() + "; a collection must use it");
      CollectionOptions o = setup_->NewCollectionOptions({std_hs_.ToJson(), std_rw_.ToJson()});
      if (Status s = ParseCollectionRequest(j, &o); !s.ok()) return BadRequest(s.message());
      if (store_->GetCollection(name).ok()) return Error(409, "collection '" + name + "' already exists", "invalid_request_error", "conflict");
      auto c = VectorCollection::Create(store_, name, o);
      if (!c.ok()) return FromStatus(c.status());
      std::lock_guard<std::mutex> lock(collections_mu_);
      collections_[name] = std::move(c).value();
      return Json({{"name", name}, {"created", true}}, 201);
    }
    if (m == "GET") {
      auto c = store_->GetCollection(name);
      if (!c.ok()) return FromStatus(c.status());
      json spec = json::parse(c->spec_json);
      spec.erase("std_hs");
      spec.erase("std_rw");
      return Json({{"name", name}, {"documents", c->count}, {"spec", spec}});
    }
    if (m == "DELETE") {
      std::lock_guard<std::mutex> lock(collections_mu_);
      auto c = store_->GetCollection(name);
      if (!c.ok()) return FromStatus(c.status());
      collections_.erase(name);
      Status s = VectorCollection::Drop(store_, name);
      if (!s.ok()) return FromStatus(s);
      return Json({{"name", name}, {"dropped", true}});
    }
    return Error(405, "use PUT, GET or DELETE", "invalid_request_error");
  }
  if (parts[2] == "documents" && parts.size() == 3) {
    *route = "/collections/{name}/documents";
    if (m == "GET") return ListDocuments(name, query);
    if (m != "POST") return Error(405, "use GET or POST", "invalid_request_error");
    json j;
    if (!parse(&j)) return BadRequest("the body must be a JSON object");
    if (!j.contains("documents") || !j["documents"].is_array()) return BadRequest("'documents' must be an array");
    if (j["documents"].size() > options_.max_documents)
      return Error(413, "too many documents in one request (max " + std::to_string(options_.max_documents) + ")", "invalid_request_error");
    const bool wait = !j.contains("wait") || (j["wait"].is_boolean() && j["wait"].get<bool>());
    std::vector<StoredDocument> docs;
    std::vector<std::string> texts;
    for (size_t i = 0; i < j["documents"].size(); ++i) {
      const json& d = j["documents"][i];
      const std::string where = "document " + std::to_string(i) + ": ";
      if (!d.is_object()) return BadRequest(where + "must be an object");
      if (!d.contains("id") || !d["id"].is_string() || d["id"].get<std::string>().empty()) return BadRequest(where + "'id' must be a non-empty string");
      if (!d.contains("text") || !d["text"].is_string()) return BadRequest(where + "'text' must be a string");
      if (d.contains("metadata") && !d["metadata"].is_object()) return BadRequest(where + "'metadata' must be an object");
      texts.push_back(d["text"].get<std::string>());
      docs.push_back({d["id"].get<std::string>(), texts.back(), d.value("metadata", json::object()).dump(), {}, {}});
    }
    if (docs.empty()) return BadRequest("'documents' is empty");
    auto c = OpenCollection(name);
    if (!c.ok()) return FromStatus(c.status());
    auto embs = EmbedTexts(texts, options_.truncate);
    if (!embs.ok()) {
      if (embs.status().code() == Status::Code::kNotSupported) return Error(422, embs.status().message(), "invalid_request_error", "too_many_tokens");
      return FromStatus(embs.status());
    }
    for (size_t i = 0; i < docs.size(); ++i) {
      docs[i].hs = std::move((*embs)[i].hs);
      docs[i].rw = std::move((*embs)[i].rw);
    }
    auto w = (*c)->Upsert(docs, wait);
    if (!w.ok()) return FromStatus(w.status());
    {
      std::lock_guard<std::mutex> lock(metrics_->mu);
      metrics_->documents_stored += docs.size();
    }
    return Json({{"upserted", docs.size()}, {"replaced", w->removed.size()}, {"durable", wait}});
  }
  if (parts[2] == "documents" && parts.size() == 4) {
    *route = "/collections/{name}/documents/{id}";
    const std::string id = UrlDecode(parts[3]);
    auto c = OpenCollection(name);
    if (!c.ok()) return FromStatus(c.status());
    if (m == "GET") {
      auto d = (*c)->Get(id);
      if (!d.ok()) return FromStatus(d.status());
      if (!d->has_value()) return Error(404, "no document '" + id + "'", "not_found_error");
      return Json({{"id", (*d)->id}, {"text", (*d)->text}, {"metadata", json::parse((*d)->metadata_json)}});
    }
    if (m == "DELETE") {
      auto r = (*c)->Delete({id}, true);
      if (!r.ok()) return FromStatus(r.status());
      if (r->removed.empty()) return Error(404, "no document '" + id + "'", "not_found_error");
      return Json({{"id", id}, {"deleted", true}});
    }
    return Error(405, "use GET or DELETE", "invalid_request_error");
  }
  if (parts[2] == "search" && parts.size() == 3) {
    *route = "/collections/{name}/search";
    if (m != "POST") return Error(405, "use POST", "invalid_request_error");
    const auto t0 = std::chrono::steady_clock::now();
    json j;
    if (!parse(&j)) return BadRequest("the body must be a JSON object");
    if (!j.contains("query") || !j["query"].is_string()) return BadRequest("'query' must be a string");
    auto so = ParseSearchRequest(j);
    if (!so.ok()) return BadRequest(so.status().message());
    auto c = OpenCollection(name);
    if (!c.ok()) return FromStatus(c.status());
    std::vector<Embedding> q;
    if (so->mode != QueryMode::kLexical) {  // lexical search needs no forward pass
      auto e = EmbedTexts({so->text}, true);
      if (!e.ok()) return FromStatus(e.status());
      q = std::move(e).value();
    }
    auto hits = (*c)->Search(q.empty() ? nullptr : q[0].hs.data(), q.empty() ? nullptr : q[0].rw.data(), *so);
    if (!hits.ok()) return FromStatus(hits.status());
    json out = json::array();
    for (const auto& h : *hits) out.push_back(SearchHitJson(h, (*c)->has_lexical()));
    return Json({{"hits", out}, {"took_ms", std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()}});
  }
  *route = "unknown";
  return Error(404, "no route " + m + " /" + parts[0] + "/...", "not_found_error");
}

}  // namespace moeedb
