#include "engine/model/moe_block.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "engine/kernels/bf16_gemm.h"
#include "engine/kernels/int8_gemm.h"
#include "engine/kernels/panel_gemm.h"
#include "engine/io/tensor_from_view.h"
#include "engine/kernels/tensor_ops.h"
#include "engine/kernels/vector_exp.h"
#include "engine/model/forward_profile.h"

namespace moeedb {

namespace {

Result<const TensorView*> Find2D(const Checkpoint& ckpt, const std::vector<std::string>& names,
                                 const std::vector<int64_t>& shape) {
  const TensorView* v = nullptr;
  for (const auto& n : names)
    if ((v = ckpt.Find(n)) != nullptr) break;
  if (v == nullptr) return Status::NotFound("tensor '" + names[0] + "' is missing from " + ckpt.Describe());
  if (v->shape != shape)
    return Status::InvalidArgument("tensor '" + v->name + "' in " + v->file + " has shape " + ShapeToString(v->shape) +
                                   " but the config implies " + ShapeToString(shape));
  return v;
}

Result<at::Tensor> Load2D(const Checkpoint& ckpt, const std::vector<std::string>& names,
                          const std::vector<int64_t>& shape) {
  MOEEDB_ASSIGN_OR_RETURN(const TensorView* v, Find2D(ckpt, names, shape));
  return TensorFromView(*v);
}

// [N, 2I] -> silu(gate) * up, [N, I].
at::Tensor SiluGlu(const at::Tensor& gu) {
  const int64_t inter = gu.size(-1) / 2;
  return at::silu(gu.narrow(-1, 0, inter)).mul_(gu.narrow(-1, inter, inter));
}

}  // namespace

Result<MoeBlock> MoeBlock::Load(const Checkpoint& ckpt, const ModelFamily& fam, const std::string& prefix,
                                const MoeBlockSpec& spec, const WeightFormat& format, at::Device device,
                                const LoadVisitor& visit) {
  MoeBlock b;
  b.spec_ = spec;
  b.shared_kind_ = spec.shared_intermediate > 0 ? fam.shared : SharedExpertKind::kNone;
  const int64_t E = spec.num_experts, H = spec.hidden, I = spec.expert_intermediate;
  std::vector<std::string> router_names;
  for (const auto& r : fam.router_names) router_names.push_back(prefix + r + ".weight");
  MOEEDB_ASSIGN_OR_RETURN(at::Tensor router, Load2D(ckpt, router_names, {E, H}));
  if (visit) visit("router", router);
  b.router_ = router.to(device);
  b.mlp_ = fam.expert_mlp;
  b.unweighted_ = fam.unweighted_experts;
  if (fam.router_bias) {
    MOEEDB_ASSIGN_OR_RETURN(const TensorView* rb, Find2D(ckpt, {prefix + fam.router_names[0] + ".bias"}, {E}));
    MOEEDB_ASSIGN_OR_RETURN(at::Tensor rbt, TensorFromView(*rb));
    if (visit) visit("router", rbt);
    b.router_bias_ = rbt.to(device);
    b.router64_ = b.router_.to(at::kDouble);  // Route's float64 path: the kernel has no bias
  } else if (device.is_cpu()) {
    const at::Tensor rc = b.router_.contiguous();
    b.router_kernel_ = RouterKernel(rc.data_ptr<float>(), E, H);
  } else {
    b.router64_ = b.router_.to(at::kDouble);
  }

  if (fam.expert_mlp == ExpertMlp::kGelu) {
    // Per-expert up (with its bias) and down; one output bias for the block.
    b.gate_up_ = LinearWeight::Stack(E, I, H, format, device);
    b.down_ = LinearWeight::Stack(E, H, I, format, device);
    b.up_bias_ = at::empty({E, I}, at::kFloat);
    for (int64_t e = 0; e < E; ++e) {
      const std::string p = prefix + "experts." + std::to_string(e) + ".";
      MOEEDB_ASSIGN_OR_RETURN(const TensorView* uv, Find2D(ckpt, {p + fam.expert_up + ".weight"}, {I, H}));
      MOEEDB_ASSIGN_OR_RETURN(const TensorView* ubv, Find2D(ckpt, {p + fam.expert_up + ".bias"}, {I}));
      MOEEDB_ASSIGN_OR_RETURN(const TensorView* dv, Find2D(ckpt, {p + fam.expert_down + ".weight"}, {H, I}));
      MOEEDB_ASSIGN_OR_RETURN(at::Tensor u, TensorFromView(*uv));
      MOEEDB_ASSIGN_OR_RETURN(at::Tensor ub, TensorFromView(*ubv));
      MOEEDB_ASSIGN_OR_RETURN(at::Tensor d, TensorFromView(*dv));
      if (visit) {
        visit("gate_up", u);
        visit("gate_up", ub);
        visit("down", d);
      }
      b.gate_up_.Set(e, u);
      b.down_.Set(e, d);
      b.up_bias_[e].copy_(ub);
      ReleasePages(*uv);
      ReleasePages(*dv);
    }
    b.up_bias_ = b.up_bias_.to(device);
    MOEEDB_ASSIGN_OR_RETURN(const TensorView* ov, Find2D(ckpt, {prefix + "output_bias"}, {H}));
    MOEEDB_ASSIGN_OR_RETURN(at::Tensor ob, TensorFromView(*ov));
    if (visit) visit("down", ob);
    b.out_bias_ = ob.to(device);
  } else if (ckpt.Find(prefix + "experts.gate_up_proj") != nullptr) {
    // Packed layout: read from the mapping, stored transposed (LinearWeight).
    MOEEDB_ASSIGN_OR_RETURN(const TensorView* gv, Find2D(ckpt, {prefix + "experts.gate_up_proj"}, {E, 2 * I, H}));
    MOEEDB_ASSIGN_OR_RETURN(const TensorView* dv, Find2D(ckpt, {prefix + "experts.down_proj"}, {E, H, I}));
    MOEEDB_ASSIGN_OR_RETURN(at::Tensor gu, TensorFromView(*gv));
    MOEEDB_ASSIGN_OR_RETURN(at::Tensor dn, TensorFromView(*dv));
    if (visit)
      for (int64_t e = 0; e < E; ++e) {
        visit("gate_up", gu.select(0, e));
        visit("down", dn.select(0, e));
      }
    b.gate_up_ = LinearWeight::From(gu, format, device);
    b.down_ = LinearWeight::From(dn, format, device);
    ReleasePages(*gv);  // LinearWeight holds its own copies
    ReleasePages(*dv);
  } else {
    // Per-expert tensors, packed here (gate and up fused so one matmul
    // computes both), one expert at a time: a quantised load never holds
    // more than one expert in float32.
    b.gate_up_ = LinearWeight::Stack(E, 2 * I, H, format, device);
    b.down_ = LinearWeight::Stack(E, H, I, format, device);
    for (int64_t e = 0; e < E; ++e) {
      const std::string p = prefix + "experts." + std::to_string(e) + ".";
      MOEEDB_ASSIGN_OR_RETURN(const TensorView* gv, Find2D(ckpt, {p + fam.expert_gate + ".weight"}, {I, H}));
      MOEEDB_ASSIGN_OR_RETURN(const TensorView* uv, Find2D(ckpt, {p + fam.expert_up + ".weight"}, {I, H}));
      MOEEDB_ASSIGN_OR_RETURN(const TensorView* dv, Find2D(ckpt, {p + fam.expert_down + ".weight"}, {H, I}));
      MOEEDB_ASSIGN_OR_RETURN(at::Tensor g, TensorFromView(*gv));
      MOEEDB_ASSIGN_OR_RETURN(at::Tensor u, TensorFromView(*uv));
      MOEEDB_ASSIGN_OR_RETURN(at::Tensor d, TensorFromView(*dv));
      at::Tensor gu = at::cat({g, u}, 0);
      if (visit) {
        visit("gate_up", gu);
        visit("down", d);
      }
      b.gate_up_.Set(e, gu);
      b.down_.Set(e, d);
      ReleasePages(*gv);
      ReleasePages(*uv);
      ReleasePages(*dv);
    }
  }
  if (b.shared_kind_ != SharedExpertKind::kNone) {
    const int64_t S = spec.shared_intermediate;
    const std::string p = prefix + fam.shared_module + ".";
    MOEEDB_ASSIGN_OR_RETURN(at::Tensor g, Load2D(ckpt, {p + "gate_proj.weight"}, {S, H}));
    MOEEDB_ASSIGN_OR_RETURN(at::Tensor u, Load2D(ckpt, {p + "up_proj.weight"}, {S, H}));
    MOEEDB_ASSIGN_OR_RETURN(at::Tensor d, Load2D(ckpt, {p + "down_proj.weight"}, {H, S}));
    b.shared_gate_up_ = LinearWeight::From(at::cat({g, u}, 0), format, device);
    b.shared_down_ = LinearWeight::From(d, format, device);
    if (b.shared_kind_ == SharedExpertKind::kSigmoidGated) {
      MOEEDB_ASSIGN_OR_RETURN(at::Tensor sg, Load2D(ckpt, {prefix + "shared_expert_gate.weight"}, {1, H}));
      b.shared_gate_ = sg.to(device);
    }
  }
  return b;
}

MoeBlock::Routing MoeBlock::Route(const at::Tensor& x, const RoutingPolicy& policy) const {
  Routing r;
  const bool top1 = policy.kind == RoutingPolicy::Kind::kTop1;
  const bool ssmoe = policy.kind == RoutingPolicy::Kind::kSsmoe;
  const int64_t k = top1 ? 1 : spec_.top_k;
  // Each expert's logit and probability must not depend on which other
  // experts the layer has, so that a pruned model routes exactly as the
  // original did. On the CPU, RouterKernel computes each logit the same way
  // whatever the expert count and picks the experts of exact arithmetic; on
  // other devices the router runs in float64, rounded once. The softmax runs
  // in float64 either way.
  const bool kernel = router_kernel_.experts() > 0 && x.is_cpu() && x.scalar_type() == at::kFloat && x.dim() == 2 &&
                      !router_bias_.defined();
  at::Tensor xc, probs, logits64;
  if (kernel) {
    xc = x.contiguous();
    r.logits = at::empty({x.size(0), spec_.num_experts}, x.options());
    router_kernel_.Logits(xc.data_ptr<float>(), x.size(0), r.logits.data_ptr<float>());
    probs = at::softmax(r.logits.to(at::kDouble), -1).to(at::kFloat);
  } else {
    logits64 = at::linear(x.to(at::kDouble), router64_.defined() ? router64_ : router_.to(at::kDouble),
                          router_bias_.defined() ? router_bias_.to(at::kDouble) : at::Tensor());
    r.logits = logits64.to(at::kFloat);
    probs = at::softmax(logits64, -1).to(at::kFloat);
  }
  if (ssmoe) {
    TORCH_CHECK(spectral_.defined(), "SSMoE routing needs the spectral centroids");
    // Mixed in probability space, each term softmaxed on its own (method.md C.1).
    probs = (1.0 - policy.c) * probs + policy.c * at::softmax(at::linear(x, spectral_), -1, at::kFloat);
    std::tie(r.weights, r.experts) = probs.topk(k, -1);
  } else if (kernel) {
    r.experts = at::empty({x.size(0), k}, x.options().dtype(at::kLong));
    router_kernel_.TopK(xc.data_ptr<float>(), r.logits.data_ptr<float>(), x.size(0), k, r.experts.data_ptr<int64_t>());
    r.weights = probs.gather(1, r.experts);
  } else {
    // Chosen by the float64 logits: a router far from calibrated (as
    // MoEfication's, fitted to contribution sizes) puts all but its top
    // expert's float32 probabilities at 0, where topk of probs would break
    // the ties by index.
    r.experts = std::get<1>(logits64.topk(k, -1));
    r.weights = probs.gather(1, r.experts);
  }
  if (unweighted_) {  // MoEfication: a chosen expert is a part of the FFN, taken whole
    r.weights = at::ones_like(r.weights);
  } else if (top1) {
    if (policy.top1_weight == RoutingPolicy::Top1Weight::kOne) r.weights = at::ones_like(r.weights);
  } else if (spec_.renormalize) {
    r.weights = r.weights / r.weights.sum(-1, /*keepdim=*/true);
  }
  return r;
}

at::Tensor MoeBlock::Forward(const at::Tensor& x, at::Tensor* router_logits, const RoutingPolicy& policy) const {
  const int64_t E = spec_.num_experts;
  // Routing in float32 whatever the compute dtype (the RW read-out).
  Routing routing;
  {
    StageTimer timer(ForwardStage::kRouting);
    CountStageWork(2.0 * static_cast<double>(x.size(0) * x.size(1) * E), static_cast<double>(x.size(1) * E * 4));
    routing = Route(x, policy);
  }
  if (router_logits != nullptr) *router_logits = routing.logits;
  const int64_t k = routing.experts.size(1);

  // Float32 experts without a packed copy run packed on the rows kernel
  // where it beats BLAS: always with AVX-512; with AVX2 alone (the
  // instruction set of OpenBLAS's kernel here) only at few rows per expert,
  // where BLAS's per-call packing of the weight dominates.
  const bool rows_kernel_only =
      has_float_row_experts() && !has_packed_experts() && !has_int8_experts() && !has_bf16_experts();
  const bool blas_wins = rows_kernel_only && RowsGemmPathInUse() != SimdLevel::kAvx512 && x.size(0) * k > 32 * E;
  if ((dispatch_ == ExpertDispatch::kPacked || (dispatch_ == ExpertDispatch::kAuto && !blas_wins)) &&
      CanRunPacked(x)) {
    at::Tensor out = RunExpertsPacked(x, routing);  // float32 rows in, whatever the compute dtype
    if (shared_kind_ != SharedExpertKind::kNone) AddSharedExpert(x, x.to(gate_up_.compute_type()), &out);
    if (out_bias_.defined()) out.add_(out_bias_);
    return out;
  }
  const at::Tensor xc = x.to(gate_up_.compute_type());

  // Group the (token, slot) pairs by expert: a stable sort of the flat expert
  // ids gives, per expert, a contiguous run of the tokens routed to it.
  Grouping g;
  at::Tensor flat = routing.experts.reshape({-1});
  auto [sorted_experts, order] = flat.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false);
  g.token_of = at::div(order, k, "floor");
  g.slot_weight = routing.weights.reshape({-1}).index_select(0, order);
  g.counts = at::bincount(flat, {}, E).to(at::kCPU);

