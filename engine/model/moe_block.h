// One sparse MoE block: router, top-k routing, routed experts with grouped
// dispatch (the tokens routed to an expert are gathered and run as one
// matmul per active expert, never a per-token loop), optional shared expert.
#pragma once

#include <algorithm>

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

#include "engine/kernels/linear_weight.h"
#include "engine/kernels/router_kernel.h"
#include "engine/model/model_family.h"
#include "engine/model/moe_dispatch.h"
#include "engine/model/routing_policy.h"
#include "engine/io/safetensors.h"
#include "base/status.h"

namespace moeedb {

struct MoeBlockSpec {
  int64_t hidden = 0;
  int64_t num_experts = 0;
  int64_t top_k = 0;
  int64_t expert_intermediate = 0;
  int64_t shared_intermediate = 0;  // 0: no shared expert
  bool renormalize = false;         // divide the top-k weights by their sum
};

class MoeBlock {
 public:
  MoeBlock() = default;
  // Called during Load with each float32 matrix as read from the checkpoint,
  // in order: "router", then per expert "gate_up" ([2I, H]) and "down".
  using LoadVisitor = std::function<void(const char* what, const at::Tensor& value)>;
  // Loads the block stored under `prefix` (e.g. "model.layers.3.mlp."),
  // per-expert or packed layout, names from `family`, into `format` on
  // `device`. Shapes are checked. Mapped pages the block copied out of are
  // released as it goes, so a quantised load never holds the float model.
  static Result<MoeBlock> Load(const Checkpoint& ckpt, const ModelFamily& family, const std::string& prefix,
                               const MoeBlockSpec& spec, const WeightFormat& format = {},
                               at::Device device = at::kCPU, const LoadVisitor& visit = nullptr);

  struct Routing {
    at::Tensor logits;   // [N, E]: z = W_gate x (what RW reads, whatever the policy)
    at::Tensor weights;  // [N, k']: weights of the chosen experts
    at::Tensor experts;  // [N, k']: chosen expert ids (k' = 1 for top1)
  };
  // The routing decision for x [N, H] under `policy`. SSMoE needs the
  // spectral centroids set first (set_spectral_centroids).
  Routing Route(const at::Tensor& x, const RoutingPolicy& policy) const;

  // x: [N, H] float32. Returns y: [N, H] float32 (the experts run in the
  // weights' compute dtype). If router_logits is non-null it receives
  // z = W_gate x, [N, E] float32 (before softmax).
  at::Tensor Forward(const at::Tensor& x, at::Tensor* router_logits, const RoutingPolicy& policy = {}) const;

  // kAuto uses kBatched below this many routed tokens per expert on average.
  // 0 (never): on this CPU the batched path was slower at every size measured,
  // even for one text per forward (docs/perf.md); it stays selectable.
  static constexpr int64_t kBatchedBelowTokensPerExpert = 0;
  // kAuto uses kGrouped while the gathered (token, slot) rows take at most
  // this many bytes (they then stay in cache across the block's ops).
  static constexpr int64_t kGroupedMaxBytes = 2 << 20;
  // The packed path runs an expert's rows this many at a time: enough that
  // its weights are read once per many rows, few enough that the chunk's
  // rows and activations stay in cache between its steps.
  static constexpr int64_t kExpertChunkRows = 256;
  // The packed path holds the outputs of at most this many (token, expert)
  // pairs at once (a window of tokens: 1024 at top-8, 8192 at top-1), 32 MB
  // at hidden 1024, however many tokens the forward has; on average
  // kExpertChunkRows / 2 rows an expert a pass at 64 experts.
  static constexpr int64_t kExpertWindowPairs = 8192;
  void set_dispatch(ExpertDispatch d) { dispatch_ = d; }
  // The packed path's window (kExpertWindowPairs by default; tests narrow it).
  void set_window_pairs(int64_t pairs) { window_pairs_ = std::max<int64_t>(1, pairs); }

