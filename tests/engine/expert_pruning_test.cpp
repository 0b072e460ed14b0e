// Expert pruning and the usage measure: a checkpoint that keeps every expert
// embeds bit for bit like the original; one whose router never selects the
// dropped experts (built here) keeps HS and the kept RW dimensions; the
// pooler's router projection is cut to the kept columns; the spectral cover
// picks what a hand derivation picks; bad input writes nothing.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/embed/embedder.h"
#include "engine/analysis/expert_pruning.h"
#include "engine/analysis/expert_usage.h"
#include "engine/model/model.h"
#include "engine/model/model_family.h"
#include "engine/model/random_checkpoint.h"
#include "engine/model/routing_policy.h"
#include "engine/io/safetensors.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/model/trained_pooler.h"
#include "engine/kernels/weight_format.h"
#include "database/embedding_setup.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::vector<std::string> kTexts = {"A man is playing a flute.", "The stock market fell sharply.",
                                         "Two dogs run through the snow in the park.", "A woman slices an onion."};

std::vector<Embedding> Embed(const std::string& dir, bool* ok) {
  auto m = MoeModel::LoadDir(dir);
  auto t = BpeTokenizer::FromFile(dir + "/tokenizer.json");
  *ok = m.ok() && t.ok();
  if (!*ok) return {};
  auto e = Embedder(m->get(), t->get(), EmbedderOptions{}).EmbedTexts(kTexts);
  *ok = e.ok();
  return *ok ? *e : std::vector<Embedding>{};
}

// Rewrites dir/model.safetensors through `edit(name, shape, float data)`.
void EditWeights(const std::string& dir, const std::function<void(const std::string&, const std::vector<int64_t>&, float*)>& edit) {
  std::vector<TensorToWrite> out;
  {
    auto ck = Checkpoint::OpenDir(dir);
    ASSERT_TRUE(ck.ok());
    for (const auto& name : (*ck)->Names()) {
      const TensorView* v = (*ck)->Find(name);
      ASSERT_EQ(v->dtype, DType::kF32);
      TensorToWrite t{name, v->dtype, v->shape, std::vector<uint8_t>(static_cast<const uint8_t*>(v->data),
                                                                     static_cast<const uint8_t*>(v->data) + v->nbytes)};
      edit(name, t.shape, reinterpret_cast<float*>(t.bytes.data()));
      out.push_back(std::move(t));
    }
  }
  ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", out).ok());
}

// A random pooler that reads RW, written beside the model.
void AddPooler(const std::string& dir, const ModelConfig& c) {
  PoolerSpec s;
  s.hidden = c.hidden_size;
  s.layer_rows = c.num_layers + 1;
  s.router_rows = c.num_layers;
  s.router_dim = c.num_experts;
  s.latents = 4;
  s.heads = 4;
  s.ffn = 32;
  s.out_dim = 24;
  std::map<std::string, at::Tensor> w;
  at::manual_seed(3);
  for (const auto& t : PoolerTensors(s)) w[t.name] = t.init_std == 0 ? at::ones(t.shape) : at::randn(t.shape) * t.init_std;
  ASSERT_TRUE(SavePooler(dir, s, w).ok());
}

class Pruning : public ::testing::Test {
 protected:
  void SetUp() override {
    RandomCheckpointOptions o;
    o.seed = 11;
    ASSERT_TRUE(WriteRandomCheckpoint(test::Data("configs/olmoe-tiny.json"), test::Data("tokenizers/olmoe/tokenizer.json"),
                                      dir_ / "full", o).ok());
    auto m = MoeModel::LoadDir(dir_ / "full");
    ASSERT_TRUE(m.ok());
    config_ = (*m)->config();
  }
  std::vector<std::vector<int64_t>> AllExperts() const {
    std::vector<int64_t> all(static_cast<size_t>(config_.num_experts));
    for (int64_t e = 0; e < config_.num_experts; ++e) all[static_cast<size_t>(e)] = e;
    return std::vector<std::vector<int64_t>>(static_cast<size_t>(config_.num_layers), all);
  }
  test::TempDir dir_;
  ModelConfig config_;
};

