// What this CPU can do at most, measured: the arithmetic peak of the
// instruction each weight format's kernels are built on (f32 FMA, bf16 dot
// product, int8 dot product) and the rate at which threads read memory. A
// roofline divides a stage's achieved rate by these; they are measured in
// the same run as the stage, as the CPU's clock (AVX-512 licences, turbo)
// and a shared host's load change between runs.
//
// Each peak runs kPeakChains independent accumulator chains of one
// instruction on registers only (no loads), so it is bound by the
// instruction's throughput, not its latency; the best of kPeakTrials timed
// runs, on `threads` threads at once (each its own loop), summed.
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

namespace moeedb::bench {

struct PeakRate {
  std::string instruction;  // what was timed, e.g. "vfmadd231ps zmm"; empty: the CPU lacks it
  double per_second = std::nan("");  // operations (a multiply-add counts 2) or bytes, all threads together
};

namespace peak_detail {

constexpr int kPeakChains = 12;  // > latency x issue width of every instruction timed here
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

// The chains' sum, kept so the loop is not optimised away.
inline std::atomic<double> g_sink{0};

__attribute__((target("avx512f"))) inline void FmaAvx512(int64_t n) {
  __m512 acc[kPeakChains];
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-3f);
  for (auto& v : acc) v = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; ++i)
    for (auto& v : acc) v = _mm512_fmadd_ps(v, a, b);
  __m512 s = acc[0];
  for (int j = 1; j < kPeakChains; ++j) s = _mm512_add_ps(s, acc[j]);
  g_sink.store(_mm512_reduce_add_ps(s));
}

__attribute__((target("avx2,fma"))) inline void FmaAvx2(int64_t n) {
  __m256 acc[kPeakChains];
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f);
  for (auto& v : acc) v = _mm256_set1_ps(1.0f);
  for (int64_t i = 0; i < n; ++i)
    for (auto& v : acc) v = _mm256_fmadd_ps(v, a, b);
  float out[8];
  __m256 s = acc[0];
  for (int j = 1; j < kPeakChains; ++j) s = _mm256_add_ps(s, acc[j]);
  _mm256_storeu_ps(out, s);
  g_sink.store(out[0]);
}

__attribute__((target("avx512f,avx512bf16"))) inline void DotBf16Avx512(int64_t n) {
  __m512 acc[kPeakChains];
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3a83);  // 1.0, ~1e-3
  for (auto& v : acc) v = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; ++i)
    for (auto& v : acc) v = _mm512_dpbf16_ps(v, a, b);
  __m512 s = acc[0];
  for (int j = 1; j < kPeakChains; ++j) s = _mm512_add_ps(s, acc[j]);
  g_sink.store(_mm512_reduce_add_ps(s));
}

__attribute__((target("avx512f,avx512vnni"))) inline void DotInt8Avx512(int64_t n) {
  __m512i acc[kPeakChains];
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (auto& v : acc) v = _mm512_setzero_si512();
  // In place by hand: GCC 12 copies and spills each accumulator around
  // _mm512_dpbusd_epi32 (as it did in the int8 kernel's tile).
  for (int64_t i = 0; i < n; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < kPeakChains; ++j) {
      __m512i v = acc[j];
      asm("vpdpbusd %2, %1, %0" : "+v"(v) : "v"(a), "v"(b));
      acc[j] = v;
    }
  __m512i s = acc[0];
  for (int j = 1; j < kPeakChains; ++j) s = _mm512_add_epi32(s, acc[j]);
  g_sink.store(_mm512_reduce_add_epi32(s));
}

// The AVX2 int8 kernel's instruction pair: int8 widened to int16 at load,
// vpmaddwd (16 multiply-adds into 8 int32 sums) then vpaddd. Written out:
// with constant operands the compiler hoists the intrinsic's vpmaddwd out
// of the loop and times the adds alone.
__attribute__((target("avx2"))) inline void DotInt16Avx2(int64_t n) {
  __m256i acc[kPeakChains];
  const __m256i a = _mm256_set1_epi16(3), b = _mm256_set1_epi16(-2);
  for (auto& v : acc) v = _mm256_setzero_si256();
  for (int64_t i = 0; i < n; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < kPeakChains; ++j) {
      __m256i v = acc[j], t;
      asm volatile("vpmaddwd %3, %2, %1\n\tvpaddd %1, %0, %0" : "+v"(v), "=&v"(t) : "v"(a), "v"(b));
      acc[j] = v;
    }
  __m256i s = acc[0];
  for (int j = 1; j < kPeakChains; ++j) s = _mm256_add_epi32(s, acc[j]);
  int out[8];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), s);
  g_sink.store(out[0]);
}

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

template <void (*Loop)(int64_t)>
double OpsPerSecond(int threads, double ops_per_instruction) {
  const double secs = BestSeconds(threads, [](int) { Loop(kPeakIterations); });
  return threads * ops_per_instruction * kPeakChains * static_cast<double>(kPeakIterations) / secs;
}

}  // namespace peak_detail

// f32 multiply-adds: vfmadd231ps on zmm (AVX-512) or ymm.
inline PeakRate PeakF32(int threads) {
  using namespace peak_detail;
  if (__builtin_cpu_supports("avx512f")) return {"vfmadd231ps zmm", OpsPerSecond<FmaAvx512>(threads, 32)};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {"vfmadd231ps ymm", OpsPerSecond<FmaAvx2>(threads, 16)};
  return {};
}

// bf16 pairs into f32: vdpbf16ps zmm (32 multiply-adds), AVX512-BF16 only.
inline PeakRate PeakBf16(int threads) {
  using namespace peak_detail;
  if (__builtin_cpu_supports("avx512bf16")) return {"vdpbf16ps zmm", OpsPerSecond<DotBf16Avx512>(threads, 64)};
  return {};
}

// u8 x s8 quads into int32: vpdpbusd zmm (64 multiply-adds) with
// AVX512-VNNI, else the AVX2 kernel's vpmaddwd + vpaddd (16).
inline PeakRate PeakInt8(int threads) {
  using namespace peak_detail;
  if (__builtin_cpu_supports("avx512vnni")) return {"vpdpbusd zmm", OpsPerSecond<DotInt8Avx512>(threads, 128)};
  if (__builtin_cpu_supports("avx2")) return {"vpmaddwd+vpaddd ymm", OpsPerSecond<DotInt16Avx2>(threads, 32)};
  return {};
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
