#include "cluster/node_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

namespace moeedb::cluster {

Result<std::unique_ptr<NodeLock>> NodeLock::Acquire(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = (std::filesystem::path(dir) / "cluster-node.lock").string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError("open " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK)
      return Status::Unavailable("another moeedb process uses the index folder " + dir + " (it holds " + path + ")");
    return Status::IOError("flock " + path + ": " + std::strerror(err));
  }
  std::string previous;
  char buf[128];
  for (ssize_t n; (n = ::pread(fd, buf, sizeof(buf), static_cast<off_t>(previous.size()))) > 0;) previous.append(buf, n);
  while (!previous.empty() && (previous.back() == '\n' || previous.back() == ' ')) previous.pop_back();
  return std::unique_ptr<NodeLock>(new NodeLock(fd, path, previous));
}

NodeLock::~NodeLock() { ::close(fd_); }  // releases the flock

Status NodeLock::Record(const std::string& token) {
  const std::string line = token + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size()) ||
      ::fsync(fd_) != 0)
    return Status::IOError("write " + path_ + ": " + std::strerror(errno));
  previous_ = token;
  return Status::OK();
}

namespace {

// The kernel's id of this boot of this machine ("" where it cannot be read).
std::string BootId() {
  char buf[64] = {0};
  const int fd = ::open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  std::string id(buf, n > 0 ? static_cast<size_t>(n) : 0);
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

}  // namespace

bool NodeLock::OfThisBoot(const std::string& token) {
  const std::string boot = BootId();
  return !boot.empty() && token.size() > boot.size() + 1 && token.compare(0, boot.size(), boot) == 0 &&
         token[boot.size()] == '/';
}

std::string NodeLock::NewToken() {
  std::random_device rd;
  static const char* kHex = "0123456789abcdef";
  std::string out = BootId() + "/";
  for (int i = 0; i < 4; ++i) {
    uint32_t x = rd();
    for (int j = 0; j < 8; ++j, x >>= 4) out += kHex[x & 15];
  }
  return out;
}

}  // namespace moeedb::cluster
