// moeedb: the command-line entry point; the commands are plugin/cli/command_table.cpp.
#include <malloc.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "plugin/cli/commands.h"

namespace {

// Every forward pass allocates and frees tensor-sized blocks. By default glibc
// hands freed memory back to the kernel and faults it in again on the next
// pass; keeping it cut system time and sped training up by a third
// (docs/perf.md). The MALLOC_*_ environment variables still win.
void KeepFreedMemory() {
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr) mallopt(M_TRIM_THRESHOLD, 1 << 30);
  if (std::getenv("MALLOC_TOP_PAD_") == nullptr) mallopt(M_TOP_PAD, 256 << 20);
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) mallopt(M_MMAP_THRESHOLD, 32 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  KeepFreedMemory();
  std::ios::sync_with_stdio(false);
  return moeedb::cli::RunCommandLine(moeedb::cli::CommandTable(), std::vector<std::string>(argv + 1, argv + argc));
}
