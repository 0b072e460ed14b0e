#include "plugin/cli/args.h"

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <iostream>

namespace moeedb::cli {

namespace {

// moeedb has long options only, so a token with a single leading dash is a
// value (a negative number, a text such as "-1 dB"); CLI11 would read it as
// short options, so it is shielded with a marker byte for the parse and
// unshielded in what comes out.
constexpr char kShield = '\x01';

std::string Shield(const std::string& s) {
  return s.size() >= 2 && s[0] == '-' && s[1] != '-' ? kShield + s : s;
}

std::string Unshield(const std::string& s) { return !s.empty() && s[0] == kShield ? s.substr(1) : s; }

}  // namespace

Result<Args> Args::Parse(const std::vector<std::string>& argv, const std::vector<FlagSpec>& specs) {
  CLI::App app;
  app.set_help_flag();  // each command prints its own HelpText
  std::vector<std::string> values(specs.size());
  std::deque<bool> flags(specs.size(), false);  // not vector<bool>: CLI11 binds a bool&
  std::vector<CLI::Option*> options(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const FlagSpec& f = specs[i];
    if (f.meta.empty()) {
      options[i] = app.add_flag("--" + f.name, flags[i], f.help);
    } else {
      options[i] = app.add_option("--" + f.name, values[i], f.help)
                       ->type_name(f.meta)
                       ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    }
  }
  std::vector<std::string> positional;
  app.add_option("arguments", positional);
  // CLI11 consumes its argument vector from the back.
  std::vector<std::string> reversed;
  for (auto it = argv.rbegin(); it != argv.rend(); ++it) reversed.push_back(Shield(*it));
  try {
    app.parse(reversed);
  } catch (const CLI::ExtrasError&) {
    for (const auto& s : argv)
      if (s.size() > 2 && s.compare(0, 2, "--") == 0) {
        const std::string name = s.substr(2, s.find('=') - 2);
        bool known = false;
        for (const auto& f : specs) known |= f.name == name;
        if (!known) return Status::InvalidArgument("unknown option --" + name + " (see --help)");
      }
    return Status::InvalidArgument("unexpected arguments (see --help)");
  } catch (const CLI::ArgumentMismatch&) {
    // An option takes the next token as its value whatever it is, so only
    // the last token can lack one.
    for (size_t i = 0; i < specs.size(); ++i)
      if (!specs[i].meta.empty() && !argv.empty() && argv.back() == "--" + specs[i].name)
        return Status::InvalidArgument("option --" + specs[i].name + " needs a value " + specs[i].meta);
    return Status::InvalidArgument("an option is missing its value (see --help)");
  } catch (const CLI::ParseError& e) {
    return Status::InvalidArgument(std::string(e.what()) + " (see --help)");
  }
  Args a;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (options[i]->count() == 0 || (specs[i].meta.empty() && !flags[i])) continue;  // absent, or --flag=false
    a.values_[specs[i].name] = specs[i].meta.empty() ? "1" : Unshield(values[i]);
  }
  for (const auto& p : positional) a.positional_.push_back(Unshield(p));
  a.argv_ = argv;
  for (const auto& f : specs)
    if (f.integer) {
      a.int_rules_[f.name] = *f.integer;
      if (auto v = a.CheckedInt(f.name, *f.integer); !v.ok()) return v.status();
    }
  return a;
}

std::string Args::Get(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second;
}

long long Args::Int(const std::string& name) const {
  auto rule = int_rules_.find(name);
  if (rule == int_rules_.end()) {
    std::cerr << "moeedb: internal error: --" << name << " is not declared as an integer flag" << std::endl;
    std::abort();
  }
  return *CheckedInt(name, rule->second);  // checked by Parse
}

Result<long long> Args::CheckedInt(const std::string& name, const IntRule& rule) const {
  auto it = values_.find(name);
  if (it == values_.end()) return rule.def;
  long long v = 0;
  const std::string& s = it->second;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size())
    return Status::InvalidArgument("option --" + name + " needs an integer, got '" + s + "'");
  if (v < rule.min || v > rule.max)
    return Status::InvalidArgument("option --" + name + " must be in [" + std::to_string(rule.min) + ", " +
                                   std::to_string(rule.max) + "], got " + s);
  return v;
}

Result<std::optional<double>> Args::GetDouble(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::optional<double>();
  const std::string& s = it->second;
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v))
    return Status::InvalidArgument("option --" + name + " needs a finite number, got '" + s + "'");
  return std::optional<double>(v);
}

std::string HelpText(const std::string& usage, const std::string& summary, const std::vector<FlagSpec>& specs) {
  const size_t text = summary.find_first_not_of('\n');  // a raw string may start on its own line
  std::string s = "Usage: moeedb " + usage + "\n\n" + (text == std::string::npos ? "" : summary.substr(text)) +
                  "\n\nOptions:\n";
  for (const auto& f : specs) {
    std::string left = "  --" + f.name + (f.meta.empty() ? "" : " " + f.meta);
    if (left.size() < 26) left.resize(26, ' ');
    else left += "\n" + std::string(26, ' ');
    std::string help = f.help;
    if (f.integer && help.find("default") == std::string::npos) {
      const std::string d = "default " + std::to_string(f.integer->def);
      if (!help.empty() && help.back() == ')') help.insert(help.size() - 1, "; " + d);  // into the help's own aside
      else help += " (" + d + ")";
    }
    s += left + help + "\n";
  }
  s += "  --help                  this text\n";
  return s;
}

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
