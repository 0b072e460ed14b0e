// The evaluation harness: metrics against hand-derived values, TF-IDF, the
// CSV and Cranfield readers, the PNG encoder (checked by decoding it here),
// the pooling modes against the model's own intermediate taps, and the eval
// commands end to end on the CI subsets (deterministic, sane).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <nlohmann/json.hpp>

#include "engine/model/model.h"
#include "engine/model/random_checkpoint.h"
#include "eval/datasets.h"
#include "eval/metrics.h"
#include "base/png_plot.h"
#include "eval/tfidf.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

using nlohmann::json;

TEST(EvalMetrics, MatchHandDerivedValues) {
  const std::map<std::string, int> gains = {{"a", 3}, {"b", 1}, {"c", 2}};
  // Ranking: x, a, b. DCG = (2^3-1)/log2(3) + (2^1-1)/log2(4) = 7/1.58496 + 0.5.
  // Ideal: a, c, b = 7/1 + 3/log2(3) + 1/2.
  const double dcg = 7 / std::log2(3.0) + 0.5, idcg = 7 + 3 / std::log2(3.0) + 0.5;
  EXPECT_NEAR(eval::NdcgAt({"x", "a", "b"}, gains, 10), dcg / idcg, 1e-12);
  EXPECT_NEAR(eval::NdcgAt({"a", "c", "b"}, gains, 10), 1.0, 1e-12);
  EXPECT_NEAR(eval::NdcgAt({"x", "a"}, gains, 1), 0.0, 1e-12);
  EXPECT_DOUBLE_EQ(eval::MrrAt({"x", "y", "c"}, gains, 10), 1.0 / 3);
  EXPECT_DOUBLE_EQ(eval::MrrAt({"x", "y", "c"}, gains, 2), 0.0);
  EXPECT_DOUBLE_EQ(eval::RecallAt({"c", "x", "a"}, gains, 100), 2.0 / 3);
  EXPECT_DOUBLE_EQ(eval::RecallAt({"c"}, {}, 100), 0.0);
  // Votes: label 1 twice, label 2 twice; label 2's similarities sum higher.
  EXPECT_EQ(eval::KnnVote({{0.9f, 1}, {0.85f, 2}, {0.8f, 2}, {0.1f, 1}}, 4), 2);
  EXPECT_EQ(eval::KnnVote({{0.9f, 1}, {0.85f, 2}, {0.8f, 2}, {0.1f, 1}}, 1), 1);
  EXPECT_EQ(eval::KnnVote({{0.5f, 3}, {0.4f, 4}, {0.4f, 4}}, 3), 4);
}

TEST(EvalTfIdf, WeightsAndCosines) {
  // 3 documents; "cat" in 2 of them: idf = ln(4/3) + 1; "dog" in 1: ln(4/2) + 1.
  eval::TfIdf t({"the cat", "the cat sat", "a dog"});
  auto v = t.Vector("cat cat dog");
  ASSERT_EQ(v.size(), 2u);
  const double wc = (1 + std::log(2.0)) * (std::log(4.0 / 3) + 1), wd = std::log(2.0) + 1;
  EXPECT_NEAR(v[0].second, wc / std::hypot(wc, wd), 1e-6);
  EXPECT_NEAR(v[1].second, wd / std::hypot(wc, wd), 1e-6);
  EXPECT_NEAR(eval::TfIdf::Cosine(t.Vector("The Cat!"), t.Vector("the cat")), 1.0, 1e-6);
  EXPECT_NEAR(eval::TfIdf::Cosine(t.Vector("cat"), t.Vector("dog")), 0.0, 1e-9);
  EXPECT_EQ(eval::TfIdf::Terms("It's 3D-printing, OK?"), (std::vector<std::string>{"it", "s", "3d", "printing", "ok"}));
}

