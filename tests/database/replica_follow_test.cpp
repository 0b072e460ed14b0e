// A replica keeps answering while it reads a backlog of the change log or
// rebuilds (database/shard_replica.h): over a store whose document reads and
// scans park at a gate the test opens, a search of the replica answers while
// a catch-up is parked there (from what the replica held before it); a
// rebuild after the log went back refuses searches while it runs (what the
// replica held names documents the log no longer vouches for), and puts the
// dense and lexical indexes in place together. While the log cannot be read
// (no primary), a replica past its staleness bound stays fresh only if the
// log's head is the very entry it applied, not just the same number.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "database/shard_replica.h"
#include "database/vector_collection.h"
#include "storage/rocksdb_store.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

constexpr size_t kDh = 16, kDr = 8;

// Forwards to a store; while armed, reads of documents and scans wait until
// the test releases them. `shared` and `rewound` let a local store pass for a
// shared one whose change log went back (every entry another identity).
class GatedStore : public Store {
 public:
  explicit GatedStore(Store* inner) : inner_(inner) {}
  void Arm() {
    std::lock_guard lock(mu_);
    armed_ = true;
    parked_ = false;
  }
  // Waits until a read parks at the gate; false after a minute without one.
  bool WaitParked() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::minutes(1), [&] { return parked_; });
  }
  void Release() {
    std::lock_guard lock(mu_);
    armed_ = false;
    cv_.notify_all();
  }
  bool shared_ = false, rewound_ = false;
  bool log_unreadable_ = false;          // ReadOps answers Unavailable (no primary)
  std::optional<std::string> head_entry_;  // GetLogHead names this entry instead
  // The synchronous standby (ReadOpsFromStandby): none (NotSupported), or one
  // that has received the log up to standby_head_, its entries renamed when
  // standby_rewound_ (it holds other entries under those numbers).
  bool has_standby_ = false, standby_rewound_ = false;
  uint64_t standby_head_ = UINT64_MAX;
  // Reads of the change log, the most entries one of them gave, reads of documents.
  mutable std::atomic<size_t> log_reads_{0}, largest_page_{0}, document_reads_{0};

  Result<CollectionRecord> CreateCollection(const std::string& n, const std::string& s) override {
    return inner_->CreateCollection(n, s);
  }
  Result<CollectionRecord> GetCollection(const std::string& n) const override { return inner_->GetCollection(n); }
  Result<std::vector<CollectionRecord>> ListCollections() const override { return inner_->ListCollections(); }
  Status DropCollection(const std::string& n) override { return inner_->DropCollection(n); }
  Status UpdateSpec(const std::string& n, const std::string& e, const std::string& s) override {
    return inner_->UpdateSpec(n, e, s);
  }
  Result<std::map<std::string, std::string>> ListAliases() const override { return inner_->ListAliases(); }
  Status UpdateAliases(const std::map<std::string, std::string>& e, const std::map<std::string, std::string>& a) override {
    return inner_->UpdateAliases(e, a);
  }
  Result<WriteResult> Upsert(const std::string& c, const std::vector<StoredDocument>& d, bool sync) override {
    return inner_->Upsert(c, d, sync);
  }
  Result<WriteResult> UpsertIfUnchanged(const std::string& c, const std::vector<StoredDocument>& d,
                                        const std::vector<uint64_t>& e, bool sync) override {
    return inner_->UpsertIfUnchanged(c, d, e, sync);
  }
  Result<WriteResult> Delete(const std::string& c, const std::vector<std::string>& ids, bool sync) override {
    return inner_->Delete(c, ids, sync);
  }
  Result<std::optional<uint64_t>> InternalId(const std::string& c, const std::string& id) const override {
    return inner_->InternalId(c, id);
  }
  Result<std::optional<StoredDocument>> Get(const std::string& c, const std::string& id) const override {
    return inner_->Get(c, id);
  }
  Result<StoredDocument> GetByInternal(const std::string& c, uint64_t id, bool v) const override {
    return inner_->GetByInternal(c, id, v);
  }
  Result<std::vector<std::optional<StoredDocument>>> GetManyByInternal(const std::string& c,
                                                                       const std::vector<uint64_t>& ids, bool v,
                                                                       const ShardFilter& f) const override {
    Park();
    ++document_reads_;
    return inner_->GetManyByInternal(c, ids, v, f);
  }
  Result<DocumentPage> ListDocuments(const std::string& c, const std::string& after, size_t limit) const override {
    return inner_->ListDocuments(c, after, limit);
  }
  Status ScanVectors(const std::string& c,
                     const std::function<void(uint64_t, const float*, size_t, const float*, size_t,
                                              const std::string&)>& fn,
                     const ShardFilter& f) const override {
    Park();
    return inner_->ScanVectors(c, fn, f);
  }
  Status ScanMetadata(const std::string& c, const std::function<void(uint64_t, const std::string&)>& fn,
                      const ShardFilter& f) const override {
    Park();
    return inner_->ScanMetadata(c, fn, f);
  }
  using Store::ReadOps;
  Status ReadOps(const std::string& c, uint64_t after, size_t limit,
                 const std::function<void(const OpRecord&)>& fn) const override {
    if (log_unreadable_) return Status::Unavailable("no primary answers");
    size_t page = 0;
    Status s = inner_->ReadOps(c, after, limit, [&](const OpRecord& op) {
      ++page;
      if (!rewound_) return fn(op);
      OpRecord other = op;
      other.entry_id = "after-the-rewind-" + std::to_string(op.seq);
      fn(other);
    });
    ++log_reads_;
    if (page > largest_page_) largest_page_ = page;  // one reader at a time here
    return s;
  }
  using Store::ReadOpsFromStandby;
  Status ReadOpsFromStandby(const std::string& c, uint64_t after, size_t limit,
                            const std::function<void(const OpRecord&)>& fn) const override {
    if (!has_standby_) return Store::ReadOpsFromStandby(c, after, limit, fn);
    return inner_->ReadOps(c, after, limit, [&](const OpRecord& op) {
      if (op.seq > standby_head_) return;
      OpRecord seen = op;
      if (standby_rewound_) seen.entry_id = "only-on-the-standby-" + std::to_string(op.seq);
      fn(seen);
    });
  }
  Status TrimOps(const std::string& c, uint64_t upto) override { return inner_->TrimOps(c, upto); }
  Status Checkpoint(const std::string& dir) const override { return inner_->Checkpoint(dir); }
  std::string location() const override { return inner_->location(); }
  Result<LogHead> GetLogHead(const std::string& c) const override {
    MOEEDB_ASSIGN_OR_RETURN(LogHead head, inner_->GetLogHead(c));
    if (head_entry_) head.entry_id = *head_entry_;
    return head;
  }
  bool shared() const override { return shared_; }

 private:
  void Park() const {
    std::unique_lock lock(mu_);
    if (!armed_) return;
    parked_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !armed_; });
  }
  Store* inner_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool armed_ = false;
  mutable bool parked_ = false;
};

