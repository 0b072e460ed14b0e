// ActivationCache: libtorch's CPU allocator, with the large blocks a forward
// pass allocates kept for the next forward instead of returned to the kernel.
//
// Why: glibc serves a block above its mmap threshold (and any block too big
// for a worker thread's arena) with fresh pages, and a forward over many
// rows allocates gigabytes of such activations, layer after layer: every
// page was faulted in and zeroed by the kernel again, two workers contending
// for the process's page tables, and a 16384-token forward spent more time
// in page faults than in its GEMMs. Cached blocks are reused best-fit (at
// most a quarter larger than asked); they are mapped with transparent huge
// pages where the kernel allows it.
//
// Only blocks of at least kMinCachedBytes allocated by a thread inside an
// ActivationScope are cached, so loading a model (which frees its float
// copies as it quantises) keeps its memory profile. Freed blocks are kept
// while the cache holds less than its limit (MOEEDB_ACTIVATION_CACHE_MB,
// default 4096; 0 turns caching off) and unmapped beyond it.
//
// Bounded by what the forwards need: when no free block fits a request,
// free blocks are unmapped until the live and free blocks together are no
// more than the most live at once since the last release (the peak of the
// concurrent forwards). Released when idle: once no scope has been open on
// any thread for MOEEDB_ACTIVATION_IDLE_MS (default 1000; 0: never), a
// background thread unmaps every free block and returns glibc's free heap
// pages to the system (malloc_trim), so an idle server's RSS falls back to
// its weights. With caching off there is no such thread.
#pragma once

#include <cstdint>

namespace moeedb {

constexpr int64_t kMinCachedBytes = 1 << 20;

// Replaces libtorch's CPU allocator with the caching one (idempotent,
// thread-safe). Tensors allocated before keep their own deleter.
void InstallActivationCache();

// While one is open on a thread, that thread's large CPU allocations come
// from the cache and go back to it when freed (from any thread). Nests.
class ActivationScope {
 public:
  ActivationScope();
  ~ActivationScope();
  ActivationScope(const ActivationScope&) = delete;
  ActivationScope& operator=(const ActivationScope&) = delete;
};

struct ActivationCacheStats {
  int64_t cached_bytes = 0;  // free blocks held for reuse
  int64_t live_bytes = 0;    // cache-class blocks in use
  int64_t reused = 0;        // allocations served from the cache
  int64_t mapped = 0;        // allocations that mapped fresh memory
  int64_t peak_live_bytes = 0;  // the most live at once since the last release
  int64_t releases = 0;      // times every free block was unmapped (idle or asked)
};
ActivationCacheStats GetActivationCacheStats();
// Unmaps every free block (live blocks are unaffected).
void ReleaseActivationCache();

}  // namespace moeedb
