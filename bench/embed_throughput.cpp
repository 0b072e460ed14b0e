// bench/embed_throughput: ingest throughput of the engine per weight format
// and routing mode, against the dense-GEMM rate of this CPU in the same run.
//
//   embed_throughput --model DIR [--threads 2] [--texts 16] [--tokens 256] [--batch-tokens N]
//                    [--fidelity-texts FILE] [--configs LIST] [--stream-texts 64]
//                    [--device cpu|cuda] [--fidelity 0|1] [--stream-dtype f32|bf16]
//                    [--repeats 6]  (timed forwards per configuration; the best counts)
//                    [--init-config CONFIG.json]  (writes a random checkpoint to --model DIR if absent)
//
// The parent runs every measurement in a child process (itself, re-executed
// with --child WHAT) so each configuration's peak RSS (VmHWM) is its own,
// and prints one table. Children print one JSON line each:
//   gemm        dense GEMM GFLOP/s (f32, bf16) for the forward's matmul shapes
//   DTYPE:QUANT:ROUTING  tokens/s, forward GFLOP/s, peak RSS, weight bytes
//   DTYPE:int8:ROUTING:widened  the same with the int8 GEMM off (MOEEDB_INT8_GEMM=off):
//               int8 weights widened to the compute dtype before each matmul
//   DTYPE:QUANT:ROUTING:avx2  the same with every kernel capped at AVX2 (the
//               int8, rows, attention and router kernels; no bf16 panel kernel):
//               what a CPU without AVX-512 or VNNI runs
//   fidelity    int8 (and bf16) vs f32: mean cos(hs), cos(rw), same top-1 expert
//   stream      StreamingEmbedder on mixed lengths vs fixed-length batches
#include <ATen/ATen.h>
#include <malloc.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/embed/embedder.h"
#include "engine/kernels/bf16_gemm.h"
#include "engine/model/model.h"
#include "engine/model/random_checkpoint.h"
#include "engine/model/routing_policy.h"
#include "bench/bench_child.h"
#include "bench/bench_samples.h"
#include "bench/cpu_flags.h"
#include "bench/stream_texts.h"
#include "engine/kernels/int8_gemm.h"
#include "engine/kernels/packed_attention.h"
#include "engine/kernels/runtime.h"
#include "engine/embed/streaming_embedder.h"
#ifdef MOEEDB_HAVE_TOKENIZER
#include "engine/tokenizer/bpe_tokenizer.h"
#endif

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace m = moeedb;

