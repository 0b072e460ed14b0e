// Helpers for the tests: data paths, temporary folders, running the CLI.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace moeedb::test {

std::string DataDir();           // tests/data
std::string Data(const std::string& rel);
std::string Binary();            // the built moeedb CLI

// A fresh folder under /tmp, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

struct CommandResult {
  int exit_code = -1;  // -1: killed by a signal
  int signal = 0;
  std::string out, err;
};
// Runs `args` (no shell) with `input` on stdin.
CommandResult Run(const std::vector<std::string>& args, const std::string& input = "");

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& data);

// A minimal safetensors writer written independently of the engine's, for
// tests that must not trust the code under test: F32 tensors, name order.
void WriteF32Safetensors(const std::string& path,
                         const std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>& tensors);

}  // namespace moeedb::test
