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
    MOEEDB_ASSIGN_OR_RETURN(at::Tensor gu, Load2D(ckpt, {prefix + "experts.gate_up_proj"}, {E, 2 * I, H}));
    MOEEDB_ASSIGN_OR_RETURN(at::Tensor dn, Load2D(ckpt, {prefix + "experts.down_proj"}, {E, H, I}));
    for (int64_t e = 0; e < E; ++e) {
      b.gate_up_.push_back(gu.select(0, e));
      b.down_.push_back(dn.select(0, e));
    }
  } else {
    for (int64_t e = 0; e < E; ++e) {
      const std::string p = prefix + "experts." + std::to_string(e) + ".";
      MOEEDB_ASSIGN_OR_RETURN(at::Tensor g, Load2D(ckpt, {p + fam.expert_gate + ".weight"}, {I, H}));
      MOEEDB_ASSIGN_OR_RETURN(at::Tensor u, Load2D(ckpt, {p + fam.expert_up + ".weight"}, {I, H}));
      MOEEDB_ASSIGN_OR_RETURN(at::Tensor d, Load2D(ckpt, {p + fam.expert_down + ".weight"}, {H, I}));
      b.gate_up_.push_back(at::cat({g, u}, 0));  // one matmul computes both
      b.down_.push_back(d);
    }
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
  const at::Tensor& weights = routing.weights;
  const at::Tensor& experts = routing.experts;
  const int64_t k = experts.size(1);

  // Group the (token, slot) pairs by expert: a stable sort of the flat expert
  // ids gives, per expert, a contiguous run of the tokens routed to it.
  at::Tensor flat = experts.reshape({-1});
  auto [sorted_experts, order] = flat.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false);
  at::Tensor token_of = at::div(order, k, "floor");
  at::Tensor slot_weight = weights.reshape({-1}).index_select(0, order);
  at::Tensor counts = at::bincount(flat, {}, E).to(at::kCPU);
  const int64_t* cnt = counts.data_ptr<int64_t>();

  at::Tensor out = at::zeros_like(x);
  int64_t offset = 0;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t c = cnt[e];
    if (c == 0) continue;
    at::Tensor tokens = token_of.narrow(0, offset, c);
    at::Tensor y = SwiGlu(x.index_select(0, tokens), gate_up_[e], down_[e]);
    y.mul_(slot_weight.narrow(0, offset, c).unsqueeze(1));
    out.index_add_(0, tokens, y);
    offset += c;
  }
  if (shared_kind_ != SharedExpertKind::kNone) {
    at::Tensor s = SwiGlu(x, shared_gate_up_, shared_down_);
    if (shared_kind_ == SharedExpertKind::kSigmoidGated) s = s * at::sigmoid(at::linear(x, shared_gate_));
    out.add_(s);
  }
  return out;
}

}  // namespace moeedb
