#include "database/vector_schema.h"

#include <nlohmann/json.hpp>

namespace moeedb {

using json = nlohmann::json;

namespace {

constexpr size_t kMaxVectorSize = 65536;

json VectorJson(const NamedVector& v) {
  return {{"name", v.name}, {"size", v.size}, {"distance", kDistances.Name(v.distance)}};
}

Result<NamedVector> VectorFromJson(const json& v) {
  if (!v.is_object() || !v.contains("size") || !v["size"].is_number_unsigned() || !v.contains("distance") ||
      !v["distance"].is_string())
    return Status::Corruption("collection info: a vector needs its size and distance");
  NamedVector out;
  out.name = v.value("name", std::string());
  out.size = v["size"].get<size_t>();
  MOEEDB_ASSIGN_OR_RETURN(out.distance, kDistances.Parse(v["distance"].get<std::string>()));
  return out;
}

}  // namespace

Result<VectorSchema> VectorSchema::Declared(const std::vector<NamedVector>& vectors, bool named, size_t dim_hs,
                                            size_t dim_rw) {
  VectorSchema s;
  if (vectors.empty() && named) {  // an empty map of names: points of payload only
    s.kind = VectorKind::kPlain;
    s.named = true;
    return s;
  }
  if (vectors.empty()) return s;
  for (size_t i = 0; i < vectors.size(); ++i) {
    const NamedVector& v = vectors[i];
    if (v.size == 0 || v.size > kMaxVectorSize)
      return Status::InvalidArgument("vector '" + v.name.substr(0, 80) + "': the size must be in [1, " +
                                     std::to_string(kMaxVectorSize) + "]");
    for (size_t j = 0; j < i; ++j)
      if (vectors[j].name == v.name) return Status::InvalidArgument("vector '" + v.name.substr(0, 80) + "' is declared twice");
  }
  // hs and rw name the model's two vectors; they mean nothing else here.
  bool model = true;
  for (const NamedVector& v : vectors) {
    const size_t dim = v.name == "hs" ? dim_hs : v.name == "rw" ? dim_rw : 0;
    if (v.name != "hs" && v.name != "rw") {
      model = false;
      continue;
    }
    if (v.size != dim || v.distance != Distance::kCosine)
      return Status::InvalidArgument("vector '" + v.name + "' is the served model's: size " + std::to_string(dim) +
                                     ", distance Cosine (the names hs and rw are kept for it)");
  }
  if (model) return s;
  for (const NamedVector& v : vectors)
    if (v.name == "hs" || v.name == "rw")
      return Status::InvalidArgument("vector '" + v.name + "' names the served model's vector; it cannot sit beside '" +
                                     (vectors[0].name == v.name ? vectors[1].name : vectors[0].name).substr(0, 80) + "'");
  if (vectors.size() > kMaxClientVectors)
    return Status::InvalidArgument("a moeedb collection holds at most " + std::to_string(kMaxClientVectors) +
                                   " named vectors; " + std::to_string(vectors.size()) + " were declared");
  s.named = named;
  s.name = vectors[0].name;
  s.size = vectors[0].size;
  s.distance = vectors[0].distance;
  if (vectors.size() == 1 && s.size == dim_hs + dim_rw && s.distance == Distance::kCosine) {
    s.kind = VectorKind::kFused;
    s.size = 0;  // the fused size is the model's
    return s;
  }
  // Every declared vector has its segment in every point's row, present or not.
  size_t row = 0;
  for (const NamedVector& v : vectors) row += v.size + (v.distance == Distance::kEuclid ? 1 : 0);
  if (row > kMaxVectorSize + 1)
    return Status::InvalidArgument("the declared vectors take " + std::to_string(row) + " components per point; moeedb keeps at most " +
                                   std::to_string(kMaxVectorSize) + " in all");
  s.kind = VectorKind::kPlain;
  s.rest.assign(vectors.begin() + 1, vectors.end());
  return s;
}

std::vector<NamedVector> VectorSchema::Vectors(size_t fused_size) const {
  std::vector<NamedVector> out;
  if (kind == VectorKind::kFused) out.push_back({name, fused_size, Distance::kCosine});
  if (kind == VectorKind::kPlain && size > 0) {
    out.push_back({name, size, distance});
    out.insert(out.end(), rest.begin(), rest.end());
  }
  return out;
}

Result<size_t> VectorSchema::Find(const std::string& want) const {
  if (kind != VectorKind::kModel && want == name && (kind != VectorKind::kPlain || size > 0)) return size_t{0};
  for (size_t i = 0; i < rest.size(); ++i)
    if (want == rest[i].name) return i + 1;
  std::string have;
  if (kind == VectorKind::kModel) have = "hs and rw";
  else if (kind == VectorKind::kPlain && size == 0) return Status::InvalidArgument("Not existing vector name error: '" + want.substr(0, 80) + "'; this collection has no vectors");
  else have = "'" + name + "'";
  for (size_t i = 0; i < rest.size(); ++i) have += (i + 1 == rest.size() ? " and '" : ", '") + rest[i].name.substr(0, 80) + "'";
  // Qdrant's words first: its clients match on them.
  return Status::InvalidArgument("Not existing vector name error: '" + want.substr(0, 80) + "'; this collection's vectors are " +
                                 have);
}

std::vector<std::string> VectorSchema::CarriedBy(const std::vector<float>& rw) const {
  if (kind == VectorKind::kModel) return {"hs", "rw"};
  std::vector<std::string> out;
  const std::vector<NamedVector> all = Vectors(0);
  for (size_t i = 0; i < all.size(); ++i)
    if (kind == VectorKind::kFused || (i < rw.size() && rw[i] < 0.5f)) out.push_back(all[i].name);
  return out;
}

std::string VectorSchema::ToJson() const {
  json j = {{"kind", kVectorKinds.Name(kind)}};
  if (kind == VectorKind::kPlain) {
    j["layout"] = "segments";
    j["size"] = size;
    j["distance"] = kDistances.Name(distance);
    if (!rest.empty()) {
      j["rest"] = json::array();
      for (const NamedVector& v : rest) j["rest"].push_back(VectorJson(v));
    }
  }
  if (kind != VectorKind::kModel && (!name.empty() || named)) j["name"] = name;
  if (named) j["named"] = true;
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
    // The two-slot layout of older versions: one Cosine or Dot vector was
    // kept exactly as segments keep it (x in HS, a 0 in RW: present); a
    // Euclid one or a second vector was not.
    if (v.value("layout", std::string()) != "segments" && (v.contains("second") || s.distance == Distance::kEuclid))
      return Status::NotSupported(
          "this collection was created by an older moeedb, which kept a Euclid vector or a second vector in fixed "
          "slots; this version keeps them in segments: re-create the collection and upsert its points again");
    if (v.contains("rest")) {
      if (!v["rest"].is_array()) return Status::Corruption("collection info: 'rest' is damaged");
      for (const json& r : v["rest"]) {
        MOEEDB_ASSIGN_OR_RETURN(NamedVector x, VectorFromJson(r));
        s.rest.push_back(std::move(x));
      }
    }
  }
  if (v.contains("name") && v["name"].is_string()) s.name = v["name"].get<std::string>();
  s.named = v.value("named", false);
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
