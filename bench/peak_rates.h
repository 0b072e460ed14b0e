// What this CPU can do at most, measured: the arithmetic peak of the
// instruction each weight format's kernels are built on (f32 FMA, bf16 dot
// product, int8 dot product) and the rate at which threads read memory. A
// roofline divides a stage's achieved rate by these; they are measured in
// the same run as the stage, as the CPU's clock (AVX-512 licences, turbo)
// and a shared host's load change between runs.
//
// Each peak runs the engine's instruction timer (instruction_rate.h: its
// independent chains of one instruction on registers only); the best of
// kPeakTrials timed runs, on `threads` threads at once (each its own loop),
// summed.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "engine/kernels/instruction_rate.h"

namespace moeedb::bench {

struct PeakRate {
  std::string instruction;  // what was timed, e.g. "vfmadd231ps zmm"; empty: the CPU lacks it
  double per_second = std::nan("");  // operations (a multiply-add counts 2) or bytes, all threads together
};

namespace peak_detail {

constexpr int kPeakTrials = 3;
constexpr int64_t kPeakIterations = int64_t{1} << 24;

using Clock = std::chrono::steady_clock;

// Runs body(thread) on `threads` threads at once; the best wall time of the trials.
template <typename Body>
double BestSeconds(int threads, Body body) {
  double best = 1e30;
  for (int trial = 0; trial < kPeakTrials; ++trial) {
    std::atomic<int> ready{0};
    std::vector<std::thread> pool;
    const auto t0 = Clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        ready.fetch_add(1);
        while (ready.load() < threads) {
        }
        body(t);
      });
    for (auto& th : pool) th.join();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

// The read loop's sum, kept so the loop is not optimised away.
inline std::atomic<double> g_sink{0};

// Four ymm accumulators over n floats (n a multiple of 32): the loads, not
// the adds, bound it.
__attribute__((target("avx"))) inline void SumFloatsAvx(const float* p, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  float out[8];
  _mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  g_sink.store(out[0]);
}

inline void SumFloats(const float* p, size_t n) {
  if (__builtin_cpu_supports("avx")) return SumFloatsAvx(p, n);
  float acc[16] = {};
  for (size_t i = 0; i < n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += p[i + j];
  g_sink.store(acc[0]);
}

// The instruction's operations a second on `threads` threads at once
// (engine/kernels/instruction_rate.h), with its name; empty where the CPU
// lacks it.
inline PeakRate InstructionPeak(TimedInstruction i, int threads) {
  if (!TimedInstructionRuns(i)) return {};
  const double secs = BestSeconds(threads, [i](int) { TimeInstruction(i, kPeakIterations); });
  return {TimedInstructionName(i), threads * TimedInstructionOperations(i) * kInstructionChains *
                                       static_cast<double>(kPeakIterations) / secs};
}

}  // namespace peak_detail

// f32 multiply-adds: vfmadd231ps on zmm (AVX-512) or ymm.
inline PeakRate PeakF32(int threads) {
  const PeakRate zmm = peak_detail::InstructionPeak(TimedInstruction::kFmaZmm, threads);
  return zmm.instruction.empty() ? peak_detail::InstructionPeak(TimedInstruction::kFmaYmm, threads) : zmm;
}

// bf16 pairs into f32: vdpbf16ps zmm (32 multiply-adds), AVX512-BF16 only.
inline PeakRate PeakBf16(int threads) { return peak_detail::InstructionPeak(TimedInstruction::kDotBf16Zmm, threads); }

// u8 x s8 quads into int32: vpdpbusd zmm (64 multiply-adds) with
// AVX512-VNNI, else the AVX2 kernel's vpmaddwd + vpaddd (16).
inline PeakRate PeakInt8(int threads) {
  const PeakRate vnni = peak_detail::InstructionPeak(TimedInstruction::kDotInt8Zmm, threads);
  return vnni.instruction.empty() ? peak_detail::InstructionPeak(TimedInstruction::kMaddInt16Ymm, threads) : vnni;
}

// Bytes/s at which `threads` threads read memory together: each sums its
// own 256 MiB of floats (far past any cache), best of the trials.
inline PeakRate ReadBandwidth(int threads) {
  using namespace peak_detail;
  const size_t per_thread = size_t{1} << 26;  // floats
  std::vector<std::vector<float>> bufs(static_cast<size_t>(threads), std::vector<float>(per_thread, 1.0f));
  const double secs = BestSeconds(threads, [&](int t) { SumFloats(bufs[static_cast<size_t>(t)].data(), per_thread); });
  return {"sum of floats", threads * static_cast<double>(per_thread * sizeof(float)) / secs};
}

}  // namespace moeedb::bench
