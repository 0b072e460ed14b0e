// The CLI as a table of commands. A command is one row: the words that select
// it, a one-line summary for `moeedb --help`, its usage line and description
// for its own --help, its flags, the flags it cannot run without, and the
// function that runs it on the parsed flags. Help, parsing, required flags
// and usage errors are generated from the row, never written per command.
#pragma once

#include <string>
#include <vector>

#include "plugin/cli/args.h"

namespace moeedb::cli {

struct Command {
  std::string name;         // "model init": the words after `moeedb`
  std::string summary;      // one line, in the list of commands
  std::string usage;        // after "Usage: moeedb "
  std::string description;  // the paragraph of its --help
  std::vector<FlagSpec> flags;
  int (*run)(const Args&);  // exit code: 0 success, 1 error, 2 usage
  std::vector<std::string> required = {};  // flag names (no dashes)
};

// Runs a command line (argv without the program name) against the table:
// the longest row whose name matches argv's first words takes the rest.
// `moeedb`, `moeedb --help` and `moeedb GROUP` list the commands; --help
// anywhere prints the command's help. Returns the process exit code.
int RunCommandLine(const std::vector<Command>& table, const std::vector<std::string>& argv);

// The `moeedb --help` text: every row's name and summary.
std::string CommandListText(const std::vector<Command>& table);

}  // namespace moeedb::cli
