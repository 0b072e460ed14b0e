#include "engine/kernels/instruction_rate.h"

#include <atomic>
#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace moeedb {

namespace {

std::atomic<double> g_sink{0};  // keeps the chains' results

#if defined(__x86_64__)

__attribute__((target("avx512f"))) void FmaZmm(int64_t n) {
  __m512 acc[kInstructionChains];
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-3f);
  for (auto& v : acc) v = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; ++i)
    for (auto& v : acc) v = _mm512_fmadd_ps(v, a, b);
  for (int j = 1; j < kInstructionChains; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  g_sink.store(_mm512_reduce_add_ps(acc[0]));
}

__attribute__((target("avx2,fma"))) void FmaYmm(int64_t n) {
  __m256 acc[kInstructionChains];
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f);
  for (auto& v : acc) v = _mm256_set1_ps(1.0f);
  for (int64_t i = 0; i < n; ++i)
    for (auto& v : acc) v = _mm256_fmadd_ps(v, a, b);
  for (int j = 1; j < kInstructionChains; ++j) acc[0] = _mm256_add_ps(acc[0], acc[j]);
  float out[8];
  _mm256_storeu_ps(out, acc[0]);
  g_sink.store(out[0]);
}

__attribute__((target("avx512f,avx512bf16"))) void DotBf16Zmm(int64_t n) {
  __m512 acc[kInstructionChains];
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3a83);  // 1.0, ~1e-3
  for (auto& v : acc) v = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; ++i)
    for (auto& v : acc) v = _mm512_dpbf16_ps(v, a, b);
  for (int j = 1; j < kInstructionChains; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  g_sink.store(_mm512_reduce_add_ps(acc[0]));
}

// Written out: GCC 12 copies and spills each accumulator around
// _mm512_dpbusd_epi32 (as it did in the int8 kernel's tile, int8_gemm.cpp).
__attribute__((target("avx512f,avx512vnni"))) void DotInt8Zmm(int64_t n) {
  __m512i acc[kInstructionChains];
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (auto& v : acc) v = _mm512_setzero_si512();
  for (int64_t i = 0; i < n; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < kInstructionChains; ++j) {
      __m512i v = acc[j];
      asm("vpdpbusd %2, %1, %0" : "+v"(v) : "v"(a), "v"(b));
      acc[j] = v;
    }
  for (int j = 1; j < kInstructionChains; ++j) acc[0] = _mm512_add_epi32(acc[0], acc[j]);
  g_sink.store(_mm512_reduce_add_epi32(acc[0]));
}

// Written out: with constant operands the compiler hoists the intrinsic's
// vpmaddwd out of the loop and times the adds alone.
__attribute__((target("avx2"))) void MaddInt16Ymm(int64_t n) {
  __m256i acc[kInstructionChains];
  const __m256i a = _mm256_set1_epi16(3), b = _mm256_set1_epi16(-2);
  for (auto& v : acc) v = _mm256_setzero_si256();
  for (int64_t i = 0; i < n; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < kInstructionChains; ++j) {
      __m256i v = acc[j], t;
      asm volatile("vpmaddwd %3, %2, %1\n\tvpaddd %1, %0, %0" : "+v"(v), "=&v"(t) : "v"(a), "v"(b));
      acc[j] = v;
    }
  for (int j = 1; j < kInstructionChains; ++j) acc[0] = _mm256_add_epi32(acc[0], acc[j]);
  int out[8];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), acc[0]);
  g_sink.store(out[0]);
}

#endif  // __x86_64__

}  // namespace

bool TimedInstructionRuns(TimedInstruction i) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  switch (i) {
    case TimedInstruction::kFmaZmm: return __builtin_cpu_supports("avx512f");
    case TimedInstruction::kFmaYmm: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case TimedInstruction::kDotBf16Zmm: return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
    case TimedInstruction::kDotInt8Zmm: return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
    case TimedInstruction::kMaddInt16Ymm: return __builtin_cpu_supports("avx2");
  }
#endif
  (void)i;
  return false;
}

const char* TimedInstructionName(TimedInstruction i) {
  switch (i) {
    case TimedInstruction::kFmaZmm: return "vfmadd231ps zmm";
    case TimedInstruction::kFmaYmm: return "vfmadd231ps ymm";
    case TimedInstruction::kDotBf16Zmm: return "vdpbf16ps zmm";
    case TimedInstruction::kDotInt8Zmm: return "vpdpbusd zmm";
    case TimedInstruction::kMaddInt16Ymm: return "vpmaddwd+vpaddd ymm";
  }
  return "?";
}

double TimedInstructionOperations(TimedInstruction i) {
  switch (i) {
    case TimedInstruction::kFmaZmm: return 32;
    case TimedInstruction::kFmaYmm: return 16;
    case TimedInstruction::kDotBf16Zmm: return 64;
    case TimedInstruction::kDotInt8Zmm: return 128;
    case TimedInstruction::kMaddInt16Ymm: return 32;
  }
  return 0;
}

double TimeInstruction(TimedInstruction i, int64_t steps) {
  if (!TimedInstructionRuns(i)) return 0;
#if defined(__x86_64__)
  void (*loop)(int64_t) = nullptr;
  switch (i) {
    case TimedInstruction::kFmaZmm: loop = FmaZmm; break;
    case TimedInstruction::kFmaYmm: loop = FmaYmm; break;
    case TimedInstruction::kDotBf16Zmm: loop = DotBf16Zmm; break;
    case TimedInstruction::kDotInt8Zmm: loop = DotInt8Zmm; break;
    case TimedInstruction::kMaddInt16Ymm: loop = MaddInt16Ymm; break;
  }
  const auto t0 = std::chrono::steady_clock::now();
  loop(steps);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
#else
  (void)steps;
  return 0;
#endif
}

}  // namespace moeedb