namespace {

using namespace m::bench;  // Flag, IntFlag, Die, RunChild, StatusBytes

double Seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int64_t PeakRssBytes() { return StatusBytes("VmHWM:"); }

std::vector<std::vector<int32_t>> RandomIds(int64_t n, const std::vector<int64_t>& lengths, int64_t vocab,
                                            uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(100, static_cast<int32_t>(vocab - 1));
  std::vector<std::vector<int32_t>> out(n);
  for (int64_t i = 0; i < n; ++i) {
    out[i].resize(lengths[i % lengths.size()]);
    for (auto& t : out[i]) t = id(rng);
  }
  return out;
}

std::unique_ptr<m::MoeModel> Load(const std::string& dtype, const std::string& quant, double* seconds = nullptr) {
  m::LoadOptions o;
  auto d = m::kComputeDtypes.Parse(dtype);
  auto q = m::kWeightQuants.Parse(quant);
  if (!d.ok() || !q.ok()) Die("bad format " + dtype + ":" + quant);
  o.format = {*d, *q};
  o.device = Flag("device", "cpu");
  const auto t0 = Clock::now();
  auto model = m::MoeModel::LoadDir(Flag("model"), o);
  if (!model.ok()) Die(model.status().ToString());
  if (seconds != nullptr) *seconds = Seconds(t0);
  return std::move(model).value();
}

// Matmul FLOPs of one forward pass over B texts of T tokens with k experts
// per token, as the engine runs it for HS/RW read at the last token: the
// last layer computes keys and values for every token but queries, the
// output projection, router and experts for the last token of each text only.
double ForwardFlops(const m::ModelConfig& c, int64_t B, int64_t T, int64_t k) {
  const double H = static_cast<double>(c.hidden_size), qd = static_cast<double>(c.num_heads * c.head_dim),
               kvd = static_cast<double>(c.num_kv_heads * c.head_dim), I = static_cast<double>(c.expert_intermediate),
               E = static_cast<double>(c.num_experts), Bd = static_cast<double>(B), Td = static_cast<double>(T);
  auto layer = [&](double rows) {  // rows: tokens whose query, MLP and router run
    double f = Bd * Td * 2 * H * 2 * kvd;                 // k, v projections (every token)
    f += rows * 2 * H * 2 * qd;                           // q, o projections
    f += rows * 2 * 2 * Td * qd;                          // scores and AV (full rows of T keys)
    f += rows * 2 * H * E;                                // router
    f += rows * static_cast<double>(k) * 2 * 3 * H * I;  // routed experts
    return f;
  };
  return layer(Bd * Td) * static_cast<double>(c.num_layers - 1) + layer(Bd);
}

// GFLOP/s of at::mm [M, K] x [K, N] in `dtype`, best of a few runs, with the
// right operand stored [K, N] as the engine stores its weights.
double GemmRate(int64_t M, int64_t K, int64_t N, at::ScalarType dtype) {
  const at::Device dev(Flag("device", "cpu"));
  at::Tensor a = at::randn({M, K}).to(dev, dtype), b = at::randn({K, N}).to(dev, dtype);
  at::Tensor c = at::empty({M, N}, a.options());
  const double flops = 2.0 * M * K * N;
  at::mm_out(c, a, b);
  int reps = std::max<int>(1, static_cast<int>(2e9 / flops));
  double best = 1e30;
  for (int trial = 0; trial < 3; ++trial) {
    const auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) at::mm_out(c, a, b);
    (void)c[0][0].item<float>();  // waits for an asynchronous device
    best = std::min(best, Seconds(t0) / reps);
  }
  return flops / best / 1e9;
}

// GFLOP/s of Bf16GemmF32 over the shapes {M, K, N} (equal FLOP weights per
// shape as they have in an expert: gate/up then down), best of a few runs.
double ExpertKernelRate(const std::vector<std::array<int64_t, 3>>& shapes) {
  double flops = 0, secs = 0;
  for (const auto& [M, K, N] : shapes) {
    std::vector<float> x(static_cast<size_t>(M * K)), y(static_cast<size_t>(M * N));
    std::vector<uint16_t> w(static_cast<size_t>(K * N)), panels(static_cast<size_t>(m::Bf16PanelElements(K, N)));
    std::mt19937 rng(1);
    std::normal_distribution<float> g(0, 1);
    for (auto& v : x) v = g(rng);
    for (auto& v : w) v = m::Bf16FromFloat(g(rng));
    m::PackBf16Panels(w.data(), K, N, panels.data());
    const double f = 2.0 * M * K * N;
    const int reps = std::max<int>(1, static_cast<int>(1e9 / f));
    double best = 1e30;
    for (int trial = 0; trial < 3; ++trial) {
      const auto t0 = Clock::now();
      for (int r = 0; r < reps; ++r) m::Bf16GemmF32(M, N, K, x.data(), K, panels.data(), y.data(), N);
      best = std::min(best, Seconds(t0) / reps);
    }
    flops += f;
    secs += best;
  }
  return flops / secs / 1e9;
}

