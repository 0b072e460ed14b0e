#include "engine/kernels/linear_weight.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstring>

#include "engine/kernels/bf16_gemm.h"
#include "engine/kernels/int8_gemm.h"
#include "engine/kernels/panel_gemm.h"

namespace moeedb {

namespace {

at::ScalarType ComputeType(const WeightFormat& f, at::Device device) {
  return EffectiveComputeDtype(f, device.is_cuda()) == ComputeDtype::kBF16 ? at::kBFloat16 : at::kFloat;
}

// int8 weights multiplied in int8 on a CPU with an int8 kernel, whatever
// the compute dtype: the kernel takes float32 rows and beats both the f32
// and the bf16 GEMM, where widening the weights before each matmul would
// only add a pass over them.
bool UsesInt8Gemm(const WeightFormat& f, at::ScalarType compute, at::Device device) {
  return f.quant == WeightQuant::kInt8 && (compute == at::kFloat || compute == at::kBFloat16) && device.is_cpu() &&
         Int8GemmAvailable();
}

// bf16 matrices (one, or a stack: experts) multiplied by the bf16 panel
// kernel where it runs (bf16_gemm.h): under bf16 compute, and under float32
// compute (a CPU without fast bf16 compute: EffectiveComputeDtype) where its
// path widens w and multiplies x unrounded, as float32 compute does.
bool UsesBf16Gemm(const WeightFormat& f, at::ScalarType compute, at::Device device) {
  return f.quant == WeightQuant::kNone && f.dtype == ComputeDtype::kBF16 && device.is_cpu() && Bf16GemmAvailable() &&
         (compute == at::kBFloat16 || (compute == at::kFloat && Bf16GemmWidens()));
}

// Packs the [in, out] bf16 matrix t into `panels` (Bf16PanelElements entries).
void PackBf16(const at::Tensor& t, at::Tensor panels) {
  const at::Tensor c = t.to(at::kBFloat16).contiguous();
  PackBf16Panels(reinterpret_cast<const uint16_t*>(c.data_ptr<at::BFloat16>()), c.size(0), c.size(1),
                 reinterpret_cast<uint16_t*>(panels.data_ptr<at::BFloat16>()));
}

at::ScalarType StoredType(const WeightFormat& f) {
  if (f.quant == WeightQuant::kInt8) return at::kChar;
  return f.dtype == ComputeDtype::kBF16 ? at::kBFloat16 : at::kFloat;
}

}  // namespace

void QuantizeInt8(const at::Tensor& w, at::Tensor* q, at::Tensor* scale) {
  at::Tensor wf = w.to(at::kFloat);
  at::Tensor s = wf.abs().amax({-1}) / 127.0;                       // [.., out]
  at::Tensor inv = at::where(s > 0, 1.0 / s, at::zeros_like(s));   // a zero row stays zero
  *q = (wf * inv.unsqueeze(-1)).round_().clamp_(-127, 127).to(at::kChar);
  *scale = s;
}

// A packed copy for the few-row kernel (panel_gemm.h): f32 on the CPU, whole
// 16-column panels, and small enough that doubling it costs little.
bool LinearWeight::WantsPanels(int64_t in, int64_t out) const {
  return w_.defined() && w_.scalar_type() == at::kFloat && compute_ == at::kFloat && w_.device().is_cpu() && out % 16 == 0 &&
         in * out * 4 <= kPanelMaxBytes && PanelGemmAvailable();
}

bool LinearWeight::PanelsOnly(const WeightFormat& format, at::ScalarType compute, at::Device device, int64_t in,
                              int64_t out) {
  // With AVX-512 the panel kernel's 32-column tile beats the rows kernel at
  // every row count; with AVX2 alone its 6 x 16 tile runs experts of few
  // rows 1.5-1.7x faster than the rows kernel on w in place (one text of
  // the OLMoE-shaped model, f32, the 2-core EPYC) and many rows as fast as
  // OpenBLAS on w (32 texts), in the same memory.
  return format.quant == WeightQuant::kNone && StoredType(format) == at::kFloat && compute == at::kFloat &&
         device.is_cpu() && out % 16 == 0 && in * out * 4 > kPanelMaxBytes && PanelGemmAvailable();
}

// Weights are stored transposed, [.., in, out] contiguous: OpenBLAS packs a
// non-transposed right operand faster, which matters most for the few-row
// GEMMs of experts in small batches (measured 10-70 % at 8-32 rows, one
// thread; docs/perf.md).
void LinearWeight::PackInt8(int64_t e, const at::Tensor& q) {
  const at::Tensor t = q.t().contiguous();  // [in, out]
  at::Tensor panels = int8_panels_.dim() == 2 ? int8_panels_.select(0, e) : int8_panels_;
  at::Tensor terms = int8_terms_.dim() == 2 ? int8_terms_.select(0, e) : int8_terms_;
  PackInt8Panels(t.data_ptr<int8_t>(), in_, out_, panels.data_ptr<int8_t>(), terms.data_ptr<int32_t>());
}

at::Tensor LinearWeight::Values() const {
  if (!w_.defined() && panels_.defined()) {  // kept packed only
    const int64_t E = panels_.dim() == 4 ? panels_.size(0) : 1;
    at::Tensor out = at::empty({E, in_, out_}, at::kFloat);
    const float* src = panels_.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    for (int64_t e = 0; e < E; ++e)
      for (int64_t p = 0; p < out_ / 16; ++p)
        for (int64_t k = 0; k < in_; ++k)
          std::memcpy(dst + (e * in_ + k) * out_ + p * 16, src + ((e * (out_ / 16) + p) * in_ + k) * 16, 16 * sizeof(float));
    return panels_.dim() == 4 ? out : out.select(0, 0);
  }
  if (!bf16_gemm()) return w_;
  const int64_t E = bf16_panels_.dim() == 2 ? bf16_panels_.size(0) : 1;
  at::Tensor out = at::empty({E, in_, out_}, at::kBFloat16);
  for (int64_t e = 0; e < E; ++e)
    UnpackBf16Panels(bf16_panels(e), in_, out_, reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>()) + e * in_ * out_);
  return bf16_panels_.dim() == 2 ? out : out.select(0, 0);
}

