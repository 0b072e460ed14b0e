#include "engine/train/train_state.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include "base/atomic_file.h"

namespace moeedb {

namespace fs = std::filesystem;

TrainStateDir::TrainStateDir(const std::string& out_dir)
    : out_(out_dir),
      dir_((fs::path(out_dir) / "train_state").string()),
      tmp_((fs::path(out_dir) / "train_state.tmp").string()),
      old_((fs::path(out_dir) / "train_state.old").string()) {}

Status TrainStateDir::Open() {
  std::error_code ec;
  fs::create_directories(out_, ec);
  if (ec) return Status::IOError("cannot create " + out_ + ": " + ec.message());
  // A kill between the two renames of a commit leaves only the old state.
  if (!fs::exists(dir_) && fs::exists(old_)) fs::rename(old_, dir_, ec);
  if (ec) return Status::IOError("cannot recover " + old_ + ": " + ec.message());
  return Status::OK();
}

bool TrainStateDir::HasState() const { return fs::exists(fs::path(dir_) / "state.json"); }

std::string TrainStateDir::File(const std::string& name) const { return (fs::path(dir_) / name).string(); }

Result<nlohmann::json> TrainStateDir::ReadState() const {
  std::ifstream f(File("state.json"));
  nlohmann::json state = nlohmann::json::parse(f, nullptr, false);
  if (state.is_discarded()) return Status::Corruption(File("state.json") + " is not valid JSON");
  return state;
}

Status TrainStateDir::Commit(const nlohmann::json& state, const std::function<Status(const std::string& dir)>& write) {
  std::error_code ec;
  fs::remove_all(tmp_, ec);
  fs::create_directories(tmp_, ec);
  if (ec) return Status::IOError("cannot create " + tmp_ + ": " + ec.message());
  MOEEDB_RETURN_IF_ERROR(write(tmp_));
  MOEEDB_RETURN_IF_ERROR(WriteFileAtomic((fs::path(tmp_) / "state.json").string(), state.dump(1)));
  fs::remove_all(old_, ec);
  if (fs::exists(dir_)) fs::rename(dir_, old_, ec);
  if (ec) return Status::IOError("cannot rotate " + dir_ + ": " + ec.message());
  fs::rename(tmp_, dir_, ec);
  if (ec) return Status::IOError("cannot rename " + tmp_ + ": " + ec.message());
  fs::remove_all(old_, ec);
  return Status::OK();
}

double WarmupCosine(double peak, double min_ratio, int64_t warmup, int64_t step, int64_t total) {
  if (step < warmup) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(std::max<int64_t>(1, total - warmup)));
  return peak * (min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + std::cos(M_PI * progress)));
}

}  // namespace moeedb