// The dense-GEMM rate for the forward's matmul shapes: the time every matmul
// of the forward would take at its shape's measured GEMM rate, as GFLOP/s.
json ChildGemm() {
  auto cfg = m::ModelConfig::FromFile(Flag("model") + "/config.json");
  if (!cfg.ok()) Die(cfg.status().ToString());
  const m::ModelConfig& c = *cfg;
  const int64_t T = IntFlag("tokens", 256);
  const int64_t N = std::min(IntFlag("batch-tokens", IntFlag("texts", 16) * T), IntFlag("texts", 16) * T);
  const int64_t B = N / T;  // texts per forward pass
  const int64_t H = c.hidden_size, I = c.expert_intermediate, E = c.num_experts;
  json out;
  const bool cuda = Flag("device", "cpu") != "cpu";
  for (auto [name, dt] : {std::pair{"f32", at::kFloat}, std::pair{"bf16", at::kBFloat16}}) {
    // Without a fast bf16 GEMM the engine computes in f32: no bf16 baseline.
    if (dt == at::kBFloat16 && !cuda && !m::CpuHasFastBf16Gemm()) continue;
    json j;
    j["big_gemm_gflops"] = GemmRate(4096, 1024, 4096, dt);
    for (int64_t k : {c.top_k, int64_t{1}}) {
      const int64_t Me = std::max<int64_t>(1, N * k / E);  // tokens per expert, on average
      struct Shape { int64_t M, K, Nn; double count; };
      const std::vector<Shape> shapes = {
          {N, H, H, 4},                                     // attention projections (MHA: all H x H)
          {Me, H, 2 * I, static_cast<double>(E)},           // expert gate+up
          {Me, I, H, static_cast<double>(E)},               // expert down
          {T, c.head_dim, T, 2.0 * B * c.num_heads},        // scores and AV per head
      };
      double flops = 0, secs = 0;
      for (const auto& s : shapes) {
        const double f = 2.0 * s.M * s.K * s.Nn * s.count;
        flops += f;
        secs += f / (GemmRate(s.M, s.K, s.Nn, dt) * 1e9);
      }
      j[k == 1 ? "top1_shapes_gflops" : "topk_shapes_gflops"] = flops / secs / 1e9;
      // The bf16 expert kernel the engine runs instead (bf16_gemm.h), on the
      // same expert shapes: what the forward's experts can reach here.
      if (dt == at::kBFloat16 && !cuda && m::Bf16GemmAvailable())
        j[k == 1 ? "top1_expert_kernel_gflops" : "topk_expert_kernel_gflops"] =
            ExpertKernelRate({{Me, H, 2 * I}, {Me, I, H}});
    }
    out[name] = j;
  }
  return out;
}

json ChildConfig(const std::string& what) {
  const auto [dtype, quant, routing] = ParseConfigWord(what);
  double load_s = 0;
  auto model = Load(dtype, quant, &load_s);
  auto policy = m::RoutingPolicy::Parse(routing);
  if (!policy.ok() || !model->SetRouting(*policy).ok()) Die("bad routing " + routing);
  const m::ModelConfig& c = model->config();
  const int64_t B = IntFlag("texts", 16), T = IntFlag("tokens", 256);
  const int64_t rss_loaded = StatusBytes("VmRSS:"), peak_loaded = PeakRssBytes();
  if (std::getenv("EMBED_THROUGHPUT_TRACE_RSS") != nullptr)  // where the memory goes, per layer
    model->set_tap([](std::string_view name, int64_t layer, const at::Tensor&) {
      std::fprintf(stderr, "layer %lld %-14.*s RSS %6.0f MB  peak %6.0f MB\n", static_cast<long long>(layer),
                   static_cast<int>(name.size()), name.data(), StatusBytes("VmRSS:") / 1e6, PeakRssBytes() / 1e6);
    });
  m::EmbedderOptions eo;
  eo.batch_tokens = IntFlag("batch-tokens", B * T);  // padded tokens per forward pass
  m::Embedder emb(model.get(), nullptr, eo);
  // Warm-up (first-touch of buffers, oneDNN kernel selection): a quarter batch.
  auto warm = RandomIds(std::max<int64_t>(1, B / 4), {T}, c.vocab_size, 1);
  if (auto r = emb.EmbedIds(warm); !r.ok()) Die(r.status().ToString());
  auto ids = RandomIds(B, {T}, c.vocab_size, 2);
  // The best of --repeats timed runs, as GemmRate takes the best of its
  // trials: a ratio of the two then compares like with like on a host whose
  // speed drifts from second to second.
  double secs = 1e30;
  for (int64_t rep = 0; rep < std::max<int64_t>(1, IntFlag("repeats", 6)); ++rep) {
    const auto t0 = Clock::now();
    auto r = emb.EmbedIds(ids);
    secs = std::min(secs, Seconds(t0));
    if (!r.ok()) Die(r.status().ToString());
  }
  const int64_t k = policy->kind == m::RoutingPolicy::Kind::kTop1 ? 1 : c.top_k;
  json j;
  j["config"] = what;
  j["tokens_per_s"] = static_cast<double>(B * T) / secs;
  j["seconds"] = secs;
  j["forward_gflops"] = ForwardFlops(c, B, T, k) / secs / 1e9;
  j["peak_rss_bytes"] = PeakRssBytes();
  j["rss_after_load_bytes"] = rss_loaded;
  j["peak_rss_during_load_bytes"] = peak_loaded;
  j["compute_dtype"] = m::kComputeDtypes.Name(model->compute_dtype());
  j["weight_bytes"] = model->WeightBytes();
  j["load_seconds"] = load_s;
  return j;
}

