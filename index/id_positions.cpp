#include "index/id_positions.h"

#include <cassert>

namespace moeedb {

namespace {
// Grow when more than 3/4 of the slots are taken: linear probing's runs stay
// short there, and a doubled table is 3/8 full.
constexpr size_t kLoadNum = 3, kLoadDen = 4;
constexpr size_t kMinSlots = 16;
}  // namespace

size_t IdPositions::Home(uint64_t id) const {
  // MurmurHash3's 64-bit finalizer: every id bit reaches the low bits, so
  // sequential ids and ids spaced by a power of two (i << 40) spread alike.
  uint64_t h = id;
  h ^= h >> 33;
  h *= 0xff51'afd7'ed55'8ccdull;
  h ^= h >> 33;
  h *= 0xc4ce'b9fe'1a85'ec53ull;
  h ^= h >> 33;
  return static_cast<size_t>(h) & (slots_.size() - 1);
}

size_t IdPositions::Find(uint64_t id, const std::vector<uint64_t>& ids) const {
  if (slots_.empty()) return kNotFound;
  const size_t mask = slots_.size() - 1;
  for (size_t i = Home(id);; i = (i + 1) & mask) {
    const uint32_t s = slots_[i];
    if (s == 0) return kNotFound;
    if (ids[s - 1] == id) return s - 1;
  }
}

void IdPositions::Insert(size_t pos, const std::vector<uint64_t>& ids) {
  assert(pos < kMaxRows);
  if ((size_ + 1) * kLoadDen > slots_.size() * kLoadNum) Grow(ids);
  Place(static_cast<uint32_t>(pos + 1), ids);
  ++size_;
}

void IdPositions::Place(uint32_t s, const std::vector<uint64_t>& ids) {
  const size_t mask = slots_.size() - 1;
  size_t i = Home(ids[s - 1]);
  while (slots_[i] != 0) i = (i + 1) & mask;
  slots_[i] = s;
}

size_t IdPositions::Erase(uint64_t id, const std::vector<uint64_t>& ids) {
  if (slots_.empty()) return kNotFound;
  const size_t mask = slots_.size() - 1;
  size_t hole = Home(id);
  for (;; hole = (hole + 1) & mask) {
    if (slots_[hole] == 0) return kNotFound;
    if (ids[slots_[hole] - 1] == id) break;
  }
  const size_t pos = slots_[hole] - 1;
  // Backward shift: pull each later entry of the run into the hole when the
  // hole lies between its home and where it sits, so no probe ever meets a gap.
  for (size_t j = (hole + 1) & mask; slots_[j] != 0; j = (j + 1) & mask) {
    const size_t home = Home(ids[slots_[j] - 1]);
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      slots_[hole] = slots_[j];
      hole = j;
    }
  }
  slots_[hole] = 0;
  --size_;
  return pos;
}

void IdPositions::Clear() {
  slots_.clear();
  slots_.shrink_to_fit();
  size_ = 0;
}

void IdPositions::Grow(const std::vector<uint64_t>& ids) {
  std::vector<uint32_t> old = std::move(slots_);
  slots_.assign(old.empty() ? kMinSlots : 2 * old.size(), 0);
  for (uint32_t s : old)
    if (s != 0) Place(s, ids);
}

}  // namespace moeedb
