// libFuzzer: tokenizer.json loading, and tokenising arbitrary bytes with the
// test tokenizer (OLMoE's byte-level BPE), and the decode of what it encodes.
#include <string>

#include "engine/tokenizer/bpe_tokenizer.h"

#ifndef MOEEDB_TEST_DATA_DIR
#error "MOEEDB_TEST_DATA_DIR must name tests/data"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // The first byte picks the exercise: load the input as a tokenizer.json, or encode it.
  if (size > 0 && data[0] == '{') {
    auto t = moeedb::BpeTokenizer::FromJson(text, "fuzz");
    if (t.ok()) (void)(*t)->Encode("Hello, world! 123", true);
    return 0;
  }
  static auto tok = moeedb::BpeTokenizer::FromFile(MOEEDB_TEST_DATA_DIR "/tokenizers/olmoe/tokenizer.json");
  if (!tok.ok()) __builtin_trap();
  auto ids = (*tok)->Encode(text, true);
  if (ids.ok()) {
    for (int32_t id : *ids)
      if (id < 0 || id >= (*tok)->vocab_size()) __builtin_trap();
    auto plain = (*tok)->Encode(text, false);
    if (plain.ok()) (void)(*tok)->Decode(*plain);
  }
  return 0;
}
