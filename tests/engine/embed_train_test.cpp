// The embedding trainer: the engine's HsPooling::kTrained against the
// plain-loop pooler (pooler_reference.h) applied to the engine's own
// per-layer states (read through its taps), and the trainer (learns,
// deterministic, resumes to the same bytes, refuses bad data).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "engine/model/model.h"
#include "engine/model/model_defaults.h"
#include "engine/io/safetensors.h"
#include "engine/io/tensor_from_view.h"
#include "engine/kernels/tensor_ops.h"
#include "engine/train/embed_trainer.h"
#include "engine/train/lm_trainer.h"
#include "engine/train/ridge_map.h"
#include "engine/model/trained_pooler.h"
#include "tests/engine/pooler_reference.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

namespace fs = std::filesystem;
using namespace test;  // the pooler reference (pooler_reference.h)

// A token stream of "topics": sentence i draws its tokens from topic i % 4,
// so sentences of one topic are similar and others are not.
struct Synthetic {
  EmbedTrainData data;
  static Synthetic Make(int64_t out_dim) {
    Synthetic s;
    std::mt19937 rng(5);
    auto sentence = [&](int topic) {
      std::vector<int32_t> ids;
      const int len = 4 + static_cast<int>(rng() % 8);
      for (int t = 0; t < len; ++t) ids.push_back(2 + topic * 15 + static_cast<int32_t>(rng() % 15));
      return ids;
    };
    for (int i = 0; i < 80; ++i) s.data.sentences.push_back(sentence(i % 4));
    for (int i = 0; i + 4 < 60; ++i) s.data.pairs.push_back({i, i + 4, (i + 1) % 60, -1, i % 2});
    for (int i = 0; i < 40; ++i) s.data.scored.push_back({i, (i * 7 + 3) % 60, (i % 4) == ((i * 7 + 3) % 60) % 4 ? 5.0f : 0.0f});
    for (int i = 60; i < 76; ++i)
      for (int j : {i + 1, i + 4}) s.data.validation.push_back({i, j, (i % 4) == (j % 4) ? 5.0f : 0.0f});
    s.data.teacher_dim = out_dim;
    s.data.teacher_row.assign(s.data.sentences.size(), -1);
    for (int i = 0; i < 40; ++i) {  // the teacher knows the topics
      s.data.teacher_row[i] = i;
      for (int64_t d = 0; d < out_dim; ++d) s.data.teacher.push_back(d == i % 4 ? 1.0f : 0.0f);
    }
    return s;
  }
};

class EmbedTrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string config = dir_ / "config.json";
    test::WriteFile(config, R"({"model_type":"olmoe","vocab_size":64,"hidden_size":32,"intermediate_size":48,
      "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":4,"num_experts":4,
      "num_experts_per_tok":2,"norm_topk_prob":false,"rms_norm_eps":1e-5,"rope_theta":10000.0,
      "tie_word_embeddings":true,"initializer_range":0.1,"pad_token_id":1})");
    lm_ = dir_ / "lm";
    LmTrainOptions lo;
    lo.out_dir = lm_;
    lo.seq_len = 16;
    lo.batch_size = 2;
    lo.steps = 2;
    lo.warmup_steps = 1;
    lo.threads = 1;
    lo.out_dtype = DType::kF32;
    std::vector<int32_t> stream;
    for (int i = 0; i < 400; ++i) stream.push_back(2 + (i * 7) % 60);
    ASSERT_TRUE(TrainLanguageModel(config, stream, stream, lo).ok());
  }
  EmbedTrainOptions Options(const std::string& out, bool read_rw = true) const {
    EmbedTrainOptions o;
    o.model_dir = lm_;
    o.out_dir = out;
    o.seed = 3;
    o.steps = 30;
    o.warmup_steps = 3;
    o.pairs_per_step = 8;
    o.scored_per_step = 8;
    o.chunk_tokens = 64;
    o.lr_lm = 3e-3;
    o.lr_pooler = 1e-2;
    o.checkpoint_every = 10;
    o.eval_every = 1000;
    o.threads = 1;
    o.pooler.hidden = 32;
    o.pooler.layer_rows = 3;
    o.pooler.router_rows = read_rw ? 2 : 0;
    o.pooler.router_dim = read_rw ? 4 : 0;
    o.pooler.latents = 4;
    o.pooler.heads = 4;
    o.pooler.ffn = 16;
    o.pooler.out_dim = 8;
    return o;
  }
  static std::string Bytes(const std::string& dir) {
    return test::ReadFile(dir + "/pooler.safetensors") + test::ReadFile(dir + "/model.safetensors");
  }
  void TrainAndCheckEngine(TokenPooling pooling, int64_t lexical_dim = 0);
  EmbedTrainOptions ExpectTheMatchTermHalvesTheGap(const Synthetic& syn, const std::string& name,
                                                   MatchTarget target,
                                                   const std::function<at::Tensor(const std::string&)>& reference);
  test::TempDir dir_;
  std::string lm_;
};

