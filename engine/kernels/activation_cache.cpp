#include "engine/kernels/activation_cache.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>

namespace moeedb {

namespace {

// Every block starts with this header, so one deleter frees either kind;
// the data follows at kHeader bytes (libtorch's CPU alignment).
constexpr size_t kHeader = 64;
constexpr size_t kHugePage = size_t{2} << 20;
constexpr uint32_t kMagic = 0x6d6f6565;  // "moee"

struct Header {
  uint32_t magic;
  uint32_t cached;  // 1: a mapped block of the cache, else malloc'd
  size_t bytes;     // the mapping's length (cached blocks)
};
static_assert(sizeof(Header) <= kHeader, "header too large");

thread_local int t_scope_depth = 0;

class Cache {
 public:
  Cache() {
    const char* env = std::getenv("MOEEDB_ACTIVATION_CACHE_MB");
    limit_ = (env != nullptr ? std::strtoll(env, nullptr, 10) : 4096) << 20;
  }

  void* Take(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.lower_bound(bytes);
      if (it != free_.end() && it->first <= bytes + bytes / 4) {
        void* p = it->second;
        cached_bytes_ -= static_cast<int64_t>(it->first);
        live_bytes_ += static_cast<int64_t>(it->first);
        free_.erase(it);
        ++reused_;
        return p;
      }
      live_bytes_ += static_cast<int64_t>(bytes);
      ++mapped_;
    }
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      std::lock_guard<std::mutex> lock(mu_);
      live_bytes_ -= static_cast<int64_t>(bytes);
      return nullptr;
    }
    (void)madvise(p, bytes, MADV_HUGEPAGE);  // fewer faults where THP is in madvise mode
    return p;
  }

  void Give(void* p, size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_bytes_ -= static_cast<int64_t>(bytes);
      if (cached_bytes_ + static_cast<int64_t>(bytes) <= limit_) {
        free_.emplace(bytes, p);
        cached_bytes_ += static_cast<int64_t>(bytes);
        return;
      }
    }
    munmap(p, bytes);
  }

  void Release() {
    std::multimap<size_t, void*> drop;
    {
      std::lock_guard<std::mutex> lock(mu_);
      drop.swap(free_);
      cached_bytes_ = 0;
    }
    for (auto& [bytes, p] : drop) munmap(p, bytes);
  }

  bool enabled() const { return limit_ > 0; }

  ActivationCacheStats Stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {cached_bytes_, live_bytes_, reused_, mapped_};
  }

 private:
  std::mutex mu_;
  std::multimap<size_t, void*> free_;  // by mapping length
  int64_t limit_ = 0, cached_bytes_ = 0, live_bytes_ = 0, reused_ = 0, mapped_ = 0;
};

Cache& TheCache() {
  static Cache* cache = new Cache();  // never destroyed: tensors may outlive static destruction
  return *cache;
}

void Free(void* data) {
  if (data == nullptr) return;
  char* base = static_cast<char*>(data) - kHeader;
  const Header h = *reinterpret_cast<Header*>(base);
  if (h.magic != kMagic) std::abort();  // not ours: memory corruption
  if (h.cached) {
    TheCache().Give(base, h.bytes);
  } else {
    std::free(base);
  }
}

class CachingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) const override {
    void* base = nullptr;
    Header h{kMagic, 0, 0};
    if (t_scope_depth > 0 && n >= static_cast<size_t>(kMinCachedBytes) && TheCache().enabled()) {
      h.cached = 1;
      h.bytes = (n + kHeader + kHugePage - 1) / kHugePage * kHugePage;
      base = TheCache().Take(h.bytes);
    } else if (posix_memalign(&base, kHeader, n + kHeader) != 0) {
      base = nullptr;
    }
    if (base == nullptr) throw std::bad_alloc();
    *static_cast<Header*>(base) = h;
    void* data = static_cast<char*>(base) + kHeader;
    return {data, data, &Free, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &Free; }
  // libtorch 2.x asks allocators to copy; 1.13 has no such method.
  void copy_data(void* dest, const void* src, std::size_t count) const { std::memcpy(dest, src, count); }
};

}  // namespace

void InstallActivationCache() {
  static std::once_flag once;
  std::call_once(once, [] {
    static CachingCpuAllocator allocator;
    c10::SetCPUAllocator(&allocator, /*priority=*/1);
  });
}

ActivationScope::ActivationScope() { ++t_scope_depth; }
ActivationScope::~ActivationScope() { --t_scope_depth; }

ActivationCacheStats GetActivationCacheStats() { return TheCache().Stats(); }
void ReleaseActivationCache() { TheCache().Release(); }

}  // namespace moeedb
