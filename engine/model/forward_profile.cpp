#include "engine/model/forward_profile.h"

#include <ATen/ATen.h>

#include <atomic>

#include "engine/kernels/linear_weight.h"

namespace moeedb {

namespace {

constexpr int kStages = static_cast<int>(ForwardStage::kCount);
std::atomic<bool> g_enabled{false};
std::array<std::atomic<int64_t>, kStages> g_ns{};
std::array<std::atomic<double>, kStages> g_flops{}, g_weight_bytes{};
std::atomic<int64_t> g_forwards{0}, g_rows{0};
thread_local int t_stage = -1;  // the innermost open StageTimer's stage on this thread

void Add(std::atomic<double>* total, double v) {  // fetch_add for double is C++20's
  double seen = total->load(std::memory_order_relaxed);
  while (!total->compare_exchange_weak(seen, seen + v, std::memory_order_relaxed)) {
  }
}

}  // namespace

const char* ForwardStageName(ForwardStage s) {
  switch (s) {
    case ForwardStage::kExpertGemm: return "expert_gemm";
    case ForwardStage::kExpertBookkeeping: return "expert_bookkeeping";
    case ForwardStage::kRouting: return "routing";
    case ForwardStage::kProjections: return "projections";
    case ForwardStage::kAttention: return "attention";
    case ForwardStage::kForward: return "forward";
    case ForwardStage::kCount: break;
  }
  return "?";
}

void EnableForwardProfile(bool on) { g_enabled.store(on, std::memory_order_relaxed); }
bool ForwardProfileEnabled() { return g_enabled.load(std::memory_order_relaxed); }

void CountForward(int64_t rows) {
  if (!ForwardProfileEnabled()) return;
  g_forwards.fetch_add(1, std::memory_order_relaxed);
  g_rows.fetch_add(rows, std::memory_order_relaxed);
}

ForwardProfileTotals TakeForwardProfile() {
  ForwardProfileTotals t;
  for (int i = 0; i < kStages; ++i) t.ns[static_cast<size_t>(i)] = g_ns[static_cast<size_t>(i)].exchange(0);
  for (int i = 0; i < kStages; ++i) {
    t.flops[static_cast<size_t>(i)] = g_flops[static_cast<size_t>(i)].exchange(0);
    t.weight_bytes[static_cast<size_t>(i)] = g_weight_bytes[static_cast<size_t>(i)].exchange(0);
  }
  t.forwards = g_forwards.exchange(0);
  t.rows = g_rows.exchange(0);
  return t;
}

void CountStageWork(double flops, double weight_bytes) {
  if (!ForwardProfileEnabled() || t_stage < 0) return;
  Add(&g_flops[static_cast<size_t>(t_stage)], flops);
  if (weight_bytes > 0) Add(&g_weight_bytes[static_cast<size_t>(t_stage)], weight_bytes);
}

void CountMatmul(const LinearWeight& w, int64_t rows) {
  if (!ForwardProfileEnabled() || rows <= 0) return;
  const double weights = static_cast<double>(w.in_features()) * static_cast<double>(w.out_features());
  CountStageWork(2.0 * static_cast<double>(rows) * weights,
                 weights * static_cast<double>(c10::elementSize(w.stored_type())));
}

StageTimer::StageTimer(ForwardStage stage) : stage_(stage), on_(ForwardProfileEnabled()) {
  if (!on_) return;
  previous_stage_ = t_stage;
  t_stage = static_cast<int>(stage);
  start_ = std::chrono::steady_clock::now();
}

StageTimer::~StageTimer() {
  if (!on_) return;
  t_stage = previous_stage_;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_);
  g_ns[static_cast<size_t>(stage_)].fetch_add(ns.count(), std::memory_order_relaxed);
}

}  // namespace moeedb
