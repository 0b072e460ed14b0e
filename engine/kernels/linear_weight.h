// LinearWeight: the weight of y = x W^T in the format chosen at load
// (weight_format.h): f32 or bf16 values, or int8 with per-output-channel
// scales. Matmuls run in the compute dtype (EffectiveComputeDtype); a stored
// dtype that differs is widened one matrix at a time at matmul time (the
// converted matrix is then hot in cache for its GEMM), except int8 on a CPU
// with an int8 kernel (VNNI or AVX2), whatever the compute dtype: those
// weights are kept only in the int8 GEMM's packed layout and multiplied in
// int8 (int8_gemm.h), bf16 matrices where the bf16 panel kernel runs (bf16
// compute, or f32 compute on its widening paths: AVX-512 or AVX2), kept
// only in the bf16 GEMM's packed layout (bf16_gemm.h), and f32
// matrices over 1 MB on a CPU with AVX2 and FMA, kept only in 16-column
// panels. One object may hold a stack of matrices ([E, out, in], the experts
// of an MoE block); Matrix(e) is a view of one of them.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "engine/kernels/weight_format.h"

namespace moeedb {

class LinearWeight {
 public:
  LinearWeight() = default;
  // From a float tensor [out, in] or [E, out, in]: a copy, stored
  // transposed ([.., in, out]: the layout OpenBLAS packs fastest), converted
  // or quantised as `format` says. `w` is only read (it may be a mapping).
  static LinearWeight From(const at::Tensor& w, const WeightFormat& format, at::Device device);
  // An uninitialised stack of E matrices [out, in], to be filled by Set().
  static LinearWeight Stack(int64_t E, int64_t out, int64_t in, const WeightFormat& format, at::Device device);
  // Stores the float matrix w [out, in] as matrix e of a Stack.
  void Set(int64_t e, const at::Tensor& w);

  bool defined() const { return w_.defined() || int8_panels_.defined() || bf16_panels_.defined() || panels_.defined(); }
  bool quantized() const { return scale_.defined(); }
  // Whether Apply multiplies in int8 (the int8 GEMM's panels) rather than widening.
  bool int8_gemm() const { return int8_panels_.defined(); }
  // Whether the bf16 values are kept only in the bf16 GEMM's panels.
  bool bf16_gemm() const { return bf16_panels_.defined(); }
  at::ScalarType compute_type() const { return compute_; }
  // Whether Apply multiplies float32 rows as they are, whatever the compute
  // dtype (the int8 and bf16 panel kernels quantise or round rows themselves).
  bool takes_float_rows() const { return int8_gemm() || bf16_gemm() || compute_ == at::kFloat; }
  at::ScalarType stored_type() const {
    return int8_gemm() ? at::kChar : bf16_gemm() ? at::kBFloat16 : w_.defined() ? w_.scalar_type() : at::kFloat;
  }
  // Matrix e of a stack (a view sharing storage).
  LinearWeight Matrix(int64_t e) const;
  int64_t out_features() const { return out_; }
  int64_t in_features() const { return in_; }

  // x [N, in] -> [N, out] in x's dtype, multiplied in compute_type() (x of
  // another dtype is converted; the int8 and bf16 panel kernels take float32
  // rows). A 2-D weight only.
  at::Tensor Apply(const at::Tensor& x) const;
  // Like Apply, into y (a contiguous [N, out] tensor, e.g. a row range of a
  // larger buffer; it keeps its dtype), with no allocation for unquantised
  // weights when x and y are in compute_type().
  void ApplyInto(at::Tensor y, const at::Tensor& x) const;
  // The weights as float32 [.., out, in] (dequantised for int8), contiguous:
  // for the spectral router and tests.
  at::Tensor ToFloat() const;
  // The weights in the compute dtype, [.., out, in] (dequantised for int8; a view).
  at::Tensor Dense() const;
  // Matrix e's packed copy ([out / 16, in, 16], panel_gemm.h), or null when
  // there is none (not f32 on the CPU, too large, or out not a multiple of 16).
  const float* packed_panels(int64_t e = 0) const;
  // Matrix e's float32 values as stored, row-major [in, out] (RowsGemmF32,
  // panel_gemm.h), or null when they are not float32 values on the CPU.
  const float* float_rows(int64_t e = 0) const;
  // Matrix e's operands of Int8GemmF32 (int8_gemm.h), for kernels that call
  // it themselves; all null unless int8_gemm().
  struct Int8Operands {
    const int8_t* panels = nullptr;
    const int32_t* column_terms = nullptr;
    const float* scale = nullptr;
  };
  Int8Operands int8_operands(int64_t e = 0) const;
  // Matrix e's bf16 panels (Bf16GemmF32, bf16_gemm.h); null unless bf16_gemm().
  const uint16_t* bf16_panels(int64_t e = 0) const;
  // Bytes held (values, scales and the packed copy of small matrices).
  int64_t nbytes() const;

 private:
  at::Tensor w_;      // [.., in, out] (transposed): f32 or bf16 values, or int8; undefined with int8_panels_,
                      // bf16_panels_, or a stack kept in panels_ only
  at::Tensor scale_;  // [.., out] float32 when int8, else undefined
  // int8 on a CPU with an int8 kernel: [.., Int8PanelBytes] int8 and
  // [.., Int8ColumnTerms] int32 (int8_gemm.h), in place of w_.
  at::Tensor int8_panels_, int8_terms_;
  // bf16 where the bf16 panel kernel runs (UsesBf16Gemm): [..,
  // Bf16PanelElements] bf16 (bf16_gemm.h), in place of w_.
  at::Tensor bf16_panels_;
  int64_t in_ = 0, out_ = 0;
  // f32 CPU matrices of at most kPanelMaxBytes, also packed for the few-row
  // kernel (panel_gemm.h): [.., out / 16, in, 16]; else undefined. Larger
  // f32 matrices (experts, projections) are kept packed only, in place of
  // w_, where the panel kernel runs (AVX2 and FMA): read in place ([in,
  // out] rows), each k of a 16-column block is another page of w, and their
  // GEMMs ran at 0.18-0.33 of the FMA peak against 0.47-0.75 packed
  // (bench/gemm_kernels, 1024 x 512 experts, a Xeon; with AVX2 alone 0.39-
  // 0.51 against 0.87-0.89, an EPYC).
  at::Tensor panels_;
  static constexpr int64_t kPanelMaxBytes = 1 << 20;
  bool WantsPanels(int64_t in, int64_t out) const;
  // Whether f32 matrices [in, out] in `format` are kept packed only (see
  // panels_).
  static bool PanelsOnly(const WeightFormat& format, at::ScalarType compute, at::Device device, int64_t in,
                         int64_t out);
  // Packs the int8 matrix q [out, in] as matrix e of int8_panels_.
  void PackInt8(int64_t e, const at::Tensor& q);
  // The int8 values [.., in, out], from w_ or unpacked from the panels.
  at::Tensor Int8Values() const;
  // The unquantised values [.., in, out], from w_ or unpacked from the bf16 panels.
  at::Tensor Values() const;
  at::ScalarType compute_ = at::kFloat;
};

// Symmetric per-row int8 quantisation of w [.., out, in]: q = round(w / s),
// s = max|w[row]| / 127 (a zero row gets s = 0 and q = 0).
void QuantizeInt8(const at::Tensor& w, at::Tensor* q, at::Tensor* scale);

}  // namespace moeedb
