#include "engine/embed/streaming_embedder.h"

#include <chrono>

#include "engine/model/model.h"

namespace moeedb {

StreamingEmbedder::StreamingEmbedder(const Embedder* embedder, StreamingOptions options)
    : embedder_(embedder), options_(options), workers_(embedder, options.workers, options.threads_per_worker) {
  if (options_.window_tokens <= 0) options_.window_tokens = 4 * embedder_->options().batch_tokens;
  if (options_.max_queued == 0) options_.max_queued = 1;
  if (options_.max_ready == 0) options_.max_ready = 1;
  worker_ = std::thread([this] { Run(); });
}

StreamingEmbedder::~StreamingEmbedder() {
  {
    std::lock_guard<std::mutex> l(mu_);
    closed_ = stopping_ = true;
  }
  can_take_.notify_all();
  can_push_.notify_all();
  can_next_.notify_all();
  worker_.join();
}

Status StreamingEmbedder::PushIds(std::vector<int32_t> ids) {
  MOEEDB_RETURN_IF_ERROR(embedder_->CheckIds(ids));
  std::unique_lock<std::mutex> l(mu_);
  can_push_.wait(l, [&] { return closed_ || queued_.size() < options_.max_queued; });
  if (closed_) return Status::InvalidArgument("the stream is closed");
  queued_tokens_ += static_cast<int64_t>(ids.size());
  queued_.push_back(std::move(ids));
  l.unlock();
  can_take_.notify_one();
  return Status::OK();
}

Status StreamingEmbedder::PushText(std::string_view text) {
  MOEEDB_ASSIGN_OR_RETURN(std::vector<int32_t> ids, embedder_->Tokenize(text));
  return PushIds(std::move(ids));
}

void StreamingEmbedder::Close() {
  {
    std::lock_guard<std::mutex> l(mu_);
    closed_ = true;
  }
  can_take_.notify_all();
  can_push_.notify_all();
}

bool StreamingEmbedder::Next(Result<Embedding>* out) {
  std::unique_lock<std::mutex> l(mu_);
  can_next_.wait(l, [&] { return !ready_.empty() || worker_done_ || stopping_; });
  if (ready_.empty()) return false;
  *out = std::move(ready_.front());
  ready_.pop_front();
  l.unlock();
  can_take_.notify_all();  // the worker may wait for room in ready_
  return true;
}

size_t StreamingEmbedder::queued() const {
  std::lock_guard<std::mutex> l(mu_);
  return queued_.size();
}

void StreamingEmbedder::Run() {
  for (;;) {
    std::vector<std::vector<int32_t>> window;
    {
      std::unique_lock<std::mutex> l(mu_);
      // Take a window when it is full, when the stream is closed, or when the
      // queue has stopped growing for linger_ms (a producer that pushes a few
      // inputs and waits for them is served without waiting for more).
      while (!stopping_) {
        if (ready_.size() >= options_.max_ready) {
          can_take_.wait(l);
          continue;
        }
        if (closed_ || queued_tokens_ >= options_.window_tokens || queued_.size() >= options_.max_queued) break;
        if (queued_.empty()) {
          can_take_.wait(l);
          continue;
        }
        const size_t before = queued_.size();
        if (!can_take_.wait_for(l, std::chrono::milliseconds(options_.linger_ms),
                                [&] { return stopping_ || closed_ || queued_.size() != before; }))
          break;  // no growth: go with what is there
      }
      if (stopping_ || (closed_ && queued_.empty())) break;
      int64_t tokens = 0;
      while (!queued_.empty() && (window.empty() || tokens + static_cast<int64_t>(queued_.front().size()) <=
                                                        options_.window_tokens)) {
        tokens += static_cast<int64_t>(queued_.front().size());
        window.push_back(std::move(queued_.front()));
        queued_.pop_front();
      }
      queued_tokens_ -= tokens;
    }
    can_push_.notify_all();
    Result<std::vector<Embedding>> r = workers_.Embed(window);
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!r.ok()) {
        ready_.push_back(r.status());
        closed_ = true;  // later pushes fail; nothing after the failure is delivered
        queued_.clear();
        queued_tokens_ = 0;
      } else {
        for (auto& e : *r) ready_.push_back(std::move(e));
      }
    }
    can_next_.notify_all();
    if (!r.ok()) break;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    worker_done_ = true;
  }
  can_next_.notify_all();
  can_push_.notify_all();
}

}  // namespace moeedb
