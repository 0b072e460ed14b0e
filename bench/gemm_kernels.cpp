// bench/gemm_kernels: the engine's matmul kernels alone, at the shapes an
// expert's chunk gives them, against the peak of the instruction each is
// built on (peak_rates.h), measured in the same run, on one thread (or
// --threads).
//
//   gemm_kernels [--rows 256] [--hidden 1024] [--inter 512] [--seconds 1] [--threads 1]
//
// Shapes: gate/up (rows x hidden -> 2 inter) and down (rows x inter ->
// hidden), as moe_block.cpp calls the kernels for a chunk of an expert's
// rows (kExpertChunkRows); each kernel is timed for about --seconds per
// shape and its multiply-adds counted 2 operations. The weights are 16
// experts' worth, taken in turn, so a call reads its weight from L2/L3 or
// memory as it does in a forward, not from L1. --threads N splits each call
// over N compute threads as a lone text's forward does (f32 on the parallel
// panel and rows kernels), against the peak of N threads busy at once.
#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <tuple>
#include <string>
#include <vector>

#include "bench/bench_child.h"
#include "bench/cpu_flags.h"
#include "bench/peak_rates.h"
#include "engine/kernels/bf16_gemm.h"
#include "engine/kernels/int8_gemm.h"
#include "engine/kernels/panel_gemm.h"
#include "engine/kernels/runtime.h"

namespace m = moeedb;
using namespace m::bench;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kExperts = 16;

