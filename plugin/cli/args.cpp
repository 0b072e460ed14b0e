#include "plugin/cli/args.h"

#include <charconv>
#include <cmath>

namespace moeedb::cli {

Result<Args> Args::Parse(const std::vector<std::string>& argv, const std::vector<FlagSpec>& specs) {
  Args a;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& s = argv[i];
    if (s.size() < 3 || s.compare(0, 2, "--") != 0) {
      a.positional_.push_back(s);
      continue;
    }
    std::string name = s.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    const FlagSpec* spec = nullptr;
    for (const auto& f : specs)
      if (f.name == name) spec = &f;
    if (spec == nullptr) return Status::InvalidArgument("unknown option --" + name + " (see --help)");
    if (spec->meta.empty()) {
      if (has_value) return Status::InvalidArgument("option --" + name + " takes no value");
      a.values_[name] = "1";
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argv.size()) return Status::InvalidArgument("option --" + name + " needs a value " + spec->meta);
      value = argv[++i];
    }
    a.values_[name] = value;
  }
  return a;
}

std::string Args::Get(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second;
}

bool Args::ReadInt(const std::string& name, long long def, long long min, long long max, int64_t* out,
                   Status* error) const {
  auto v = GetInt(name, def, min, max);
  if (!v.ok()) {
    *error = v.status();
    return false;
  }
  *out = *v;
  return true;
}

Result<long long> Args::GetInt(const std::string& name, long long def, long long min, long long max) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  long long v = 0;
  const std::string& s = it->second;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size())
    return Status::InvalidArgument("option --" + name + " needs an integer, got '" + s + "'");
  if (v < min || v > max)
    return Status::InvalidArgument("option --" + name + " must be in [" + std::to_string(min) + ", " +
                                   std::to_string(max) + "], got " + s);
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
  std::string s = "Usage: moeedb " + usage + "\n\n" + summary + "\n\nOptions:\n";
  for (const auto& f : specs) {
    std::string left = "  --" + f.name + (f.meta.empty() ? "" : " " + f.meta);
    if (left.size() < 26) left.resize(26, ' ');
    else left += "\n" + std::string(26, ' ');
    s += left + f.help + "\n";
  }
  s += "  --help                  this text\n";
  return s;
}

}  // namespace moeedb::cli
