// moeedb model prune (fewer routed experts per MoE layer) and
// moeedb lens specialise (which experts each domain's tokens route to).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "engine/analysis/expert_pruning.h"
#include "engine/analysis/expert_usage.h"
#include "engine/model/model.h"
#include "engine/kernels/runtime.h"
#include "base/png_plot.h"
#include "plugin/cli/args.h"
#include "plugin/cli/commands.h"
#include "plugin/cli/common.h"

namespace moeedb::cli {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Token ids of a text file's lines (the model's tokenizer, special tokens
// added, no prompt), at most `max` lines; an error names the line.
Result<std::vector<std::vector<int32_t>>> FileIds(const Tokenizer& tok, const std::string& path, size_t max) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read " + path);
  std::vector<std::vector<int32_t>> ids;
  const auto lines = ReadLines(in);
  for (size_t i = 0; i < lines.size() && ids.size() < max; ++i) {
    if (lines[i].find_first_not_of(" \t\r") == std::string::npos) continue;
    auto t = tok.Encode(lines[i].substr(0, 4000), true);
    if (!t.ok()) return Status::InvalidArgument(path + " line " + std::to_string(i + 1) + ": " + t.status().message());
    if (!t->empty()) ids.push_back(std::move(t).value());
  }
  if (ids.empty()) return Status::InvalidArgument(path + " has no texts");
  return ids;
}

uint64_t FolderBytes(const fs::path& dir) {
  uint64_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".safetensors") n += e.file_size();
  return n;
}

}  // namespace

int RunModelPrune(const Args& args) {
  const std::string model_dir = ModelDirFlag(args);
  if (model_dir.empty()) return UsageError("model prune", "no default model was found: pass --model DIR");
  if (args.Has("experts") == args.Has("keep")) return UsageError("model prune", "give --keep (with --by) or --experts");
  if (fs::exists(args.Get("out"))) return Fail("model prune", args.Get("out") + " exists already: choose a new folder");
  EmbeddingSpec compute;
  if (Status s = ReadSpecFlags(args, EmbeddingFields(), &compute, {.only = {"threads"}}); !s.ok())
    return UsageError("model prune", s.message());
  const int64_t seed = args.Int("seed"), max_texts = args.Int("max-texts");
  auto rule = ParsePruneRule(args.Get("by", "usage+spectral"));
  if (!rule.ok()) return UsageError("model prune", rule.status().message());
  SetComputeThreads(compute.threads);
  auto model = MoeModel::LoadDir(model_dir);
  if (!model.ok()) return Fail("model prune", model.status().message());
  const ModelConfig& c = (*model)->config();
  std::vector<int64_t> moe_layers;
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (c.moe_layer[static_cast<size_t>(l)]) moe_layers.push_back(l);
  if (moe_layers.empty()) return Fail("model prune", "the model has no MoE layer: nothing to prune");

  std::vector<std::vector<int64_t>> kept;
  std::string rule_name = PruneRuleName(*rule);
  if (args.Has("experts")) {
    const json j = json::parse(args.Get("experts"), nullptr, false);
    if (j.is_discarded() || !j.is_object()) return UsageError("model prune", "--experts must be a JSON object {\"LAYER\": [ids]}");
    for (auto it = j.begin(); it != j.end(); ++it) {
      char* end = nullptr;
      const long l = std::strtol(it.key().c_str(), &end, 10);
      if (*end != '\0' || l < 0 || l >= c.num_layers) return Fail("model prune", "--experts: no layer '" + it.key() + "'");
      if (!c.moe_layer[static_cast<size_t>(l)]) return Fail("model prune", "--experts: layer " + it.key() + " is not a MoE layer");
    }
    for (int64_t l : moe_layers) {
      const std::string key = std::to_string(l);
      if (!j.contains(key) || !j[key].is_array()) return Fail("model prune", "--experts: MoE layer " + key + " is missing");
      std::vector<int64_t> ids;
      for (const auto& x : j[key]) {
        if (!x.is_number_integer()) return Fail("model prune", "--experts: layer " + key + " lists a non-integer");
        ids.push_back(x.get<int64_t>());
      }
      kept.push_back(std::move(ids));
    }
    rule_name = "explicit";
  } else {
    const std::string k = args.Get("keep");
    char* end = nullptr;
    const double v = std::strtod(k.c_str(), &end);
    if (k.empty() || *end != '\0' || !std::isfinite(v) || v <= 0)
      return UsageError("model prune", "--keep must be a fraction in (0, 1] or a positive count, not '" + k + "'");
    const bool fraction = k.find('.') != std::string::npos;
    if (fraction && v > 1) return UsageError("model prune", "--keep " + k + ": a fraction must be at most 1");
    if (!fraction && v != std::floor(v)) return UsageError("model prune", "--keep " + k + " is not a count");
    const int64_t n = fraction ? static_cast<int64_t>(std::llround(v * static_cast<double>(c.num_experts))) : static_cast<int64_t>(v);
    ExpertUsage usage;
    if (PruneRuleNeedsUsage(*rule)) {
      if (!args.Has("calib")) return UsageError("model prune", std::string("--by ") + rule_name + " needs --calib FILE");
      auto tok = LoadTokenizer("", model_dir);
      if (!tok.ok()) return Fail("model prune", tok.status().message());
      auto ids = FileIds(**tok, args.Get("calib"), static_cast<size_t>(max_texts));
      if (!ids.ok()) return Fail("model prune", ids.status().message());
      auto u = MeasureExpertUsage(**model, *ids);
      if (!u.ok()) return Fail("model prune", u.status().message());
      usage = std::move(u).value();
    }
    auto chosen = ChooseExperts(**model, usage, n, *rule, static_cast<uint64_t>(seed));
    if (!chosen.ok()) return Fail("model prune", chosen.status().message());
    kept = std::move(chosen).value();
  }
  if (Status s = WritePrunedCheckpoint(model_dir, kept, args.Get("out"), rule_name); !s.ok()) return Fail("model prune", s.message());
  json out = {{"out", args.Get("out")}, {"rule", rule_name}, {"experts_before", c.num_experts},
              {"experts_after", kept[0].size()}, {"kept", kept}, {"weights_bytes_before", FolderBytes(model_dir)},
              {"weights_bytes_after", FolderBytes(args.Get("out"))}};
  std::cout << out.dump() << std::endl;
  return 0;
}

