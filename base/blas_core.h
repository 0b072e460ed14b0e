// Which kernels OpenBLAS runs in this process (libtorch's at::matmul and
// Faiss's sgemm both call it).
#pragma once

#include <string>

namespace moeedb {

// OpenBLAS built with DYNAMIC_ARCH picks its kernels from the CPU model when
// it loads, and takes a model newer than its own table for Prescott (SSE3):
// Debian's 0.3.21 does so on Emerald Rapids (model 207), where its sgemm then
// runs at a fraction of the AVX-512 kernel's rate, and every at::matmul
// (attention, training) and Faiss's sgemm with it. Before main (a static
// initializer, while the process has one thread), moeedb selects the kernels
// the CPU's features call for (SkylakeX with AVX-512 F/CD/BW/DQ/VL, Haswell
// with AVX2 and FMA), as OPENBLAS_CORETYPE would at load. Nothing changes
// when the library chose another core itself, when OPENBLAS_CORETYPE is set
// (the user's choice), or when OpenBLAS is not the BLAS. The selection is
// linked into a binary that calls BlasCore() (the CLI and server do).
// BlasCore(): one line for logs and benchmarks, e.g. "OpenBLAS SkylakeX
// (selected by moeedb; the library chose Prescott)", or "" without OpenBLAS.
std::string BlasCore();

}  // namespace moeedb
