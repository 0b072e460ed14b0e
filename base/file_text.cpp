#include "base/file_text.h"

#include <fstream>
#include <sstream>

namespace moeedb {

Result<std::string> ReadFileText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::NotFound("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace moeedb