std::vector<float> Gaussian(std::mt19937_64& rng, size_t dim) {
  std::normal_distribution<float> n;
  std::vector<float> v(dim);
  for (auto& x : v) x = n(rng);
  return v;
}

std::vector<StoredDocument> Documents(size_t from, size_t n, const std::string& word) {
  std::mt19937_64 rng(from);
  std::vector<StoredDocument> docs;
  for (size_t i = from; i < from + n; ++i)
    docs.push_back({"doc-" + std::to_string(i), "document " + std::to_string(i) + " about " + word, "{}",
                    Gaussian(rng, kDh), Gaussian(rng, kDr)});
  return docs;
}

ShardQuery Query(const CollectionLayout& layout, QueryMode mode, const std::string& text = "") {
  std::mt19937_64 rng(7);
  ShardQuery q;
  q.collection = layout.name;
  q.store_id = layout.store_id;
  q.hs = Gaussian(rng, kDh);
  q.rw = Gaussian(rng, kDr);
  q.spec.k = 10;
  q.spec.mode = mode;
  q.spec.query = text;
  q.spec.exact = true;
  return q;
}

class ReplicaFollow : public ::testing::Test {
 protected:
  void SetUp() override {
    auto rocks = RocksStore::Open(dir_ / "store");
    ASSERT_TRUE(rocks.ok()) << rocks.status().ToString();
    rocks_ = std::move(rocks).value();
    CollectionOptions o;
    o.dim_hs = kDh;
    o.dim_rw = kDr;
    ASSERT_TRUE(VectorCollection::Create(rocks_.get(), "c", o, dir_ / "collection").ok());
    auto rec = rocks_->GetCollection("c");
    ASSERT_TRUE(rec.ok());
    auto layout = CollectionLayout::FromRecord(*rec);
    ASSERT_TRUE(layout.ok());
    layout_ = *layout;
    gated_ = std::make_unique<GatedStore>(rocks_.get());
    auto r = ShardReplica::Open(gated_.get(), layout_, 0, dir_ / "replica");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    replica_ = std::move(r).value();
    // 100 documents the replica follows as this node's own write.
    const auto docs = Documents(0, 100, "apples");
    auto w = rocks_->Upsert("c", docs, true);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(replica_->FollowOwnWrite(*w, &docs).ok());
    ASSERT_EQ(replica_->applied_seq(), 1u);
  }

