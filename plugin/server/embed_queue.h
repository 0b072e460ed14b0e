// EmbedQueue: the only place the model runs in the server. HTTP threads
// submit jobs (a request's token-id lists) and wait on a future; a worker
// thread takes every queued job that fits a token budget, embeds them as one
// set of batches (dynamic batching across concurrent requests), and hands
// each job its slice of the results. With several workers (each with its
// share of the compute threads), one round runs while the next gathers: the
// model is not idle while answers travel and new requests arrive. A full queue refuses new jobs at once
// (the caller answers 429) instead of letting latency grow without bound.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/embedder.h"
#include "engine/status.h"

namespace moeedb {

class EmbedQueue {
 public:
  struct Stats {
    uint64_t batches = 0, texts = 0, tokens = 0;
    size_t depth = 0;  // jobs waiting now
  };

  // `embedder` must outlive the queue. capacity: jobs waiting at most;
  // max_batch_tokens: tokens gathered per worker round; gather_us: when a
  // round would start with less than a quarter of max_batch_tokens queued,
  // the worker waits up to this long for concurrent requests to join it
  // (micro-batching; 0 disables).
  // workers: model rounds in flight at once; threads_per_worker: compute
  // threads each (0: leave the process setting).
  EmbedQueue(const Embedder* embedder, size_t capacity, int64_t max_batch_tokens, int64_t gather_us = 2000,
             int workers = 1, int threads_per_worker = 0);
  ~EmbedQueue();  // finishes queued jobs, then stops

  // A future for the embeddings (in input order), or a ResourceExhausted
  // error when the queue is full or stopping.
  Result<std::future<Result<std::vector<Embedding>>>> Submit(std::vector<std::vector<int32_t>> ids);

  Stats stats() const;
  // Sizes (texts) of the last worker rounds, for the batch-size histogram.
  std::vector<size_t> TakeRoundSizes();

 private:
  struct Job {
    std::vector<std::vector<int32_t>> ids;
    std::promise<Result<std::vector<Embedding>>> done;
  };
  void Work();

  const Embedder* embedder_;
  const size_t capacity_;
  const int64_t max_batch_tokens_;
  const int64_t gather_us_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  Stats stats_;
  std::vector<size_t> round_sizes_;
  const int threads_per_worker_;
  std::vector<std::thread> workers_;
};

}  // namespace moeedb
