// Writes a random-weight checkpoint in HuggingFace layout (config.json,
// model.safetensors, tokenizer.json) for any config the engine loads, so
// tests and benchmarks can make models of any shape. Deterministic in the
// seed. Tensors are generated and written one at a time (a multi-GB model
// never sits in memory whole).
#pragma once

#include <cstdint>
#include <string>

#include "engine/model/checkpoint_spec.h"
#include "engine/io/safetensors.h"
#include "base/status.h"

namespace moeedb {

struct RandomCheckpointOptions {
  uint64_t seed = 0;
  ExpertLayout layout = ExpertLayout::kPerExpert;
  DType dtype = DType::kF32;  // F32, BF16 or F16
  double stddev = 0;          // 0: the config's initializer_range (default 0.02)
};

// config_path: a config.json the engine accepts. tokenizer_path: copied as
// tokenizer.json when non-empty. out_dir is created.
Status WriteRandomCheckpoint(const std::string& config_path, const std::string& tokenizer_path,
                             const std::string& out_dir, const RandomCheckpointOptions& options);

}  // namespace moeedb
