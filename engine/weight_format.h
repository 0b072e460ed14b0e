// WeightFormat: how a model's weights are held and computed with, chosen at
// load (`--dtype f32|bf16`, `--quant none|int8`, `--device cpu|cuda[:N]`).
#pragma once

#include <string>

#include "engine/status.h"

namespace moeedb {

// The dtype the matmuls run in. The residual stream, norms, softmaxes and the
// router stay f32 whatever this says (RW fidelity; method.md reads router
// logits in f32).
enum class ComputeDtype { kF32, kBF16 };
// How expert, attention and dense-MLP weights are stored. kInt8: symmetric
// per-output-channel scales (w ~= q * scale[row], q in [-127, 127]), turned
// back into the compute dtype one matrix at a time at matmul time, the scale
// applied to the matmul's output. Router, norms and embeddings stay f32.
enum class WeightQuant { kNone, kInt8 };

struct WeightFormat {
  ComputeDtype dtype = ComputeDtype::kF32;
  WeightQuant quant = WeightQuant::kNone;
};

struct LoadOptions {
  WeightFormat format;
  std::string device = "cpu";  // "cpu", "cuda" or "cuda:N" (needs a CUDA-enabled libtorch)
};

const char* ComputeDtypeName(ComputeDtype d);  // "f32" | "bf16"
const char* WeightQuantName(WeightQuant q);    // "none" | "int8"
Result<ComputeDtype> ParseComputeDtype(const std::string& name);
Result<WeightQuant> ParseWeightQuant(const std::string& name);
// "f32", "bf16", "f32+int8", "bf16+int8".
std::string WeightFormatName(const WeightFormat& f);

}  // namespace moeedb
