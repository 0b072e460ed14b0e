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

namespace {

const std::vector<FlagSpec>& CommonFlags() {
  static const std::vector<FlagSpec> flags =
      Concat({{"baseline", "NAME", "tfidf: the lexical baseline instead of --model"},
              {"data", "DIR", "dataset folder"},
              {"limit", "N", "use the first N items of each split (CI subsets; default 0: all)", IntRule{0, 0, 1LL << 40}}},
             EmbeddingFlags({"model", "routing", "prompt", "hs_pooling", "rw_pooling", "dtype", "quant", "device", "threads"}));
  return flags;
}

struct Common {
  std::unique_ptr<EmbeddingSetup> setup;  // null for the TF-IDF baseline
  std::string method_label;               // "model DIR (routing, pooling)" or "tfidf"
  std::string data;
  size_t limit = 0;
};

Result<Common> ParseCommon(const Args& args) {
  Common c;
  if (!args.Has("data")) return Status::InvalidArgument("--data DIR is required");
  c.data = args.Get("data");
  c.limit = static_cast<size_t>(args.Int("limit"));
  if (args.Has("baseline")) {
    if (args.Get("baseline") != "tfidf") return Status::InvalidArgument("--baseline: only tfidf is known");
    if (args.Has("model")) return Status::InvalidArgument("give --model or --baseline, not both");
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

eval::EvalInput Input(const Common& c) { return {c.setup.get(), c.method_label, c.data, c.limit}; }

int Print(const std::string& cmd, const Result<eval::EvalReport>& r) {
  if (!r.ok()) return Fail(cmd, r.status().message());
  std::cerr << r->table;
  std::cout << r->json.dump() << std::endl;
  return 0;
}

int RunEvalSts(const std::vector<std::string>& argv) {
  std::vector<FlagSpec> specs = CommonFlags();
  specs.push_back({"plot", "FILE", "write Spearman against alpha (dev: blue, test: red) as a PNG"});
  std::optional<Args> args;
  if (auto exit = ParseCommand({"eval sts", "eval sts (--model DIR | --baseline tfidf) --data STSB_DIR [--plot FILE.png]",
                          "STS-B (stsb-en-dev.csv, stsb-en-test.csv): Spearman x100 on test for HS, RW, concat, "
                          "and cos_HS + alpha cos_RW with alpha = 1, alpha chosen on dev (grid 0..3 step 0.05) and "
                          "the label-free alpha (chosen on the unlabeled test pairs).", specs}, argv, &args))
    return *exit;
  auto c = ParseCommon(*args);
  if (!c.ok()) return Fail("eval sts", c.status().message());
  return Print("eval sts", eval::EvaluateSts(Input(*c), args->Get("plot")));
}

int RunEvalRetrieval(const std::vector<std::string>& argv) {
  std::vector<FlagSpec> specs = CommonFlags();
  // The weights and fusion of the hybrid runs (eval runs every mode).
  specs = Concat(specs, SpecFlags(SearchFields(), {.only = {"alpha", "beta", "w_hs", "fusion", "norm", "rrf_k"}}));
  specs.push_back({"queries", "SET", "all (default) | tune (the even-numbered half) | test (the odd-numbered half)"});
  specs.push_back({"tune", "", "also a grid of hybrid settings (lexical weight, normalisation, rrf)"});
  std::optional<Args> args;
  if (auto exit = ParseCommand({"eval retrieval", "eval retrieval (--model DIR | --baseline tfidf) --data CRANFIELD_DIR",
                          "Cranfield: the documents go into a real collection (temporary database), each query is "
                          "searched with modes hs, rw and fused; prints nDCG@10 (graded), MRR@10 and Recall@100. "
                          "With --limit N: the first N queries, over their judged documents plus the first 200.", specs}, argv, &args))
    return *exit;
  auto c = ParseCommon(*args);
  if (!c.ok()) return Fail("eval retrieval", c.status().message());
  eval::RetrievalOptions o;
  o.hybrid.k = 100;
  o.hybrid.exact = true;
  if (Status s = ReadSpecFlags(*args, SearchFields(), &o.hybrid); !s.ok()) return UsageError("eval retrieval", s.message());
  if (!o.hybrid.alpha) o.hybrid.alpha = c->setup ? static_cast<float>(c->setup->default_alpha()) : 1.0f;
  o.queries = args->Get("queries", "all");
  if (o.queries != "all" && o.queries != "tune" && o.queries != "test")
    return UsageError("eval retrieval", "--queries must be all, tune or test");
  o.tune = args->Has("tune");
  TempDirGuard tmp;
  o.scratch_dir = tmp.path();
  return Print("eval retrieval", eval::EvaluateRetrieval(Input(*c), o));
}

int RunEvalClassify(const std::vector<std::string>& argv) {
  std::vector<FlagSpec> specs = CommonFlags();
  specs.push_back({"k", "N", "neighbours", IntRule{10, 1, 1000}});
  specs.push_back({"alpha", "X", "alpha of the fused similarity (default: the model's, else 1)"});
  std::optional<Args> args;
  if (auto exit = ParseCommand({"eval classify", "eval classify (--model DIR | --baseline tfidf) --data BANKING77_DIR [--k 10]",
                          "Banking77 (train.csv, test.csv): kNN accuracy of test texts against the training texts, "
                          "by HS (raw), RW and fused similarity (z-scores fitted on train). --limit N takes every "
                          "(rows/N)-th row of each split, so all labels stay represented.", specs}, argv, &args))
    return *exit;
  auto c = ParseCommon(*args);
  if (!c.ok()) return Fail("eval classify", c.status().message());
  const long long k = args->Int("k");
  float alpha = c->setup ? static_cast<float>(c->setup->default_alpha()) : 1.0f;
  try {
    if (args->Has("alpha")) alpha = std::stof(args->Get("alpha"));
  } catch (...) {
    return UsageError("eval classify", "--alpha needs a number");
  }
  return Print("eval classify", eval::EvaluateClassify(Input(*c), static_cast<size_t>(k), alpha));
}

}  // namespace

int RunEval(const std::vector<std::string>& argv) {
  if (argv.empty() || argv[0] == "--help" || argv[0] == "-h") {
    std::cout << "Usage: moeedb eval sts|retrieval|classify [options] (see 'moeedb eval <task> --help')\n";
    return argv.empty() ? 2 : 0;
  }
  std::vector<std::string> rest(argv.begin() + 1, argv.end());
  if (argv[0] == "sts") return RunEvalSts(rest);
  if (argv[0] == "retrieval") return RunEvalRetrieval(rest);
  if (argv[0] == "classify") return RunEvalClassify(rest);
  return UsageError("eval", "unknown task '" + argv[0] + "' (sts, retrieval, classify)");
}

}  // namespace moeedb::cli
