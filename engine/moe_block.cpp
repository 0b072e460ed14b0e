#include "engine/moe_block.h"

#include "engine/tensor_util.h"

namespace moeedb {

namespace {

Result<at::Tensor> Load2D(const Checkpoint& ckpt, const std::vector<std::string>& names,
                          const std::vector<int64_t>& shape) {
  const TensorView* v = nullptr;
  for (const auto& n : names)
    if ((v = ckpt.Find(n)) != nullptr) break;
  if (v == nullptr) return Status::NotFound("tensor '" + names[0] + "' is missing from " + ckpt.Describe());
  if (v->shape != shape)
    return Status::InvalidArgument("tensor '" + v->name + "' in " + v->file + " has shape " + ShapeToString(v->shape) +
                                   " but the config implies " + ShapeToString(shape));
  return TensorFromView(*v);
}

}  // namespace

Result<MoeBlock> MoeBlock::Load(const Checkpoint& ckpt, const ModelFamily& fam, const std::string& prefix,
                                const MoeBlockSpec& spec) {
  MoeBlock b;
  b.spec_ = spec;
  b.shared_kind_ = spec.shared_intermediate > 0 ? fam.shared : SharedExpertKind::kNone;
  const int64_t E = spec.num_experts, H = spec.hidden, I = spec.expert_intermediate;
  std::vector<std::string> router_names;
  for (const auto& r : fam.router_names) router_names.push_back(prefix + r + ".weight");
  MOEEDB_ASSIGN_OR_RETURN(b.router_, Load2D(ckpt, router_names, {E, H}));

  if (ckpt.Find(prefix + "experts.gate_up_proj") != nullptr) {
    // Packed layout: views into the mapping, no copy.
    MOEEDB_ASSIGN_OR_RETURN(b.packed_gate_up_, Load2D(ckpt, {prefix + "experts.gate_up_proj"}, {E, 2 * I, H}));
    MOEEDB_ASSIGN_OR_RETURN(b.packed_down_, Load2D(ckpt, {prefix + "experts.down_proj"}, {E, H, I}));
  } else {
    // Packed copies (gate and up fused so one matmul computes both). For F32
    // files this leaves the mapped originals untouched (file pages the kernel
    // can drop); converted F16/BF16 tensors were copies anyway.
    std::vector<at::Tensor> gu, dn;
    for (int64_t e = 0; e < E; ++e) {
      const std::string p = prefix + "experts." + std::to_string(e) + ".";
      MOEEDB_ASSIGN_OR_RETURN(at::Tensor g, Load2D(ckpt, {p + fam.expert_gate + ".weight"}, {I, H}));
      MOEEDB_ASSIGN_OR_RETURN(at::Tensor u, Load2D(ckpt, {p + fam.expert_up + ".weight"}, {I, H}));
      MOEEDB_ASSIGN_OR_RETURN(at::Tensor d, Load2D(ckpt, {p + fam.expert_down + ".weight"}, {H, I}));
      gu.push_back(at::cat({g, u}, 0));
      dn.push_back(d);
    }
    b.packed_gate_up_ = at::stack(gu, 0);
    b.packed_down_ = at::stack(dn, 0);
  }
  for (int64_t e = 0; e < E; ++e) {
    b.gate_up_.push_back(b.packed_gate_up_.select(0, e));
    b.down_.push_back(b.packed_down_.select(0, e));
  }
  if (b.shared_kind_ != SharedExpertKind::kNone) {
    const int64_t S = spec.shared_intermediate;
    const std::string p = prefix + fam.shared_module + ".";
    MOEEDB_ASSIGN_OR_RETURN(at::Tensor g, Load2D(ckpt, {p + "gate_proj.weight"}, {S, H}));
    MOEEDB_ASSIGN_OR_RETURN(at::Tensor u, Load2D(ckpt, {p + "up_proj.weight"}, {S, H}));
    MOEEDB_ASSIGN_OR_RETURN(b.shared_down_, Load2D(ckpt, {p + "down_proj.weight"}, {H, S}));
    b.shared_gate_up_ = at::cat({g, u}, 0);
    if (b.shared_kind_ == SharedExpertKind::kSigmoidGated) {
      MOEEDB_ASSIGN_OR_RETURN(b.shared_gate_, Load2D(ckpt, {prefix + "shared_expert_gate.weight"}, {1, H}));
    }
  }
  return b;
}

MoeBlock::Routing MoeBlock::Route(const at::Tensor& x, const RoutingPolicy& policy) const {
  Routing r;
  r.logits = at::linear(x, router_);  // [N, E]
  at::Tensor probs = at::softmax(r.logits, -1, at::kFloat);
  if (policy.kind == RoutingPolicy::Kind::kSsmoe) {
    TORCH_CHECK(spectral_.defined(), "SSMoE routing needs the spectral centroids");
    // Mixed in probability space, each term softmaxed on its own (method.md C.1).
    probs = (1.0 - policy.c) * probs + policy.c * at::softmax(at::linear(x, spectral_), -1, at::kFloat);
  }
  const bool top1 = policy.kind == RoutingPolicy::Kind::kTop1;
  std::tie(r.weights, r.experts) = probs.topk(top1 ? 1 : spec_.top_k, -1);
  if (top1) {
    if (policy.top1_weight == RoutingPolicy::Top1Weight::kOne) r.weights = at::ones_like(r.weights);
  } else if (spec_.renormalize) {
    r.weights = r.weights / r.weights.sum(-1, /*keepdim=*/true);
  }
  r.weights = r.weights.to(x.scalar_type());
  return r;
}

at::Tensor MoeBlock::Forward(const at::Tensor& x, at::Tensor* router_logits, const RoutingPolicy& policy) const {
  const int64_t E = spec_.num_experts;
  Routing routing = Route(x, policy);
  if (router_logits != nullptr) *router_logits = routing.logits;
  const int64_t k = routing.experts.size(1);

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
  at::Tensor out = batched ? RunExpertsBatched(x, g) : RunExpertsLoop(x, g);
  if (shared_kind_ != SharedExpertKind::kNone) {
    at::Tensor s = SwiGlu(x, shared_gate_up_, shared_down_);
    if (shared_kind_ == SharedExpertKind::kSigmoidGated) s = s * at::sigmoid(at::linear(x, shared_gate_));
    out.add_(s);
  }
  return out;
}

at::Tensor MoeBlock::RunExpertsLoop(const at::Tensor& x, const Grouping& g) const {
  const int64_t* cnt = g.counts.data_ptr<int64_t>();
  at::Tensor out = at::zeros_like(x);
  int64_t offset = 0;
  for (int64_t e = 0; e < spec_.num_experts; ++e) {
    const int64_t c = cnt[e];
    if (c == 0) continue;
    at::Tensor tokens = g.token_of.narrow(0, offset, c);
    at::Tensor y = SwiGlu(x.index_select(0, tokens), gate_up_[e], down_[e]);
    y.mul_(g.slot_weight.narrow(0, offset, c).unsqueeze(1));
    out.index_add_(0, tokens, y);
    offset += c;
  }
  return out;
}

at::Tensor MoeBlock::RunExpertsBatched(const at::Tensor& x, const Grouping& g) const {
  const int64_t E = spec_.num_experts, N = x.size(0), H = x.size(1);
  const int64_t* cnt = g.counts.data_ptr<int64_t>();
  int64_t cap = 0;
  for (int64_t e = 0; e < E; ++e) cap = std::max(cap, cnt[e]);
  // Slot j of expert e holds its j-th token. Empty slots point at row N, a
  // zero row, with weight 0, so padding adds nothing to any token.
  at::Tensor slot_token = at::full({E * cap}, N, at::kLong);
  at::Tensor slot_w = at::zeros({E * cap}, x.options());
  {
    at::Tensor tok = g.token_of.contiguous(), w = g.slot_weight.to(x.scalar_type()).contiguous();
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
  at::Tensor xp = at::cat({x, at::zeros({1, H}, x.options())}, 0);
  at::Tensor xe = xp.index_select(0, slot_token).view({E, cap, H});
  const int64_t inter = packed_gate_up_.size(1) / 2;
  at::Tensor gu = at::bmm(xe, packed_gate_up_.transpose(1, 2));  // [E, cap, 2I]
  at::Tensor act = at::silu(gu.narrow(2, 0, inter)).mul_(gu.narrow(2, inter, inter));
  at::Tensor y = at::bmm(act, packed_down_.transpose(1, 2));      // [E, cap, H]
  y.mul_(slot_w.view({E, cap, 1}));
  return at::zeros_like(xp).index_add_(0, slot_token, y.view({E * cap, H})).narrow(0, 0, N);
}

}  // namespace moeedb
