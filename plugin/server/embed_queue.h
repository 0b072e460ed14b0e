// EmbedQueue: the only place the model runs in the server. HTTP threads
// submit jobs (a request's token-id lists) and wait on a future. Model
// workers, each a thread with its own compute thread(s), take queued texts
// whenever they are free and embed them in one forward (dynamic batching
// across concurrent requests); a job is answered once every one of its texts
// is embedded, whichever workers its texts went to.
//
// How much a free worker takes: its share of the texts in flight (queued
// plus in forwards, as counted when a forward last ended), or of what is
// queued if that is more, up to the token budget. While less than its share
// is queued it waits a little for concurrent requests to join (gather_us).
// Why shares, rather than "take everything queued": with a few concurrent
// single-text clients, a worker that takes all it finds drifts into lopsided
// forwards (one takes the 14 texts whose clients came back together, the
// other keeps taking 2), and a small forward pays a fixed cost that 2 texts
// amortise badly (docs/perf.md, "Server load"). Why free workers take work
// on their own, rather than all starting a split round together: the workers
// fall out of step, so while one worker's clients receive their answers and
// send their next texts, the other is still computing; nobody waits for the
// slower part of a round.
//
// A full queue refuses new jobs at once (the caller answers 429) instead of
// letting latency grow without bound.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/embed/embedder.h"
#include "base/status.h"

namespace moeedb {

class EmbedQueue {
 public:
  struct Stats {
    uint64_t batches = 0, texts = 0, tokens = 0;  // forwards run, and what they embedded
    size_t depth = 0;                             // jobs waiting now (with texts no worker took yet)
    double busy_seconds = 0;                      // summed over workers: time spent embedding
  };

  // `embedder` must outlive the queue. capacity: jobs waiting at most;
  // max_batch_tokens: tokens per forward at most (a text longer than that
  // goes alone). gather_us: how long a free worker waits for concurrent
  // requests while less than its share is queued (0: never waits); the wait
  // also ends when no request arrived for gather_us / 4. workers: model
  // threads; threads_per_worker: compute threads each (0: the constructing
  // thread's setting).
  EmbedQueue(const Embedder* embedder, size_t capacity, int64_t max_batch_tokens, int64_t gather_us = 2000,
             int workers = 1, int threads_per_worker = 0);
  ~EmbedQueue();  // finishes queued jobs, then stops
  EmbedQueue(const EmbedQueue&) = delete;
  EmbedQueue& operator=(const EmbedQueue&) = delete;

  // A future for the embeddings (in input order); InvalidArgument for no
  // inputs or ids the model lacks (Embedder::CheckAllIds); ResourceExhausted
  // when the queue is full or stopping.
  // With token_states, the embeddings also hold every token's hidden state.
  Result<std::future<Result<std::vector<Embedding>>>> Submit(std::vector<std::vector<int32_t>> ids,
                                                             bool token_states = false);

  Stats stats() const;
  // Sizes (texts) of the last forwards, for the batch-size histogram.
  std::vector<size_t> TakeForwardSizes();

 private:
  struct Job {
    std::vector<std::vector<int32_t>> ids;  // a text's ids move out when a worker takes it
    std::vector<Embedding> out;
    size_t left = 0;  // texts not embedded yet
    bool token_states = false;
    Status error;     // the first failure among its texts' forwards
    std::promise<Result<std::vector<Embedding>>> done;
  };
  struct Taken {
    std::shared_ptr<Job> job;
    size_t index;
  };
  void Work(int threads);  // a worker thread's loop
  // Under mu_: waits for texts to take (gathering a share); empty when
  // stopping and drained.
  std::vector<Taken> TakeShare(std::unique_lock<std::mutex>& lock, std::vector<std::vector<int32_t>>* ids,
                               int64_t* tokens);

  const Embedder* embedder_;
  const size_t capacity_;
  const int64_t max_batch_tokens_;
  const int64_t gather_us_;
  const int workers_;

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> jobs_;  // jobs with texts not taken yet; the front may be partly taken
  size_t front_taken_ = 0;                 // texts of jobs_.front() already taken
  size_t queued_texts_ = 0;
  int64_t queued_tokens_ = 0;
  uint64_t arrivals_ = 0;                  // jobs submitted, ever (to see a pause in arrivals)
  size_t forward_texts_ = 0;               // in forwards now
  int64_t forward_tokens_ = 0;
  size_t inflight_texts_ = 0;              // queued + in forwards when a forward last ended
  int64_t inflight_tokens_ = 0;
  bool stopping_ = false;
  Stats stats_;
  std::vector<size_t> forward_sizes_;

  std::vector<std::thread> threads_;
};

}  // namespace moeedb
