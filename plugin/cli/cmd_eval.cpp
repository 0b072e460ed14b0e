// moeedb eval sts | retrieval | classify: the evaluation harness
// (eval/harness/harness.h) over a model setup or, with --baseline tfidf, the
// TF-IDF baseline. Each command prints a readable table on stderr and one
// JSON object on stdout. The same commands evaluate the shipped model, a
// random-weight model of the same shape (moeedb model init) and TF-IDF.
#include <filesystem>
#include <iostream>

#include "database/embedding_setup.h"
#include "eval/harness/harness.h"
#include "plugin/cli/args.h"
#include "plugin/cli/commands.h"
#include "plugin/cli/common.h"
#include "plugin/cli/spec_flags.h"

namespace moeedb::cli {

namespace fs = std::filesystem;

std::vector<FlagSpec> EvalFlags() {
  return Concat({{"baseline", "NAME", "tfidf: the lexical baseline instead of --model"},
                 {"vectors", "TEXTS,VECTORS", "an outside model's vectors instead of --model: {\"text\": ...} lines "
                  "(eval texts) and their float32 rows (HS alone)"},
                 {"label", "NAME", "the name of the --vectors model in the table (default: the vectors file)"},
                {"data", "DIR", "dataset folder"},
                {"limit", "N", "use the first N items of each split (CI subsets; default 0: all)", IntRule{0, 0, 1LL << 40}}},
                EmbeddingFlags({"model", "routing", "prompt", "hs_pooling", "rw_pooling", "dtype", "quant", "device", "threads"}));
}

namespace {

struct Common {
  std::unique_ptr<EmbeddingSetup> setup;  // null for the TF-IDF baseline and --vectors
  std::unique_ptr<eval::TextVectors> vectors;
  std::string method_label;               // "model DIR (routing, pooling)" or "tfidf"
  std::string data;
  size_t limit = 0;
};

Result<Common> ParseCommon(const Args& args) {
  Common c;
  c.data = args.Get("data");
  c.limit = static_cast<size_t>(args.Int("limit"));
  if (args.Has("baseline") + args.Has("vectors") + args.Has("model") > 1)
    return Status::InvalidArgument("give one of --model, --vectors and --baseline");
  if (args.Has("vectors")) {
    const std::string spec = args.Get("vectors");
    const size_t comma = spec.find(',');
    if (comma == std::string::npos) return Status::InvalidArgument("--vectors needs TEXTS.jsonl,VECTORS.f32");
    MOEEDB_ASSIGN_OR_RETURN(eval::TextVectors v, eval::TextVectors::Load(spec.substr(0, comma), spec.substr(comma + 1)));
    c.vectors = std::make_unique<eval::TextVectors>(std::move(v));
    c.method_label = args.Get("label", fs::path(spec.substr(comma + 1)).filename().string());
    return c;
  }
  if (args.Has("baseline")) {
    if (args.Get("baseline") != "tfidf") return Status::InvalidArgument("--baseline: only tfidf is known");
    c.method_label = "tfidf";
    return c;
  }
  if (ModelDirFlag(args).empty()) return Status::InvalidArgument("no default model was found: pass --model DIR (or --baseline tfidf)");
  MOEEDB_ASSIGN_OR_RETURN(EmbeddingSpec cfg, EmbeddingSpecFromFlags(args));
  MOEEDB_ASSIGN_OR_RETURN(c.setup, EmbeddingSetup::Load(cfg));
  c.method_label = fs::path(c.setup->config().model_dir).filename().string() + " (routing " + c.setup->routing() +
                   ", prompt " + c.setup->config().prompt + ", hs " + c.setup->config().hs_pooling + ", rw " +
                   c.setup->config().rw_pooling + ")";
  return c;
}

eval::EvalInput Input(const Common& c) { return {c.setup.get(), c.method_label, c.data, c.limit, c.vectors.get()}; }

int Print(const std::string& cmd, const Result<eval::EvalReport>& r) {
  if (!r.ok()) return Fail(cmd, r.status().message());
  std::cerr << r->table;
  std::cout << r->json.dump() << std::endl;
  return 0;
}

}  // namespace

int RunEvalSts(const Args& args) {
  auto c = ParseCommon(args);
  if (!c.ok()) return Fail("eval sts", c.status().message());
  return Print("eval sts", eval::EvaluateSts(Input(*c), args.Get("plot")));
}

int RunEvalRetrieval(const Args& args) {
  auto c = ParseCommon(args);
  if (!c.ok()) return Fail("eval retrieval", c.status().message());
  eval::RetrievalOptions o;
  o.hybrid.k = 100;
  o.hybrid.exact = true;
  if (Status s = ReadSpecFlags(args, SearchFields(), &o.hybrid); !s.ok()) return UsageError("eval retrieval", s.message());
  if (!o.hybrid.alpha) o.hybrid.alpha = c->setup ? static_cast<float>(c->setup->default_alpha()) : 1.0f;
  o.queries = args.Get("queries", "all");
  if (o.queries != "all" && o.queries != "tune" && o.queries != "test")
    return UsageError("eval retrieval", "--queries must be all, tune or test");
  o.tune = args.Has("tune");
  const TempDir scratch = MakeTempDir();
  if (!scratch) return Fail("eval retrieval", "cannot make a scratch folder under $TMPDIR or /tmp");
  o.scratch_dir = *scratch;
  return Print("eval retrieval", eval::EvaluateRetrieval(Input(*c), o));
}

int RunEvalClassify(const Args& args) {
  auto c = ParseCommon(args);
  if (!c.ok()) return Fail("eval classify", c.status().message());
  const long long k = args.Int("k");
  float alpha = c->setup ? static_cast<float>(c->setup->default_alpha()) : 1.0f;
  try {
    if (args.Has("alpha")) alpha = std::stof(args.Get("alpha"));
  } catch (...) {
    return UsageError("eval classify", "--alpha needs a number");
  }
  return Print("eval classify", eval::EvaluateClassify(Input(*c), static_cast<size_t>(k), alpha));
}

int RunEvalTexts(const Args& args) {
  auto texts = eval::EvalTexts(args.Get("data"));
  if (!texts.ok()) return Fail("eval texts", texts.status().message());
  // Invalid UTF-8 (a corpus's stray byte) becomes U+FFFD rather than an exception.
  for (const auto& t : *texts)
    std::cout << nlohmann::json{{"text", t}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return std::cout.flush() ? 0 : Fail("eval texts", "cannot write to stdout");
}

}  // namespace moeedb::cli
