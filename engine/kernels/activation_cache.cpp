#include "engine/kernels/activation_cache.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <sys/mman.h>

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <thread>

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
    const char* idle = std::getenv("MOEEDB_ACTIVATION_IDLE_MS");
    idle_ms_ = std::min<int64_t>(idle != nullptr ? std::strtoll(idle, nullptr, 10) : 1000, 86'400'000);  // a day at most
  }

  void* Take(size_t bytes) {
    std::multimap<size_t, void*> drop;
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
      peak_live_ = std::max(peak_live_, live_bytes_);
      ++mapped_;
      // No free block fits: free ones are unmapped (largest first) until the
      // live and free blocks together take no more than the most ever live
      // at once, so blocks of sizes no longer asked for do not pile up.
      while (!free_.empty() && live_bytes_ + cached_bytes_ > peak_live_) {
        auto last = std::prev(free_.end());
        cached_bytes_ -= static_cast<int64_t>(last->first);
        drop.insert(*last);
        free_.erase(last);
      }
    }
    for (auto& [n, q] : drop) munmap(q, n);
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
      peak_live_ = live_bytes_;  // the next busy spell learns its own peak (a forward that began
                                 // in the idle thread's moment between its check and this keeps working: only free blocks go)
      ++released_;
    }
    for (auto& [bytes, p] : drop) munmap(p, bytes);
  }

  bool enabled() const { return limit_ > 0; }

  // A thread's outermost ActivationScope opens or closes.
  void ScopeOpened() {
    std::lock_guard<std::mutex> lock(idle_mu_);
    ++open_scopes_;
    ++generation_;
  }
  void ScopeClosed() {
    {
      std::lock_guard<std::mutex> lock(idle_mu_);
      --open_scopes_;
    }
    idle_cv_.notify_all();
  }

  // Starts the thread that releases the cache (and glibc's free heap pages)
  // once no scope has been open for idle_ms_: an embedder between requests
  // holds no activations. Once; never stopped (the cache outlives statics).
  void StartIdleRelease() {
    if (idle_ms_ <= 0) return;
    std::thread([this] {
      std::unique_lock<std::mutex> lock(idle_mu_);
      while (true) {
        idle_cv_.wait(lock, [&] { return open_scopes_ == 0 && generation_ != released_generation_; });
        const uint64_t seen = generation_;
        const bool woken = idle_cv_.wait_for(lock, std::chrono::milliseconds(idle_ms_),
                                             [&] { return open_scopes_ > 0 || generation_ != seen; });
        if (woken) continue;  // busy again: wait for the next idle spell
        released_generation_ = seen;
        lock.unlock();
        Release();
#if defined(__GLIBC__)
        malloc_trim(0);  // the heap's free pages too (arenas keep them otherwise)
#endif
        lock.lock();
      }
    }).detach();
  }

  ActivationCacheStats Stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {cached_bytes_, live_bytes_, reused_, mapped_, peak_live_, released_};
  }

 private:
  std::mutex mu_;
  std::multimap<size_t, void*> free_;  // by mapping length
  int64_t limit_ = 0, cached_bytes_ = 0, live_bytes_ = 0, reused_ = 0, mapped_ = 0, peak_live_ = 0, released_ = 0;
  // The idle release: scopes open on any thread, and a count of openings
  // so a spell that ended and began again within idle_ms_ is told apart.
  int64_t idle_ms_ = 0;
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
  int64_t open_scopes_ = 0;
  uint64_t generation_ = 0, released_generation_ = 0;
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
    if (TheCache().enabled()) TheCache().StartIdleRelease();
  });
}

ActivationScope::ActivationScope() {
  if (t_scope_depth++ == 0) TheCache().ScopeOpened();
}
ActivationScope::~ActivationScope() {
  if (--t_scope_depth == 0) TheCache().ScopeClosed();
}

ActivationCacheStats GetActivationCacheStats() { return TheCache().Stats(); }
void ReleaseActivationCache() { TheCache().Release(); }

}  // namespace moeedb
