#include "plugin/server/protocols/router.h"

#include <cmath>

#include "base/utf8.h"

namespace moeedb {

using json = nlohmann::json;

HttpResponse NativeError(int status, const std::string& message, const std::string& type, const std::string& code) {
  json e = {{"message", message}, {"type", type}};
  e["code"] = code.empty() ? json(nullptr) : json(code);
  return {status, "application/json", json{{"error", e}}.dump()};
}

HttpResponse NativeBadRequest(const std::string& m, const std::string& code) {
  return NativeError(400, m, "invalid_request_error", code);
}

HttpResponse NativeStatusError(int status, const std::string& message) {
  if (status == 401) return NativeError(401, message, "authentication_error", "invalid_api_key");
  return NativeError(status, message, status >= 500 ? "server_error" : "invalid_request_error");
}

HttpResponse ProtocolRouter::Error(int status, const std::string& message) const {
  return NativeStatusError(status, message);
}

bool MatchRoute(const char* pattern, const std::vector<std::string>& parts, size_t skip, std::vector<std::string>* args) {
  args->clear();
  const std::string p(pattern);
  size_t at = 0, i = skip;
  while (at < p.size()) {
    if (p[at] == '/') ++at;
    const size_t end = std::min(p.find('/', at), p.size());
    const std::string segment = p.substr(at, end - at);
    at = end;
    if (segment.empty()) continue;  // "/" alone: the prefix itself
    if (segment == "*") {
      std::string rest;
      for (; i < parts.size(); ++i) rest += (rest.empty() ? "" : "/") + parts[i];
      args->push_back(rest);
      return true;
    }
    if (i >= parts.size()) return false;
    if (!segment.empty() && segment.front() == '{') args->push_back(parts[i]);
    else if (segment != parts[i]) return false;
    ++i;
  }
  return i == parts.size();
}

HttpResponse MessageError(int status, const std::string& message) {
  return {status, "application/json", nlohmann::json{{"error", message}}.dump()};
}

HttpResponse NativeFromStatus(const Status& s) {
  switch (s.code()) {
    case Status::Code::kInvalidArgument: return NativeBadRequest(s.message());
    case Status::Code::kNotFound: return NativeError(404, s.message(), "not_found_error");
    case Status::Code::kConflict: return NativeError(409, s.message(), "conflict_error");
    case Status::Code::kResourceExhausted: return NativeError(429, s.message(), "rate_limit_error");
    case Status::Code::kUnavailable: return NativeError(503, s.message(), "unavailable_error");
    case Status::Code::kOutcomeUnknown: return NativeError(503, s.message(), "outcome_unknown_error");
    case Status::Code::kNotSupported: return NativeBadRequest(s.message());
    default: return NativeError(500, s.message(), "server_error");
  }
}

HttpResponse JsonResponse(const json& j, int status) { return {status, "application/json", j.dump()}; }

std::optional<json> ParseJson(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::string TextProblem(const std::string& text) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return "is empty";
  if (!IsValidUtf8(text)) return "is not valid UTF-8";
  return "";
}

Result<std::vector<float>> Floats(const json& a, const std::string& what) {
  if (!a.is_array()) return Status::InvalidArgument(what + " must be an array of numbers");
  std::vector<float> v;
  v.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_number()) return Status::InvalidArgument(what + " component " + std::to_string(i) + " is not a number (NaN and infinity are refused)");
    const double x = a[i].get<double>();
    if (!std::isfinite(static_cast<float>(x))) return Status::InvalidArgument(what + " component " + std::to_string(i) + " is beyond float range");
    v.push_back(static_cast<float>(x));
  }
  if (v.empty()) return Status::InvalidArgument(what + " is empty");
  return v;
}

}  // namespace moeedb
