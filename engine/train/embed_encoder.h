// The embedding trainer's encoder: the trainable model, its pooler and how
// a batch of sentences becomes pooled vectors (and the side vectors read
// beside them). Internal to engine/train (embed_trainer.cpp).
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <map>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/model/pooling.h"
#include "engine/model/trained_pooler.h"
#include "engine/train/embed_trainer.h"
#include "engine/train/train_net.h"

namespace moeedb::embed_train {

inline at::Tensor L2Normalize(const at::Tensor& x) { return x / x.norm(2, {-1}, true).clamp_min(1e-8); }

// Vectors read beside the pooled one, as the engine reads them without the
// pooler: "rw" (the router logits of every MoE layer, pooled over tokens as
// rw_pooling says, concatenated) and the training-free HS poolings
// "hs_last", "hs_mean" and "hs_layers-mean" (pooling.h).
struct SideVectors {
  bool rw = false, hs_poolings = false;  // which to read
  RwPooling rw_pooling = RwPooling::kLast;
  std::map<std::string, at::Tensor> vectors;
};

// RW is searched after standardisation (the model's calibrated mean and
// spread per dimension); a batch's own statistics stand in for them.
inline at::Tensor StandardizedUnit(const at::Tensor& rw) {
  const at::Tensor centred = rw - rw.mean(0, true).detach();
  return L2Normalize(centred / centred.std(0, false, true).detach().clamp_min(1e-4));
}

// The model, its pooler and how sentences become pooled vectors.
class Encoder {
 public:
  Encoder(const ModelConfig& c, const EmbedTrainOptions& o) : c_(c), o_(o), net_(c) {}

  TrainNet& net() { return net_; }
  std::map<std::string, at::Tensor>& pooler() { return pooler_; }

