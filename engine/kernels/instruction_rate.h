// TimeInstruction: how fast this CPU issues one SIMD instruction, timed on
// registers only: kInstructionChains independent accumulator chains of it
// (no loads), so the instruction's throughput bounds the loop, not its
// latency. The bf16 kernel's path probe compares two of them (bf16_gemm.h);
// the benchmarks' peaks run them on every thread (bench/peak_rates.h).
#pragma once

#include <cstdint>

namespace moeedb {

constexpr int kInstructionChains = 12;  // more than latency x issue width of each instruction here

enum class TimedInstruction {
  kFmaZmm,        // vfmadd231ps zmm: 16 f32 multiply-adds
  kFmaYmm,        // vfmadd231ps ymm: 8
  kDotBf16Zmm,    // vdpbf16ps zmm: 32 bf16 pair multiply-adds into f32
  kDotInt8Zmm,    // vpdpbusd zmm: 64 u8 x s8 multiply-adds into int32
  kMaddInt16Ymm,  // vpmaddwd + vpaddd ymm (the AVX2 int8 kernel's pair): 16
};

// Whether this CPU runs it.
bool TimedInstructionRuns(TimedInstruction i);
// Its name ("vfmadd231ps zmm") and operations (a multiply-add counts 2).
const char* TimedInstructionName(TimedInstruction i);
double TimedInstructionOperations(TimedInstruction i);
// Seconds `steps` steps take, each one instruction on every chain
// (steps x kInstructionChains instructions); 0 where the CPU lacks it.
double TimeInstruction(TimedInstruction i, int64_t steps);

}  // namespace moeedb
