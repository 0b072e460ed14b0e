// A whole file's bytes as a string: what the readers of configs, CSV files
// and evaluation sets start from.
#pragma once

#include <string>

#include "base/status.h"

namespace moeedb {

// NotFound naming `path` when it cannot be opened.
Result<std::string> ReadFileText(const std::string& path);

}  // namespace moeedb
