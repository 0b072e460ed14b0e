// UTF-8 validation (RFC 3629: no overlongs, no surrogates, <= U+10FFFF).
#pragma once

#include <cstddef>
#include <string_view>

namespace moeedb {

// True if `s` is valid UTF-8; otherwise false and *error_offset (if given)
// is the byte offset of the first invalid sequence.
bool IsValidUtf8(std::string_view s, size_t* error_offset = nullptr);

}  // namespace moeedb
