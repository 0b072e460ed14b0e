// NodeLock: a cluster node's exclusive lock on its index folder
// (DIR/cluster-node.lock, flock), holding the instance token the node last
// registered in etcd under. A process that takes the lock knows the one
// that registered that token from this folder is gone (the kernel releases
// a dead process's flock) when the token is of this machine's current boot,
// so a node restarted after kill -9 may take its registration over at once
// instead of waiting out the old lease; a node of the same id elsewhere
// (another folder, another machine, another token) is never taken over.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"

namespace moeedb::cluster {

class NodeLock {
 public:
  // Takes the lock of folder `dir` (created if missing). Unavailable while
  // another process holds it (another node on the same folder).
  static Result<std::unique_ptr<NodeLock>> Acquire(const std::string& dir);
  // Releases the lock.
  ~NodeLock();
  // The token the folder's previous node registered under ("" if none).
  const std::string& previous() const { return previous_; }
  // Records `token` as this process's registration (synced to disk).
  Status Record(const std::string& token);
  // A new instance token: this machine's boot id, "/", 128 random bits (hex).
  static std::string NewToken();
  // Whether `token` was made during this boot of this machine: only then
  // does holding the lock prove its process gone (a folder copied from
  // another machine, or shared with one over a network filesystem, holds
  // another machine's token).
  static bool OfThisBoot(const std::string& token);

 private:
  NodeLock(int fd, std::string path, std::string previous) : fd_(fd), path_(std::move(path)), previous_(std::move(previous)) {}
  int fd_;
  std::string path_, previous_;
};

}  // namespace moeedb::cluster
