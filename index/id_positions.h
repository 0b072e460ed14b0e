// IdPositions: which row position holds a document id, for an index that
// already keeps each row's id in a position -> id array.
//
// The table stores only 4-byte positions (open addressing, linear probing,
// backward-shift deletion) and reads the ids from that array, so it costs
// 5-11 bytes a document (up to 14 a live one after deletions: it never
// shrinks) where std::unordered_map<uint64_t, size_t> costs about 50: next
// to 1-bit codes (136 bytes for the default model's 1024 + 32 dimensions)
// that map was a quarter of a document's RAM.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace moeedb {

class IdPositions {
 public:
  static constexpr size_t kNotFound = static_cast<size_t>(-1);
  // Positions at or above this cannot be held (an index's row limit).
  static constexpr size_t kMaxRows = 0xFFFF'FFFEu;

  // The position of `id` among `ids` (the array Insert was given), or
  // kNotFound when it is not in the table.
  size_t Find(uint64_t id, const std::vector<uint64_t>& ids) const;
  // Records that ids[pos] is at `pos`. Requires pos < kMaxRows and ids[pos]
  // not already in the table (the caller checks with Find).
  void Insert(size_t pos, const std::vector<uint64_t>& ids);
  // Forgets `id` and returns the position it held, or kNotFound when it was
  // not in the table. `ids` must still hold every recorded position's id
  // (Erase moves later entries of its run).
  size_t Erase(uint64_t id, const std::vector<uint64_t>& ids);
  void Clear();

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t memory_bytes() const { return slots_.capacity() * sizeof(uint32_t); }

 private:
  size_t Home(uint64_t id) const;
  // Puts slot value `s` (position + 1) in the first free slot from its id's home.
  void Place(uint32_t s, const std::vector<uint64_t>& ids);
  void Grow(const std::vector<uint64_t>& ids);

  std::vector<uint32_t> slots_;  // position + 1; 0 = empty; size a power of two
  size_t size_ = 0;
};

}  // namespace moeedb
