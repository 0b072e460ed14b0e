#include "database/embedding_setup.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/model/model_defaults.h"
#include "engine/kernels/runtime.h"
#include "index/standardizer.h"

namespace moeedb {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::vector<std::string>& CalibrationTexts() {
  static const std::vector<std::string> kTexts = {
      "A man is playing a guitar on the street.",
      "The stock market fell sharply after the announcement.",
      "Two children are building a sandcastle on the beach.",
      "How do I reset my online banking password?",
      "The committee approved the new budget for next year.",
      "A woman is slicing tomatoes in the kitchen.",
      "Heavy rain is expected across the region tonight.",
      "The spacecraft entered orbit around Mars on Tuesday.",
      "My card was charged twice for the same purchase.",
      "The boundary layer thickens downstream of the leading edge.",
      "She finished the marathon in under four hours.",
      "The restaurant serves traditional dishes from the north.",
      "Scientists discovered a new species of frog in the rainforest.",
      "Please send me the report before the meeting.",
      "The old bridge was closed for repairs.",
      "A dog is running through the tall grass.",
      "The court ruled that the law was unconstitutional.",
      "I would like to transfer money to another account.",
      "The orchestra performed a symphony by Beethoven.",
      "The price of oil rose for the third consecutive week.",
      "A cat is sleeping on a warm windowsill.",
      "The pressure distribution on the wing was measured in the tunnel.",
      "He apologized for arriving late to the party.",
      "The museum opened an exhibition of modern sculpture.",
      "Thousands of people protested in the capital city.",
      "The recipe calls for two cups of flour and one egg.",
      "Why has my transfer not arrived yet?",
      "The team won the championship after a dramatic final.",
      "The novel tells the story of a family across three generations.",
      "An earthquake struck the coast early this morning.",
      "The software update fixes several security issues.",
      "A group of friends is hiking up a steep mountain trail.",
      "The shock wave moves ahead of the blunt body at supersonic speed.",
      "The teacher explained the lesson with simple examples.",
      "Where can I find the exchange rate for euros?",
      "The farmers harvested the wheat before the storm.",
      "The president met foreign leaders at the summit.",
      "A boy is riding a bicycle down the hill.",
      "The company reported record profits this quarter.",
      "The hospital is looking for more volunteers.",
      "The lecture covered the basics of quantum mechanics.",
      "A man is cutting wood with a saw.",
      "The train was delayed by an hour because of snow.",
      "My new card has not been delivered.",
      "The film won three awards at the festival.",
      "Engineers tested the heat transfer in the cooling channel.",
      "The birds migrate south every autumn.",
      "The negotiations ended without an agreement.",
      "A woman is playing the violin on a stage.",
      "The city plans to build a new park near the river.",
      "Thou shalt not bear false witness against thy neighbour.",
      "And the prince rode away into the dark forest.",
      "The children laughed at the clown's tricks.",
      "Interest rates will remain unchanged this month.",
      "The laboratory measured the viscosity of the fluid.",
      "She wrote a letter to her grandmother.",
      "The volcano has been dormant for centuries.",
      "Can I cancel a payment that is still pending?",
      "The players trained hard before the match.",
      "A chef is preparing pasta in a large pot.",
      "The library will be closed on public holidays.",
      "The general ordered his troops to retreat.",
      "The river flooded the fields after the storm.",
      "The app crashes every time I open it.",
  };
  return kTexts;
}

Result<std::unique_ptr<EmbeddingSetup>> EmbeddingSetup::Load(const EmbeddingSpec& config) {
  std::unique_ptr<EmbeddingSetup> s(new EmbeddingSetup());
  s->config_ = config;
  s->config_.model_dir = fs::absolute(config.model_dir).lexically_normal().string();
  MOEEDB_ASSIGN_OR_RETURN(EmbeddingDefaults defaults, ModelEmbeddingDefaults(s->config_.model_dir));
  if (s->config_.prompt.empty()) s->config_.prompt = defaults.prompt;
  if (s->config_.hs_pooling.empty()) s->config_.hs_pooling = defaults.hs_pooling;
  if (s->config_.rw_pooling.empty()) s->config_.rw_pooling = defaults.rw_pooling;
  s->default_alpha_ = defaults.alpha;
  SetComputeThreads(config.threads);
  LoadOptions load;
  MOEEDB_ASSIGN_OR_RETURN(load.format.dtype, kComputeDtypes.Parse(config.dtype));
  MOEEDB_ASSIGN_OR_RETURN(load.format.quant, kWeightQuants.Parse(config.quant));
  load.device = config.device;
  MOEEDB_ASSIGN_OR_RETURN(s->model_, MoeModel::LoadDir(s->config_.model_dir, load));
  const std::string tok_path = config.tokenizer_path.empty()
                                   ? (fs::path(s->config_.model_dir) / "tokenizer.json").string()
                                   : config.tokenizer_path;
  if (!fs::exists(tok_path))
    return Status::NotFound(config.tokenizer_path.empty() ? "model folder " + s->config_.model_dir + " has no tokenizer.json"
                                                          : "no tokenizer file " + tok_path);
  MOEEDB_ASSIGN_OR_RETURN(s->tokenizer_, LoadTokenizer(tok_path));
  if (s->tokenizer_->vocab_size() > s->model_->config().vocab_size)
    return Status::InvalidArgument("the tokenizer has more ids than the model's vocabulary");
  MOEEDB_ASSIGN_OR_RETURN(ExpertDispatch dispatch, kExpertDispatches.Parse(config.expert_dispatch));
  s->model_->set_expert_dispatch(dispatch);
  MOEEDB_ASSIGN_OR_RETURN(RoutingPolicy policy, RoutingPolicy::Parse(config.routing));
  MOEEDB_RETURN_IF_ERROR(s->model_->SetRouting(policy, config.cache_dir).status());
  s->routing_canonical_ = policy.ToString();
  EmbedderOptions eo;
  MOEEDB_ASSIGN_OR_RETURN(eo.prompt, FindPrompt(s->config_.prompt));
  eo.batch_tokens = config.batch_tokens;
  eo.instruction = config.instruction;
  if (!config.rw_readout.empty()) {
    eo.rw_readout_default = false;
    MOEEDB_ASSIGN_OR_RETURN(eo.rw_readout, ParseRouterReadout(config.rw_readout));
  }
  MOEEDB_ASSIGN_OR_RETURN(eo.hs_pooling, kHsPoolings.Parse(s->config_.hs_pooling));
  MOEEDB_ASSIGN_OR_RETURN(eo.rw_pooling, kRwPoolings.Parse(s->config_.rw_pooling));
  MOEEDB_RETURN_IF_ERROR(s->model_->CheckHsPooling(eo.hs_pooling));  // at load, not at the first embed
  s->embedder_ = std::make_unique<Embedder>(s->model_.get(), s->tokenizer_.get(), eo);
  const WorkerShare share = ShareComputeThreads(config.workers, ComputeThreads());
  s->workers_ = std::make_unique<EmbedWorkers>(s->embedder_.get(), share.workers, share.threads_per_worker);
  s->fingerprint_ = s->model_->WeightFingerprint();
  // "8 routed experts", or for a pruned model "6 of 8 routed experts (kept: ...)".
  const ModelConfig& mc = s->model_->config();
  std::ifstream cfg_in(fs::path(s->config_.model_dir) / "config.json");
  const json cfg = json::parse(cfg_in, nullptr, false);
  s->experts_ = std::to_string(mc.num_experts) + " routed experts";
  if (!cfg.is_discarded() && cfg.contains("moeedb_pruned") && cfg["moeedb_pruned"].is_object()) {
    const json& p = cfg["moeedb_pruned"];
    s->experts_ = std::to_string(mc.num_experts) + " of " + std::to_string(p.value("from_experts", mc.num_experts)) +
                  " routed experts (pruned; kept " + p.value("kept", json::array()).dump() + ")";
  }
  return s;
}

size_t EmbeddingSetup::dim_hs() const {
  return static_cast<size_t>(model_->HsDim(embedder_->options().hs_pooling));
}
size_t EmbeddingSetup::dim_rw() const { return static_cast<size_t>(model_->config().rw_dim()); }

std::string EmbeddingSetup::InfoJson() const {
  return json{{"model_dir", config_.model_dir},
              {"model_fingerprint", fingerprint_},
              {"model_type", model_->config().model_type},
              {"routing", routing_canonical_},
              {"prompt", config_.prompt},
              {"hs_pooling", config_.hs_pooling},
              {"rw_pooling", config_.rw_pooling},
              {"rw_readout", RouterReadoutName(embedder_->rw_readout())},
              {"dim_hs", dim_hs()},
              {"dim_rw", dim_rw()},
              {"experts", experts_}}
      .dump();
}

Status EmbeddingSetup::CheckMatches(const std::string& info_text) const {
  json want, have = json::parse(InfoJson());
  try {
    want = json::parse(info_text);
  } catch (...) {
    return Status::Corruption("collection info is damaged");
  }
  std::string diffs;
  for (const char* key : {"experts", "model_fingerprint", "routing", "prompt", "hs_pooling", "rw_pooling", "rw_readout",
                          "dim_hs", "dim_rw"}) {
    // Collections made before pooling was selectable used the reference poolings.
    const std::string k = key;
    const json wanted = want.contains(key)      ? want[key]
                        : k == "hs_pooling"     ? json(EmbeddingDefaults{}.hs_pooling)
                        : k == "rw_pooling"     ? json(EmbeddingDefaults{}.rw_pooling)
                                                : json();
    if (!wanted.is_null() && wanted != have[key])
      diffs += std::string(diffs.empty() ? "" : "; ") + key + ": collection " + wanted.dump() + ", now " + have[key].dump();
  }
  if (!diffs.empty())
    return Status::InvalidArgument("the model setup differs from the collection's (" + diffs +
                                   "); use the collection's model, routing and prompt");
  return Status::OK();
}

Result<std::vector<Embedding>> EmbeddingSetup::Embed(const std::vector<std::string>& texts) const {
  MOEEDB_ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> ids, embedder_->TokenizeAll(texts));
  return workers_->Embed(ids);
}

