#include "engine/model/model.h"

#include <c10/util/Exception.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "engine/model/checkpoint_spec.h"
#include "engine/model/model_layer.h"
#include "engine/model/moe_block.h"
#include "engine/kernels/linear_weight.h"
#include "engine/kernels/packed_attention.h"
#include "engine/model/forward_profile.h"
#include "engine/kernels/activation_cache.h"
#include "engine/kernels/rotary.h"
#include "engine/kernels/rms_norm.h"
#include "engine/io/safetensors.h"
#include "engine/model/spectral_router.h"
#include "engine/io/tensor_from_view.h"
#include "engine/kernels/tensor_ops.h"
#include "engine/model/trained_pooler.h"

namespace moeedb {

namespace fs = std::filesystem;

namespace {

at::Tensor RotateHalf(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

// SwiGLU with a fused [2I, H] gate/up weight; x and the result in the compute dtype.
at::Tensor SwiGluWeights(const at::Tensor& x, const LinearWeight& gate_up, const LinearWeight& down) {
  CountMatmul(gate_up, x.size(0));
  CountMatmul(down, x.size(0));
  at::Tensor gu = gate_up.Apply(x);
  const int64_t inter = gu.size(1) / 2;
  return down.Apply(at::silu(gu.narrow(1, 0, inter)).mul_(gu.narrow(1, inter, inter)));
}

at::Tensor AddBias(at::Tensor y, const at::Tensor& bias) { return bias.defined() ? y.add_(bias) : y; }

// Attention scores are computed a few rows at a time, about this many bytes each.
constexpr int64_t kAttentionScoreBytes = 16 << 20;

}  // namespace

MoeModel::MoeModel() = default;
MoeModel::~MoeModel() = default;

Result<ForwardOutput> MoeModel::Forward(const std::vector<std::vector<int32_t>>& ids,
                                        const ForwardOptions& options) const {
  if (ids.empty()) return Status::InvalidArgument("empty batch");
  MOEEDB_RETURN_IF_ERROR(CheckHsPooling(options.hs_pooling));
  for (size_t b = 0; b < ids.size(); ++b) {
    if (ids[b].empty()) return Status::InvalidArgument("sequence " + std::to_string(b) + " has no tokens");
    // Learned positions end at the table's last row (RoPE has no end).
    if (config_.max_positions > 0 && static_cast<int64_t>(ids[b].size()) > config_.max_positions)
      return Status::InvalidArgument("sequence " + std::to_string(b) + " has " + std::to_string(ids[b].size()) +
                                     " tokens, more than the model's " + std::to_string(config_.max_positions) +
                                     " positions");
    for (int32_t id : ids[b])
      if (id < 0 || id >= config_.vocab_size)
        return Status::InvalidArgument("token id " + std::to_string(id) + " in sequence " + std::to_string(b) +
                                       " is outside the vocabulary [0, " + std::to_string(config_.vocab_size) + ")");
  }
  try {
    ActivationScope activations;  // its large blocks come from and go back to the cache
    StageTimer timer(ForwardStage::kForward);
    return ForwardImpl(ids, options);
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("forward pass failed: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return Status::Internal(std::string("forward pass failed: ") + e.what());
  }
}

ForwardOutput MoeModel::ForwardImpl(const std::vector<std::vector<int32_t>>& ids, const ForwardOptions& options) const {
  const ModelConfig& c = config_;
  const int64_t B = static_cast<int64_t>(ids.size());
  int64_t T = 0;
  for (const auto& s : ids) T = std::max<int64_t>(T, static_cast<int64_t>(s.size()));
  const int64_t nh = c.num_heads, nkv = c.num_kv_heads, hd = c.head_dim;
  const double eps = c.rms_norm_eps;
  // The family's norm; the identity where a norm is absent (a post-norm
  // family's final norm: its last layer's norm is the last).
  const bool layer_norm = c.family->norm == NormKind::kLayer;
  auto norm = [&](const at::Tensor& t, const at::Tensor& w, const at::Tensor& b = at::Tensor()) {
    if (!w.defined()) return t;
    if (layer_norm) return at::layer_norm(t.to(at::kFloat), {t.size(-1)}, w, b, eps);
    return fused_norms_ ? RmsNormFast(t, w, eps) : RmsNorm(t, w, eps);
  };
  const at::Device dev = embed_.device();
  // The matmuls run in the compute dtype; the residual stream, norms and
  // softmaxes in float32 (casts are no-ops for f32).
  const at::ScalarType cdt = compute_dtype_ == ComputeDtype::kBF16 ? at::kBFloat16 : at::kFloat;

  // The activations are packed: one row per real token, texts one after the
  // other ([N, H]), so projections, norms and MLPs never touch padding. Only
  // the attention scores need a [B, T] grid; `grid` gives each real token's
  // place in it. `last` is each text's last token among the N; `key_last` per
  // token, its text's last position (the keys a bidirectional query sees).
  std::vector<int64_t> flat_ids, grid, position, last, row_of, text_start, last_pos, key_last;
  ForwardOutput out;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = static_cast<int64_t>(ids[b].size());
    text_start.push_back(static_cast<int64_t>(flat_ids.size()));
    last_pos.push_back(len - 1);
    for (int64_t t = 0; t < len; ++t) {
      flat_ids.push_back(ids[b][t]);
      grid.push_back(b * T + t);
      position.push_back(t);
      if (!c.causal) key_last.push_back(len - 1);
    }
    row_of.insert(row_of.end(), len, b);
    last.push_back(static_cast<int64_t>(flat_ids.size()) - 1);
    out.lengths.push_back(len);
  }
  const int64_t N = static_cast<int64_t>(flat_ids.size());
  CountForward(N);
  const bool padded = N != B * T;
  at::Tensor grid_idx = at::tensor(grid, at::kLong).to(dev);
  at::Tensor last_idx = at::tensor(last, at::kLong).to(dev);
  at::Tensor row_of_token = at::tensor(row_of, at::kLong).to(dev);
  at::Tensor inv_len = (1.0 / at::tensor(out.lengths, at::kLong).to(at::kFloat).unsqueeze(1)).to(dev);  // [B, 1]
  auto mean_over_tokens = [&](const at::Tensor& v) {  // [N, D] -> [B, D]
    return at::zeros({B, v.size(1)}, v.options()).index_add_(0, row_of_token, v).mul_(inv_len);
  };
  // [N, D] -> [B, T, D], zeros where a text has no token.
  auto to_grid = [&](const at::Tensor& v) {
    if (!padded) return v.view({B, T, v.size(1)});
    return at::zeros({B * T, v.size(1)}, v.options()).index_copy_(0, grid_idx, v).view({B, T, v.size(1)});
  };
  at::Tensor layers_sum;  // HsPooling::kLayersMean accumulator
  // kTrained: every layer's final-normed states and router logits, pooled as the pooler says.
  const bool trained = options.hs_pooling == HsPooling::kTrained;
  std::vector<at::Tensor> rw, pooler_rows, pooler_router;  // rw: the router read-outs
  // kWeighted: each token's weight [N, 1] and each text's 1 / sum of weights [B, 1].
  at::Tensor token_w, inv_wsum;
  if (trained && pooler_->spec().token_pooling == TokenPooling::kWeighted) {
    token_w = pooler_->TokenWeights(at::tensor(flat_ids, at::kLong)).to(dev).unsqueeze(1);
    inv_wsum = at::zeros({B, 1}, token_w.options()).index_add_(0, row_of_token, token_w).reciprocal_();
  }
  auto pool_for_pooler = [&](const at::Tensor& v) {
    switch (pooler_->spec().token_pooling) {
      case TokenPooling::kLast: return v.index_select(0, last_idx);
      case TokenPooling::kWeighted: return at::zeros({B, v.size(1)}, v.options()).index_add_(0, row_of_token, v * token_w).mul_(inv_wsum);
      case TokenPooling::kMean: break;
    }
    return mean_over_tokens(v);
  };

  // On the CPU: attention straight on the packed rows, no grid, no mask; in
  // float32 whatever the compute dtype (bf16 rows are widened).
  const bool packed_attention = attention_kernel_ == AttentionKernel::kAuto &&
                                (cdt == at::kFloat || cdt == at::kBFloat16) && dev.is_cpu();
  // Additive mask [B, 1, T, T] for the grid path: causal, and padded keys hidden.
  at::Tensor lengths = at::tensor(out.lengths, at::kLong);
  at::Tensor pos = at::arange(T, at::kLong);
  at::Tensor mask;
  if (!packed_attention) {
    at::Tensor keys_real = pos.view({1, 1, T}) < lengths.view({B, 1, 1});
    at::Tensor allowed = c.causal ? (pos.unsqueeze(0) <= pos.unsqueeze(1)).unsqueeze(0) & keys_real
                                  : keys_real.expand({B, T, T});
    mask = at::zeros({B, 1, T, T}, at::kFloat)
               .masked_fill_(allowed.logical_not().unsqueeze(1), -std::numeric_limits<float>::infinity())
               .to(dev);
  }

  // RoPE angles per real token: [N, 1, hd], broadcast over the heads.
  const bool rope = c.family->positions == PositionKind::kRope;
  at::Tensor pos_idx = at::tensor(position, at::kLong);
  at::Tensor cos, sin;
  if (rope) {
    at::Tensor freqs = at::outer(pos.to(at::kDouble), inv_freq_);
    at::Tensor emb = at::cat({freqs, freqs}, -1);
    cos = emb.cos().index_select(0, pos_idx).to(dev, at::kFloat).unsqueeze(1);
    sin = emb.sin().index_select(0, pos_idx).to(dev, at::kFloat).unsqueeze(1);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));

