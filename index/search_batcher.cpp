#include "index/search_batcher.h"

namespace moeedb {

struct SearchBatcher::Pending {
  const SearchRequest* request = nullptr;
  Result<std::vector<Hit>> result = std::vector<Hit>();
  bool done = false;
};

Result<std::vector<Hit>> SearchBatcher::Search(const DualIndex& index, const SearchRequest& r) {
  if (!index.SharesScan(r)) return index.Search(r);
  // A bad request fails alone, not the batch it would have joined.
  MOEEDB_RETURN_IF_ERROR(index.CheckRequest(r));
  Pending me;
  me.request = &r;
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(&me);
  while (!me.done) {
    if (running_) {
      done_.wait(lock);
      continue;
    }
    // Lead: take every queued request (this one among them) and run them
    // together, outside the lock so that later arrivals can queue.
    running_ = true;
    std::vector<Pending*> batch;
    batch.swap(queue_);
    lock.unlock();
    std::vector<SearchRequest> requests;
    requests.reserve(batch.size());
    for (const Pending* p : batch) requests.push_back(*p->request);
    auto results = index.SearchBatch(requests);
    lock.lock();
    for (size_t i = 0; i < batch.size(); ++i) {
      if (results.ok()) batch[i]->result = std::move((*results)[i]);
      else batch[i]->result = results.status();
      batch[i]->done = true;
    }
    ++batches_;
    batched_requests_ += batch.size();
    running_ = false;
    done_.notify_all();
  }
  return std::move(me.result);
}

uint64_t SearchBatcher::batches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return batches_;
}

uint64_t SearchBatcher::batched_requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return batched_requests_;
}

}  // namespace moeedb
