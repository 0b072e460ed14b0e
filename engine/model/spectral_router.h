// SSMoE's training-free spectral router (method.md C.1): for expert e and
// each of its matrices M in {gate_proj, up_proj, down_proj^T} (all [I, H]),
// take M's right singular vectors, keep the k most aligned with the router
// row r_e, and average them; cbar_e is the mean over the three matrices, and
// f_EV(x)_e = x . cbar_e.
//
// Computed the cheap way: eigh of the smaller Gram matrix (M M^T when I <= H,
// then v = M^T u / sigma), in double. The reference sign variant uses the SVD
// itself, as the released code does.
#pragma once

#include <ATen/core/Tensor.h>

#include "engine/model/routing_policy.h"

namespace moeedb {

class MoeBlock;

// m: [I, H]; router_row: [H]. Returns the centroid, [H], float.
at::Tensor SpectralCentroid(const at::Tensor& m, const at::Tensor& router_row, int k, RoutingPolicy::Sign sign);

// [E, H]: cbar_e for every expert of `block`.
at::Tensor SpectralCentroids(const MoeBlock& block, int k, RoutingPolicy::Sign sign);

}  // namespace moeedb
