// The embedder: prompts exactly as the reference builds them, batch
// invariance (a text alone or inside any padded batch gives the same
// vectors), read-outs per family, and input errors.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/embed/embed_workers.h"
#include "engine/embed/embedder.h"
#include "engine/model/model.h"
#include "engine/model/moe_block.h"
#include "engine/kernels/bf16_gemm.h"
#include "engine/kernels/int8_gemm.h"
#include "engine/kernels/panel_gemm.h"
#include "engine/model/random_checkpoint.h"
#include "engine/model/routing_policy.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

TEST(Prompt, PromptEolIsTheReferenceString) {
  auto eol = FindPrompt("prompteol");
  ASSERT_TRUE(eol.ok());
  EXPECT_EQ(ApplyPrompt(*eol, "A man is playing a flute"),
            "This sentence : \"A man is playing a flute.\" means in one word:\"");
  // Ends in a quote: no period; double quotes become single; '_' becomes ' '.
  EXPECT_EQ(ApplyPrompt(*eol, "He said \"hi\""), "This sentence : \"He said 'hi'\" means in one word:\"");
  EXPECT_EQ(ApplyPrompt(*eol, "snake_case?"), "This sentence : \"snake case?\" means in one word:\"");
  auto none = FindPrompt("none");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(ApplyPrompt(*none, "  hello  "), "\"  hello  .\"");
  // The GritLM instruction ends up inside the quotes, as in the reference.
  EXPECT_EQ(ApplyPrompt(*eol, "x", GritLmInstruction("Retrieve semantically similar text.")),
            "This sentence : \"<|user|>\nRetrieve semantically similar text.\n<|embed|>\nx.\" means in one word:\"");
  EXPECT_FALSE(FindPrompt("nope").ok());
  EXPECT_EQ(PromptTemplates().size(), 11u);
}

// One tiny OLMoE-shaped model with the real OLMoE tokenizer, shared by the tests.
class TinyOlmoe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    RandomCheckpointOptions opt;
    opt.seed = 7;
    ASSERT_TRUE(WriteRandomCheckpoint(test::Data("configs/olmoe-tiny.json"),
                                      test::Data("tokenizers/olmoe/tokenizer.json"), dir_->path(), opt)
                    .ok());
    auto m = MoeModel::LoadDir(dir_->path());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(m).value().release();
    auto t = BpeTokenizer::FromFile(dir_->path() + "/tokenizer.json");
    ASSERT_TRUE(t.ok());
    tok_ = std::move(t).value().release();
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete model_;
    delete dir_;
  }
  static test::TempDir* dir_;
  static MoeModel* model_;
  static BpeTokenizer* tok_;
};
test::TempDir* TinyOlmoe::dir_ = nullptr;
MoeModel* TinyOlmoe::model_ = nullptr;
BpeTokenizer* TinyOlmoe::tok_ = nullptr;

const std::vector<std::string> kTexts = {
    "A man is playing a flute.",
    "Two dogs run across a snowy field while a child watches from the porch, laughing.",
    "Hi",
    "The quick brown fox jumps over the lazy dog; the dog does not react at all, being very lazy indeed.",
    "Stock markets fell sharply on Tuesday.",
};

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) ab += a[i] * b[i], aa += a[i] * a[i], bb += b[i] * b[i];
  return a.size() == b.size() && aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0;
}

double MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::abs(double(a[i]) - double(b[i])));
  return m;
}

TEST_F(TinyOlmoe, BatchInvariance) {
  EmbedderOptions whole;  // every text in one padded batch
  whole.batch_tokens = 1 << 20;
  EmbedderOptions alone = whole;  // one text per forward pass
  alone.batch_tokens = 1;
  EmbedderOptions mixed = whole;  // batches of various compositions
  mixed.batch_tokens = 64;
  auto a = Embedder(model_, tok_, alone).EmbedTexts(kTexts);
  auto b = Embedder(model_, tok_, whole).EmbedTexts(kTexts);
  auto c = Embedder(model_, tok_, mixed).EmbedTexts(kTexts);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  for (size_t i = 0; i < kTexts.size(); ++i) {
    EXPECT_LT(MaxDiff((*a)[i].hs, (*b)[i].hs), 1e-5) << i;
    EXPECT_LT(MaxDiff((*a)[i].rw, (*b)[i].rw), 1e-5) << i;
    EXPECT_LT(MaxDiff((*a)[i].hs, (*c)[i].hs), 1e-5) << i;
    EXPECT_LT(MaxDiff((*a)[i].rw, (*c)[i].rw), 1e-5) << i;
    EXPECT_EQ((*a)[i].tokens, (*b)[i].tokens);
  }
  // Different texts give different vectors (the check above is not vacuous).
  EXPECT_GT(MaxDiff((*a)[0].hs, (*a)[1].hs), 1e-3);
  EXPECT_GT(MaxDiff((*a)[0].rw, (*a)[1].rw), 1e-3);
}

