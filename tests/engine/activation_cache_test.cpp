// The caching CPU allocator a forward pass's activations come from: large
// blocks allocated inside an ActivationScope are reused once freed (from any
// thread), everything else is allocated and freed as before, and the data
// is the tensor's own either way; the free blocks never take the cache past
// the most ever live at once, and go once no scope has been open for the
// idle time (MOEEDB_ACTIVATION_IDLE_MS, 1000 ms by default).
#include "engine/kernels/activation_cache.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>

namespace moeedb {
namespace {

constexpr int64_t kFloats = 3 << 20;  // 12 MiB: cache class

TEST(ActivationCacheTest, ALargeBlockFreedInsideAScopeIsReusedWithItsNewContents) {
  InstallActivationCache();
  ActivationScope busy;  // while one is open, the idle release waits
  ReleaseActivationCache();
  const ActivationCacheStats before = GetActivationCacheStats();
  ActivationScope scope;
  void* first = nullptr;
  {
    at::Tensor a = at::full({kFloats}, 1.5f);
    first = a.data_ptr();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
    EXPECT_EQ(GetActivationCacheStats().live_bytes - before.live_bytes >= kFloats * 4, true);
  }
  EXPECT_GE(GetActivationCacheStats().cached_bytes, kFloats * 4);
  at::Tensor b = at::arange(kFloats, at::kFloat);  // same size: the freed block
  EXPECT_EQ(b.data_ptr(), first);
  EXPECT_EQ(b[kFloats - 1].item<float>(), static_cast<float>(kFloats - 1));
  EXPECT_EQ(GetActivationCacheStats().reused, before.reused + 1);
  // Much smaller than the cached block (more than a quarter to spare): a new one.
  at::Tensor c = at::zeros({kFloats / 2}, at::kFloat);
  EXPECT_NE(c.data_ptr(), first);
  EXPECT_EQ(c.sum().item<float>(), 0.0f);
}

TEST(ActivationCacheTest, OutsideAScopeAndBelowTheSizeNothingIsCached) {
  InstallActivationCache();
  ReleaseActivationCache();
  const ActivationCacheStats before = GetActivationCacheStats();
  { at::Tensor a = at::ones({kFloats}); }  // no scope
  {
    ActivationScope scope;
    at::Tensor small = at::ones({1024});  // below kMinCachedBytes
    EXPECT_EQ(small.sum().item<float>(), 1024.0f);
  }
  const ActivationCacheStats after = GetActivationCacheStats();
  EXPECT_EQ(after.cached_bytes, 0);
  EXPECT_EQ(after.mapped, before.mapped);
}

TEST(ActivationCacheTest, ABlockFreedOnAnotherThreadGoesBackToTheCache) {
  InstallActivationCache();
  ActivationScope busy;  // while one is open, the idle release waits
  ReleaseActivationCache();
  at::Tensor a;
  {
    ActivationScope scope;
    a = at::ones({kFloats});
  }
  void* p = a.data_ptr();
  std::thread([t = std::move(a)]() mutable { t.reset(); }).join();
  EXPECT_GE(GetActivationCacheStats().cached_bytes, kFloats * 4);
  ActivationScope scope;
  at::Tensor b = at::empty({kFloats});
  EXPECT_EQ(b.data_ptr(), p);
  ReleaseActivationCache();
  EXPECT_EQ(GetActivationCacheStats().cached_bytes, 0);
}

TEST(ActivationCacheTest, FreeBlocksThatFitNothingAreDroppedAtThePeakOfLiveBytes) {
  InstallActivationCache();
  ActivationScope scope;
  ReleaseActivationCache();
  { at::Tensor a = at::ones({kFloats}); }  // a 14 MiB mapping (12 MiB and the header, in 2 MiB pages) free, the peak
  EXPECT_GE(GetActivationCacheStats().cached_bytes, kFloats * 4);
  // A third of it: too small to reuse the free block, and live + free would
  // pass the peak, so the free block is unmapped for it.
  at::Tensor b = at::ones({kFloats / 3});
  ActivationCacheStats s = GetActivationCacheStats();
  EXPECT_EQ(s.cached_bytes, 0);
  EXPECT_LE(s.live_bytes + s.cached_bytes, s.peak_live_bytes);
  // Below the peak, a free block stays beside a live one.
  at::Tensor c = at::ones({kFloats / 3});
  c.reset();
  at::Tensor d = at::ones({1 << 18});  // 1 MiB: c's block is too large for it, and live + free stay at the peak
  s = GetActivationCacheStats();
  EXPECT_GT(s.cached_bytes, 0);
  EXPECT_LE(s.live_bytes + s.cached_bytes, s.peak_live_bytes);
  EXPECT_EQ(b.sum().item<float>(), static_cast<float>(kFloats / 3));
}

TEST(ActivationCacheTest, AnIdleCacheIsReleased) {
  InstallActivationCache();
  const int64_t releases = GetActivationCacheStats().releases;
  {
    ActivationScope scope;
    at::Tensor a = at::ones({kFloats});
  }
  // No scope open now on any thread (the tests run one at a time): within a
  // few idle times the free block goes.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (GetActivationCacheStats().cached_bytes > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const ActivationCacheStats s = GetActivationCacheStats();
  EXPECT_EQ(s.cached_bytes, 0);
  EXPECT_GT(s.releases, releases);
}

}  // namespace
}  // namespace moeedb
