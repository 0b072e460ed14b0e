// moeedb: the command-line entry point. Subcommands live in cmd_*.cpp.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "plugin/cli/commands.h"


namespace {

// The command table: name, one-line summary, entry point. The usage text and
// the dispatch both come from it.
struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>&);
};
const Command kCommands[] = {
    {"tokenize", "text lines -> token ids with a tokenizer.json", moeedb::cli::RunTokenize},
    {"embed", "text lines -> {\"hs\":[...],\"rw\":[...],\"tokens\":N} JSON lines", moeedb::cli::RunEmbed},
    {"model", "info | init | calibrate | prune: describe, create, calibrate or prune a model folder", moeedb::cli::RunModel},
    {"ingest", "embed and store JSONL documents in a collection", moeedb::cli::RunIngest},
    {"search", "search a collection: fused (cos_HS + alpha * cos_RW), hs, rw, lexical or hybrid", moeedb::cli::RunSearch},
    {"get", "print stored documents by id", moeedb::cli::RunGet},
    {"delete", "delete documents by id", moeedb::cli::RunDelete},
    {"collections", "list | info | drop", moeedb::cli::RunCollections},
    {"checkpoint", "consistent backup of the database", moeedb::cli::RunCheckpoint},
    {"serve", "HTTP server: OpenAI, TEI, Ollama, Weaviate and Qdrant protocols, the collections API, the console",
     moeedb::cli::RunServe},
    {"alpha", "label-free alpha for cos_HS + alpha * cos_RW from unlabeled pairs", moeedb::cli::RunAlpha},
    {"lens", "per-layer cosine of top-1 vs top-k MoE outputs (MoE Lens); lens specialise: experts per domain",
     moeedb::cli::RunLens},
    {"train", "train tokenizer | train model | train embed (the embedded default model)", moeedb::cli::RunTrain},
    {"eval", "eval sts | retrieval | classify (the evaluation harness)", moeedb::cli::RunEval},
};

std::string Usage() {
  std::string out =
      "moeedb: Mixture-of-Experts LLMs as embedding models (MoEE: hidden state + routing weights)\n\n"
      "Usage: moeedb <command> [options]\n\nCommands:\n";
  for (const Command& c : kCommands) {
    std::string name = c.name;
    name.resize(13, ' ');
    out += "  " + name + c.summary + "\n";
  }
  return out + "\nRun 'moeedb <command> --help' for a command's options.\n";
}

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
    std::cout << Usage();
    return args.empty() ? 2 : 0;
  }
  const std::string cmd = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  for (const Command& c : kCommands) {
    if (cmd != c.name) continue;
    try {
      return c.run(rest);
    } catch (const std::exception& e) {
      return moeedb::cli::Fail(cmd, std::string("internal error: ") + e.what());
    }
  }
  std::cerr << "moeedb: unknown command '" << cmd << "'\n\n" << Usage();
  return 2;
}
