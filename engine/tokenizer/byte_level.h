// What GPT-2-style byte-level BPE agrees on, shared by the tokenizer that
// reads a tokenizer.json and the trainer that writes one: the pre-tokenizer
// regex and the byte <-> visible-character table.
#pragma once

#include <string>
#include <vector>

namespace moeedb {

// The GPT-2 pre-tokenizer pattern that ByteLevel(use_regex=true) applies.
extern const char* const kGpt2Pattern;

// GPT-2's bytes_to_unicode: printable bytes map to themselves, the others to
// U+0100 onwards, so every byte string is a string of visible characters.
// Entry b is the UTF-8 of the character byte b maps to.
std::vector<std::string> ByteToUnicodeTable();

}  // namespace moeedb
