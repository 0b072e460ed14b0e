// EmbedQueue: the only place the model runs in the server. HTTP threads
// submit jobs (a request's token-id lists) and wait on a future. One
// gathering thread takes every queued job that fits a token budget as a
// round (dynamic batching across concurrent requests) and embeds it with
// EmbedWorkers: the round's texts, sorted by length, are split into one part
// per worker with about equal tokens, embedded at the same time, each worker
// on its own compute thread(s); the round's jobs are answered when every
// part is done.
//
// Why split rounds rather than one round per worker: with a few concurrent
// single-text clients, independent workers drift into lopsided rounds (one
// takes the 14 texts that arrived together, the other keeps taking 2), and a
// small forward pays a fixed cost (per-op overhead, per-GEMM weight packing)
// that a 2-text round amortises badly (docs/perf.md, "Server load"). A split
// round keeps every worker busy on an equal share and needs no OpenMP team
// per op.
//
// A full queue refuses new jobs at once (the caller answers 429) instead of
// letting latency grow without bound.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/embed_workers.h"
#include "engine/embedder.h"
#include "engine/status.h"

namespace moeedb {

class EmbedQueue {
 public:
  struct Stats {
    uint64_t batches = 0, texts = 0, tokens = 0;  // rounds run, and what they embedded
    size_t depth = 0;                             // jobs waiting now
    double busy_seconds = 0;                      // summed over workers: time spent embedding
  };

  // `embedder` must outlive the queue. capacity: jobs waiting at most;
  // max_batch_tokens: tokens gathered per round.
  // gather_us: when a round would start with less than a quarter of
  // max_batch_tokens queued, wait up to this long for concurrent requests to
  // join it (0 disables). The wait ends early once as many texts are queued
  // as the previous round had (closed-loop clients come back together), or
  // when no job arrived for gather_us / 4.
  // workers: parts per round, each embedded by its own thread (EmbedWorkers);
  // threads_per_worker: compute threads each (0: the process setting for a
  // single worker, 1 for several).
  EmbedQueue(const Embedder* embedder, size_t capacity, int64_t max_batch_tokens, int64_t gather_us = 2000,
             int workers = 1, int threads_per_worker = 0);
  ~EmbedQueue();  // finishes queued jobs, then stops

  // A future for the embeddings (in input order); InvalidArgument for no
  // inputs or ids the model lacks (Embedder::CheckIds); ResourceExhausted
  // when the queue is full or stopping.
  Result<std::future<Result<std::vector<Embedding>>>> Submit(std::vector<std::vector<int32_t>> ids);

  Stats stats() const;
  // Sizes (texts) of the last rounds, for the batch-size histogram.
  std::vector<size_t> TakeRoundSizes();

 private:
  struct Job {
    std::vector<std::vector<int32_t>> ids;
    std::promise<Result<std::vector<Embedding>>> done;
  };
  void Gather();  // the gathering thread: forms rounds, answers jobs

  const Embedder* embedder_;
  const size_t capacity_;
  const int64_t max_batch_tokens_;
  const int64_t gather_us_;

  mutable std::mutex mu_;  // guards the job queue and stats
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  size_t queued_texts_ = 0;
  int64_t queued_tokens_ = 0;
  bool stopping_ = false;
  Stats stats_;
  std::vector<size_t> round_sizes_;

  EmbedWorkers workers_;  // used by the gathering thread only
  std::thread gatherer_;
};

}  // namespace moeedb