json ChildFidelity() {
  // 100 real sentences through the model's tokenizer where this build has
  // one (--fidelity-texts FILE), else 100 random id sequences of 8..64 tokens.
  std::vector<std::vector<int32_t>> texts;
  auto cfg = m::ModelConfig::FromFile(Flag("model") + "/config.json");
  if (!cfg.ok()) Die(cfg.status().ToString());
#ifdef MOEEDB_HAVE_TOKENIZER
  if (!Flag("fidelity-texts").empty()) {
    auto tok = m::BpeTokenizer::FromFile(Flag("model") + "/tokenizer.json");
    if (!tok.ok()) Die(tok.status().ToString());
    m::Embedder embedder(nullptr, tok->get(), {});
    std::ifstream f(Flag("fidelity-texts"));
    std::string line;
    while (std::getline(f, line) && texts.size() < 100) {
      if (line.empty()) continue;
      auto ids = embedder.Tokenize(line);
      if (!ids.ok()) Die(ids.status().ToString());
      texts.push_back(std::move(ids).value());
    }
    if (texts.size() < 100) Die("--fidelity-texts needs a file of at least 100 lines");
  }
#endif
  if (texts.empty()) {
    std::vector<int64_t> lengths;
    for (int i = 0; i < 100; ++i) lengths.push_back(8 + (i * 37) % 57);
    texts = RandomIds(100, lengths, cfg->vocab_size, 9);
  }
  struct Out {
    std::vector<m::Embedding> e;
    std::vector<at::Tensor> top1;
  };
  auto run = [&](const std::string& dtype, const std::string& quant) {
    auto model = Load(dtype, quant);
    Out o;
    model->set_tap([&](std::string_view name, int64_t, const at::Tensor& v) {
      if (name == "router_logits") o.top1.push_back(v.argmax(-1));
    });
    m::EmbedderOptions eo;
    eo.batch_tokens = 1 << 20;  // one forward: the taps line up
    m::Embedder emb(model.get(), nullptr, eo);
    auto r = emb.EmbedIds(texts);
    if (!r.ok()) Die(r.status().ToString());
    o.e = std::move(r).value();
    return o;
  };
  auto cos = [](const std::vector<float>& a, const std::vector<float>& b) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < a.size(); ++i) ab += a[i] * b[i], aa += a[i] * a[i], bb += b[i] * b[i];
    return ab / std::sqrt(aa * bb);
  };
  const Out ref = run("f32", "none");
  json out;
  for (auto [d, q] : {std::pair{"f32", "int8"}, std::pair{"bf16", "none"}, std::pair{"bf16", "int8"}}) {
    const Out got = run(d, q);
    double hs = 0, rw = 0;
    for (size_t i = 0; i < texts.size(); ++i) hs += cos(ref.e[i].hs, got.e[i].hs), rw += cos(ref.e[i].rw, got.e[i].rw);
    int64_t same = 0, total = 0;
    for (size_t l = 0; l < ref.top1.size(); ++l) {
      same += (ref.top1[l] == got.top1[l]).sum().item<int64_t>();
      total += ref.top1[l].numel();
    }
    out[std::string(d) + ":" + q] = {{"cos_hs", hs / texts.size()},
                                     {"cos_rw", rw / texts.size()},
                                     {"same_top1", static_cast<double>(same) / total},
                                     {"texts", texts.size()}};
  }
  return out;
}

