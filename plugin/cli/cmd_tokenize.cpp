// moeedb tokenize: one text per stdin line -> one line of space-separated ids.
#include <iostream>

#include "plugin/cli/args.h"
#include "plugin/cli/commands.h"
#include "plugin/cli/common.h"

namespace moeedb::cli {

int RunTokenize(const Args& args) {
  if (!args.positional().empty()) return UsageError("tokenize", "unexpected argument '" + args.positional()[0] + "'");
  auto tok = LoadTokenizer(args.Get("tokenizer"), args.Has("tokenizer") ? "" : ModelDirFlag(args));
  if (!tok.ok()) return Fail("tokenize", tok.status().message());
  const bool special = !args.Has("no-special");
  const auto lines = ReadLines(std::cin);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    auto ids = (*tok)->Encode(lines[i], special);
    if (!ids.ok()) return Fail("tokenize", "line " + std::to_string(i + 1) + ": " + ids.status().message());
    for (size_t k = 0; k < ids->size(); ++k) {
      if (k) out.push_back(' ');
      out += std::to_string((*ids)[k]);
    }
    out.push_back('\n');
  }
  std::cout << out << std::flush;
  return 0;
}

}  // namespace moeedb::cli
