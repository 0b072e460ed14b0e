// Process-wide compute settings: one thread pool, sized on purpose
// (libtorch defaults to 1 thread here; torch, OpenBLAS and Faiss share one
// libgomp, and oversubscription is severe), and the BLAS sanity check.
#pragma once

#include <string>

namespace moeedb {

// n <= 0: all online cores.
void SetComputeThreads(int n);
int ComputeThreads();
// Empty if OpenBLAS is what serves BLAS in this process; otherwise a warning
// (the reference BLAS is ~15x slower for matmul). Which OpenBLAS kernels run:
// base/blas_core.h.
std::string BlasWarning();

}  // namespace moeedb
