#include "database/search_hit_json.h"

#include <nlohmann/json.hpp>

namespace moeedb {

nlohmann::json DocumentJson(const StoredDocument& d) {
  return {{"id", d.id}, {"text", d.text}, {"metadata", nlohmann::json::parse(d.metadata_json.empty() ? "{}" : d.metadata_json)}};
}

nlohmann::json SearchHitJson(const SearchHit& h, bool has_lexical) {
  nlohmann::json hit = {{"id", h.id}, {"score", h.score}, {"score_hs", h.score_hs}, {"score_rw", h.score_rw}};
  nlohmann::json parts = {{"hs", h.part_hs}, {"rw", h.part_rw}};
  if (has_lexical) {
    hit["score_lex"] = h.score_lex;
    parts["lex"] = h.part_lex;
  }
  hit["parts"] = std::move(parts);
  hit["text"] = h.text;
  // The store only holds metadata it parsed; anything else is shown as a string.
  hit["metadata"] = nlohmann::json::parse(h.metadata_json, nullptr, false);
  if (hit["metadata"].is_discarded()) hit["metadata"] = h.metadata_json;
  return hit;
}

}  // namespace moeedb
