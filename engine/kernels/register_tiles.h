// The loop both panel kernels (int8_gemm, bf16_gemm) run their register tiles
// in: an M x N output of 16-column panels, cut into tiles of at most Rows
// rows and Panels panels.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>

namespace moeedb {

// Calls tile(m, rows, p0, panels, last_cols) for every register tile: rows of
// x from m, panels from p0, last_cols (1..16) the columns the tile's last
// panel writes. Column blocks of Panels panels go across the compute threads
// (one thread inside a parallel region); each block's panels stay in L2 while
// every row tile of x passes them.
template <int Rows, int Panels, typename TileFn>
void ForEachRegisterTile(int64_t M, int64_t N, const TileFn& tile) {
  const int64_t P = (N + 15) / 16, blocks = (P + Panels - 1) / Panels;
  at::parallel_for(0, blocks, 1, [&](int64_t b, int64_t e) {
    for (int64_t blk = b; blk < e; ++blk) {
      const int64_t p0 = blk * Panels;
      const int c = static_cast<int>(std::min<int64_t>(Panels, P - p0));
      const int last_cols = p0 + c == P ? static_cast<int>(N - (P - 1) * 16) : 16;
      for (int64_t m = 0; m < M; m += Rows) tile(m, static_cast<int>(std::min<int64_t>(Rows, M - m)), p0, c, last_cols);
    }
  });
}

}  // namespace moeedb
