// SearchBatcher: concurrent exact searches of one DualIndex share a pass over
// its rows. The exact scan is bound by memory bandwidth, so scoring 16 queries
// in one read of the rows costs little more than one (DualIndex::SearchBatch);
// a server answering many clients at once reads the rows once per batch
// instead of once per query.
//
// Leader/follower: a request that finds no batch running runs at once (a
// lone query waits for nothing), taking with it every request queued so far;
// requests that arrive while a batch runs queue, and the first of them to
// wake after it leads the next batch. Requests that do not scan every row
// (ANN, filtered) run alone, as DualIndex::Search would run them.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "index/dual_index.h"

namespace moeedb {

class SearchBatcher {
 public:
  // DualIndex::Search(r), sharing the scan with concurrent callers. All
  // callers must pass the same index, and keep it unchanged meanwhile (the
  // collection's reader lock).
  Result<std::vector<Hit>> Search(const DualIndex& index, const SearchRequest& r);

  // Batches run and requests they answered, since construction.
  uint64_t batches() const;
  uint64_t batched_requests() const;

 private:
  struct Pending;
  mutable std::mutex mu_;
  std::condition_variable done_;
  std::vector<Pending*> queue_;
  bool running_ = false;
  uint64_t batches_ = 0, batched_requests_ = 0;
};

}  // namespace moeedb