// Trains a model whose pooler pools tokens as `pooling` says, then checks
// the engine's kTrained HS against the pooler applied to rows rebuilt from
// the engine's taps: final_norm(h_l) and the router logits pooled over the
// tokens (the mean, or weights exp(token_log_weight[id]) normalised per text).
void EmbedTrainerTest::TrainAndCheckEngine(TokenPooling pooling, int64_t lexical_dim) {
  const Synthetic syn = Synthetic::Make(8);
  const std::string out = dir_ / (std::string("emb-") + kTokenPoolings.Name(pooling) + std::to_string(lexical_dim));
  EmbedTrainOptions o = Options(out);
  o.pooler.token_pooling = pooling;
  o.pooler.lexical_dim = lexical_dim;
  if (pooling == TokenPooling::kWeighted) {
    o.pooler.vocab = 64;
    o.token_log_weight_init = LogIdfTokenWeights(syn.data.sentences, 64);
  }
  auto r = TrainEmbedding(syn.data, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->finished);
  EXPECT_GT(r->val_spearman, r->initial_val_spearman);
  EXPECT_GT(r->val_spearman, 0.5);
  auto log = nlohmann::json::parse(test::ReadFile(out + "/embed_training_log.json"));
  double first = -1, last = -1;
  for (const auto& h : log["history"])
    if (h.contains("loss")) (first < 0 ? first : last) = h["loss"].get<double>();
  EXPECT_LT(last, first);

  // The engine loads the pooler with the model; kTrained is the pooler over
  // final_norm(h_l) averaged over tokens (l = embedding output, then each
  // layer) and the router logits averaged over tokens, here rebuilt from the
  // engine's taps and the checkpoint's own tensors.
  auto model = MoeModel::LoadDir(out);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_NE((*model)->pooler(), nullptr);
  EXPECT_EQ((*model)->HsDim(HsPooling::kTrained), 8 + lexical_dim);
  auto file = SafetensorsFile::Open(out + "/model.safetensors");
  ASSERT_TRUE(file.ok());
  at::Tensor embed = *TensorFromView(*(*file)->Find("model.embed_tokens.weight"));
  at::Tensor final_norm = *TensorFromView(*(*file)->Find("model.norm.weight"));
  const std::vector<std::vector<int32_t>> ids = {syn.data.sentences[61], syn.data.sentences[62]};
  std::vector<at::Tensor> layer_out, router;
  (*model)->set_tap([&](std::string_view name, int64_t, const at::Tensor& v) {
    if (name == "layer_out") layer_out.push_back(v.clone());
    if (name == "router_logits") router.push_back(v.clone());
  });
  ForwardOptions fo;
  fo.hs_pooling = HsPooling::kTrained;
  auto f = (*model)->Forward(ids, fo);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(layer_out.size(), 2u);
  const int64_t n0 = static_cast<int64_t>(ids[0].size());
  auto pooler_file = SafetensorsFile::Open(out + "/pooler.safetensors");
  ASSERT_TRUE(pooler_file.ok());
  for (int64_t b = 0; b < 2; ++b) {
    const int64_t off = b == 0 ? 0 : n0, n = static_cast<int64_t>(ids[b].size());
    std::vector<int64_t> id64(ids[b].begin(), ids[b].end());
    // Each token's share of the row, written out by hand: 1/n, or w_t / sum w.
    std::vector<double> share(static_cast<size_t>(n), 1.0 / static_cast<double>(n));
    if (pooling == TokenPooling::kWeighted) {
      const auto log_w = ToVec(*TensorFromView(*(*pooler_file)->Find("token_log_weight")));
      double sum = 0;
      for (int64_t t = 0; t < n; ++t) sum += share[t] = std::exp(log_w[id64[t]]);
      for (auto& x : share) x /= sum;
    }
    at::Tensor share_t = at::tensor(share, at::kDouble).unsqueeze(1);
    auto pool = [&](const at::Tensor& v) { return (v * share_t).sum(0); };
    auto rms = [&](const at::Tensor& x) {  // [n, H] -> pooled final_norm(x), in double
      at::Tensor xd = x.to(at::kDouble);
      return pool(final_norm.to(at::kDouble) * xd * at::rsqrt(xd.pow(2).mean({-1}, true) + 1e-5));
    };
    std::vector<at::Tensor> rows = {rms(embed.index_select(0, at::tensor(id64)))};
    for (const auto& x : layer_out) rows.push_back(rms(x.narrow(0, off, n)));
    std::vector<at::Tensor> rr;
    for (const auto& z : router) rr.push_back(pool(z.narrow(0, off, n).to(at::kDouble)));
    at::Tensor lexical;  // the same token shares over the lexical channel's rows
    if (lexical_dim > 0) {
      at::Tensor table = *TensorFromView(*(*pooler_file)->Find("lexical_embed"));
      lexical = pool(table.index_select(0, at::tensor(id64)).to(at::kDouble)).unsqueeze(0).to(at::kFloat);
    }
    at::Tensor want = PoolerForward((*model)->pooler()->spec(), (*model)->pooler()->weights(),
                                    at::stack(rows).unsqueeze(0).to(at::kFloat), at::stack(rr).unsqueeze(0).to(at::kFloat),
                                    lexical);
    const auto got = ToVec(f->hs[b]), w = ToVec(want[0]);
    ASSERT_EQ(got.size(), static_cast<size_t>(8 + lexical_dim));
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], w[i], 1e-4 * (1 + std::abs(w[i])));
  }
  // Asking for the trained pooler of a model without one is an error, not a silent fallback.
  auto plain = MoeModel::LoadDir(lm_);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)->Forward(ids, fo).status().code(), Status::Code::kInvalidArgument);
}