TEST_F(Pruning, KeepingEveryExpertIsBitIdentical) {
  AddPooler(dir_ / "full", config_);
  ASSERT_TRUE(WritePrunedCheckpoint(dir_ / "full", AllExperts(), dir_ / "same", "explicit").ok());
  for (const char* f : {"tokenizer.json", "pooler.json", "pooler.safetensors", "config.json", "model.safetensors"})
    EXPECT_TRUE(fs::exists(fs::path(dir_ / "same") / f)) << f;
  bool ok_a = false, ok_b = false;
  const auto a = Embed(dir_ / "full", &ok_a), b = Embed(dir_ / "same", &ok_b);
  ASSERT_TRUE(ok_a && ok_b);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].hs, b[i].hs) << i;  // bit for bit
    EXPECT_EQ(a[i].rw, b[i].rw) << i;
  }
  // And through the trained pooler too.
  auto ma = MoeModel::LoadDir(dir_ / "full"), mb = MoeModel::LoadDir(dir_ / "same");
  ASSERT_TRUE(ma.ok() && mb.ok());
  ForwardOptions fo;
  fo.hs_pooling = HsPooling::kTrained;
  auto pa = (*ma)->Forward({{5, 6, 7, 8}, {9, 10}}, fo), pb = (*mb)->Forward({{5, 6, 7, 8}, {9, 10}}, fo);
  ASSERT_TRUE(pa.ok() && pb.ok());
  EXPECT_TRUE(at::equal(pa->hs, pb->hs));
}

