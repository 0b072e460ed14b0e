// Bf16GemmF32: y = x · w for bf16 weights, multiplied with AVX512-BF16's
// vdpbf16ps (32 bf16 products a instruction, summed in float32 pairs), for
// CPUs that have it.
//
// It serves the experts of an MoE block: per expert a GEMM of a few dozen
// to a few hundred rows, where a library GEMM costs a call, a check of the
// operands and a packing of the weight each time, and the block around it
// converts activations to bf16 and back. Here the weight is packed once, at
// load, into 16-column panels of bf16 pairs (zero-padded: one 64-byte load
// serves 16 columns and 2 rows of w), in blocks of 4 panels interleaved per
// pair of rows, so a register tile reads one contiguous stream), x stays
// float32 (each row rounded to bf16 on the fly, nearest-even, as at::to
// does) and y is float32.
#pragma once

#include <cstdint>

namespace moeedb {

// True where the kernel can run: x86-64 with AVX512-BF16 (and BW), unless
// MOEEDB_BF16_GEMM=off (benchmarks compare both paths with it).
bool Bf16GemmAvailable();

// Entries (bf16, as uint16_t) of the packed weight for w[K, N].
int64_t Bf16PanelElements(int64_t K, int64_t N);

// Packs w[K, N] (bf16 bit patterns, row-major: the transposed [in, out]
// weight) into panels of Bf16PanelElements entries.
void PackBf16Panels(const uint16_t* w, int64_t K, int64_t N, uint16_t* panels);
// The inverse: w[K, N] from panels (for tests, Dense() and ToFloat()).
void UnpackBf16Panels(const uint16_t* panels, int64_t K, int64_t N, uint16_t* w);

// y[M, N] = bf16(x[M, K]) · w, w packed by PackBf16Panels, products summed
// in float32; x and y row-major with leading dimensions ldx, ldy; y is
// overwritten. Splits the columns over the compute threads (one thread when
// called inside a parallel region).
void Bf16GemmF32(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const uint16_t* panels, float* y,
                 int64_t ldy);

// float32 -> bf16 bit pattern, round to nearest even (NaN stays NaN).
uint16_t Bf16FromFloat(float f);
float FloatFromBf16(uint16_t b);

}  // namespace moeedb
