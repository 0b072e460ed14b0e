// StreamingEmbedder: an unbounded stream of inputs in, their embeddings out
// in input order, with bounded memory.
//
// A producer Push()es inputs (blocking while max_queued inputs wait); one
// worker thread takes them a window at a time (window_tokens tokens, or
// whatever is there once the stream is closed or the worker would otherwise
// idle), and runs the window through Embedder::EmbedIds (split across
// EmbedWorkers when options.workers > 1), which sorts it by length and packs
// token-budget batches; results wait in a bounded output queue for Next().
// Tokenising in the producer overlaps the model's work.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/embed/embed_workers.h"
#include "engine/embed/embedder.h"
#include "base/status.h"

namespace moeedb {

struct StreamingOptions {
  size_t max_queued = 1024;      // inputs waiting for the model, at most (Push blocks beyond)
  size_t max_ready = 1024;       // embeddings waiting for Next, at most (the worker blocks beyond)
  int64_t window_tokens = 0;     // tokens per window; 0: 4 x the embedder's batch_tokens
  int linger_ms = 5;             // a queue that stops growing this long is run as it is
  // Each window is split across this many EmbedWorkers (embed_workers.h),
  // each with threads_per_worker compute threads; 1: the window runs on the
  // stream's own thread with the process's compute threads.
  int workers = 1;
  int threads_per_worker = 1;
};

class StreamingEmbedder {
 public:
  // `embedder` must outlive this object. Starts the worker thread.
  StreamingEmbedder(const Embedder* embedder, StreamingOptions options = {});
  // Closes the stream, drops undelivered results and joins the worker.
  ~StreamingEmbedder();
  StreamingEmbedder(const StreamingEmbedder&) = delete;
  StreamingEmbedder& operator=(const StreamingEmbedder&) = delete;

  // Queues one input (the ids Embedder::Tokenize gives; empty ids or ids
  // outside the vocabulary are InvalidArgument, and nothing is queued).
  // Blocks while max_queued inputs wait. Error after Close().
  Status PushIds(std::vector<int32_t> ids);
  // Tokenises `text` in the caller's thread, then PushIds.
  Status PushText(std::string_view text);
  // No more input: the worker runs what is queued, however little.
  void Close();
  // The next embedding in input order. Blocks until it is ready. Returns
  // false once the stream is closed and every result was delivered; a failed
  // forward pass is delivered as an error (and ends the stream).
  bool Next(Result<Embedding>* out);
  // Inputs pushed and not yet taken by the worker.
  size_t queued() const;

 private:
  void Run();

  const Embedder* embedder_;
  StreamingOptions options_;
  mutable std::mutex mu_;
  std::condition_variable can_push_, can_take_, can_next_;
  std::deque<std::vector<int32_t>> queued_;
  int64_t queued_tokens_ = 0;
  std::deque<Result<Embedding>> ready_;
  bool closed_ = false;    // no more Push
  bool stopping_ = false;  // destructor: abandon everything
  bool worker_done_ = false;
  EmbedWorkers workers_;  // used by the stream's thread only
  std::thread worker_;
};

}  // namespace moeedb
