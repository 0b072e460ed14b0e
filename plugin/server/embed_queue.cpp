#include "plugin/server/embed_queue.h"

#include <algorithm>
#include <chrono>
#include <numeric>

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
      threads_per_worker_(threads_per_worker) {
  for (int w = 0; w < std::max(1, workers); ++w) workers_.emplace_back([this, w] { Compute(w); });
  gatherer_ = std::thread([this] { Gather(); });
}

EmbedQueue::~EmbedQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  gatherer_.join();  // drains the queue first
  {
    std::lock_guard<std::mutex> lock(round_mu_);
    workers_quit_ = true;
  }
  round_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

Result<std::future<Result<std::vector<Embedding>>>> EmbedQueue::Submit(std::vector<std::vector<int32_t>> ids) {
  // Bad ids are refused here, so a round's parts fail only for internal
  // reasons (a part's error goes to every job that had a text in it).
  if (ids.empty()) return Status::InvalidArgument("no inputs");
  for (size_t i = 0; i < ids.size(); ++i)
    if (Status st = embedder_->CheckIds(ids[i]); !st.ok())
      return Status::InvalidArgument("input " + std::to_string(i) + ": " + st.message());
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
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
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
    RunRound(all);

    // Each text's embedding, or the error of the part that held it.
    std::vector<Embedding*> emb(all.size(), nullptr);
    std::vector<const Status*> err(all.size(), nullptr);
    for (auto& p : parts_)
      for (size_t i = 0; i < p.texts.size(); ++i) {
        if (p.out.ok()) emb[p.texts[i]] = &(*p.out)[i];
        else err[p.texts[i]] = &p.out.status();
      }
    size_t at = 0;
    uint64_t tokens = 0;
    for (auto& j : round) {
      const size_t n = j.ids.size();
      const Status* failed = nullptr;
      for (size_t i = at; i < at + n && failed == nullptr; ++i) failed = err[i];
      if (failed != nullptr) {
        j.done.set_value(*failed);
      } else {
        std::vector<Embedding> mine;
        mine.reserve(n);
        for (size_t i = at; i < at + n; ++i) {
          tokens += static_cast<uint64_t>(emb[i]->tokens);
          mine.push_back(std::move(*emb[i]));
        }
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

void EmbedQueue::RunRound(const std::vector<std::vector<int32_t>>& all) {
  // Longest first, cut into contiguous runs of about equal tokens: each part
  // pads little, and the parts finish at about the same time.
  std::vector<size_t> order(all.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return all[a].size() > all[b].size(); });
  const size_t n_parts = std::min(workers_.size(), all.size());
  const int64_t total = TokensOf(all);
  std::unique_lock<std::mutex> lock(round_mu_);
  parts_.assign(workers_.size(), Part{});
  int64_t acc = 0;
  size_t p = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    // Move on once this part holds its share, keeping a text for each later part.
    if (p + 1 < n_parts && !parts_[p].texts.empty() &&
        (acc * static_cast<int64_t>(n_parts) >= total * static_cast<int64_t>(p + 1) ||
         order.size() - i <= n_parts - 1 - p))
      ++p;
    parts_[p].texts.push_back(order[i]);
    acc += static_cast<int64_t>(all[order[i]].size());
  }
  round_ids_ = &all;
  parts_left_ = static_cast<int>(workers_.size());
  ++round_seq_;
  round_cv_.notify_all();
  round_done_cv_.wait(lock, [&] { return parts_left_ == 0; });
  round_ids_ = nullptr;
}

void EmbedQueue::Compute(int w) {
  // OpenMP's thread count is per calling thread: this worker's share.
  if (threads_per_worker_ > 0) SetComputeThreads(threads_per_worker_);
  uint64_t seen = 0;
  while (true) {
    std::vector<std::vector<int32_t>> ids;
    {
      std::unique_lock<std::mutex> lock(round_mu_);
      round_cv_.wait(lock, [&] { return workers_quit_ || round_seq_ != seen; });
      if (round_seq_ == seen) return;  // quitting, no round pending
      seen = round_seq_;
      for (size_t i : parts_[w].texts) ids.push_back((*round_ids_)[i]);
    }
    Result<std::vector<Embedding>> out = std::vector<Embedding>{};
    double seconds = 0;
    if (!ids.empty()) {
      const auto t0 = Clock::now();
      out = embedder_->EmbedIds(ids);
      seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    {
      std::lock_guard<std::mutex> lock(round_mu_);
      parts_[w].out = std::move(out);
      if (--parts_left_ == 0) round_done_cv_.notify_one();
    }
    std::lock_guard<std::mutex> lock(mu_);
    stats_.busy_seconds += seconds;
  }
}

}  // namespace moeedb
