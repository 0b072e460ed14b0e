// bench/roofline: each forward stage's achieved rate against what this CPU
// can do at most, measured in the same run.
//
//   roofline --model DIR [--texts 32] [--tokens 256] [--one-texts 8] [--threads 2] [--repeats 3]
//            [--configs f32:none:learned,f32:int8:learned,bf16:none:learned,f32:none:top1,f32:int8:top1,bf16:none:top1]
//
// First the peaks (peak_rates.h): f32 FMA, bf16 dot and int8 dot products
// on registers, and memory read bandwidth, on one thread and on --threads.
// Then, per configuration (a child process each: its own kernel choice and
// RSS), the texts embedded as `moeedb embed` embeds them (the streaming
// embedder, the CLI's worker split) in two cases: `batch`, --texts random
// texts of --tokens tokens in one stream; `one`, --one-texts such texts one
// stream each (a query or a single document). The forward profile
// (engine/model/forward_profile.h) gives each stage's thread-time, its
// arithmetic and the matmul weight bytes it read, as the kernels' callers
// count them. Per stage the bench prints:
//   GF/s  its operations per second of its thread-time (a multiply-add 2);
//   peak  the per-thread peak of the instruction its format runs on (the
//         --threads figure over --threads: every thread busy, as in a run);
//   roof  the roofline's bound for its arithmetic intensity: min(peak,
//         flops/weight byte x per-thread read bandwidth); weight-bound
//         stages (few rows per weight, e.g. top-1 on one text) sit under
//         the bandwidth slope;
//   of roof  GF/s / roof.
// Stages the forward thread times around a multi-threaded call (all but the
// experts') count wall time x the forward's threads as their thread-time (a
// worker's share in `batch`; every thread in `one`, as a lone text runs).
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_child.h"
#include "bench/bench_model.h"
#include "bench/cpu_flags.h"
#include "bench/peak_rates.h"
#include "bench/stream_texts.h"
#include "engine/embed/embed_workers.h"
#include "engine/embed/embedder.h"
#include "engine/kernels/bf16_gemm.h"
#include "engine/kernels/int8_gemm.h"
#include "engine/kernels/runtime.h"
#include "engine/model/forward_profile.h"

using json = nlohmann::json;
namespace m = moeedb;
using namespace m::bench;  // Flag, IntFlag, Die, ...

