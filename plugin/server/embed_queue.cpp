#include "plugin/server/embed_queue.h"

#include <algorithm>
#include <chrono>

#include "engine/embed/embed_workers.h"
#include "engine/kernels/runtime.h"

namespace moeedb {

namespace {

using Clock = std::chrono::steady_clock;

int64_t TokensOf(const std::vector<std::vector<int32_t>>& ids) {
  int64_t t = 0;
  for (const auto& s : ids) t += static_cast<int64_t>(s.size());
  return t;
}

template <typename T>
T CeilDiv(T a, T b) {
  return (a + b - 1) / b;
}

}  // namespace

EmbedQueue::EmbedQueue(const Embedder* embedder, size_t capacity, int64_t max_batch_tokens, int64_t gather_us,
                       int workers, int threads_per_worker)
    : embedder_(embedder),
      capacity_(capacity),
      max_batch_tokens_(std::max<int64_t>(1, max_batch_tokens)),
      gather_us_(gather_us),
      workers_(std::max(1, workers)) {
  // OpenMP's thread count is per calling thread: each worker sets its own.
  const int threads = threads_per_worker > 0 ? threads_per_worker : ComputeThreads();
  for (int w = 0; w < workers_; ++w) threads_.emplace_back([this, threads] { Work(threads); });
}

EmbedQueue::~EmbedQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();  // the workers drain the queue first
}

Result<std::future<Result<std::vector<Embedding>>>> EmbedQueue::Submit(std::vector<std::vector<int32_t>> ids,
                                                                       bool token_states) {
  // Bad ids are refused here, so a forward fails only for internal reasons
  // (its error then goes to every job with a text in it).
  if (ids.empty()) return Status::InvalidArgument("no inputs");
  MOEEDB_RETURN_IF_ERROR(embedder_->CheckAllIds(ids));
  auto job = std::make_shared<Job>();
  job->left = ids.size();
  job->token_states = token_states;
  job->out.resize(ids.size());
  const int64_t tokens = TokensOf(ids);
  job->ids = std::move(ids);
  auto f = job->done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status::ResourceExhausted("the server is shutting down");
    if (jobs_.size() >= capacity_) return Status::ResourceExhausted("the embedding queue is full; retry later");
    queued_texts_ += job->ids.size();
    queued_tokens_ += tokens;
    ++arrivals_;
    jobs_.push_back(std::move(job));
    stats_.depth = jobs_.size();
  }
  cv_.notify_one();
  return f;
}

EmbedQueue::Stats EmbedQueue::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::vector<size_t> EmbedQueue::TakeForwardSizes() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<size_t> out;
  out.swap(forward_sizes_);
  return out;
}

std::vector<EmbedQueue::Taken> EmbedQueue::TakeShare(std::unique_lock<std::mutex>& lock,
                                                     std::vector<std::vector<int32_t>>* ids, int64_t* tokens) {
  const auto workers = static_cast<size_t>(workers_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return {};  // stopping and drained
    if (gather_us_ <= 0) break;
    // Micro-batching: while less than this worker's share of the texts in
    // flight is queued, wait for their clients to come back, until the
    // arrivals pause or the window closes.
    const size_t share_texts = CeilDiv(inflight_texts_, workers);
    const auto first = Clock::now();
    auto last_arrival = first;
    const auto window = std::chrono::microseconds(gather_us_);
    const auto pause = std::chrono::microseconds(std::max<int64_t>(1, gather_us_ / 4));
    while (!stopping_ && !jobs_.empty() && queued_texts_ < share_texts && queued_tokens_ < max_batch_tokens_ / 4) {
      const auto deadline = std::min(first + window, last_arrival + pause);
      if (Clock::now() >= deadline) break;
      const uint64_t before = arrivals_;
      cv_.wait_until(lock, deadline);
      if (arrivals_ != before) last_arrival = Clock::now();
    }
    if (!jobs_.empty()) break;  // else another worker took it all meanwhile
  }
  // This worker's share by tokens (so that workers finish together), or its
  // share of the queue if that is more; whole texts, at least one.
  const int64_t goal = std::min(max_batch_tokens_, std::max(CeilDiv(inflight_tokens_, int64_t{workers_}),
                                                            CeilDiv(queued_tokens_, int64_t{workers_})));
  std::vector<Taken> taken;
  *tokens = 0;
  while (!jobs_.empty() && (taken.empty() || *tokens < goal)) {
    Job& job = *jobs_.front();
    std::vector<int32_t>& text = job.ids[front_taken_];
    const auto t = static_cast<int64_t>(text.size());
    if (!taken.empty() && *tokens + t > max_batch_tokens_) break;
    *tokens += t;
    ids->push_back(std::move(text));
    taken.push_back(Taken{jobs_.front(), front_taken_});
    --queued_texts_;
    queued_tokens_ -= t;
    if (++front_taken_ == job.ids.size()) {
      jobs_.pop_front();
      front_taken_ = 0;
    }
  }
  forward_texts_ += taken.size();
  forward_tokens_ += *tokens;
  stats_.depth = jobs_.size();
  return taken;
}

void EmbedQueue::Work(int threads) {
  SetComputeThreads(threads);
  while (true) {
    std::vector<std::vector<int32_t>> ids;
    int64_t tokens = 0;
    std::vector<Taken> taken;
    bool more = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      taken = TakeShare(lock, &ids, &tokens);
      if (taken.empty()) return;
      more = !jobs_.empty();
    }
    if (more) cv_.notify_one();  // texts left for another free worker
    const auto t0 = Clock::now();
    // Token states cost a full last layer: only when a job in this forward asks.
    const bool states = std::any_of(taken.begin(), taken.end(), [](const Taken& t) { return t.job->token_states; });
    auto out = EmbedIdsNoThrow(*embedder_, ids, states);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    std::vector<std::shared_ptr<Job>> finished;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // What is in flight now, this forward included: the next shares.
      inflight_texts_ = queued_texts_ + forward_texts_;
      inflight_tokens_ = queued_tokens_ + forward_tokens_;
      forward_texts_ -= taken.size();
      forward_tokens_ -= tokens;
      uint64_t embedded = 0;
      for (size_t i = 0; i < taken.size(); ++i) {
        Job& job = *taken[i].job;
        if (out.ok()) {
          embedded += static_cast<uint64_t>((*out)[i].tokens);
          if (!job.token_states) (*out)[i].token_states.clear();
          job.out[taken[i].index] = std::move((*out)[i]);
        } else if (job.error.ok()) {
          job.error = out.status();
        }
        if (--job.left == 0) finished.push_back(taken[i].job);
      }
      ++stats_.batches;
      stats_.texts += taken.size();
      stats_.tokens += embedded;
      stats_.busy_seconds += seconds;
      if (forward_sizes_.size() < 100000) forward_sizes_.push_back(taken.size());
    }
    for (auto& job : finished) {
      if (job->error.ok())
        job->done.set_value(std::move(job->out));
      else
        job->done.set_value(job->error);
    }
  }
}

}  // namespace moeedb