  void InitPooler(uint64_t seed) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed ^ 0x5bd1e995ULL);
    pooler_.clear();
    for (const auto& t : PoolerTensors(o_.pooler)) {
      at::Tensor x = t.zeros ? at::zeros(t.shape, at::kFloat)
                     : t.init_std == 0 ? at::ones(t.shape, at::kFloat)
                                       : at::normal(0.0, t.init_std, t.shape, gen);
      pooler_[t.name] = x.set_requires_grad(true);
    }
    if (!o_.token_log_weight_init.empty())
      pooler_["token_log_weight"] = at::tensor(o_.token_log_weight_init, at::kFloat).set_requires_grad(true);
  }
  // Starts from a trained pooler's weights (same spec) instead.
  void SetPooler(const std::map<std::string, at::Tensor>& w) {
    for (const auto& [name, t] : w) pooler_[name] = t.detach().clone().set_requires_grad(true);
  }

  // Pooled vectors [n, out_dim] of the sentences `ids` (in that order), in
  // chunks of about chunk_tokens padded tokens, shortest first; with side,
  // also the vectors it asks for, as the engine reads them without the pooler.
  at::Tensor Encode(const std::vector<std::vector<int32_t>>& sentences, const std::vector<int32_t>& ids,
                    bool grad, at::Tensor* aux, SideVectors* side = nullptr) {
    std::vector<size_t> order(ids.size());
    std::iota(order.begin(), order.end(), 0);
    auto len = [&](size_t i) { return std::min<int64_t>(static_cast<int64_t>(sentences[ids[i]].size()), o_.max_tokens); };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return len(a) < len(b); });
    std::vector<at::Tensor> parts;
    std::map<std::string, std::vector<at::Tensor>> side_parts;
    std::vector<int64_t> placed;
    at::Tensor aux_sum = at::zeros({}, at::kFloat);
    int64_t chunks = 0;
    for (size_t s = 0; s < order.size();) {
      size_t e = s + 1;
      while (e < order.size() && static_cast<int64_t>(e - s + 1) * len(order[e]) <= o_.chunk_tokens) ++e;
      const int64_t B = static_cast<int64_t>(e - s), T = len(order[e - 1]);
      at::Tensor tok = at::full({B, T}, static_cast<int64_t>(c_.pad_token_id.value_or(0)), at::kLong);
      std::vector<int64_t> lengths(static_cast<size_t>(B));
      int64_t* tp = tok.data_ptr<int64_t>();
      for (int64_t b = 0; b < B; ++b) {
        const auto& sent = sentences[ids[order[s + b]]];
        const int64_t n = len(order[s + b]);
        for (int64_t t = 0; t < n; ++t) tp[b * T + t] = sent[t];
        lengths[static_cast<size_t>(b)] = n;
        placed.push_back(static_cast<int64_t>(order[s + b]));
      }
      parts.push_back(Pool(tok, at::tensor(lengths, at::kLong), grad, &aux_sum, side, &side_parts));
      ++chunks;
      s = e;
    }
    std::vector<int64_t> row_of(placed.size());  // input i is row row_of[i] of the chunks' output
    for (size_t i = 0; i < placed.size(); ++i) row_of[static_cast<size_t>(placed[i])] = static_cast<int64_t>(i);
    if (aux) *aux = aux_sum / static_cast<double>(std::max<int64_t>(chunks, 1));
    const at::Tensor rows = at::tensor(row_of, at::kLong);
    if (side)
      for (auto& [name, list] : side_parts) side->vectors[name] = at::cat(list, 0).index_select(0, rows);
    return at::cat(parts, 0).index_select(0, rows);
  }

 private:
  at::Tensor Pool(const at::Tensor& tok, const at::Tensor& lengths, bool grad, at::Tensor* aux_sum,
                  const SideVectors* side, std::map<std::string, std::vector<at::Tensor>>* side_parts) {
    TrainForwardOptions fo;
    fo.lengths = lengths;
    fo.causal = o_.causal && c_.causal;
    fo.want_logits = false;
    fo.want_layers = true;
    const int64_t B = tok.size(0), T = tok.size(1);
    at::Tensor valid = (at::arange(T, at::kLong).view({1, T}) < lengths.view({B, 1})).to(at::kFloat).unsqueeze(-1);
    at::Tensor last = (lengths - 1).view({B, 1, 1});
    // Per-token states [B, T, D] of every row, before pooling.
    std::vector<at::Tensor> states, router_states;
    {
      at::AutoGradMode mode(grad && !o_.freeze_lm);
      TrainForwardOutput f = net_.Forward(tok, fo);
      const at::Tensor& w = net_.P("model.norm.weight");
      for (const auto& x : f.layer_out) states.push_back(RmsNorm(x, w, c_.rms_norm_eps));
      if (o_.pooler.router_rows > 0) router_states = f.router_logits;
      auto at_last = [&](const at::Tensor& v) { return v.gather(1, last.expand({B, 1, v.size(2)})).squeeze(1); };
      auto mean = [&](const at::Tensor& v) { return (v * valid).sum(1) / lengths.to(at::kFloat).view({B, 1}); };
      if (side != nullptr && side->rw) {
        std::vector<at::Tensor> read;
        for (const auto& z : f.router_logits) read.push_back(side->rw_pooling == RwPooling::kMean ? mean(z) : at_last(z));
        (*side_parts)["rw"].push_back(at::cat(read, 1));
      }
      if (side != nullptr && side->hs_poolings) {  // states[0] is the embedding output, then each layer's
        (*side_parts)["hs_last"].push_back(at_last(states.back()));
        (*side_parts)["hs_mean"].push_back(mean(states.back()));
        at::Tensor layers = states[1];
        for (size_t l = 2; l < states.size(); ++l) layers = layers + states[l];
        // As MoeModel reads it (pooling.h): last token when causal, token mean when not.
        (*side_parts)["hs_layers-mean"].push_back((fo.causal ? at_last(layers) : mean(layers)) /
                                                  static_cast<double>(states.size() - 1));
      }
      if (grad && !o_.freeze_lm) *aux_sum = *aux_sum + f.aux;
    }
    // Pooling sits outside the model's no-grad scope: the token weights train with the pooler.
    at::AutoGradMode mode(grad);
    at::Tensor weight;  // [B, T, 1]: each token's share of its text's row (0 on padding)
    switch (o_.pooler.token_pooling) {
      case TokenPooling::kMean: weight = valid / lengths.to(at::kFloat).view({B, 1, 1}); break;
      case TokenPooling::kWeighted: {
        at::Tensor w = PoolerTokenWeights(pooler_, tok).unsqueeze(-1) * valid;
        weight = w / w.sum(1, true);
        break;
      }
      case TokenPooling::kLast: break;
    }
    auto pool_tokens = [&](const at::Tensor& v) {  // [B, T, D] -> [B, D]
      if (o_.pooler.token_pooling == TokenPooling::kLast) return v.gather(1, last.expand({B, 1, v.size(2)})).squeeze(1);
      return (v * weight).sum(1);
    };
    std::vector<at::Tensor> rows, router;
    for (const auto& x : states) rows.push_back(pool_tokens(x));
    for (const auto& z : router_states) router.push_back(pool_tokens(z));
    at::Tensor lexical;  // the token-weighted mean of the lexical channel's vectors
    if (o_.pooler.lexical_dim > 0)
      lexical = (pooler_.at("lexical_embed").index_select(0, tok.reshape({-1})).view({B, T, -1}) * weight).sum(1);
    return PoolerForward(o_.pooler, pooler_, at::stack(rows, 1), router.empty() ? at::Tensor() : at::stack(router, 1),
                         lexical);
  }

  const ModelConfig& c_;
  const EmbedTrainOptions& o_;
  TrainNet net_;
  std::map<std::string, at::Tensor> pooler_;
};

}  // namespace moeedb::embed_train
