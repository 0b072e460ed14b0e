// bench/batch_scaling: ingest tokens/s against the forward size (--batch-tokens),
// per weight format and routing mode, with where each token's time goes.
//
//   batch_scaling --model DIR [--texts 128] [--tokens 256] [--threads 2]
//                 [--batches 256,1024,4096,16384] [--repeats 3]
//                 [--configs f32:none:learned,f32:int8:learned,bf16:none:learned,f32:none:top1,f32:int8:top1]
//                 [--kernels native|avx2]  (avx2: every kernel capped at AVX2, as on a CPU without AVX-512)
//
// Each configuration runs in a child process that loads the model once and
// embeds the same texts the way `moeedb embed` does (the streaming embedder,
// the CLI's worker split of the threads), once per batch setting, the
// settings interleaved (rotated each repeat: the host's speed drifts by tens
// of percent between minutes); the parent prints medians. Per run: tokens/s,
// and per token the nanoseconds of each forward stage (engine/model/
// forward_profile.h), the kernel's system time and minor page faults.
#include <ATen/ATen.h>
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
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
#include "engine/embed/streaming_embedder.h"
#include "engine/kernels/bf16_gemm.h"
#include "engine/kernels/int8_gemm.h"
#include "engine/kernels/runtime.h"
#include "engine/model/forward_profile.h"
#include "engine/model/model.h"
#include "engine/model/routing_policy.h"

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace m = moeedb;

namespace {

using namespace m::bench;  // Flag, IntFlag, Die, RunChild

struct Usage {
  double sys_s = 0;
  int64_t minor_faults = 0;
};
Usage ProcessUsage() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return {static_cast<double>(u.ru_stime.tv_sec) + u.ru_stime.tv_usec / 1e6, static_cast<int64_t>(u.ru_minflt)};
}

json Child(const std::string& config) {
  const std::string quant = ParseConfigWord(config).quant;
  const std::unique_ptr<m::MoeModel> model = LoadConfigModel(Flag("model"), config);
  const int64_t n = IntFlag("texts", 128), T = IntFlag("tokens", 256);
  const std::vector<std::vector<int32_t>> texts = RandomTexts(*model, n, T, 2);
  std::vector<int64_t> batches;
  for (const auto& b : Split(Flag("batches", "256,1024,4096,16384"))) batches.push_back(std::stoll(b));
  std::vector<std::unique_ptr<m::Embedder>> embedders;
  for (int64_t b : batches) {
    m::EmbedderOptions eo;
    eo.batch_tokens = b;
    embedders.push_back(std::make_unique<m::Embedder>(model.get(), nullptr, eo));
  }
  // Warm-up: first touch of the buffers every setting reuses.
  EmbedLikeTheCli(*embedders.back(), std::vector<std::vector<int32_t>>(texts.begin(), texts.begin() + n / 4));
  m::EnableForwardProfile(true);
  json runs = json::array();
  const int64_t repeats = std::max<int64_t>(1, IntFlag("repeats", 3));
  for (int64_t rep = 0; rep < repeats; ++rep)
    for (size_t i = 0; i < batches.size(); ++i) {
      const size_t s = (i + static_cast<size_t>(rep)) % batches.size();
      (void)m::TakeForwardProfile();
      const Usage u0 = ProcessUsage();
      const double secs = EmbedLikeTheCli(*embedders[s], texts);
      const Usage u1 = ProcessUsage();
      const m::ForwardProfileTotals p = m::TakeForwardProfile();
      const double tokens = static_cast<double>(n * T);
      json r = {{"batch_tokens", batches[s]},
                {"forwards", static_cast<double>(p.forwards)},
                {"tokens_per_s", tokens / secs},
                {"rows_per_forward", p.forwards ? static_cast<double>(p.rows) / p.forwards : 0.0},
                {"sys_s", u1.sys_s - u0.sys_s},
                {"minor_faults", u1.minor_faults - u0.minor_faults}};
      double staged = 0;
      for (int st = 0; st < static_cast<int>(m::ForwardStage::kCount); ++st) {
        const auto stage = static_cast<m::ForwardStage>(st);
        const double ns = static_cast<double>(p.ns[static_cast<size_t>(st)]) / tokens;
        r[std::string("ns_") + m::ForwardStageName(stage)] = ns;
        if (stage != m::ForwardStage::kForward) staged += ns;
      }
      r["ns_rest"] = r["ns_forward"].get<double>() - staged;
      runs.push_back(r);
    }
  // The routed experts' weights, every MoE layer: what a forward reads once
  // when its rows touch every expert.
  const m::ModelConfig& c = model->config();
  const double bytes_per_weight = quant == "int8" ? 1 : model->compute_dtype() == m::ComputeDtype::kBF16 ? 2 : 4;
  const double expert_bytes =
      static_cast<double>(c.num_moe_layers() * c.num_experts * 3 * c.hidden_size * c.expert_intermediate) *
      bytes_per_weight;
  return {{"config", config}, {"runs", runs}, {"expert_weight_bytes", expert_bytes}};
}

}  // namespace

