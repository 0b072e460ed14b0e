// Bf16GemmF32: y = x · w for bf16 weights, multiplied with AVX512-BF16's
// vdpbf16ps (32 bf16 products a instruction, summed in float32 pairs) or,
// where that is slower or missing, widened to float32 and multiplied with
// AVX-512 or AVX2 FMA (Bf16GemmPath).
//
// It serves the experts of an MoE block: per expert a GEMM of a few dozen
// to a few hundred rows, where a library GEMM costs a call, a check of the
// operands and a packing of the weight each time, and the block around it
// converts activations to bf16 and back. Here the weight is packed once, at
// load, into 16-column panels of bf16 pairs (zero-padded: one 64-byte load
// serves 16 columns and 2 rows of w), in blocks of 4 panels interleaved per
// pair of rows, so a register tile reads one contiguous stream), x stays
// float32 (on the vdpbf16ps path each row is rounded to bf16 on the fly,
// nearest-even, as at::to does) and y is float32.
#pragma once

#include <cstdint>

namespace moeedb {

// How the kernel multiplies on this CPU, chosen once per process:
//   kDot    AVX512-BF16's vdpbf16ps on x rounded to bf16 (as at::to does);
//   kWiden  AVX-512 (F, BW): each bf16 pair of w widened to float32 in
//           registers, x's float32 values multiplied in with FMA (not
//           rounded): CPUs without AVX512-BF16 (Skylake-X to Ice Lake, which
//           ran bf16 compute on ATen's GEMM before), and those whose
//           vdpbf16ps issues at less than 1/2.5 of their FMA rate (a probe of
//           both, a few ms, decides: Intel's here at a quarter, AMD's Zen at
//           the same rate). The two paths round differently (x to bf16 or
//           not): a process keeps the path it picked; the ratio measured is
//           far from the margin on the CPUs seen (3.9x and about 1x);
//   kWidenAvx2  the same widening with AVX2 and FMA, 8 columns a register
//           (CPUs without AVX-512): the same bits as kWiden;
//   kNone   the portable loop (no AVX2, or MOEEDB_BF16_GEMM=off).
// MOEEDB_BF16_GEMM=dot|widen|avx2|off forces a path (benchmarks compare them).
enum class Bf16GemmPath { kNone, kDot, kWiden, kWidenAvx2 };
Bf16GemmPath Bf16GemmPathInUse();
// Whether `p` can run on this CPU (kNone always can).
bool Bf16GemmPathRuns(Bf16GemmPath p);
const char* Bf16GemmPathName(Bf16GemmPath p);
// True where a SIMD path runs (any but kNone): bf16 weights are then kept
// only in the packed panels.
bool Bf16GemmAvailable();
// True where the path in use widens w to float32 and multiplies x unrounded
// (kWiden, kWidenAvx2): float32 compute over bf16 weights, so it also serves
// bf16 weights under float32 compute (CPUs whose bf16 compute is slow:
// EffectiveComputeDtype), where ATen widened each matrix before each matmul.
bool Bf16GemmWidens();

// Entries (bf16, as uint16_t) of the packed weight for w[K, N].
int64_t Bf16PanelElements(int64_t K, int64_t N);

// Packs w[K, N] (bf16 bit patterns, row-major: the transposed [in, out]
// weight) into panels of Bf16PanelElements entries.
void PackBf16Panels(const uint16_t* w, int64_t K, int64_t N, uint16_t* panels);
// The inverse: w[K, N] from panels (for tests, Dense() and ToFloat()).
void UnpackBf16Panels(const uint16_t* panels, int64_t K, int64_t N, uint16_t* w);

// y[M, N] = bf16(x[M, K]) · w (kWiden, kWidenAvx2: x · w, x unrounded), w packed by
// PackBf16Panels, products summed in float32; x and y row-major with leading dimensions ldx, ldy; y is
// overwritten. Splits the columns over the compute threads (one thread when
// called inside a parallel region).
void Bf16GemmF32(int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx, const uint16_t* panels, float* y,
                 int64_t ldy);
// The same on a given path (tests and benchmarks compare them); one that
// cannot run here runs the portable loop.
void Bf16GemmF32(Bf16GemmPath path, int64_t M, int64_t N, int64_t K, const float* x, int64_t ldx,
                 const uint16_t* panels, float* y, int64_t ldy);

// float32 -> bf16 bit pattern, round to nearest even (NaN stays NaN).
uint16_t Bf16FromFloat(float f);
float FloatFromBf16(uint16_t b);

}  // namespace moeedb