  const bool batched = dispatch_ == ExpertDispatch::kBatched ||
                       (dispatch_ == ExpertDispatch::kAuto && x.size(0) * k < kBatchedBelowTokensPerExpert * E);
  const bool grouped =
      dispatch_ == ExpertDispatch::kGrouped ||
      (dispatch_ == ExpertDispatch::kAuto && x.size(0) * k * x.size(1) * xc.element_size() <= kGroupedMaxBytes);
  at::Tensor out;
  {
    // These paths interleave their GEMMs (ATen's) with the gathers and
    // scatters around them: all of it counts as the experts' GEMMs.
    StageTimer timer(ForwardStage::kExpertGemm);
    if (ForwardProfileEnabled()) {  // every pair through both matrices; each expert with rows read once
      const double pairs = static_cast<double>(x.size(0) * k);
      const double used = static_cast<double>(g.counts.gt(0).sum().item<int64_t>());
      const double gu = static_cast<double>(gate_up_.in_features() * gate_up_.out_features());
      const double dn = static_cast<double>(down_.in_features() * down_.out_features());
      CountStageWork(2.0 * pairs * (gu + dn), used * (gu * c10::elementSize(gate_up_.stored_type()) +
                                                      dn * c10::elementSize(down_.stored_type())));
    }
    out = batched ? RunExpertsBatched(xc, g) : grouped ? RunExpertsGrouped(xc, g) : RunExpertsLoop(xc, g);
  }
  AddSharedExpert(x, xc, &out);
  if (out_bias_.defined()) out.add_(out_bias_);
  return out;
}