at::Tensor LinearWeight::Int8Values() const {
  if (!int8_gemm()) return w_;
  const int64_t E = int8_panels_.dim() == 2 ? int8_panels_.size(0) : 1;
  at::Tensor out = at::empty({E, in_, out_}, at::kChar);
  for (int64_t e = 0; e < E; ++e)
    UnpackInt8Panels(int8_panels_.data_ptr<int8_t>() + e * Int8PanelBytes(in_, out_), in_, out_,
                     out.data_ptr<int8_t>() + e * in_ * out_);
  return int8_panels_.dim() == 2 ? out : out.select(0, 0);
}

LinearWeight LinearWeight::From(const at::Tensor& w, const WeightFormat& format, at::Device device) {
  LinearWeight lw;
  lw.compute_ = ComputeType(format, device);
  lw.out_ = w.size(-2);
  lw.in_ = w.size(-1);
  if (UsesInt8Gemm(format, lw.compute_, device)) {
    at::Tensor q;
    QuantizeInt8(w, &q, &lw.scale_);
    const bool stack = w.dim() == 3;
    const int64_t E = stack ? w.size(0) : 1;
    lw.int8_panels_ = at::empty({E, Int8PanelBytes(lw.in_, lw.out_)}, at::kChar);
    lw.int8_terms_ = at::empty({E, Int8ColumnTerms(lw.out_)}, at::kInt);
    if (!stack) {
      lw.int8_panels_ = lw.int8_panels_.select(0, 0);
      lw.int8_terms_ = lw.int8_terms_.select(0, 0);
    }
    for (int64_t e = 0; e < E; ++e) lw.PackInt8(e, stack ? q.select(0, e) : q);
    return lw;
  }
  if (UsesBf16Gemm(format, lw.compute_, device)) {
    const bool stack = w.dim() == 3;
    const int64_t E = stack ? w.size(0) : 1;
    lw.bf16_panels_ = at::empty({E, Bf16PanelElements(lw.in_, lw.out_)}, at::kBFloat16);
    for (int64_t e = 0; e < E; ++e) PackBf16((stack ? w.select(0, e) : w).t(), lw.bf16_panels_.select(0, e));
    if (!stack) lw.bf16_panels_ = lw.bf16_panels_.select(0, 0);
    return lw;
  }
  if (PanelsOnly(format, lw.compute_, device, lw.in_, lw.out_)) {
    // One matrix transposed at a time: no whole second copy of a stack.
    const int64_t E = w.dim() == 3 ? w.size(0) : 1, in = lw.in_, out = lw.out_;
    lw.panels_ = at::empty({E, out / 16, in, 16}, at::kFloat);
    for (int64_t e = 0; e < E; ++e) {
      const at::Tensor t = (w.dim() == 3 ? w.select(0, e) : w).t().to(at::kFloat).contiguous();
      PackPanels(t.data_ptr<float>(), in, out, lw.panels_.data_ptr<float>() + e * in * out);
    }
    if (w.dim() == 2) lw.panels_ = lw.panels_.select(0, 0);
    return lw;
  }
  if (format.quant == WeightQuant::kInt8) {
    QuantizeInt8(w, &lw.w_, &lw.scale_);
    lw.w_ = lw.w_.transpose(-2, -1).contiguous().to(device);
    lw.scale_ = lw.scale_.to(device);
  } else {
    lw.w_ = w.transpose(-2, -1).to(device, StoredType(format)).contiguous();
  }
  const int64_t in = lw.in_features(), out = lw.out_features();
  if (lw.WantsPanels(in, out)) {
    const int64_t E = lw.w_.dim() == 3 ? lw.w_.size(0) : 1;
    lw.panels_ = at::empty({E, out / 16, in, 16}, at::kFloat);
    for (int64_t e = 0; e < E; ++e)
      PackPanels(lw.w_.data_ptr<float>() + e * in * out, in, out, lw.panels_.data_ptr<float>() + e * in * out);
    if (lw.w_.dim() == 2) lw.panels_ = lw.panels_.select(0, 0);
  }
  return lw;
}