namespace {

constexpr int kStages = static_cast<int>(m::ForwardStage::kCount);

// One case's run: tokens/s and per stage thread-ns, flops and weight bytes.
json Measure(const m::Embedder& embedder, const std::vector<std::vector<std::vector<int32_t>>>& streams,
             int threads_per_forward) {
  (void)m::TakeForwardProfile();
  double secs = 0, tokens = 0;
  for (const auto& texts : streams) {
    secs += EmbedLikeTheCli(embedder, texts);
    for (const auto& t : texts) tokens += static_cast<double>(t.size());
  }
  const m::ForwardProfileTotals p = m::TakeForwardProfile();
  json stages = json::object();
  double staged_ns = 0, staged_flops = 0, staged_bytes = 0;
  for (int s = 0; s < kStages; ++s) {
    const auto stage = static_cast<m::ForwardStage>(s);
    // The experts' stages are timed in each compute thread; the others around
    // their call, while the worker's threads all run it.
    const double scale = stage == m::ForwardStage::kExpertGemm || stage == m::ForwardStage::kExpertBookkeeping
                             ? 1.0
                             : threads_per_forward;
    double ns = static_cast<double>(p.ns[static_cast<size_t>(s)]) * scale;
    double flops = p.flops[static_cast<size_t>(s)], bytes = p.weight_bytes[static_cast<size_t>(s)];
    if (stage == m::ForwardStage::kForward) {  // the rest: the whole forward less the stages timed inside it
      ns -= staged_ns;
    } else {
      staged_ns += ns;
      staged_flops += flops;
      staged_bytes += bytes;
    }
    stages[m::ForwardStageName(stage)] = {{"ns", ns}, {"flops", flops}, {"bytes", bytes}};
  }
  return {{"tokens_per_s", tokens / secs}, {"tokens", tokens}, {"stages", stages}};
}

json Child(const std::string& config) {
  const std::unique_ptr<m::MoeModel> model = LoadConfigModel(Flag("model"), config);
  const int64_t T = IntFlag("tokens", 256);
  const m::Embedder embedder(model.get(), nullptr, m::EmbedderOptions{});
  const std::vector<std::vector<std::vector<int32_t>>> batch = {RandomTexts(*model, IntFlag("texts", 32), T, 2)};
  std::vector<std::vector<std::vector<int32_t>>> ones;
  for (const auto& t : RandomTexts(*model, IntFlag("one-texts", 8), T, 3)) ones.push_back({t});
  const m::WorkerShare share = m::ShareComputeThreads(0, m::ComputeThreads());
  EmbedLikeTheCli(embedder, batch[0]);  // warm-up: first touch of the buffers
  m::EnableForwardProfile(true);
  json runs = json::array();
  for (int64_t rep = 0; rep < std::max<int64_t>(1, IntFlag("repeats", 3)); ++rep) {
    runs.push_back({{"case", "batch"}, {"run", Measure(embedder, batch, share.threads_per_worker)}});
    // A lone text is not split: it runs on every compute thread (EmbedWorkers).
    runs.push_back({{"case", "one"}, {"run", Measure(embedder, ones, m::ComputeThreads())}});
  }
  // The instruction the matmuls run on, whose peak bounds them: bf16
  // weights widened to float32 multiply with FMA (bf16_gemm.h), under bf16
  // compute or, without a fast bf16 GEMM, f32 compute.
  std::string format = "f32", peak = "f32";
  if (ParseConfigWord(config).dtype == "bf16" && m::Bf16GemmAvailable() &&
      (model->compute_dtype() == m::ComputeDtype::kBF16 || m::Bf16GemmWidens())) {
    const bool dot = m::Bf16GemmPathInUse() == m::Bf16GemmPath::kDot;
    format = dot ? "bf16" : "bf16 widened to f32";
    peak = dot ? "bf16" : "f32";
  }
  if (ParseConfigWord(config).quant == "int8" && m::Int8GemmAvailable()) format = peak = "int8";
  return {{"config", config}, {"matmul_format", format}, {"matmul_peak", peak}, {"runs", runs}};
}

}  // namespace