at::Tensor MoeBlock::Activate(const at::Tensor& gu, int64_t e) const {
  if (mlp_ == ExpertMlp::kSwiGlu) return SiluGlu(gu);
  // GELU in float32 (bf16 rows are widened and narrowed back).
  return at::gelu(gu.to(at::kFloat).add(up_bias_[e])).to(gu.scalar_type());
}

void MoeBlock::AddSharedExpert(const at::Tensor& x, const at::Tensor& xc, at::Tensor* out) const {
  if (shared_kind_ == SharedExpertKind::kNone) return;
  StageTimer timer(ForwardStage::kProjections);
  CountMatmul(shared_gate_up_, x.size(0));
  CountMatmul(shared_down_, x.size(0));
  at::Tensor s = shared_down_.Apply(SiluGlu(shared_gate_up_.Apply(xc))).to(at::kFloat);
  if (shared_kind_ == SharedExpertKind::kSigmoidGated) s.mul_(at::sigmoid(at::linear(x, shared_gate_)));
  out->add_(s);
}

bool MoeBlock::has_float_row_experts() const {
  return RowsGemmAvailable() && gate_up_.float_rows() != nullptr && down_.float_rows() != nullptr &&
         gate_up_.out_features() % 16 == 0 && down_.out_features() % 16 == 0;
}