TEST_F(EmbedTrainerTest, LearnsAndTheEngineRunsTheTrainedPooler) { TrainAndCheckEngine(TokenPooling::kMean); }

TEST_F(EmbedTrainerTest, WeightedTokenPoolingLearnsAndTheEngineRunsIt) { TrainAndCheckEngine(TokenPooling::kWeighted); }

TEST_F(EmbedTrainerTest, TheLexicalChannelLearnsAndTheEngineRunsIt) { TrainAndCheckEngine(TokenPooling::kWeighted, 6); }

TEST(EmbedTrainerIdf, LogIdfTokenWeightsByHand) {
  // 3 sentences; token 2 in all of them, token 3 in one (twice), token 4 in none.
  const std::vector<std::vector<int32_t>> sentences = {{2, 3, 3}, {2}, {2, 5}};
  const auto w = LogIdfTokenWeights(sentences, 6);
  ASSERT_EQ(w.size(), 6u);
  EXPECT_NEAR(w[2], std::log(std::log(4.0 / 4.0) + 1), 1e-6);  // df 3: idf 1, log 0
  EXPECT_NEAR(w[3], std::log(std::log(4.0 / 2.0) + 1), 1e-6);  // df 1 (counted once per sentence)
  EXPECT_NEAR(w[4], std::log(std::log(4.0 / 1.0) + 1), 1e-6);  // df 0: the largest
  EXPECT_GT(w[4], w[3]);
}

TEST_F(EmbedTrainerTest, ASecondStageContinuesTheStartFoldersPooler) {
  const Synthetic syn = Synthetic::Make(8);
  const std::string first = dir_ / "stage1", second = dir_ / "stage2", fresh = dir_ / "fresh";
  EmbedTrainOptions o = Options(first);
  ASSERT_TRUE(TrainEmbedding(syn.data, o).ok());
  // At learning rate 0 the second stage changes nothing: its pooler is the first's.
  EmbedTrainOptions o2 = Options(second);
  o2.model_dir = first;
  o2.steps = 2;
  o2.lr_lm = o2.lr_pooler = 0;
  ASSERT_TRUE(TrainEmbedding(syn.data, o2).ok());
  EXPECT_EQ(test::ReadFile(first + "/pooler.safetensors"), test::ReadFile(second + "/pooler.safetensors"));
  // A second stage that adds a lexical channel continues every other tensor.
  EmbedTrainOptions o4 = o2;
  o4.out_dir = dir_ / "lexical";
  o4.pooler.token_pooling = TokenPooling::kWeighted;
  o4.pooler.vocab = 64;
  o4.pooler.lexical_dim = 4;
  EmbedTrainOptions w1 = Options(dir_ / "weighted");
  w1.pooler = o4.pooler;
  w1.pooler.lexical_dim = 0;
  ASSERT_TRUE(TrainEmbedding(syn.data, w1).ok());
  o4.model_dir = dir_ / "weighted";
  ASSERT_TRUE(TrainEmbedding(syn.data, o4).ok());
  auto p1 = TrainedPooler::LoadDir(dir_ / "weighted"), p4 = TrainedPooler::LoadDir(dir_ / "lexical");
  ASSERT_TRUE(p1.ok() && p4.ok());
  for (const auto& [name, t] : p1.value()->weights()) EXPECT_TRUE(at::equal(t, p4.value()->weights().at(name))) << name;
  EXPECT_EQ(p4.value()->weights().at("lexical_embed").sizes().vec(), (std::vector<int64_t>{64, 4}));
  // A pooler of another spec is not continued: a new one starts.
  EmbedTrainOptions o3 = o2;
  o3.out_dir = fresh;
  o3.pooler.latents = 2;
  ASSERT_TRUE(TrainEmbedding(syn.data, o3).ok());
  auto a = TrainedPooler::LoadDir(first), c = TrainedPooler::LoadDir(fresh);
  ASSERT_TRUE(a.ok() && c.ok());
  EXPECT_FALSE(at::equal(a.value()->weights().at("q"), c.value()->weights().at("q")));
}

