#include "engine/embed/embed_workers.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <string>

#include "engine/kernels/runtime.h"

namespace moeedb {

// EmbedIds reports model errors as values; this keeps anything else from
// escaping a worker thread, which would end the process.
Result<std::vector<Embedding>> EmbedIdsNoThrow(const Embedder& e, const std::vector<std::vector<int32_t>>& ids,
                                               bool token_states) {
  try {
    return e.EmbedIds(ids, token_states);
  } catch (const std::exception& ex) {
    return Status::Internal(std::string("embedding failed: ") + ex.what());
  }
}

WorkerShare ShareComputeThreads(int workers, int threads) {
  WorkerShare s;
  s.workers = workers > 0 ? workers : std::max(1, std::min(2, threads));
  s.threads_per_worker = std::max(1, threads / s.workers);
  return s;
}

EmbedWorkers::EmbedWorkers(const Embedder* embedder, int workers, int threads_per_worker)
    : embedder_(embedder), caller_threads_(ComputeThreads()) {
  if (workers <= 1) return;
  for (int w = 0; w < workers; ++w)
    threads_.emplace_back([this, w, t = std::max(1, threads_per_worker)] { Work(w, t); });
}

EmbedWorkers::~EmbedWorkers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

double EmbedWorkers::busy_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_seconds_;
}

Result<std::vector<Embedding>> EmbedWorkers::Embed(const std::vector<std::vector<int32_t>>& ids) {
  std::lock_guard<std::mutex> call(call_mu_);
  if (threads_.empty() || ids.size() < 2) {
    // One input is not split: it runs here on all the process's compute
    // threads (this thread may never have been given a count).
    if (!threads_.empty()) SetComputeThreads(caller_threads_);
    const auto t0 = std::chrono::steady_clock::now();
    auto out = EmbedIdsNoThrow(*embedder_, ids);
    std::lock_guard<std::mutex> lock(mu_);
    busy_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
  }
  // Bad ids fail the call up front, named by their index in `ids`.
  MOEEDB_RETURN_IF_ERROR(embedder_->CheckAllIds(ids));
  // Longest first, cut into contiguous runs of about equal tokens: each part
  // pads little, and the parts finish at about the same time.
  std::vector<size_t> order(ids.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[a].size() > ids[b].size(); });
  const size_t n_parts = std::min(threads_.size(), ids.size());
  int64_t total = 0;
  for (const auto& s : ids) total += static_cast<int64_t>(s.size());
  std::unique_lock<std::mutex> lock(mu_);
  parts_.assign(threads_.size(), Part{});
  int64_t acc = 0;
  size_t p = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    // Move on once this part holds its share, keeping an input for each later part.
    if (p + 1 < n_parts && !parts_[p].inputs.empty() &&
        (acc * static_cast<int64_t>(n_parts) >= total * static_cast<int64_t>(p + 1) ||
         order.size() - i <= n_parts - 1 - p))
      ++p;
    parts_[p].inputs.push_back(order[i]);
    acc += static_cast<int64_t>(ids[order[i]].size());
  }
  ids_ = &ids;
  parts_left_ = static_cast<int>(threads_.size());
  ++seq_;
  start_cv_.notify_all();
  done_cv_.wait(lock, [&] { return parts_left_ == 0; });
  ids_ = nullptr;
  std::vector<Embedding> out(ids.size());
  for (auto& part : parts_) {
    if (!part.out.ok()) return part.out.status();
    for (size_t i = 0; i < part.inputs.size(); ++i) out[part.inputs[i]] = std::move((*part.out)[i]);
  }
  return out;
}

void EmbedWorkers::Work(int w, int threads) {
  // OpenMP's thread count is per calling thread: this worker's share.
  SetComputeThreads(threads);
  uint64_t seen = 0;
  while (true) {
    std::vector<std::vector<int32_t>> mine;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return quit_ || seq_ != seen; });
      if (seq_ == seen) return;  // quitting, no call pending
      seen = seq_;
      for (size_t i : parts_[w].inputs) mine.push_back((*ids_)[i]);
    }
    Result<std::vector<Embedding>> out = std::vector<Embedding>{};
    double seconds = 0;
    if (!mine.empty()) {
      const auto t0 = std::chrono::steady_clock::now();
      out = EmbedIdsNoThrow(*embedder_, mine);
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    std::lock_guard<std::mutex> lock(mu_);
    parts_[w].out = std::move(out);
    busy_seconds_ += seconds;
    if (--parts_left_ == 0) done_cv_.notify_one();
  }
}

}  // namespace moeedb
