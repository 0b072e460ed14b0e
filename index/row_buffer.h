// RowBuffer: a growing byte array of an index's full-precision rows, held in
// the heap or in a memory-mapped scratch file. On disk, the page cache holds
// the rows: they count as the process's file-backed memory, which the kernel
// reclaims under pressure, and a search that reads only its candidates' rows
// (re-scoring after a quantized scan) touches only their pages.
//
// The scratch file is unlinked as soon as it is created: it lives as long as
// the buffer, and a crash leaves nothing behind (snapshots, not this file,
// make an index durable). Not thread-safe for writers; data() moves on growth.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace moeedb {

class RowBuffer {
 public:
  RowBuffer() = default;  // in the heap
  // A buffer in an unlinked file in `folder` (created when missing).
  static Result<RowBuffer> OnDisk(const std::string& folder);
  RowBuffer(RowBuffer&& other) noexcept;
  RowBuffer& operator=(RowBuffer&& other) noexcept;
  RowBuffer(const RowBuffer&) = delete;
  RowBuffer& operator=(const RowBuffer&) = delete;
  ~RowBuffer();

  // Appends `bytes` bytes; IOError when the file cannot grow (disk full).
  Status Append(const void* src, size_t bytes);
  // Appends the first `bytes` bytes of the file at `path`, read straight
  // into the buffer, grown once (a snapshot's rows: no staging copy, no
  // growth by doubling) with room for 1/8 more, so the log's tail appended
  // next does not copy them all again. IOError when the file is shorter or
  // cannot be read, the buffer's contents as they were.
  Status AppendFile(const std::string& path, size_t bytes);
  // Drops the bytes from `bytes` on (a shorter size only).
  void Truncate(size_t bytes);
  void Clear();
  const uint8_t* data() const { return on_disk() ? map_ : heap_.data(); }
  size_t size() const { return on_disk() ? size_ : heap_.size(); }
  bool on_disk() const { return fd_ >= 0; }
  // Bytes of the heap this buffer holds (0 on disk).
  size_t heap_bytes() const { return heap_.capacity(); }
  // On disk: asks the kernel to read bytes [offset, offset + bytes) into the
  // page cache now, without waiting, so that reads of many scattered rows
  // (a search's candidates) wait on the disk in parallel rather than one
  // page fault at a time. Nothing in the heap.
  void Prefetch(size_t offset, size_t bytes) const;
  // On disk: whether the page holding byte `offset` is in the page cache
  // (one mincore call); in the heap, always.
  bool Resident(size_t offset) const;
  // On disk: writes the rows back and drops their pages from the page cache,
  // so the next reads come from the disk (what re-scoring costs when the
  // cache was reclaimed; benchmarks measure it). Nothing in the heap.
  Status Evict() const;

 private:
  Status Reserve(size_t bytes);
  std::vector<uint8_t> heap_;
  int fd_ = -1;
  uint8_t* map_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
};

}  // namespace moeedb
