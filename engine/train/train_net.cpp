#include "engine/train/train_net.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>

#include "engine/io/tensor_from_view.h"
#include "engine/kernels/tensor_ops.h"

namespace moeedb {

Status TrainNet::CheckTrainable(const ModelConfig& c) {
  if (c.family->post_norm || c.family->expert_mlp != ExpertMlp::kSwiGlu)
    return Status::NotSupported(std::string("training does not support the ") + c.family->display_name +
                                " family yet (the decoder families' pre-norm SwiGLU layers only)");
  for (bool moe : c.moe_layer)
    if (!moe) return Status::NotSupported("training supports configs whose layers are all MoE (as OLMoE's)");
  if (c.shared_intermediate > 0) return Status::NotSupported("training does not support shared experts");
  if (c.qkv_bias || c.o_bias) return Status::NotSupported("training does not support attention biases");
  if (c.clip_qkv) return Status::NotSupported("training does not support clip_qkv");
  return Status::OK();
}

TrainNet::TrainNet(const ModelConfig& c) : c_(c) {
  CheckpointNaming naming;
  naming.layout = ExpertLayout::kPerExpert;
  specs_ = ExpectedTensors(c, naming);
  for (size_t i = 0; i < specs_.size(); ++i) index_[specs_[i].name] = static_cast<int>(i);
}

void TrainNet::Init(uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  params_.clear();
  for (const auto& s : specs_) {
    at::Tensor t;
    switch (s.init) {
      case TensorSpec::Init::kOnes: t = at::ones(s.shape, at::kFloat); break;
      case TensorSpec::Init::kZeros: t = at::zeros(s.shape, at::kFloat); break;
      case TensorSpec::Init::kNormal: t = at::normal(0.0, c_.initializer_range, s.shape, gen); break;
    }
    params_.push_back(t.set_requires_grad(true));
  }
}

Status TrainNet::Load(const std::string& file) {
  MOEEDB_ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open(file));
  params_.clear();
  for (const auto& s : specs_) {
    const TensorView* v = f->Find(s.name);
    if (v == nullptr || v->shape != s.shape) return Status::Corruption(file + ": tensor " + s.name + " missing or misshapen");
    MOEEDB_ASSIGN_OR_RETURN(at::Tensor t, TensorFromView(*v));
    params_.push_back(t.clone().set_requires_grad(true));
  }
  return Status::OK();
}

Status TrainNet::Save(const std::string& file, DType dtype) const {
  std::vector<TensorToWrite> out;
  const at::ScalarType st = dtype == DType::kF32 ? at::kFloat : dtype == DType::kBF16 ? at::kBFloat16 : at::kHalf;
  for (size_t i = 0; i < specs_.size(); ++i) {
    at::Tensor t = params_[i].detach().to(st).contiguous();
    const auto* p = static_cast<const uint8_t*>(t.data_ptr());
    out.push_back({specs_[i].name, dtype, specs_[i].shape, std::vector<uint8_t>(p, p + t.numel() * t.element_size())});
  }
  return WriteSafetensors(file, out, {{"format", "pt"}, {"moeedb", "trained by moeedb train"}});
}

