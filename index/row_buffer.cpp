#include "index/row_buffer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <filesystem>

namespace moeedb {

namespace {
// The file grows by doubling from this, so appends cost amortised O(1).
constexpr size_t kMinCapacity = size_t{1} << 20;
}

Result<RowBuffer> RowBuffer::OnDisk(const std::string& folder) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  std::string path = folder + "/rows-XXXXXX";
  const int fd = mkostemp(path.data(), O_CLOEXEC);  // not inherited by child processes
  if (fd < 0) return Status::IOError("cannot create a row file in " + folder + ": " + std::strerror(errno));
  unlink(path.c_str());
  RowBuffer b;
  b.fd_ = fd;
  return b;
}

RowBuffer::RowBuffer(RowBuffer&& o) noexcept
    : heap_(std::move(o.heap_)), fd_(o.fd_), map_(o.map_), size_(o.size_), capacity_(o.capacity_) {
  o.fd_ = -1;
  o.map_ = nullptr;
  o.size_ = o.capacity_ = 0;
}

RowBuffer& RowBuffer::operator=(RowBuffer&& o) noexcept {
  if (this != &o) {
    this->~RowBuffer();
    new (this) RowBuffer(std::move(o));
  }
  return *this;
}

RowBuffer::~RowBuffer() {
  if (map_) munmap(map_, capacity_);
  if (fd_ >= 0) close(fd_);
}

Status RowBuffer::Reserve(size_t bytes) {
  if (bytes <= capacity_) return Status::OK();
  size_t cap = std::max(kMinCapacity, capacity_);
  while (cap < bytes) cap *= 2;
  // posix_fallocate, not ftruncate: a full disk fails here, not as SIGBUS on a later write.
  const int err = posix_fallocate(fd_, 0, static_cast<off_t>(cap));
  if (err != 0) return Status::IOError(std::string("cannot grow the row file: ") + std::strerror(err));
  void* m = map_ ? mremap(map_, capacity_, cap, MREMAP_MAYMOVE)
                 : mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (m == MAP_FAILED) return Status::IOError(std::string("cannot map the row file: ") + std::strerror(errno));
  map_ = static_cast<uint8_t*>(m);
  capacity_ = cap;
  return Status::OK();
}

Status RowBuffer::Append(const void* src, size_t bytes) {
  if (bytes == 0) return Status::OK();
  if (!on_disk()) {
    const uint8_t* p = static_cast<const uint8_t*>(src);
    heap_.insert(heap_.end(), p, p + bytes);
    return Status::OK();
  }
  MOEEDB_RETURN_IF_ERROR(Reserve(size_ + bytes));
  std::memcpy(map_ + size_, src, bytes);
  size_ += bytes;
  return Status::OK();
}

Status RowBuffer::AppendFile(const std::string& path, size_t bytes) {
  if (bytes == 0) return Status::OK();
  const size_t at = size(), room = at + bytes + std::max(kMinCapacity, bytes / 8);
  uint8_t* dst = nullptr;
  if (on_disk()) {
    MOEEDB_RETURN_IF_ERROR(Reserve(room));
    dst = map_ + at;
  } else {
    if (heap_.capacity() < at + bytes) heap_.reserve(room);
    heap_.resize(at + bytes);
    dst = heap_.data() + at;
  }
  const int in = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    Truncate(at);
    return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
  }
  (void)posix_fadvise(in, 0, static_cast<off_t>(bytes), POSIX_FADV_SEQUENTIAL);  // advice: a larger read-ahead
  std::string error;
  for (size_t done = 0; done < bytes && error.empty();) {
    const ssize_t n = pread(in, dst + done, std::min(bytes - done, size_t{1} << 30), static_cast<off_t>(done));
    if (n > 0) done += static_cast<size_t>(n);
    else if (n == 0) error = path + " is shorter than its " + std::to_string(bytes) + " bytes of rows";
    else if (errno != EINTR) error = "cannot read " + path + ": " + std::strerror(errno);
  }
  close(in);
  if (!error.empty()) {
    Truncate(at);
    return Status::IOError(error);
  }
  if (on_disk()) size_ = at + bytes;
  return Status::OK();
}

void RowBuffer::Truncate(size_t bytes) {
  if (!on_disk()) heap_.resize(std::min(bytes, heap_.size()));
  else size_ = std::min(bytes, size_);
}

void RowBuffer::Prefetch(size_t offset, size_t bytes) const {
  if (!on_disk() || bytes == 0 || offset >= size_) return;
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t from = offset / page * page, to = std::min(size_, offset + bytes);
  // Advice only: a failure leaves the read to fault the page in itself. In
  // pieces: the kernel reads at most its read-ahead window per call.
  constexpr size_t kPiece = size_t{128} << 10;
  for (size_t at = from; at < to; at += kPiece) (void)madvise(map_ + at, std::min(kPiece, to - at), MADV_WILLNEED);
}

bool RowBuffer::Resident(size_t offset) const {
  if (!on_disk()) return true;
  if (offset >= size_) return false;
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  unsigned char in = 0;
  return mincore(map_ + offset / page * page, 1, &in) == 0 && (in & 1) != 0;
}

Status RowBuffer::Evict() const {
  if (!on_disk() || capacity_ == 0) return Status::OK();
  // Dirty pages are written first (the cache drops only clean ones), and
  // this process's mappings of them are removed (the cache keeps mapped
  // pages); MADV_DONTNEED on a shared file mapping discards no data.
  if (msync(map_, capacity_, MS_SYNC) != 0 || madvise(map_, capacity_, MADV_DONTNEED) != 0)
    return Status::IOError(std::string("cannot write the row file back: ") + std::strerror(errno));
  const int err = posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED);
  if (err != 0) return Status::IOError(std::string("cannot drop the row file's pages: ") + std::strerror(err));
  return Status::OK();
}

void RowBuffer::Clear() {
  if (!on_disk()) {
    heap_.clear();
    heap_.shrink_to_fit();
    return;
  }
  if (map_) munmap(map_, capacity_);
  map_ = nullptr;
  size_ = capacity_ = 0;
  if (ftruncate(fd_, 0) != 0) { /* the space is reused by the next Reserve */ }
}

}  // namespace moeedb
