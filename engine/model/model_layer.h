// MoeModel's per-layer weights: shared by the forward (model.cpp) and the
// loader (model_load.cpp). Internal to the engine.
#pragma once

#include <ATen/core/Tensor.h>

#include "engine/kernels/linear_weight.h"
#include "engine/model/model.h"
#include "engine/model/moe_block.h"

namespace moeedb {

struct MoeModel::Layer {
  // float32. Pre-norm: in_norm before the attention, post_norm before the
  // MLP. Post-norm (BERT): post_norm after the attention's residual add,
  // mlp_norm after the MLP's; in_norm undefined. Biases: LayerNorm's.
  at::Tensor in_norm, post_norm, mlp_norm;
  at::Tensor in_norm_bias, post_norm_bias, mlp_norm_bias;
  LinearWeight wq, wk, wv, wo;                 // the weight format
  at::Tensor bq, bk, bv, bo;                   // compute dtype; undefined when absent
  at::Tensor q_norm, k_norm;                   // float32; undefined when the family has none
  bool moe = false;
  MoeBlock block;
  LinearWeight dense_gate_up, dense_down;      // dense layers
};

}  // namespace moeedb