// Hidden dimension 0 is held at a constant (the embedding column is K, and
// no attention output, expert or MLP writes into it), so after RMSNorm it is
// large and positive for every token; the kept experts' router rows carry +A
// there, the dropped ones' -A and nothing else: the dropped experts' logits
// sit ~2 A x0 below every kept one, and their softmax terms vanish.
TEST_F(Pruning, DroppingExpertsTheRouterNeverSelectsKeepsHsAndTheKeptRw) {
  const std::set<int64_t> dropped = {2, 6};
  const std::string router = std::string(".") + config_.family->router_names[0] + ".weight";
  const int64_t H = config_.hidden_size;
  EditWeights(dir_ / "full", [&](const std::string& name, const std::vector<int64_t>& shape, float* w) {
    auto ends = [&](const std::string& s) { return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0; };
    if (name == "model.embed_tokens.weight")
      for (int64_t t = 0; t < shape[0]; ++t) w[t * H] = 30.0f;
    else if (ends("o_proj.weight") || ends("down_proj.weight"))
      std::memset(w, 0, static_cast<size_t>(shape[1]) * sizeof(float));  // output row 0
    else if (ends(router))
      for (int64_t e = 0; e < shape[0]; ++e) {
        if (dropped.count(e)) std::memset(w + e * H, 0, static_cast<size_t>(H) * sizeof(float));
        w[e * H] = dropped.count(e) ? -4.0f : 4.0f;
      }
  });
  auto model = MoeModel::LoadDir(dir_ / "full");
  ASSERT_TRUE(model.ok());
  auto tok = BpeTokenizer::FromFile(dir_ / "full/tokenizer.json");
  ASSERT_TRUE(tok.ok());
  std::vector<std::vector<int32_t>> ids;
  for (const auto& t : kTexts) ids.push_back(*(*tok)->Encode(t, true));
  auto usage = MeasureExpertUsage(**model, ids);
  ASSERT_TRUE(usage.ok());
  int64_t tokens = 0;
  for (const auto& s : ids) tokens += static_cast<int64_t>(s.size());
  EXPECT_EQ(usage->tokens, tokens);
  for (size_t m = 0; m < usage->mass.size(); ++m) {
    int64_t picks = 0;
    double mass = 0;
    for (int64_t e = 0; e < config_.num_experts; ++e) {
      picks += usage->selected[m][static_cast<size_t>(e)];
      mass += usage->mass[m][static_cast<size_t>(e)];
      if (dropped.count(e)) EXPECT_EQ(usage->selected[m][static_cast<size_t>(e)], 0) << "layer " << m << " expert " << e;
    }
    EXPECT_EQ(picks, tokens * config_.top_k);  // top-k membership counts
    EXPECT_NEAR(mass, static_cast<double>(tokens), 1e-6 * tokens);  // softmax rows sum to one
  }
  // The usage rule drops exactly the never-selected experts.
  auto kept = ChooseExperts(**model, *usage, config_.num_experts - 2, PruneRule::kUsage);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  for (const auto& k : *kept) EXPECT_EQ(k, (std::vector<int64_t>{0, 1, 3, 4, 5, 7}));
  ASSERT_TRUE(WritePrunedCheckpoint(dir_ / "full", *kept, dir_ / "pruned", "usage").ok());
  bool ok_a = false, ok_b = false;
  const auto a = Embed(dir_ / "full", &ok_a), b = Embed(dir_ / "pruned", &ok_b);
  ASSERT_TRUE(ok_a && ok_b);
  // Every token goes to the same experts (the kept ones renumbered) ...
  auto pruned_model = MoeModel::LoadDir(dir_ / "pruned");
  ASSERT_TRUE(pruned_model.ok());
  auto pruned_usage = MeasureExpertUsage(**pruned_model, ids);
  ASSERT_TRUE(pruned_usage.ok());
  for (size_t m = 0; m < usage->selected.size(); ++m)
    for (size_t j = 0; j < (*kept)[m].size(); ++j)
      EXPECT_EQ(pruned_usage->selected[m][j], usage->selected[m][static_cast<size_t>((*kept)[m][j])]) << m << " " << j;
  // ... with the same weights (the router runs in float64 and is rounded
  // once), so HS is unchanged and RW is the original without the dropped
  // experts' dimensions, bit for bit.
  const size_t E = static_cast<size_t>(config_.num_experts);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].hs, b[i].hs) << i;
    std::vector<float> want;
    for (size_t j = 0; j < a[i].rw.size(); ++j)
      if (!dropped.count(static_cast<int64_t>(j % E))) want.push_back(a[i].rw[j]);
    EXPECT_EQ(b[i].rw, want) << i;
  }
  // The pruned folder says what it kept, in the original numbering, and composes.
  std::ifstream in(dir_ / "pruned/config.json");
  const json cfg = json::parse(in);
  EXPECT_EQ(cfg["num_experts"], 6);
  EXPECT_EQ(cfg["moeedb_pruned"]["from_experts"], 8);
  ASSERT_TRUE(WritePrunedCheckpoint(dir_ / "pruned", std::vector<std::vector<int64_t>>(2, {0, 2, 4, 5}), dir_ / "twice", "explicit").ok());
  std::ifstream in2(dir_ / "twice/config.json");
  EXPECT_EQ(json::parse(in2)["moeedb_pruned"]["kept"][0], json({0, 3, 5, 7}));
}