json ChildStream() {
  auto model = Load(Flag("stream-dtype", "f32"), "none");
  const m::ModelConfig& c = model->config();
  const int64_t n = IntFlag("stream-texts", 64), T = IntFlag("stream-tokens", 128);
  m::EmbedderOptions eo;
  eo.batch_tokens = IntFlag("batch-tokens", 4096);
  m::Embedder emb(model.get(), nullptr, eo);
  // Mixed lengths: uniform in [T/8, 15T/8] (mean T), in random order.
  std::vector<int64_t> lengths(n);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int64_t> len(T / 8, 15 * T / 8);
  int64_t mixed_tokens = 0;
  for (auto& l : lengths) mixed_tokens += (l = len(rng));
  auto fixed = RandomIds(n, {T}, c.vocab_size, 4);
  auto mixed = RandomIds(n, lengths, c.vocab_size, 5);
  if (auto r = emb.EmbedIds(RandomIds(4, {T}, c.vocab_size, 6)); !r.ok()) Die(r.status().ToString());
  auto t0 = Clock::now();
  if (auto r = emb.EmbedIds(fixed); !r.ok()) Die(r.status().ToString());
  const double fixed_rate = static_cast<double>(n * T) / Seconds(t0);
  m::StreamingEmbedder stream(&emb);
  t0 = Clock::now();
  m::bench::StreamTexts(&stream, mixed);
  const double stream_rate = static_cast<double>(mixed_tokens) / Seconds(t0);
  return {{"fixed_tokens_per_s", fixed_rate},
          {"stream_mixed_tokens_per_s", stream_rate},
          {"ratio", stream_rate / fixed_rate},
          {"texts", n},
          {"mean_tokens", T}};
}

}  // namespace

