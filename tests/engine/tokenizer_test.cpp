// The BPE tokenizer against llama.cpp's reference ids for the GPT-NeoX
// vocabulary (identical to OLMoE's for ordinary text), plus the pipeline
// pieces the reference strings do not reach.
#include <gtest/gtest.h>

#include <sstream>

#include "engine/tokenizer/bpe_tokenizer.h"
#include "base/utf8.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

std::vector<std::string> SplitOn(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  size_t start = 0, pos;
  while ((pos = s.find(sep, start)) != std::string::npos) {
    out.push_back(s.substr(start, pos - start));
    start = pos + sep.size();
  }
  out.push_back(s.substr(start));
  return out;
}

class OlmoeTokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto t = BpeTokenizer::FromFile(test::Data("tokenizers/olmoe/tokenizer.json"));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    tok_ = std::move(t).value().release();
  }
  static void TearDownTestSuite() { delete tok_; }
  static BpeTokenizer* tok_;
};
BpeTokenizer* OlmoeTokenizer::tok_ = nullptr;

TEST_F(OlmoeTokenizer, AllLlamaCppReferenceStringsMatch) {
  const std::string dir = test::Data("tokenizers/llama.cpp-vocab-tests/");
  std::vector<std::string> inputs = SplitOn(test::ReadFile(dir + "ggml-vocab-mpt.gguf.inp"), "\n__ggml_vocab_test__\n");
  std::vector<std::string> outputs = SplitOn(test::ReadFile(dir + "ggml-vocab-mpt.gguf.out"), "\n");
  // The .inp ends with a separator, so its last chunk is empty: 46 strings.
  ASSERT_EQ(inputs.back(), "");
  inputs.pop_back();
  ASSERT_EQ(inputs.size(), 46u);
  ASSERT_GE(outputs.size(), inputs.size());
  int mismatches = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<int32_t> expected;
    std::istringstream ss(outputs[i]);
    for (int32_t id; ss >> id;) expected.push_back(id);
    auto ids = tok_->Encode(inputs[i], /*add_special=*/false);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    if (*ids != expected) {
      ++mismatches;
      ADD_FAILURE() << "string " << i << " '" << inputs[i] << "': expected [" << outputs[i] << "]";
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_F(OlmoeTokenizer, DolmaExampleFromDataReadme) {
  auto ids = tok_->Encode("This is a document with no newlines.", true);
  ASSERT_TRUE(ids.ok());
  // OLMoE's tokenizer.json post-processor is ByteLevel: it adds no EOS.
  EXPECT_EQ(*ids, (std::vector<int32_t>{1552, 310, 247, 3389, 342, 642, 747, 8737, 15}));
}

TEST_F(OlmoeTokenizer, AddedTokensAreSplitOutBeforeBpe) {
  // Runs of spaces and <|endoftext|> are added tokens matched on the raw text.
  auto ids = tok_->Encode("a<|endoftext|>b", false);
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), 3u);
  EXPECT_EQ((*ids)[1], 50279);
  auto spaces = tok_->Encode("x   y", false);  // three spaces: the added token 50275
  ASSERT_TRUE(spaces.ok());
  EXPECT_NE(std::find(spaces->begin(), spaces->end(), 50275), spaces->end());
}

TEST_F(OlmoeTokenizer, NfcNormalisesBeforeBpe) {
  // "e" + combining acute (NFD) encodes like the precomposed "é" (NFC).
  auto nfd = tok_->Encode("caf\x65\xcc\x81", false);
  auto nfc = tok_->Encode("caf\xc3\xa9", false);
  ASSERT_TRUE(nfd.ok() && nfc.ok());
  EXPECT_EQ(*nfd, *nfc);
}

