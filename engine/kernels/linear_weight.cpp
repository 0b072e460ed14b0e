#include "engine/kernels/linear_weight.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "engine/kernels/panel_gemm.h"

namespace moeedb {

namespace {

at::ScalarType ComputeType(const WeightFormat& f, at::Device device) {
  return EffectiveComputeDtype(f, device.is_cuda()) == ComputeDtype::kBF16 ? at::kBFloat16 : at::kFloat;
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
  return w_.scalar_type() == at::kFloat && compute_ == at::kFloat && w_.device().is_cpu() && out % 16 == 0 &&
         in * out * 4 <= kPanelMaxBytes && PanelGemmAvailable();
}

// Weights are stored transposed, [.., in, out] contiguous: OpenBLAS packs a
// non-transposed right operand faster, which matters most for the few-row
// GEMMs of experts in small batches (measured 10-70 % at 8-32 rows, one
// thread; docs/perf.md).
LinearWeight LinearWeight::From(const at::Tensor& w, const WeightFormat& format, at::Device device) {
  LinearWeight lw;
  lw.compute_ = ComputeType(format, device);
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
  const auto opts = at::TensorOptions().device(device);
  lw.w_ = at::empty({E, in, out}, opts.dtype(StoredType(format)));
  if (format.quant == WeightQuant::kInt8) lw.scale_ = at::empty({E, out}, opts.dtype(at::kFloat));
  if (lw.WantsPanels(in, out)) lw.panels_ = at::empty({E, out / 16, in, 16}, at::kFloat);
  return lw;
}

void LinearWeight::Set(int64_t e, const at::Tensor& w) {
  if (quantized()) {
    at::Tensor q, s;
    QuantizeInt8(w, &q, &s);
    w_.select(0, e).copy_(q.t());
    scale_.select(0, e).copy_(s);
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

LinearWeight LinearWeight::Matrix(int64_t e) const {
  LinearWeight lw;
  lw.compute_ = compute_;
  lw.w_ = w_.select(0, e);
  if (scale_.defined()) lw.scale_ = scale_.select(0, e);
  if (panels_.defined()) lw.panels_ = panels_.select(0, e);
  return lw;
}

at::Tensor LinearWeight::Apply(const at::Tensor& x) const {
  at::Tensor y = at::empty({x.size(0), out_features()}, x.options());
  ApplyInto(y, x);
  return y;
}

void LinearWeight::ApplyInto(at::Tensor y, const at::Tensor& x) const {
  // Few rows of f32 against a small packed matrix: the packed kernel, which
  // skips BLAS's per-call packing of the weight (panel_gemm.h).
  if (panels_.defined() && x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat && x.stride(1) == 1 &&
      y.stride(1) == 1 && x.size(0) <= PanelGemmMaxRows(in_features(), at::get_num_threads())) {
    PanelGemmF32(x.size(0), out_features(), in_features(), x.data_ptr<float>(), x.stride(0),
                 panels_.data_ptr<float>(), y.data_ptr<float>(), y.stride(0));
    return;
  }
  if (w_.scalar_type() == compute_) {
    at::mm_out(y, x, w_);
    return;
  }
  // Widen to the compute dtype and put the int8 scale on the output: one
  // conversion pass over the weight, one multiply over the output, and the
  // GEMM runs in the compute dtype's fast path.
  at::mm_out(y, x, w_.to(compute_));
  if (quantized()) y.mul_(scale_);
}

at::Tensor LinearWeight::ToFloat() const {
  at::Tensor f = w_.to(at::kFloat);
  if (quantized()) f = f * scale_.unsqueeze(-2);
  return f.transpose(-2, -1).contiguous();
}

at::Tensor LinearWeight::Dense() const {
  at::Tensor d = quantized() ? (w_.to(at::kFloat) * scale_.unsqueeze(-2)).to(compute_) : w_.to(compute_);
  return d.transpose(-2, -1);
}

int64_t LinearWeight::nbytes() const {
  int64_t n = w_.defined() ? w_.numel() * static_cast<int64_t>(w_.element_size()) : 0;
  if (scale_.defined()) n += scale_.numel() * 4;
  if (panels_.defined()) n += panels_.numel() * 4;
  return n;
}

}  // namespace moeedb