bool MoeBlock::CanRunPacked(const at::Tensor& x) const {
  return x.device().is_cpu() && x.scalar_type() == at::kFloat && x.dim() == 2 && x.is_contiguous() &&
         (has_packed_experts() || has_int8_experts() || has_bf16_experts() || has_float_row_experts());
}

at::Tensor MoeBlock::RunExpertsPacked(const at::Tensor& x, const Routing& r) const {
  const int64_t N = x.size(0), H = x.size(1), E = spec_.num_experts;
  // I2: the first GEMM's width (gate and up rows, or up alone); I: the activation's.
  const int64_t I2 = gate_up_.out_features(), I = mlp_ == ExpertMlp::kSwiGlu ? I2 / 2 : I2;
  const at::Tensor experts = r.experts.to(at::kLong).contiguous();
  const at::Tensor weights = r.weights.to(at::kFloat).contiguous();
  const int64_t k = experts.size(1);
  const int64_t* expert_of_all = experts.data_ptr<int64_t>();  // [N * k]: pair f = (token f / k, rank f % k)
  const float* weight_of_all = weights.data_ptr<float>();
  const float* xp = x.data_ptr<float>();
  at::Tensor out = at::empty({N, H}, x.options());
  float* op = out.data_ptr<float>();
  // c rows of a (leading dimension lda) times expert e's matrix w into y:
  // in int8 where the weights multiply in int8, in bf16 where they are
  // bf16 panels, else on the f32 panels or, without them, on the f32
  // weights in place.
  const bool int8 = has_int8_experts(), bf16 = has_bf16_experts(), packed = has_packed_experts();
  auto gemm = [int8, bf16, packed](const LinearWeight& w, int64_t e, int64_t c, const float* a, int64_t lda, float* y,
                                   int64_t ldy) {
    CountMatmul(w, c);
    if (bf16) {
      Bf16GemmF32(c, w.out_features(), w.in_features(), a, lda, w.bf16_panels(e), y, ldy);
    } else if (int8) {
      const LinearWeight::Int8Operands o = w.int8_operands(e);
      Int8GemmF32(c, w.out_features(), w.in_features(), a, lda, o.panels, o.column_terms, o.scale, y, ldy);
    } else if (packed) {
      PanelGemmF32(c, w.out_features(), w.in_features(), a, lda, w.packed_panels(e), y, ldy);
    } else {
      RowsGemmF32(c, w.out_features(), w.in_features(), a, lda, w.float_rows(e), w.out_features(), y, ldy);
    }
  };
  // The tokens a window at a time: each pair's expert output (ys, a row of
  // H floats per (token, expert) pair) is held only for the window's
  // tokens, so a forward of thousands of tokens holds a fixed buffer
  // (window_pairs_ pairs) rather than k rows per token. A window is
  // wide enough that an expert still gets, on average, half a chunk of
  // rows per pass over its weights (at 64 experts). Every row is computed as without
  // windows (the kernels treat rows independently), so are the bits.
  const int64_t window = std::max<int64_t>(1, window_pairs_ / std::max<int64_t>(1, k));
  const int64_t window_pairs = std::min(N, window) * k;
  at::Tensor ys = at::empty({window_pairs, H}, x.options());
  float* yp = ys.data_ptr<float>();
  std::vector<int64_t> start(static_cast<size_t>(E + 1)), row_of(static_cast<size_t>(window_pairs)),
      token_of_row(static_cast<size_t>(window_pairs));
  for (int64_t t0 = 0; t0 < N; t0 += window) {
    const int64_t tokens = std::min(window, N - t0), P = tokens * k;
    const int64_t* expert_of = expert_of_all + t0 * k;
    const float* weight_of = weight_of_all + t0 * k;
    std::optional<StageTimer> sort_timer(std::in_place, ForwardStage::kExpertBookkeeping);  // to the sort's end
    // A stable counting sort of the window's pairs by expert: expert e's
    // pairs are rows start[e] .. start[e + 1] of ys; pair f went to row
    // row_of[f]; token_of_row counts from the window's first token.
    std::fill(start.begin(), start.end(), 0);
    for (int64_t f = 0; f < P; ++f) ++start[static_cast<size_t>(expert_of[f] + 1)];
    for (int64_t e = 0; e < E; ++e) start[static_cast<size_t>(e + 1)] += start[static_cast<size_t>(e)];
    {
      std::vector<int64_t> next(start.begin(), start.end() - 1);
      for (int64_t f = 0; f < P; ++f) {
        const int64_t row = next[static_cast<size_t>(expert_of[f])]++;
        row_of[static_cast<size_t>(f)] = row;
        token_of_row[static_cast<size_t>(row)] = f / k;
      }
    }
    // Per expert, a chunk of its rows at a time: gather them, gate/up GEMM,
    // SwiGLU in place, down GEMM into its rows of ys. A chunk's rows and
    // activations stay in L2/L3 from one step to the next whatever the batch
    // (the whole expert's rows did not, at thousands of rows), and its
    // weights are still read once per kExpertChunkRows rows. Experts run in
    // parallel; each owns its rows. The threads take the experts from a
    // shared counter, busiest first: routing gives experts very different
    // row counts, and a static split of the expert range left one thread
    // idle while the other finished its half.
    std::vector<int64_t> busiest;
    for (int64_t e = 0; e < E; ++e)
      if (start[static_cast<size_t>(e + 1)] > start[static_cast<size_t>(e)]) busiest.push_back(e);
    auto rows = [&](int64_t e) { return start[static_cast<size_t>(e + 1)] - start[static_cast<size_t>(e)]; };
    std::stable_sort(busiest.begin(), busiest.end(), [&](int64_t a, int64_t b) { return rows(a) > rows(b); });
    sort_timer.reset();
    std::atomic<size_t> next{0};
    const int64_t workers = std::min<int64_t>(at::get_num_threads(), static_cast<int64_t>(busiest.size()));
    const int64_t chunk_rows = std::min(kExpertChunkRows, busiest.empty() ? int64_t{0} : rows(busiest.front()));
    const float* xw = xp + t0 * H;
    at::parallel_for(0, workers, 1, [&](int64_t, int64_t) {
      // Left uninitialised: every entry is written before it is read.
      std::unique_ptr<float[]> xs(new float[static_cast<size_t>(chunk_rows * H)]);
      std::unique_ptr<float[]> gu(new float[static_cast<size_t>(chunk_rows * I2)]);
      for (size_t slot = next++; slot < busiest.size(); slot = next++) {
        const int64_t e = busiest[slot];
        for (int64_t r0 = start[static_cast<size_t>(e)], r1 = r0 + rows(e); r0 < r1; r0 += chunk_rows) {
          const int64_t c = std::min(chunk_rows, r1 - r0);
          {
            StageTimer timer(ForwardStage::kExpertBookkeeping);
            for (int64_t i = 0; i < c; ++i)
              std::memcpy(xs.get() + i * H, xw + token_of_row[static_cast<size_t>(r0 + i)] * H, H * sizeof(float));
          }
          {
            StageTimer timer(ForwardStage::kExpertGemm);
            gemm(gate_up_, e, c, xs.get(), H, gu.get(), I2);
          }
          {
            StageTimer timer(ForwardStage::kExpertBookkeeping);
            if (mlp_ == ExpertMlp::kSwiGlu) {
              for (int64_t i = 0; i < c; ++i) {  // gate columns first, then up (gate_up_, moe_block.h)
                float* row = gu.get() + i * I2;
                SiluGluArray(row, row + I, row, I);
              }
            } else {  // GELU of up + its bias, in place (ATen's exact GELU, its erf)
              at::Tensor rows = at::from_blob(gu.get(), {c, I2}, at::kFloat);
              rows.add_(up_bias_[e]);
              at::gelu_out(rows, rows);
            }
          }
          StageTimer timer(ForwardStage::kExpertGemm);
          gemm(down_, e, c, gu.get(), I2, yp + r0 * H, H);
        }
      }
    });
    // Each token: the weighted sum of its k expert outputs, in rank order.
    float* ow = op + t0 * H;
    at::parallel_for(0, tokens, 16, [&](int64_t a, int64_t b) {
      StageTimer timer(ForwardStage::kExpertBookkeeping);
      for (int64_t t = a; t < b; ++t) {
        float* o = ow + t * H;
        for (int64_t j = 0; j < k; ++j) {
          const float w = weight_of[t * k + j];
          const float* y = yp + row_of[static_cast<size_t>(t * k + j)] * H;
          if (j == 0) {
            for (int64_t d = 0; d < H; ++d) o[d] = w * y[d];
          } else {
            for (int64_t d = 0; d < H; ++d) o[d] += w * y[d];
          }
        }
      }
    });
  }
  return out;
}

