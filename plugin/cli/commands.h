// The CLI's subcommands. Each takes the arguments after its name and returns
// the process exit code: 0 success, 1 error (message on stderr), 2 usage.
#pragma once

#include <string>
#include <vector>

#include "plugin/cli/args.h"  // Fail, UsageError, ParseCommand

namespace moeedb::cli {

int RunTokenize(const std::vector<std::string>& args);
int RunEmbed(const std::vector<std::string>& args);
int RunModel(const std::vector<std::string>& args);  // model init | model info
int RunAlpha(const std::vector<std::string>& args);
int RunLens(const std::vector<std::string>& args);
int RunLensSpecialise(const std::vector<std::string>& args);
int RunModelPrune(const std::vector<std::string>& args);
int RunIngest(const std::vector<std::string>& args);
int RunSearch(const std::vector<std::string>& args);
int RunGet(const std::vector<std::string>& args);
int RunDelete(const std::vector<std::string>& args);
int RunCollections(const std::vector<std::string>& args);
int RunCheckpoint(const std::vector<std::string>& args);
int RunServe(const std::vector<std::string>& args);
int RunTrain(const std::vector<std::string>& args);  // train tokenizer | train model | train embed
int RunTrainEmbed(const std::vector<std::string>& args);
int RunEval(const std::vector<std::string>& args);   // eval sts | retrieval | classify

}  // namespace moeedb::cli