TEST_F(Pruning, ThePoolersRouterProjectionKeepsTheKeptColumnsPerLayer) {
  AddPooler(dir_ / "full", config_);
  const std::vector<std::vector<int64_t>> keep = {{0, 1, 2, 3, 4, 5}, {1, 2, 4, 5, 6, 7}};
  ASSERT_TRUE(WritePrunedCheckpoint(dir_ / "full", keep, dir_ / "p", "explicit").ok());
  auto a = TrainedPooler::LoadDir(dir_ / "full"), b = TrainedPooler::LoadDir(dir_ / "p");
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().ToString();
  EXPECT_TRUE((*b)->spec().router_proj_per_layer);
  EXPECT_EQ((*b)->spec().router_dim, 6);
  const at::Tensor& full = (*a)->weights().at("router_proj");  // [H, 8]
  const at::Tensor& cut = (*b)->weights().at("router_proj");   // [2, H, 6]
  ASSERT_EQ(cut.sizes().vec(), (std::vector<int64_t>{2, config_.hidden_size, 6}));
  for (size_t l = 0; l < keep.size(); ++l)
    for (size_t j = 0; j < keep[l].size(); ++j)
      EXPECT_TRUE(at::equal(cut[static_cast<int64_t>(l)].select(1, static_cast<int64_t>(j)), full.select(1, keep[l][j])));
  // The pruned model loads with its pooler and embeds; so does int8 and SSMoE routing on it.
  LoadOptions q8;
  ASSERT_TRUE(kWeightQuants.Parse("int8").ok());
  q8.format.quant = *kWeightQuants.Parse("int8");
  for (const LoadOptions& lo : {LoadOptions{}, q8}) {
    auto m = MoeModel::LoadDir(dir_ / "p", lo);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ForwardOptions fo;
    fo.hs_pooling = HsPooling::kTrained;
    auto out = (*m)->Forward({{3, 4, 5}}, fo);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->router_logits.size(2), 6);
    auto policy = RoutingPolicy::Parse("ssmoe");
    ASSERT_TRUE(policy.ok());
    test::TempDir cache;
    ASSERT_TRUE((*m)->SetRouting(*policy, cache.path()).ok());
    EXPECT_TRUE((*m)->Forward({{3, 4, 5}}, fo).ok());
  }
}

TEST(PruningRules, SpectralCoverPicksWhatTheHandDerivationPicks) {
  // Centroids e0 = (1, 0), e1 = (0.99, 0.14), e2 = (0, 1): e1 covers both
  // neighbours best, then e2 adds the most cover (0.86) -> {1, 2}.
  at::Tensor c = at::tensor({1.0, 0.0, 0.99, 0.14, 0.0, 1.0}, at::kDouble).view({3, 2});
  EXPECT_EQ(CoverExperts(c, {1, 1, 1}, 2), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(CoverExperts(c, {1, 1, 1}, 1), (std::vector<int64_t>{1}));
  // Weighted by usage: with e2 ten times heavier, keeping e2 gains
  // 1 + 1.14 + 10 * 2 = 22.1 against e1's 1.99 + 2 + 10 * 1.14 = 15.4.
  EXPECT_EQ(CoverExperts(c, {1, 1, 10}, 1), (std::vector<int64_t>{2}));
}

TEST_F(Pruning, BadInputIsAnErrorAndWritesNothing) {
  auto model = MoeModel::LoadDir(dir_ / "full");
  ASSERT_TRUE(model.ok());
  ExpertUsage none;
  EXPECT_FALSE(ChooseExperts(**model, none, 0, PruneRule::kRandom).ok());
  EXPECT_FALSE(ChooseExperts(**model, none, 9, PruneRule::kRandom).ok());
  EXPECT_FALSE(ChooseExperts(**model, none, 3, PruneRule::kRandom).ok());  // below top-k (4)
  EXPECT_FALSE(ChooseExperts(**model, none, 6, PruneRule::kUsage).ok());   // usage without calibration
  EXPECT_FALSE(ParsePruneRule("magnitude").ok());
  auto random = ChooseExperts(**model, none, 5, PruneRule::kRandom, 7);
  ASSERT_TRUE(random.ok());
  for (const auto& k : *random) {
    EXPECT_EQ(k.size(), 5u);
    EXPECT_TRUE(std::is_sorted(k.begin(), k.end()));
  }
  for (const auto& keep : std::vector<std::vector<std::vector<int64_t>>>{
           {{0, 1, 2, 3, 4}},                        // one layer of two
           {{0, 1, 2, 3, 4}, {0, 1, 2, 3}},          // different counts
           {{0, 1, 2, 3, 9}, {0, 1, 2, 3, 4}},       // out of range
           {{0, 1, 2, 3, 3}, {0, 1, 2, 3, 4}},       // twice
           {{0, 1, 2}, {0, 1, 2}}}) {                // below top-k
    EXPECT_EQ(WritePrunedCheckpoint(dir_ / "full", keep, dir_ / "bad", "explicit").code(), Status::Code::kInvalidArgument);
    EXPECT_FALSE(fs::exists(dir_ / "bad"));
  }
  fs::create_directories(dir_ / "taken");
  EXPECT_FALSE(WritePrunedCheckpoint(dir_ / "full", AllExperts(), dir_ / "taken", "explicit").ok());
  EXPECT_TRUE(fs::is_empty(dir_ / "taken"));
}

TEST_F(Pruning, CollectionsOfTheFullModelAreRefusedByAPrunedOne) {
  ASSERT_TRUE(WritePrunedCheckpoint(dir_ / "full", std::vector<std::vector<int64_t>>(2, {0, 1, 2, 3, 4, 5}), dir_ / "p", "explicit").ok());
  EmbeddingSpec full, pruned;
  full.model_dir = dir_ / "full";
  pruned.model_dir = dir_ / "p";
  auto a = EmbeddingSetup::Load(full), b = EmbeddingSetup::Load(pruned);
  ASSERT_TRUE(a.ok() && b.ok());
  const Status s = (*b)->CheckMatches((*a)->InfoJson());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("experts: collection \"8 routed experts\", now \"6 of 8 routed experts"), std::string::npos) << s.message();
  EXPECT_TRUE((*a)->CheckMatches((*a)->InfoJson()).ok());
}

