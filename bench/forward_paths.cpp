// bench/forward_paths: what the CPU forward's packed paths buy, per forward
// size, against the ATen paths they replaced, in the same process.
//
//   forward_paths MODEL_DIR TEXTS_FILE [REPS=5]
//
// One compute thread (as each server or CLI worker runs). For 1, 8 and 32
// texts per forward, interleaved repetitions of five setups:
//   packed      the defaults: packed attention, packed experts, fused RMSNorm (f32 CPU)
//   grid-attn   attention on the padded [B, T] grid (MoeModel kGrid)
//   aten-experts  experts through the ATen grouped path (ExpertDispatch::kGrouped)
//   aten-norms  RMSNorm as ATen's formula (MoeModel::set_fused_norms(false))
//   before      all three of the last three (what the engine ran before them)
// and prints the median ms per forward and per text, and each setup's ratio
// to "before".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "engine/embed/embedder.h"
#include "engine/model/model.h"
#include "engine/kernels/runtime.h"
#include "engine/tokenizer/bpe_tokenizer.h"

namespace m = moeedb;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: forward_paths MODEL_DIR TEXTS_FILE [REPS]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  m::SetComputeThreads(1);
  auto model = m::MoeModel::LoadDir(dir);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  auto tok = m::BpeTokenizer::FromFile(dir + "/tokenizer.json");
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
    return 1;
  }
  m::Embedder emb(model->get(), tok->get(), m::EmbedderOptions{});
  std::ifstream in(argv[2]);
  std::vector<std::string> texts;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) texts.push_back(line);
  auto ids = emb.TokenizeAll(texts);
  if (!ids.ok() || ids->size() < 64) {
    std::fprintf(stderr, "need at least 64 texts in %s\n", argv[2]);
    return 1;
  }
  struct Setup {
    const char* name;
    m::MoeModel::AttentionKernel attention;
    m::ExpertDispatch experts;
    bool fused_norms;
  };
  const std::vector<Setup> setups = {
      {"packed", m::MoeModel::AttentionKernel::kAuto, m::ExpertDispatch::kAuto, true},
      {"grid-attn", m::MoeModel::AttentionKernel::kGrid, m::ExpertDispatch::kAuto, true},
      {"aten-experts", m::MoeModel::AttentionKernel::kAuto, m::ExpertDispatch::kGrouped, true},
      {"aten-norms", m::MoeModel::AttentionKernel::kAuto, m::ExpertDispatch::kAuto, false},
      {"before", m::MoeModel::AttentionKernel::kGrid, m::ExpertDispatch::kGrouped, false},
  };
  std::printf("%-13s %6s %12s %12s %10s\n", "setup", "texts", "ms/forward", "ms/text", "vs before");
  for (int n : {1, 8, 32}) {
    std::vector<std::vector<std::vector<int32_t>>> batches;
    for (size_t i = 0; i + n <= ids->size() && batches.size() < 64; i += n)
      batches.emplace_back(ids->begin() + i, ids->begin() + i + n);
    const int forwards = n == 1 ? 64 : n == 8 ? 24 : 8;
    std::vector<std::vector<double>> ms(setups.size());
    for (int r = 0; r < reps; ++r)
      for (size_t s = 0; s < setups.size(); ++s) {
        (*model)->set_attention_kernel(setups[s].attention);
        (*model)->set_expert_dispatch(setups[s].experts);
        (*model)->set_fused_norms(setups[s].fused_norms);
        (void)emb.EmbedIds(batches[0]);  // warm
        const auto t0 = Clock::now();
        for (int f = 0; f < forwards; ++f) {
          auto out = emb.EmbedIds(batches[static_cast<size_t>(f) % batches.size()]);
          if (!out.ok()) {
            std::fprintf(stderr, "%s\n", out.status().ToString().c_str());
            return 1;
          }
        }
        ms[s].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / forwards);
      }
    std::vector<double> med;
    for (auto& v : ms) {
      std::sort(v.begin(), v.end());
      med.push_back(v[v.size() / 2]);
    }
    for (size_t s = 0; s < setups.size(); ++s)
      std::printf("%-13s %6d %12.2f %12.3f %9.2fx\n", setups[s].name, n, med[s], med[s] / n, med.back() / med[s]);
  }
  return 0;
}
