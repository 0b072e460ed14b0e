// NodeLock: a cluster node's exclusive lock on its index folder
// (DIR/cluster-node.lock, flock), holding the instance token the node last
// registered in etcd under. A process that takes the lock knows the one
// that registered that token from this folder is gone (the kernel releases
// a dead process's flock), so a node restarted after kill -9 may take its
// registration over at once instead of waiting out the old lease; a node of
// the same id elsewhere (another folder, another token) is never taken over.
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
  // A new random instance token (128 bits, hex).
  static std::string NewToken();

 private:
  NodeLock(int fd, std::string path, std::string previous) : fd_(fd), path_(std::move(path)), previous_(std::move(previous)) {}
  int fd_;
  std::string path_, previous_;
};

}  // namespace moeedb::cluster
