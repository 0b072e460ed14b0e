// Weight formats (bf16 compute, int8 storage): the quantiser against
// hand-derived values, LinearWeight against at::linear, and the whole model
// in each format against the same model in f32 (which hf_parity_test checks
// against HF transformers) on 100 real sentences: the fidelity bar.
// Also the streaming embedder against the one-shot Embedder.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <thread>

#include "engine/embed/embedder.h"
#include "engine/kernels/bf16_gemm.h"
#include "engine/kernels/int8_gemm.h"
#include "engine/kernels/linear_weight.h"
#include "engine/kernels/panel_gemm.h"
#include "engine/kernels/runtime.h"
#include "engine/model/model.h"
#include "engine/model/moe_block.h"
#include "engine/embed/streaming_embedder.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "eval/datasets.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

TEST(Int8, QuantizesEachRowSymmetricallyByItsLargestMagnitude) {
  at::Tensor w = at::tensor({1.0f, -2.0f, 0.5f, 0.0f, 0.0f, 0.0f, 0.3f, 0.1f, -0.03f}).view({3, 3});
  at::Tensor q, s;
  QuantizeInt8(w, &q, &s);
  ASSERT_EQ(q.scalar_type(), at::kChar);
  // Row 0: s = 2/127; 1 -> 63.5 -> 64 (ties to even), -2 -> -127, 0.5 -> 31.75 -> 32.
  EXPECT_FLOAT_EQ(s[0].item<float>(), 2.0f / 127.0f);
  EXPECT_EQ(q[0][0].item<int8_t>(), 64);
  EXPECT_EQ(q[0][1].item<int8_t>(), -127);
  EXPECT_EQ(q[0][2].item<int8_t>(), 32);
  // A zero row: scale 0, values 0 (no division by zero).
  EXPECT_EQ(s[1].item<float>(), 0.0f);
  EXPECT_EQ(q[1].abs().sum().item<int64_t>(), 0);
  // Row 2: s = 0.3/127; 0.1 -> 42.33 -> 42, -0.03 -> -12.7 -> -13.
  EXPECT_EQ(q[2][0].item<int8_t>(), 127);
  EXPECT_EQ(q[2][1].item<int8_t>(), 42);
  EXPECT_EQ(q[2][2].item<int8_t>(), -13);
  // Reconstruction error at most half a step per element.
  at::Tensor back = q.to(at::kFloat) * s.unsqueeze(1);
  EXPECT_TRUE(((back - w).abs() <= s.unsqueeze(1) / 2 + 1e-7).all().item<bool>());
}

TEST(LinearWeightTest, EachFormatComputesXTimesWTransposed) {
  at::manual_seed(1);
  at::Tensor w = at::randn({48, 64}), x = at::randn({5, 64});
  at::Tensor ref = at::linear(x, w);
  // Stored transposed ([in, out]), as a copy: the input is never written.
  at::Tensor w_before = w.clone();
  LinearWeight f32 = LinearWeight::From(w, {}, at::kCPU);
  EXPECT_EQ(f32.in_features(), 64);
  EXPECT_EQ(f32.out_features(), 48);
  EXPECT_TRUE(at::equal(f32.ToFloat(), w));
  EXPECT_TRUE(at::equal(w, w_before));
  EXPECT_TRUE(at::allclose(f32.Apply(x), ref, 1e-5, 1e-5));
  LinearWeight bf = LinearWeight::From(w, {ComputeDtype::kBF16, WeightQuant::kNone}, at::kCPU);
  EXPECT_EQ(bf.stored_type(), at::kBFloat16);
  // bf16 compute only where the CPU has a fast bf16 GEMM; else widened to f32.
  EXPECT_EQ(bf.compute_type(), CpuHasFastBf16Gemm() ? at::kBFloat16 : at::kFloat);
  // A single matrix takes the bf16 panel kernel too: under bf16 compute, and
  // under float32 compute where the kernel widens (bf16_gemm.h).
  EXPECT_EQ(bf.bf16_gemm(), Bf16GemmAvailable() && (bf.compute_type() == at::kBFloat16 || Bf16GemmWidens()));
  at::Tensor ybf = bf.Apply(x.to(bf.compute_type())).to(at::kFloat);
  EXPECT_LT(((ybf - ref).norm() / ref.norm()).item<double>(), 1e-2);
  for (ComputeDtype d : {ComputeDtype::kF32, ComputeDtype::kBF16}) {
    LinearWeight q8 = LinearWeight::From(w, {d, WeightQuant::kInt8}, at::kCPU);
    EXPECT_TRUE(q8.quantized());
    // One byte per weight, one float scale per row; the int8 GEMM's layout
    // also keeps a column term per row (int8_gemm.h; 48 x 64 needs no padding).
    EXPECT_EQ(q8.nbytes(), 48 * 64 + 48 * 4 * (q8.int8_gemm() ? 2 : 1));
    // Multiplied in int8 wherever the CPU has an int8 kernel, whatever the compute dtype.
    EXPECT_EQ(q8.int8_gemm(), Int8GemmAvailable());
    EXPECT_TRUE(at::equal(q8.ToFloat(), LinearWeight::From(w, {ComputeDtype::kBF16, WeightQuant::kInt8}, at::kCPU).ToFloat()));
    at::Tensor y = q8.Apply(x.to(q8.compute_type())).to(at::kFloat);
    // Independent reference: the quantised matrix written out by hand, and
    // where the GEMM runs in int8, each row of x quantised the same way.
    at::Tensor amax = w.abs().amax({1}, true);
    at::Tensor wq = (w / (amax / 127)).round().clamp(-127, 127) * (amax / 127);
    at::Tensor xs = x.abs().amax({1}, true) / 127;
    at::Tensor want = at::linear(q8.int8_gemm() ? (x / xs).round() * xs : x, wq);
    EXPECT_LT(((y - want).norm() / want.norm()).item<double>(), d == ComputeDtype::kF32 ? 1e-5 : 1e-2);
    EXPECT_LT(((y - ref).norm() / ref.norm()).item<double>(), 2e-2);
  }
  // A stack of matrices, filled one at a time, viewed one at a time.
  LinearWeight st = LinearWeight::Stack(2, 48, 64, {ComputeDtype::kF32, WeightQuant::kInt8}, at::kCPU);
  st.Set(0, w);
  st.Set(1, -w);
  EXPECT_TRUE(at::allclose(st.Matrix(1).Apply(x), -st.Matrix(0).Apply(x)));
}