TEST_F(OlmoeTokenizer, DecodeInvertsEncode) {
  const std::string text = "Héllo wörld!  Tabs\tand\nnewlines, 12345 and emoji \xf0\x9f\x98\x80.";
  auto ids = tok_->Encode(text, false);
  ASSERT_TRUE(ids.ok());
  auto back = tok_->Decode(*ids);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, text);
}

TEST_F(OlmoeTokenizer, InvalidUtf8IsAnError) {
  for (const std::string bad : {std::string("abc\xff"), std::string("\xc3"), std::string("\xed\xa0\x80"),
                                std::string("\xc0\xaf")}) {
    auto ids = tok_->Encode(bad, false);
    ASSERT_FALSE(ids.ok());
    EXPECT_NE(ids.status().message().find("invalid UTF-8"), std::string::npos);
  }
}

TEST(Utf8, ValidatorAcceptsAndRejects) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("\xe2\x82\xac \xf0\x9f\x98\x80"));
  size_t off = 99;
  EXPECT_FALSE(IsValidUtf8("ab\xe2\x82", &off));  // truncated sequence
  EXPECT_EQ(off, 2u);
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe0\x80\x80"));      // overlong
}

// A tiny hand-written tokenizer.json: a TemplateProcessing post-processor
// (BOS + text + EOS), a Qwen-style Split pre-tokenizer, and merges given as
// arrays (the newer format). Expected ids are derived by hand below.
const char* kTinyTokenizer = R"({
  "version": "1.0",
  "added_tokens": [
    {"id": 0, "content": "<s>", "special": true, "lstrip": false, "rstrip": false, "normalized": false, "single_word": false},
    {"id": 1, "content": "</s>", "special": true, "lstrip": false, "rstrip": false, "normalized": false, "single_word": false}
  ],
  "normalizer": {"type": "NFC"},
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\p{N}| ?\\p{L}+|\\s+"}, "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
  ]},
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
               {"SpecialToken": {"id": "</s>", "type_id": 0}}],
    "pair": [],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]},
                       "</s>": {"id": "</s>", "ids": [1], "tokens": ["</s>"]}}},
  "model": {"type": "BPE", "vocab": {"<s>": 0, "</s>": 1, "a": 2, "b": 3, "Ġ": 4, "1": 5, "2": 6,
                                      "ab": 7, "Ġab": 8, "Ġa": 9},
            "merges": [["a", "b"], ["Ġ", "ab"], ["Ġ", "a"]]}
})";

TEST(TinyTokenizer, TemplateSplitAndArrayMerges) {
  auto t = BpeTokenizer::FromJson(kTinyTokenizer, "tiny");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // "ab ab12": pieces "ab", " ab", "1", "2" (digits split one by one);
  // "ab" -> a+b (rank 0) -> 7; " ab" -> Ġ a b -> Ġ ab (rank 0) -> Ġab (rank 1) -> 8.
  auto ids = (*t)->Encode("ab ab12", true);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(*ids, (std::vector<int32_t>{0, 7, 8, 5, 6, 1}));
  auto plain = (*t)->Encode("ab ab12", false);
  EXPECT_EQ(*plain, (std::vector<int32_t>{7, 8, 5, 6}));
  // " a": Ġ a -> "Ġa" by rank 2 (the "ab" merge does not apply).
  EXPECT_EQ(*(*t)->Encode(" a", false), (std::vector<int32_t>{9}));
  EXPECT_EQ((*t)->vocab_size(), 10);
}

TEST(TinyTokenizer, UnsupportedComponentsFailAtLoad) {
  std::string s = kTinyTokenizer;
  s.replace(s.find("\"NFC\""), 5, "\"Precompiled\"");
  auto t = BpeTokenizer::FromJson(s, "tiny");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("Precompiled"), std::string::npos);
  EXPECT_FALSE(BpeTokenizer::FromJson("{not json", "x").ok());
  EXPECT_FALSE(BpeTokenizer::FromFile("/nonexistent/tokenizer.json").ok());
}

}  // namespace
}  // namespace moeedb