TEST(EvalDatasets, CsvQuotingAndReaders) {
  test::TempDir dir;
  test::WriteFile(dir / "a.csv", "x,\"a, b\",\"say \"\"hi\"\"\"\r\n\"two\nlines\",,3\nlast,row,1");
  auto rows = ReadCsv(dir / "a.csv");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0], (std::vector<std::string>{"x", "a, b", "say \"hi\""}));
  EXPECT_EQ((*rows)[1], (std::vector<std::string>{"two\nlines", "", "3"}));
  EXPECT_EQ((*rows)[2], (std::vector<std::string>{"last", "row", "1"}));
  test::WriteFile(dir / "bad.csv", "a,\"unterminated\n");
  EXPECT_FALSE(ReadCsv(dir / "bad.csv").ok());
  test::WriteFile(dir / "sts.csv", "a,b,not-a-number\n");
  EXPECT_FALSE(eval::LoadSts(dir / "sts.csv").ok());

  auto sts = eval::LoadSts(test::Data("eval/stsb/stsb-en-test.csv"));
  ASSERT_TRUE(sts.ok());
  EXPECT_EQ(sts->size(), 200u);
  auto cran = eval::LoadCranfield(test::Data("eval/cranfield"));
  ASSERT_TRUE(cran.ok()) << cran.status().ToString();
  EXPECT_EQ(cran->queries.size(), 10u);
  EXPECT_EQ(cran->doc_ids.size(), 252u);
  // Query 1's judgments (cranqrel "1 184 2"): code 2 is gain 3.
  EXPECT_EQ(cran->qrels[0].at("184"), 3);
  EXPECT_EQ(cran->doc_ids[0], "1");
  EXPECT_EQ(cran->doc_texts[0].rfind("experimental investigation of the aerodynamics of a wing in a slipstream", 0), 0u);
}

// The PNG's chunks walked and its image data inflated with zlib here (not
// libpng), then compared with the pixels: IHDR says 8-bit RGB, every row has
// filter 0, and the bytes are the image's.
uint32_t ReadBe32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}
std::string InflatedIdat(const std::string& png, uint32_t* width, uint32_t* height) {
  std::string z;
  for (size_t at = 8; at + 12 <= png.size();) {
    const uint32_t len = ReadBe32(png, at);
    const std::string type = png.substr(at + 4, 4);
    if (type == "IHDR") {
      *width = ReadBe32(png, at + 8), *height = ReadBe32(png, at + 12);
      EXPECT_EQ(png[at + 16], 8);  // bit depth
      EXPECT_EQ(png[at + 17], 2);  // RGB
    }
    if (type == "IDAT") z += png.substr(at + 8, len);
    const uLong crc = crc32(0, reinterpret_cast<const Bytef*>(png.data() + at + 4), len + 4);
    EXPECT_EQ(crc, ReadBe32(png, at + 8 + len)) << type;
    at += 12 + len;
  }
  uLongf n = static_cast<uLongf>(*width) * *height * 3 + *height;
  std::string raw(n, '\0');
  EXPECT_EQ(uncompress(reinterpret_cast<Bytef*>(raw.data()), &n, reinterpret_cast<const Bytef*>(z.data()), z.size()), Z_OK);
  raw.resize(n);
  return raw;
}

TEST(EvalPng, DecodesBackToThePixels) {
  const int w = 37, h = 11;
  std::vector<unsigned char> rgb(w * h * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<unsigned char>((i * 13) ^ (i >> 3));
  auto png = EncodePng(rgb, w, h);
  ASSERT_TRUE(png.ok());
  ASSERT_EQ(png->substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  uint32_t width = 0, height = 0;
  const std::string raw = InflatedIdat(*png, &width, &height);
  ASSERT_EQ(width, static_cast<uint32_t>(w));
  ASSERT_EQ(height, static_cast<uint32_t>(h));
  ASSERT_EQ(raw.size(), static_cast<size_t>(h * (1 + w * 3)));
  for (int y = 0; y < h; ++y) {
    EXPECT_EQ(raw[y * (1 + w * 3)], 0);  // filter type: none
    for (int i = 0; i < w * 3; ++i)
      ASSERT_EQ(static_cast<unsigned char>(raw[y * (1 + w * 3) + 1 + i]), rgb[y * w * 3 + i]) << y << " " << i;
  }
  EXPECT_FALSE(EncodePng(rgb, w + 1, h).ok());
}

TEST(EvalPng, APlotIsCompressedAndCarriesItsLabels) {
  test::TempDir dir;
  const PlotSeries s{{0, 1, 2, 3}, {0.1, 0.5, 0.3, 0.4}, 255, 0, 0};
  ASSERT_TRUE(WriteLinePlotPng(dir / "p.png", {s}).ok());
  ASSERT_TRUE(WriteLinePlotPng(dir / "l.png", {s}, {"title", "step", "loss"}).ok());
  const std::string plain = test::ReadFile(dir / "p.png"), labelled = test::ReadFile(dir / "l.png");
  // Compressed: a 640 x 400 chart is far below its 768 KB of pixels.
  EXPECT_LT(plain.size(), 40000u);
  uint32_t w = 0, h = 0;
  const std::string a = InflatedIdat(plain, &w, &h), b = InflatedIdat(labelled, &w, &h);
  EXPECT_EQ(w, 640u);
  // The labels are drawn: dark pixels where the unlabelled chart has none.
  size_t more_ink = 0;
  for (size_t i = 0; i < a.size(); ++i) more_ink += static_cast<unsigned char>(b[i]) < 100 && static_cast<unsigned char>(a[i]) >= 100;
  EXPECT_GT(more_ink, 100u);
  EXPECT_FALSE(WriteLinePlotPng(dir / "q.png", {}).ok());
}

// Pooling modes, checked against the model's own per-layer taps pooled here.
class Pooling : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    RandomCheckpointOptions opt;
    opt.seed = 11;
    ASSERT_TRUE(WriteRandomCheckpoint(test::Data("configs/olmoe-tiny.json"), "", dir_->path(), opt).ok());
  }
  static void TearDownTestSuite() { delete dir_; }
  static test::TempDir* dir_;
};
test::TempDir* Pooling::dir_ = nullptr;

