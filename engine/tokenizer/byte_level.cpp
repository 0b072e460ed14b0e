#include "engine/tokenizer/byte_level.h"

#include <unicode/unistr.h>

namespace moeedb {

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::vector<std::string> ByteToUnicodeTable() {
  std::vector<bool> direct(256, false);
  for (int b = '!'; b <= '~'; ++b) direct[b] = true;
  for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
  for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
  int n = 0;
  std::vector<std::string> table(256);
  for (int b = 0; b < 256; ++b) {
    const int cp = direct[b] ? b : 256 + n++;
    icu::UnicodeString u(static_cast<UChar32>(cp));
    u.toUTF8String(table[b]);
  }
  return table;
}

}  // namespace moeedb