// EmbedWorkers splits a call's inputs across worker threads: whatever the
// split, every input gets the vectors the embedder gives it in one call, in
// input order; bad ids fail the call with the input's index.
TEST_F(TinyOlmoe, EmbedWorkersGiveTheEmbedderVectorsInInputOrder) {
  const Embedder embedder(model_, tok_, EmbedderOptions{});
  std::vector<std::vector<int32_t>> ids;
  for (const auto& t : kTexts) ids.push_back(embedder.Tokenize(t).value());
  for (const auto& t : kTexts) ids.push_back(embedder.Tokenize(t + " and more.").value());
  auto alone = embedder.EmbedIds(ids);
  ASSERT_TRUE(alone.ok());
  for (int workers : {1, 2, 3}) {
    EmbedWorkers w(&embedder, workers, 1);
    EXPECT_EQ(w.workers(), workers);
    for (size_t n : {size_t(0), size_t(1), size_t(2), ids.size()}) {
      std::vector<std::vector<int32_t>> some(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
      auto got = w.Embed(some);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_EQ(got->size(), n);
      for (size_t i = 0; i < n; ++i) {
        EXPECT_LT(MaxDiff((*got)[i].hs, (*alone)[i].hs), 1e-5) << workers << " workers, input " << i;
        EXPECT_LT(MaxDiff((*got)[i].rw, (*alone)[i].rw), 1e-5) << workers << " workers, input " << i;
        EXPECT_EQ((*got)[i].tokens, (*alone)[i].tokens);
      }
    }
    auto bad = ids;
    bad[7] = {1, static_cast<int32_t>(model_->config().vocab_size)};
    auto r = w.Embed(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("input 7"), std::string::npos) << r.status().message();
    EXPECT_GT(w.busy_seconds(), 0.0);
  }
}

// kTexts embedded in one forward with `model`'s experts run as `d` under the
// routing `spec`.
Result<std::vector<Embedding>> EmbedWithDispatch(MoeModel* model, const BpeTokenizer* tok, const char* spec,
                                                 ExpertDispatch d) {
  auto policy = RoutingPolicy::Parse(spec);
  if (!policy.ok()) return policy.status();
  if (auto set = model->SetRouting(*policy); !set.ok()) return set.status();
  model->set_expert_dispatch(d);
  EmbedderOptions o;
  o.batch_tokens = 1 << 20;
  return Embedder(model, tok, o).EmbedTexts(kTexts);
}

// hs and rw of every text within `tolerance` of the reference's.
void ExpectSameVectors(const std::vector<Embedding>& want, const std::vector<Embedding>& got, double tolerance,
                       const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_LT(MaxDiff(want[i].hs, got[i].hs), tolerance) << what << " " << i;
    EXPECT_LT(MaxDiff(want[i].rw, got[i].rw), tolerance) << what << " " << i;
  }
}

// The two ways of running the experts (per-expert GEMMs, padded batched
// GEMMs) compute the same thing, for top-k and top-1 routing.
TEST_F(TinyOlmoe, ExpertDispatchPathsAgree) {
  ASSERT_TRUE(model_->MoeBlocks()[0]->has_packed_experts() || !PanelGemmAvailable());
  for (const char* spec : {"learned", "top1"}) {
    auto loop = EmbedWithDispatch(model_, tok_, spec, ExpertDispatch::kLoop);
    auto batched = EmbedWithDispatch(model_, tok_, spec, ExpertDispatch::kBatched);
    auto grouped = EmbedWithDispatch(model_, tok_, spec, ExpertDispatch::kGrouped);
    auto packed = EmbedWithDispatch(model_, tok_, spec, ExpertDispatch::kPacked);
    ASSERT_TRUE(loop.ok() && batched.ok() && grouped.ok() && packed.ok());
    ExpectSameVectors(*loop, *packed, 1e-5, std::string(spec) + " packed");
    ExpectSameVectors(*loop, *batched, 1e-5, std::string(spec) + " batched");
    ExpectSameVectors(*loop, *grouped, 1e-5, std::string(spec) + " grouped");
  }
  model_->set_expert_dispatch(ExpertDispatch::kAuto);
  ASSERT_TRUE(model_->SetRouting(RoutingPolicy{}).ok());
}