// f32 matrices over 1 MB each (experts, projections) are kept in 16-column
// panels only, where the panel kernel runs (AVX2 and FMA): no second copy,
// and everywhere every way
// of reading it (ToFloat, Dense, a matrix's Apply) gives the matrices back.
TEST(LinearWeightTest, LargeFloatStacksAreKeptPackedOnly) {
  at::manual_seed(2);
  const int64_t E = 3, out = 1024, in = 320;  // 1.25 MB a matrix
  at::Tensor w = at::randn({E, out, in}), x = at::randn({7, in});
  for (bool stacked : {true, false}) {
    LinearWeight lw;
    if (stacked) {
      lw = LinearWeight::From(w, {}, at::kCPU);
    } else {  // the per-expert layout: one matrix at a time
      lw = LinearWeight::Stack(E, out, in, {}, at::kCPU);
      for (int64_t e = 0; e < E; ++e) lw.Set(e, w[e]);
    }
    SCOPED_TRACE(stacked ? "From" : "Stack + Set");
    if (PanelGemmAvailable()) {
      EXPECT_EQ(lw.nbytes(), E * out * in * 4);  // the panels alone
      EXPECT_NE(lw.packed_panels(1), nullptr);
      EXPECT_EQ(lw.float_rows(1), nullptr);
    }
    EXPECT_EQ(lw.stored_type(), at::kFloat);
    EXPECT_TRUE(at::equal(lw.ToFloat(), w));
    EXPECT_TRUE(at::equal(lw.Dense(), w));
    for (int64_t e = 0; e < E; ++e) EXPECT_TRUE(at::allclose(lw.Matrix(e).Apply(x), at::linear(x, w[e]), 1e-4, 1e-4));
  }
  // One such matrix alone (a projection) too, of an odd panel count (65:
  // a last block of one panel): its product on every compute thread, rows
  // in several blocks, the same bits as the one-thread kernel's over the
  // whole matrix.
  const at::Tensor one = at::randn({1040, in}), many = at::randn({300, in});
  LinearWeight lw = LinearWeight::From(one, {}, at::kCPU);
  EXPECT_TRUE(at::equal(lw.ToFloat(), one));
  if (PanelGemmAvailable()) {
    EXPECT_EQ(lw.nbytes(), 1040 * in * 4);
    at::Tensor whole = at::empty({300, 1040});
    PanelGemmF32(300, 1040, in, many.data_ptr<float>(), in, lw.packed_panels(), whole.data_ptr<float>(), 1040);
    const int threads = ComputeThreads();
    for (int t : {1, 2}) {
      SetComputeThreads(t);
      EXPECT_TRUE(at::equal(lw.Apply(many), whole)) << t << " threads";
    }
    SetComputeThreads(threads);
  }
  EXPECT_TRUE(at::allclose(lw.Apply(many), at::linear(many, one), 1e-4, 1e-4));
}

