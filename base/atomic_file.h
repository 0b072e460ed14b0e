// Whole-file writes that a crash never leaves half done.
#pragma once

#include <string>

#include "base/status.h"

namespace moeedb {

// Writes `bytes` to path + ".tmp", then renames it over `path`: readers see
// the old file or the new one, never a torn one. IOError names the file.
Status WriteFileAtomic(const std::string& path, const std::string& bytes);

}  // namespace moeedb