TEST_F(Pruning, TheCliRefusesBadInputWithAMessageAndWritesNothing) {
  const std::string out = dir_ / "cli-out";
  auto prune = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = {test::Binary(), "model", "prune", "--model", dir_ / "full", "--out", out};
    a.insert(a.end(), extra.begin(), extra.end());
    return test::Run(a);
  };
  for (const auto& [flags, needle] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--keep", "0", "--by", "random"}, "--keep must be"},
           {{"--keep", "9", "--by", "random"}, "keep must be between 1 and the 8"},
           {{"--keep", "1.5", "--by", "random"}, "at most 1"},
           {{"--keep", "0.75", "--by", "magnitude"}, "unknown pruning rule"},
           {{"--keep", "0.75", "--by", "usage"}, "needs --calib"},
           {{"--experts", R"({"0": [0,1,2,3,4,5], "1": [0,1,2,3,4,5], "5": [1]})"}, "no layer '5'"}}) {
    auto r = prune(flags);
    EXPECT_NE(r.exit_code, 0) << flags[1];
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
  // A layer that is not a MoE layer (DeepSeekMoE's first layer is dense).
  RandomCheckpointOptions o;
  ASSERT_TRUE(WriteRandomCheckpoint(test::Data("configs/deepseek-tiny.json"), test::Data("tokenizers/olmoe/tokenizer.json"),
                                    dir_ / "ds", o).ok());
  auto r = test::Run({test::Binary(), "model", "prune", "--model", dir_ / "ds", "--out", out, "--experts",
                      R"({"0": [0,1,2,3], "1": [0,1,2,3], "2": [0,1,2,3]})"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("layer 0 is not a MoE layer"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  // A good run prints what it kept; the shared experts stay.
  r = test::Run({test::Binary(), "model", "prune", "--model", dir_ / "ds", "--out", out, "--keep", "4", "--by", "spectral"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["experts_after"], 4);
  auto pruned = MoeModel::LoadDir(out);
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_EQ((*pruned)->config().num_experts, 4);
  EXPECT_GT((*pruned)->config().shared_intermediate, 0);
}

}  // namespace
}  // namespace moeedb