// Calls per second of fn(e) over the experts in turn, for about `seconds`.
double CallsPerSecond(double seconds, const std::function<void(int)>& fn) {
  for (int e = 0; e < kExperts; ++e) fn(e);  // warm-up
  int64_t calls = 0;
  const auto t0 = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int e = 0; e < kExperts; ++e) fn(e);
    calls += kExperts;
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  return static_cast<double>(calls) / elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  const BenchFlags flags("gemm_kernels", argc, argv);
  const int64_t M = IntFlag("rows", 256), H = IntFlag("hidden", 1024), I = IntFlag("inter", 512);
  const double seconds = static_cast<double>(IntFlag("seconds", 1));
  const int threads = static_cast<int>(IntFlag("threads", 1));
  if (threads < 1) flags.Die("--threads is at least 1");
  m::SetComputeThreads(threads);
  std::printf("gemm_kernels: %d thread(s); CPU: %s\nCPU flags: %s\nkernels: int8 %s, bf16 %s (every bf16 path timed "
              "where it runs: dot against the vdpbf16ps peak, widen against the FMA peak, w-avx2 against AVX2's)\n",
              threads, CpuModel().c_str(), CpuFlags().c_str(), m::Int8GemmKernelName(m::Int8GemmKernelInUse()),
              m::Bf16GemmPathName(m::Bf16GemmPathInUse()));
  const PeakRate f32 = PeakF32(threads), bf16 = PeakBf16(threads), int8 = PeakInt8(threads);
  // The AVX2 widening path against AVX2's FMA peak (f32's is AVX-512's
  // where the CPU has it).
  const PeakRate f32_ymm = peak_detail::InstructionPeak(m::TimedInstruction::kFmaYmm, threads);
  std::printf("peaks (%d thread(s) at once): f32 %.1f (%s), bf16 %.1f (%s), int8 %.1f (%s) GOP/s\n\n", threads,
              f32.per_second / 1e9, f32.instruction.c_str(), bf16.per_second / 1e9, bf16.instruction.c_str(),
              int8.per_second / 1e9, int8.instruction.c_str());
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0, 1);
  std::printf("%-11s %-8s %5s %5s %5s %10s %8s\n", "kernel", "shape", "M", "N", "K", "GOP/s", "of peak");
  for (const auto& [shape, N, K] : {std::tuple<const char*, int64_t, int64_t>{"gate_up", 2 * I, H}, {"down", H, I}}) {
    std::vector<float> x(static_cast<size_t>(M * K)), y(static_cast<size_t>(M * N)), w(static_cast<size_t>(K * N));
    for (auto& v : x) v = normal(rng);
    for (auto& v : w) v = normal(rng) * 0.02f;
    const double ops = 2.0 * static_cast<double>(M * N * K);
    auto report = [&](const char* kernel, double calls_per_s, const PeakRate& peak) {
      std::printf("%-11s %-8s %5lld %5lld %5lld %10.1f %8.2f\n", kernel, shape, static_cast<long long>(M),
                  static_cast<long long>(N), static_cast<long long>(K), ops * calls_per_s / 1e9,
                  ops * calls_per_s / peak.per_second);
      std::fflush(stdout);
    };
    if (m::Int8GemmAvailable()) {
      std::vector<int8_t> wq(static_cast<size_t>(K * N));
      std::vector<float> scale(static_cast<size_t>(N), 0.02f / 127);
      for (size_t i = 0; i < wq.size(); ++i) wq[i] = static_cast<int8_t>(std::max(-127.0f, std::min(127.0f, w[i] / scale[i % N])));
      std::vector<std::vector<int8_t>> panels(kExperts, std::vector<int8_t>(static_cast<size_t>(m::Int8PanelBytes(K, N))));
      std::vector<std::vector<int32_t>> terms(kExperts, std::vector<int32_t>(static_cast<size_t>(m::Int8ColumnTerms(N))));
      for (int e = 0; e < kExperts; ++e) m::PackInt8Panels(wq.data(), K, N, panels[e].data(), terms[e].data());
      report("int8", CallsPerSecond(seconds, [&](int e) {
               m::Int8GemmF32(M, N, K, x.data(), K, panels[e].data(), terms[e].data(), scale.data(), y.data(), N);
             }),
             int8);
    }
    std::vector<uint16_t> wb(static_cast<size_t>(K * N));
    for (size_t i = 0; i < wb.size(); ++i) wb[i] = m::Bf16FromFloat(w[i]);
    std::vector<std::vector<uint16_t>> bf16_panels(
        kExperts, std::vector<uint16_t>(static_cast<size_t>(m::Bf16PanelElements(K, N))));
    for (int e = 0; e < kExperts; ++e) m::PackBf16Panels(wb.data(), K, N, bf16_panels[e].data());
    for (const auto& [path, name, peak] : {std::tuple<m::Bf16GemmPath, const char*, const PeakRate*>{
                                               m::Bf16GemmPath::kDot, "bf16 dot", &bf16},
                                           {m::Bf16GemmPath::kWiden, "bf16 widen", &f32},
                                           {m::Bf16GemmPath::kWidenAvx2, "bf16 w-avx2", &f32_ymm}})
      if (m::Bf16GemmPathRuns(path))
        report(name, CallsPerSecond(seconds, [&, path = path](int e) {
                 m::Bf16GemmF32(path, M, N, K, x.data(), K, bf16_panels[e].data(), y.data(), N);
               }),
               *peak);
    // f32 in place ([K, N] row-major, as f32 experts are kept) and packed
    // into 16-column panels (as matrices of at most kPanelMaxBytes are).
    std::vector<std::vector<float>> wf(kExperts, w), wp(kExperts, std::vector<float>(w.size()));
    for (int e = 0; e < kExperts; ++e) m::PackPanels(wf[e].data(), K, N, wp[e].data());
    report("f32 rows", CallsPerSecond(seconds, [&](int e) {
             if (threads == 1) m::RowsGemmF32(M, N, K, x.data(), K, wf[e].data(), N, y.data(), N);
             else m::RowsGemmF32Parallel(M, N, K, x.data(), K, wf[e].data(), N, y.data(), N);
           }),
           f32);
    report("f32 panels", CallsPerSecond(seconds, [&](int e) {
             if (threads == 1) m::PanelGemmF32(M, N, K, x.data(), K, wp[e].data(), y.data(), N);
             else m::PanelGemmF32Parallel(M, N, K, x.data(), K, wp[e].data(), y.data(), N);
           }),
           f32);
  }
  return 0;
}
