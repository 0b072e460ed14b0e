#include "plugin/server/embed_queue.h"

#include <chrono>

#include "engine/runtime.h"

namespace moeedb {

EmbedQueue::EmbedQueue(const Embedder* embedder, size_t capacity, int64_t max_batch_tokens, int64_t gather_us,
                       int workers, int threads_per_worker)
    : embedder_(embedder),
      capacity_(capacity),
      max_batch_tokens_(max_batch_tokens),
      gather_us_(gather_us),
      threads_per_worker_(threads_per_worker) {
  for (int i = 0; i < std::max(1, workers); ++i) workers_.emplace_back([this] { Work(); });
}

EmbedQueue::~EmbedQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

Result<std::future<Result<std::vector<Embedding>>>> EmbedQueue::Submit(std::vector<std::vector<int32_t>> ids) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return Status::ResourceExhausted("the server is shutting down");
  if (jobs_.size() >= capacity_) return Status::ResourceExhausted("the embedding queue is full; retry later");
  jobs_.push_back(Job{std::move(ids), {}});
  auto f = jobs_.back().done.get_future();
  stats_.depth = jobs_.size();
  cv_.notify_one();
  return f;
}

EmbedQueue::Stats EmbedQueue::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::vector<size_t> EmbedQueue::TakeRoundSizes() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<size_t> out;
  out.swap(round_sizes_);
  return out;
}

void EmbedQueue::Work() {
  // OpenMP's thread count is per calling thread: this worker's share.
  if (threads_per_worker_ > 0) SetComputeThreads(threads_per_worker_);
  while (true) {
    std::vector<Job> round;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping and drained
      auto queued_tokens = [&] {
        int64_t t = 0;
        for (const auto& j : jobs_)
          for (const auto& s : j.ids) t += static_cast<int64_t>(s.size());
        return t;
      };
      if (gather_us_ > 0 && !stopping_ && queued_tokens() < max_batch_tokens_ / 4)
        cv_.wait_for(lock, std::chrono::microseconds(gather_us_),
                     [&] { return stopping_ || queued_tokens() >= max_batch_tokens_ / 4; });
      // Gather whole jobs while they fit the token budget (always at least one).
      int64_t tokens = 0;
      while (!jobs_.empty()) {
        int64_t t = 0;
        for (const auto& s : jobs_.front().ids) t += static_cast<int64_t>(s.size());
        if (!round.empty() && tokens + t > max_batch_tokens_) break;
        tokens += t;
        round.push_back(std::move(jobs_.front()));
        jobs_.pop_front();
      }
      stats_.depth = jobs_.size();
    }
    std::vector<std::vector<int32_t>> all;
    for (auto& j : round) all.insert(all.end(), j.ids.begin(), j.ids.end());
    auto result = embedder_->EmbedIds(all);
    size_t at = 0;
    uint64_t tokens = 0;
    for (auto& j : round) {
      if (!result.ok()) {
        j.done.set_value(result.status());
        continue;
      }
      std::vector<Embedding> mine(std::make_move_iterator(result->begin() + at),
                                  std::make_move_iterator(result->begin() + at + j.ids.size()));
      for (const auto& e : mine) tokens += static_cast<uint64_t>(e.tokens);
      at += j.ids.size();
      j.done.set_value(std::move(mine));
    }
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.batches;
    stats_.texts += all.size();
    stats_.tokens += tokens;
    if (round_sizes_.size() < 100000) round_sizes_.push_back(all.size());
  }
}

}  // namespace moeedb
