// moeedb: the command-line entry point. Subcommands live in cmd_*.cpp.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "plugin/cli/commands.h"

namespace moeedb::cli {

int Fail(const std::string& cmd, const std::string& message) {
  std::cerr << "moeedb " << cmd << ": " << message << std::endl;
  return 1;
}

int UsageError(const std::string& cmd, const std::string& message) {
  std::cerr << "moeedb " << cmd << ": " << message << "\n(run 'moeedb " << cmd << " --help')" << std::endl;
  return 2;
}

bool WantsHelp(const std::vector<std::string>& args) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h") return true;
  return false;
}

}  // namespace moeedb::cli

namespace {

const char* kUsage =
    "moeedb: Mixture-of-Experts LLMs as embedding models (MoEE: hidden state + routing weights)\n"
    "\n"
    "Usage: moeedb <command> [options]\n"
    "\n"
    "Commands:\n"
    "  tokenize     text lines -> token ids with a tokenizer.json\n"
    "  embed        text lines -> {\"hs\":[...],\"rw\":[...],\"tokens\":N} JSON lines\n"
    "  model init   write a random-weight checkpoint in HuggingFace layout\n"
    "  model info   describe a model folder\n"
    "  ingest       embed and store JSONL documents in a collection\n"
    "  search       fused search: cos_HS + alpha * cos_RW\n"
    "  get          print stored documents by id\n"
    "  delete       delete documents by id\n"
    "  collections  list | info | drop\n"
    "  checkpoint   consistent backup of the database\n"
    "  serve        HTTP server: OpenAI embeddings, TEI, collections API\n"
    "  alpha        label-free alpha for cos_HS + alpha * cos_RW from unlabeled pairs\n"
    "  lens         per-layer cosine of top-1 vs top-k MoE outputs (MoE Lens); lens specialise: experts per domain\n"
    "  train        train tokenizer | train model | train embed (the embedded default model)\n"
    "  eval         eval sts | retrieval | classify (the evaluation harness)\n"
    "\n"
    "Run 'moeedb <command> --help' for a command's options.\n";

// Every forward pass allocates and frees tensor-sized blocks. By default glibc
// hands freed memory back to the kernel and faults it in again on the next
// pass; keeping it cut system time and sped training up by a third
// (docs/perf.md). The MALLOC_*_ environment variables still win.
void KeepFreedMemory() {
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr) mallopt(M_TRIM_THRESHOLD, 1 << 30);
  if (std::getenv("MALLOC_TOP_PAD_") == nullptr) mallopt(M_TOP_PAD, 256 << 20);
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) mallopt(M_MMAP_THRESHOLD, 32 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  KeepFreedMemory();
  std::ios::sync_with_stdio(false);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  const std::string cmd = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    if (cmd == "tokenize") return moeedb::cli::RunTokenize(rest);
    if (cmd == "embed") return moeedb::cli::RunEmbed(rest);
    if (cmd == "model") return moeedb::cli::RunModel(rest);
    if (cmd == "alpha") return moeedb::cli::RunAlpha(rest);
    if (cmd == "lens") return moeedb::cli::RunLens(rest);
    if (cmd == "ingest") return moeedb::cli::RunIngest(rest);
    if (cmd == "search") return moeedb::cli::RunSearch(rest);
    if (cmd == "get") return moeedb::cli::RunGet(rest);
    if (cmd == "delete") return moeedb::cli::RunDelete(rest);
    if (cmd == "collections") return moeedb::cli::RunCollections(rest);
    if (cmd == "checkpoint") return moeedb::cli::RunCheckpoint(rest);
    if (cmd == "serve") return moeedb::cli::RunServe(rest);
    if (cmd == "train") return moeedb::cli::RunTrain(rest);
    if (cmd == "eval") return moeedb::cli::RunEval(rest);
  } catch (const std::exception& e) {
    return moeedb::cli::Fail(cmd, std::string("internal error: ") + e.what());
  }
  std::cerr << "moeedb: unknown command '" << cmd << "'\n\n" << kUsage;
  return 2;
}
