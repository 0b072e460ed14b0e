// EmbedWorkers: Embedder::EmbedIds split across worker threads, each with
// its own compute threads.
//
// A call's inputs, sorted by length, are cut into one contiguous part per
// worker with about equal tokens; the workers embed their parts at once and
// the results come back in input order, equal to EmbedIds on the whole list.
// Why: on few cores, two one-threaded forwards of half the texts each ran
// ~1.3x faster than one two-threaded forward of all of them, for the demo
// model and an OLMoE-shaped one alike (docs/perf.md): a one-threaded forward
// wakes no OpenMP team for each of its hundreds of small ops.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/embed/embedder.h"
#include "base/status.h"

namespace moeedb {

// How `threads` compute threads are shared: `workers` workers (0: two where
// there are two threads or more, else one), each with threads / workers of
// them (at least one).
struct WorkerShare {
  int workers = 1;
  int threads_per_worker = 1;
};
WorkerShare ShareComputeThreads(int workers, int threads);

// Embedder::EmbedIds for a worker thread: anything it throws (an allocation
// failure) becomes an Internal status instead of ending the process.
Result<std::vector<Embedding>> EmbedIdsNoThrow(const Embedder& embedder, const std::vector<std::vector<int32_t>>& ids,
                                               bool token_states = false);

class EmbedWorkers {
 public:
  // `embedder` must outlive this object. workers <= 1: Embed runs on the
  // calling thread with the process's compute threads. Otherwise `workers`
  // threads start, each with threads_per_worker compute threads (>= 1); a
  // call with a single input still runs on the calling thread, with the
  // compute threads the constructing thread had.
  EmbedWorkers(const Embedder* embedder, int workers, int threads_per_worker);
  ~EmbedWorkers();
  EmbedWorkers(const EmbedWorkers&) = delete;
  EmbedWorkers& operator=(const EmbedWorkers&) = delete;

  // Embedder::EmbedIds(ids), computed in parts on the workers. One call at a
  // time (calls from several threads are serialised). An error in any part
  // (bad ids: InvalidArgument naming the input's index in `ids`) fails the
  // whole call, as EmbedIds does.
  Result<std::vector<Embedding>> Embed(const std::vector<std::vector<int32_t>>& ids);

  int workers() const { return static_cast<int>(threads_.size()) > 0 ? static_cast<int>(threads_.size()) : 1; }
  // Seconds the workers spent embedding, summed over workers.
  double busy_seconds() const;

 private:
  struct Part {
    std::vector<size_t> inputs;  // indices into the call's ids
    Result<std::vector<Embedding>> out = std::vector<Embedding>{};
  };
  void Work(int w, int threads);

  const Embedder* embedder_;
  const int caller_threads_;  // the constructing thread's compute threads: a single input's
  std::mutex call_mu_;  // one Embed at a time
  mutable std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::vector<std::vector<int32_t>>* ids_ = nullptr;
  std::vector<Part> parts_;
  uint64_t seq_ = 0;
  int parts_left_ = 0;
  bool quit_ = false;
  double busy_seconds_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace moeedb
