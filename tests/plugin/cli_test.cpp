// The moeedb CLI as a user runs it: output formats, and bad checkpoints and
// inputs giving a clear message and a non-zero exit, never a crash.
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <cmath>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/embed/embedder.h"
#include "engine/model/model.h"
#include "engine/model/random_checkpoint.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;


void ExpectClose(const json& a, const json& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i].get<double>(), b[i].get<double>(), 1e-5) << i;
}

class Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    auto r = test::Run({test::Binary(), "model", "init", "--config", test::Data("configs/olmoe-tiny.json"), "--tokenizer",
                  test::Data("tokenizers/olmoe/tokenizer.json"), "--seed", "11", "--out", model()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string model() { return *dir_ / "model"; }
  // A copy of the model folder to damage.
  static std::string CopyModel(const test::TempDir& into) {
    const std::string d = into / "m";
    fs::copy(model(), d, fs::copy_options::recursive);
    return d;
  }
  static void ExpectCleanFailure(const test::CommandResult& r, const std::string& needle) {
    EXPECT_EQ(r.signal, 0) << "crashed: " << r.err;
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
    EXPECT_TRUE(r.out.empty()) << "printed output despite the error";
  }
  static test::TempDir* dir_;
};
test::TempDir* Cli::dir_ = nullptr;

TEST_F(Cli, EverySubcommandHasHelp) {
  for (std::vector<std::string> cmd :
       {std::vector<std::string>{"tokenize"}, {"embed"}, {"model", "init"}, {"model", "info"}, {"model", "calibrate"}, {"alpha"}, {"lens"},
        {"ingest"}, {"search"}, {"get"}, {"delete"}, {"collections"}, {"checkpoint"}, {"serve"},
        {"train", "tokenizer"}, {"train", "model"}, {"eval", "sts"}, {"eval", "retrieval"}, {"eval", "classify"}}) {
    std::vector<std::string> args{test::Binary()};
    args.insert(args.end(), cmd.begin(), cmd.end());
    args.push_back("--help");
    auto r = test::Run(args);
    EXPECT_EQ(r.exit_code, 0) << cmd[0];
    EXPECT_NE(r.out.find("Usage: moeedb"), std::string::npos) << cmd[0];
  }
  auto r = test::Run({test::Binary(), "frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command"), std::string::npos);
}

TEST_F(Cli, TokenizeMatchesReferenceIds) {
  auto r = test::Run({test::Binary(), "tokenize", "--model", model()}, "This is a document with no newlines.\n\nHello world\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1552 310 247 3389 342 642 747 8737 15\n\n12092 1533\n");
}

TEST_F(Cli, EmbedPrintsOneJsonLinePerInputEqualToTheLibrary) {
  const std::vector<std::string> texts = {"A man is playing a flute.", "Stock markets fell sharply on Tuesday.",
                                          "Hi"};
  std::string input;
  for (const auto& t : texts) input += t + "\n";
  auto r = test::Run({test::Binary(), "embed", "--model", model(), "--threads", "1", "--batch-tokens", "40"}, input);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto m = MoeModel::LoadDir(model());
  auto tok = BpeTokenizer::FromFile(model() + "/tokenizer.json");
  ASSERT_TRUE(m.ok() && tok.ok());
  auto lib = Embedder(m->get(), tok->get(), EmbedderOptions{}).EmbedTexts(texts);
  ASSERT_TRUE(lib.ok());
  std::istringstream lines(r.out);
  std::string line;
  size_t n = 0;
  while (std::getline(lines, line)) {
    ASSERT_LT(n, texts.size());
    json j = json::parse(line);
    ASSERT_EQ(j["hs"].size(), 64u);
    ASSERT_EQ(j["rw"].size(), 16u);
    EXPECT_EQ(j["tokens"].get<int64_t>(), (*lib)[n].tokens);
    for (size_t k = 0; k < 64; ++k) EXPECT_NEAR(j["hs"][k].get<double>(), (*lib)[n].hs[k], 1e-5);
    for (size_t k = 0; k < 16; ++k) EXPECT_NEAR(j["rw"][k].get<double>(), (*lib)[n].rw[k], 1e-5);
    ++n;
  }
  EXPECT_EQ(n, texts.size());
  // --jsonl and --ids give the same as plain text lines for the same tokens.
  auto rj = test::Run({test::Binary(), "embed", "--model", model(), "--jsonl"},
                "{\"text\": \"A man is playing a flute.\"}\n");
  ASSERT_EQ(rj.exit_code, 0) << rj.err;
  ExpectClose(json::parse(rj.out)["hs"], json::parse(r.out.substr(0, r.out.find('\n')))["hs"]);
  auto ids = (*tok)->Encode("This sentence : \"Hi.\" means in one word:\"", true);
  std::string id_line;
  for (int32_t id : *ids) id_line += std::to_string(id) + " ";
  auto ri = test::Run({test::Binary(), "embed", "--model", model(), "--ids"}, id_line + "\n");
  ASSERT_EQ(ri.exit_code, 0) << ri.err;
  ExpectClose(json::parse(ri.out)["rw"], json::parse(r.out.substr(r.out.rfind('\n', r.out.size() - 2) + 1))["rw"]);
}

TEST_F(Cli, EmptyTextAndInvalidUtf8NameTheLine) {
  ExpectCleanFailure(test::Run({test::Binary(), "embed", "--model", model()}, "fine\n\nalso fine\n"), "line 2: ");
  ExpectCleanFailure(test::Run({test::Binary(), "embed", "--model", model()}, "fine\nbad \xff\xfe\n"), "line 2: invalid UTF-8");
  ExpectCleanFailure(test::Run({test::Binary(), "embed", "--model", model(), "--jsonl"}, "{\"txt\": 1}\n"), "line 1:");
  ExpectCleanFailure(test::Run({test::Binary(), "embed", "--model", model(), "--ids"}, "1 2 x\n"), "line 1:");
  ExpectCleanFailure(test::Run({test::Binary(), "embed", "--model", model(), "--ids"}, "1 2 99999999\n"), "outside the vocabulary");
}

TEST_F(Cli, TruncatedCheckpoint) {
  test::TempDir t;
  const std::string d = CopyModel(t);
  fs::resize_file(d + "/model.safetensors", fs::file_size(d + "/model.safetensors") / 2);
  ExpectCleanFailure(test::Run({test::Binary(), "embed", "--model", d}, "hello\n"), "model.safetensors");
  fs::resize_file(d + "/model.safetensors", 4);
  ExpectCleanFailure(test::Run({test::Binary(), "embed", "--model", d}, "hello\n"), "truncated");
}

TEST_F(Cli, WrongShapesUnknownTypeMissingTokenizer) {
  test::TempDir t;
  const std::string d = CopyModel(t);
  json cfg = json::parse(test::ReadFile(d + "/config.json"));
  cfg["hidden_size"] = 96;
  test::WriteFile(d + "/config.json", cfg.dump());
  ExpectCleanFailure(test::Run({test::Binary(), "embed", "--model", d}, "hello\n"), "implies");
  cfg["model_type"] = "gpt2";
  test::WriteFile(d + "/config.json", cfg.dump());
  ExpectCleanFailure(test::Run({test::Binary(), "embed", "--model", d}, "hello\n"), "supported model types: olmoe");
  cfg["model_type"] = "olmoe";
  cfg["hidden_size"] = 64;
  test::WriteFile(d + "/config.json", cfg.dump());
  fs::remove(d + "/tokenizer.json");
  ExpectCleanFailure(test::Run({test::Binary(), "embed", "--model", d}, "hello\n"), "no tokenizer.json");
  ExpectCleanFailure(test::Run({test::Binary(), "embed", "--model", t / "nowhere"}, "hello\n"), "does not exist");
}

TEST_F(Cli, EmbedWeightFormatsMatchTheLibraryAndStayCloseToF32) {
  const std::string input = "A man is playing a flute.\nStock markets fell sharply on Tuesday.\n";
  auto f32 = test::Run({test::Binary(), "embed", "--model", model()}, input);
  ASSERT_EQ(f32.exit_code, 0) << f32.err;
  for (auto [dtype, quant] : {std::pair{"f32", "int8"}, std::pair{"bf16", "none"}, std::pair{"bf16", "int8"}}) {
    auto r = test::Run({test::Binary(), "embed", "--model", model(), "--dtype", dtype, "--quant", quant}, input);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    LoadOptions o;
    o.format = {*kComputeDtypes.Parse(dtype), *kWeightQuants.Parse(quant)};
    auto m = MoeModel::LoadDir(model(), o);
    auto tok = BpeTokenizer::FromFile(model() + "/tokenizer.json");
    ASSERT_TRUE(m.ok() && tok.ok());
    auto lib = Embedder(m->get(), tok->get(), EmbedderOptions{}).EmbedTexts({"A man is playing a flute."});
    ASSERT_TRUE(lib.ok());
    const json got = json::parse(r.out.substr(0, r.out.find('\n')));
    const json ref = json::parse(f32.out.substr(0, f32.out.find('\n')));
    double dot = 0, a = 0, b = 0;
    for (size_t k = 0; k < 64; ++k) {
      EXPECT_NEAR(got["hs"][k].get<double>(), (*lib)[0].hs[k], 1e-5);
      const double x = got["hs"][k].get<double>(), y = ref["hs"][k].get<double>();
      dot += x * y, a += x * x, b += y * y;
    }
    EXPECT_GT(dot / std::sqrt(a * b), 0.99) << dtype << "+" << quant;
    EXPECT_NE(got["hs"], ref["hs"]) << dtype << "+" << quant;  // the format changed the arithmetic
  }
  auto bad = test::Run({test::Binary(), "embed", "--model", model(), "--dtype", "fp16"}, "x\n");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("option --dtype must be one of f32, bf16"), std::string::npos) << bad.err;
  bad = test::Run({test::Binary(), "embed", "--model", model(), "--quant", "int4"}, "x\n");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("option --quant"), std::string::npos) << bad.err;
  if (!at::hasCUDA()) {
    bad = test::Run({test::Binary(), "embed", "--model", model(), "--device", "cuda"}, "x\n");
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find("CUDA"), std::string::npos) << bad.err;
  }
}