int RunLensSpecialise(const Args& args) {
  std::vector<std::string> pairs = args.positional();
  if (args.Has("texts")) pairs.insert(pairs.begin(), args.Get("texts"));
  if (pairs.empty()) return UsageError("lens specialise", "give at least one --texts DOMAIN=FILE");
  EmbeddingSpec compute;
  if (Status s = ReadSpecFlags(args, EmbeddingFields(), &compute, {.only = {"threads"}}); !s.ok())
    return UsageError("lens specialise", s.message());
  const int64_t max_texts = args.Int("max-texts");
  const std::string model_dir = ModelDirFlag(args);
  if (model_dir.empty()) return UsageError("lens specialise", "no default model was found: pass --model DIR");
  std::vector<std::pair<std::string, std::string>> domains;
  for (const auto& p : pairs) {
    const size_t eq = p.find('=');
    if (eq == 0 || eq == std::string::npos || eq + 1 == p.size())
      return UsageError("lens specialise", "'" + p + "' is not DOMAIN=FILE");
    domains.push_back({p.substr(0, eq), p.substr(eq + 1)});
  }
  SetComputeThreads(compute.threads);
  auto model = MoeModel::LoadDir(model_dir);
  if (!model.ok()) return Fail("lens specialise", model.status().message());
  auto tok = LoadTokenizer("", model_dir);
  if (!tok.ok()) return Fail("lens specialise", tok.status().message());
  std::vector<ExpertUsage> usage;
  for (const auto& [name, file] : domains) {
    auto ids = FileIds(**tok, file, static_cast<size_t>(max_texts));
    if (!ids.ok()) return Fail("lens specialise", ids.status().message());
    auto u = MeasureExpertUsage(**model, *ids);
    if (!u.ok()) return Fail("lens specialise", u.status().message());
    usage.push_back(std::move(u).value());
  }
  const ModelConfig& c = (*model)->config();
  const double baseline = static_cast<double>(c.top_k) / static_cast<double>(c.num_experts);
  json layers = json::array();
  const size_t L = usage[0].mass.size(), E = static_cast<size_t>(c.num_experts);
  for (size_t m = 0; m < L; ++m) {
    json per = json::object();
    for (size_t d = 0; d < domains.size(); ++d) {
      std::vector<double> share(E), ratio(E);
      for (size_t e = 0; e < E; ++e) share[e] = usage[d].Share(m, e), ratio[e] = share[e] / baseline;
      per[domains[d].first] = {{"tokens", usage[d].tokens}, {"share", share}, {"ratio", ratio}};
    }
    layers.push_back({{"moe_layer", m}, {"domains", per}});
  }
  json out = {{"model", model_dir}, {"top_k", c.top_k}, {"num_experts", c.num_experts}, {"baseline", baseline},
              {"domains", json::array()}, {"layers", layers}};
  for (const auto& d : domains) out["domains"].push_back(d.first);
  std::cout << out.dump() << std::endl;
  if (args.Has("out")) {
    const fs::path dir = args.Get("out");
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return Fail("lens specialise", "cannot create " + dir.string() + ": " + ec.message());
    std::ofstream(dir / "specialisation.json") << out.dump(2) << "\n";
    // Heat map: cells of 48 x 24 pixels, a 2-pixel white gap between them.
    const int cw = 48, ch = 24, gap = 2;
    const int W = static_cast<int>(domains.size()) * (cw + gap) + gap, H = static_cast<int>(E) * (ch + gap) + gap;
    for (size_t m = 0; m < L; ++m) {
      std::vector<unsigned char> rgb(static_cast<size_t>(W) * H * 3, 255);
      for (size_t d = 0; d < domains.size(); ++d)
        for (size_t e = 0; e < E; ++e) {
          const double r = usage[d].Share(m, e) / baseline;
          const double t = std::clamp(std::fabs(r - 1.0), 0.0, 1.0);  // 0 at the baseline, 1 at 0x or 2x
          const auto mix = [&](double full) { return static_cast<unsigned char>(std::lround(255 * (1 - t) + full * t)); };
          const unsigned char R = r >= 1 ? mix(200) : mix(40), G = r >= 1 ? mix(40) : mix(90), B = r >= 1 ? mix(40) : mix(200);
          for (int y = 0; y < ch; ++y)
            for (int x = 0; x < cw; ++x) {
              const size_t px = (static_cast<size_t>(gap + static_cast<int>(e) * (ch + gap) + y) * W + gap + static_cast<int>(d) * (cw + gap) + x) * 3;
              rgb[px] = R, rgb[px + 1] = G, rgb[px + 2] = B;
            }
        }
      auto png = EncodePng(rgb, W, H);
      if (!png.ok()) return Fail("lens specialise", png.status().message());
      std::ofstream(dir / ("layer-" + std::to_string(m) + ".png"), std::ios::binary) << *png;
    }
    std::cerr << "wrote " << (dir / "specialisation.json").string() << " and " << L << " heat maps" << std::endl;
  }
  return 0;
}

}  // namespace moeedb::cli
