// libFuzzer: a safetensors file (header and data offsets) and a sharded
// checkpoint's index, read from a file the way a model folder is.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/io/safetensors.h"

namespace {
std::string Dir() {
  static const std::string dir = [] {
    static char tmpl[] = "/tmp/moeedb-fuzz-st-XXXXXX";
    if (!mkdtemp(tmpl)) __builtin_trap();
    // libFuzzer ends with exit(): the folder goes with the process.
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(tmpl, ec);
    });
    return std::string(tmpl);
  }();
  return dir;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = Dir();
  const bool as_index = size > 0 && data[0] == '{';  // JSON: also try it as model.safetensors.index.json
  {
    std::ofstream(dir + "/model.safetensors", std::ios::binary).write(reinterpret_cast<const char*>(data), size);
  }
  if (auto f = moeedb::SafetensorsFile::Open(dir + "/model.safetensors"); f.ok())
    for (const auto& [name, v] : (*f)->tensors()) {
      const auto* p = static_cast<const volatile uint8_t*>(v.data);
      if (v.nbytes > 0) (void)(p[0] + p[v.nbytes - 1]);  // every view lies inside the mapping
    }
  if (as_index) {
    std::remove((dir + "/model.safetensors").c_str());
    std::ofstream(dir + "/model.safetensors.index.json", std::ios::binary).write(reinterpret_cast<const char*>(data), size);
    (void)moeedb::Checkpoint::OpenDir(dir);
    std::remove((dir + "/model.safetensors.index.json").c_str());
  }
  return 0;
}