TEST_F(EmbedTrainerTest, IsDeterministicAndResumesToTheSameWeights) {
  const Synthetic syn = Synthetic::Make(8);
  const std::string a = dir_ / "a", b = dir_ / "b", c = dir_ / "c";
  ASSERT_TRUE(TrainEmbedding(syn.data, Options(a)).ok());
  ASSERT_TRUE(TrainEmbedding(syn.data, Options(b)).ok());
  EXPECT_EQ(Bytes(a), Bytes(b));
  EmbedTrainOptions first = Options(c);
  first.stop_after = 13;  // between checkpoints
  auto r1 = TrainEmbedding(syn.data, first);
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  EXPECT_FALSE(r1->finished);
  EXPECT_EQ(r1->step, 13);
  EXPECT_FALSE(fs::exists(c + "/pooler.safetensors"));
  auto r2 = TrainEmbedding(syn.data, Options(c));
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_TRUE(r2->finished);
  EXPECT_EQ(Bytes(a), Bytes(c));
  EmbedTrainOptions other = Options(c);
  other.seed = 4;
  EXPECT_EQ(TrainEmbedding(syn.data, other).status().code(), Status::Code::kInvalidArgument);
}

// The trainer driven one step at a time, as a caller outside Run would:
// the same weights as Run's, a reopened run resumes at its checkpoint, and
// the export waits for the schedule's end.
TEST_F(EmbedTrainerTest, StepByStepMatchesRunAndResumesFromItsCheckpoint) {
  const Synthetic syn = Synthetic::Make(8);
  const std::string run = dir_ / "run", steps = dir_ / "steps";
  ASSERT_TRUE(TrainEmbedding(syn.data, Options(run)).ok());
  const EmbedTrainOptions o = Options(steps);
  {
    auto t = EmbedTrainer::Open(syn.data, o);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    for (int i = 0; i < 7; ++i) {
      auto parts = (*t)->Step();
      ASSERT_TRUE(parts.ok()) << parts.status().ToString();
      EXPECT_TRUE(parts->count("loss") && parts->count("nce") && parts->count("lr_scale"));
      EXPECT_TRUE(std::isfinite(parts->at("loss")));
    }
    EXPECT_EQ((*t)->step(), 7);
    EXPECT_EQ((*t)->Export().code(), Status::Code::kInvalidArgument);  // not done yet
    ASSERT_TRUE((*t)->Checkpoint().ok());
    (*t)->Step();  // not checkpointed: a reopened run starts again from step 7
  }
  auto t = EmbedTrainer::Open(syn.data, o);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->step(), 7);
  while ((*t)->step() < o.steps) ASSERT_TRUE((*t)->Step().ok());
  EXPECT_EQ((*t)->Step().status().code(), Status::Code::kInvalidArgument);  // the schedule is done
  auto v = (*t)->Evaluate();
  ASSERT_TRUE(v.ok());
  EXPECT_GT(v->spearman, -1.0);
  ASSERT_TRUE((*t)->Export().ok());
  EXPECT_EQ(Bytes(run), Bytes(steps));
}

// The options' field table: each flag parses into its member, defaults are
// the struct's, and a value outside a field's range is the table's error.
TEST(EmbedTrainOptionsTable, ReadsFlagsIntoTheOptionsWithTheirRules) {
  EmbedTrainOptions o;
  auto flag = [](std::map<std::string, std::string> given) {
    return [given](const std::string& name) -> std::optional<std::string> {
      auto it = given.find(name);
      if (it == given.end()) return std::nullopt;
      return it->second;
    };
  };
  ASSERT_TRUE(spec::ReadFlags(EmbedTrainFields(),
                              flag({{"lr-lm", "1e-4"}, {"bidirectional", "1"}, {"token-pooling", "weighted"},
                                    {"lexical-dim", "512"}, {"rw-pooling", "mean"}, {"side-match-target", "lexical"},
                                    {"distill-weight", "0"}, {"pooler-rw", "off"}, {"steps", "400"}}),
                              &o)
                  .ok());
  EXPECT_DOUBLE_EQ(o.lr_lm, 1e-4);
  EXPECT_FALSE(o.causal);
  EXPECT_EQ(o.pooler.token_pooling, TokenPooling::kWeighted);
  EXPECT_EQ(o.pooler.lexical_dim, 512);
  EXPECT_EQ(o.rw_pooling, RwPooling::kMean);
  EXPECT_EQ(o.side_match_target, MatchTarget::kLexical);
  EXPECT_EQ(o.distill_weight, 0.0);
  EXPECT_FALSE(o.pooler_reads_rw);
  EXPECT_EQ(o.steps, 400);
  EXPECT_DOUBLE_EQ(o.lr_pooler, EmbedTrainOptions{}.lr_pooler);  // untouched: the default
  EmbedTrainOptions bad;
  Status s = spec::ReadFlags(EmbedTrainFields(), flag({{"steps", "0"}}), &bad);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("--steps"), std::string::npos) << s.message();
  EXPECT_FALSE(spec::ReadFlags(EmbedTrainFields(), flag({{"token-pooling", "max"}}), &bad).ok());
  EXPECT_FALSE(spec::ReadFlags(EmbedTrainFields(), flag({{"lr-lm", "fast"}}), &bad).ok());
  // Cross-field rules: Validate.
  EmbedTrainOptions frozen;
  frozen.out_dir = "x";
  frozen.freeze_lm = true;
  frozen.rw_weight = 0.3;
  EXPECT_EQ(frozen.Validate().code(), Status::Code::kInvalidArgument);
  // A fitted pooler takes the model's sizes and the teacher's dimension.
  EmbedTrainOptions fit;
  ModelConfig c;
  c.hidden_size = 32;
  c.num_layers = 2;
  c.num_experts = 4;
  c.vocab_size = 64;
  ASSERT_TRUE(fit.FitPooler(c, 384).ok());
  EXPECT_EQ(fit.pooler.out_dim, 384);
  EXPECT_EQ(fit.pooler.router_rows, 2);
  EXPECT_EQ(fit.pooler.layer_rows, 3);
  fit.pooler.lexical_dim = 8;  // needs weighted token pooling
  EXPECT_FALSE(fit.FitPooler(c, 0).ok());
}

