// libFuzzer: config.json -> model family and shape (what every loader reads first).
#include <string>

#include "engine/model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto c = moeedb::ModelConfig::FromJson(std::string(reinterpret_cast<const char*>(data), size), "config.json");
  if (c.ok()) {
    (void)c->Summary();
    (void)c->rw_dim();
    if (c->top_k > c->num_experts || c->moe_layer.size() != static_cast<size_t>(c->num_layers)) __builtin_trap();
  }
  return 0;
}
