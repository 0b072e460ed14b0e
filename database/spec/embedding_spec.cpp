#include "database/spec/embedding_spec.h"

#include "engine/model/moe_dispatch.h"
#include "engine/model/pooling.h"
#include "engine/model/prompt.h"
#include "engine/model/routing_policy.h"
#include "engine/kernels/weight_format.h"

namespace moeedb {

using json = nlohmann::json;
using namespace spec;

namespace {

// A string field checked by a parser of its own (routing specs, prompt names).
template <typename Parse>
Field<EmbeddingSpec> Parsed(const char* name, std::string EmbeddingSpec::*member, const char* meta, const char* help,
                            Parse parse, const char* default_text = nullptr) {
  auto f = String(name, member, meta, help, default_text);
  f.set = [member, parse](EmbeddingSpec* s, const json& v) -> Status {
    MOEEDB_RETURN_IF_ERROR(parse(v.get<std::string>()).status());
    s->*member = v.get<std::string>();
    return Status::OK();
  };
  return f;
}

FieldTable<EmbeddingSpec> MakeEmbeddingFields() {
  FieldTable<EmbeddingSpec> t;
  t.push_back(String("model", &EmbeddingSpec::model_dir, "DIR",
                     "model folder: a HuggingFace MoE checkpoint (config.json, *.safetensors, tokenizer.json) or a moeedb model",
                     "the embedded default model"));
  t.push_back(Parsed("routing", &EmbeddingSpec::routing, "SPEC",
                     "learned | ssmoe[:c=0.5,k=50,sign=canonical|reference] | top1[:weight=raw|one]",
                     [](const std::string& s) { return RoutingPolicy::Parse(s); }));
  static const std::string prompt_help = "prompt template: " + PromptNames();
  t.push_back(Parsed("prompt", &EmbeddingSpec::prompt, "NAME", prompt_help.c_str(),
                     [](const std::string& s) { return FindPrompt(s); }, "the model's"));
  t.push_back(Choice("hs_pooling", &EmbeddingSpec::hs_pooling, kHsPoolings, "P", "HS pooling: last | mean | layers-mean | trained",
                     "the model's"));
  t.push_back(Choice("rw_pooling", &EmbeddingSpec::rw_pooling, kRwPoolings, "P", "RW pooling: last | mean", "the model's"));
  t.push_back(Choice("dtype", &EmbeddingSpec::dtype, kComputeDtypes, "D",
                     "weight dtype: f32 | bf16 (half the weight memory; multiplied as bf16 dot products or widened to f32 in registers, whichever the CPU runs faster)"));
  t.push_back(Choice("quant", &EmbeddingSpec::quant, kWeightQuants, "Q",
                     "weight storage: none | int8 (per-channel int8 experts and attention, ~1/4 memory)"));
  t.push_back(String("device", &EmbeddingSpec::device, "DEV", "cpu | cuda | cuda:N (needs a CUDA build)"));
  t.push_back(Integer("threads", &EmbeddingSpec::threads, 0, 1024, "N", "compute threads (0: all cores)"));
  t.push_back(Integer("workers", &EmbeddingSpec::workers, 0, 64, "N",
                      "model threads: each batch is split into N parts embedded at once, each with threads/N compute "
                      "threads (0: 2 when there are 2 or more compute threads, else 1)"));
  t.push_back(Integer("batch_tokens", &EmbeddingSpec::batch_tokens, 1, 1 << 24, "N", "padded tokens per forward pass"));
  t.push_back(String("instruction", &EmbeddingSpec::instruction, "TEXT",
                     "GritLM-style instruction placed before every text", "none"));
  t.push_back(String("tokenizer", &EmbeddingSpec::tokenizer_path, "FILE", "tokenizer.json to use instead of the model's"));
  t.push_back(Choice("expert_dispatch", &EmbeddingSpec::expert_dispatch, kExpertDispatches, "D",
                     "how experts run: auto | loop | grouped | batched | packed (benchmarks)"));
  t.push_back(String("cache_dir", &EmbeddingSpec::cache_dir, "DIR", "where SSMoE spectral centroids are cached",
                     "$MOEEDB_CACHE_DIR, else ~/.cache/moeedb"));
  return t;
}

}  // namespace

const FieldTable<EmbeddingSpec>& EmbeddingFields() {
  static const FieldTable<EmbeddingSpec> kTable = MakeEmbeddingFields();
  return kTable;
}

}  // namespace moeedb
