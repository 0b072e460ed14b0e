#include "engine/model/model_defaults.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/model/model_config.h"
#include "engine/model/trained_pooler.h"

namespace moeedb {

namespace fs = std::filesystem;

Result<EmbeddingDefaults> ModelEmbeddingDefaults(const std::string& model_dir) {
  EmbeddingDefaults d;
  // An encoder (a post-norm family: BERT's) reads every token both ways and
  // was trained without a prompt: the mean of its tokens, as
  // sentence-transformers pools it, is its sentence vector.
  auto config = ModelConfig::FromFile((fs::path(model_dir) / "config.json").string());
  if (config.ok() && config->family->post_norm) d.prompt = "raw", d.hs_pooling = "mean", d.rw_pooling = "mean";
  if (TrainedPooler::ExistsIn(model_dir)) d.hs_pooling = "trained";
  const fs::path path = fs::path(model_dir) / "embedding.json";
  if (!fs::exists(path)) return d;
  std::ifstream in(path, std::ios::binary);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::Corruption(path.string() + " is not a JSON object");
  for (auto [key, field] : {std::pair{"prompt", &d.prompt}, {"hs_pooling", &d.hs_pooling}, {"rw_pooling", &d.rw_pooling}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_string()) return Status::Corruption(path.string() + ": '" + key + "' must be a string");
    *field = j[key].get<std::string>();
  }
  if (j.contains("alpha")) {
    if (!j["alpha"].is_number() || !std::isfinite(j["alpha"].get<double>()))
      return Status::Corruption(path.string() + ": 'alpha' must be a finite number");
    d.alpha = j["alpha"].get<double>();
  }
  return d;
}

}  // namespace moeedb
