#include "plugin/server/embed_queues.h"

namespace moeedb {

EmbedQueue& EmbedQueues::For(const EmbeddingSetup& setup) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& q = queues_[&setup];
  if (!q)
    q = std::make_unique<EmbedQueue>(&setup.embedder(), options_.capacity, options_.max_batch_tokens,
                                     options_.gather_us, options_.workers, options_.threads_per_worker);
  return *q;
}

EmbedQueue::Stats EmbedQueues::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  EmbedQueue::Stats sum;
  for (const auto& [setup, q] : queues_) {
    const EmbedQueue::Stats s = q->stats();
    sum.batches += s.batches;
    sum.texts += s.texts;
    sum.tokens += s.tokens;
    sum.depth += s.depth;
    sum.busy_seconds += s.busy_seconds;
  }
  return sum;
}

std::vector<size_t> EmbedQueues::TakeForwardSizes() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<size_t> out;
  for (auto& [setup, q] : queues_) {
    std::vector<size_t> part = q->TakeForwardSizes();
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

}  // namespace moeedb