  // Runs `fn` beside a parked catch-up; gives up (releasing the gate) after
  // a minute, so a search that waits for the catch-up fails the test rather
  // than hanging it.
  template <typename Fn>
  auto BesideTheParkedCatchUp(Fn fn) {
    auto f = std::async(std::launch::async, fn);
    if (f.wait_for(std::chrono::minutes(1)) != std::future_status::ready) {
      ADD_FAILURE() << "the search waited for the catch-up";
      gated_->Release();
    }
    return f.get();
  }

  test::TempDir dir_;
  std::unique_ptr<RocksStore> rocks_;
  std::unique_ptr<GatedStore> gated_;
  CollectionLayout layout_;
  std::unique_ptr<ShardReplica> replica_;
};

TEST_F(ReplicaFollow, ASearchIsAnsweredWhileTheReplicaReadsABacklog) {
  // Three entries other nodes wrote: a backlog the replica has not read.
  for (size_t k = 0; k < 3; ++k) ASSERT_TRUE(rocks_->Upsert("c", Documents(100 + 100 * k, 100, "pears"), true).ok());
  gated_->Arm();
  Result<size_t> caught = size_t{0};
  std::thread follower([&] { caught = replica_->CatchUp(); });
  ASSERT_TRUE(gated_->WaitParked()) << "the catch-up never read the documents";

  auto answer = BesideTheParkedCatchUp([&] { return replica_->Answer(Query(layout_, QueryMode::kFused)); });
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(answer->applied_seq, 1u);  // what it held before the backlog
  EXPECT_EQ(answer->hits.size(), 10u);
  auto words = BesideTheParkedCatchUp([&] { return replica_->Answer(Query(layout_, QueryMode::kLexical, "pears")); });
  ASSERT_TRUE(words.ok()) << words.status().ToString();
  EXPECT_TRUE(words->hits.empty());  // none of the backlog yet

  gated_->Release();
  follower.join();
  ASSERT_TRUE(caught.ok()) << caught.status().ToString();
  EXPECT_EQ(*caught, 3u);
  EXPECT_EQ(replica_->applied_seq(), 4u);
  EXPECT_EQ(replica_->size(), 400u);
  words = replica_->Answer(Query(layout_, QueryMode::kLexical, "pears"));
  ASSERT_TRUE(words.ok());
  EXPECT_EQ(words->hits.size(), 10u);
}