int main(int argc, char** argv) {
  // As the CLI (plugin/cli/main.cpp): keep freed memory for the next forward.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 256 << 20);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  const m::bench::BenchFlags flags("batch_scaling", argc, argv);
  if (Flag("model").empty()) Die("--model DIR is required");
  const std::string kernels = Flag("kernels", "native");
  if (kernels != "native" && kernels != "avx2") Die("--kernels is native or avx2");
  if (kernels == "avx2") CapKernelsAtAvx2();
  m::SetComputeThreads(static_cast<int>(IntFlag("threads", 2)));
  if (!Flag("child").empty()) {
    std::printf("%s\n", Child(Flag("child")).dump().c_str());
    return 0;
  }
  const int64_t default_batch = m::EmbedderOptions{}.batch_tokens;
  const m::WorkerShare share = m::ShareComputeThreads(0, m::ComputeThreads());
  std::printf("batch_scaling: model %s, %lld texts x %lld tokens, %d threads (%d workers x %d, as `moeedb embed`), "
              "default --batch-tokens %lld, %lld repeats, kernels %s\n",
              Flag("model").c_str(), static_cast<long long>(IntFlag("texts", 128)),
              static_cast<long long>(IntFlag("tokens", 256)), m::ComputeThreads(), share.workers,
              share.threads_per_worker, static_cast<long long>(default_batch),
              static_cast<long long>(IntFlag("repeats", 3)), kernels.c_str());
  std::printf("CPU flags: %s\n", m::bench::CpuFlags().c_str());
  std::printf("kernels: int8 GEMM %s, bf16 GEMM %s\n", m::Int8GemmKernelName(m::Int8GemmKernelInUse()),
              m::Bf16GemmPathName(m::Bf16GemmPathInUse()));
  std::printf("one thread reads memory at %.1f GB/s\n", m::bench::ReadBandwidth(1).per_second / 1e9);
  std::printf("medians; ns/token per stage are thread-time (engine/model/forward_profile.h); expert GB/s: the\n"
              "experts' weights (read once per forward) per second of expert-GEMM thread-time\n\n");
  std::printf("%-18s %7s %9s %7s %9s %9s %8s %8s %8s %8s %8s %7s %9s %9s\n", "config", "batch", "tokens/s", "rows/fw",
              "expertGEMM", "bookkeep", "routing", "project", "attn", "rest", "forward", "sys s", "faults",
              "expert GB/s");
  bool all_pass = true;
  for (const auto& config : Split(Flag("configs", "f32:none:learned,f32:int8:learned,bf16:none:learned,"
                                                  "f32:none:top1,f32:int8:top1"))) {
    const json r = flags.RunChild(config);
    std::map<int64_t, std::map<std::string, std::vector<double>>> by;
    for (const auto& run : r["runs"])
      for (const auto& [key, v] : run.items())
        if (key != "batch_tokens") by[run["batch_tokens"].get<int64_t>()][key].push_back(v.get<double>());
    std::map<int64_t, std::map<std::string, double>> med;
    for (auto& [b, fields] : by)
      for (auto& [key, values] : fields) med[b][key] = Median(values);
    const double tokens = static_cast<double>(IntFlag("texts", 128) * IntFlag("tokens", 256));
    for (auto& [b, f] : med)
      std::printf("%-18s %7lld %9.1f %7.0f %9.0f %9.0f %8.0f %8.0f %8.0f %8.0f %8.0f %7.2f %9.0f %9.1f\n", config.c_str(),
                  static_cast<long long>(b), f["tokens_per_s"], f["rows_per_forward"], f["ns_expert_gemm"],
                  f["ns_expert_bookkeeping"], f["ns_routing"], f["ns_projections"], f["ns_attention"], f["ns_rest"],
                  f["ns_forward"], f["sys_s"], f["minor_faults"],
                  f["forwards"] * r["expert_weight_bytes"].get<double>() / (f["ns_expert_gemm"] * tokens));
    const int64_t lo = med.begin()->first, hi = med.rbegin()->first;
    double best = 0;
    int64_t best_b = lo;
    for (auto& [b, f] : med)
      if (f["tokens_per_s"] > best) best = f["tokens_per_s"], best_b = b;
    const double big_small = med[hi]["tokens_per_s"] / med[lo]["tokens_per_s"];
    const double gemm_ratio = med[hi]["ns_expert_gemm"] / med[lo]["ns_expert_gemm"];
    if (med.size() < 2) continue;  // one setting: nothing to compare
    const double default_best = med.count(default_batch) ? med[default_batch]["tokens_per_s"] / best : std::nan("");
    const bool pass = big_small >= 0.95 && gemm_ratio <= 1.0 && default_best >= 0.95;
    all_pass = all_pass && pass;
    std::printf("  %s: tokens/s %lld / %lld = %.3f (>= 0.95); expert GEMM ns/token %lld / %lld = %.3f (<= 1); "
                "default %lld / best (%lld) = %.3f (>= 0.95): %s\n\n",
                config.c_str(), static_cast<long long>(hi), static_cast<long long>(lo), big_small,
                static_cast<long long>(hi), static_cast<long long>(lo), gemm_ratio,
                static_cast<long long>(default_batch), static_cast<long long>(best_b), default_best,
                pass ? "meets the targets" : "MISSES a target");
    std::fflush(stdout);
  }
  std::printf("%s\n", all_pass ? "every configuration meets the targets" : "some configuration misses a target");
  return 0;
}
