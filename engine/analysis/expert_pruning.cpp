#include "engine/analysis/expert_pruning.h"

#include "base/file_text.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

#include "base/atomic_file.h"
#include "engine/model/checkpoint_spec.h"
#include "engine/model/model.h"
#include "engine/model/moe_block.h"
#include "engine/model/model_family.h"
#include "engine/io/safetensors.h"
#include "engine/model/spectral_router.h"
#include "engine/kernels/tensor_ops.h"
#include "engine/model/trained_pooler.h"

namespace moeedb {

namespace fs = std::filesystem;
using json = nlohmann::json;

Result<PruneRule> ParsePruneRule(const std::string& n) {
  if (n == "usage") return PruneRule::kUsage;
  if (n == "spectral") return PruneRule::kSpectral;
  if (n == "usage+spectral") return PruneRule::kUsageSpectral;
  if (n == "random") return PruneRule::kRandom;
  return Status::InvalidArgument("unknown pruning rule '" + n + "' (usage, spectral, usage+spectral, random)");
}

const char* PruneRuleName(PruneRule r) {
  switch (r) {
    case PruneRule::kUsage: return "usage";
    case PruneRule::kSpectral: return "spectral";
    case PruneRule::kUsageSpectral: return "usage+spectral";
    case PruneRule::kRandom: return "random";
  }
  return "?";
}

bool PruneRuleNeedsUsage(PruneRule r) { return r == PruneRule::kUsage || r == PruneRule::kUsageSpectral; }

namespace {

}  // namespace

std::vector<int64_t> CoverExperts(const at::Tensor& centroids, const std::vector<double>& weight, int64_t keep) {
  at::Tensor c = centroids.to(at::kDouble);
  c = c / c.norm(2, 1, true).clamp_min(1e-12);
  at::Tensor sim = at::matmul(c, c.t()).contiguous();  // [E, E] cosines
  const int64_t E = sim.size(0);
  const double* s = sim.data_ptr<double>();
  std::vector<double> best(static_cast<size_t>(E), -1.0);  // each expert's cover by the kept so far
  std::vector<int64_t> kept;
  std::vector<bool> taken(static_cast<size_t>(E), false);
  for (int64_t round = 0; round < keep; ++round) {
    int64_t pick = -1;
    double gain_best = -1e300;
    for (int64_t j = 0; j < E; ++j) {
      if (taken[static_cast<size_t>(j)]) continue;
      double gain = 0;
      for (int64_t e = 0; e < E; ++e) gain += weight[static_cast<size_t>(e)] * std::max(0.0, s[e * E + j] - best[static_cast<size_t>(e)]);
      if (gain > gain_best) gain_best = gain, pick = j;  // ties: the lower id
    }
    taken[static_cast<size_t>(pick)] = true;
    kept.push_back(pick);
    for (int64_t e = 0; e < E; ++e) best[static_cast<size_t>(e)] = std::max(best[static_cast<size_t>(e)], s[e * E + pick]);
  }
  std::sort(kept.begin(), kept.end());
  return kept;
}

namespace {

Result<std::string> ReadFile(const fs::path& p) { return ReadFileText(p.string()); }

// Which MoE module name and expert layout the checkpoint uses.
Result<CheckpointNaming> DetectNaming(const Checkpoint& ckpt, const ModelConfig& c) {
  int64_t first = -1;
  for (int64_t l = 0; l < c.num_layers && first < 0; ++l)
    if (c.moe_layer[static_cast<size_t>(l)]) first = l;
  if (first < 0) return Status::InvalidArgument("the model has no MoE layer: nothing to prune");
  for (const auto& module : c.family->moe_modules) {
    const std::string M = LayerPrefix(first) + module + ".";
    for (const auto& router : c.family->router_names) {
      if (ckpt.Find(M + router + ".weight") == nullptr) continue;
      CheckpointNaming n;
      n.moe_module = module;
      n.layout = ckpt.Find(M + "experts.gate_up_proj") != nullptr ? ExpertLayout::kPacked : ExpertLayout::kPerExpert;
      return n;
    }
  }
  return Status::Corruption("cannot find the router of MoE layer " + std::to_string(first) + " in " + ckpt.Describe());
}

// Rows `rows` of a tensor along dim 0, as raw bytes (any dtype).
std::vector<uint8_t> SelectRows(const TensorView& v, const std::vector<int64_t>& rows) {
  const size_t row_bytes = v.nbytes / static_cast<size_t>(v.shape[0]);
  std::vector<uint8_t> out;
  out.reserve(row_bytes * rows.size());
  const auto* p = static_cast<const uint8_t*>(v.data);
  for (int64_t r : rows) out.insert(out.end(), p + static_cast<size_t>(r) * row_bytes, p + static_cast<size_t>(r + 1) * row_bytes);
  return out;
}

}  // namespace

Result<std::vector<std::vector<int64_t>>> ChooseExperts(const MoeModel& model, const ExpertUsage& usage, int64_t keep,
                                                        PruneRule rule, uint64_t seed) {
  const ModelConfig& c = model.config();
  const std::vector<const MoeBlock*> blocks = model.MoeBlocks();
  if (blocks.empty()) return Status::InvalidArgument("the model has no MoE layer: nothing to prune");
  const int64_t E = c.num_experts;
  if (keep < 1 || keep > E)
    return Status::InvalidArgument("keep must be between 1 and the " + std::to_string(E) + " experts per layer, not " +
                                   std::to_string(keep));
  if (keep < c.top_k)
    return Status::InvalidArgument("keep " + std::to_string(keep) + " is fewer than the " + std::to_string(c.top_k) +
                                   " experts each token is routed to (num_experts_per_tok)");
  if (PruneRuleNeedsUsage(rule) && (usage.mass.size() != blocks.size() || usage.tokens == 0))
    return Status::InvalidArgument(std::string("rule '") + PruneRuleName(rule) + "' needs the experts' usage on calibration texts");
  std::vector<std::vector<int64_t>> out;
  std::mt19937_64 rng(seed);
  for (size_t m = 0; m < blocks.size(); ++m) {
    std::vector<int64_t> ids(static_cast<size_t>(E));
    std::iota(ids.begin(), ids.end(), int64_t{0});
    std::vector<int64_t> kept;
    if (rule == PruneRule::kUsage) {
      std::stable_sort(ids.begin(), ids.end(), [&](int64_t a, int64_t b) { return usage.mass[m][a] > usage.mass[m][b]; });
      kept.assign(ids.begin(), ids.begin() + keep);
      std::sort(kept.begin(), kept.end());
    } else if (rule == PruneRule::kRandom) {
      std::shuffle(ids.begin(), ids.end(), rng);
      kept.assign(ids.begin(), ids.begin() + keep);
      std::sort(kept.begin(), kept.end());
    } else {
      at::Tensor centroids = SpectralCentroids(*blocks[m], 50, RoutingPolicy::Sign::kCanonical).cpu();
      std::vector<double> w(static_cast<size_t>(E), 1.0);
      if (rule == PruneRule::kUsageSpectral) w = usage.mass[m];
      kept = CoverExperts(centroids, w, keep);
    }
    out.push_back(std::move(kept));
  }
  return out;
}

Status WritePrunedCheckpoint(const std::string& model_dir, const std::vector<std::vector<int64_t>>& keep,
                             const std::string& out_dir, const std::string& rule_name) {
  const fs::path src(model_dir), dst(out_dir);
  if (fs::exists(dst)) return Status::InvalidArgument(out_dir + " exists already: choose a new folder");
  MOEEDB_ASSIGN_OR_RETURN(std::string config_text, ReadFile(src / "config.json"));
  MOEEDB_ASSIGN_OR_RETURN(ModelConfig c, ModelConfig::FromJson(config_text, (src / "config.json").string()));
  json config = json::parse(config_text);
  const int64_t moe_layers = static_cast<int64_t>(std::count(c.moe_layer.begin(), c.moe_layer.end(), true));
  if (moe_layers == 0) return Status::InvalidArgument("the model has no MoE layer: nothing to prune");
  if (static_cast<int64_t>(keep.size()) != moe_layers)
    return Status::InvalidArgument("give the kept experts of each of the " + std::to_string(moe_layers) + " MoE layers");
  const size_t n = keep[0].size();
  for (size_t m = 0; m < keep.size(); ++m) {
    if (keep[m].size() != n)
      return Status::InvalidArgument("every MoE layer must keep the same number of experts (config.json has one count)");
    std::set<int64_t> seen;
    for (int64_t e : keep[m])
      if (e < 0 || e >= c.num_experts || !seen.insert(e).second)
        return Status::InvalidArgument("MoE layer " + std::to_string(m) + ": expert ids must be distinct and in [0, " +
                                       std::to_string(c.num_experts) + ")");
  }
  if (n == 0 || static_cast<int64_t>(n) < c.top_k)
    return Status::InvalidArgument("keep at least the " + std::to_string(c.top_k) + " experts each token is routed to");
  std::vector<std::vector<int64_t>> sorted = keep;
  for (auto& k : sorted) std::sort(k.begin(), k.end());

  MOEEDB_ASSIGN_OR_RETURN(auto ckpt, Checkpoint::OpenDir(model_dir));
  MOEEDB_ASSIGN_OR_RETURN(CheckpointNaming naming, DetectNaming(*ckpt, c));

  // The pruned config, and what was kept in the original numbering.
  json pruned_cfg = config;
  pruned_cfg[c.family->experts_field] = static_cast<int64_t>(n);
  json note = config.contains("moeedb_pruned") ? config["moeedb_pruned"] : json::object();
  const int64_t original = note.value("from_experts", c.num_experts);
  json kept_original = json::array();
  for (size_t m = 0; m < sorted.size(); ++m) {
    json ids = json::array();
    for (int64_t e : sorted[m])
      ids.push_back(note.contains("kept") && note["kept"].size() == sorted.size() ? note["kept"][m][static_cast<size_t>(e)].get<int64_t>() : e);
    kept_original.push_back(ids);
  }
  json rules = note.value("rules", json::array());
  rules.push_back(rule_name);
  pruned_cfg["moeedb_pruned"] = {{"from_experts", original}, {"kept", kept_original}, {"rules", rules}};
  const std::string pruned_text = pruned_cfg.dump(2) + "\n";
  MOEEDB_ASSIGN_OR_RETURN(ModelConfig pc, ModelConfig::FromJson(pruned_text, "the pruned config.json"));

  // Every tensor of the pruned model, from its source.
  std::vector<int64_t> moe_index(static_cast<size_t>(c.num_layers), -1);
  for (int64_t l = 0, m = 0; l < c.num_layers; ++l)
    if (c.moe_layer[static_cast<size_t>(l)]) moe_index[static_cast<size_t>(l)] = m++;
  std::vector<TensorToWrite> tensors;
  for (const TensorSpec& spec : ExpectedTensors(pc, naming)) {
    std::string from = spec.name;
    std::vector<int64_t> rows;  // empty: the whole tensor
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const int64_t m = moe_index[static_cast<size_t>(l)];
      const std::string M = LayerPrefix(l) + naming.moe_module + ".";
      if (m < 0 || spec.name.rfind(M, 0) != 0) continue;
      const std::string rest = spec.name.substr(M.size());
      const auto& k = sorted[static_cast<size_t>(m)];
      if (rest == "experts.gate_up_proj" || rest == "experts.down_proj") {
        rows = k;
      } else if (rest.rfind("experts.", 0) == 0) {
        const size_t dot = rest.find('.', 8);
        const int64_t j = std::stoll(rest.substr(8, dot - 8));
        from = M + "experts." + std::to_string(k[static_cast<size_t>(j)]) + rest.substr(dot);
      } else {
        for (const auto& r : c.family->router_names)
          if (rest == r + ".weight" || rest == r + ".bias") rows = k;  // a router's rows, and its bias's
      }
    }
    const TensorView* v = ckpt->Find(from);
    if (v == nullptr && from == spec.name)
      for (const auto& a : spec.aliases)
        if ((v = ckpt->Find(a)) != nullptr) break;
    if (v == nullptr) return Status::Corruption("tensor " + from + " is missing from " + ckpt->Describe());
    TensorToWrite t{spec.name, v->dtype, v->shape, {}};
    if (rows.empty()) {
      const auto* p = static_cast<const uint8_t*>(v->data);
      t.bytes.assign(p, p + v->nbytes);
    } else {
      t.bytes = SelectRows(*v, rows);
      t.shape[0] = static_cast<int64_t>(rows.size());
    }
    if (t.shape != spec.shape) return Status::Corruption("tensor " + from + " has shape " + ShapeToString(v->shape));
    tensors.push_back(std::move(t));
  }

