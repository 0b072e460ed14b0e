// The main job as a person would use it: the example documents ingested with
// the embedded default model and default settings (no --model, no flags),
// then 24 hand-written queries phrased in other words than their target
// documents (tests/data/paraphrase/queries.tsv), counting how many find their
// target in the top 3. The goal is 16 and the test holds it; the
// shipped model finds 21 (the margin is for other CPUs' rounding; a broken
// model finds 0-1, chance being 3/97 per query).
// Also: the default model is found with no --model, and the demo's showcase
// queries (examples/showcase_queries.tsv) find their documents.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/test_util.h"

namespace moeedb {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string RepoRoot() { return fs::path(test::DataDir()).parent_path().parent_path().string(); }

// examples/docs.jsonl into the collection "demo" of a new database at `db`,
// with the default model and settings, as the demo does.
void IngestExampleDocuments(const std::string& db) {
  auto r = test::Run({test::Binary(), "ingest", "--db", db, "--collection", "demo", RepoRoot() + "/examples/docs.jsonl"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

TEST(DefaultModel, IsFoundWithoutModelFlag) {
  auto r = test::Run({test::Binary(), "model", "info"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("folder: " + (fs::path(RepoRoot()) / "models" / "moeedb-tiny").string()), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("trained pooler"), std::string::npos) << r.out;
}

TEST(ParaphraseSearch, DefaultSetupFindsTargetsInTopThree) {
  test::TempDir t;
  const std::string db = t / "db";
  ASSERT_NO_FATAL_FAILURE(IngestExampleDocuments(db));
  std::istringstream in(test::ReadFile(test::Data("paraphrase/queries.tsv")));
  std::string line;
  std::getline(in, line);  // header
  int queries = 0, found = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::string target = line.substr(0, line.find('\t')), query = line.substr(line.find('\t') + 1);
    auto s = test::Run({test::Binary(), "search", "--db", db, "--collection", "demo", "--k", "3", query});
    ASSERT_EQ(s.exit_code, 0) << s.err;
    std::string got;
    bool hit = false;
    const json out = json::parse(s.out);  // a named object: the range below must not dangle
    for (const auto& h : out["hits"]) {
      got += h["id"].get<std::string>() + " ";
      hit = hit || h["id"] == target;
    }
    ++queries;
    found += hit;
    std::cout << (hit ? "  found  " : "  missed ") << target << " <- \"" << query << "\" (top 3: " << got << ")\n";
  }
  std::cout << found << " of " << queries << " queries found their target in the top 3\n";
  EXPECT_GE(queries, 20);
  EXPECT_GE(found, 16);
}

// The six queries scripts/demo.sh shows a new user, each with the document
// it means: at least the shipped model's count found first (5 of 6; "A puppy
// sprints through a meadow." ranks the cow in the meadow, animal8, first and
// misses the dog on the grass from its top 3; issue 51 asks for all six).
TEST(ParaphraseSearch, DemoShowcaseQueriesFindTheirDocuments) {
  test::TempDir t;
  const std::string db = t / "db";
  ASSERT_NO_FATAL_FAILURE(IngestExampleDocuments(db));
  std::istringstream in(test::ReadFile(RepoRoot() + "/examples/showcase_queries.tsv"));
  std::string line;
  std::getline(in, line);  // header: query, expected
  int queries = 0, first = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::string query = line.substr(0, line.find('\t')), expected = line.substr(line.find('\t') + 1);
    auto s = test::Run({test::Binary(), "search", "--db", db, "--collection", "demo", "--k", "3", query});
    ASSERT_EQ(s.exit_code, 0) << s.err;
    const json out = json::parse(s.out);
    std::vector<std::string> ids;
    for (const auto& h : out["hits"]) ids.push_back(h["id"].get<std::string>());
    ASSERT_FALSE(ids.empty()) << query;
    ++queries;
    first += ids[0] == expected;
    std::cout << (ids[0] == expected ? "  first  " : "  lower  ") << expected << " <- \"" << query << "\" (top: " << ids[0] << ")\n";
  }
  std::cout << first << " of " << queries << " showcase queries find their document first\n";
  EXPECT_EQ(queries, 6);
  EXPECT_GE(first, 5);
}

}  // namespace
}  // namespace moeedb
