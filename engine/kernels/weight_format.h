// WeightFormat: how a model's weights are held and computed with, chosen at
// load (`--dtype f32|bf16`, `--quant none|int8`, `--device cpu|cuda[:N]`).
#pragma once

#include <string>

#include "base/enum_table.h"
#include "base/status.h"

namespace moeedb {

// The dtype of the weights and, where the hardware has a fast path for it,
// of the matmuls. kBF16 stores bf16 weights (half of f32) and computes in
// bf16 on CUDA and on CPUs with oneDNN's bf16 GEMM (AVX-512 BW/VL/DQ); on
// other CPUs (libtorch's fallback bf16 GEMM runs at ~1 GFLOP/s) the compute
// is f32: the bf16 panel kernel widens the weights in registers where it
// runs (AVX2, bf16_gemm.h), else each matrix is widened at matmul time. The residual stream, norms,
// softmaxes and the router stay f32 whatever this says (RW fidelity).
enum class ComputeDtype { kF32, kBF16 };
// How expert, attention and dense-MLP weights are stored. kInt8: symmetric
// per-output-channel scales (w ~= q * scale[row], q in [-127, 127]), turned
// back into the compute dtype one matrix at a time at matmul time, the scale
// applied to the matmul's output. The token embeddings are int8 too, with a
// scale per row (a lookup widens its rows); router, norms and the LM head
// stay f32.
enum class WeightQuant { kNone, kInt8 };

struct WeightFormat {
  ComputeDtype dtype = ComputeDtype::kF32;
  WeightQuant quant = WeightQuant::kNone;
};

struct LoadOptions {
  WeightFormat format;
  std::string device = "cpu";  // "cpu", "cuda" or "cuda:N" (needs a CUDA-enabled libtorch)
};

inline constexpr EnumTable<ComputeDtype, 4> kComputeDtypes{"dtype",
                                                           {{{ComputeDtype::kF32, "f32"},
                                                             {ComputeDtype::kBF16, "bf16"},
                                                             {ComputeDtype::kF32, "float32", true},
                                                             {ComputeDtype::kBF16, "bfloat16", true}}}};
inline constexpr EnumTable<WeightQuant, 2> kWeightQuants{"quantization",
                                                         {{{WeightQuant::kNone, "none"}, {WeightQuant::kInt8, "int8"}}}};
// "f32", "bf16", "f32+int8", "bf16+int8".
std::string WeightFormatName(const WeightFormat& f);
// Whether this CPU runs libtorch's bf16 GEMM fast (oneDNN: AVX-512 BW, VL and
// DQ). MOEEDB_BF16_COMPUTE=off says no (f32 compute, as on a CPU without
// them: tests and benchmarks take an AVX2-only CPU's path); read once.
bool CpuHasFastBf16Gemm();
// The dtype the matmuls really run in for `f` on a device: bf16 only where
// it is fast (CUDA, or CpuHasFastBf16Gemm), else f32.
ComputeDtype EffectiveComputeDtype(const WeightFormat& f, bool cuda);

}  // namespace moeedb