  // Build the folder under a temporary name; rename it when complete.
  const fs::path tmp = dst.parent_path() / (dst.filename().string() + ".tmp-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return Status::IOError("cannot create " + tmp.string() + ": " + ec.message());
  auto fail = [&](Status s) {
    fs::remove_all(tmp, ec);
    return s;
  };
  if (Status s = WriteSafetensors((tmp / "model.safetensors").string(), tensors, {{"format", "pt"}}); !s.ok()) return fail(s);
  if (Status s = WriteFileAtomic((tmp / "config.json").string(), pruned_text); !s.ok()) return fail(s);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "embedding.json",
                        "generation_config.json"}) {
    if (!fs::exists(src / f)) continue;
    fs::copy_file(src / f, tmp / f, ec);
    if (ec) return fail(Status::IOError("cannot copy " + std::string(f) + ": " + ec.message()));
  }
  if (TrainedPooler::ExistsIn(model_dir)) {
    auto pooler = TrainedPooler::LoadDir(model_dir);
    if (!pooler.ok()) return fail(pooler.status());
    PoolerSpec spec = (*pooler)->spec();
    std::map<std::string, at::Tensor> w = (*pooler)->weights();
    bool identity = static_cast<int64_t>(n) == c.num_experts;
    if (spec.router_rows > 0 && !identity) {
      // The router rows shrink to the kept experts: one projection per layer.
      std::vector<at::Tensor> per_layer;
      for (size_t m = 0; m < sorted.size(); ++m) {
        at::Tensor full = spec.router_proj_per_layer ? w.at("router_proj")[static_cast<int64_t>(m)] : w.at("router_proj");
        per_layer.push_back(full.index_select(1, at::tensor(sorted[m], at::kLong)));
      }
      w["router_proj"] = at::stack(per_layer, 0).contiguous();
      spec.router_dim = static_cast<int64_t>(n);
      spec.router_proj_per_layer = true;
    }
    if (Status s = SavePooler(tmp.string(), spec, w); !s.ok()) return fail(s);
  }
  fs::rename(tmp, dst, ec);
  if (ec) return fail(Status::IOError("cannot rename " + tmp.string() + " to " + out_dir + ": " + ec.message()));
  return Status::OK();
}

}  // namespace moeedb
