#include "engine/model/forward_profile.h"

#include <atomic>

namespace moeedb {

namespace {

constexpr int kStages = static_cast<int>(ForwardStage::kCount);
std::atomic<bool> g_enabled{false};
std::array<std::atomic<int64_t>, kStages> g_ns{};
std::atomic<int64_t> g_forwards{0}, g_rows{0};

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
  t.forwards = g_forwards.exchange(0);
  t.rows = g_rows.exchange(0);
  return t;
}

StageTimer::StageTimer(ForwardStage stage) : stage_(stage), on_(ForwardProfileEnabled()) {
  if (on_) start_ = std::chrono::steady_clock::now();
}

StageTimer::~StageTimer() {
  if (!on_) return;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_);
  g_ns[static_cast<size_t>(stage_)].fetch_add(ns.count(), std::memory_order_relaxed);
}

}  // namespace moeedb
