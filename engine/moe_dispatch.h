// ExpertDispatch: how an MoE block runs its routed experts.
#pragma once

namespace moeedb {

// How the routed experts are run. kLoop: one GEMM pair per active expert
// over exactly its tokens (no wasted FLOPs; ~8 ATen ops per expert). kBatched:
// the tokens of every expert padded to the busiest expert's count and run as
// two batched GEMMs (a fixed ~10 ops, some FLOPs on padding). Small batches
// (the server's rounds) are op-overhead bound and win with kBatched; large
// ones (bulk ingest) are FLOP bound and win with kLoop. kAuto picks by the
// mean tokens per expert (MoeBlock::kBatchedBelowTokensPerExpert).
enum class ExpertDispatch { kAuto, kLoop, kBatched };

}  // namespace moeedb