at::Tensor MoeBlock::RunExpertsLoop(const at::Tensor& x, const Grouping& g) const {
  // Per active expert: gather its tokens, its two GEMMs, weight, scatter-add.
  // The working set of one expert (its tokens' rows and its weights, widened
  // if stored narrower) stays in cache from one op to the next, and memory
  // beyond the output is a few expert-sized buffers, not a copy of every
  // (token, slot) pair: a whole-block gather measured no faster and cost
  // ~110 KB of activations per token for OLMoE shapes (docs/perf.md).
  const int64_t* cnt = g.counts.data_ptr<int64_t>();
  at::Tensor out = at::zeros({x.size(0), x.size(1)}, x.options().dtype(at::kFloat));
  int64_t offset = 0;
  for (int64_t e = 0; e < spec_.num_experts; ++e) {
    const int64_t c = cnt[e];
    if (c == 0) continue;
    at::Tensor tokens = g.token_of.narrow(0, offset, c);
    at::Tensor y = down_.Matrix(e).Apply(Activate(gate_up_.Matrix(e).Apply(x.index_select(0, tokens)), e));
    out.index_add_(0, tokens, y.to(at::kFloat).mul_(g.slot_weight.narrow(0, offset, c).unsqueeze(1)));
    offset += c;
  }
  return out;
}

