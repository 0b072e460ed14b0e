// The CLI's flags: each command declares its flags as a table of FlagSpec,
// parsed by CLI11 (--name value, --name=value, boolean --flag; the last of a
// repeated flag wins; `--` ends the options); an unknown flag or a missing
// value is a usage error. The table also gives the command's --help text.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"

namespace moeedb::cli {

// An integer flag's default and inclusive range, declared once with the
// flag: Args::Parse refuses a value outside it (an error naming the flag),
// Args::Int reads it, and the help shows the default unless the help text
// says what the default means ("default: all cores").
struct IntRule {
  long long def = 0, min = 0, max = 0;
};

struct FlagSpec {
  std::string name;     // without the dashes
  std::string meta;     // e.g. "DIR"; empty for a boolean flag
  std::string help;
  std::optional<IntRule> integer = std::nullopt;  // set: an integer flag
};

class Args {
 public:
  // argv after the subcommand words. Fails on unknown flags or missing values.
  static Result<Args> Parse(const std::vector<std::string>& argv, const std::vector<FlagSpec>& specs);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& def = "") const;
  // The value of an integer flag (its IntRule's default when absent); Parse
  // has checked it. Aborts on a flag declared without an IntRule: a bug.
  long long Int(const std::string& name) const;
  // Finite number flag; std::nullopt when absent, an error naming the flag on a bad value.
  Result<std::optional<double>> GetDouble(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // The arguments Parse was given, as they were.
  const std::vector<std::string>& argv() const { return argv_; }

 private:
  // A value of the flag `name` under `rule`; an error naming the flag.
  Result<long long> CheckedInt(const std::string& name, const IntRule& rule) const;
  std::map<std::string, std::string> values_;
  std::map<std::string, IntRule> int_rules_;
  std::vector<std::string> positional_;
  std::vector<std::string> argv_;
};

// "Usage: moeedb <usage>\n\n<summary>\n\nOptions:\n  --flag META  help\n"
std::string HelpText(const std::string& usage, const std::string& summary, const std::vector<FlagSpec>& specs);

// Prints "moeedb <cmd>: <message>" to stderr and returns 1 (the exit code of an error).
int Fail(const std::string& cmd, const std::string& message);
// Prints a usage error pointing at the command's --help and returns 2.
int UsageError(const std::string& cmd, const std::string& message);
bool WantsHelp(const std::vector<std::string>& args);

}  // namespace moeedb::cli
