// The web console's files (plugin/server/console/), compiled into the binary
// by embed_files.cmake so `moeedb serve` needs nothing beside it and fetches
// nothing at run time.
#pragma once

#include <string_view>

namespace moeedb {

struct ConsoleAsset {
  std::string_view name;          // file name, e.g. "console.js"
  std::string_view content_type;  // from the extension
  std::string_view body;
};

// nullptr when the console has no such file.
const ConsoleAsset* FindConsoleAsset(std::string_view name);

}  // namespace moeedb