LinearWeight LinearWeight::Stack(int64_t E, int64_t out, int64_t in, const WeightFormat& format,
                                 at::Device device) {
  LinearWeight lw;
  lw.compute_ = ComputeType(format, device);
  lw.in_ = in;
  lw.out_ = out;
  const auto opts = at::TensorOptions().device(device);
  if (UsesInt8Gemm(format, lw.compute_, device)) {
    lw.int8_panels_ = at::empty({E, Int8PanelBytes(in, out)}, at::kChar);
    lw.int8_terms_ = at::empty({E, Int8ColumnTerms(out)}, at::kInt);
  } else if (UsesBf16Gemm(format, lw.compute_, device)) {
    lw.bf16_panels_ = at::empty({E, Bf16PanelElements(in, out)}, at::kBFloat16);
  } else if (PanelsOnly(format, lw.compute_, device, in, out)) {
    lw.panels_ = at::empty({E, out / 16, in, 16}, at::kFloat);
    return lw;
  } else {
    lw.w_ = at::empty({E, in, out}, opts.dtype(StoredType(format)));
  }
  if (format.quant == WeightQuant::kInt8) lw.scale_ = at::empty({E, out}, opts.dtype(at::kFloat));
  if (lw.WantsPanels(in, out)) lw.panels_ = at::empty({E, out / 16, in, 16}, at::kFloat);
  return lw;
}

void LinearWeight::Set(int64_t e, const at::Tensor& w) {
  if (quantized()) {
    at::Tensor q, s;
    QuantizeInt8(w, &q, &s);
    if (int8_gemm()) PackInt8(e, q);
    else w_.select(0, e).copy_(q.t());
    scale_.select(0, e).copy_(s);
  } else if (bf16_gemm()) {
    PackBf16(w.t(), bf16_panels_.select(0, e));
  } else if (!w_.defined()) {  // kept packed only
    const at::Tensor t = w.t().to(at::kFloat).contiguous();
    PackPanels(t.data_ptr<float>(), in_features(), out_features(), panels_.select(0, e).data_ptr<float>());
    return;
  } else {
    w_.select(0, e).copy_(w.t());
  }
  if (panels_.defined())
    PackPanels(w_.select(0, e).data_ptr<float>(), in_features(), out_features(), panels_.select(0, e).data_ptr<float>());
}