// A replica far behind reads the log a page at a time (holding one page of
// entries, not its whole backlog) and each batch of entries' documents in
// one read of the store, not one per entry; what it ends with is the store.
TEST_F(ReplicaFollow, ABacklogOfSeveralPagesIsReadAPageAtATimeWithOneDocumentReadPerBatch) {
  gated_->shared_ = true;  // the log's identities checked on every page, as over PostgreSQL
  // Three pages' worth of entries past the one applied: new documents,
  // replacements of earlier ones (the first 100's too), and deletes.
  const uint64_t target = 1 + ShardReplica::kLogPageEntries * 2 + 37;
  for (size_t i = 0; rocks_->GetCollection("c")->last_op < target; ++i) {
    if (i % 7 == 3) ASSERT_TRUE(rocks_->Delete("c", {"doc-" + std::to_string(i / 2)}, false).ok());
    else ASSERT_TRUE(rocks_->Upsert("c", Documents(i % 5 == 0 ? i / 3 : 100 + i, 1, "pears"), false).ok());
  }
  const CollectionRecord head = *rocks_->GetCollection("c");
  const size_t entries = head.last_op - 1;
  gated_->log_reads_ = 0;
  gated_->largest_page_ = 0;
  gated_->document_reads_ = 0;
  auto caught = replica_->CatchUp();
  ASSERT_TRUE(caught.ok()) << caught.status().ToString();
  EXPECT_EQ(replica_->applied_seq(), head.last_op);
  EXPECT_EQ(*caught, entries);
  EXPECT_EQ(replica_->size(), head.count);
  EXPECT_GE(gated_->log_reads_.load(), 3u);
  EXPECT_LE(gated_->largest_page_.load(), ShardReplica::kLogPageEntries);
  EXPECT_LE(gated_->document_reads_.load(), entries / ShardReplica::kReplayBatchEntries + 3 * 2);
  // The indexes hold exactly the store's documents.
  std::vector<uint64_t> stored;
  ASSERT_TRUE(rocks_->ScanMetadata("c", [&](uint64_t id, const std::string&) { stored.push_back(id); }, ShardFilter())
                  .ok());
  std::vector<uint64_t> indexed = replica_->IndexedIds();
  std::sort(indexed.begin(), indexed.end());
  EXPECT_EQ(indexed, stored);
  // Caught up: the next catch-up reads one page, the entry it applied last.
  gated_->log_reads_ = 0;
  ASSERT_TRUE(replica_->CatchUp().ok());
  EXPECT_EQ(gated_->log_reads_.load(), 1u);
}

TEST_F(ReplicaFollow, ARebuildRefusesSearchesUntilBothIndexesAreInPlace) {
  ASSERT_TRUE(rocks_->Upsert("c", Documents(100, 50, "pears"), true).ok());
  // The log went back under the replica: every entry is another one now.
  gated_->shared_ = true;
  gated_->rewound_ = true;
  gated_->Arm();
  Result<size_t> caught = size_t{0};
  std::thread follower([&] { caught = replica_->CatchUp(); });
  ASSERT_TRUE(gated_->WaitParked()) << "the rebuild never scanned the store";
  EXPECT_TRUE(replica_->building());

  for (QueryMode mode : {QueryMode::kFused, QueryMode::kLexical}) {
    auto answer = BesideTheParkedCatchUp([&] { return replica_->Answer(Query(layout_, mode, "apples")); });
    EXPECT_EQ(answer.status().code(), Status::Code::kUnavailable) << kQueryModes.Name(mode);
    EXPECT_NE(answer.status().message().find("being rebuilt"), std::string::npos) << answer.status().ToString();
  }

  gated_->Release();
  follower.join();
  ASSERT_TRUE(caught.ok()) << caught.status().ToString();
  EXPECT_FALSE(replica_->building());
  EXPECT_EQ(replica_->log_rewinds(), 1u);
  EXPECT_EQ(replica_->size(), 150u);
  EXPECT_EQ(replica_->LexicalIds().size(), 150u);
  auto words = replica_->Answer(Query(layout_, QueryMode::kLexical, "pears"));
  ASSERT_TRUE(words.ok()) << words.status().ToString();
  EXPECT_EQ(words->hits.size(), 10u);
  for (const auto& h : words->hits) EXPECT_GT(h.id, 0u);
  // Caught up: the next catch-up finds its entry and applies nothing.
  auto again = replica_->CatchUp();
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, 0u);
  EXPECT_EQ(replica_->log_rewinds(), 1u);
}

