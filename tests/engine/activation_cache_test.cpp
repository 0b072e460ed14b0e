// The caching CPU allocator a forward pass's activations come from: large
// blocks allocated inside an ActivationScope are reused once freed (from any
// thread), everything else is allocated and freed as before, and the data
// is the tensor's own either way.
#include "engine/kernels/activation_cache.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

namespace moeedb {
namespace {

constexpr int64_t kFloats = 3 << 20;  // 12 MiB: cache class

TEST(ActivationCacheTest, ALargeBlockFreedInsideAScopeIsReusedWithItsNewContents) {
  InstallActivationCache();
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

}  // namespace
}  // namespace moeedb
