// The CLI's subcommands. Each takes the arguments after its name and returns
// the process exit code: 0 success, 1 error (message on stderr), 2 usage.
#pragma once

#include <string>
#include <vector>

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

// Prints "moeedb <cmd>: <message>" to stderr and returns 1.
int Fail(const std::string& cmd, const std::string& message);
// Prints a usage error and returns 2.
int UsageError(const std::string& cmd, const std::string& message);
bool WantsHelp(const std::vector<std::string>& args);

}  // namespace moeedb::cli