TEST_F(EmbedTrainerTest, FrozenLanguageModelKeepsItsWeights) {
  const Synthetic syn = Synthetic::Make(8);
  const std::string out = dir_ / "frozen";
  EmbedTrainOptions o = Options(out, /*read_rw=*/false);
  o.freeze_lm = true;
  auto r = TrainEmbedding(syn.data, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto before = SafetensorsFile::Open(lm_ + "/model.safetensors");
  auto after = SafetensorsFile::Open(out + "/model.safetensors");
  ASSERT_TRUE(before.ok() && after.ok());
  for (const char* name : {"model.embed_tokens.weight", "model.layers.0.mlp.gate.weight"}) {
    at::Tensor x = *TensorFromView(*(*before)->Find(name)), y = *TensorFromView(*(*after)->Find(name));
    EXPECT_TRUE(at::allclose(x.to(at::kHalf).to(at::kFloat), y)) << name;
  }
  auto model = MoeModel::LoadDir(out);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->pooler()->spec().router_rows, 0);
}

// Same-topic minus other-topic mean cosine of the 20 held-out sentences
// 60..79 of `syn`, as the engine in `dir` reads them with `fo`: HS, or
// (read_rw) the router logits standardised over the 20, as search does.
double TopicSeparation(const Synthetic& syn, const std::string& dir, const ForwardOptions& fo, bool read_rw) {
  auto model = MoeModel::LoadDir(dir);
  EXPECT_TRUE(model.ok());
  if (!model.ok()) return 0;
  std::vector<std::vector<int32_t>> ids(syn.data.sentences.begin() + 60, syn.data.sentences.begin() + 80);
  auto f = (*model)->Forward(ids, fo);
  EXPECT_TRUE(f.ok());
  if (!f.ok()) return 0;
  at::Tensor v = read_rw ? f->router_logits.reshape({static_cast<int64_t>(ids.size()), -1}).to(at::kDouble)
                         : f->hs.to(at::kDouble);
  if (read_rw) {
    v = v - v.mean(0, true);
    v = v / v.std(0, false, true).clamp_min(1e-6);
  }
  v = v / v.norm(2, {1}, true);
  at::Tensor cos = at::matmul(v, v.t());
  double same = 0, other = 0;
  int n_same = 0, n_other = 0;
  for (int i = 0; i < 20; ++i)
    for (int j = 0; j < 20; ++j) {
      if (i == j) continue;
      const double c = cos[i][j].item<double>();
      if ((60 + i) % 4 == (60 + j) % 4) same += c, ++n_same;
      else other += c, ++n_other;
    }
  return same / n_same - other / n_other;
}

