// EmbeddingSpec: how texts are embedded. Its recorded part (model folder,
// routing, prompt, poolings) is what a collection records and every later
// ingest and search of it must use; the rest (dtype, quant, device,
// threads, workers, batch tokens, ...) is how this process computes. Its
// field table (EmbeddingFields) gives the CLI's model flags, their help and
// defaults, and the JSON form.
#pragma once

#include <cstdint>
#include <string>

#include "base/field_table.h"
#include "engine/embed/embedder.h"

namespace moeedb {

struct EmbeddingSpec {
  std::string model_dir;  // "model": a model folder; empty: the embedded default (the CLI's)
  std::string routing = "learned";
  // Empty: what the model folder asks for (engine/model/model_defaults.h);
  // EmbeddingSetup::Load resolves them, so a setup's spec holds concrete names.
  std::string prompt;
  std::string hs_pooling;  // engine/model/pooling.h
  std::string rw_pooling;
  std::string dtype = "f32";   // compute dtype (engine/kernels/weight_format.h)
  std::string quant = "none";  // weight storage
  std::string device = "cpu";  // cpu | cuda[:N]
  int threads = 0;             // 0: all cores
  // Embed() splits its texts across this many EmbedWorkers, each with
  // threads / workers compute threads; 0: 2 when there are 2 or more compute
  // threads, else 1 (two one-threaded forwards beat one two-threaded one on
  // two cores: docs/perf.md).
  int workers = 0;
  int64_t batch_tokens = EmbedderOptions{}.batch_tokens;  // padded tokens per forward pass
  std::string cache_dir;        // SSMoE centroid cache
  // Process-local choices (not recorded with collections): a GritLM-style
  // instruction before every text, the RW read-out ("": the family's;
  // logits | probs | log_probs), a tokenizer.json instead of the model's,
  // how experts run.
  std::string instruction;
  std::string rw_readout;
  std::string tokenizer_path;
  std::string expert_dispatch = "auto";
};

// model, routing, prompt, hs_pooling, rw_pooling, dtype, quant, device,
// threads, workers, batch_tokens, instruction, tokenizer, expert_dispatch, cache_dir.
const spec::FieldTable<EmbeddingSpec>& EmbeddingFields();
// The weight format's fields: what every command that loads a model takes.
inline const std::vector<std::string> kWeightFormatFields = {"dtype", "quant", "device"};

}  // namespace moeedb