// The packed path runs the tokens a window of (token, expert) pairs at a
// time (moe_block.h): windows of one token (top-4) or four (top-1) give the
// same bits as one window over every token, in f32 and int8.
TEST_F(TinyOlmoe, PackedExpertWindowsKeepTheBits) {
  LoadOptions lo;
  lo.format = {ComputeDtype::kF32, WeightQuant::kInt8};
  auto int8 = MoeModel::LoadDir(dir_->path(), lo);
  ASSERT_TRUE(int8.ok()) << int8.status().ToString();
  // The packed path runs where its kernels do (elsewhere kPacked falls back).
  ASSERT_TRUE(model_->MoeBlocks()[0]->has_packed_experts() || !PanelGemmAvailable());
  ASSERT_EQ(int8->get()->MoeBlocks()[0]->has_int8_experts(), Int8GemmAvailable());
  for (MoeModel* model : {model_, int8->get()}) {
    for (const char* spec : {"learned", "top1"}) {
      auto whole = EmbedWithDispatch(model, tok_, spec, ExpertDispatch::kPacked);
      model->set_expert_window_pairs(4);
      auto windows = EmbedWithDispatch(model, tok_, spec, ExpertDispatch::kPacked);
      model->set_expert_window_pairs(MoeBlock::kExpertWindowPairs);
      ASSERT_TRUE(whole.ok() && windows.ok());
      ASSERT_EQ(whole->size(), windows->size());
      for (size_t i = 0; i < whole->size(); ++i) {
        EXPECT_EQ((*whole)[i].hs, (*windows)[i].hs) << spec << " " << i;
        EXPECT_EQ((*whole)[i].rw, (*windows)[i].rw) << spec << " " << i;
      }
    }
  }
  model_->set_expert_dispatch(ExpertDispatch::kAuto);
  ASSERT_TRUE(model_->SetRouting(RoutingPolicy{}).ok());
}

// f32 experts larger than the packed copy's limit (1 MB a matrix) are kept
// in 16-column panels only where the panel kernel runs (AVX2 and FMA;
// linear_weight.h; elsewhere they stay in place for BLAS): the packed dispatch runs them
// on the panel kernel, the per-expert loop through LinearWeight::Apply on the
// same panels, and both compute what the other does.
TEST_F(TinyOlmoe, LargeFloatExpertsArePackedOnlyAndAgreeWithTheLoop) {
  test::TempDir dir;
  std::ifstream in(test::Data("configs/olmoe-tiny.json"));
  nlohmann::json cfg = nlohmann::json::parse(in);
  cfg["intermediate_size"] = 4096;
  const std::string config = dir.path() + "/wide.json";
  std::ofstream(config) << cfg.dump();
  RandomCheckpointOptions opt;
  opt.seed = 11;
  opt.stddev = 0.05;
  ASSERT_TRUE(WriteRandomCheckpoint(config, test::Data("tokenizers/olmoe/tokenizer.json"), dir.path() + "/m", opt).ok());
  auto m = MoeModel::LoadDir(dir.path() + "/m");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  MoeModel* model = m->get();
  const bool packed_only = PanelGemmAvailable();
  EXPECT_EQ(model->MoeBlocks()[0]->has_packed_experts(), packed_only);
  EXPECT_EQ(model->MoeBlocks()[0]->has_float_row_experts(), RowsGemmAvailable() && !packed_only);
  for (const char* spec : {"learned", "top1"}) {
    auto loop = EmbedWithDispatch(model, tok_, spec, ExpertDispatch::kLoop);
    auto packed = EmbedWithDispatch(model, tok_, spec, ExpertDispatch::kPacked);
    auto batched = EmbedWithDispatch(model, tok_, spec, ExpertDispatch::kBatched);  // Dense(): the panels unpacked
    ASSERT_TRUE(loop.ok() && packed.ok() && batched.ok());
    ExpectSameVectors(*loop, *packed, 1e-4, std::string(spec) + " packed experts");
    ExpectSameVectors(*batched, *packed, 1e-4, std::string(spec) + " batched experts");
  }
}

