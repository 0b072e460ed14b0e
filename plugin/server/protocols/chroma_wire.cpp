#include "plugin/server/protocols/chroma_wire.h"

#include <re2/re2.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <random>
#include <regex>

namespace moeedb::chroma {

using json = nlohmann::json;

constexpr size_t kMaxRegex = 256;

HttpResponse ChromaError(int status, const std::string& message) {
  const char* kind = status == 404 ? "NotFoundError" : status == 409 ? "UniqueConstraintError"
                     : status == 401 ? "AuthError" : status >= 500 ? "InternalError" : "InvalidArgumentError";
  return {status, "application/json", json{{"error", kind}, {"message", message}}.dump()};
}

HttpResponse FromStatus(const Status& s) {
  switch (s.code()) {
    case Status::Code::kInvalidArgument:
    case Status::Code::kNotSupported: return ChromaError(400, s.message());
    case Status::Code::kNotFound: return ChromaError(404, s.message());
    case Status::Code::kResourceExhausted: return ChromaError(429, s.message());
    case Status::Code::kUnavailable:
    case Status::Code::kOutcomeUnknown: return ChromaError(503, s.message());
    default: return ChromaError(500, s.message());
  }
}

std::string DerivedId(const std::string& name, uint32_t store_id) {
  auto fnv = [&](uint64_t h) {
    for (char c : name + "#" + std::to_string(store_id)) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    return h;
  };
  const uint64_t a = fnv(14695981039346656037ull), b = fnv(a ^ 0x9e3779b97f4a7c15ull);
  char out[37];
  std::snprintf(out, sizeof out, "%08x-%04x-4%03x-8%03x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
                static_cast<unsigned>((b >> 48) & 0xfff), static_cast<unsigned long long>(b & 0xffffffffffffull));
  return out;
}

std::string NewId() {
  static std::mt19937_64 rng(std::random_device{}());
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  return DerivedId(std::to_string(rng()), static_cast<uint32_t>(rng()));
}

Result<TextTest> DocumentTest(const json& w, int depth) {
  if (depth > 32) return Status::InvalidArgument("where_document nests deeper than 32 levels");
  if (!w.is_object() || w.size() != 1)
    return Status::InvalidArgument("where_document must be one operator: $contains, $not_contains, $regex, $not_regex, $and, $or");
  const std::string op = w.begin().key();
  const json& v = w.begin().value();
  if (op == "$and" || op == "$or") {
    if (!v.is_array() || v.empty()) return Status::InvalidArgument("where_document " + op + " needs a non-empty list");
    std::vector<TextTest> parts;
    for (const auto& x : v) {
      MOEEDB_ASSIGN_OR_RETURN(TextTest t, DocumentTest(x, depth + 1));
      parts.push_back(std::move(t));
    }
    const bool all = op == "$and";
    return TextTest([parts, all](const std::string& s) {
      for (const auto& p : parts)
        if (p(s) != all) return !all;
      return all;
    });
  }
  if (!v.is_string()) return Status::InvalidArgument("where_document " + op + " needs a string");
  const std::string arg = v.get<std::string>();
  if (op == "$contains" || op == "$not_contains") {
    const bool want = op == "$contains";
    return TextTest([arg, want](const std::string& s) { return (s.find(arg) != std::string::npos) == want; });
  }
  if (op == "$regex" || op == "$not_regex") {
    if (arg.size() > kMaxRegex) return Status::InvalidArgument("where_document regex longer than 256 characters");
    RE2::Options options;
    options.set_log_errors(false);
    auto re = std::make_shared<RE2>(arg, options);
    if (!re->ok()) return Status::InvalidArgument("where_document " + op + ": bad regex: " + re->error());
    const bool want = op == "$regex";
    return TextTest([re, want](const std::string& s) { return RE2::PartialMatch(s, *re) == want; });
  }
  return Status::InvalidArgument("unknown where_document operator '" + op.substr(0, 40) + "'");
}

std::string Scope::StoreName(const std::string& name) const {
  return is_default() ? name : tenant + ":" + database + ":" + name;
}

std::optional<std::string> Scope::ChromaName(const std::string& store_name) const {
  if (is_default()) return store_name.find(':') == std::string::npos ? std::optional(store_name) : std::nullopt;
  const std::string prefix = tenant + ":" + database + ":";
  if (store_name.rfind(prefix, 0) != 0) return std::nullopt;
  return store_name.substr(prefix.size());
}

bool ValidScopeName(const std::string& n) {
  static const std::regex kScope("^[a-zA-Z0-9_-]{1,64}$");
  return std::regex_match(n, kScope);
}

Result<std::set<std::string>> Include(const json& body, std::set<std::string> fallback) {
  if (!body.contains("include") || body["include"].is_null()) return fallback;
  if (!body["include"].is_array()) return Status::InvalidArgument("'include' must be a list");
  std::set<std::string> out;
  for (const auto& x : body["include"]) {
    static const std::set<std::string> kKnown = {"documents", "embeddings", "metadatas", "distances", "uris"};
    if (!x.is_string() || !kKnown.count(x.get<std::string>()))
      return Status::InvalidArgument("'include' items are documents, embeddings, metadatas, distances, uris");
    out.insert(x.get<std::string>());
  }
  return out;
}

json MetadataOut(const std::string& metadata_json) {
  json m = json::parse(metadata_json, nullptr, false);
  return m.is_object() && !m.empty() ? m : json(nullptr);
}

}  // namespace moeedb::chroma
