// Chroma's wire format, apart from the routes (chroma.cpp): its error shape,
// collection ids, tenant/database scopes, where_document tests and `include`
// lists.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "base/status.h"
#include "plugin/server/protocols/router.h"

namespace moeedb::chroma {

inline constexpr const char* kTenant = "default_tenant";
inline constexpr const char* kDatabase = "default_database";

// Chroma's {"error": KIND, "message"}, KIND by the status (NotFoundError,
// UniqueConstraintError, AuthError, InternalError, InvalidArgumentError).
HttpResponse ChromaError(int status, const std::string& message);
// ChromaError with the status of a Status's code.
HttpResponse FromStatus(const Status& s);

// A stable id for a collection made without one: FNV-1a of its name and
// store id, as a UUID.
std::string DerivedId(const std::string& name, uint32_t store_id);
// A random UUID.
std::string NewId();

enum class Space { kL2, kCosine, kIp };

// where_document over a text: $contains, $not_contains, $regex, $not_regex,
// $and, $or (at most 32 levels); InvalidArgument naming what is wrong.
using TextTest = std::function<bool(const std::string&)>;
Result<TextTest> DocumentTest(const nlohmann::json& where_document, int depth = 0);

// A tenant and database: where a request's collections live.
struct Scope {
  std::string tenant = kTenant, database = kDatabase;
  bool is_default() const { return tenant == kTenant && database == kDatabase; }
  // The moeedb collection of Chroma collection `name` here.
  std::string StoreName(const std::string& name) const;
  // The Chroma name of moeedb collection `store_name` if it lives here.
  std::optional<std::string> ChromaName(const std::string& store_name) const;
};
// A tenant or database name Chroma accepts: [a-zA-Z0-9_-]{1,64}.
bool ValidScopeName(const std::string& name);

// What `include` asks for (`fallback` when absent); InvalidArgument for an unknown item.
Result<std::set<std::string>> Include(const nlohmann::json& body, std::set<std::string> fallback);
// A record's metadata as Chroma returns it: the object, or null when empty.
nlohmann::json MetadataOut(const std::string& metadata_json);

}  // namespace moeedb::chroma