at::Tensor MoeBlock::RunExpertsGrouped(const at::Tensor& x, const Grouping& g) const {
  const int64_t* cnt = g.counts.data_ptr<int64_t>();
  const int64_t P = g.token_of.numel(), H = x.size(1);
  at::Tensor xs = x.index_select(0, g.token_of);                          // [P, H], expert order
  at::Tensor gu = at::empty({P, gate_up_.out_features()}, x.options());  // [P, 2I]
  int64_t offset = 0;
  for (int64_t e = 0; e < spec_.num_experts; ++e) {
    if (cnt[e] == 0) continue;
    gate_up_.Matrix(e).ApplyInto(gu.narrow(0, offset, cnt[e]), xs.narrow(0, offset, cnt[e]));
    offset += cnt[e];
  }
  at::Tensor act;
  if (mlp_ == ExpertMlp::kSwiGlu) {
    act = SiluGlu(gu);
  } else {  // each expert's rows with its own bias
    act = at::empty_like(gu);
    offset = 0;
    for (int64_t e = 0; e < spec_.num_experts; ++e) {
      if (cnt[e] == 0) continue;
      act.narrow(0, offset, cnt[e]).copy_(Activate(gu.narrow(0, offset, cnt[e]), e));
      offset += cnt[e];
    }
  }
  at::Tensor ys = at::empty({P, H}, x.options());
  offset = 0;
  for (int64_t e = 0; e < spec_.num_experts; ++e) {
    if (cnt[e] == 0) continue;
    down_.Matrix(e).ApplyInto(ys.narrow(0, offset, cnt[e]), act.narrow(0, offset, cnt[e]));
    offset += cnt[e];
  }
  at::Tensor yf = ys.to(at::kFloat).mul_(g.slot_weight.unsqueeze(1));
  return at::zeros({x.size(0), H}, yf.options()).index_add_(0, g.token_of, yf);
}

