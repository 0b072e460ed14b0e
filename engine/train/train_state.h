// What the trainers share: the checkpoint folder written as a whole (so a
// kill at any moment leaves the last complete state), the learning-rate
// schedule and the exception guard.
#pragma once

#include <c10/util/Exception.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace moeedb {

// OUT/train_state: a folder of state.json and the trainer's tensors. Commit
// writes a new one beside it (train_state.tmp) and swaps it in with two
// renames; Open recovers the old folder after a kill between them.
class TrainStateDir {
 public:
  explicit TrainStateDir(const std::string& out_dir);
  // Creates out_dir and recovers an interrupted swap.
  Status Open();
  bool HasState() const;                        // a committed state.json exists
  std::string File(const std::string& name) const;  // a file of the committed state
  Result<nlohmann::json> ReadState() const;     // Corruption if state.json is not JSON
  // `write` fills the folder it is given (tensors, optimizer); state.json is
  // written last from `state`.
  Status Commit(const nlohmann::json& state, const std::function<Status(const std::string& dir)>& write);

 private:
  std::string out_, dir_, tmp_, old_;
};

// Linear warm-up to `peak` over `warmup` steps, then cosine decay to
// min_ratio * peak at step `total`.
double WarmupCosine(double peak, double min_ratio, int64_t warmup, int64_t step, int64_t total);

// Runs a trainer's body; a libtorch or standard exception becomes an
// Internal status ("training failed: ..."), so none crosses the trainer's API.
template <typename T>
Result<T> CatchTrainingErrors(const std::function<Result<T>()>& body) {
  try {
    return body();
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("training failed: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return Status::Internal(std::string("training failed: ") + e.what());
  }
}

}  // namespace moeedb
