// The trainers: BPE (hand-derived merges, round trips, determinism) and the
// MoE language model (learns, its forward equals the engine's on the saved
// weights, deterministic, resumes to the same weights after a stop).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "engine/model/model.h"
#include "engine/io/safetensors.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/bpe_trainer.h"
#include "engine/train/lm_trainer.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

namespace fs = std::filesystem;

std::string Train(const std::vector<std::string>& texts, int64_t vocab, int64_t min_freq = 2) {
  BpeTrainerOptions o;
  o.vocab_size = vocab;
  o.min_frequency = min_freq;
  BpeTrainer t(o);
  for (const auto& s : texts) EXPECT_TRUE(t.AddText(s).ok());
  auto j = t.Train();
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  return j.ok() ? *j : "";
}

TEST(BpeTrainer, MergesTheMostFrequentPairFirst) {
  // Pieces: "ab", " ab" x3, " cd". Pair counts: (a,b) 4, (' ',a) 3, (' ',c) 1,
  // (c,d) 1. First merge a+b; then (' ',ab) 3 beats every other pair.
  const std::string json = Train({"ab ab ab ab cd"}, 2 + 256 + 2);
  auto tok = BpeTokenizer::FromJson(json, "trained");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->vocab_size(), 260);
  auto ab = (*tok)->TokenId("ab"), gab = (*tok)->TokenId("\xC4\xA0" "ab");  // "Ġab"
  ASSERT_TRUE(ab && gab);
  EXPECT_EQ(*ab, 258);
  EXPECT_EQ(*gab, 259);
  auto ids = (*tok)->Encode("ab ab cd", false);
  ASSERT_TRUE(ids.ok());
  // c, d and " " stay bytes: ids 2 + byte value.
  EXPECT_EQ(*ids, (std::vector<int32_t>{258, 259, 2 + ' ', 2 + 'c', 2 + 'd'}));
  EXPECT_EQ(*(*tok)->TokenId("<|endoftext|>"), 0);
  EXPECT_EQ(*(*tok)->TokenId("<|padding|>"), 1);
}

TEST(BpeTrainer, MinFrequencyStopsMerging) {
  const std::string json = Train({"ab ab cd"}, 1000, /*min_freq=*/2);
  auto tok = BpeTokenizer::FromJson(json, "trained");
  ASSERT_TRUE(tok.ok());
  // (a,b) occurs twice; after it nothing occurs twice.
  EXPECT_EQ((*tok)->vocab_size(), 2 + 256 + 1);
}

TEST(BpeTrainer, RoundTripsAnyTextAndIsDeterministic) {
  const std::string corpus = test::ReadFile(test::Data("stsb-sample.csv"));
  const std::string a = Train({corpus}, 600), b = Train({corpus}, 600);
  EXPECT_EQ(a, b);
  auto tok = BpeTokenizer::FromJson(a, "trained");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->vocab_size(), 600);
  for (const std::string text : {std::string("A man is playing a flute."), std::string("naïve café — 東京 🙂\n\ttabs"),
                                 corpus.substr(0, 500)}) {
    auto ids = (*tok)->Encode(text, false);
    ASSERT_TRUE(ids.ok());
    auto back = (*tok)->Decode(*ids);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, text);
  }
  // Learned merges compress the training text well below one token per byte.
  auto ids = (*tok)->Encode(corpus, false);
  EXPECT_LT(ids->size(), corpus.size() / 2);
}

TEST(BpeTrainer, RejectsInvalidUtf8AndTooSmallVocabularies) {
  BpeTrainer t(BpeTrainerOptions{});
  EXPECT_EQ(t.AddText("ok \xff bad").code(), Status::Code::kInvalidArgument);
  BpeTrainerOptions small;
  small.vocab_size = 100;
  BpeTrainer s(small);
  ASSERT_TRUE(s.AddText("hello").ok());
  EXPECT_EQ(s.Train().status().code(), Status::Code::kInvalidArgument);
  BpeTrainer empty(BpeTrainerOptions{});
  EXPECT_EQ(empty.Train().status().code(), Status::Code::kInvalidArgument);
}

// A token stream with structure a tiny model can learn: random "words" from a
// small lexicon, each a fixed sequence of ids, separated by id 1.
std::vector<int32_t> Stream(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> lexicon;
  for (int w = 0; w < 12; ++w) {
    std::vector<int32_t> word;
    for (int i = 0; i < 2 + w % 4; ++i) word.push_back(2 + (w * 7 + i * 3) % 60);
    lexicon.push_back(word);
  }
  std::vector<int32_t> out;
  while (out.size() < n) {
    const auto& w = lexicon[rng() % lexicon.size()];
    out.insert(out.end(), w.begin(), w.end());
    out.push_back(1);
  }
  return out;
}

class LmTrainer : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = dir_ / "config.json";
    test::WriteFile(config_, R"({"model_type":"olmoe","vocab_size":64,"hidden_size":32,"intermediate_size":48,
      "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":4,"num_experts":4,
      "num_experts_per_tok":2,"norm_topk_prob":false,"rms_norm_eps":1e-5,"rope_theta":10000.0,
      "tie_word_embeddings":true,"initializer_range":0.1})");
    train_ = Stream(1, 20000);
    val_ = Stream(2, 2000);
  }
  LmTrainOptions Options(const std::string& out) const {
    LmTrainOptions o;
    o.out_dir = out;
    o.seed = 7;
    o.seq_len = 32;
    o.batch_size = 4;
    o.steps = 40;
    o.warmup_steps = 5;
    o.peak_lr = 1e-2;
    o.checkpoint_every = 10;
    o.eval_every = 1000;
    o.val_windows = 16;
    o.threads = 1;
    o.out_dtype = DType::kF32;
    return o;
  }
  static std::string Bytes(const std::string& dir) { return test::ReadFile(dir + "/model.safetensors"); }

  test::TempDir dir_;
  std::string config_;
  std::vector<int32_t> train_, val_;
};

