// The CLI side of the typed specs (database/spec/): a field table's fields
// as the command's flags (name, placeholder, help with its default) and the
// parsed flags back into the spec, with the table's rules and errors. A
// command lists which fields it takes; it never restates one.
#pragma once

#include <string>
#include <vector>

#include "base/field_table.h"
#include "plugin/cli/args.h"

namespace moeedb::cli {

// Which of a table's fields a command takes.
struct FieldPick {
  std::vector<std::string> only = {};  // these alone (table order); empty: every field...
  std::vector<std::string> skip = {};  // ...but these
};

template <typename Spec>
std::vector<FlagSpec> SpecFlags(const spec::FieldTable<Spec>& table, const FieldPick& pick = {}) {
  std::vector<std::string> skip = pick.skip;
  if (!pick.only.empty())
    for (const auto& f : table) {
      bool wanted = false;
      for (const auto& o : pick.only) wanted |= o == f.name;
      if (!wanted) skip.push_back(f.name);
    }
  std::vector<FlagSpec> out;
  for (auto& d : spec::FlagDocs(table, skip)) out.push_back({d.name, d.meta, d.help});
  return out;
}

// The table's flags present in `args` into *spec (the others keep their
// values); InvalidArgument naming the option.
template <typename Spec>
Status ReadSpecFlags(const Args& args, const spec::FieldTable<Spec>& table, Spec* out, const FieldPick& pick = {}) {
  auto picked = [&](const std::string& flag) {
    for (const auto& s : pick.skip)
      if (spec::FlagName(s) == flag) return false;
    if (pick.only.empty()) return true;
    for (const auto& o : pick.only)
      if (spec::FlagName(o) == flag) return true;
    return false;
  };
  return spec::ReadFlags(
      table,
      [&](const std::string& flag) -> std::optional<std::string> {
        if (!args.Has(flag) || !picked(flag)) return std::nullopt;
        return args.Get(flag);
      },
      out);
}

// `specs` with `more` appended.
inline std::vector<FlagSpec> Concat(std::vector<FlagSpec> specs, const std::vector<FlagSpec>& more) {
  specs.insert(specs.end(), more.begin(), more.end());
  return specs;
}

}  // namespace moeedb::cli