const float* LinearWeight::packed_panels(int64_t e) const {
  if (!panels_.defined()) return nullptr;
  return panels_.data_ptr<float>() + (panels_.dim() == 4 ? e * in_features() * out_features() : 0);
}

const float* LinearWeight::float_rows(int64_t e) const {
  if (!w_.defined() || w_.scalar_type() != at::kFloat || !w_.device().is_cpu() || !w_.is_contiguous() ||
      quantized())
    return nullptr;
  return w_.data_ptr<float>() + (w_.dim() == 3 ? e * in_ * out_ : 0);
}

LinearWeight LinearWeight::Matrix(int64_t e) const {
  LinearWeight lw;
  lw.compute_ = compute_;
  lw.in_ = in_;
  lw.out_ = out_;
  if (w_.defined()) lw.w_ = w_.select(0, e);
  if (int8_panels_.defined()) {
    lw.int8_panels_ = int8_panels_.select(0, e);
    lw.int8_terms_ = int8_terms_.select(0, e);
  }
  if (bf16_panels_.defined()) lw.bf16_panels_ = bf16_panels_.select(0, e);
  if (scale_.defined()) lw.scale_ = scale_.select(0, e);
  if (panels_.defined()) lw.panels_ = panels_.select(0, e);
  return lw;
}

LinearWeight::Int8Operands LinearWeight::int8_operands(int64_t e) const {
  if (!int8_gemm()) return {};
  // Pointer arithmetic, as packed_panels: kernels call this per expert, in parallel.
  const int64_t m = int8_panels_.dim() == 2 ? e : 0;
  return {int8_panels_.data_ptr<int8_t>() + m * int8_panels_.size(-1),
          int8_terms_.data_ptr<int32_t>() + m * int8_terms_.size(-1), scale_.data_ptr<float>() + m * out_};
}

const uint16_t* LinearWeight::bf16_panels(int64_t e) const {
  if (!bf16_gemm()) return nullptr;
  const int64_t m = bf16_panels_.dim() == 2 ? e : 0;
  return reinterpret_cast<const uint16_t*>(bf16_panels_.data_ptr<at::BFloat16>()) + m * bf16_panels_.size(-1);
}

at::Tensor LinearWeight::Apply(const at::Tensor& x) const {
  at::Tensor y = at::empty({x.size(0), out_features()}, x.options());
  ApplyInto(y, x);
  return y;
}