TrainForwardOutput TrainNet::Forward(const at::Tensor& tok, const TrainForwardOptions& o) const {
  const int64_t B = tok.size(0), T = tok.size(1), H = c_.hidden_size, nh = c_.num_heads, nkv = c_.num_kv_heads,
                hd = c_.head_dim, E = c_.num_experts, K = c_.top_k;
  const double eps = c_.rms_norm_eps;
  const ModelFamily& fam = *c_.family;
  at::Tensor inv_freq = at::pow(c_.rope_theta, -at::arange(0, hd, 2, at::kDouble) / static_cast<double>(hd));
  at::Tensor freqs = at::outer(at::arange(T, at::kDouble), inv_freq);
  at::Tensor emb = at::cat({freqs, freqs}, -1);
  at::Tensor cos = emb.cos().to(at::kFloat), sin = emb.sin().to(at::kFloat);
  // Additive mask [B or 1, 1, T, T]: causal or not, padded keys hidden.
  const float kNegInf = -std::numeric_limits<float>::infinity();
  at::Tensor mask = o.causal ? at::full({T, T}, kNegInf, at::kFloat).triu(1) : at::zeros({T, T}, at::kFloat);
  if (o.lengths.defined()) {
    at::Tensor pad = at::arange(T, at::kLong).view({1, T}) >= o.lengths.view({B, 1});  // [B, T] keys
    mask = mask.unsqueeze(0).masked_fill(pad.unsqueeze(1), kNegInf).unsqueeze(1);     // [B, 1, T, T]
  }
  auto rotate = [](const at::Tensor& x) {
    const int64_t half = x.size(-1) / 2;
    return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  };
  auto norm = [&](const at::Tensor& x, const at::Tensor& w) { return w * (x * at::rsqrt(x.pow(2).mean({-1}, true) + eps)); };

  TrainForwardOutput out;
  const at::Tensor& embed = P("model.embed_tokens.weight");
  at::Tensor x = embed.index_select(0, tok.reshape({-1})).view({B, T, H});
  if (o.want_layers) out.layer_out.push_back(x);
  at::Tensor aux = at::zeros({}, at::kFloat), zloss = at::zeros({}, at::kFloat);
  int64_t moe_layers = 0;
  for (int64_t li = 0; li < c_.num_layers; ++li) {
    const std::string L = LayerPrefix(li), A = L + "self_attn.";
    at::Tensor h = norm(x, P(L + "input_layernorm.weight"));
    at::Tensor q = at::linear(h, P(A + "q_proj.weight")), k = at::linear(h, P(A + "k_proj.weight")),
               v = at::linear(h, P(A + "v_proj.weight"));
    if (fam.qk_norm == QkNorm::kFullProjection) {
      q = norm(q, P(A + "q_norm.weight"));
      k = norm(k, P(A + "k_norm.weight"));
    }
    q = q.view({B, T, nh, hd}).transpose(1, 2);
    k = k.view({B, T, nkv, hd}).transpose(1, 2);
    v = v.view({B, T, nkv, hd}).transpose(1, 2);
    if (fam.qk_norm == QkNorm::kPerHead) {
      q = norm(q, P(A + "q_norm.weight"));
      k = norm(k, P(A + "k_norm.weight"));
    }
    q = q * cos + rotate(q) * sin;
    k = k * cos + rotate(k) * sin;
    if (nkv != nh) {
      k = k.repeat_interleave(nh / nkv, 1);
      v = v.repeat_interleave(nh / nkv, 1);
    }
    at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(hd)) + mask;
    at::Tensor attn = at::matmul(at::softmax(scores, -1), v).transpose(1, 2).reshape({B, T, nh * hd});
    x = x + at::linear(attn, P(A + "o_proj.weight"));

    at::Tensor u = norm(x, P(L + "post_attention_layernorm.weight")).reshape({B * T, H});
    const std::string M = L + fam.moe_modules[0] + ".";
    at::Tensor z = at::linear(u, P(M + fam.router_names[0] + ".weight"));
    if (o.want_layers) out.router_logits.push_back(z.view({B, T, E}));
    at::Tensor probs = at::softmax(z, -1);
    auto [w, idx] = probs.topk(K, -1);
    if (c_.norm_topk_prob) w = w / w.sum(-1, true);
    at::Tensor flat = idx.reshape({-1});
    auto [sorted, order] = flat.sort(/*stable=*/true, 0, false);
    at::Tensor token_of = at::div(order, K, "floor");
    at::Tensor slot_w = w.reshape({-1}).index_select(0, order);
    at::Tensor counts = at::bincount(flat, {}, E);
    const int64_t* cnt = counts.data_ptr<int64_t>();
    at::Tensor y = at::zeros_like(u);
    int64_t off = 0;
    for (int64_t e = 0; e < E; ++e) {
      const int64_t n = cnt[e];
      if (n == 0) continue;
      const std::string X = M + "experts." + std::to_string(e) + ".";
      at::Tensor tokens = token_of.narrow(0, off, n);
      at::Tensor xe = u.index_select(0, tokens);
      at::Tensor a = at::silu(at::linear(xe, P(X + fam.expert_gate + ".weight"))) *
                     at::linear(xe, P(X + fam.expert_up + ".weight"));
      at::Tensor ye = at::linear(a, P(X + fam.expert_down + ".weight")) * slot_w.narrow(0, off, n).unsqueeze(1);
      y = y.index_add(0, tokens, ye);
      off += n;
    }
    // Load balance: fraction of routed slots per expert times its mean probability.
    at::Tensor frac = counts.to(at::kFloat) / static_cast<double>(B * T * K);
    aux = aux + static_cast<double>(E) * (frac * probs.mean(0)).sum();
    zloss = zloss + at::logsumexp(z, -1).pow(2).mean();
    ++moe_layers;
    x = x + y.view({B, T, H});
    if (o.want_layers) out.layer_out.push_back(x);
  }
  out.hidden = norm(x, P("model.norm.weight"));
  if (o.want_logits) out.logits = at::linear(out.hidden, c_.tie_word_embeddings ? embed : P("lm_head.weight"));
  out.aux = aux / static_cast<double>(std::max<int64_t>(moe_layers, 1));
  out.zloss = zloss / static_cast<double>(std::max<int64_t>(moe_layers, 1));
  return out;
}

}  // namespace moeedb
