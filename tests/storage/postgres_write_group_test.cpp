// Concurrent writes of one PostgresStore to one collection commit in groups:
// while kWriteGroupsInFlight transactions of the collection are under way,
// the writes that arrive queue and go in one transaction, each with its own
// change-log entry. Arranged with a lock: another session holds the
// collection's row, so the first writes wait for it inside their
// transactions while the rest queue behind them.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "storage/postgres_store.h"
#include "storage/store.h"
#include "tests/storage/pg_test_db.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

StoredDocument Doc(const std::string& id, float x) {
  return {id, "text of " + id, json{{"id", id}}.dump(), {x, x + 0.25f, -x}, {x * 3.5f}};
}

class PostgresWriteGroup : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = test::OpenWithCollection(pg_.uri(), "c");
    ASSERT_TRUE(store_);
    ASSERT_TRUE(store_->Upsert("c", {Doc("kept", 1), Doc("gone", 2)}, true).ok());  // entry 1
    dynamic_cast<PostgresStore*>(store_.get())->SetCommitHookForTest([this](bool committed) {
      if (committed) ++commits_;
    });
  }
  // Runs `writes` side by side behind kWriteGroupsInFlight transactions that
  // wait for the collection's row, which another session holds: those
  // writes ("filler-N") take every slot, so `writes` queue as one group; once
  // they had time to queue the row is let go. The answers to `writes`, in order.
  std::vector<Result<WriteResult>> RunHeld(const std::vector<std::function<Result<WriteResult>()>>& writes) {
    pqxx::connection admin(pg_.uri());
    pqxx::work hold(admin);
    hold.exec("SELECT 1 FROM moeedb_collections WHERE name = 'c' FOR UPDATE");
    std::vector<std::future<Result<WriteResult>>> fillers, running;
    for (int i = 0; i < PostgresStore::kWriteGroupsInFlight; ++i)
      fillers.push_back(std::async(std::launch::async, [this, i] {
        return store_->Upsert("c", {Doc("filler-" + std::to_string(i), i)}, true);
      }));
    pqxx::connection watcher(pg_.uri());
    int waiting = 0;
    for (int i = 0; i < 1000 && waiting < PostgresStore::kWriteGroupsInFlight; ++i) {
      waiting = pqxx::nontransaction(watcher)
                    .exec("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
                          "wait_event_type = 'Lock'")[0][0]
                    .as<int>();
      if (waiting < PostgresStore::kWriteGroupsInFlight) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(waiting, PostgresStore::kWriteGroupsInFlight) << "every transaction in flight waits for the row";
    for (const auto& w : writes) running.push_back(std::async(std::launch::async, w));
    // A queued write only takes a mutex and joins a list: far less than this.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    hold.abort();
    for (auto& f : fillers) {
      auto r = f.get();
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (r.ok()) filler_answers_.push_back(*r);
    }
    std::vector<Result<WriteResult>> out;
    for (auto& r : running) out.push_back(r.get());
    return out;
  }
  // The change log replayed from the start equals the store's documents,
  // and each answered entry is the log's entry of that number.
  void ExpectLogReplaysToTheStore(const std::vector<Result<WriteResult>>& answers) {
    std::vector<OpRecord> ops;
    ASSERT_TRUE(store_->ReadOps("c", 0, [&](const OpRecord& op) { ops.push_back(op); }).ok());
    std::map<uint64_t, const WriteResult*> by_seq;
    for (const auto& a : answers)
      if (a.ok() && a->seq != 0) EXPECT_TRUE(by_seq.emplace(a->seq, &a.value()).second) << "entry " << a->seq << " twice";
    for (const auto& f : filler_answers_) EXPECT_TRUE(by_seq.emplace(f.seq, &f).second) << "entry " << f.seq << " twice";
    std::set<uint64_t> live;
    for (size_t i = 0; i < ops.size(); ++i) {
      ASSERT_EQ(ops[i].seq, i + 1);
      if (i > 0) {
        ASSERT_TRUE(by_seq.count(ops[i].seq)) << "entry " << ops[i].seq << " answered to no write";
        const WriteResult& w = *by_seq[ops[i].seq];
        EXPECT_EQ(w.added, ops[i].added);
        EXPECT_EQ(w.removed, ops[i].removed);
        EXPECT_EQ(w.entry_id, ops[i].entry_id);
        EXPECT_EQ(w.previous_entry_id, ops[i - 1].entry_id) << "entry " << ops[i].seq;
      }
      for (uint64_t id : ops[i].removed) EXPECT_EQ(live.erase(id), 1u) << "entry " << ops[i].seq;
      for (uint64_t id : ops[i].added) EXPECT_TRUE(live.insert(id).second) << "entry " << ops[i].seq;
    }
    EXPECT_EQ(ops.size(), by_seq.size() + 1);  // + the setup's entry
    std::set<uint64_t> stored;
    ASSERT_TRUE(store_->ScanMetadata("c", [&](uint64_t id, const std::string&) { stored.insert(id); }).ok());
    EXPECT_EQ(stored, live);
    EXPECT_EQ(store_->GetCollection("c")->count, live.size());
  }
  test::PgDatabase pg_;
  std::unique_ptr<Store> store_;
  std::atomic<int> commits_{0};
  std::vector<WriteResult> filler_answers_;
};

