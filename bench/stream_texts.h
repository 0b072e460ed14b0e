// Pushes token-id texts through a StreamingEmbedder from a producer thread
// and drains the results, as `moeedb embed` does: the benchmarks' way of
// running the CLI's path.
#pragma once

#include <chrono>
#include <thread>
#include <vector>

#include "bench/bench_child.h"
#include "engine/embed/embed_workers.h"
#include "engine/embed/streaming_embedder.h"
#include "engine/kernels/runtime.h"

namespace moeedb::bench {

// Every text through `stream` (which is closed after them); a failed push
// or forward, or a lost result, ends the benchmark.
inline void StreamTexts(StreamingEmbedder* stream, const std::vector<std::vector<int32_t>>& texts) {
  std::thread producer([&] {
    for (const auto& ids : texts)
      if (!stream->PushIds(ids).ok()) Die("push failed");
    stream->Close();
  });
  Result<Embedding> r = Status::Internal("unset");
  size_t got = 0;
  while (stream->Next(&r)) {
    if (!r.ok()) Die(r.status().ToString());
    ++got;
  }
  producer.join();
  if (got != texts.size()) Die("the stream lost results");
}

// Seconds to embed the texts through the CLI's path: a StreamingEmbedder
// over EmbedWorkers with the compute threads shared as `moeedb embed`
// shares them by default.
inline double EmbedLikeTheCli(const Embedder& embedder, const std::vector<std::vector<int32_t>>& texts) {
  const WorkerShare share = ShareComputeThreads(0, ComputeThreads());
  StreamingOptions so;
  so.workers = share.workers;
  so.threads_per_worker = share.threads_per_worker;
  const auto t0 = std::chrono::steady_clock::now();
  StreamingEmbedder stream(&embedder, so);
  StreamTexts(&stream, texts);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace moeedb::bench