TEST_F(LmTrainer, LearnsAndItsForwardEqualsTheEngines) {
  const std::string out = dir_ / "model";
  auto r = TrainLanguageModel(config_, train_, val_, Options(out));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->finished);
  EXPECT_EQ(r->step, 40);
  // Uniform over 64 ids is ln 64 = 4.16 nats; the stream is far more predictable.
  EXPECT_NEAR(r->untrained_val_loss, std::log(64.0), 0.3);
  EXPECT_LT(r->val_loss, 0.6 * r->untrained_val_loss);
  // The engine (MoeModel, checked against HF transformers elsewhere) on the
  // saved weights gives the trainer's validation loss: the trained network is
  // the architecture the engine runs.
  auto engine_loss = EvaluateLoss(out, val_, 32, 16);
  ASSERT_TRUE(engine_loss.ok()) << engine_loss.status().ToString();
  EXPECT_NEAR(*engine_loss, r->val_loss, 1e-4);
  EXPECT_TRUE(fs::exists(out + "/config.json"));
  EXPECT_TRUE(fs::exists(out + "/training_log.json"));
}

TEST_F(LmTrainer, IsDeterministicAndResumesToTheSameWeights) {
  const std::string a = dir_ / "a", b = dir_ / "b", c = dir_ / "c";
  ASSERT_TRUE(TrainLanguageModel(config_, train_, val_, Options(a)).ok());
  ASSERT_TRUE(TrainLanguageModel(config_, train_, val_, Options(b)).ok());
  EXPECT_EQ(Bytes(a), Bytes(b));
  // Stopped after 13 steps (between checkpoints), then resumed from the stop's checkpoint.
  LmTrainOptions first = Options(c);
  first.stop_after = 13;
  auto r1 = TrainLanguageModel(config_, train_, val_, first);
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  EXPECT_FALSE(r1->finished);
  EXPECT_EQ(r1->step, 13);
  EXPECT_FALSE(fs::exists(c + "/model.safetensors"));
  auto r2 = TrainLanguageModel(config_, train_, val_, Options(c));
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_TRUE(r2->finished);
  EXPECT_EQ(Bytes(a), Bytes(c));
  // A different run's state is refused, not silently mixed in.
  LmTrainOptions other = Options(c);
  other.seed = 8;
  fs::remove(c + "/model.safetensors");
  EXPECT_EQ(TrainLanguageModel(config_, train_, val_, other).status().code(), Status::Code::kInvalidArgument);
}

TEST_F(LmTrainer, RejectsBadInputs) {
  LmTrainOptions o = Options(dir_ / "bad");
  std::vector<int32_t> bad = train_;
  bad[5] = 64;  // outside the vocabulary
  EXPECT_EQ(TrainLanguageModel(config_, bad, val_, o).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(TrainLanguageModel(config_, train_, std::vector<int32_t>(10, 2), o).status().code(),
            Status::Code::kInvalidArgument);
  o.steps = 0;
  EXPECT_EQ(TrainLanguageModel(config_, train_, val_, o).status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace moeedb

namespace moeedb {
namespace {

// `train tokenizer` and `train model` read TSV files (each field with a space
// is a document: sentences, not labels or headers) and, with
// --line-documents, plain text one document per line instead of per
// blank-line paragraph (books stored one paragraph a line).
TEST(TrainCli, ReadsTsvFieldsAndLineDocuments) {
  test::TempDir dir;
  test::WriteFile(dir / "pairs.tsv", "anchor\tpositive\tsource\nA cat sat on the mat.\tA cat is sitting.\tsnli\n"
                                     "Two dogs run.\tDogs are running.\tsnli\n");
  test::WriteFile(dir / "book.txt", "The first paragraph of the book.\nThe second one follows it.\n"
                                    "A third paragraph ends the chapter.\n");
  const std::string corpus = (dir / "pairs.tsv") + "," + (dir / "book.txt");
  auto tok = test::Run({test::Binary(), "train", "tokenizer", "--corpus", corpus, "--vocab", "300", "--out",
                        (dir / "tokenizer.json")});
  ASSERT_EQ(tok.exit_code, 0) << tok.err;
  test::WriteFile(dir / "config.json", R"({"model_type":"olmoe","vocab_size":300,"hidden_size":16,"intermediate_size":16,
      "num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":2,"num_experts":2,
      "num_experts_per_tok":1,"norm_topk_prob":false,"rms_norm_eps":1e-5,"rope_theta":10000.0,
      "tie_word_embeddings":true,"initializer_range":0.1})");
  auto documents = [&](bool lines) {
    std::vector<std::string> argv = {test::Binary(), "train", "model", "--config", (dir / "config.json"),
                                     "--tokenizer", (dir / "tokenizer.json"), "--corpus", corpus,
                                     "--out", dir / (lines ? "m-lines" : "m-paras"), "--steps", "1",
                                     "--seq", "8", "--batch", "1", "--val-every", "2", "--threads", "1"};
    if (lines) argv.push_back("--line-documents");
    auto r = test::Run(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const size_t at = r.err.find(" documents,");
    if (at == std::string::npos) return -1;
    const size_t from = r.err.rfind(' ', at - 1);
    return std::stoi(r.err.substr(from + 1, at - from - 1));
  };
  EXPECT_EQ(documents(false), 4 + 1);  // four sentences; the book is one paragraph
  EXPECT_EQ(documents(true), 4 + 3);   // ... and three lines
}

}  // namespace
}  // namespace moeedb
