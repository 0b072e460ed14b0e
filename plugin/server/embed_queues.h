// EmbedQueues: one EmbedQueue per embedding setup the server embeds with
// (the served setup, and each collection's recorded one), created on first
// use with the same options, so every setup gets dynamic batching.
// Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "plugin/server/embed_queue.h"
#include "database/embedding_setup.h"

namespace moeedb {

struct EmbedQueueOptions {
  size_t capacity = 256;            // jobs waiting at most, per queue
  int64_t max_batch_tokens = 16384;
  int64_t gather_us = 2000;
  int workers = 1;
  int threads_per_worker = 0;       // 0: the constructing thread's setting
};

class EmbedQueues {
 public:
  explicit EmbedQueues(EmbedQueueOptions options) : options_(options) {}
  // The queue of `setup` (which must outlive this object), created on first use.
  EmbedQueue& For(const EmbeddingSetup& setup);
  // Every queue's statistics, summed.
  EmbedQueue::Stats stats() const;
  // The forward sizes of every queue since the last call.
  std::vector<size_t> TakeForwardSizes();

 private:
  const EmbedQueueOptions options_;
  mutable std::mutex mu_;
  std::map<const EmbeddingSetup*, std::unique_ptr<EmbedQueue>> queues_;
};

}  // namespace moeedb