// The RW term trains the routers: after it, the engine's RW vectors (router
// logits at the last token, standardised over the texts as search does)
// separate the synthetic topics better than after the same run without it.
TEST_F(EmbedTrainerTest, TheRwTermTrainsTheRoutersAsASentenceVector) {
  const Synthetic syn = Synthetic::Make(8);
  auto separation = [&](const std::string& dir) { return TopicSeparation(syn, dir, ForwardOptions{}, true); };
  const std::string plain = dir_ / "rw0", trained = dir_ / "rw1";
  EmbedTrainOptions o = Options(plain);
  o.steps = 40;
  ASSERT_TRUE(TrainEmbedding(syn.data, o).ok());
  o.out_dir = trained;
  o.rw_weight = 1.0;
  auto r = TrainEmbedding(syn.data, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto log = nlohmann::json::parse(test::ReadFile(trained + "/embed_training_log.json"));
  bool logged = false;
  for (const auto& h : log["history"]) logged = logged || h.contains("rw_nce");
  EXPECT_TRUE(logged);
  // Measured 1.11 against 0.66 (same-topic minus other-topic mean cosine).
  EXPECT_GT(separation(trained), separation(plain) + 0.2);
  // The routers cannot learn while the model is frozen: refused, not ignored.
  o.out_dir = dir_ / "rw-frozen";
  o.freeze_lm = true;
  EXPECT_EQ(TrainEmbedding(syn.data, o).status().code(), Status::Code::kInvalidArgument);
}

// The side terms train what the engine reads without the pooler: with
// hs_pooling_weight, the training-free HS poolings (last, mean, layers-mean);
// with rw_pooling mean, the token-averaged router logits. Each separates the
// topics more than after the same run without the terms.
TEST_F(EmbedTrainerTest, TheSideTermsTrainTheTrainingFreePoolings) {
  const Synthetic syn = Synthetic::Make(8);
  auto separation = [&](const std::string& dir, HsPooling hs, bool rw_mean, bool read_rw) {
    ForwardOptions fo;
    fo.hs_pooling = hs;
    fo.rw_pooling = rw_mean ? RwPooling::kMean : RwPooling::kLast;
    return TopicSeparation(syn, dir, fo, read_rw);
  };
  const std::string plain = dir_ / "side0", trained = dir_ / "side1";
  EmbedTrainOptions o = Options(plain);
  o.steps = 40;
  ASSERT_TRUE(TrainEmbedding(syn.data, o).ok());
  o.out_dir = trained;
  o.rw_weight = 1.0;
  o.rw_pooling = RwPooling::kMean;
  o.hs_pooling_weight = 1.0;
  auto r = TrainEmbedding(syn.data, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto log = nlohmann::json::parse(test::ReadFile(trained + "/embed_training_log.json"));
  for (const char* term : {"rw_nce", "last_nce", "mean_nce", "layers-mean_nce"}) {
    bool logged = false;
    for (const auto& h : log["history"]) logged = logged || h.contains(term);
    EXPECT_TRUE(logged) << term;
  }
  for (HsPooling hs : {HsPooling::kLast, HsPooling::kMean, HsPooling::kLayersMean}) {
    const double before = separation(plain, hs, false, false), after = separation(trained, hs, false, false);
    std::printf("HS %s: separation %.3f -> %.3f\n", kHsPoolings.Name(hs), before, after);
    EXPECT_GT(after, before + 0.1) << kHsPoolings.Name(hs);
  }
  const double before = separation(plain, HsPooling::kLast, true, true), after = separation(trained, HsPooling::kLast, true, true);
  std::printf("RW mean: separation %.3f -> %.3f\n", before, after);
  EXPECT_GT(after, before + 0.1);
  o.out_dir = dir_ / "side-frozen";
  o.rw_weight = 0;
  o.freeze_lm = true;
  EXPECT_EQ(TrainEmbedding(syn.data, o).status().code(), Status::Code::kInvalidArgument);
}

// Cosines [20, 20] (double) of the held-out sentences 60..79 of `syn` as the
// engine in `dir` reads them with pooling `hs`.
at::Tensor HeldOutCosines(const Synthetic& syn, const std::string& dir, HsPooling hs) {
  auto model = MoeModel::LoadDir(dir);
  EXPECT_TRUE(model.ok());
  if (!model.ok()) return at::eye(20, at::kDouble);
  ForwardOptions fo;
  fo.hs_pooling = hs;
  auto f = (*model)->Forward(std::vector<std::vector<int32_t>>(syn.data.sentences.begin() + 60,
                                                               syn.data.sentences.begin() + 80), fo);
  EXPECT_TRUE(f.ok());
  if (!f.ok()) return at::eye(20, at::kDouble);
  at::Tensor v = f->hs.to(at::kDouble);
  v = v / v.norm(2, {1}, true);
  return at::matmul(v, v.t());
}

// TF-IDF cosines [20, 20] of the same sentences, written out here: term
// counts times idf = ln((1 + N) / (1 + df)) + 1 over all of `syn`'s sentences.
at::Tensor HeldOutTfidfCosines(const Synthetic& syn) {
  const auto& all = syn.data.sentences;
  std::map<int32_t, int> df;
  for (const auto& s : all)
    for (int32_t id : std::set<int32_t>(s.begin(), s.end())) ++df[id];
  std::vector<std::map<int32_t, double>> rows;
  for (int i = 60; i < 80; ++i) {
    std::map<int32_t, double> r;
    for (int32_t id : all[i]) r[id] += std::log((1.0 + all.size()) / (1.0 + df[id])) + 1;
    double norm = 0;
    for (auto& [id, v] : r) norm += v * v;
    for (auto& [id, v] : r) v /= std::sqrt(norm);
    rows.push_back(r);
  }
  at::Tensor cos = at::zeros({20, 20}, at::kDouble);
  for (int i = 0; i < 20; ++i)
    for (int j = 0; j < 20; ++j) {
      double dot = 0;
      for (const auto& [id, x] : rows[i])
        if (auto it = rows[j].find(id); it != rows[j].end()) dot += x * it->second;
      cos[i][j] = dot;
    }
  return cos;
}

// Mean squared difference of two [20, 20] cosine matrices off the diagonal.
double OffDiagonalGap(const at::Tensor& a, const at::Tensor& b) {
  double sum = 0;
  for (int i = 0; i < 20; ++i)
    for (int j = 0; j < 20; ++j)
      if (i != j) sum += std::pow(a[i][j].item<double>() - b[i][j].item<double>(), 2);
  return sum / (20 * 19);
}

// Trains the synthetic task without and then with the match term (weight 20,
// `target`) and expects each training-free pooling's held-out cosines to
// come at least twice as near reference(dir) with it. Returns the options of
// the second run.
EmbedTrainOptions EmbedTrainerTest::ExpectTheMatchTermHalvesTheGap(
    const Synthetic& syn, const std::string& name, MatchTarget target,
    const std::function<at::Tensor(const std::string&)>& reference) {
  const std::string plain = dir_ / (name + "0"), trained = dir_ / (name + "1");
  EmbedTrainOptions o = Options(plain);
  o.steps = 40;
  EXPECT_TRUE(TrainEmbedding(syn.data, o).ok());
  o.out_dir = trained;
  o.side_match_weight = 20;
  o.side_match_target = target;
  auto r = TrainEmbedding(syn.data, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return o;
  const at::Tensor ref_plain = reference(plain), ref_trained = reference(trained);
  for (HsPooling hs : {HsPooling::kLast, HsPooling::kMean, HsPooling::kLayersMean}) {
    const double before = OffDiagonalGap(HeldOutCosines(syn, plain, hs), ref_plain),
                 after = OffDiagonalGap(HeldOutCosines(syn, trained, hs), ref_trained);
    std::printf("HS %s: squared cosine gap to the %s target %.4f -> %.4f\n", kHsPoolings.Name(hs), name.c_str(), before,
                after);
    EXPECT_LT(after, 0.5 * before) << kHsPoolings.Name(hs);
  }
  return o;
}

// side_match_weight pulls each training-free HS pooling's cosines towards
// the pooled vector's: on held-out sentences, each pooling's cosine matrix
// is nearer the trained pooler's than after the same run without the term.
TEST_F(EmbedTrainerTest, TheMatchTermBringsThePoolingsSimilaritiesToThePoolers) {
  const Synthetic syn = Synthetic::Make(8);
  EmbedTrainOptions o = ExpectTheMatchTermHalvesTheGap(
      syn, "pooled", MatchTarget::kPooled,
      [&](const std::string& dir) { return HeldOutCosines(syn, dir, HsPooling::kTrained); });
  auto log = nlohmann::json::parse(test::ReadFile(o.out_dir + "/embed_training_log.json"));
  for (const char* term : {"last_match", "mean_match", "layers-mean_match"}) {
    bool logged = false;
    for (const auto& h : log["history"]) logged = logged || h.contains(term);
    EXPECT_TRUE(logged) << term;
  }
  o.out_dir = dir_ / "match-frozen";
  o.freeze_lm = true;
  EXPECT_EQ(TrainEmbedding(syn.data, o).status().code(), Status::Code::kInvalidArgument);
}

// With the lexical target the match term pulls each training-free pooling's
// cosines towards the texts' TF-IDF cosines instead: on held-out sentences
// each comes nearer them than after the same run without the term.
TEST_F(EmbedTrainerTest, TheLexicalMatchTargetBringsThePoolingsToWordOverlap) {
  const Synthetic syn = Synthetic::Make(8);
  const at::Tensor tfidf = HeldOutTfidfCosines(syn);
  ExpectTheMatchTermHalvesTheGap(syn, "lexical", MatchTarget::kLexical,
                                 [&](const std::string&) { return tfidf; });
}

TEST_F(EmbedTrainerTest, TeacherOnlySentencesAreDrawnOnlyWhenAsked) {
  Synthetic plain = Synthetic::Make(8);
  Synthetic extra = plain;  // sentences 76..79: in no pair, only the teacher knows them
  for (int i = 76; i < 80; ++i) {
    extra.data.teacher_row[i] = static_cast<int32_t>(extra.data.teacher.size() / 8);
    for (int64_t d = 0; d < 8; ++d) extra.data.teacher.push_back(d == i % 4 ? 1.0f : 0.0f);
    extra.data.teacher_only.push_back(i);
  }
  const std::string a = dir_ / "a", b = dir_ / "b", c = dir_ / "c";
  ASSERT_TRUE(TrainEmbedding(plain.data, Options(a)).ok());
  ASSERT_TRUE(TrainEmbedding(extra.data, Options(b)).ok());  // teacher_per_step 0: the same draws
  EXPECT_EQ(Bytes(a), Bytes(b));
  EmbedTrainOptions o = Options(c);
  o.teacher_per_step = 4;
  ASSERT_TRUE(TrainEmbedding(extra.data, o).ok());
  EXPECT_NE(Bytes(a), Bytes(c));
  Synthetic bad = extra;
  bad.data.teacher_only.push_back(50);  // no teacher row
  EXPECT_EQ(TrainEmbedding(bad.data, o).status().code(), Status::Code::kInvalidArgument);
}

TEST_F(EmbedTrainerTest, RefusesInconsistentData) {
  Synthetic syn = Synthetic::Make(8);
  EmbedTrainData bad = syn.data;
  bad.pairs.push_back({0, 999, -1, -1, 0});
  EXPECT_EQ(TrainEmbedding(bad, Options(dir_ / "x")).status().code(), Status::Code::kInvalidArgument);
  bad = syn.data;
  bad.sentences[3] = {70};  // outside the vocabulary of 64
  EXPECT_EQ(TrainEmbedding(bad, Options(dir_ / "x")).status().code(), Status::Code::kInvalidArgument);
  bad = syn.data;
  bad.teacher_dim = 7;  // 40 rows of 8 values are not rows of 7
  EXPECT_EQ(TrainEmbedding(bad, Options(dir_ / "x")).status().code(), Status::Code::kInvalidArgument);
}

// The ridge map against what defines it: an exact linear relation is
// recovered, and with a ridge the objective's gradient vanishes at the map
// (from^T (from W^T - to) + ridge W^T = 0), computed here in double apart.
TEST(RidgeMap, RecoversALinearMapAndZeroesTheRidgeObjectivesGradient) {
  at::manual_seed(11);
  const at::Tensor from = at::randn({200, 6}), map = at::randn({5, 6});
  const at::Tensor to = at::matmul(from, map.t());
  EXPECT_TRUE(at::allclose(embed_train::RidgeMap(from, to, 1e-12), map, 1e-4, 1e-4));
  const at::Tensor noisy = to + 0.3 * at::randn({200, 5});
  const at::Tensor w = embed_train::RidgeMap(noisy.narrow(1, 0, 5), from, 0.05).to(at::kDouble);  // 5 -> 6
  const at::Tensor x = noisy.narrow(1, 0, 5).to(at::kDouble), y = from.to(at::kDouble);
  const double ridge = 0.05 * at::matmul(x.t(), x).diagonal().mean().item<double>();
  const at::Tensor grad = at::matmul(x.t(), at::matmul(x, w.t()) - y) + ridge * w.t();
  EXPECT_LT(grad.abs().max().item<double>(), 1e-3 * ridge);
  EXPECT_GT(w.sub(embed_train::RidgeMap(noisy.narrow(1, 0, 5), from, 1e-12).to(at::kDouble)).abs().max().item<double>(),
            1e-3);  // the ridge changed the answer
}

// A teacher of another dimension (8) than the pooled vector (6): the direct
// term compares them through a projection fitted before the first step and
// trained after, which lowers the term; it lives in the run's state (a
// stopped run resumes to the same bytes) and stays out of the model folder.
TEST_F(EmbedTrainerTest, ATeacherOfAnotherDimensionDistilsThroughAFittedProjection) {
  const Synthetic syn = Synthetic::Make(8);
  auto options = [&](const std::string& out, std::vector<std::string>* log) {
    EmbedTrainOptions o = Options(out);
    o.pooler.out_dim = 6;
    o.distill_weight = 5;
    if (log != nullptr) o.log = [log](const std::string& line) { log->push_back(line); };
    return o;
  };
  std::vector<std::string> log;
  const std::string whole = dir_ / "whole";
  const std::string state_file = whole + "/train_state/projection.safetensors";
  std::string fitted_bytes;
  {
    auto t = EmbedTrainer::Open(syn.data, options(whole, &log));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ASSERT_TRUE((*t)->Checkpoint().ok());  // the projection as fitted, before any step
    fitted_bytes = test::ReadFile(state_file);
    std::vector<double> distill;
    while ((*t)->step() < 30) {
      auto parts = (*t)->Step();
      ASSERT_TRUE(parts.ok()) << parts.status().ToString();
      ASSERT_TRUE(parts->count("distill"));
      distill.push_back(parts->at("distill"));
    }
    const double first = (distill[0] + distill[1] + distill[2]) / 3, last = (distill[27] + distill[28] + distill[29]) / 3;
    EXPECT_LT(last, 0.8 * first) << "first 3 steps " << first << ", last 3 " << last;
    ASSERT_TRUE((*t)->Checkpoint().ok());
    ASSERT_TRUE((*t)->Export().ok());
  }
  bool fitted = false;
  for (const auto& line : log) fitted |= line.find("distillation projection 6 -> 8 fitted on 40 sentences") != std::string::npos;
  EXPECT_TRUE(fitted);
  auto state = SafetensorsFile::Open(state_file);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  ASSERT_NE((*state)->Find("projection"), nullptr);
  EXPECT_EQ((*state)->Find("projection")->shape, (std::vector<int64_t>{8, 6}));
  EXPECT_NE(test::ReadFile(state_file), fitted_bytes);  // trained, not only fitted
  EXPECT_FALSE(fs::exists(whole + "/projection.safetensors"));

  const std::string stopped = dir_ / "stopped";
  EmbedTrainOptions first = options(stopped, nullptr);
  first.stop_after = 13;
  ASSERT_TRUE(TrainEmbedding(syn.data, first).ok());
  auto resumed = TrainEmbedding(syn.data, options(stopped, nullptr));
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_TRUE(resumed->finished);
  EXPECT_EQ(Bytes(whole), Bytes(stopped));
  EXPECT_EQ(test::ReadFile(state_file), test::ReadFile(stopped + "/train_state/projection.safetensors"));
  EmbedTrainData unmatched = syn.data;  // teacher vectors no sentence points to
  unmatched.teacher_row.assign(unmatched.sentences.size(), -1);
  EXPECT_EQ(TrainEmbedding(unmatched, options(dir_ / "unmatched", nullptr)).status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace moeedb
