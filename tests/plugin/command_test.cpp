// The CLI's command table: a row selects by its words (the longest match), its
// help, parsing and required flags come from the row, a group word lists its
// rows, and an unknown word is a usage error naming the choices.
#include "plugin/cli/command.h"

#include <gtest/gtest.h>

#include <iostream>
#include <sstream>

namespace moeedb::cli {
namespace {

// What the last row run saw.
std::string g_ran;
std::vector<std::string> g_positional;
long long g_n = 0;

int RunA(const Args& a) {
  g_ran = "lens";
  g_positional = a.positional();
  return 0;
}
int RunB(const Args& a) {
  g_ran = "lens specialise";
  g_n = a.Int("n");
  return 0;
}
int RunC(const Args&) {
  g_ran = "model init";
  return 7;
}

const std::vector<Command> kTable = {
    {"lens", "the lens", "lens [TEXT]", "Runs the lens.", {}, RunA},
    {"lens specialise", "experts per domain", "lens specialise --n N", "Specialises.",
     {{"n", "N", "how many", IntRule{3, 1, 9}}}, RunB},
    {"model init", "a new model", "model init --out DIR", "Writes a model.", {{"out", "DIR", "folder"}}, RunC, {"out"}},
    {"model info", "a model's facts", "model info", "Describes a model.", {}, RunA},
};

// Runs argv with stdout and stderr captured.
struct Ran {
  int code;
  std::string out, err;
};
Ran RunLine(const std::vector<std::string>& argv) {
  std::ostringstream out, err;
  auto* old_out = std::cout.rdbuf(out.rdbuf());
  auto* old_err = std::cerr.rdbuf(err.rdbuf());
  g_ran.clear();
  const int code = RunCommandLine(kTable, argv);
  std::cout.rdbuf(old_out);
  std::cerr.rdbuf(old_err);
  return {code, out.str(), err.str()};
}

TEST(CommandTable, TheLongestMatchingRowRunsOnTheRestOfTheArguments) {
  auto r = RunLine({"lens", "specialise", "--n", "5"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(g_ran, "lens specialise");
  EXPECT_EQ(g_n, 5);
  r = RunLine({"lens", "hello"});
  EXPECT_EQ(g_ran, "lens");
  EXPECT_EQ(g_positional, std::vector<std::string>{"hello"});
  r = RunLine({"model", "init", "--out", "x"});
  EXPECT_EQ(r.code, 7);  // the row's own exit code
}

TEST(CommandTable, HelpAndErrorsComeFromTheRow) {
  auto r = RunLine({"lens", "specialise", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(g_ran.empty());
  EXPECT_NE(r.out.find("Usage: moeedb lens specialise --n N"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Specialises."), std::string::npos);
  EXPECT_NE(r.out.find("how many (default 3)"), std::string::npos) << r.out;
  r = RunLine({"lens", "specialise", "--n", "10"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(g_ran.empty());
  EXPECT_NE(r.err.find("moeedb lens specialise: option --n must be in [1, 9]"), std::string::npos) << r.err;
  r = RunLine({"model", "init"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(g_ran.empty());
  EXPECT_NE(r.err.find("moeedb model init: --out is required"), std::string::npos) << r.err;
  r = RunLine({"model", "init", "--bogus", "1", "--out", "x"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown option --bogus"), std::string::npos) << r.err;
}

TEST(CommandTable, GroupsAndTheTopLevelListTheRows) {
  auto r = RunLine({});
  EXPECT_EQ(r.code, 2);
  for (const char* row : {"lens specialise", "model init", "model info"}) EXPECT_NE(r.out.find(row), std::string::npos);
  EXPECT_EQ(RunLine({"--help"}).code, 0);
  r = RunLine({"model"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("Usage: moeedb model init|info"), std::string::npos) << r.out;
  EXPECT_EQ(RunLine({"model", "--help"}).code, 0);
  r = RunLine({"model", "frob"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown subcommand 'frob' (init, info)"), std::string::npos) << r.err;
  r = RunLine({"frobnicate"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown command 'frobnicate'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace moeedb::cli
