// libFuzzer: tokenizer.json loading, and tokenising arbitrary bytes with the
// test tokenizers (OLMoE's byte-level BPE; BERT's WordPiece, the cut-down
// MiniLM vocabulary of tests/data/wordpiece), and the decode of what they encode.
#include <fstream>
#include <sstream>
#include <string>

#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/wordpiece_tokenizer.h"

#ifndef MOEEDB_TEST_DATA_DIR
#error "MOEEDB_TEST_DATA_DIR must name tests/data"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // The first byte picks the exercise: load the input as a tokenizer.json, or encode it.
  if (size > 0 && data[0] == '{') {
    auto t = moeedb::BpeTokenizer::FromJson(text, "fuzz");
    if (t.ok()) (void)(*t)->Encode("Hello, world! 123", true);
    auto w = moeedb::WordPieceTokenizer::FromJson(text, "fuzz");
    if (w.ok()) (void)(*w)->Encode("Hello, world! 123", true);
    return 0;
  }
  static auto bpe = moeedb::BpeTokenizer::FromFile(MOEEDB_TEST_DATA_DIR "/tokenizers/olmoe/tokenizer.json");
  static auto wordpiece = [] {
    std::ifstream in(MOEEDB_TEST_DATA_DIR "/wordpiece/tokenizer.json");
    std::stringstream ss;
    ss << in.rdbuf();
    return moeedb::WordPieceTokenizer::FromJson(ss.str(), "wordpiece");
  }();
  if (!bpe.ok() || !wordpiece.ok()) __builtin_trap();
  // The first byte's low bit picks the tokenizer.
  const moeedb::Tokenizer& tok = size > 0 && (data[0] & 1) ? static_cast<const moeedb::Tokenizer&>(**wordpiece)
                                                           : static_cast<const moeedb::Tokenizer&>(**bpe);
  auto ids = tok.Encode(text, true);
  if (ids.ok()) {
    for (int32_t id : *ids)
      if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
    auto plain = tok.Encode(text, false);
    if (plain.ok()) (void)tok.Decode(*plain);
  }
  return 0;
}