namespace {

// The part of a setup the statistics depend on.
json StatsKey(const json& info) {
  json key = json::object();
  for (const char* k : {"model_fingerprint", "routing", "prompt", "hs_pooling", "rw_pooling", "rw_readout"})
    key[k] = info.contains(k) ? info[k] : json();
  // A trained pooler's HS is used raw (standardizes_hs); files written when
  // it was z-scored lack this and are recomputed.
  if (key["hs_pooling"] == "trained") key["hs_standardized"] = false;
  return key;
}

}  // namespace

Result<std::pair<std::string, std::string>> EmbeddingSetup::ComputeCalibrationStats() const {
  MOEEDB_ASSIGN_OR_RETURN(std::vector<Embedding> e, Embed(CalibrationTexts()));
  std::vector<float> hs, rw;
  for (const auto& x : e) {
    hs.insert(hs.end(), x.hs.begin(), x.hs.end());
    rw.insert(rw.end(), x.rw.begin(), x.rw.end());
  }
  const Standardizer std_hs =
      standardizes_hs() ? Standardizer::Fit(hs.data(), e.size(), dim_hs()) : Standardizer::Identity(dim_hs());
  return std::make_pair(std_hs.ToJson(), Standardizer::Fit(rw.data(), e.size(), dim_rw()).ToJson());
}

