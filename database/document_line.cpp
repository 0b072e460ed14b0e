#include "database/document_line.h"

#include <nlohmann/json.hpp>

#include "base/utf8.h"

namespace moeedb {

Result<StoredDocument> ParseDocumentLine(const std::string& line) {
  using json = nlohmann::json;
  if (!IsValidUtf8(line)) return Status::InvalidArgument("invalid UTF-8");
  const json j = json::parse(line, nullptr, false);
  if (j.is_discarded()) return Status::InvalidArgument("not valid JSON");
  if (!j.is_object()) return Status::InvalidArgument("expected a JSON object");
  if (!j.contains("id") || !j["id"].is_string() || j["id"].get<std::string>().empty())
    return Status::InvalidArgument("\"id\" must be a non-empty string");
  if (!j.contains("text") || !j["text"].is_string()) return Status::InvalidArgument("\"text\" must be a string");
  const std::string text = j["text"].get<std::string>();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return Status::InvalidArgument("empty text");
  if (j.contains("metadata") && !j["metadata"].is_object()) return Status::InvalidArgument("\"metadata\" must be an object");
  return StoredDocument{j["id"].get<std::string>(), text, j.value("metadata", json::object()).dump(), {}, {}};
}

}  // namespace moeedb
