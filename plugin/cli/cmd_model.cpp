// moeedb model init | info | calibrate.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "base/atomic_file.h"
#include "engine/model/model.h"
#include "engine/model/model_defaults.h"
#include "engine/model/trained_pooler.h"
#include "engine/model/random_checkpoint.h"
#include "plugin/cli/args.h"
#include "plugin/cli/commands.h"
#include "plugin/cli/common.h"
#include "database/embedding_setup.h"

namespace moeedb::cli {

int RunModelInit(const Args& args) {
  const long long seed = args.Int("seed");
  RandomCheckpointOptions opt;
  opt.seed = static_cast<uint64_t>(seed);
  const std::string dtype = args.Get("dtype", "f32");
  if (dtype == "f32") opt.dtype = DType::kF32;
  else if (dtype == "bf16") opt.dtype = DType::kBF16;
  else if (dtype == "f16") opt.dtype = DType::kF16;
  else return UsageError("model init", "--dtype must be f32, bf16 or f16");
  const std::string layout = args.Get("layout", "per-expert");
  if (layout == "per-expert") opt.layout = ExpertLayout::kPerExpert;
  else if (layout == "packed") opt.layout = ExpertLayout::kPacked;
  else return UsageError("model init", "--layout must be per-expert or packed");
  if (args.Has("std")) {
    try {
      opt.stddev = std::stod(args.Get("std"));
    } catch (...) {
      return UsageError("model init", "--std needs a number");
    }
    if (!(opt.stddev > 0)) return UsageError("model init", "--std must be positive");
  }
  const std::string tokenizer = args.Get("tokenizer");
  if (!tokenizer.empty()) {
    auto cfg = ModelConfig::FromFile(args.Get("config"));
    if (!cfg.ok()) return Fail("model init", cfg.status().message());
    auto tok = moeedb::LoadTokenizer(tokenizer);
    if (!tok.ok()) return Fail("model init", tok.status().message());
    if ((*tok)->vocab_size() > cfg->vocab_size)
      return Fail("model init", "tokenizer " + tokenizer + " has " + std::to_string((*tok)->vocab_size()) +
                                    " ids but the config's vocab_size is " + std::to_string(cfg->vocab_size));
  }
  Status st = WriteRandomCheckpoint(args.Get("config"), tokenizer, args.Get("out"), opt);
  if (!st.ok()) return Fail("model init", st.message());
  std::cerr << "wrote " << args.Get("out") << "\n";
  return 0;
}

int RunModelInfo(const Args& args) {
  const std::string dir = ModelDirFlag(args);
  if (dir.empty()) return UsageError("model info", "no default model was found: pass --model DIR");
  auto model = MoeModel::LoadDir(dir);
  if (!model.ok()) return Fail("model info", model.status().message());
  auto defaults = ModelEmbeddingDefaults(dir);
  if (!defaults.ok()) return Fail("model info", defaults.status().message());
  std::cout << "folder: " << std::filesystem::absolute(dir).lexically_normal().string() << "\n"
            << (*model)->config().Summary() << "\n";
  if (const TrainedPooler* p = (*model)->pooler()) {
    const PoolerSpec& s = p->spec();
    std::cout << "trained pooler: " << s.layer_rows << " hidden-state rows" << (s.router_rows ? " + " : "")
              << (s.router_rows ? std::to_string(s.router_rows) + " router rows" : std::string()) << ", "
              << s.latents << " latents, " << s.heads << " heads, output " << s.out_dim << " dims"
              << (s.lexical_dim ? " + a lexical channel of " + std::to_string(s.lexical_dim) : std::string()) << " ("
              << kTokenPoolings.Name(s.token_pooling) << " over tokens)\n";
  }
  std::cout << "defaults: prompt " << defaults->prompt << ", hs pooling " << defaults->hs_pooling << ", rw pooling "
            << defaults->rw_pooling << ", alpha " << defaults->alpha << "\n";
  return 0;
}

int RunModelCalibrate(const Args& args) {
  if (ModelDirFlag(args).empty()) return UsageError("model calibrate", "no default model was found: pass --model DIR");
  auto spec = EmbeddingSpecFromFlags(args);
  if (!spec.ok()) return UsageError("model calibrate", spec.status().message());
  const EmbeddingSpec& cfg = *spec;
  auto setup = EmbeddingSetup::Load(cfg);
  if (!setup.ok()) return Fail("model calibrate", setup.status().message());
  auto text = (*setup)->CalibrationFileJson();
  if (!text.ok()) return Fail("model calibrate", text.status().message());
  const std::string out =
      args.Get("out", (std::filesystem::path(cfg.model_dir) / EmbeddingSetup::kStandardizationFile).string());
  if (Status s = WriteFileAtomic(out, *text + "\n"); !s.ok()) return Fail("model calibrate", s.message());
  std::cerr << "wrote " << out << std::endl;
  return 0;
}

}  // namespace moeedb::cli