TEST(LoadOptionsTest, BadValuesAreClearErrors) {
  EXPECT_FALSE(kComputeDtypes.Parse("fp8").ok());
  EXPECT_NE(kComputeDtypes.Parse("fp8").status().message().find("f32 or bf16"), std::string::npos);
  EXPECT_FALSE(kWeightQuants.Parse("int4").ok());
  LoadOptions o;
  o.device = "tpu";
  auto m = MoeModel::LoadDir(test::DataDir() + "/../../models/moeedb-tiny", o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("tpu"), std::string::npos);
  if (!at::hasCUDA()) {
    o.device = "cuda";
    auto c = MoeModel::LoadDir(test::DataDir() + "/../../models/moeedb-tiny", o);
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("CUDA"), std::string::npos) << c.status().message();
  }
}

// The shipped model (trained weights: realistic weight and activation
// statistics) in every format, in its default setup (no prompt, the trained
// pooler), on the first 100 sentences of the STS-B subset.
class Formats : public ::testing::Test {
 protected:
  static std::string ModelDir() { return test::DataDir() + "/../../models/moeedb-tiny"; }
  static std::vector<std::string> Texts() {
    auto rows = ReadCsv(test::Data("eval/stsb/stsb-en-test.csv"));
    EXPECT_TRUE(rows.ok());
    std::vector<std::string> texts;
    for (size_t i = 0; i < rows->size() && texts.size() < 100; ++i) texts.push_back((*rows)[i][0]);
    return texts;
  }
  struct Run {
    std::vector<Embedding> out;
    std::vector<at::Tensor> top1;  // per MoE layer, [N_real] expert ids (learned router's argmax)
    int64_t weight_bytes = 0, expert_bytes = 0;
    std::string fingerprint;
  };
  static Run Embed(const WeightFormat& f) {
    LoadOptions o;
    o.format = f;
    auto m = MoeModel::LoadDir(ModelDir(), o);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    auto tok = BpeTokenizer::FromFile(ModelDir() + "/tokenizer.json");
    EXPECT_TRUE(tok.ok());
    Run run;
    (*m)->set_tap([&](std::string_view name, int64_t, const at::Tensor& v) {
      if (name == "router_logits") run.top1.push_back(v.argmax(-1));
    });
    EmbedderOptions eo;
    eo.prompt = *FindPrompt("none");
    eo.hs_pooling = HsPooling::kTrained;  // the default setup: hs is the trained pooler's output
    eo.batch_tokens = 1 << 20;  // one forward pass: the taps line up across formats
    Embedder emb(m->get(), tok->get(), eo);
    auto r = emb.EmbedTexts(Texts());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    run.out = std::move(r).value();
    run.weight_bytes = (*m)->WeightBytes();
    for (const MoeBlock* b : (*m)->MoeBlocks()) run.expert_bytes += b->expert_nbytes();
    run.fingerprint = (*m)->WeightFingerprint();
    return run;
  }
  static double Cos(const std::vector<float>& a, const std::vector<float>& b) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < a.size(); ++i) ab += a[i] * b[i], aa += a[i] * a[i], bb += b[i] * b[i];
    return ab / std::sqrt(aa * bb);
  }
  // mean cos(hs), mean cos(rw), share of (token, layer) pairs with the same top-1 expert.
  static std::tuple<double, double, double> Compare(const Run& ref, const Run& got) {
    double hs = 0, rw = 0;
    for (size_t i = 0; i < ref.out.size(); ++i) {
      hs += Cos(ref.out[i].hs, got.out[i].hs);
      rw += Cos(ref.out[i].rw, got.out[i].rw);
    }
    int64_t same = 0, total = 0;
    EXPECT_EQ(ref.top1.size(), got.top1.size());
    for (size_t l = 0; l < ref.top1.size(); ++l) {
      same += (ref.top1[l] == got.top1[l]).sum().item<int64_t>();
      total += ref.top1[l].numel();
    }
    const double n = static_cast<double>(ref.out.size());
    return {hs / n, rw / n, static_cast<double>(same) / static_cast<double>(total)};
  }
};

