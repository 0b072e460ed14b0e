#include "base/utf8.h"

#include <cstdint>

namespace moeedb {

bool IsValidUtf8(std::string_view s, size_t* error_offset) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t c = p[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else { if (error_offset) *error_offset = i; return false; }
    if (i + len > n) { if (error_offset) *error_offset = i; return false; }
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) { if (error_offset) *error_offset = i; return false; }
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    const bool overlong = (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      if (error_offset) *error_offset = i;
      return false;
    }
    i += len;
  }
  return true;
}

}  // namespace moeedb