at::Tensor Norm(const at::Tensor& x, double eps) { return x * at::rsqrt(x.pow(2).mean({-1}, true) + eps); }

TEST_F(Pooling, MeanAndLayersMeanEqualTheTapsPooledByHand) {
  auto model = MoeModel::LoadDir(dir_->path());
  ASSERT_TRUE(model.ok());
  const ModelConfig& c = (*model)->config();
  const std::vector<std::vector<int32_t>> ids = {{5, 17, 300, 9, 42}, {7, 8}};
  std::vector<at::Tensor> layer_out, router;
  (*model)->set_tap([&](std::string_view name, int64_t, const at::Tensor& v) {
    if (name == "layer_out") layer_out.push_back(v.clone());
    if (name == "router_logits") router.push_back(v.clone());
  });
  ForwardOptions mean, layers;
  mean.hs_pooling = HsPooling::kMean;
  mean.rw_pooling = RwPooling::kMean;
  layers.hs_pooling = HsPooling::kLayersMean;
  auto fm = (*model)->Forward(ids, mean);
  ASSERT_TRUE(fm.ok());
  ASSERT_EQ(layer_out.size(), static_cast<size_t>(c.num_layers));
  // Real tokens are row-major: row 0 = 0..4, row 1 = 5..6. Norm weights are 1 (random init).
  const double eps = c.rms_norm_eps;
  at::Tensor last = Norm(layer_out.back(), eps);
  EXPECT_TRUE(at::allclose(fm->hs[0], last.narrow(0, 0, 5).mean(0), 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(fm->hs[1], last.narrow(0, 5, 2).mean(0), 1e-5, 1e-5));
  for (size_t l = 0; l < router.size(); ++l) {
    EXPECT_TRUE(at::allclose(fm->router_logits[0][l], router[l].narrow(0, 0, 5).mean(0), 1e-5, 1e-5));
    EXPECT_TRUE(at::allclose(fm->router_logits[1][l], router[l].narrow(0, 5, 2).mean(0), 1e-5, 1e-5));
  }
  layer_out.clear();
  router.clear();
  auto fl = (*model)->Forward(ids, layers);
  ASSERT_TRUE(fl.ok());
  at::Tensor want0 = at::zeros({c.hidden_size}), want1 = at::zeros({c.hidden_size});
  for (const auto& lo : layer_out) {
    want0 += Norm(lo[4], eps) / static_cast<double>(c.num_layers);
    want1 += Norm(lo[6], eps) / static_cast<double>(c.num_layers);
  }
  EXPECT_TRUE(at::allclose(fl->hs[0], want0, 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(fl->hs[1], want1, 1e-5, 1e-5));
  // The short row alone gives the same pooled vectors as inside the padded batch.
  auto alone = (*model)->Forward({ids[1]}, mean);
  ASSERT_TRUE(alone.ok());
  EXPECT_TRUE(at::allclose(alone->hs[0], fm->hs[1], 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(alone->router_logits[0], fm->router_logits[1], 1e-5, 1e-5));
  // With one token every pooling is the last token's.
  auto one_last = (*model)->Forward({{99}}), one_mean = (*model)->Forward({{99}}, mean),
       one_layers = (*model)->Forward({{99}}, layers);
  EXPECT_TRUE(at::allclose(one_last->hs, one_mean->hs, 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(one_last->router_logits, one_mean->router_logits, 1e-6, 1e-6));
  EXPECT_FALSE(at::allclose(one_last->hs, one_layers->hs, 1e-3, 1e-3));  // other layers do count
}

// Under bidirectional attention layers-mean reads each layer as the mean
// over the text's tokens (every token has seen the whole text), as the
// trained pooler does: checked against the taps pooled here.
TEST_F(Pooling, LayersMeanAveragesTheTokensUnderBidirectionalAttention) {
  test::TempDir bidi;
  std::ifstream in(test::Data("configs/olmoe-tiny.json"));
  json config = json::parse(in);
  config["is_causal"] = false;
  std::ofstream(bidi / "config.in.json") << config.dump();
  RandomCheckpointOptions opt;
  opt.seed = 11;
  ASSERT_TRUE(WriteRandomCheckpoint(bidi / "config.in.json", "", bidi.path(), opt).ok());
  auto model = MoeModel::LoadDir(bidi.path());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ModelConfig& c = (*model)->config();
  ASSERT_FALSE(c.causal);
  std::vector<at::Tensor> layer_out;
  (*model)->set_tap([&](std::string_view name, int64_t, const at::Tensor& v) {
    if (name == "layer_out") layer_out.push_back(v.clone());
  });
  ForwardOptions layers;
  layers.hs_pooling = HsPooling::kLayersMean;
  auto fl = (*model)->Forward({{5, 17, 300, 9, 42}, {7, 8}}, layers);
  ASSERT_TRUE(fl.ok());
  ASSERT_EQ(layer_out.size(), static_cast<size_t>(c.num_layers));
  at::Tensor want0 = at::zeros({c.hidden_size}), want1 = at::zeros({c.hidden_size}), last0 = want0.clone();
  for (const auto& lo : layer_out) {
    const at::Tensor n = Norm(lo, c.rms_norm_eps);
    want0 += n.narrow(0, 0, 5).mean(0) / static_cast<double>(c.num_layers);
    want1 += n.narrow(0, 5, 2).mean(0) / static_cast<double>(c.num_layers);
    last0 += n[4] / static_cast<double>(c.num_layers);
  }
  EXPECT_TRUE(at::allclose(fl->hs[0], want0, 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(fl->hs[1], want1, 1e-5, 1e-5));
  EXPECT_FALSE(at::allclose(fl->hs[0], last0, 1e-3, 1e-3));  // not the last token's
}

// The eval commands on the CI subsets: deterministic and sane.
json RunEval(const std::vector<std::string>& args) {
  std::vector<std::string> a = {test::Binary(), "eval"};
  a.insert(a.end(), args.begin(), args.end());
  auto r = test::Run(a);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  if (!j.is_discarded()) j.erase("seconds");
  return j;
}

class EvalCommands : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    auto r = test::Run({test::Binary(), "model", "init", "--config", test::Data("configs/olmoe-tiny.json"), "--tokenizer",
                        test::Data("tokenizers/olmoe/tokenizer.json"), "--seed", "5", "--out", dir_->path()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() { delete dir_; }
  static test::TempDir* dir_;
};
test::TempDir* EvalCommands::dir_ = nullptr;

TEST_F(EvalCommands, StsIsDeterministicAndReportsEveryMethod) {
  const std::vector<std::string> args = {"sts", "--model", dir_->path(), "--data", test::Data("eval/stsb"),
                                         "--limit", "60", "--threads", "1", "--plot", dir_->path() + "/sts.png"};
  const json a = RunEval(args), b = RunEval(args);
  EXPECT_EQ(a, b);
  for (const char* m : {"hs", "rw", "concat", "sum_alpha1", "sum_alpha_dev", "sum_alpha_labelfree"}) {
    ASSERT_TRUE(a["spearman"].contains(m)) << m;
    EXPECT_LE(std::abs(a["spearman"][m].get<double>()), 100.0);
  }
  EXPECT_EQ(a["pairs_test"], 60);
  EXPECT_EQ(test::ReadFile(dir_->path() + "/sts.png").substr(1, 3), "PNG");
  // The dev-chosen alpha's test score is the curve's value at that alpha.
  const auto& curve = a["curve"];
  const double alpha = a["alpha_dev"];
  const size_t i = static_cast<size_t>(std::lround(alpha * 20));
  EXPECT_DOUBLE_EQ(curve["test"][i].get<double>(), a["spearman"]["sum_alpha_dev"].get<double>());
  // TF-IDF on STS-B is a well-known, clearly positive baseline.
  const json t = RunEval({"sts", "--baseline", "tfidf", "--data", test::Data("eval/stsb"), "--limit", "60"});
  EXPECT_GT(t["spearman"]["tfidf"].get<double>(), 30.0);
}

TEST_F(EvalCommands, RetrievalAndClassifyRunThroughAndAreDeterministic) {
  const std::vector<std::string> r = {"retrieval", "--model", dir_->path(), "--data", test::Data("eval/cranfield"),
                                      "--limit", "3", "--threads", "1"};
  const json a = RunEval(r), b = RunEval(r);
  EXPECT_EQ(a, b);
  for (const char* m : {"hs", "rw", "fused"}) {
    const double ndcg = a["metrics"][m]["ndcg@10"];
    EXPECT_GE(ndcg, 0.0);
    EXPECT_LE(ndcg, 100.0);
  }
  const json tf = RunEval({"retrieval", "--baseline", "tfidf", "--data", test::Data("eval/cranfield")});
  EXPECT_GT(tf["metrics"]["tfidf"]["ndcg@10"].get<double>(), 20.0);  // lexical overlap works on Cranfield
  const std::vector<std::string> k = {"classify", "--model", dir_->path(), "--data", test::Data("eval/banking77"),
                                      "--limit", "150", "--threads", "1"};
  const json c = RunEval(k), d = RunEval(k);
  EXPECT_EQ(c, d);
  EXPECT_EQ(c["test"], 150);
  const json ct = RunEval({"classify", "--baseline", "tfidf", "--data", test::Data("eval/banking77")});
  EXPECT_GT(ct["accuracy"]["tfidf"].get<double>(), 100.0 / 77 * 3);  // far above chance
  // Bad input: a clear error and a non-zero exit.
  auto bad = test::Run({test::Binary(), "eval", "sts", "--model", dir_->path(), "--data", "/nonexistent"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("/nonexistent"), std::string::npos);
  auto usage = test::Run({test::Binary(), "eval", "sts", "--baseline", "bm25", "--data", test::Data("eval/stsb")});
  EXPECT_NE(usage.exit_code, 0);
}

// An outside model's vectors (eval --vectors): the texts `eval texts` lists,
// embedded here by a moeedb model through `moeedb embed`, give exactly the
// HS figures `eval --model` gives for that model; a text the file lacks and
// a file of the wrong size are clear errors.
TEST_F(EvalCommands, OutsideVectorsScoreAsTheModelsOwnHs) {
  auto texts = test::Run({test::Binary(), "eval", "texts", "--data", test::Data("eval")});
  ASSERT_EQ(texts.exit_code, 0) << texts.err;
  std::set<std::string> distinct;
  size_t lines = 0;
  for (std::istringstream in(texts.out); std::getline(in, texts.err); ++lines)
    distinct.insert(json::parse(texts.err)["text"].get<std::string>());
  ASSERT_GT(lines, 100u);
  EXPECT_EQ(distinct.size(), lines);  // each text once
  auto emb = test::Run({test::Binary(), "embed", "--jsonl", "--model", dir_->path(), "--threads", "1"}, texts.out);
  ASSERT_EQ(emb.exit_code, 0) << emb.err;
  std::string rows;
  size_t dim = 0, n = 0;
  for (std::istringstream in(emb.out); std::getline(in, emb.err); ++n) {
    const auto hs = json::parse(emb.err)["hs"].get<std::vector<float>>();
    dim = hs.size();
    rows.append(reinterpret_cast<const char*>(hs.data()), hs.size() * sizeof(float));
  }
  ASSERT_EQ(n, lines);
  const std::string tj = dir_->path() + "/texts.jsonl", vf = dir_->path() + "/vectors.f32";
  test::WriteFile(tj, texts.out);
  test::WriteFile(vf, rows);
  const std::string vectors = tj + "," + vf;

  const json own = RunEval({"sts", "--model", dir_->path(), "--data", test::Data("eval/stsb"), "--limit", "60", "--threads", "1"});
  const json outside = RunEval({"sts", "--vectors", vectors, "--label", "mine", "--data", test::Data("eval/stsb"), "--limit", "60"});
  EXPECT_NEAR(outside["spearman"]["hs"].get<double>(), own["spearman"]["hs"].get<double>(), 1e-9);
  EXPECT_EQ(outside["spearman"].size(), 1u);  // HS alone: no RW
  EXPECT_EQ(outside["setup"]["vectors"], "mine");
  EXPECT_EQ(outside["setup"]["dim_hs"], dim);
  const json own_k = RunEval({"classify", "--model", dir_->path(), "--data", test::Data("eval/banking77"), "--limit", "150", "--threads", "1"});
  const json out_k = RunEval({"classify", "--vectors", vectors, "--data", test::Data("eval/banking77"), "--limit", "150"});
  EXPECT_DOUBLE_EQ(out_k["accuracy"]["hs"].get<double>(), own_k["accuracy"]["hs"].get<double>());
  EXPECT_EQ(out_k["accuracy"].size(), 1u);
  const json out_r = RunEval({"retrieval", "--vectors", vectors, "--data", test::Data("eval/cranfield"), "--limit", "3"});
  for (const char* m : {"hs", "lexical", "rrf:hs+lex"}) EXPECT_TRUE(out_r["metrics"].contains(m)) << m;
  for (const char* m : {"rw", "fused", "rrf:hs+rw"}) EXPECT_FALSE(out_r["metrics"].contains(m)) << m;

  // A text the file does not hold, and a vectors file that does not divide into rows.
  test::WriteFile(dir_->path() + "/few.jsonl", "{\"text\": \"only this\"}\n");
  test::WriteFile(dir_->path() + "/few.f32", rows.substr(0, dim * sizeof(float)));
  auto missing = test::Run({test::Binary(), "eval", "sts", "--vectors", dir_->path() + "/few.jsonl," + dir_->path() + "/few.f32",
                            "--data", test::Data("eval/stsb"), "--limit", "5"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("no vector for the text"), std::string::npos) << missing.err;
  test::WriteFile(dir_->path() + "/odd.f32", rows.substr(0, dim * sizeof(float) + 2));
  auto odd = test::Run({test::Binary(), "eval", "sts", "--vectors", dir_->path() + "/few.jsonl," + dir_->path() + "/odd.f32",
                        "--data", test::Data("eval/stsb")});
  EXPECT_NE(odd.exit_code, 0);
  EXPECT_NE(odd.err.find("not one float32 row"), std::string::npos) << odd.err;
  auto both = test::Run({test::Binary(), "eval", "sts", "--vectors", vectors, "--model", dir_->path(), "--data", test::Data("eval/stsb")});
  EXPECT_NE(both.exit_code, 0);
}

}  // namespace
}  // namespace moeedb

namespace moeedb {
namespace {

// The shipped default model, in its default setup (no flags: its trained
// pooler, prompt and alpha), on the STS-B CI subset: every score (HS, RW,
// concat, the fused sum) beats a random-weight model of the same shape and
// tokenizer, and the fused sum beats the language model it was trained from
// (the training-free MoEE setup). docs/eval.md has the full-set tables.
TEST(ShippedModel, BeatsRandomWeightsAndItsLanguageModelOnTheStsSubset) {
  const std::string shipped = test::DataDir() + "/../../models/moeedb-tiny";
  const std::string lm = test::DataDir() + "/../../models/moeedb-tiny-lm";
  test::TempDir random;
  auto r = test::Run({test::Binary(), "model", "init", "--config", lm + "/config.json", "--tokenizer",
                      lm + "/tokenizer.json", "--seed", "0", "--out", random.path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto eval = [&](const std::vector<std::string>& model) {
    std::vector<std::string> args = {"sts", "--data", test::Data("eval/stsb"), "--threads", "2"};
    args.insert(args.end(), model.begin(), model.end());
    return RunEval(args);
  };
  const json trained = eval({"--model", shipped}), untrained = eval({"--model", random.path(), "--prompt", "none"}),
             before = eval({"--model", lm, "--prompt", "none"});
  EXPECT_EQ(trained["setup"]["hs_pooling"], "trained");
  for (const char* m : {"hs", "rw", "concat", "sum_alpha1", "sum_alpha_model"})
    EXPECT_GT(trained["spearman"][m].get<double>(), untrained["spearman"][m].get<double>() + 3.0) << m;
  EXPECT_GT(trained["spearman"]["sum_alpha_model"].get<double>(), before["spearman"]["sum_alpha1"].get<double>() + 10.0);
}

}  // namespace
}  // namespace moeedb
