#include "plugin/server/embed_queue.h"

#include <algorithm>
#include <chrono>

#include "engine/runtime.h"

namespace moeedb {

namespace {

using Clock = std::chrono::steady_clock;

int64_t TokensOf(const std::vector<std::vector<int32_t>>& ids) {
  int64_t t = 0;
  for (const auto& s : ids) t += static_cast<int64_t>(s.size());
  return t;
}

}  // namespace

EmbedQueue::EmbedQueue(const Embedder* embedder, size_t capacity, int64_t max_batch_tokens, int64_t gather_us,
                       int workers, int threads_per_worker)
    : embedder_(embedder),
      capacity_(capacity),
      max_batch_tokens_(max_batch_tokens),
      gather_us_(gather_us),
      workers_(embedder, workers, threads_per_worker) {
  gatherer_ = std::thread([this, threads_per_worker] {
    // One worker embeds on this thread: give it the compute threads asked for.
    if (workers_.workers() == 1 && threads_per_worker > 0) SetComputeThreads(threads_per_worker);
    Gather();
  });
}

EmbedQueue::~EmbedQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  gatherer_.join();  // drains the queue first
}

Result<std::future<Result<std::vector<Embedding>>>> EmbedQueue::Submit(std::vector<std::vector<int32_t>> ids) {
  // Bad ids are refused here, so a round fails only for internal reasons
  // (its error then goes to every job in it).
  if (ids.empty()) return Status::InvalidArgument("no inputs");
  MOEEDB_RETURN_IF_ERROR(embedder_->CheckAllIds(ids));
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return Status::ResourceExhausted("the server is shutting down");
  if (jobs_.size() >= capacity_) return Status::ResourceExhausted("the embedding queue is full; retry later");
  queued_texts_ += ids.size();
  queued_tokens_ += TokensOf(ids);
  jobs_.push_back(Job{std::move(ids), {}});
  auto f = jobs_.back().done.get_future();
  stats_.depth = jobs_.size();
  cv_.notify_one();
  return f;
}

EmbedQueue::Stats EmbedQueue::stats() const {
  Stats st;
  {
    std::lock_guard<std::mutex> lock(mu_);
    st = stats_;
  }
  st.busy_seconds = workers_.busy_seconds();
  return st;
}

std::vector<size_t> EmbedQueue::TakeRoundSizes() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<size_t> out;
  out.swap(round_sizes_);
  return out;
}

void EmbedQueue::Gather() {
  size_t last_round_texts = 0;
  while (true) {
    std::vector<Job> round;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping and drained
      if (gather_us_ > 0) {
        // Micro-batching: wait for concurrent requests while the round is
        // small, until the previous round's clients are back, the arrivals
        // pause, or the window closes.
        const auto first = Clock::now();
        auto last_arrival = first;
        const auto window = std::chrono::microseconds(gather_us_);
        const auto pause = std::chrono::microseconds(std::max<int64_t>(1, gather_us_ / 4));
        while (!stopping_ && queued_tokens_ < max_batch_tokens_ / 4 && queued_texts_ < last_round_texts) {
          const auto deadline = std::min(first + window, last_arrival + pause);
          if (Clock::now() >= deadline) break;
          const size_t before = queued_texts_;
          cv_.wait_until(lock, deadline);
          if (queued_texts_ != before) last_arrival = Clock::now();
        }
      }
      // Whole jobs while they fit the token budget (always at least one).
      int64_t tokens = 0;
      while (!jobs_.empty()) {
        const int64_t t = TokensOf(jobs_.front().ids);
        if (!round.empty() && tokens + t > max_batch_tokens_) break;
        tokens += t;
        queued_texts_ -= jobs_.front().ids.size();
        queued_tokens_ -= t;
        round.push_back(std::move(jobs_.front()));
        jobs_.pop_front();
      }
      stats_.depth = jobs_.size();
    }
    std::vector<std::vector<int32_t>> all;
    for (auto& j : round) all.insert(all.end(), std::make_move_iterator(j.ids.begin()), std::make_move_iterator(j.ids.end()));
    auto result = workers_.Embed(all);
    size_t at = 0;
    uint64_t tokens = 0;
    for (auto& j : round) {
      const size_t n = j.ids.size();
      if (!result.ok()) {
        j.done.set_value(result.status());
      } else {
        std::vector<Embedding> mine(std::make_move_iterator(result->begin() + at),
                                    std::make_move_iterator(result->begin() + at + n));
        for (const auto& e : mine) tokens += static_cast<uint64_t>(e.tokens);
        j.done.set_value(std::move(mine));
      }
      at += n;
    }
    last_round_texts = all.size();
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.batches;
    stats_.texts += all.size();
    stats_.tokens += tokens;
    if (round_sizes_.size() < 100000) round_sizes_.push_back(all.size());
  }
}

}  // namespace moeedb