// With int8 weights multiplied in int8 (VNNI CPUs), the packed dispatch runs
// the experts through the int8 GEMM, one expert per thread; it computes what
// the per-expert loop computes (the same quantised rows and products; only
// the SwiGLU and combine code differ).
TEST_F(TinyOlmoe, Int8ExpertsTakeThePackedPathAndAgreeWithTheLoop) {
  LoadOptions lo;
  lo.format = {ComputeDtype::kF32, WeightQuant::kInt8};
  auto m = MoeModel::LoadDir(dir_->path(), lo);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  MoeModel* model = m->get();
  EXPECT_EQ(model->MoeBlocks()[0]->has_int8_experts(), Int8GemmAvailable());
  for (const char* spec : {"learned", "top1"}) {
    auto loop = EmbedWithDispatch(model, tok_, spec, ExpertDispatch::kLoop);
    auto packed = EmbedWithDispatch(model, tok_, spec, ExpertDispatch::kPacked);
    ASSERT_TRUE(loop.ok() && packed.ok());
    ExpectSameVectors(*loop, *packed, 1e-4, std::string(spec) + " int8 packed");
  }
}

// With bf16 weights the experts are kept as bf16 panels and the packed
// dispatch runs them wherever the bf16 panel kernel runs (bf16_gemm.h): under
// bf16 compute, and under float32 compute (no fast bf16 compute: AVX2) on a
// widening path; against the per-expert loop, which rounds each GEMM's
// output to bf16 under bf16 compute where the packed path keeps float32,
// they agree to bf16 precision. Elsewhere (MOEEDB_BF16_GEMM=off) the experts
// stay oneDNN's (or ATen's) and the packed dispatch is not taken.
TEST_F(TinyOlmoe, Bf16ExpertsTakeThePackedPathAndAgreeWithTheLoop) {
  LoadOptions lo;
  lo.format = {ComputeDtype::kBF16, WeightQuant::kNone};
  auto m = MoeModel::LoadDir(dir_->path(), lo);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  MoeModel* model = m->get();
  const bool bf16_compute = model->compute_dtype() == ComputeDtype::kBF16;
  EXPECT_EQ(model->MoeBlocks()[0]->has_bf16_experts(), Bf16GemmAvailable() && (bf16_compute || Bf16GemmWidens()));
  for (const char* spec : {"learned", "top1"}) {
    auto loop = EmbedWithDispatch(model, tok_, spec, ExpertDispatch::kLoop);
    auto packed = EmbedWithDispatch(model, tok_, spec, ExpertDispatch::kPacked);
    ASSERT_TRUE(loop.ok() && packed.ok());
    for (size_t i = 0; i < loop->size(); ++i) {
      EXPECT_GT(Cosine((*loop)[i].hs, (*packed)[i].hs), 0.999) << spec << " " << i;
      EXPECT_GT(Cosine((*loop)[i].rw, (*packed)[i].rw), 0.999) << spec << " " << i;
    }
  }
}

TEST_F(TinyOlmoe, OutputsHaveTheMoeeShapesAndPromptTokens) {
  Embedder e(model_, tok_, EmbedderOptions{});
  auto out = e.EmbedTexts({"A man is playing a flute."});
  ASSERT_TRUE(out.ok());
  const ModelConfig& c = model_->config();
  EXPECT_EQ((*out)[0].hs.size(), static_cast<size_t>(c.hidden_size));
  EXPECT_EQ((*out)[0].rw.size(), static_cast<size_t>(c.num_layers * c.num_experts));
  auto ids = tok_->Encode("This sentence : \"A man is playing a flute.\" means in one word:\"", true);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ((*out)[0].tokens, static_cast<int64_t>(ids->size()));
  // RW is the raw router logits of the last token, layer by layer.
  auto fo = model_->Forward({*ids});
  ASSERT_TRUE(fo.ok());
  at::Tensor rw = fo->router_logits.reshape({-1}).contiguous();
  std::vector<float> expect(rw.data_ptr<float>(), rw.data_ptr<float>() + rw.numel());
  EXPECT_LT(MaxDiff((*out)[0].rw, expect), 1e-6);
}

