// MoeModel's per-layer weights: shared by the forward (model.cpp) and the
// loader (model_load.cpp). Internal to the engine.
#pragma once

#include <ATen/core/Tensor.h>

#include "engine/kernels/linear_weight.h"
#include "engine/model/model.h"
#include "engine/model/moe_block.h"

namespace moeedb {

struct MoeModel::Layer {
  at::Tensor in_norm, post_norm;               // float32
  LinearWeight wq, wk, wv, wo;                 // the weight format
  at::Tensor bq, bk, bv, bo;                   // compute dtype; undefined when absent
  at::Tensor q_norm, k_norm;                   // float32; undefined when the family has none
  bool moe = false;
  MoeBlock block;
  LinearWeight dense_gate_up, dense_down;      // dense layers
};

}  // namespace moeedb