void LinearWeight::ApplyInto(at::Tensor y, const at::Tensor& x) const {
  if (int8_gemm()) {  // float32 rows in, float32 out; y keeps its own dtype
    const at::Tensor xc = x.scalar_type() != at::kFloat ? x.to(at::kFloat).contiguous()
                          : x.stride(1) == 1             ? x
                                                         : x.contiguous();
    if (y.scalar_type() == at::kFloat && y.stride(1) == 1) {
      Int8GemmF32(xc.size(0), out_, in_, xc.data_ptr<float>(), xc.stride(0), int8_panels_.data_ptr<int8_t>(),
                  int8_terms_.data_ptr<int32_t>(), scale_.data_ptr<float>(), y.data_ptr<float>(), y.stride(0));
    } else {
      at::Tensor tmp = at::empty({xc.size(0), out_}, xc.options());
      Int8GemmF32(xc.size(0), out_, in_, xc.data_ptr<float>(), xc.stride(0), int8_panels_.data_ptr<int8_t>(),
                  int8_terms_.data_ptr<int32_t>(), scale_.data_ptr<float>(), tmp.data_ptr<float>(), out_);
      y.copy_(tmp);
    }
    return;
  }
  if (bf16_gemm()) {  // float32 rows in, float32 out; y keeps its own dtype
    const at::Tensor xf = x.to(at::kFloat).contiguous();
    const bool direct = y.scalar_type() == at::kFloat && y.stride(1) == 1;
    at::Tensor out = direct ? y : at::empty({xf.size(0), out_}, xf.options());
    Bf16GemmF32(xf.size(0), out_, in_, xf.data_ptr<float>(), xf.stride(0), bf16_panels(), out.data_ptr<float>(),
                out.stride(0));
    if (!direct) y.copy_(out);
    return;
  }
  if (!w_.defined() && panels_.defined()) {  // kept packed only: the packed kernel at any rows, on every thread
    const at::Tensor xf = x.to(at::kFloat).contiguous();
    const bool direct = y.scalar_type() == at::kFloat && y.stride(1) == 1;
    at::Tensor out = direct ? y : at::empty({xf.size(0), out_}, xf.options());
    PanelGemmF32Parallel(xf.size(0), out_features(), in_features(), xf.data_ptr<float>(), xf.stride(0),
                         panels_.data_ptr<float>(), out.data_ptr<float>(), out.stride(0));
    if (!direct) y.copy_(out);
    return;
  }
  // Few rows of f32 against a small packed matrix: the packed kernel, which
  // skips BLAS's per-call packing of the weight (panel_gemm.h).
  if (panels_.defined() && x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat && x.stride(1) == 1 &&
      y.stride(1) == 1 && x.size(0) <= PanelGemmMaxRows(in_features(), at::get_num_threads())) {
    PanelGemmF32(x.size(0), out_features(), in_features(), x.data_ptr<float>(), x.stride(0),
                 panels_.data_ptr<float>(), y.data_ptr<float>(), y.stride(0));
    return;
  }
  // Float32 values on a CPU with AVX-512: the rows kernel on w in place, on
  // every thread (OpenBLAS may run AVX2 kernels there: docs/perf.md).
  if (w_.dim() == 2 && out_ % 16 == 0 && RowsGemmAvailable() && RowsGemmPathInUse() == SimdLevel::kAvx512 &&
      float_rows() != nullptr && x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat &&
      x.stride(1) == 1 && y.stride(1) == 1) {
    RowsGemmF32Parallel(x.size(0), out_, in_, x.data_ptr<float>(), x.stride(0), float_rows(), out_,
                        y.data_ptr<float>(), y.stride(0));
    return;
  }
  // BLAS in the compute dtype: rows of another dtype (float32 from the packed
  // attention under bf16 compute) are converted, and y keeps its own dtype,
  // as on the panel kernels' paths above.
  const at::Tensor xc = x.scalar_type() == compute_ ? x : x.to(compute_);
  const bool direct = y.scalar_type() == compute_;
  at::Tensor out = direct ? y : at::empty({xc.size(0), out_}, xc.options());
  if (w_.scalar_type() == compute_) {
    at::mm_out(out, xc, w_);
  } else {
    // Widen to the compute dtype and put the int8 scale on the output: one
    // conversion pass over the weight, one multiply over the output, and the
    // GEMM runs in the compute dtype's fast path.
    at::mm_out(out, xc, w_.to(compute_));
    if (quantized()) out.mul_(scale_);
  }
  if (!direct) y.copy_(out);
}

at::Tensor LinearWeight::ToFloat() const {
  at::Tensor f = (quantized() ? Int8Values() : Values()).to(at::kFloat);
  if (quantized()) f = f * scale_.unsqueeze(-2);
  return f.transpose(-2, -1).contiguous();
}

at::Tensor LinearWeight::Dense() const {
  at::Tensor d = quantized() ? (Int8Values().to(at::kFloat) * scale_.unsqueeze(-2)).to(compute_) : Values().to(compute_);
  return d.transpose(-2, -1);
}

int64_t LinearWeight::nbytes() const {
  int64_t n = w_.defined() ? w_.numel() * static_cast<int64_t>(w_.element_size()) : 0;
  if (int8_panels_.defined()) n += int8_panels_.numel() + int8_terms_.numel() * 4;
  if (bf16_panels_.defined()) n += bf16_panels_.numel() * 2;
  if (scale_.defined()) n += scale_.numel() * 4;
  if (panels_.defined()) n += panels_.numel() * 4;
  return n;
}

}  // namespace moeedb