TEST_F(PostgresWriteGroup, QueuedWritesCommitTogetherEachWithItsOwnEntry) {
  std::vector<std::function<Result<WriteResult>()>> writes;
  for (int i = 0; i < 8; ++i)
    writes.push_back([this, i] { return store_->Upsert("c", {Doc("w" + std::to_string(i), i)}, true); });
  const auto answers = RunHeld(writes);
  for (const auto& a : answers) ASSERT_TRUE(a.ok()) << a.status().ToString();
  // The fillers' transactions, then one for the eight queued (a straggler
  // that queued after the group left would make one more).
  EXPECT_LE(commits_.load(), PostgresStore::kWriteGroupsInFlight + 2) << "the queued writes committed one by one";
  ExpectLogReplaysToTheStore(answers);
  for (int i = 0; i < 8; ++i) EXPECT_TRUE((*store_->Get("c", "w" + std::to_string(i))).has_value());
}

// Inside a group each write sees the ones before it: one that fails (a
// read-modify-write whose document changed) is answered alone and leaves
// nothing, the others commit; a delete of absent ids writes no entry; two
// writes of the same id leave the one the log puts last.
TEST_F(PostgresWriteGroup, AWriteThatFailsInAGroupLeavesTheOthersCommitted) {
  const uint64_t kept = **store_->InternalId("c", "kept");
  std::vector<std::function<Result<WriteResult>()>> writes = {
      [&] { return store_->Upsert("c", {Doc("first", 1)}, true); },
      [&] { return store_->Upsert("c", {Doc("second", 2)}, true); },
      [&] { return store_->UpsertIfUnchanged("c", {Doc("kept", 9)}, {kept + 1000}, true); },  // stale
      [&] { return store_->Upsert("c", {Doc("same", 3)}, true); },
      [&] { return store_->Upsert("c", {Doc("same", 4), Doc("other", 5)}, true); },
      [&] { return store_->Delete("c", {"never-there"}, true); },
      [&] { return store_->Delete("c", {"gone"}, true); },
  };
  const auto answers = RunHeld(writes);
  ASSERT_FALSE(answers[2].ok());
  EXPECT_EQ(answers[2].status().code(), Status::Code::kConflict) << answers[2].status().ToString();
  EXPECT_EQ(**store_->InternalId("c", "kept"), kept);
  for (size_t i : {0, 1, 3, 4, 5, 6}) ASSERT_TRUE(answers[i].ok()) << i << ": " << answers[i].status().ToString();
  EXPECT_EQ(answers[5]->seq, 0u);
  EXPECT_EQ(answers[5]->not_found, 1u);
  EXPECT_EQ(answers[6]->removed.size(), 1u);
  EXPECT_LE(commits_.load(), PostgresStore::kWriteGroupsInFlight + 2);
  ExpectLogReplaysToTheStore(answers);
  // "same": the write with the later entry holds it.
  const bool fourth_last = answers[4]->seq > answers[3]->seq;
  EXPECT_EQ((*store_->Get("c", "same"))->hs[0], fourth_last ? 4.0f : 3.0f);
  EXPECT_FALSE((*store_->Get("c", "gone")).has_value());
}

// An answer read inside a group's transaction (a delete finding its id gone
// because the write before it in the group deleted it) is given only once
// that transaction commits: here every COMMIT of the group fails before it
// reaches the server, so both deletes answer Unavailable and the document
// stays, where answering the second "not found" would have been false.
TEST_F(PostgresWriteGroup, AnswersReadInsideAGroupWaitForItsCommit) {
  // A group's leader (its first write's thread) runs its transaction, so
  // the commits to fail are told by thread: the fillers' commits, whose
  // order against the group's a busy machine may change, go through.
  static thread_local bool on_a_delete = false;
  static thread_local int commits_tried_here = 0;
  std::atomic<int> most_commits_one_thread_tried{0};
  dynamic_cast<PostgresStore*>(store_.get())->SetCommitHookForTest([&](bool committed) {
    if (!committed && on_a_delete) {
      const int n = ++commits_tried_here;
      for (int seen = most_commits_one_thread_tried.load(); n > seen;)
        most_commits_one_thread_tried.compare_exchange_weak(seen, n);
      throw pqxx::in_doubt_error("test: the connection was lost before COMMIT");
    }
  });
  const auto delete_kept = [&] {
    on_a_delete = true;
    return store_->Delete("c", {"kept"}, true);
  };
  const auto answers = RunHeld({delete_kept, delete_kept});
  for (const auto& a : answers) {
    ASSERT_FALSE(a.ok()) << "answered " << a->removed.size() << " removed, " << a->not_found << " not found";
    EXPECT_EQ(a.status().code(), Status::Code::kUnavailable) << a.status().ToString();
  }
  EXPECT_TRUE((*store_->Get("c", "kept")).has_value());
  EXPECT_GT(most_commits_one_thread_tried.load(), 1);  // a group's leader tried its COMMIT again
  dynamic_cast<PostgresStore*>(store_.get())->SetCommitHookForTest(nullptr);
}

// Ids that no text column can hold are refused before any write is queued
// (one in a group would fail the statements of every write beside it).
TEST_F(PostgresWriteGroup, IdsThatAreNotTextAreRefusedUpFront) {
  const std::string nul("a\0b", 3), bad_utf8 = "a\xff";
  for (const std::string& id : {nul, bad_utf8}) {
    auto up = store_->Upsert("c", {{id, "text", "{}", {1, 2, 3}, {4}}}, true);
    EXPECT_EQ(up.status().code(), Status::Code::kInvalidArgument) << up.status().ToString();
    auto del = store_->Delete("c", {"kept", id}, true);
    EXPECT_EQ(del.status().code(), Status::Code::kInvalidArgument) << del.status().ToString();
  }
  EXPECT_TRUE((*store_->Get("c", "kept")).has_value());
  EXPECT_EQ(store_->GetCollection("c")->last_op, 1u);
}

}  // namespace
}  // namespace moeedb
