// A collection's name, checked once here for every front end (the CLI, the
// collections API, Qdrant's and Chroma's APIs, the C API) before anything is
// created: 1-128 bytes of valid UTF-8, no control characters, no path
// separators ('/' or '\'), not made of dots only ("." and ".." name folders).
// Qdrant and Chroma add their own stricter rules in their routers (Qdrant:
// none of < > : " | ? *; Chroma: 3-512 of [a-zA-Z0-9._-]).
#pragma once

#include <string>

#include "base/status.h"

namespace moeedb {

inline constexpr size_t kMaxCollectionNameBytes = 128;

// InvalidArgument saying what is wrong, with the name shown escaped (a
// control character as \xNN), else OK.
Status CheckCollectionName(const std::string& name);

}  // namespace moeedb
