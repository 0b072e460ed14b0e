// ForwardProfile: where a forward pass's time goes, by stage (benchmarks).
//
// Off unless enabled: a timed region then costs one relaxed atomic load.
// When on, each region adds the nanoseconds it took, on the thread that ran
// it, to its stage: the expert stages are timed inside each compute thread,
// the others around their call in the forward's thread. With one compute
// thread per forward (the CLI's default on two cores: two one-threaded
// workers) the stages are thread-time and add up, with the untimed rest, to
// the forwards' thread-time.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

namespace moeedb {

class LinearWeight;

enum class ForwardStage : int {
  kExpertGemm,         // the routed experts' gate/up and down GEMMs (on the ATen paths, with their gathers)
  kExpertBookkeeping,  // routing the rows to experts: sort, gather, SwiGLU, the weighted combine
  kRouting,            // router logits, softmax and top-k
  kProjections,        // q, k, v, o, dense MLPs and shared experts
  kAttention,          // scores, softmax and the weighted values
  kForward,            // whole forward passes (the rest: norms, rotary, embedding, pooling)
  kCount
};
const char* ForwardStageName(ForwardStage s);

struct ForwardProfileTotals {
  std::array<int64_t, static_cast<int>(ForwardStage::kCount)> ns{};
  // The arithmetic each stage did (a multiply-add counts 2) and the matmul
  // weight bytes it read, as its kernels report them (CountStageWork): what
  // a roofline divides by the stage's time.
  std::array<double, static_cast<int>(ForwardStage::kCount)> flops{};
  std::array<double, static_cast<int>(ForwardStage::kCount)> weight_bytes{};
  int64_t forwards = 0;  // forward passes
  int64_t rows = 0;      // tokens those forwards carried
};

void EnableForwardProfile(bool on);
bool ForwardProfileEnabled();
// Adds one forward of `rows` tokens to the counts (the model calls it).
void CountForward(int64_t rows);
// The totals since the last call (or since enabled), and resets them.
ForwardProfileTotals TakeForwardProfile();

// Adds `flops` and `weight_bytes` to the stage this thread's innermost open
// StageTimer times (nothing outside one, or when disabled). A kernel's caller
// reports its work where it knows the shapes: the timers stay where they are.
void CountStageWork(double flops, double weight_bytes);

// CountStageWork for `rows` rows through w (one matrix of it, read once).
void CountMatmul(const LinearWeight& w, int64_t rows);

// Adds the time from construction to destruction to `stage`, when enabled,
// and makes `stage` this thread's stage for CountStageWork until then.
class StageTimer {
 public:
  explicit StageTimer(ForwardStage stage);
  ~StageTimer();
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;

 private:
  ForwardStage stage_;
  int previous_stage_ = -1;  // the enclosing timer's stage on this thread
  bool on_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace moeedb
