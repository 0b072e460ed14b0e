// The CLI's flag tables: an integer flag's default and range are declared
// once, with the flag, and every use (parsing, the error, the help) reads them.
#include "plugin/cli/args.h"

#include <gtest/gtest.h>

namespace moeedb::cli {
namespace {

const std::vector<FlagSpec> kFlags = {
    {"out", "DIR", "where to write"},
    {"batch", "N", "documents per write", IntRule{32, 1, 100000}},
    {"threads", "N", "compute threads (default: all cores)", IntRule{0, 0, 1024}},
    {"port", "N", "extra port (0: any free port)", IntRule{-1, 0, 65535}},
};

TEST(ArgsTest, IntegerFlagsReadTheirDeclaredDefaultAndValue) {
  auto a = Args::Parse({"--out", "x"}, kFlags);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->Int("batch"), 32);
  EXPECT_EQ(a->Int("port"), -1);  // a default outside the range means "absent"
  a = Args::Parse({"--batch", "100000", "--threads=3", "--port", "0"}, kFlags);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->Int("batch"), 100000);
  EXPECT_EQ(a->Int("threads"), 3);
  EXPECT_EQ(a->Int("port"), 0);
}

TEST(ArgsTest, AValueOutsideTheRangeOrNotAnIntegerFailsTheParseNamingTheFlag) {
  auto a = Args::Parse({"--batch", "0"}, kFlags);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "option --batch must be in [1, 100000], got 0");
  a = Args::Parse({"--threads", "many"}, kFlags);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "option --threads needs an integer, got 'many'");
  a = Args::Parse({"--port", "-2"}, kFlags);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("--port"), std::string::npos);
}

TEST(ArgsTest, TheHelpShowsTheDeclaredDefaultUnlessItSaysWhatTheDefaultMeans) {
  const std::string help = HelpText("x", "does x", kFlags);
  EXPECT_NE(help.find("documents per write (default 32)\n"), std::string::npos) << help;
  EXPECT_NE(help.find("compute threads (default: all cores)\n"), std::string::npos) << help;
  EXPECT_NE(help.find("where to write\n"), std::string::npos) << help;
  EXPECT_NE(help.find("extra port (0: any free port; default -1)\n"), std::string::npos) << help;
}

}  // namespace
}  // namespace moeedb::cli