  const at::Tensor token_rows = at::tensor(flat_ids, at::kLong).to(dev);
  at::Tensor x = embed_int8_.defined()  // [N, H] float32
                     ? embed_int8_.index_select(0, token_rows).to(at::kFloat).mul_(
                           embed_scale_.index_select(0, token_rows).unsqueeze(1))
                     : embed_.index_select(0, token_rows);
  if (embed_positions_.defined()) x = x.add_(embed_positions_.index_select(0, pos_idx.to(dev)));
  if (embed_norm_.defined()) x = norm(x, embed_norm_, embed_norm_bias_);
  if (trained) pooler_rows.push_back(pool_for_pooler(norm(x, final_norm_, final_norm_bias_)));
  // The last layer feeds nothing but the read-outs: when they are read at
  // the last token only (and nobody watches the other tokens), only the last
  // tokens need its query, output projection and MLP; the keys and values
  // still come from every token. Exact, and a layer's MLP less per text.
  const bool last_token_only =
      !options.want_logits && !options.want_token_states && !tap_ && options.hs_pooling == HsPooling::kLast &&
      options.rw_pooling == RwPooling::kLast;
  // Queries for the rows q_rows of h (every token, or each text's last) and
  // keys and values for every token of h ([N, H], normed, compute dtype):
  // projected, normed, clipped, split into heads and rotated, in the compute
  // dtype. q [q_rows, nh, hd]; k, v [B, nh, T, hd] on the grid (GQA heads
  // repeated).
  auto attention_heads = [&](const Layer& L, const at::Tensor& h, const at::Tensor& q_rows, at::ScalarType adt) {
    const bool all_queries = !q_rows.defined();
    at::Tensor q, k, v;
    {
      StageTimer timer(ForwardStage::kProjections);
      CountMatmul(L.wq, all_queries ? h.size(0) : q_rows.size(0));
      CountMatmul(L.wk, h.size(0));
      CountMatmul(L.wv, h.size(0));
      q = AddBias(L.wq.Apply(all_queries ? h : h.index_select(0, q_rows)), L.bq).to(at::kFloat);
      k = AddBias(L.wk.Apply(h), L.bk).to(at::kFloat);
      v = AddBias(L.wv.Apply(h), L.bv);
    }
    if (c.family->qk_norm == QkNorm::kFullProjection) {
      q = norm(q, L.q_norm);
      k = norm(k, L.k_norm);
    }
    if (c.clip_qkv) {
      q = q.clamp(-*c.clip_qkv, *c.clip_qkv);
      k = k.clamp(-*c.clip_qkv, *c.clip_qkv);
      v = v.clamp(-*c.clip_qkv, *c.clip_qkv);
    }
    q = q.view({q.size(0), nh, hd});
    k = k.view({N, nkv, hd});
    if (c.family->qk_norm == QkNorm::kPerHead) {
      q = norm(q, L.q_norm);
      k = norm(k, L.k_norm);
    }
    q = q.contiguous();
    k = k.contiguous();
    if (rope) {
      const at::Tensor q_cos = all_queries ? cos : cos.index_select(0, q_rows);
      const at::Tensor q_sin = all_queries ? sin : sin.index_select(0, q_rows);
      if (!RotaryInPlace(q, q_cos, q_sin)) q = q * q_cos + RotateHalf(q) * q_sin;
      if (!RotaryInPlace(k, cos, sin)) k = k * cos + RotateHalf(k) * sin;
    }
    q = q.to(adt);
    k = k.to(adt);
    return std::array<at::Tensor, 3>{q, k, v};  // q [Nq, nh, hd], k [N, nkv, hd], v [N, nkv * hd]
  };
  // k [N, nkv, hd] and v [N, nkv * hd] -> [B, nh, T, hd] each, on the grid.
  auto heads_on_grid = [&](at::Tensor k, at::Tensor v) {
    k = to_grid(k.view({N, nkv * hd})).view({B, T, nkv, hd}).transpose(1, 2);
    v = to_grid(v).view({B, T, nkv, hd}).transpose(1, 2);
    if (nkv != nh) {  // GQA: query head i reads kv head i / (nh / nkv)
      k = k.repeat_interleave(nh / nkv, 1);
      v = v.repeat_interleave(nh / nkv, 1);
    }
    return std::array<at::Tensor, 2>{k, v};
  };
  // Packed attention: query row r is text q_text[r]'s token at q_pos[r].
  const PackedAttentionShape attention_shape{nh, nkv, hd, static_cast<float>(scale)};
  auto attend_packed = [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const int64_t* q_text,
                           const int64_t* q_pos) {
    const at::Tensor qc = q.to(at::kFloat).contiguous(), kc = k.to(at::kFloat).contiguous(),
                     vc = v.to(at::kFloat).contiguous();
    at::Tensor o = at::empty({qc.size(0), nh * hd}, qc.options());
    if (ForwardProfileEnabled()) {  // each query row against its keys (up to q_pos), scores and values
      double keys = 0;
      for (int64_t r = 0; r < qc.size(0); ++r) keys += static_cast<double>(q_pos[r] + 1);
      CountStageWork(4.0 * static_cast<double>(nh * hd) * keys, 0);
    }
    PackedAttentionF32(attention_shape, qc.data_ptr<float>(), nh * hd, kc.data_ptr<float>(), vc.data_ptr<float>(),
                       nkv * hd, q_text, q_pos, qc.size(0), text_start.data(), o.data_ptr<float>());
    return o;
  };
  // Attention on the [B, T] grid (the path for CUDA): every token's
  // query, causal or bidirectional, scores in row chunks of about
  // kAttentionScoreBytes (the [B, nh, T, T] scores of a whole batch would be
  // the largest activations of the forward: 134 MB for 16 x 256 tokens, 16
  // heads). Returns [N, nh * hd], the real tokens.
  auto attend_grid_all = [&](const at::Tensor& q_rows, const at::Tensor& k_rows, const at::Tensor& v_rows) {
    auto [k, v] = heads_on_grid(k_rows, v_rows);
    at::Tensor q = to_grid(q_rows.view({N, nh * hd})).view({B, T, nh, hd}).transpose(1, 2);
    at::Tensor attn = at::empty({B, T, nh * hd}, q.options());
    const int64_t rows = std::max<int64_t>(1, kAttentionScoreBytes / (nh * T * T * 4));
    for (int64_t b0 = 0; b0 < B; b0 += rows) {
      const int64_t n = std::min(rows, B - b0);
      at::Tensor scores = at::matmul(q.narrow(0, b0, n), k.narrow(0, b0, n).transpose(-2, -1))
                              .to(at::kFloat)
                              .mul_(scale)
                              .add_(mask.narrow(0, b0, n));
      at::Tensor probs = at::softmax(scores, -1).to(cdt);
      scores.reset();
      attn.narrow(0, b0, n).copy_(at::matmul(probs, v.narrow(0, b0, n)).transpose(1, 2).reshape({n, T, nh * hd}));
    }
    attn = attn.view({B * T, nh * hd});
    return padded ? attn.index_select(0, grid_idx) : attn;
  };
  // The same for each text's last query only (q [B, nh, hd]): it sees every
  // real key of its row, the causal mask's last row. Returns [B, nh * hd].
  auto attend_grid_last = [&](const at::Tensor& q, const at::Tensor& k_rows, const at::Tensor& v_rows) {
    auto [k, v] = heads_on_grid(k_rows, v_rows);
    at::Tensor key_mask = at::zeros({B, 1, 1, T}, at::kFloat)
                              .masked_fill_((pos.view({1, 1, 1, T}) >= lengths.view({B, 1, 1, 1})),
                                            -std::numeric_limits<float>::infinity())
                              .to(dev);
    at::Tensor scores = at::matmul(q.unsqueeze(2), k.transpose(-2, -1)).to(at::kFloat).mul_(scale).add_(key_mask);
    return at::matmul(at::softmax(scores, -1).to(cdt), v).reshape({B, nh * hd});
  };
  std::vector<int64_t> text_of(static_cast<size_t>(B));  // the last-token queries' texts: 0..B-1
  for (int64_t b = 0; b < B; ++b) text_of[static_cast<size_t>(b)] = b;
  // One decoder layer on the residual stream x [N, H]. With last_only, only
  // each text's last token gets a query, the output projection and the MLP
  // (keys and values still come from every token; exact): the result is
  // then [B, H], the last tokens' rows, and the router read-out is theirs.
  auto decoder_layer = [&](int64_t li, const at::Tensor& x_in, bool last_only) {
    const Layer& L = *layers_[li];
    // The attention's rows stay float32 where its kernels take float32 rows
    // whatever the compute dtype (packed attention; the projections on the
    // int8 or bf16 panel kernels): no round trips through bf16 between them.
    const bool float_rows = packed_attention && L.wq.takes_float_rows() && L.wk.takes_float_rows() &&
                            L.wv.takes_float_rows() && L.wo.takes_float_rows();
    const at::ScalarType adt = float_rows ? at::kFloat : cdt;
    at::Tensor h = norm(x_in, L.in_norm, L.in_norm_bias).to(adt);  // post-norm: x_in itself
    auto [q_rows, k_rows, v_rows] = attention_heads(L, h, last_only ? last_idx : at::Tensor(), adt);
    h.reset();
    at::Tensor attn;  // [query rows, nh * hd]
    {
      StageTimer timer(ForwardStage::kAttention);
      if (packed_attention) {
        // A query sees its text's keys up to its own position (causal) or all of them.
        attn = last_only ? attend_packed(q_rows, k_rows, v_rows, text_of.data(), last_pos.data())
                         : attend_packed(q_rows, k_rows, v_rows, row_of.data(), c.causal ? position.data() : key_last.data());
      } else {
        attn = last_only ? attend_grid_last(q_rows, k_rows, v_rows) : attend_grid_all(q_rows, k_rows, v_rows);
      }
    }
    at::Tensor attn_out;
    {
      StageTimer timer(ForwardStage::kProjections);
      CountMatmul(L.wo, attn.size(0));
      attn_out = AddBias(L.wo.Apply(attn), L.bo).to(at::kFloat);
    }
    attn.reset();
    at::Tensor xo = (last_only ? x_in.index_select(0, last_idx) : x_in) + attn_out;
    if (tap_) tap_("attn_out", li, attn_out);
    const bool post = c.family->post_norm;
    if (post) xo = norm(xo, L.post_norm, L.post_norm_bias);  // BERT: the residual stream itself normed

    at::Tensor u = post ? xo : norm(xo, L.post_norm, L.post_norm_bias);
    if (tap_) tap_("moe_in", li, u);
    at::Tensor y;
    if (L.moe) {
      at::Tensor z;
      y = L.block.Forward(u, &z, routing_);
      rw.push_back(last_only ? z : options.rw_pooling == RwPooling::kMean ? mean_over_tokens(z) : z.index_select(0, last_idx));
      if (trained && pooler_->spec().router_rows > 0) pooler_router.push_back(pool_for_pooler(z));
      if (tap_) tap_("router_logits", li, z);
    } else {
      StageTimer timer(ForwardStage::kProjections);
      y = SwiGluWeights(u.to(cdt), L.dense_gate_up, L.dense_down).to(at::kFloat);
    }
    if (tap_) tap_("mlp_out", li, y);
    xo = post ? norm(xo + y, L.mlp_norm, L.mlp_norm_bias) : xo.add_(y);
    if (tap_) tap_("layer_out", li, xo);
    if (trained) pooler_rows.push_back(pool_for_pooler(norm(xo, final_norm_, final_norm_bias_)));
    if (options.hs_pooling == HsPooling::kLayersMean) {
      // Each layer read as the trained pooler reads it: at the last token
      // under causal attention, where it alone has seen the whole text;
      // over all tokens under bidirectional attention, where every token has.
      at::Tensor n = c.causal ? norm(xo.index_select(0, last_idx), final_norm_, final_norm_bias_) : mean_over_tokens(norm(xo, final_norm_, final_norm_bias_));
      layers_sum = layers_sum.defined() ? layers_sum + n : n;
    }
    return xo;
  };
  for (int64_t li = 0; li < c.num_layers; ++li) x = decoder_layer(li, x, last_token_only && li == c.num_layers - 1);
  if (last_token_only) {
    out.hs = norm(x, final_norm_, final_norm_bias_);  // x holds the last tokens' rows only
  } else if (options.want_logits) {
    at::Tensor normed = norm(x, final_norm_, final_norm_bias_);
    out.logits = at::linear(to_grid(normed), lm_head_).cpu();  // padded places: lm_head(0) = 0
    out.hs = normed.index_select(0, last_idx);
  } else {
    out.hs = norm(x.index_select(0, last_idx), final_norm_, final_norm_bias_);
  }
  if (options.hs_pooling == HsPooling::kMean) {
    out.hs = mean_over_tokens(norm(x, final_norm_, final_norm_bias_));
  } else if (options.hs_pooling == HsPooling::kLayersMean) {
    out.hs = layers_sum / static_cast<double>(c.num_layers);
  } else if (trained) {
    at::Tensor lexical;  // the token-weighted mean of the lexical channel's vectors
    if (pooler_->spec().lexical_dim > 0) {
      const at::Tensor& table = pooler_->weights().at("lexical_embed");
      at::Tensor rows = table.index_select(0, at::tensor(flat_ids, at::kLong)).to(dev) * token_w;
      lexical = at::zeros({B, table.size(1)}, rows.options()).index_add_(0, row_of_token, rows).mul_(inv_wsum).cpu();
    }
    out.hs = pooler_->Forward(at::stack(pooler_rows, 1).cpu(),
                              pooler_router.empty() ? at::Tensor() : at::stack(pooler_router, 1).cpu(), lexical);
  }
  if (tap_) tap_("final_norm", c.num_layers, out.hs);
  if (options.want_token_states) out.token_states = norm(x, final_norm_, final_norm_bias_).to(at::kFloat).cpu();
  out.hs = out.hs.cpu();
  out.router_logits = at::stack(rw, 1).cpu();
  return out;
}

int64_t MoeModel::HsDim(HsPooling p) const {
  return p == HsPooling::kTrained && pooler_ ? pooler_->spec().output_dim() : config_.hidden_size;
}

void MoeModel::set_expert_dispatch(ExpertDispatch d) {
  for (auto& L : layers_)
    if (L->moe) L->block.set_dispatch(d);
}

void MoeModel::set_expert_window_pairs(int64_t pairs) {
  for (auto& L : layers_)
    if (L->moe) L->block.set_window_pairs(pairs);
}

std::vector<const MoeBlock*> MoeModel::MoeBlocks() const {
  std::vector<const MoeBlock*> out;
  for (const auto& L : layers_)
    if (L->moe) out.push_back(&L->block);
  return out;
}

Result<MoeModel::RoutingSetup> MoeModel::SetRouting(const RoutingPolicy& policy, const std::string& cache_dir) {
  RoutingSetup setup;
  if (policy.kind != RoutingPolicy::Kind::kSsmoe) {
    routing_ = policy;
    return setup;
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<MoeBlock*> blocks;
  for (auto& L : layers_)
    if (L->moe) blocks.push_back(&L->block);
  std::string file;
  if (!cache_dir.empty()) {
    file = (fs::path(cache_dir) / ("ssmoe-" + WeightFingerprint() + "-k" + std::to_string(policy.k) + "-" +
                                   (policy.sign == RoutingPolicy::Sign::kCanonical ? "canonical" : "reference") +
                                   ".safetensors"))
               .string();
    setup.cache_file = file;
  }
  try {
    std::vector<at::Tensor> centroids;
    if (!file.empty() && fs::exists(file)) {
      auto f = SafetensorsFile::Open(file);
      if (f.ok()) {
        for (size_t i = 0; i < blocks.size(); ++i) {
          const TensorView* v = (*f)->Find("layer." + std::to_string(i));
          const std::vector<int64_t> want = {blocks[i]->spec().num_experts, blocks[i]->spec().hidden};
          if (v == nullptr || v->shape != want || v->dtype != DType::kF32) break;
          MOEEDB_ASSIGN_OR_RETURN(at::Tensor t, TensorFromView(*v));
          centroids.push_back(t.clone());  // the cache file is unmapped when f goes
        }
        if (centroids.size() != blocks.size()) centroids.clear();  // stale or damaged: recompute
      }
      setup.from_cache = !centroids.empty();
    }
    if (centroids.empty()) {
      for (MoeBlock* b : blocks) centroids.push_back(SpectralCentroids(*b, policy.k, policy.sign).cpu());
      if (!file.empty()) {
        std::error_code ec;
        fs::create_directories(cache_dir, ec);
        std::vector<TensorToWrite> ts;
        for (size_t i = 0; i < centroids.size(); ++i)
          ts.push_back(F32TensorToWrite("layer." + std::to_string(i), centroids[i]));
        // A cache that cannot be written is not an error: the centroids are in memory.
        (void)WriteSafetensors(file, ts, {{"moeedb", "ssmoe spectral centroids"}, {"fingerprint", WeightFingerprint()}});
      }
    }
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i]->set_spectral_centroids(centroids[i]);
  } catch (const std::exception& e) {
    return Status::Internal(std::string("SSMoE precompute failed: ") + e.what());
  }
  routing_ = policy;
  setup.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return setup;
}

}  // namespace moeedb