int main(int argc, char** argv) {
  // As the CLI: keep freed memory (no page faults on every fresh activation).
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr) mallopt(M_TRIM_THRESHOLD, 1 << 30);
  if (std::getenv("MALLOC_TOP_PAD_") == nullptr) mallopt(M_TOP_PAD, 256 << 20);
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) mallopt(M_MMAP_THRESHOLD, 32 << 20);
  const m::bench::BenchFlags flags("embed_throughput", argc, argv);
  if (Flag("model").empty()) Die("--model DIR is required");
  const std::string child = Flag("child");
  if (!Flag("init-config").empty() && child.empty() &&
      !std::ifstream(Flag("model") + "/model.safetensors").good()) {
    // A random checkpoint of that config (the engine's own writer: no CLI needed).
    m::RandomCheckpointOptions ro;
    if (auto st = m::WriteRandomCheckpoint(Flag("init-config"), "", Flag("model"), ro); !st.ok()) Die(st.ToString());
  }
  m::SetComputeThreads(static_cast<int>(IntFlag("threads", 2)));
  if (!child.empty()) {
    for (const auto& [suffix, kernel] : {std::pair<std::string, const char*>{":widened", "off"}, {":avx2", "avx2"}})
      if (child.size() > suffix.size() && child.compare(child.size() - suffix.size(), suffix.size(), suffix) == 0) {
        setenv("MOEEDB_INT8_GEMM", kernel, 1);  // read once, at the first matmul
        if (suffix == ":avx2") CapKernelsAtAvx2();
        json j = ChildConfig(child.substr(0, child.size() - suffix.size()));
        std::printf("%s\n", j.dump().c_str());
        return 0;
      }
    json j = child == "gemm" ? ChildGemm() : child == "fidelity" ? ChildFidelity() : child == "stream" ? ChildStream()
                                                                                                       : ChildConfig(child);
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("embed_throughput: model %s, %lld texts x %lld tokens, forwards of %lld tokens, %lld threads\n",
              Flag("model").c_str(), static_cast<long long>(IntFlag("texts", 16)),
              static_cast<long long>(IntFlag("tokens", 256)),
              static_cast<long long>(IntFlag("batch-tokens", IntFlag("texts", 16) * IntFlag("tokens", 256))),
              static_cast<long long>(IntFlag("threads", 2)));
  std::printf("CPU flags: %s\n", m::bench::CpuFlags().c_str());
  std::printf("BLAS: %s\n", m::bench::BlasCore().c_str());
  std::printf("CPU: fast bf16 GEMM (AVX-512 BW/VL/DQ): %s; int8 GEMM: %s; attention kernel: %s\n",
              m::CpuHasFastBf16Gemm() ? "yes" : "no (bf16 = bf16 storage, f32 compute)",
              m::Int8GemmAvailable() ? m::Int8GemmKernelName(m::Int8GemmKernelInUse())
                                     : "none (int8 weights widened before each matmul)",
              m::SimdLevelName(m::AttentionKernelInUse()));
  std::fflush(stdout);
  json gemm = flags.RunChild("gemm");
  for (auto& [name, g] : gemm.items()) {
    std::printf("dense GEMM GFLOP/s %4s: %.1f (4096x1024x4096), %.1f (this forward's shapes, top-k), %.1f (top-1)\n",
                name.c_str(), g["big_gemm_gflops"].get<double>(), g["topk_shapes_gflops"].get<double>(),
                g["top1_shapes_gflops"].get<double>());
    if (g.contains("topk_expert_kernel_gflops"))
      std::printf("bf16 expert kernel GFLOP/s (the engine's, expert shapes only): %.1f (top-k), %.1f (top-1)\n",
                  g["topk_expert_kernel_gflops"].get<double>(), g["top1_expert_kernel_gflops"].get<double>());
  }
  std::fflush(stdout);

  std::string list = Flag("configs",
                          "f32:none:learned,f32:none:learned:avx2,f32:int8:learned,f32:int8:learned:avx2,"
                          "f32:int8:learned:widened,bf16:none:learned,"
                          "bf16:int8:learned,f32:none:top1,f32:int8:top1,bf16:none:top1,bf16:int8:top1");
  std::vector<json> rows;
  std::printf("\n%-20s %8s %10s %10s %9s %10s %10s %8s\n", "config", "computes", "tokens/s", "GFLOP/s", "of GEMM",
              "peak RSS", "weights", "load s");
  std::stringstream ls(list);
  std::string what;
  std::map<std::string, json> by;
  while (std::getline(ls, what, ',')) {
    json r = flags.RunChild(what);
    if (!r.contains("compute_dtype")) Die("--configs: '" + what + "' is not a DTYPE:QUANT:ROUTING configuration");
    const std::string dt = r["compute_dtype"].get<std::string>();  // what the matmuls ran in
    const bool top1 = what.find("top1") != std::string::npos;
    const double ref = gemm[dt][top1 ? "top1_shapes_gflops" : "topk_shapes_gflops"].get<double>();
    r["fraction_of_gemm"] = r["forward_gflops"].get<double>() / ref;
    by[what] = r;
    std::printf("%-20s %8s %10.1f %10.1f %8.0f%% %9.2fG %9.2fG %8.1f\n", what.c_str(), dt.c_str(),
                r["tokens_per_s"].get<double>(),
                r["forward_gflops"].get<double>(), 100 * r["fraction_of_gemm"].get<double>(),
                r["peak_rss_bytes"].get<double>() / 1e9, r["weight_bytes"].get<double>() / 1e9,
                r["load_seconds"].get<double>());
    std::fflush(stdout);
  }
  std::printf("\nratios:\n");
  auto ratio = [&](const std::string& a, const std::string& b, const char* key) {
    if (!by.count(a) || !by.count(b)) return std::nan("");
    return by[a][key].get<double>() / by[b][key].get<double>();
  };
  for (const char* d : {"f32", "bf16"}) {
    std::printf("  %s: int8 peak RSS / none peak RSS = %.3f   top-1 / top-8 tokens/s = %.2f (none), %.2f (int8)\n", d,
                ratio(std::string(d) + ":int8:learned", std::string(d) + ":none:learned", "peak_rss_bytes"),
                ratio(std::string(d) + ":none:top1", std::string(d) + ":none:learned", "tokens_per_s"),
                ratio(std::string(d) + ":int8:top1", std::string(d) + ":int8:learned", "tokens_per_s"));
  }
  std::printf("  bf16 / f32 tokens/s (learned) = %.2f\n", ratio("bf16:none:learned", "f32:none:learned", "tokens_per_s"));
  std::printf("  f32 compute, int8 / f32 tokens/s (learned) = %.2f (int8 GEMM: %s), %.2f (every kernel AVX2 only, "
              "as on a CPU without AVX-512 or VNNI), %.2f (int8 widened to f32)\n",
              ratio("f32:int8:learned", "f32:none:learned", "tokens_per_s"),
              m::Int8GemmKernelName(m::Int8GemmKernelInUse()),
              ratio("f32:int8:learned:avx2", "f32:none:learned:avx2", "tokens_per_s"),
              ratio("f32:int8:learned:widened", "f32:none:learned", "tokens_per_s"));
  if (auto cfg = m::ModelConfig::FromFile(Flag("model") + "/config.json"); cfg.ok()) {
    // Attention, projections and the router cost the same in both modes, so
    // top-1 can be at most this much faster than top-k on these shapes.
    const int64_t T = IntFlag("tokens", 256);
    const double ceiling = ForwardFlops(*cfg, 1, T, cfg->top_k) / ForwardFlops(*cfg, 1, T, 1);
    std::printf("  top-1 / top-%lld FLOP ratio at %lld tokens (the ceiling of the speed-up): %.2f\n",
                static_cast<long long>(cfg->top_k), static_cast<long long>(T), ceiling);
    for (const char* d : {"f32:none", "f32:int8", "bf16:none", "bf16:int8"})
      std::printf("  %-9s top-1 tokens/s / (ceiling x top-%lld tokens/s) = %.2f\n", d, static_cast<long long>(cfg->top_k),
                  ratio(std::string(d) + ":top1", std::string(d) + ":learned", "tokens_per_s") / ceiling);
  }
  std::fflush(stdout);
  if (Flag("fidelity", "1") == "1") {
    json f = flags.RunChild("fidelity");
    std::printf("\nfidelity vs f32 on %d texts:\n", f["f32:int8"]["texts"].get<int>());
    for (auto& [k, v] : f.items())
      std::printf("  %-10s mean cos(hs) %.5f  mean cos(rw) %.5f  same top-1 expert %.2f%%\n", k.c_str(),
                  v["cos_hs"].get<double>(), v["cos_rw"].get<double>(), 100 * v["same_top1"].get<double>());
    std::fflush(stdout);
  }
  if (IntFlag("stream-texts", 64) > 0) {
    json s = flags.RunChild("stream");
    std::printf("\nstreaming embedder (%s): mixed lengths %.1f tokens/s vs fixed-length batches %.1f tokens/s: ratio %.3f\n",
                Flag("stream-dtype", "f32").c_str(), s["stream_mixed_tokens_per_s"].get<double>(),
                s["fixed_tokens_per_s"].get<double>(), s["ratio"].get<double>());
  }
  return 0;
}
