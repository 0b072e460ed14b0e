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

struct FlagSpec {
  std::string name;     // without the dashes
  std::string meta;     // e.g. "DIR"; empty for a boolean flag
  std::string help;
};

class Args {
 public:
  // argv after the subcommand words. Fails on unknown flags or missing values.
  static Result<Args> Parse(const std::vector<std::string>& argv, const std::vector<FlagSpec>& specs);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& def = "") const;
  // Integer flag; a non-integer or out-of-range value is an error naming the flag.
  Result<long long> GetInt(const std::string& name, long long def, long long min, long long max) const;
  // Finite number flag; std::nullopt when absent, an error naming the flag on a bad value.
  Result<std::optional<double>> GetDouble(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // GetInt into *out; false (and *error set, *out untouched) on a bad value.
  // Chains with &&, stopping at the first bad flag.
  bool ReadInt(const std::string& name, long long def, long long min, long long max, int64_t* out, Status* error) const;

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// "Usage: moeedb <usage>\n\n<summary>\n\nOptions:\n  --flag META  help\n"
std::string HelpText(const std::string& usage, const std::string& summary, const std::vector<FlagSpec>& specs);

}  // namespace moeedb::cli
