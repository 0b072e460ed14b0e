// moeedb embed: one input per stdin line -> one JSON line per input, in order:
// {"hs":[...],"rw":[...],"tokens":N} with raw (unstandardised) vectors.
#include <charconv>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>
#include <nlohmann/json.hpp>

#include "database/embedding_setup.h"
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

int RunEmbed(const std::vector<std::string>& argv) {
  const std::vector<FlagSpec> specs = WithWeightFormatFlags({
      {"model", "DIR", "HuggingFace model folder (config.json, *.safetensors, tokenizer.json); default: the embedded default model"},
      {"tokenizer", "FILE", "tokenizer.json to use instead of the model's"},
      {"prompt", "NAME", "prompt template: " + PromptNames() + " (default: the model's, else prompteol)"},
      {"instruction", "TEXT", "GritLM-style instruction placed before the text (default: none)"},
      {"rw", "KIND", "RW read-out: logits | probs | log_probs (default: the family's, logits; probs for DeepSeek)"},
      {"hs-pooling", "P", "HS pooling: last | mean | layers-mean | trained (default: the model's; trained when it ships a pooler)"},
      {"expert-dispatch", "D", "how experts run: auto (default) | loop | grouped | batched | packed (benchmarks)"},
      {"rw-pooling", "P", "RW pooling: last (default) | mean"},
      {"routing", "SPEC", "learned | ssmoe[:c=0.5,k=50,sign=canonical|reference] | top1[:weight=raw|one] (default learned)"},
      {"cache-dir", "DIR", "where SSMoE spectral centroids are cached (default $MOEEDB_CACHE_DIR, else ~/.cache/moeedb)"},
      {"threads", "N", "compute threads (default: all cores)"},
      {"workers", "N", "model threads: each window is split into N parts of about equal tokens, embedded at once, "
                       "each with threads/N compute threads (default 2 when there are 2 or more threads, else 1; a window of one text runs on all threads)"},
      {"batch-tokens", "N", "padded tokens per forward pass (default 4096)"},
      {"jsonl", "", "inputs are JSON lines {\"text\": ...}"},
      {"ids", "", "inputs are space-separated token ids, used as they are (no prompt, no special tokens)"},
      {"stats", "", "print texts/s and tokens/s (tokenizing and embedding, model load excluded) to stderr"},
  });
  if (WantsHelp(argv)) {
    std::cout << HelpText("embed --model DIR [options] < texts.txt",
                          "Embeds one input per stdin line and prints one JSON line per input, in input order:\n"
                          "{\"hs\":[...],\"rw\":[...],\"tokens\":N}. hs is the final-normed hidden state of the last\n"
                          "token; rw the router read-out of every MoE layer at the last token, in layer order.",
                          specs);
    return 0;
  }
  auto args = Args::Parse(argv, specs);
  if (!args.ok()) return UsageError("embed", args.status().message());
  if (!args->positional().empty()) return UsageError("embed", "unexpected argument '" + args->positional()[0] + "'");
  const std::string model_dir = ModelDirFlag(*args);
  if (model_dir.empty()) return UsageError("embed", "no default model was found: pass --model DIR");
  auto defaults = ModelEmbeddingDefaults(model_dir);
  if (!defaults.ok()) return Fail("embed", defaults.status().message());
  if (args->Has("jsonl") && args->Has("ids")) return UsageError("embed", "--jsonl and --ids exclude each other");
  auto threads = args->GetInt("threads", 0, 0, 1024);
  if (!threads.ok()) return UsageError("embed", threads.status().message());
  auto batch_tokens = args->GetInt("batch-tokens", 4096, 1, 1 << 24);
  if (!batch_tokens.ok()) return UsageError("embed", batch_tokens.status().message());
  auto workers = args->GetInt("workers", 0, 1, 64);
  if (!workers.ok()) return UsageError("embed", workers.status().message());

  // Flags checked here (a usage error), then the one typed setup.
  if (auto prompt = FindPrompt(args->Get("prompt", defaults->prompt)); !prompt.ok())
    return UsageError("embed", prompt.status().message());
  auto hs_pooling = kHsPoolings.Parse(args->Get("hs-pooling", defaults->hs_pooling));
  if (!hs_pooling.ok()) return UsageError("embed", "--hs-pooling: " + hs_pooling.status().message());
  auto rw_pooling = kRwPoolings.Parse(args->Get("rw-pooling", defaults->rw_pooling));
  if (!rw_pooling.ok()) return UsageError("embed", "--rw-pooling: " + rw_pooling.status().message());
  const std::string rw = args->Get("rw"), dispatch = args->Get("expert-dispatch", "auto");
  if (!rw.empty() && !ParseRouterReadout(rw).ok()) return UsageError("embed", "--rw must be logits, probs or log_probs");
  if (auto d = kExpertDispatches.Parse(dispatch); !d.ok()) return UsageError("embed", "--expert-dispatch: " + d.status().message());
  if (args->Has("routing"))
    if (auto policy = RoutingPolicy::Parse(args->Get("routing")); !policy.ok())
      return UsageError("embed", policy.status().message());
  if (auto load = LoadOptionsFromFlags(*args); !load.ok()) return UsageError("embed", load.status().message());
  EmbeddingConfig cfg = EmbeddingConfigFromFlags(*args);
  cfg.cache_dir = args->Get("cache-dir", DefaultCacheDir());
  cfg.threads = static_cast<int>(*threads);
  cfg.workers = static_cast<int>(*workers);
  cfg.batch_tokens = *batch_tokens;
  cfg.instruction = args->Get("instruction");
  cfg.rw_readout = rw;
  cfg.tokenizer_path = args->Get("tokenizer");
  cfg.expert_dispatch = dispatch;
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
    if (args->Has("ids")) {
      ids = ParseIds(lines[i]);
    } else if (args->Has("jsonl")) {
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
  const WorkerShare share = ShareComputeThreads(static_cast<int>(*workers), ComputeThreads());
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
  if (args->Has("stats")) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    std::fprintf(stderr, "embedded %zu texts, %lld tokens in %.3f s: %.1f texts/s, %.1f tokens/s\n", n_inputs,
                 static_cast<long long>(total_tokens), s, n_inputs / s, total_tokens / s);
  }
  return 0;
}

}  // namespace moeedb::cli
