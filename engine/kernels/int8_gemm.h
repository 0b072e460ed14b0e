// Int8Gemm: y = x · w for int8 weights with per-output-channel scales,
// multiplied in integers: with VNNI (AVX512-VNNI's vpdpbusd: 64 int8 products
// an instruction against 16 float FMAs) where the CPU has it, else with AVX2
// (vpmaddwd on the bytes widened to 16 bits: 16 products an instruction,
// against 8 float FMAs, and half the bytes of f32 weights to read).
//
// x is quantised per row (symmetric, s = max|x| / 127) and offset to
// unsigned (q + 128: vpdpbusd multiplies unsigned by signed bytes); the
// offset's share, 128 · sum_k w[k][j], is taken off per column. The weight
// is packed once, at load, into 16-column panels of 4-byte groups
// ([ceil(N / 16)][ceil(K / 4)][16][4], zero-padded), the layout vpdpbusd
// reads: one 64-byte load serves 16 columns and 4 rows of w.
#pragma once

#include <cstdint>

namespace moeedb {

enum class Int8GemmKernel { kNone, kAvx2, kAvx512Vnni };

// The kernel this process uses: AVX512-VNNI (with BW) where the CPU has it,
// else AVX2 (with FMA), else none (callers widen the weights instead).
// MOEEDB_INT8_GEMM=off picks none, =avx2 the AVX2 kernel on a VNNI CPU
// (benchmarks compare the paths with it). Read once.
Int8GemmKernel Int8GemmKernelInUse();
bool Int8GemmAvailable();  // Int8GemmKernelInUse() != kNone
// Whether this CPU can run kernel k (kNone: always).
bool Int8GemmKernelRuns(Int8GemmKernel k);
const char* Int8GemmKernelName(Int8GemmKernel k);

// Bytes of the packed weight and entries of its column terms for w[K, N].
int64_t Int8PanelBytes(int64_t K, int64_t N);
int64_t Int8ColumnTerms(int64_t N);

// Packs w[K, N] (int8, row-major: the transposed [in, out] weight) into
// panels (Int8PanelBytes) and the per-column offset terms 128 · sum_k w[k][j]
// (Int8ColumnTerms entries, zero past N).
void PackInt8Panels(const int8_t* w, int64_t K, int64_t N, int8_t* panels, int32_t* column_terms);
// The inverse: w[K, N] from panels (for tests and dequantisation).
void UnpackInt8Panels(const int8_t* panels, int64_t K, int64_t N, int8_t* w);

// y[M, N] = quantise(x[M, K]) · w · diag(scale[N]), w packed by
// PackInt8Panels; x and y row-major with leading dimensions ldx, ldy; y is
// overwritten. Splits the columns over the compute threads.
void Int8GemmF32(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const int8_t* panels,
                 const int32_t* column_terms, const float* scale, float* y, int64_t ldy);
// The same with a chosen kernel (tests; one this CPU cannot run, or kNone,
// takes the portable loop, which gives the same integer sums).
void Int8GemmF32(Int8GemmKernel kernel, int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx,
                 const int8_t* panels, const int32_t* column_terms, const float* scale, float* y, int64_t ldy);

}  // namespace moeedb
