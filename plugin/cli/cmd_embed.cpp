// moeedb embed: one input per stdin line -> one JSON line per input, in order:
// {"hs":[...],"rw":[...],"tokens":N} with raw (unstandardised) vectors.
#include <charconv>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>
#include <nlohmann/json.hpp>

#include "database/embedding_setup.h"
#include "base/blas_core.h"
#include "engine/embed/embedder.h"
#include "engine/model/model.h"
#include "engine/model/model_defaults.h"
#include "engine/kernels/runtime.h"
#include "engine/embed/streaming_embedder.h"
#include "plugin/cli/args.h"
#include "plugin/cli/commands.h"
#include "plugin/cli/common.h"

namespace moeedb::cli {

namespace {

Result<std::vector<int32_t>> ParseIds(const std::string& line) {
  std::vector<int32_t> ids;
  const char* p = line.data();
  const char* end = p + line.size();
  while (p < end) {
    while (p < end && (*p == ' ' || *p == '\t')) ++p;
    if (p == end) break;
    int32_t v = 0;
    auto [q, ec] = std::from_chars(p, end, v);
    if (ec != std::errc() || (q < end && *q != ' ' && *q != '\t'))
      return Status::InvalidArgument("not a list of integer token ids: '" + line + "'");
    ids.push_back(v);
    p = q;
  }
  if (ids.empty()) return Status::InvalidArgument("no token ids");
  return ids;
}

}  // namespace

int RunEmbed(const Args& args) {
  if (!args.positional().empty()) return UsageError("embed", "unexpected argument '" + args.positional()[0] + "'");
  const std::string model_dir = ModelDirFlag(args);
  if (model_dir.empty()) return UsageError("embed", "no default model was found: pass --model DIR");
  auto defaults = ModelEmbeddingDefaults(model_dir);
  if (!defaults.ok()) return Fail("embed", defaults.status().message());
  if (args.Has("jsonl") && args.Has("ids")) return UsageError("embed", "--jsonl and --ids exclude each other");
  auto spec = EmbeddingSpecFromFlags(args);
  if (!spec.ok()) return UsageError("embed", spec.status().message());
  EmbeddingSpec cfg = *spec;
  // The model folder's own defaults, checked now (a usage error) rather than at load.
  if (auto prompt = FindPrompt(args.Get("prompt", defaults->prompt)); !prompt.ok())
    return UsageError("embed", prompt.status().message());
  if (auto p = kHsPoolings.Parse(args.Get("hs-pooling", defaults->hs_pooling)); !p.ok())
    return UsageError("embed", "--hs-pooling: " + p.status().message());
  if (auto p = kRwPoolings.Parse(args.Get("rw-pooling", defaults->rw_pooling)); !p.ok())
    return UsageError("embed", "--rw-pooling: " + p.status().message());
  cfg.rw_readout = args.Get("rw");
  if (!cfg.rw_readout.empty() && !ParseRouterReadout(cfg.rw_readout).ok())
    return UsageError("embed", "--rw must be logits, probs or log_probs");
  auto setup = EmbeddingSetup::Load(cfg);
  if (!setup.ok()) return Fail("embed", setup.status().message());
  if (std::string w = BlasWarning(); !w.empty()) std::cerr << w << "\n";
  if (cfg.dtype == "bf16" && (*setup)->model().compute_dtype() != ComputeDtype::kBF16)
    std::cerr << "note: this CPU has no fast bf16 GEMM (AVX-512 BW/VL/DQ): bf16 weights, f32 matmuls\n";
  const Embedder& embedder = (*setup)->embedder();

  // Read and validate every input before printing anything.
  const auto lines = ReadLines(std::cin);
  const auto t_start = std::chrono::steady_clock::now();
  int64_t total_tokens = 0;
  std::vector<std::vector<int32_t>> inputs;
  inputs.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string where = "line " + std::to_string(i + 1) + ": ";
    Result<std::vector<int32_t>> ids = Status::Internal("unset");
    if (args.Has("ids")) {
      ids = ParseIds(lines[i]);
    } else if (args.Has("jsonl")) {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(lines[i]);
      } catch (const std::exception& e) {
        return Fail("embed", where + "not valid JSON");
      }
      if (!j.is_object() || !j.contains("text") || !j["text"].is_string())
        return Fail("embed", where + "expected a JSON object with a string field \"text\"");
      ids = embedder.Tokenize(j["text"].get<std::string>());
    } else {
      ids = embedder.Tokenize(lines[i]);
    }
    if (!ids.ok()) return Fail("embed", where + ids.status().message());
    if (Status st = embedder.CheckIds(*ids); !st.ok()) return Fail("embed", where + st.message());
    inputs.push_back(std::move(ids).value());
  }
  // The streaming embedder: windows of 4 x batch_tokens sorted by length and
  // packed into forward passes, results printed in input order as they come
  // (vectors for at most two windows in memory).
  const size_t n_inputs = inputs.size();
  // Two one-threaded forwards of half a window each ran ~1.3x faster than
  // one two-threaded forward of all of it here (docs/perf.md).
  const WorkerShare share = ShareComputeThreads(cfg.workers, ComputeThreads());
  StreamingOptions sopt;
  sopt.workers = share.workers;
  sopt.threads_per_worker = share.threads_per_worker;
  StreamingEmbedder stream(&embedder, sopt);
  Status push_failure;  // inputs were validated above: only after a failed forward pass
  std::thread producer([&] {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (Status s = stream.PushIds(std::move(inputs[i])); !s.ok()) {
        push_failure = Status::InvalidArgument("input " + std::to_string(i) + ": " + s.message());
        break;
      }
    stream.Close();
  });
  std::string out;
  Result<Embedding> next = Status::Internal("unset");
  Status failure;
  while (stream.Next(&next)) {
    if (!next.ok()) {
      failure = next.status();
      break;
    }
    {
      const Embedding& e = *next;
      total_tokens += e.tokens;
      out.clear();
      out += "{\"hs\":[";
      for (size_t k = 0; k < e.hs.size(); ++k) {
        if (k) out.push_back(',');
        AppendFloat(&out, e.hs[k]);
      }
      out += "],\"rw\":[";
      for (size_t k = 0; k < e.rw.size(); ++k) {
        if (k) out.push_back(',');
        AppendFloat(&out, e.rw[k]);
      }
      out += "],\"tokens\":" + std::to_string(e.tokens) + "}\n";
      std::cout << out;
    }
  }
  producer.join();
  std::cout << std::flush;
  if (!failure.ok()) return Fail("embed", failure.message());
  if (!push_failure.ok()) return Fail("embed", push_failure.message());
  if (args.Has("stats")) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    std::fprintf(stderr, "embedded %zu texts, %lld tokens in %.3f s: %.1f texts/s, %.1f tokens/s\n", n_inputs,
                 static_cast<long long>(total_tokens), s, n_inputs / s, total_tokens / s);
    std::fprintf(stderr, "BLAS: %s\n", BlasCore().c_str());
  }
  return 0;
}

}  // namespace moeedb::cli
