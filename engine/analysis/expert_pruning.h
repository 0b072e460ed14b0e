// Expert pruning: a HuggingFace checkpoint with fewer routed experts per MoE
// layer, written so that every loader and tool takes it as it is (router
// rows and expert tensors removed consistently, config.json's expert count
// updated, tokenizer and pooler carried over). Shared experts and dense
// layers are kept whole.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "engine/analysis/expert_usage.h"
#include "base/status.h"

namespace moeedb {

class MoeModel;

// How the experts to keep are chosen, per MoE layer:
//   usage           the most routed probability mass on a calibration set;
//   spectral        moeedb's own rule (SSMoE releases none): greedy facility
//                   location over the experts' SSMoE spectral centroids --
//                   keep, one at a time, the expert that most raises
//                   sum_e max_{s kept} cos(c_e, c_s), so that the kept
//                   centroids cover the dropped ones;
//   usage+spectral  the same objective with each expert e weighted by its
//                   usage mass;
//   random          seeded, the ablation baseline.
enum class PruneRule { kUsage, kSpectral, kUsageSpectral, kRandom };
Result<PruneRule> ParsePruneRule(const std::string& name);  // usage | spectral | usage+spectral | random
const char* PruneRuleName(PruneRule rule);
bool PruneRuleNeedsUsage(PruneRule rule);

// The experts each MoE layer keeps, ascending: `keep` of the layer's
// num_experts. InvalidArgument unless top_k <= keep <= num_experts, or when
// a usage rule gets no usage. `usage` may be empty for spectral and random.
Result<std::vector<std::vector<int64_t>>> ChooseExperts(const MoeModel& model, const ExpertUsage& usage, int64_t keep,
                                                        PruneRule rule, uint64_t seed = 1);

// The spectral rule's core: `keep` experts chosen greedily to maximise
// sum_e weight[e] * max_{s kept} cos(c_e, c_s) over centroids [E, H]
// (ties: the lower id); returned ascending.
std::vector<int64_t> CoverExperts(const at::Tensor& centroids, const std::vector<double>& weight, int64_t keep);

// Writes out_dir (which must not exist) from model_dir, keeping expert
// keep[m] of MoE layer m (one list per MoE layer, all the same length, each
// id once and in range). Everything is checked before anything is written;
// the folder is built under a temporary name and renamed, so a failure
// leaves nothing. config.json records what was kept ("moeedb_pruned": the
// original expert count and the kept ids in the original numbering, so
// pruning a pruned model composes). A pooler that reads RW gets its router
// projection cut to the kept experts, one per layer.
Status WritePrunedCheckpoint(const std::string& model_dir, const std::vector<std::vector<int64_t>>& keep,
                             const std::string& out_dir, const std::string& rule_name);

}  // namespace moeedb
