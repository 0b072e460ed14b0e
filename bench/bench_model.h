// A model loaded in the format a benchmark child's configuration word names
// ("dtype:quant:routing", bench_child.h), and random texts for it.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_child.h"
#include "engine/model/model.h"
#include "engine/model/routing_policy.h"

namespace moeedb::bench {

// The model in `dir` with the word's compute dtype, weight quantisation and
// routing (empty parts: the defaults); a bad word or load ends the benchmark.
inline std::unique_ptr<MoeModel> LoadConfigModel(const std::string& dir, const std::string& word) {
  const ConfigWord w = ParseConfigWord(word);
  LoadOptions o;
  auto d = kComputeDtypes.Parse(w.dtype.empty() ? "f32" : w.dtype);
  auto q = kWeightQuants.Parse(w.quant.empty() ? "none" : w.quant);
  if (!d.ok() || !q.ok()) Die("bad format in '" + word + "'");
  o.format = {*d, *q};
  auto model = MoeModel::LoadDir(dir, o);
  if (!model.ok()) Die(model.status().ToString());
  auto policy = RoutingPolicy::Parse(w.routing.empty() ? "learned" : w.routing);
  if (!policy.ok() || !(*model)->SetRouting(*policy).ok()) Die("bad routing in '" + word + "'");
  return std::move(model).value();
}

// n texts of `tokens` token ids each, uniform over the vocabulary above the
// first 100 (special tokens), the same for a seed.
inline std::vector<std::vector<int32_t>> RandomTexts(const MoeModel& model, int64_t n, int64_t tokens,
                                                     uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(100, static_cast<int32_t>(model.config().vocab_size - 1));
  std::vector<std::vector<int32_t>> texts(static_cast<size_t>(n), std::vector<int32_t>(static_cast<size_t>(tokens)));
  for (auto& t : texts)
    for (auto& v : t) v = id(rng);
  return texts;
}

}  // namespace moeedb::bench
