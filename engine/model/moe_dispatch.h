// ExpertDispatch: how an MoE block runs its routed experts.
#pragma once

#include <string>

#include "base/enum_table.h"
#include "base/status.h"

namespace moeedb {

// How the routed experts are run. kLoop: one GEMM pair per active expert
// over exactly its tokens (no wasted FLOPs; ~8 ATen ops per expert). kBatched:
// the tokens of every expert padded to the busiest expert's count and run as
// two batched GEMMs (a fixed ~10 ops, some FLOPs on padding). The batched
// path was meant for small, op-overhead-bound batches, but measured slower on
// this CPU even for one text per forward, so kAuto runs kLoop
// (MoeBlock::kBatchedBelowTokensPerExpert); kBatched stays for benchmarks and
// devices where one large GEMM beats many small ones.
// kGrouped: every (token, slot) pair gathered once in expert order, only the
// two GEMMs per active expert (into row ranges of shared buffers), and the
// activation, weighting and scatter as one op each over all pairs: fewer ops
// for small rounds, but the shared buffers cost memory traffic for large
// ones, so kAuto uses it only below MoeBlock::kGroupedMaxBytes of gathered
// rows.
// kPacked: for f32 on the CPU when both expert matrices have packed copies
// (LinearWeight::packed_panels) or multiply in int8 (int8_gemm.h): the
// grouping, the gathers, both GEMMs (the few-row kernel, panel_gemm.h, or
// the int8 one, one expert per thread), SwiGLU and the weighted combine as plain
// loops over raw rows, experts in parallel, with no ATen call per expert
// (the other paths make ~12 per active expert, which was most of a small
// forward's MoE time; docs/perf.md). kAuto takes it wherever it can run.
enum class ExpertDispatch { kAuto, kLoop, kBatched, kGrouped, kPacked };

inline constexpr EnumTable<ExpertDispatch, 5> kExpertDispatches{"expert dispatch",
                                                                 {{{ExpertDispatch::kAuto, "auto"},
                                                                   {ExpertDispatch::kLoop, "loop"},
                                                                   {ExpertDispatch::kGrouped, "grouped"},
                                                                   {ExpertDispatch::kBatched, "batched"},
                                                                   {ExpertDispatch::kPacked, "packed"}}}};

}  // namespace moeedb
