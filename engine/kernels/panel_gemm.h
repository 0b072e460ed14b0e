// PanelGemm: y = x · w for float32 with few rows in x, on a weight packed
// once, at load, into column panels.
//
// BLAS GEMMs copy ("pack") the weight into a blocked layout on every call;
// for the few-row GEMMs of small forwards (a server part of ~8 short texts
// gives each expert ~30 rows; a one-text query 1-4) that copy cost twice the
// arithmetic (perf: sgemm_itcopy 23 % vs sgemm_kernel 11 % of a one-text
// forward, docs/perf.md). Packed once, the weight is read straight from
// 16-column panels ([N / 16][K][16], each contiguous, so it stays in L1
// across the row tiles of x) with 6 x 16 register tiles (AVX2 + FMA).
// LinearWeight keeps a packed copy of small matrices only (<= 1 MB; the copy
// doubles their memory) and uses it where it measured faster than BLAS: for
// every row count on one thread (it also beat OpenBLAS's kernel at 137-2048
// rows, hot in cache), up to 32 rows with more threads.
#pragma once

#include <cstdint>

#include "engine/kernels/vector_exp.h"

namespace moeedb {

// True where the kernel can run (x86-64 with AVX2 and FMA; not when
// MOEEDB_PANEL_GEMM=off, which benchmarks use to compare both paths).
bool PanelGemmAvailable();

// Rows of x up to which PanelGemmF32 is used for a weight with K rows when
// the caller runs `threads` compute threads.
int64_t PanelGemmMaxRows(int64_t K, int threads);

// Packs w[K, N] (row-major, N a multiple of 16) into panels[N / 16][K][16].
void PackPanels(const float* w, int64_t K, int64_t N, float* panels);

// y[M, N] = x[M, K] · w, w packed by PackPanels; x and y row-major with
// leading dimensions ldx, ldy; y is overwritten. One thread. On the path
// RowsGemmPathInUse() names: with AVX-512, two panels (32 columns) a tile of
// up to 8 rows; else (and for an odd last panel) the 6 x 16 AVX2 tile. Both
// paths give the same bits (the same FMAs over k for every element).
void PanelGemmF32(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const float* panels, float* y,
                  int64_t ldy);
// PanelGemmF32 on the compute threads (blocks of 128 rows x 8 panels), the
// same bits as on one thread.
void PanelGemmF32Parallel(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const float* panels, float* y,
                          int64_t ldy);
// The same on a given path (anything but AVX-512 on a CPU with it: AVX2).
void PanelGemmF32(SimdLevel path, int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const float* panels,
                  float* y, int64_t ldy);

// y[M, N] = x[M, K] · w for w unpacked, row-major [K, N] with leading
// dimension ldw (N a multiple of 16): the same kernel reading w's rows in
// place, 32 columns a tile with AVX-512 where the CPU has it (else, and for
// a last 16 columns, the 16-column AVX2 tile). For large matrices, where a
// packed copy would double the memory: MoE experts of a few rows each, where
// BLAS's per-call packing of the weight costs as much as the product.
// Requires RowsGemmAvailable(). One thread.
// The path in use by both few-row kernels (PanelGemmF32, RowsGemmF32):
// AVX-512 where the CPU has it, else AVX2 (MOEEDB_ROWS_GEMM=avx2 caps it).
SimdLevel RowsGemmPathInUse();
bool RowsGemmAvailable();          // x86-64 with AVX2 and FMA
void RowsGemmF32(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const float* w, int64_t ldw, float* y,
                 int64_t ldy);
// RowsGemmF32 on the compute threads (blocks of rows and columns).
void RowsGemmF32Parallel(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const float* w, int64_t ldw,
                         float* y, int64_t ldy);
// The same on a given path (anything but AVX-512 on a CPU with it: AVX2).
void RowsGemmF32(SimdLevel path, int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const float* w,
                 int64_t ldw, float* y, int64_t ldy);

}  // namespace moeedb
