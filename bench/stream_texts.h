// Pushes token-id texts through a StreamingEmbedder from a producer thread
// and drains the results, as `moeedb embed` does: the benchmarks' way of
// running the CLI's path.
#pragma once

#include <thread>
#include <vector>

#include "bench/bench_child.h"
#include "engine/embed/streaming_embedder.h"

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

}  // namespace moeedb::bench