TEST_F(Formats, Int8AndBf16StayWithinTheFidelityBarOf100Sentences) {
  const Run f32 = Embed({});
  ASSERT_EQ(f32.out.size(), 100u);
  const std::vector<WeightFormat> formats = {{ComputeDtype::kF32, WeightQuant::kInt8},
                                             {ComputeDtype::kBF16, WeightQuant::kNone},
                                             {ComputeDtype::kBF16, WeightQuant::kInt8}};
  for (const WeightFormat& f : formats) {
    const Run got = Embed(f);
    auto [hs, rw, top1] = Compare(f32, got);
    SCOPED_TRACE(WeightFormatName(f));
    std::printf("%-10s mean cos(hs) %.5f  mean cos(rw) %.5f  same top-1 expert %.4f\n", WeightFormatName(f).c_str(),
                hs, rw, top1);
    EXPECT_GE(hs, 0.995);
    EXPECT_GE(rw, 0.995);
    EXPECT_GE(top1, 0.95);
    EXPECT_LT(hs, 1.0 - 1e-9);  // the format really changed the computation
    // The fingerprint names the checkpoint, not the format.
    EXPECT_EQ(got.fingerprint, f32.fingerprint);
    if (f.quant == WeightQuant::kInt8) {
      // One byte per expert weight plus a float scale per row: a quarter of f32 and a bit.
      auto c = ModelConfig::FromFile(ModelDir() + "/config.json");
      ASSERT_TRUE(c.ok());
      int64_t moe_layers = 0;
      for (bool moe : c->moe_layer) moe_layers += moe ? 1 : 0;
      const int64_t rows = moe_layers * c->num_experts * (2 * c->expert_intermediate + c->hidden_size);
      const int64_t f32_values = moe_layers * c->num_experts * 3 * c->expert_intermediate * c->hidden_size * 4;
      // f32 also keeps a packed copy of matrices of <= 1 MB for the few-row kernel (panel_gemm.h).
      EXPECT_EQ(f32.expert_bytes, f32_values * (PanelGemmAvailable() ? 2 : 1));
      // With the int8 GEMM, also an int32 column term per row (int8_gemm.h).
      const bool int8_gemm = Int8GemmAvailable();
      EXPECT_EQ(got.expert_bytes, f32_values / 4 + rows * 4 * (int8_gemm ? 2 : 1));
      EXPECT_LT(got.weight_bytes, f32.weight_bytes / 2);
      // The token embeddings the forward reads are one byte per value and a
      // float scale per row too: at least 3/4 of their f32 bytes less outside
      // the experts (the attention matrices shrink on top of that).
      const int64_t V = c->vocab_size, H = c->hidden_size;
      EXPECT_LE(got.weight_bytes - got.expert_bytes, f32.weight_bytes - f32.expert_bytes - (V * H * 3 - V * 4));
    }
  }
}

TEST_F(Formats, StreamingEmbedderGivesTheOneShotResultsInInputOrder) {
  auto m = MoeModel::LoadDir(ModelDir());
  ASSERT_TRUE(m.ok());
  auto tok = BpeTokenizer::FromFile(ModelDir() + "/tokenizer.json");
  ASSERT_TRUE(tok.ok());
  EmbedderOptions eo;
  eo.prompt = *FindPrompt("none");
  eo.batch_tokens = 256;
  Embedder emb(m->get(), tok->get(), eo);
  std::vector<std::string> texts = Texts();
  texts.resize(60);
  auto want = emb.EmbedTexts(texts);
  ASSERT_TRUE(want.ok());
  // Small queues and windows, so the producer blocks and windows split the stream.
  StreamingOptions so;
  so.max_queued = 7;
  so.max_ready = 5;
  so.window_tokens = 300;
  StreamingEmbedder stream(&emb, so);
  std::thread producer([&] {
    for (const auto& t : texts) ASSERT_TRUE(stream.PushText(t).ok());
    stream.Close();
  });
  std::vector<Embedding> got;
  Result<Embedding> r = Status::Internal("unset");
  while (stream.Next(&r)) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    got.push_back(std::move(r).value());
  }
  producer.join();
  ASSERT_EQ(got.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(got[i].tokens, (*want)[i].tokens) << i;
    // Different batch compositions: equal up to float reassociation.
    EXPECT_GT(Cos(got[i].hs, (*want)[i].hs), 0.99999) << i;
    EXPECT_GT(Cos(got[i].rw, (*want)[i].rw), 0.99999) << i;
  }
  // After Close, pushes are refused; bad input is refused up front.
  EXPECT_FALSE(stream.PushText("late").ok());
  StreamingEmbedder other(&emb);
  EXPECT_EQ(other.PushText("   ").code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(other.PushIds({-1}).code(), Status::Code::kInvalidArgument);
  // A producer that pushes one input and waits for it is served (the linger rule).
  ASSERT_TRUE(other.PushText(texts[0]).ok());
  ASSERT_TRUE(other.Next(&r));
  ASSERT_TRUE(r.ok());
  EXPECT_GT(Cos(r->hs, (*want)[0].hs), 0.99999);
}

}  // namespace
}  // namespace moeedb
