#include "engine/kernels/runtime.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <unistd.h>

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