TEST_F(ReplicaFollow, WhileTheLogCannotBeReadItIsFreshOnlyIfTheHeadIsTheEntryItApplied) {
  constexpr uint64_t kBound = 1000;  // ms
  gated_->shared_ = true;
  gated_->log_unreadable_ = true;
  // The head has the replica's number but is another entry (the replica read
  // one from an old primary that was never acknowledged): not fresh.
  gated_->head_entry_ = "an-entry-this-replica-never-applied";
  std::this_thread::sleep_for(std::chrono::milliseconds(kBound + 100));
  Status s = replica_->WithinStaleness(kBound);
  EXPECT_EQ(s.code(), Status::Code::kUnavailable) << s.ToString();
  EXPECT_EQ(replica_->Answer([&] {
              ShardQuery q = Query(layout_, QueryMode::kFused);
              q.max_staleness_ms = kBound;
              return q;
            }()).status().code(),
            Status::Code::kUnavailable);
  // The head is the entry it applied: nothing acknowledged since, fresh.
  gated_->head_entry_.reset();
  s = replica_->WithinStaleness(kBound);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_LT(replica_->log_read_age_ms(), kBound);
}

// While no primary answers (a failover), a replica behind follows the
// synchronous standby's log, which the new primary will hold, as far as that
// log holds the entry the replica applied last; a standby behind the replica,
// or one holding another entry under its number, is not followed, and is no
// reason to rebuild (whether the log went back is the primary's to say).
TEST_F(ReplicaFollow, WhileNoPrimaryAnswersItFollowsTheStandbysLogOnlyPastItsOwnLastEntry) {
  constexpr uint64_t kBound = 1000;  // ms
  // Entries 2-4, written by other nodes before the primary died.
  for (size_t k = 0; k < 3; ++k) ASSERT_TRUE(rocks_->Upsert("c", Documents(100 + 100 * k, 10, "plums"), true).ok());
  gated_->shared_ = true;
  gated_->log_unreadable_ = true;
  gated_->has_standby_ = true;
  gated_->standby_head_ = 3;  // entry 4 had not reached it
  auto caught = replica_->CatchUp();
  ASSERT_TRUE(caught.ok()) << caught.status().ToString();
  EXPECT_EQ(*caught, 2u);
  EXPECT_EQ(replica_->applied_seq(), 3u);
  EXPECT_EQ(replica_->size(), 120u);
  std::this_thread::sleep_for(std::chrono::milliseconds(kBound + 100));
  EXPECT_TRUE(replica_->WithinStaleness(kBound).ok()) << "the standby's log is read again";
  EXPECT_LT(replica_->log_read_age_ms(), kBound);
  auto words = replica_->Answer(Query(layout_, QueryMode::kLexical, "plums"));
  ASSERT_TRUE(words.ok()) << words.status().ToString();
  EXPECT_EQ(words->hits.size(), 10u);

  // A standby behind the replica: not followed, not a rewind.
  gated_->standby_head_ = 2;
  std::this_thread::sleep_for(std::chrono::milliseconds(kBound + 100));
  EXPECT_EQ(replica_->WithinStaleness(kBound).code(), Status::Code::kUnavailable);
  EXPECT_EQ(replica_->applied_seq(), 3u);
  // One holding another entry under the replica's number: the same.
  gated_->standby_head_ = UINT64_MAX;
  gated_->standby_rewound_ = true;
  EXPECT_EQ(replica_->CatchUp().status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(replica_->applied_seq(), 3u);
  EXPECT_FALSE(replica_->building());
  EXPECT_EQ(replica_->log_rewinds(), 0u);

  // The primary back: the rest from it.
  gated_->log_unreadable_ = false;
  caught = replica_->CatchUp();
  ASSERT_TRUE(caught.ok()) << caught.status().ToString();
  EXPECT_EQ(replica_->applied_seq(), 4u);
  EXPECT_EQ(replica_->log_rewinds(), 0u);
}

}  // namespace
}  // namespace moeedb
