// The WordPiece tokenizer against the tokenizers library (the reference):
// tests/data/wordpiece holds all-MiniLM-L6-v2's tokenizer cut to a few
// hundred pieces and, per sample text, the ids and the decoded text the
// library gives with it (make_fixture.py). The texts reach accents, CJK,
// control and zero-width characters, punctuation, added tokens written in
// the text, a word over max_input_chars_per_word and words left with no
// split ([UNK]).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/wordpiece_tokenizer.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

TEST(WordPieceTokenizer, MatchesTheTokenizersLibraryOnItsFixture) {
  auto tok = LoadTokenizer(test::Data("wordpiece/tokenizer.json"));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  ASSERT_NE(dynamic_cast<const WordPieceTokenizer*>(tok->get()), nullptr) << "the file's model type picks WordPiece";
  std::ifstream in(test::Data("wordpiece/cases.jsonl"));
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    const auto c = nlohmann::json::parse(line);
    const std::string text = c["text"];
    auto ids = (*tok)->Encode(text, /*add_special=*/true);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>()) << text;
    auto decoded = (*tok)->Decode(*ids);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(*decoded, c["decoded"].get<std::string>()) << text;
    auto bare = (*tok)->Encode(text, /*add_special=*/false);  // the same pieces without [CLS] and [SEP]
    ASSERT_TRUE(bare.ok());
    EXPECT_EQ(*bare, std::vector<int32_t>(ids->begin() + 1, ids->end() - 1)) << text;
    ++cases;
  }
  EXPECT_GE(cases, 16);
}

TEST(WordPieceTokenizer, TruncatesBeforeTheTemplateAndRefusesBadInput) {
  std::ifstream in(test::Data("wordpiece/tokenizer.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  j["truncation"] = {{"max_length", 5}, {"strategy", "LongestFirst"}};
  auto tok = WordPieceTokenizer::FromJson(j.dump(), "truncating");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  auto ids = (*tok)->Encode("the bank raised its interest rates again", true);
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), 5u);  // [CLS], three pieces, [SEP]
  EXPECT_EQ(ids->front(), 101);
  EXPECT_EQ(ids->back(), 102);
  EXPECT_EQ((*ids)[1], *(*tok)->TokenId("the"));

  EXPECT_FALSE((*tok)->Encode("bad \xff byte", true).ok());
  j["truncation"] = {{"max_length", 2}};
  EXPECT_FALSE(WordPieceTokenizer::FromJson(j.dump(), "no room").ok());
  j["truncation"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  auto unsupported = WordPieceTokenizer::FromJson(j.dump(), "whitespace");
  ASSERT_FALSE(unsupported.ok());
  EXPECT_NE(unsupported.status().message().find("Whitespace"), std::string::npos);
}

}  // namespace
}  // namespace moeedb
