#include "engine/kernels/runtime.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

namespace moeedb {

void SetComputeThreads(int n) {
  if (n <= 0) n = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (n <= 0) n = 1;
  // ATen copies its process-wide count into a thread's OpenMP setting lazily,
  // at the thread's first parallel op: pin this thread now, under a lock, or
  // it would take whatever count another thread set last (the embedding
  // workers set theirs to a share of the cores).
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  at::set_num_threads(n);
  at::internal::lazy_init_num_threads();
}

int ComputeThreads() { return at::get_num_threads(); }

namespace {

using CoreNameFn = char* (*)();
using InitFn = void (*)();

// What the library chose at load, before the selection below (empty: not OpenBLAS).
std::string& LoadedBlasCore() {
  static std::string core;
  return core;
}
bool& BlasCoreSelected() {
  static bool selected = false;
  return selected;
}

// The selection: OpenBLAS keeps its kernel table in the exported pointer
// `gotoblas`; gotoblas_dynamic_init() fills it from OPENBLAS_CORETYPE (or the
// CPU model) when it is null, as the library's own load-time constructor
// does. Both are part of every DYNAMIC_ARCH build's dynamic symbols. Nothing
// else the library set at load depends on the core (its buffers are of a
// compile-time size; the blocking is read from the table on every call).
// This runs in the executables moeedb builds, before main; a shared library
// loaded into a host already running BLAS on other threads must not do it.
void SelectBlasCore() {
  auto core_name = reinterpret_cast<CoreNameFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (core_name == nullptr) return;
  LoadedBlasCore() = core_name();
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  if (LoadedBlasCore() != "Prescott" || (forced != nullptr && *forced != '\0')) return;
  __builtin_cpu_init();  // a static initializer may run before the compiler's own
  // SkylakeX's kernels are built for skylake-avx512 (F, CD, BW, DQ, VL), as
  // the library's own test requires VL beside F.
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  const char* want = avx512                                                                ? "SkylakeX"
                     : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "Haswell"
                                                                                         : nullptr;
  auto** table = reinterpret_cast<void**>(dlsym(RTLD_DEFAULT, "gotoblas"));
  auto init = reinterpret_cast<InitFn>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (want == nullptr || table == nullptr || init == nullptr) return;
  void* before = *table;
  setenv("OPENBLAS_CORETYPE", want, 1);
  *table = nullptr;
  init();  // 0.3.21 falls back to its own choice for a name it does not know, never to null
  if (*table == nullptr) *table = before;
  unsetenv("OPENBLAS_CORETYPE");  // child processes choose for themselves, as this one did
  BlasCoreSelected() = std::strcmp(core_name(), want) == 0;
}

const bool kBlasCoreSelected = (SelectBlasCore(), true);

}  // namespace

std::string BlasCore() {
  (void)kBlasCoreSelected;
  auto core_name = reinterpret_cast<CoreNameFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (core_name == nullptr) return "";
  std::string line = std::string("OpenBLAS ") + core_name();
  if (BlasCoreSelected()) line += " (selected by moeedb; the library chose " + LoadedBlasCore() + ")";
  return line;
}

std::string BlasWarning() {
  // Make sure BLAS is loaded (a tiny matmul), then look at the mapped libraries.
  (void)at::matmul(at::ones({2, 2}), at::ones({2, 2}));
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("openblas") != std::string::npos || line.find("libmkl") != std::string::npos) return "";
  return "warning: OpenBLAS is not loaded; torch falls back to the reference BLAS (~15x slower matmul). "
         "Install libopenblas0-openmp (scripts/setup.sh does).";
}

}  // namespace moeedb
