#include "base/atomic_file.h"

#include <filesystem>
#include <fstream>

namespace moeedb {

Status WriteFileAtomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << bytes;
    f.flush();
    if (!f) return Status::IOError("cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::IOError("cannot rename " + tmp + " to " + path + ": " + ec.message());
  return Status::OK();
}

}  // namespace moeedb
