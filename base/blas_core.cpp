#include "base/blas_core.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace moeedb {

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

}  // namespace moeedb