TEST_F(Cli, UsageErrors) {
  auto r = test::Run({test::Binary(), "embed", "--model", model(), "--threads", "many"}, "x\n");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--threads"), std::string::npos);
  r = test::Run({test::Binary(), "embed", "--modle", model()}, "x\n");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown option --modle"), std::string::npos);
  // Without --model, the embedded default model: its trained pooler's HS
  // (the pooled vector and the lexical channel, as its pooler.json says).
  r = test::Run({test::Binary(), "embed"}, "x\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const json pooler = json::parse(test::ReadFile(std::string(MOEEDB_TEST_DATA_DIR) + "/../../models/moeedb-tiny/pooler.json"));
  EXPECT_EQ(json::parse(r.out)["hs"].size(), pooler["out_dim"].get<size_t>() + pooler.value("lexical_dim", size_t{0}))
      << r.out;
  r = test::Run({test::Binary(), "embed", "--model", model(), "--prompt", "bogus"}, "x\n");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("prompteol"), std::string::npos);
}

TEST_F(Cli, ModelInitIsDeterministicAndChecksTheTokenizer) {
  test::TempDir t;
  for (const char* sub : {"a", "b"}) {
    auto r = test::Run({test::Binary(), "model", "init", "--config", test::Data("configs/deepseek-tiny.json"), "--seed", "4",
                  "--out", t / sub});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  EXPECT_EQ(test::ReadFile(t / "a/model.safetensors"), test::ReadFile(t / "b/model.safetensors"));
  // The OLMoE tokenizer has 50280 ids; deepseek-tiny's vocabulary is 300.
  auto r = test::Run({test::Binary(), "model", "init", "--config", test::Data("configs/deepseek-tiny.json"), "--tokenizer",
                test::Data("tokenizers/olmoe/tokenizer.json"), "--out", t / "c"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("vocab_size is 300"), std::string::npos) << r.err;
  auto info = test::Run({test::Binary(), "model", "info", "--model", t / "a"});
  EXPECT_EQ(info.exit_code, 0);
  EXPECT_NE(info.out.find("DeepSeekMoE"), std::string::npos);
}

TEST_F(Cli, AlphaAndLensRunOnPairsAndTexts) {
  test::TempDir t;
  std::string pairs;
  std::istringstream csv(test::ReadFile(test::Data("stsb-sample.csv")));
  std::string line;
  for (int i = 0; i < 12 && std::getline(csv, line); ++i) pairs += line + "\n";
  test::WriteFile(t / "pairs.csv", pairs);
  auto r = test::Run({test::Binary(), "alpha", "--model", model(), "--pairs", t / "pairs.csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["pairs"].get<int>(), 12);
  EXPECT_GE(j["alpha"].get<double>(), 0.0);
  EXPECT_LE(j["alpha"].get<double>(), 3.0);
  auto lens = test::Run({test::Binary(), "lens", "--model", model()}, "A man is playing a flute.\nHi there\n");
  ASSERT_EQ(lens.exit_code, 0) << lens.err;
  std::istringstream out(lens.out);
  int layers = 0;
  while (std::getline(out, line)) {
    json l = json::parse(line);
    EXPECT_EQ(l["moe_layer"].get<int>(), layers++);
    EXPECT_LE(l["cos_top1_topk"].get<double>(), 1.0 + 1e-6);
  }
  EXPECT_EQ(layers, 2);
  auto bad = test::Run({test::Binary(), "embed", "--model", model(), "--routing", "ssmoe:c=7"}, "x\n");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("c must be"), std::string::npos);
}

TEST_F(Cli, IngestSearchDeleteAndBadInput) {
  test::TempDir t;
  std::string jsonl;
  std::istringstream csv(test::ReadFile(test::Data("stsb-sample.csv")));
  std::string line;
  std::vector<std::string> texts;
  for (int i = 0; i < 40 && std::getline(csv, line); ++i) {
    const std::string text = line.substr(0, line.find(','));
    if (text.find('"') != std::string::npos) continue;
    texts.push_back(text);
    jsonl += json{{"id", "doc" + std::to_string(texts.size() - 1)}, {"text", text},
                  {"metadata", {{"n", texts.size() - 1}}}}.dump() + "\n";
  }
  test::WriteFile(t / "docs.jsonl", jsonl);
  const std::string db = t / "db";
  auto r = test::Run({test::Binary(), "ingest", "--db", db, "--collection", "c", "--model", model(), "--index-rw", "hnsw",
                      t / "docs.jsonl"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["documents"].get<size_t>(), texts.size());
  // A document's own text finds it first.
  auto s = test::Run({test::Binary(), "search", "--db", db, "--collection", "c", "--k", "3", texts[5]});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  json hits = json::parse(s.out)["hits"];
  ASSERT_EQ(hits.size(), 3u);
  EXPECT_EQ(hits[0]["id"], "doc5");
  EXPECT_NEAR(hits[0]["score"].get<double>(), hits[0]["score_hs"].get<double>() + hits[0]["score_rw"].get<double>(), 1e-5);
  // Filter and mode.
  s = test::Run({test::Binary(), "search", "--db", db, "--collection", "c", "--k", "40", "--mode", "rw", "--filter",
                 "{\"n\": {\"$lt\": 3}}", texts[5]});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(json::parse(s.out)["hits"].size(), 3u);
  // Delete: never returned again.
  ASSERT_EQ(test::Run({test::Binary(), "delete", "--db", db, "--collection", "c", "doc5"}).exit_code, 0);
  s = test::Run({test::Binary(), "search", "--db", db, "--collection", "c", "--k", "40", texts[5]});
  const json after_delete = json::parse(s.out);  // alive for the loop (a temporary's member is not)
  for (const auto& h : after_delete["hits"]) EXPECT_NE(h["id"], "doc5");
  // Lexical (BM25, no model run) and hybrid search; a document's own text finds it first.
  s = test::Run({test::Binary(), "search", "--db", db, "--collection", "c", "--k", "3", "--mode", "lexical", texts[7]});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  hits = json::parse(s.out)["hits"];
  ASSERT_FALSE(hits.empty());
  EXPECT_EQ(hits[0]["id"], "doc7");
  EXPECT_GT(hits[0]["score_lex"].get<double>(), 0.0);
  for (const char* fusion : {"weighted", "rrf"}) {
    s = test::Run({test::Binary(), "search", "--db", db, "--collection", "c", "--k", "3", "--mode", "hybrid", "--beta", "2",
                   "--fusion", fusion, texts[7]});
    ASSERT_EQ(s.exit_code, 0) << s.err;
    EXPECT_EQ(json::parse(s.out)["hits"][0]["id"], "doc7") << fusion;
  }
  for (std::vector<std::string> bad : {std::vector<std::string>{"--mode", "hybrid", "--fusion", "borda"},
                                       {"--mode", "hybrid", "--beta", "-1"},
                                       {"--mode", "hybrid", "--rrf-k", "0"},
                                       {"--mode", "fused", "--beta", "1"},
                                       {"--mode", "sparse"}}) {
    std::vector<std::string> cmd = {test::Binary(), "search", "--db", db, "--collection", "c"};
    cmd.insert(cmd.end(), bad.begin(), bad.end());
    cmd.push_back("query");
    auto e = test::Run(cmd);
    EXPECT_EQ(e.exit_code, 2) << bad[1] << " " << e.err;
    EXPECT_FALSE(e.err.empty());
  }
  r = test::Run({test::Binary(), "ingest", "--db", db, "--collection", "new", "--model", model(), "--language", "klingon",
                 t / "docs.jsonl"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("klingon"), std::string::npos) << r.err;
  // Malformed JSONL: every bad line reported, nothing stored.
  test::WriteFile(t / "bad.jsonl", "{\"id\": \"n1\", \"text\": \"fine\"}\n{\"id\": 3, \"text\": \"x\"}\n{bad\n");
  r = test::Run({test::Binary(), "ingest", "--db", db, "--collection", "c", t / "bad.jsonl"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("line 2:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("line 3:"), std::string::npos) << r.err;
  EXPECT_EQ(test::Run({test::Binary(), "get", "--db", db, "--collection", "c", "n1"}).exit_code, 1);
  // A different model (or routing) than the collection's is refused.
  test::TempDir other;
  ASSERT_EQ(test::Run({test::Binary(), "model", "init", "--config", test::Data("configs/olmoe-tiny.json"), "--tokenizer",
                       test::Data("tokenizers/olmoe/tokenizer.json"), "--seed", "12", "--out", other / "m"}).exit_code, 0);
  test::WriteFile(t / "one.jsonl", "{\"id\": \"z\", \"text\": \"hello there\"}\n");
  r = test::Run({test::Binary(), "ingest", "--db", db, "--collection", "c", "--model", other / "m", t / "one.jsonl"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("model_fingerprint"), std::string::npos) << r.err;
  auto info = test::Run({test::Binary(), "collections", "info", "c", "--db", db});
  EXPECT_EQ(json::parse(info.out)["documents"].get<size_t>(), texts.size() - 1);
  // Checkpoint: a consistent copy that opens and answers.
  ASSERT_EQ(test::Run({test::Binary(), "checkpoint", "--db", db, "--out", t / "backup"}).exit_code, 0);
  s = test::Run({test::Binary(), "search", "--db", t / "backup", "--collection", "c", "--k", "1", texts[7]});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(json::parse(s.out)["hits"][0]["id"], "doc7");

  // A payload index, facets and scrolls (by id and by a payload field).
  const size_t n = texts.size();  // doc5 is deleted
  auto ix = test::Run({test::Binary(), "collections", "index", "c", "--db", db, "--key", "n", "--kind", "integer"});
  ASSERT_EQ(ix.exit_code, 0) << ix.err;
  EXPECT_EQ(json::parse(ix.out)["points"]["n"].get<size_t>(), n - 1);
  EXPECT_EQ(json::parse(test::Run({test::Binary(), "collections", "info", "c", "--db", db}).out)["spec"]["payload_indexes"],
            (json{{"n", "integer"}}));
  s = test::Run({test::Binary(), "search", "--db", db, "--collection", "c", "--k", "40", "--filter",
                 "{\"n\": {\"$lt\": 3}}", texts[5]});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(json::parse(s.out)["hits"].size(), 3u);
  auto f = test::Run({test::Binary(), "facet", "--db", db, "--collection", "c", "--key", "n", "--filter",
                      "{\"n\": {\"$in\": [1, 2, 5]}}"});
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(json::parse(f.out)["hits"], json::parse(R"([{"value": 1, "count": 1}, {"value": 2, "count": 1}])"));
  auto o = test::Run({test::Binary(), "scroll", "--db", db, "--collection", "c", "--order-by", "n", "--desc", "--limit", "2"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const json ordered = json::parse(o.out)["documents"];
  ASSERT_EQ(ordered.size(), 2u);
  EXPECT_EQ(ordered[0]["id"], "doc" + std::to_string(n - 1));
  EXPECT_EQ(ordered[1]["order_value"].get<double>(), static_cast<double>(n - 2));
  auto p1 = test::Run({test::Binary(), "scroll", "--db", db, "--collection", "c", "--limit", "4", "--filter", "{\"n\": {\"$lt\": 8}}"});
  ASSERT_EQ(p1.exit_code, 0) << p1.err;
  const json page1 = json::parse(p1.out);
  ASSERT_EQ(page1["documents"].size(), 4u);  // doc0..doc7 without doc5: 7 in id order
  auto p2 = test::Run({test::Binary(), "scroll", "--db", db, "--collection", "c", "--limit", "4", "--filter",
                       "{\"n\": {\"$lt\": 8}}", "--after", page1["next_after"].get<std::string>()});
  const json page2 = json::parse(p2.out);
  ASSERT_EQ(page2["documents"].size(), 3u);
  EXPECT_TRUE(page2["next_after"].is_null());
  EXPECT_EQ(page2["documents"][2]["id"], "doc7");
  // Groups: the search's hits grouped by n (one document each), in the search's order.
  s = test::Run({test::Binary(), "search", "--db", db, "--collection", "c", "--k", "40", "--filter", "{\"n\": {\"$lt\": 10}}",
                 texts[3]});
  const json ranked = json::parse(s.out)["hits"];
  auto g = test::Run({test::Binary(), "search", "--db", db, "--collection", "c", "--k", "3", "--group-by", "n",
                      "--group-size", "2", "--filter", "{\"n\": {\"$lt\": 10}}", texts[3]});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  const json grouped = json::parse(g.out)["groups"];
  ASSERT_EQ(grouped.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(grouped[i]["value"], ranked[i]["metadata"]["n"]);
    ASSERT_EQ(grouped[i]["hits"].size(), 1u);
    EXPECT_EQ(grouped[i]["hits"][0]["id"], ranked[i]["id"]);
  }
  EXPECT_NE(test::Run({test::Binary(), "search", "--db", db, "--collection", "c", "--group-size", "2", texts[3]}).exit_code, 0);
  // Dropped again; bad kinds and missing choices are usage errors naming them.
  ix = test::Run({test::Binary(), "collections", "index", "c", "--db", db, "--key", "n", "--drop"});
  ASSERT_EQ(ix.exit_code, 0) << ix.err;
  EXPECT_EQ(json::parse(ix.out)["payload_indexes"], json::object());
  ix = test::Run({test::Binary(), "collections", "index", "c", "--db", db, "--key", "n", "--kind", "keywords"});
  EXPECT_NE(ix.exit_code, 0);
  EXPECT_NE(ix.err.find("keywords"), std::string::npos) << ix.err;
  EXPECT_NE(test::Run({test::Binary(), "collections", "index", "c", "--db", db, "--key", "n"}).exit_code, 0);
}

}  // namespace
}  // namespace moeedb