at::Tensor MoeBlock::RunExpertsBatched(const at::Tensor& x, const Grouping& g) const {
  const int64_t E = spec_.num_experts, N = x.size(0), H = x.size(1);
  const int64_t* cnt = g.counts.data_ptr<int64_t>();
  int64_t cap = 0;
  for (int64_t e = 0; e < E; ++e) cap = std::max(cap, cnt[e]);
  // Slot j of expert e holds its j-th token. Empty slots point at row N, a
  // zero row, with weight 0, so padding adds nothing to any token.
  at::Tensor slot_token = at::full({E * cap}, N, at::kLong);
  at::Tensor slot_w = at::zeros({E * cap}, at::kFloat);
  {
    at::Tensor tok = g.token_of.to(at::kCPU).contiguous(), w = g.slot_weight.to(at::kCPU).contiguous();
    const int64_t* tp = tok.data_ptr<int64_t>();
    int64_t* st = slot_token.data_ptr<int64_t>();
    std::vector<int64_t> dst;
    dst.reserve(static_cast<size_t>(tok.numel()));
    int64_t offset = 0;
    for (int64_t e = 0; e < E; ++e) {
      for (int64_t j = 0; j < cnt[e]; ++j) {
        st[e * cap + j] = tp[offset + j];
        dst.push_back(e * cap + j);
      }
      offset += cnt[e];
    }
    slot_w.index_copy_(0, at::tensor(dst, at::kLong), w);
  }
  slot_token = slot_token.to(x.device());
  slot_w = slot_w.to(x.device());
  at::Tensor xp = at::cat({x, at::zeros({1, H}, x.options())}, 0);
  at::Tensor xe = xp.index_select(0, slot_token).view({E, cap, H});
  at::Tensor gu = at::bmm(xe, gate_up_.Dense().transpose(1, 2));  // [E, cap, 2I]
  at::Tensor act = mlp_ == ExpertMlp::kSwiGlu
                       ? SiluGlu(gu)
                       : at::gelu(gu.to(at::kFloat).add(up_bias_.unsqueeze(1))).to(gu.scalar_type());
  at::Tensor y = at::bmm(act, down_.Dense().transpose(1, 2)).to(at::kFloat);  // [E, cap, H]
  y.mul_(slot_w.view({E, cap, 1}));
  return at::zeros({N + 1, H}, y.options()).index_add_(0, slot_token, y.view({E * cap, H})).narrow(0, 0, N);
}

}  // namespace moeedb