  const MoeBlockSpec& spec() const { return spec_; }
  ExpertMlp expert_mlp() const { return mlp_; }
  const at::Tensor& router() const { return router_; }
  // Float32 copies (dequantised for int8) of expert e's matrices.
  // [2I, H]: gate, then up rows; [I, H], up alone, for ExpertMlp::kGelu.
  at::Tensor expert_gate_up(int64_t e) const { return gate_up_.Matrix(e).ToFloat(); }
  at::Tensor expert_down(int64_t e) const { return down_.Matrix(e).ToFloat(); }        // [H, I]
  // Whether both expert matrices have packed copies, so that f32 CPU inputs
  // can take ExpertDispatch::kPacked.
  bool has_packed_experts() const { return gate_up_.packed_panels() != nullptr && down_.packed_panels() != nullptr; }
  // Whether both expert matrices are float32 values on the CPU that the
  // rows kernel (RowsGemmF32, panel_gemm.h) can multiply in place, which
  // kPacked also runs.
  bool has_float_row_experts() const;
  // Whether both expert matrices multiply in int8 (LinearWeight::int8_gemm),
  // which kPacked also runs.
  bool has_int8_experts() const { return gate_up_.int8_gemm() && down_.int8_gemm(); }
  // Whether both expert matrices multiply with the bf16 panel kernel
  // (LinearWeight::bf16_gemm), which kPacked also runs.
  bool has_bf16_experts() const { return gate_up_.bf16_gemm() && down_.bf16_gemm(); }
  // Bytes of expert weights held (values and scales).
  int64_t expert_nbytes() const { return gate_up_.nbytes() + down_.nbytes(); }
  // [E, H] centroids cbar_e for SSMoE routing.
  void set_spectral_centroids(const at::Tensor& centroids) { spectral_ = centroids.to(router_.device()); }
  const at::Tensor& spectral_centroids() const { return spectral_; }

 private:
  // The (token, slot) pairs grouped by expert (see Forward).
  struct Grouping {
    at::Tensor token_of;     // [N*k]: token of each pair, sorted by expert
    at::Tensor slot_weight;  // [N*k]: its routing weight
    at::Tensor counts;       // [E] on the CPU: pairs per expert
  };
  // x: [N, H] in the compute dtype; both return [N, H] float32.
  at::Tensor RunExpertsLoop(const at::Tensor& x, const Grouping& g) const;
  at::Tensor RunExpertsBatched(const at::Tensor& x, const Grouping& g) const;
  at::Tensor RunExpertsGrouped(const at::Tensor& x, const Grouping& g) const;
  // ExpertDispatch::kPacked; x [N, H] float32 on the CPU, contiguous (the
  // block's input, whatever the compute dtype: the kernels take f32 rows).
  bool CanRunPacked(const at::Tensor& x) const;
  // The expert MLP's activation of expert e's first GEMM output, in place
  // where it can be: SwiGLU ([c, 2I] -> [c, I]) or GELU of up + its bias.
  at::Tensor Activate(const at::Tensor& gu, int64_t e) const;
  // out += the shared expert's output (gated where the family gates it).
  void AddSharedExpert(const at::Tensor& x, const at::Tensor& xc, at::Tensor* out) const;
  at::Tensor RunExpertsPacked(const at::Tensor& x, const Routing& r) const;

  MoeBlockSpec spec_;
  SharedExpertKind shared_kind_ = SharedExpertKind::kNone;
  at::Tensor router_;        // [E, H] float32
  RouterKernel router_kernel_;  // what Route computes with on the CPU
  at::Tensor router64_;      // router_ in float64, what Route computes with elsewhere
  LinearWeight gate_up_;     // [E, 2I, H]: every expert's gate rows, then up rows
  LinearWeight down_;        // [E, H, I]
  ExpertMlp mlp_ = ExpertMlp::kSwiGlu;
  at::Tensor up_bias_;       // kGelu: [E, I] float32, each expert's bias of up
  at::Tensor out_bias_;      // kGelu: [H] float32, added once to the block's output
  at::Tensor router_bias_;   // [E] float32 where the family's router has a bias
  bool unweighted_ = false;  // ModelFamily::unweighted_experts
  ExpertDispatch dispatch_ = ExpertDispatch::kAuto;
  int64_t window_pairs_ = kExpertWindowPairs;
  LinearWeight shared_gate_up_, shared_down_;  // [2S, H], [H, S]
  at::Tensor shared_gate_;                     // [1, H] float32
  at::Tensor spectral_;                                    // [E, H] or undefined
};

}  // namespace moeedb