Result<std::string> EmbeddingSetup::CalibrationFileJson() const {
  MOEEDB_ASSIGN_OR_RETURN(auto stats, ComputeCalibrationStats());
  return json{{"setup", StatsKey(json::parse(InfoJson()))},
              {"calibration_texts", CalibrationTexts().size()},
              {"hs", json::parse(stats.first)},
              {"rw", json::parse(stats.second)}}
      .dump();
}

CollectionOptions EmbeddingSetup::NewCollectionOptions(const std::pair<std::string, std::string>& stats) const {
  CollectionOptions o;
  o.dim_hs = dim_hs();
  o.dim_rw = dim_rw();
  o.default_alpha = static_cast<float>(default_alpha());
  o.std_hs_json = stats.first;
  o.std_rw_json = stats.second;
  o.info_json = InfoJson();
  return o;
}

Result<std::pair<std::string, std::string>> EmbeddingSetup::CalibrationStats() const {
  const fs::path file = fs::path(config_.model_dir) / kStandardizationFile;
  if (fs::exists(file)) {
    std::ifstream in(file);
    json j = json::parse(in, nullptr, false);
    // Used only when written for exactly this setup; anything else (another
    // routing or prompt, other weights, a damaged file) is recomputed.
    if (!j.is_discarded() && j.is_object() && j.contains("setup") && j["setup"] == StatsKey(json::parse(InfoJson())) &&
        j.contains("hs") && j.contains("rw")) {
      auto hs = Standardizer::FromJson(j["hs"].dump());
      auto rw = Standardizer::FromJson(j["rw"].dump());
      if (hs.ok() && rw.ok() && hs->dim() == dim_hs() && rw->dim() == dim_rw())
        return std::make_pair(j["hs"].dump(), j["rw"].dump());
    }
  }
  return ComputeCalibrationStats();
}

}  // namespace moeedb
