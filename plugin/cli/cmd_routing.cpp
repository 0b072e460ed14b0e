// moeedb alpha: label-free alpha from unlabeled text pairs.
// moeedb lens: per-layer cosine of top-1 vs top-k MoE block outputs.
#include <cmath>
#include <fstream>
#include <iostream>

#include "engine/analysis/alpha.h"
#include "engine/embed/embedder.h"
#include "engine/model/model.h"
#include "engine/model/model_defaults.h"
#include "engine/analysis/moe_lens.h"
#include "engine/kernels/runtime.h"
#include "index/standardizer.h"
#include "database/embedding_setup.h"
#include "plugin/cli/args.h"
#include "plugin/cli/commands.h"
#include "plugin/cli/common.h"

namespace moeedb::cli {

namespace {

// First two fields of a TSV line, or of a CSV line with "quoted" fields
// ("" inside quotes is a quote), as in the STS-B files.
bool SplitPair(const std::string& line, std::string* a, std::string* b) {
  if (line.find('\t') != std::string::npos) {
    const size_t t = line.find('\t');
    *a = line.substr(0, t);
    const size_t t2 = line.find('\t', t + 1);
    *b = line.substr(t + 1, t2 == std::string::npos ? std::string::npos : t2 - t - 1);
    return true;
  }
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted) {
      if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"') { fields.back() += '"'; ++i; }
      else if (ch == '"') quoted = false;
      else fields.back() += ch;
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      fields.emplace_back();
    } else {
      fields.back() += ch;
    }
  }
  if (fields.size() < 2 || quoted) return false;
  *a = fields[0];
  *b = fields[1];
  return true;
}

// Cosines of the pairs (rows 2i and 2i+1) after the per-feature z-score the
// MoEE reference applies (method.md A.3), fitted on the evaluated texts: the
// collections' Standardizer (z-score, then L2, so a dot product is the cosine).
std::vector<double> PairCosines(const std::vector<std::vector<float>>& rows) {
  const size_t n = rows.size(), d = rows[0].size();
  std::vector<float> flat;
  flat.reserve(n * d);
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  const Standardizer z = Standardizer::Fit(flat.data(), n, d);
  std::vector<float> a(d), b(d);
  std::vector<double> out;
  for (size_t i = 0; i + 1 < n; i += 2) {
    z.Apply(rows[i].data(), a.data());
    z.Apply(rows[i + 1].data(), b.data());
    double dot = 0;
    for (size_t k = 0; k < d; ++k) dot += double(a[k]) * b[k];
    out.push_back(dot);
  }
  return out;
}

// The setup alpha and lens embed with: --model, --routing, --prompt (default:
// the MoEE reference's, as every pooling here), --threads. InvalidArgument
// for a bad flag value.
Result<std::unique_ptr<EmbeddingSetup>> SetupFromFlags(const Args& args, const std::string& cmd) {
  const EmbeddingDefaults reference;
  EmbeddingSpec cfg;
  cfg.prompt = reference.prompt;
  cfg.hs_pooling = reference.hs_pooling;
  cfg.rw_pooling = reference.rw_pooling;
  MOEEDB_RETURN_IF_ERROR(ReadSpecFlags(args, EmbeddingFields(), &cfg, {.only = {"model", "routing", "prompt", "threads"}}));
  cfg.cache_dir = DefaultCacheDir();
  auto setup = EmbeddingSetup::Load(cfg);
  if (!setup.ok() && setup.status().code() == Status::Code::kInvalidArgument)
    return Status::Internal(setup.status().message());  // a model problem, not a usage error
  return setup;
}

}  // namespace

int RunAlpha(const Args& args) {
  auto setup = SetupFromFlags(args, "alpha");
  if (!setup.ok()) return setup.status().code() == Status::Code::kInvalidArgument
                              ? UsageError("alpha", setup.status().message())
                              : Fail("alpha", setup.status().message());
  std::ifstream in(args.Get("pairs"));
  if (!in) return Fail("alpha", "cannot open " + args.Get("pairs"));
  std::vector<std::string> texts;
  for (const auto& line : ReadLines(in)) {
    if (line.empty()) continue;
    std::string a, b;
    if (!SplitPair(line, &a, &b)) return Fail("alpha", "line " + std::to_string(texts.size() / 2 + 1) + ": not a pair");
    texts.push_back(a);
    texts.push_back(b);
  }
  if (texts.size() < 6) return Fail("alpha", "need at least 3 pairs");
  auto embs = (*setup)->embedder().EmbedTexts(texts);
  if (!embs.ok()) return Fail("alpha", embs.status().message());
  std::vector<std::vector<float>> hs, rw;
  for (const auto& e : *embs) {
    hs.push_back(e.hs);
    rw.push_back(e.rw);
  }
  const std::vector<double> cos_hs = PairCosines(hs), cos_rw = PairCosines(rw);
  const AlphaChoice choice = ChooseAlphaLabelFree(cos_hs, cos_rw);
  std::cout << "{\"alpha\":" << choice.alpha << ",\"objective\":" << choice.objective
            << ",\"pairs\":" << cos_hs.size() << "}" << std::endl;
  return 0;
}

int RunLens(const Args& args) {
  auto setup = SetupFromFlags(args, "lens");
  if (!setup.ok()) return setup.status().code() == Status::Code::kInvalidArgument
                              ? UsageError("lens", setup.status().message())
                              : Fail("lens", setup.status().message());
  const Embedder& embedder = (*setup)->embedder();
  std::vector<std::vector<int32_t>> ids;
  const auto lines = ReadLines(std::cin);
  for (size_t i = 0; i < lines.size(); ++i) {
    auto t = embedder.Tokenize(lines[i]);
    if (!t.ok()) return Fail("lens", "line " + std::to_string(i + 1) + ": " + t.status().message());
    ids.push_back(std::move(t).value());
  }
  if (ids.empty()) return Fail("lens", "no texts on stdin");
  std::vector<double> sum;
  for (size_t start = 0; start < ids.size(); start += 32) {  // bounded batches
    std::vector<std::vector<int32_t>> chunk(ids.begin() + start, ids.begin() + std::min(ids.size(), start + 32));
    auto cos = MoeLensCosines((*setup)->mutable_model(), chunk);
    if (!cos.ok()) return Fail("lens", cos.status().message());
    if (sum.empty()) sum.assign(cos->size(), 0.0);
    for (size_t l = 0; l < cos->size(); ++l) sum[l] += (*cos)[l] * static_cast<double>(chunk.size());
  }
  for (size_t l = 0; l < sum.size(); ++l)
    std::cout << "{\"moe_layer\":" << l << ",\"cos_top1_topk\":" << sum[l] / static_cast<double>(ids.size()) << "}\n";
  return 0;
}

}  // namespace moeedb::cli
