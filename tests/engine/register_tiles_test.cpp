// ForEachRegisterTile's partition of an M x N product (register_tiles.h):
// every (row, panel) pair visited once, by a thread that prepared its row
// block; row blocks of whole tiles within the L2 budget, their tile counts
// differing by one at most, so the threads, which take contiguous runs of
// (row block, column block) pairs, share a lone text's rows evenly.
#include "engine/kernels/register_tiles.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "engine/kernels/runtime.h"

namespace moeedb {
namespace {

constexpr int kRows = 5, kPanels = 4;

TEST(RegisterTiles, RowBlocksAreEvenAndEveryTileIsVisitedOnce) {
  const int threads = ComputeThreads();
  for (int t : {1, 2}) {
    SetComputeThreads(t);
    // 256 rows of 2 KiB (K = 512 in float32): at most 255 rows fit a block,
    // which once split them 255 + 1.
    for (const auto& [M, N, row_bytes] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {256, 1024, 2048}, {256, 1024, 4096}, {1301, 72, 1024}, {7, 40, 4096}, {1, 16, 1 << 20}}) {
      SCOPED_TRACE(testing::Message() << M << " x " << N << ", rows of " << row_bytes << " bytes, " << t
                                      << " threads");
      const int64_t P = (N + 15) / 16;
      std::mutex mu;
      static thread_local int64_t prepared_here = -1;
      std::vector<int> seen(static_cast<size_t>(M * P), 0);
      std::vector<std::pair<int64_t, int64_t>> blocks;
      ForEachRegisterTile<kRows, kPanels>(
          M, N, row_bytes,
          [&](int64_t m0, int64_t m1) {
            std::lock_guard<std::mutex> lock(mu);
            prepared_here = m0;
            blocks.emplace_back(m0, m1);
          },
          [&](int64_t m0, int64_t m, int r, int64_t p0, int c, int last_cols) {
            std::lock_guard<std::mutex> lock(mu);
            EXPECT_EQ(prepared_here, m0) << "a tile before its thread prepared the block";
            EXPECT_GE(m, m0);
            ASSERT_LE(m + r, M);
            EXPECT_EQ(last_cols, p0 + c == P ? static_cast<int>(N - (P - 1) * 16) : 16);
            for (int64_t i = m; i < m + r; ++i)
              for (int64_t p = p0; p < p0 + c; ++p) ++seen[static_cast<size_t>(i * P + p)];
          });
      EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
      std::sort(blocks.begin(), blocks.end());
      blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
      int64_t fewest = M, most = 0, next = 0;
      for (const auto& [m0, m1] : blocks) {
        EXPECT_EQ(m0, next) << "blocks tile the rows in order";
        EXPECT_EQ(m0 % kRows, 0) << "a block starts on a tile";
        next = m1;
        const int64_t block_tiles = (m1 - m0 + kRows - 1) / kRows;
        fewest = std::min(fewest, block_tiles);
        most = std::max(most, block_tiles);
        EXPECT_LE((m1 - m0) * row_bytes, std::max<int64_t>(kRegisterTileRowBlockBytes, kRows * row_bytes));
      }
      EXPECT_EQ(next, M);
      EXPECT_LE(most - fewest, 1) << "a short last block leaves one thread most of the rows";
    }
  }
  SetComputeThreads(threads);
}

}  // namespace
}  // namespace moeedb
