// The loop both panel kernels (int8_gemm, bf16_gemm) run their register tiles
// in: an M x N output of 16-column panels, cut into tiles of at most Rows
// rows and Panels panels.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>

namespace moeedb {

// Rows of the (quantised or rounded) x kept in L2 at once: half of a 1 MiB L2,
// leaving room for the column block of panels that passes over them.
constexpr int64_t kRegisterTileRowBlockBytes = 512 << 10;

// Calls prepare(m0, m1) when a thread starts on the rows m0..m1 of x (a row
// block, at most kRegisterTileRowBlockBytes of row_bytes each: the kernels
// quantise or round them into a buffer of their thread there), then
// tile(m0, m, rows, p0, panels, last_cols) for each register tile of it: rows
// of x from m, panels from p0, last_cols (1..16) the columns the tile's last
// panel writes. Every column block of Panels panels passes over a row block
// while it is in L2, so x is read from memory once and each weight panel
// once per row block, not x once per column block (which made every row
// dearer as M grew). The (row block, column block) pairs, row block first,
// go across the compute threads (one thread inside a parallel region). Every
// output element is computed the same way whatever the blocking: results do
// not depend on M or the thread count.
template <int Rows, int Panels, typename PrepareFn, typename TileFn>
void ForEachRegisterTile(int64_t M, int64_t N, int64_t row_bytes, const PrepareFn& prepare, const TileFn& tile) {
  const int64_t P = (N + 15) / 16, col_blocks = (P + Panels - 1) / Panels;
  // Row blocks of whole tiles, at most what fits, their tile counts
  // differing by one at most: the threads take contiguous runs of (row
  // block, column block) pairs, so a short last block (256 rows as 255 + 1)
  // left one thread most of a lone text's rows.
  const int64_t tiles = (M + Rows - 1) / Rows;
  const int64_t max_tiles =
      std::max<int64_t>(1, kRegisterTileRowBlockBytes / std::max<int64_t>(row_bytes, 1) / Rows);
  const int64_t row_blocks = (tiles + max_tiles - 1) / max_tiles;
  at::parallel_for(0, row_blocks * col_blocks, 1, [&](int64_t b, int64_t e) {
    int64_t prepared = -1;
    for (int64_t item = b; item < e; ++item) {
      const int64_t block = item / col_blocks;
      const int64_t m0 = block * tiles / row_blocks * Rows, m1 = std::min(M, (block + 1) * tiles / row_blocks * Rows);
      if (m0 != prepared) prepare(m0, m1);
      prepared = m0;
      const int64_t p0 = item % col_blocks * Panels;
      const int c = static_cast<int>(std::min<int64_t>(Panels, P - p0));
      const int last_cols = p0 + c == P ? static_cast<int>(N - (P - 1) * 16) : 16;
      for (int64_t m = m0; m < m1; m += Rows)
        tile(m0, m, static_cast<int>(std::min<int64_t>(Rows, m1 - m)), p0, c, last_cols);
    }
  });
}

}  // namespace moeedb
