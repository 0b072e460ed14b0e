#include "database/vector_schema.h"

#include <nlohmann/json.hpp>

namespace moeedb {

using json = nlohmann::json;

std::string VectorSchema::ToJson() const {
  json j = {{"kind", kVectorKinds.Name(kind)}};
  if (kind == VectorKind::kPlain) {
    j["size"] = size;
    j["distance"] = kDistances.Name(distance);
  }
  if (!text_key.empty()) j["text_key"] = text_key;
  return j.dump();
}

Result<VectorSchema> VectorSchema::FromInfo(const std::string& info_json) {
  const json info = json::parse(info_json, nullptr, false);
  if (info.is_discarded() || !info.is_object()) return Status::Corruption("collection info is damaged");
  VectorSchema s;
  if (!info.contains("vectors")) return s;
  const json& v = info["vectors"];
  if (!v.is_object() || !v.contains("kind") || !v["kind"].is_string())
    return Status::Corruption("collection info: 'vectors' is damaged");
  MOEEDB_ASSIGN_OR_RETURN(s.kind, kVectorKinds.Parse(v["kind"].get<std::string>()));
  if (s.kind == VectorKind::kPlain) {
    if (!v.contains("size") || !v["size"].is_number_unsigned() || !v.contains("distance") || !v["distance"].is_string())
      return Status::Corruption("collection info: a plain vector schema needs its size and distance");
    s.size = v["size"].get<size_t>();
    MOEEDB_ASSIGN_OR_RETURN(s.distance, kDistances.Parse(v["distance"].get<std::string>()));
  }
  if (v.contains("text_key") && v["text_key"].is_string()) s.text_key = v["text_key"].get<std::string>();
  return s;
}

Result<std::string> VectorSchema::RecordIn(const std::string& info_json) const {
  json info = json::parse(info_json, nullptr, false);
  if (info.is_discarded() || !info.is_object()) return Status::InvalidArgument("collection info is not a JSON object");
  info["vectors"] = json::parse(ToJson());
  return info.dump();
}

}  // namespace moeedb
