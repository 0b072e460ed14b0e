// PackedAttention: causal softmax attention straight on packed rows (one row
// per real token, texts one after another), float32 on the CPU.
//
// Why not batched GEMMs on a [B, T] grid: for the short texts of queries and
// server requests the grid path is mostly overhead. It scatters q, k and v
// into zero-padded grids, builds a mask, and at::bmm then runs one small GEMM
// per (text, head) pair with three tensor views each (1,536 ATen calls for
// one forward of 8 texts on the demo model, docs/perf.md), then gathers the
// real rows back. Attention is a few per cent of a short text's FLOPs, so a
// plain kernel that reads each text's keys in place, skips padding and
// masked keys, and writes the packed output costs less than the calls alone.
#pragma once

#include <cstdint>

#include "engine/kernels/vector_exp.h"

namespace moeedb {

struct PackedAttentionShape {
  int64_t heads = 0;     // query heads
  int64_t kv_heads = 0;  // key/value heads (query head h reads kv head h / (heads / kv_heads))
  int64_t head_dim = 0;
  float scale = 1.0f;    // applied to q·k before the softmax
};

// For each query row r (of n_queries) and head h:
//   out[r, h] = softmax_j(scale · q[r, h] · k[s + j, kvh]) · v[s + j, kvh],
// j = 0 .. q_pos[r], s = text_start[q_text[r]]: the query sees its own text's
// keys up to its own position (causal). q rows are [heads, head_dim] floats,
// `q_ld` apart; k and v rows are [kv_heads, head_dim], `kv_ld` apart; out
// rows are [heads * head_dim], contiguous. A bidirectional query passes its
// text's last position as q_pos. Runs on the process's compute threads
// (at::parallel_for over (head, block of one text's consecutive query rows)).
// The vector kernels, chosen at run time: AVX-512 (eight queries a tile,
// head_dim a multiple of 16), else AVX2/FMA (four queries, head_dim a
// multiple of 8), else scalar loops; each falls back to the next where the
// head_dim does not fit. MOEEDB_ATTENTION_KERNEL=avx2|scalar caps the choice.
SimdLevel AttentionKernelInUse();

void PackedAttentionF32(const PackedAttentionShape& shape, const float* q, int64_t q_ld, const float* k,
                        const float* v, int64_t kv_ld, const int64_t* q_text, const int64_t* q_pos,
                        int64_t n_queries, const int64_t* text_start, float* out);
// The same on a given kernel (a kernel the CPU cannot run: scalar).
void PackedAttentionF32(SimdLevel kernel, const PackedAttentionShape& shape, const float* q, int64_t q_ld,
                        const float* k, const float* v, int64_t kv_ld, const int64_t* q_text, const int64_t* q_pos,
                        int64_t n_queries, const int64_t* text_start, float* out);

}  // namespace moeedb
