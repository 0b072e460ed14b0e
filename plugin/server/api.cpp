#include "plugin/server/api.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>

#include "plugin/server/console_assets.h"

namespace moeedb {

using json = nlohmann::json;

namespace {

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
  if (method != "GET" && method != "HEAD") return NativeError(405, "use GET", "invalid_request_error");
  const std::string name = parts.size() == 1 ? "index.html" : parts.size() == 2 ? parts[1] : "";
  const ConsoleAsset* a = FindConsoleAsset(name);
  if (a == nullptr) return NativeError(404, "no console file '" + name.substr(0, 100) + "'", "not_found_error");
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
  uint64_t batch_count = 0, batch_sum = 0;
};

Api::Api(ApiOptions options, Database* db, const EmbeddingSetup* served, EmbedQueues* queues, std::string std_hs_json,
         std::string std_rw_json)
    : core_(std::move(options), db, served, queues, std_hs_json, std_rw_json), metrics_(std::make_unique<Metrics>()) {
  routers_.push_back(NewOpenAiRouter(&core_));
  routers_.push_back(NewTeiRouter(&core_));
  routers_.push_back(NewCollectionsRouter(&core_));
  routers_.push_back(NewClusterRouter(&core_));
  routers_.push_back(NewChromaRouter(&core_));  // /api/v2 before Ollama's /api
  routers_.push_back(NewOllamaRouter(&core_));
  routers_.push_back(NewWeaviateRouter(&core_));
  routers_.push_back(NewQdrantRouter(&core_));
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
  for (size_t n : core_.queues().TakeForwardSizes()) {
    std::lock_guard<std::mutex> lock(metrics_->mu);
    size_t bucket = 0;
    while (bucket < 7 && n > (size_t(1) << bucket)) ++bucket;
    metrics_->batch_hist[bucket]++;
    metrics_->batch_count++;
    metrics_->batch_sum += n;
  }
  const EmbedQueue::Stats qs = core_.queues().stats();
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
  o << "moeedb_documents_stored_total " << core_.documents_stored() << "\n";
  o << "# HELP moeedb_collection_applied_seq The newest change-log entry this node's indexes of the collection include.\n"
       "# TYPE moeedb_collection_applied_seq gauge\n";
  const auto indexes = core_.db().OpenIndexStates();
  for (const auto& c : indexes) o << "moeedb_collection_applied_seq{collection=\"" << c.name << "\"} " << c.applied_seq << "\n";
  o << "# HELP moeedb_collection_indexed_documents Documents in this node's indexes of the collection.\n"
       "# TYPE moeedb_collection_indexed_documents gauge\n";
  for (const auto& c : indexes) o << "moeedb_collection_indexed_documents{collection=\"" << c.name << "\"} " << c.indexed << "\n";
  // Per shard replica this node holds (one, shard 0, for an unsharded collection).
  const auto replicas = core_.db().OpenReplicaStates();
  const auto per_replica = [&](const char* name, const char* help, auto value) {
    o << "# HELP " << name << " " << help << "\n# TYPE " << name << " gauge\n";
    for (const auto& [c, r] : replicas)
      o << name << "{collection=\"" << c << "\",shard=\"" << r.shard << "\"} " << value(r) << "\n";
  };
  per_replica("moeedb_shard_applied_seq", "The newest change-log entry this node's replica of the shard includes.",
              [](const auto& r) { return r.applied_seq; });
  per_replica("moeedb_shard_documents", "Documents in this node's replica of the shard.",
              [](const auto& r) { return r.documents; });
  per_replica("moeedb_shard_index_bytes", "Bytes the replica's dense indexes hold in memory.",
              [](const auto& r) { return r.index_bytes; });
  per_replica("moeedb_shard_log_rewinds", "Times this node's replica found the change log gone back under it (a lost "
              "commit, a restore) and rebuilt from the store.", [](const auto& r) { return r.log_rewinds; });
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
    r = NativeError(500, std::string("internal error: ") + e.what(), "server_error");
  }
  Record(route, r.status, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return r;
}

HttpResponse Api::Route(const HttpRequest& req, std::string* route) {
  std::vector<std::string> parts = SplitPath(req.target);
  for (auto& p : parts) p = UrlDecode(p);
  const std::string& m = req.method;
  if (parts.size() == 1 && parts[0] == "health") {
    *route = "/health";
    if (m != "GET" && m != "HEAD") return NativeError(405, "use GET", "invalid_request_error");
    return JsonResponse({{"status", "ok"}});
  }
  if (!parts.empty() && parts[0] == "console") {
    *route = "/console";
    return Console(m, parts);
  }
  // Qdrant's probes answer without the API key, as Qdrant's do (orchestrators send none).
  if (parts.size() == 2 && parts[0] == "qdrant" && (parts[1] == "healthz" || parts[1] == "livez" || parts[1] == "readyz")) {
    *route = "/qdrant/" + parts[1];
    if (m != "GET" && m != "HEAD") return NativeError(405, "use GET", "invalid_request_error");
    return {200, "text/plain; charset=utf-8", parts[1] + " check passed"};
  }
  ProtocolRouter* owner = nullptr;
  for (auto& r : routers_)
    if (r->Owns(parts)) {
      owner = r.get();
      break;
    }
  const std::string& key = core_.options().api_key;
  if (!key.empty()) {
    // Bearer (most), Qdrant's api-key, Chroma's x-chroma-token.
    auto bearer = req.headers.find("authorization");
    auto plain = req.headers.find("api-key");
    auto chroma = req.headers.find("x-chroma-token");
    const bool given = bearer != req.headers.end() || plain != req.headers.end() || chroma != req.headers.end();
    const bool good = (bearer != req.headers.end() && bearer->second == "Bearer " + key) ||
                      (plain != req.headers.end() && plain->second == key) ||
                      (chroma != req.headers.end() && chroma->second == key);
    if (!good) {
      *route = "auth";
      const std::string message = given ? "invalid API key" : "missing API key (Authorization: Bearer ...)";
      return owner ? owner->Error(401, message) : NativeStatusError(401, message);
    }
  }
  if (parts.size() == 1 && parts[0] == "metrics") {
    *route = "/metrics";
    if (m != "GET") return NativeError(405, "use GET", "invalid_request_error");
    return {200, "text/plain; version=0.0.4", MetricsText()};
  }
  if (owner) {
    try {
      return owner->Handle(RouteRequest{req, std::move(parts), QueryParams(req.target)}, route);
    } catch (const std::exception& e) {
      return owner->Error(500, std::string("internal error: ") + e.what());
    }
  }
  *route = "unknown";
  return NativeError(404, "no route " + m + " " + req.target.substr(0, 200), "not_found_error");
}

}  // namespace moeedb
