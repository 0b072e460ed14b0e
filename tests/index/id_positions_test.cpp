// IdPositions against std::unordered_map as the reference: random inserts
// and erases (erases of runs exercise the backward shift), sequential and
// sparse ids, growth, and the bytes it costs a document.
#include "index/id_positions.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>
#include <vector>

namespace moeedb {
namespace {

// Applies `ops` random operations to the table and the reference over ids
// drawn by `draw`, checking every lookup and, at the end, every id drawn.
template <class Draw>
void CheckAgainstReference(size_t ops, Draw draw, std::mt19937_64& rng) {
  IdPositions table;
  std::vector<uint64_t> pos_to_id;
  std::unordered_map<uint64_t, size_t> reference;
  std::vector<uint64_t> seen;
  for (size_t op = 0; op < ops; ++op) {
    const uint64_t id = draw(rng);
    seen.push_back(id);
    const size_t want = reference.count(id) ? reference[id] : IdPositions::kNotFound;
    ASSERT_EQ(table.Find(id, pos_to_id), want) << "op " << op;
    if (rng() % 3 != 0) {
      if (want != IdPositions::kNotFound) continue;
      pos_to_id.push_back(id);  // positions only grow, as an index's rows do
      table.Insert(pos_to_id.size() - 1, pos_to_id);
      reference[id] = pos_to_id.size() - 1;
    } else {
      ASSERT_EQ(table.Erase(id, pos_to_id), want);
      reference.erase(id);
    }
    ASSERT_EQ(table.size(), reference.size());
  }
  for (uint64_t id : seen) {
    const size_t want = reference.count(id) ? reference[id] : IdPositions::kNotFound;
    ASSERT_EQ(table.Find(id, pos_to_id), want) << id;
  }
}

TEST(IdPositions, MatchesAMapOverDenseIds) {
  std::mt19937_64 rng(1);
  // Few distinct ids: most operations hit present ids, erases happen inside long runs.
  CheckAgainstReference(200000, [](std::mt19937_64& r) { return r() % 5000; }, rng);
}

TEST(IdPositions, MatchesAMapOverSparseAndHugeIds) {
  std::mt19937_64 rng(2);
  CheckAgainstReference(100000, [](std::mt19937_64& r) { return r() % 2 ? r() : (r() % 64) << 40; }, rng);
}

TEST(IdPositions, IdsDifferingOnlyInHighBitsAreFoundAndErased) {
  // Ids that differ only in high bits share their low bits: long probe runs
  // and backward shifts across them.
  for (int shift : {32, 40, 48, 56}) {
    IdPositions table;
    std::vector<uint64_t> pos_to_id;
    for (uint64_t i = 0; i < 200; ++i) {
      pos_to_id.push_back(i << shift);
      table.Insert(pos_to_id.size() - 1, pos_to_id);
    }
    for (uint64_t i = 0; i < 200; ++i) ASSERT_EQ(table.Find(i << shift, pos_to_id), i) << shift;
    for (uint64_t i = 0; i < 200; i += 3) ASSERT_EQ(table.Erase(i << shift, pos_to_id), i);
    for (uint64_t i = 0; i < 200; ++i)
      ASSERT_EQ(table.Find(i << shift, pos_to_id), i % 3 ? i : IdPositions::kNotFound) << shift;
  }
}

TEST(IdPositions, SequentialIdsCostUnderElevenBytesEach) {
  IdPositions table;
  std::vector<uint64_t> pos_to_id;
  for (uint64_t id = 1; id <= 1'000'000; ++id) {
    pos_to_id.push_back(id);
    table.Insert(pos_to_id.size() - 1, pos_to_id);
  }
  for (uint64_t id = 1; id <= 1'000'000; id += 997) ASSERT_EQ(table.Find(id, pos_to_id), id - 1);
  EXPECT_EQ(table.Find(0, pos_to_id), IdPositions::kNotFound);
  EXPECT_EQ(table.Find(1'000'001, pos_to_id), IdPositions::kNotFound);
  // 4-byte slots never under 3/8 full once grown: at most 10.7 bytes an id.
  EXPECT_LE(table.memory_bytes(), 11 * table.size());
  // Erasing every other id leaves the rest findable.
  for (uint64_t id = 2; id <= 1'000'000; id += 2) ASSERT_EQ(table.Erase(id, pos_to_id), id - 1);
  for (uint64_t id = 1; id <= 1'000'000; ++id)
    ASSERT_EQ(table.Find(id, pos_to_id), id % 2 ? id - 1 : IdPositions::kNotFound) << id;
  table.Clear();
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(table.Find(1, pos_to_id), IdPositions::kNotFound);
  table.Insert(4, pos_to_id);  // usable again after Clear
  EXPECT_EQ(table.Find(5, pos_to_id), 4u);
  EXPECT_EQ(table.size(), 1u);
}

}  // namespace
}  // namespace moeedb
