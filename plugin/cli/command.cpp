#include "plugin/cli/command.h"

#include <algorithm>
#include <exception>
#include <iostream>
#include <sstream>

namespace moeedb::cli {

namespace {

std::vector<std::string> Words(const std::string& name) {
  std::istringstream in(name);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// The row whose name is the longest prefix of argv; nullptr when none is.
const Command* Find(const std::vector<Command>& table, const std::vector<std::string>& argv, size_t* used) {
  const Command* best = nullptr;
  *used = 0;
  for (const Command& c : table) {
    const auto words = Words(c.name);
    if (words.size() <= *used || words.size() > argv.size()) continue;
    if (std::equal(words.begin(), words.end(), argv.begin())) {
      best = &c;
      *used = words.size();
    }
  }
  return best;
}

// The rows under a group word ("model" -> model init, model info, ...).
std::vector<const Command*> Group(const std::vector<Command>& table, const std::string& word) {
  std::vector<const Command*> rows;
  for (const Command& c : table) {
    const auto words = Words(c.name);
    if (words.size() > 1 && words[0] == word) rows.push_back(&c);
  }
  return rows;
}

// "  name              summary" lines; skip_group drops the group word.
std::string ListRows(const std::vector<const Command*>& rows, bool skip_group) {
  std::string out;
  for (const Command* c : rows) {
    std::string name = skip_group ? c->name.substr(c->name.find(' ') + 1) : c->name;
    name.resize(std::max<size_t>(name.size() + 2, 18), ' ');
    out += "  " + name + c->summary + "\n";
  }
  return out;
}

std::string SubcommandNames(const std::vector<const Command*>& group, const std::string& separator) {
  std::string names;
  for (const Command* c : group) names += (names.empty() ? "" : separator) + c->name.substr(c->name.find(' ') + 1);
  return names;
}

int RunRow(const Command& c, const std::vector<std::string>& rest) {
  if (WantsHelp(rest)) {
    std::cout << HelpText(c.usage, c.description, c.flags);
    return 0;
  }
  auto args = Args::Parse(rest, c.flags);
  if (!args.ok()) return UsageError(c.name, args.status().message());
  for (const std::string& flag : c.required)
    if (!args->Has(flag)) return UsageError(c.name, "--" + flag + " is required");
  try {
    return c.run(*args);
  } catch (const std::exception& e) {
    return Fail(c.name, std::string("internal error: ") + e.what());
  }
}

}  // namespace

std::string CommandListText(const std::vector<Command>& table) {
  std::vector<const Command*> rows;
  for (const Command& c : table) rows.push_back(&c);
  return "moeedb: Mixture-of-Experts LLMs as embedding models (MoEE: hidden state + routing weights)\n\n"
         "Usage: moeedb <command> [options]\n\nCommands:\n" +
         ListRows(rows, false) + "\nRun 'moeedb <command> --help' for a command's options.\n";
}

int RunCommandLine(const std::vector<Command>& table, const std::vector<std::string>& argv) {
  if (argv.empty() || argv[0] == "--help" || argv[0] == "-h" || argv[0] == "help") {
    std::cout << CommandListText(table);
    return argv.empty() ? 2 : 0;
  }
  size_t used = 0;
  if (const Command* c = Find(table, argv, &used))
    return RunRow(*c, std::vector<std::string>(argv.begin() + used, argv.end()));
  const auto group = Group(table, argv[0]);
  if (group.empty()) {
    std::cerr << "moeedb: unknown command '" << argv[0] << "'\n\n" << CommandListText(table);
    return 2;
  }
  if (argv.size() == 1 || WantsHelp(argv)) {
    std::cout << "Usage: moeedb " << argv[0] << " " << SubcommandNames(group, "|") << " [options]\n\n"
              << ListRows(group, true) << "\nRun 'moeedb " << argv[0] << " <command> --help' for its options.\n";
    return argv.size() == 1 ? 2 : 0;
  }
  return UsageError(argv[0], "unknown subcommand '" + argv[1] + "' (" + SubcommandNames(group, ", ") + ")");
}

}  // namespace moeedb::cli