// TEI's /embed_all: every token's final-normed hidden state. The last row is
// the HS the last-token-only path computes on its own; a text's states do not
// depend on the texts batched with it; mean pooling is their mean.
TEST_F(TinyOlmoe, TokenStatesAreEachTokensFinalNormedState) {
  EmbedderOptions batched;
  batched.batch_tokens = 1 << 20;
  const Embedder e(model_, tok_, batched);
  auto ids = e.TokenizeAll(kTexts);
  ASSERT_TRUE(ids.ok());
  auto plain = e.EmbedIds(*ids);
  auto with = e.EmbedIds(*ids, true);
  ASSERT_TRUE(plain.ok() && with.ok());
  const size_t H = static_cast<size_t>(model_->config().hidden_size);
  EmbedderOptions mean = batched;
  mean.hs_pooling = HsPooling::kMean;
  auto pooled = Embedder(model_, tok_, mean).EmbedIds(*ids);
  ASSERT_TRUE(pooled.ok());
  for (size_t i = 0; i < kTexts.size(); ++i) {
    const Embedding& w = (*with)[i];
    EXPECT_TRUE((*plain)[i].token_states.empty());
    ASSERT_EQ(w.token_states.size(), static_cast<size_t>(w.tokens) * H) << i;
    const std::vector<float> last(w.token_states.end() - H, w.token_states.end());
    EXPECT_LT(MaxDiff(last, (*plain)[i].hs), 1e-5) << i;
    EXPECT_LT(MaxDiff(w.rw, (*plain)[i].rw), 1e-5) << i;
    std::vector<float> avg(H, 0.0f);
    for (int64_t t = 0; t < w.tokens; ++t)
      for (size_t h = 0; h < H; ++h) avg[h] += w.token_states[t * H + h] / static_cast<float>(w.tokens);
    EXPECT_LT(MaxDiff(avg, (*pooled)[i].hs), 1e-5) << i;
    auto alone = e.EmbedIds({(*ids)[i]}, true);
    ASSERT_TRUE(alone.ok());
    EXPECT_LT(MaxDiff((*alone)[0].token_states, w.token_states), 1e-5) << i;
  }
  // Tokens differ from one another (the checks above are not vacuous).
  const auto& s = (*with)[0].token_states;
  EXPECT_GT(MaxDiff(std::vector<float>(s.begin(), s.begin() + H), std::vector<float>(s.begin() + H, s.begin() + 2 * H)), 1e-3);
}

TEST_F(TinyOlmoe, BadInputsAreErrors) {
  Embedder e(model_, tok_, EmbedderOptions{});
  auto empty = e.EmbedTexts({"fine", ""});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("input 1: empty text"), std::string::npos) << empty.status().message();
  EXPECT_FALSE(e.EmbedTexts({" \t "}).ok());
  auto bad = e.EmbedTexts({"ok", "bad \xff utf8"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("invalid UTF-8"), std::string::npos);
  EXPECT_FALSE(e.EmbedIds({{1, 2, 50304}}).ok());  // id outside the vocabulary
  EXPECT_FALSE(e.EmbedIds({{}}).ok());
  EXPECT_FALSE(e.EmbedIds({{-1}}).ok());
}

// Family-table rows without HF fixtures: they load from the random writer's
// checkpoints and honour their family's read-out and layer rules.
TEST(Families, DeepSeekReadsProbabilitiesOfMoeLayersOnly) {
  test::TempDir dir;
  RandomCheckpointOptions opt;
  opt.seed = 3;
  ASSERT_TRUE(WriteRandomCheckpoint(test::Data("configs/deepseek-tiny.json"), "", dir.path(), opt).ok());
  auto m = MoeModel::LoadDir(dir.path());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->config().num_moe_layers(), 2);  // layer 0 is dense
  EXPECT_EQ((*m)->config().shared_intermediate, 32);
  auto out = Embedder(m->get(), nullptr, EmbedderOptions{}).EmbedIds({{1, 2, 3}, {4, 5}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ((*out)[0].rw.size(), 16u);
  for (int layer = 0; layer < 2; ++layer) {
    double sum = 0;
    for (int e = 0; e < 8; ++e) sum += (*out)[0].rw[layer * 8 + e];
    EXPECT_NEAR(sum, 1.0, 1e-5);  // softmax over the routed experts
  }
}

TEST(Families, Qwen3PerHeadQkNormDenseLayersAndTiedEmbeddings) {
  test::TempDir dir;
  RandomCheckpointOptions opt;
  opt.seed = 5;
  opt.layout = ExpertLayout::kPacked;
  ASSERT_TRUE(WriteRandomCheckpoint(test::Data("configs/qwen3-moe-tiny.json"), "", dir.path(), opt).ok());
  auto m = MoeModel::LoadDir(dir.path());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->config().num_moe_layers(), 2);  // mlp_only_layers = [1]
  ForwardOptions fo;
  fo.want_logits = true;
  auto out = (*m)->Forward({{1, 2, 3}}, fo);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->router_logits.size(1), 2);
  EXPECT_EQ(out->logits.size(2), 300);
  EXPECT_TRUE(at::isfinite(out->logits).all().item<bool>());
}

}  // namespace
}  // namespace moeedb