int main(int argc, char** argv) {
  // As the CLI (plugin/cli/main.cpp): keep freed memory for the next forward.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 256 << 20);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  const BenchFlags flags("roofline", argc, argv);
  if (Flag("model").empty()) Die("--model DIR is required");
  const int threads = static_cast<int>(IntFlag("threads", 2));
  m::SetComputeThreads(threads);
  if (!Flag("child").empty()) {
    std::printf("%s\n", Child(Flag("child")).dump().c_str());
    return 0;
  }
  const m::WorkerShare share = m::ShareComputeThreads(0, m::ComputeThreads());
  std::printf("roofline: model %s; batch: %lld texts x %lld tokens; one: %lld texts one at a time; %d threads "
              "(%d workers x %d, as `moeedb embed`); %lld repeats, medians\n",
              Flag("model").c_str(), static_cast<long long>(IntFlag("texts", 32)),
              static_cast<long long>(IntFlag("tokens", 256)), static_cast<long long>(IntFlag("one-texts", 8)), threads,
              share.workers, share.threads_per_worker, static_cast<long long>(IntFlag("repeats", 3)));
  std::printf("CPU: %s\nCPU flags: %s\n", CpuModel().c_str(), CpuFlags().c_str());
  std::printf("kernels: int8 GEMM %s, bf16 GEMM %s\n\n", m::Int8GemmKernelName(m::Int8GemmKernelInUse()),
              m::Bf16GemmPathName(m::Bf16GemmPathInUse()));

  // The peaks, per thread: alone, and with every thread running it.
  std::map<std::string, double> per_thread;  // format -> ops/s per thread with all threads busy
  std::printf("%-10s %-22s %16s %16s %18s\n", "peak", "instruction", "1 thread", "per thread of N", "N threads");
  const std::pair<std::string, m::bench::PeakRate (*)(int)> peaks[] = {
      {"f32", PeakF32}, {"bf16", PeakBf16}, {"int8", PeakInt8}, {"read", ReadBandwidth}};
  for (const auto& [name, fn] : peaks) {
    const PeakRate one = fn(1), all = fn(threads);
    per_thread[name] = all.per_second / threads;
    const char* unit = name == "read" ? "GB/s" : "GOP/s";
    std::printf("%-10s %-22s %11.1f %-4s %11.1f %-4s %13.1f %-4s\n", name.c_str(),
                one.instruction.empty() ? "(not on this CPU)" : one.instruction.c_str(), one.per_second / 1e9, unit,
                per_thread[name] / 1e9, unit, all.per_second / 1e9, unit);
  }
  std::printf("\n");

  const double bandwidth = per_thread["read"];
  for (const auto& config : Split(Flag("configs", "f32:none:learned,f32:int8:learned,bf16:none:learned,f32:none:top1,"
                                                  "f32:int8:top1,bf16:none:top1"))) {
    const json r = flags.RunChild(config);
    const std::string format = r["matmul_format"], matmul_peak = r["matmul_peak"];
    for (const char* which : {"batch", "one"}) {
      std::vector<double> rates;
      std::map<std::string, std::map<std::string, std::vector<double>>> by;  // stage -> field -> per run
      for (const auto& run : r["runs"]) {
        if (run["case"] != which) continue;
        const json& x = run["run"];
        rates.push_back(x["tokens_per_s"]);
        for (const auto& [stage, v] : x["stages"].items())
          for (const char* f : {"ns", "flops", "bytes"})
            by[stage][f].push_back(v[f].get<double>() / x["tokens"].get<double>());  // per token
      }
      std::printf("%s, %s (matmuls in %s): %.1f tokens/s\n", config.c_str(), which, format.c_str(), Median(rates));
      std::printf("  %-19s %9s %7s %10s %9s %9s %9s %9s %8s\n", "stage", "ns/token", "share", "flop/token", "GF/s",
                  "peak", "flop/B", "roof", "of roof");
      double total_ns = 0;
      for (auto& [stage, f] : by) total_ns += Median(f["ns"]);
      for (int s = 0; s < kStages; ++s) {
        const std::string stage = m::ForwardStageName(static_cast<m::ForwardStage>(s));
        auto& f = by[stage];
        const double ns = Median(f["ns"]), flops = Median(f["flops"]), bytes = Median(f["bytes"]);
        const bool matmul = stage == "expert_gemm" || stage == "projections";
        const double peak = per_thread[matmul ? matmul_peak : "f32"];
        const double rate = ns > 0 ? flops / ns * 1e9 : 0;  // per thread-second
        const double intensity = bytes > 0 ? flops / bytes : INFINITY;
        const double roof = std::min(peak, intensity * bandwidth);
        if (flops > 0)
          std::printf("  %-19s %9.0f %6.1f%% %10.3g %9.1f %9.1f %9.1f %9.1f %7.2f\n", stage == "forward" ? "rest" : stage.c_str(),
                      ns, 100 * ns / total_ns, flops, rate / 1e9, peak / 1e9, intensity, roof / 1e9, rate / roof);
        else
          std::printf("  %-19s %9.0f %6.1f%%\n", stage == "forward" ? "rest" : stage.c_str(), ns, 100 * ns / total_ns);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  return 0;
}
