// Crash safety: a child ingests with acknowledged (synced) writes and is
// killed with SIGKILL at random moments, 24 times. After each kill the parent
// reopens the database and checks: every acknowledged document is stored
// with its exact vectors and is in both indexes (found first for its own
// vectors); no batch is stored in part; no id outside what was written
// exists; ids are unique; and the docs, hs and rw records and the index hold the
// same id sets, and so does the lexical (BM25) index, which finds each
// acknowledged document by its number.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <random>
#include <set>
#include <sstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "database/vector_collection.h"
#include "tests/database/crash_writer.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

struct Child {
  pid_t pid = -1;
  int out = -1;
};

Child Spawn(const std::vector<std::string>& args) {
  int p[2];
  EXPECT_EQ(pipe(p), 0);
  Child c;
  c.pid = fork();
  if (c.pid == 0) {
    dup2(p[1], 1);
    close(p[0]);
    close(p[1]);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(p[1]);
  c.out = p[0];
  return c;
}

std::string ReadAll(int fd) {
  std::string s;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) s.append(buf, static_cast<size_t>(n));
  close(fd);
  return s;
}

TEST(CrashSafety, AcknowledgedWritesSurviveSigkill) {
  test::TempDir dir;
  const std::string db = dir / "db";
  std::mt19937 rng(2026);
  std::set<uint64_t> acked;           // batch starts acknowledged so far
  uint64_t next = 0;
  std::vector<std::pair<uint64_t, uint64_t>> attempted;  // [first, last] id ranges given to children
  int kills_mid_run = 0;
  for (int round = 0; round < 24; ++round) {
    const uint64_t first = next;
    const int batches = 400;
    next += static_cast<uint64_t>(batches) * crash::kBatch;
    attempted.push_back({first, next - 1});
    Child c = Spawn({MOEEDB_CRASH_WRITER, db, "c", std::to_string(first), std::to_string(batches)});
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(30, 400)(rng)));
    kill(c.pid, SIGKILL);
    int status = 0;
    waitpid(c.pid, &status, 0);
    if (WIFSIGNALED(status)) ++kills_mid_run;
    std::istringstream acks(ReadAll(c.out));
    std::string word;
    unsigned long long lo, hi;
    while (acks >> word >> lo >> hi) {
      ASSERT_EQ(word, "ack");
      ASSERT_EQ(hi - lo + 1, crash::kBatch);
      acked.insert(lo);
    }

    // Reopen and check everything.
    auto store = Store::Open(db);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto coll = VectorCollection::Open(store->get(), "c");
    if (!coll.ok() && acked.empty()) continue;  // killed before the collection existed
    ASSERT_TRUE(coll.ok()) << coll.status().ToString();
    std::map<uint64_t, std::string> stored;  // internal -> external
    std::set<std::string> external;
    std::map<uint64_t, int> per_batch;       // batch start -> documents stored
    ASSERT_TRUE((*store)->ScanVectors("c", [&](uint64_t internal, const float*, size_t dh, const float*, size_t dr,
                                               const std::string& meta) {
      EXPECT_EQ(dh, crash::kDimHs);
      EXPECT_EQ(dr, crash::kDimRw);
      auto m = nlohmann::json::parse(meta);
      per_batch[m["batch"].get<uint64_t>()]++;
      stored[internal] = "";
    }).ok());  // fails on any hs/rw/docs key disagreement
    for (auto& [internal, ext] : stored) {
      auto d = (*store)->GetByInternal("c", internal, false);
      ASSERT_TRUE(d.ok());
      ext = d->id;
      EXPECT_TRUE(external.insert(ext).second) << "duplicate id " << ext;
      const uint64_t k = std::stoull(ext.substr(1));
      bool in_range = false;
      for (auto [a, b] : attempted) in_range |= (k >= a && k <= b);
      EXPECT_TRUE(in_range) << "phantom id " << ext;
    }
    for (auto [batch, n] : per_batch) EXPECT_EQ(n, static_cast<int>(crash::kBatch)) << "partial batch " << batch;
    std::vector<uint64_t> store_ids;
    for (auto& [internal, ext] : stored) store_ids.push_back(internal);
    EXPECT_EQ((*coll)->IndexedIds(), store_ids) << "index and store disagree after round " << round;
    ASSERT_TRUE((*coll)->has_lexical());
    EXPECT_EQ((*coll)->LexicalIds(), store_ids) << "lexical index and store disagree after round " << round;
    // Every acknowledged document: stored with its exact vectors, found by both halves.
    size_t checked = 0;
    for (uint64_t lo_id : acked) {
      for (uint64_t k = lo_id; k < lo_id + crash::kBatch; k += 7) {
        auto d = (*coll)->Get(crash::IdOf(k));
        ASSERT_TRUE(d.ok());
        ASSERT_TRUE(d->has_value()) << "acknowledged " << crash::IdOf(k) << " lost in round " << round;
        EXPECT_EQ((*d)->hs, crash::VecOf(k, crash::kDimHs, 1));
        EXPECT_EQ((*d)->rw, crash::VecOf(k, crash::kDimRw, 2));
        if (++checked % 11 != 0) continue;
        SearchSpec lex;
        lex.k = 1;
        lex.mode = QueryMode::kLexical;
        lex.query = std::to_string(k);  // every text is "doc <k>": the number is its one rare word
        auto lhits = (*coll)->Search(nullptr, nullptr, lex);
        ASSERT_TRUE(lhits.ok()) << lhits.status().ToString();
        ASSERT_EQ(lhits->size(), 1u);
        EXPECT_EQ((*lhits)[0].id, crash::IdOf(k));
        for (auto mode : {QueryMode::kHs, QueryMode::kRw}) {  // each index on its own (rw: HNSW)
          SearchSpec so;
          so.k = 1;
          so.mode = mode;
          auto hits = (*coll)->Search((*d)->hs.data(), (*d)->rw.data(), so);
          ASSERT_TRUE(hits.ok());
          ASSERT_EQ(hits->size(), 1u);
          EXPECT_EQ((*hits)[0].id, crash::IdOf(k));
        }
      }
    }
  }
  EXPECT_GE(kills_mid_run, 20);
  EXPECT_GT(acked.size(), 50u);
  RecordProperty("acknowledged_batches", static_cast<int>(acked.size()));
}

}  // namespace
}  // namespace moeedb
