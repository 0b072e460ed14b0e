// The store on its own (storage/store.h): the key layout its header
// documents, read back with RocksDB itself; atomic batches (a bad document
// stores nothing, counters and op log included); replacement and deletion
// in the op log; paging from one snapshot; a checkpoint that opens with the
// same contents.
#include <gtest/gtest.h>

#include <rocksdb/db.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "storage/store.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

StoredDocument Doc(const std::string& id, float x, size_t dh = 3, size_t dr = 2) {
  return {id, "text of " + id, json{{"id", id}}.dump(), std::vector<float>(dh, x), std::vector<float>(dr, -x)};
}

std::string BigEndian(uint64_t v, int bytes) {
  std::string s(bytes, '\0');
  for (int i = bytes - 1; i >= 0; --i, v >>= 8) s[i] = static_cast<char>(v & 0xff);
  return s;
}

// A store's RocksDB database opened directly, with every column family.
struct RawRocks {
  std::vector<std::string> families;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  std::unique_ptr<rocksdb::DB> db;
  rocksdb::Status status;
  RawRocks(const std::string& path, bool read_only) {
    status = rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &families);
    if (!status.ok()) return;
    std::vector<rocksdb::ColumnFamilyDescriptor> desc;
    for (const auto& f : families) desc.emplace_back(f, rocksdb::ColumnFamilyOptions());
    rocksdb::DB* raw = nullptr;
    status = read_only ? rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), path, desc, &handles, &raw)
                       : rocksdb::DB::Open(rocksdb::DBOptions(), path, desc, &handles, &raw);
    db.reset(raw);
  }
  ~RawRocks() {
    if (db)
      for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  }
  rocksdb::ColumnFamilyHandle* family(const std::string& name) const {
    return handles[std::find(families.begin(), families.end(), name) - families.begin()];
  }
};

TEST(StoreTest, KeysAreLaidOutAsDocumented) {
  test::TempDir dir;
  uint32_t coll_id = 0;
  {
    auto store = Store::Open(dir / "db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto c = (*store)->CreateCollection("books", R"({"dim_hs": 3, "dim_rw": 2})");
    ASSERT_TRUE(c.ok());
    coll_id = c->id;
    ASSERT_TRUE((*store)->Upsert("books", {Doc("b", 1), Doc("a", 2)}, true).ok());
  }
  // Read the families with RocksDB directly.
  RawRocks rocks(dir / "db", /*read_only=*/true);
  ASSERT_TRUE(rocks.status.ok()) << rocks.status.ToString();
  for (const char* f : {"meta", "ids", "docs", "hs", "rw", "ops"})
    EXPECT_NE(std::find(rocks.families.begin(), rocks.families.end(), f), rocks.families.end()) << f;
  auto get = [&](const std::string& cf, const std::string& key) {
    std::string v;
    return rocks.db->Get(rocksdb::ReadOptions(), rocks.family(cf), key, &v).ok() ? std::optional<std::string>(v)
                                                                                : std::nullopt;
  };
  const std::string coll = BigEndian(coll_id, 4);
  auto meta = get("meta", "c/books");
  ASSERT_TRUE(meta.has_value());
  // Internal ids are given in input order: "b" is 1, "a" is 2, both ways.
  EXPECT_EQ(get("ids", coll + "k" + IdOrderKey("b")), BigEndian(1, 8));
  EXPECT_EQ(get("ids", coll + "i" + BigEndian(2, 8)), "a");
  auto doc = get("docs", coll + BigEndian(2, 8));
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(json::parse(*doc)["text"], "text of a");
  auto hs = get("hs", coll + BigEndian(2, 8));
  ASSERT_TRUE(hs.has_value());
  ASSERT_EQ(hs->size(), 3 * sizeof(float));
  float first = 0;
  std::memcpy(&first, hs->data(), sizeof(float));
  EXPECT_EQ(first, 2.0f);
  EXPECT_TRUE(get("ops", coll + BigEndian(1, 8)).has_value());
}

// A store written before IdOrderKey kept ids under 'e' + their bytes; Open
// moves them to 'k' + IdOrderKey, after which every id is found and the
// listing is in the new order.
TEST(StoreTest, OpenMovesIdKeysOfTheOldLayoutToListingOrder) {
  test::TempDir dir;
  const std::vector<std::string> ids = {"10", "7", "abc", "2"};
  uint32_t coll_id = 0;
  {
    auto store = Store::Open(dir / "db");
    ASSERT_TRUE(store.ok());
    auto c = (*store)->CreateCollection("c", R"({"dim_hs": 3, "dim_rw": 2})");
    ASSERT_TRUE(c.ok());
    coll_id = c->id;
    std::vector<StoredDocument> docs;
    for (size_t i = 0; i < ids.size(); ++i) docs.push_back(Doc(ids[i], static_cast<float>(i)));
    ASSERT_TRUE((*store)->Upsert("c", docs, true).ok());
  }
  {  // Rewrite the id keys as the old layout had them.
    RawRocks rocks(dir / "db", /*read_only=*/false);
    ASSERT_TRUE(rocks.status.ok()) << rocks.status.ToString();
    auto* db = rocks.db.get();
    auto* id_cf = rocks.family("ids");
    ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), rocks.family("meta"), "format/ids-in-listing-order").ok());  // as before the marker
    const std::string coll = BigEndian(coll_id, 4);
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), id_cf, coll + "k" + IdOrderKey(ids[i])).ok());
      ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), id_cf, coll + "e" + ids[i], BigEndian(i + 1, 8)).ok());
    }
  }
  auto store = Store::Open(dir / "db");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  for (size_t i = 0; i < ids.size(); ++i) {
    auto d = (*store)->Get("c", ids[i]);
    ASSERT_TRUE(d.ok() && d->has_value()) << ids[i];
    EXPECT_EQ((**d).hs[0], static_cast<float>(i));
  }
  auto page = (*store)->ListDocuments("c", "", 10);
  ASSERT_TRUE(page.ok());
  std::vector<std::string> listed;
  for (const auto& d : page->documents) listed.push_back(d.id);
  EXPECT_EQ(listed, (std::vector<std::string>{"2", "7", "10", "abc"}));
  // A replacement finds the moved key: still one document per id.
  ASSERT_TRUE((*store)->Upsert("c", {Doc("7", 9)}, true).ok());
  EXPECT_EQ((*store)->GetCollection("c")->count, ids.size());
}

TEST(StoreTest, ABatchIsAllOrNothing) {
  test::TempDir dir;
  auto store = Store::Open(dir / "db");
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->CreateCollection("c", R"({"dim_hs": 3, "dim_rw": 2})").ok());
  ASSERT_TRUE((*store)->Upsert("c", {Doc("x", 1)}, true).ok());
  const CollectionRecord before = *(*store)->GetCollection("c");
  // An empty id, a repeated id: each refuses the whole batch.
  for (auto batch : {std::vector<StoredDocument>{Doc("y", 1), Doc("", 1)},
                     std::vector<StoredDocument>{Doc("y", 1), Doc("y", 2)}}) {
    EXPECT_FALSE((*store)->Upsert("c", batch, true).ok());
    const CollectionRecord after = *(*store)->GetCollection("c");
    EXPECT_EQ(after.count, before.count);
    EXPECT_EQ(after.last_op, before.last_op);
    EXPECT_EQ(after.next_internal, before.next_internal);
    EXPECT_FALSE((*(*store)->Get("c", "y")).has_value());
  }
  EXPECT_EQ((*store)->Upsert("nope", {Doc("y", 1)}, true).status().code(), Status::Code::kNotFound);
}

TEST(StoreTest, ReplacementsAndDeletesGoToTheOpLogInOrder) {
  test::TempDir dir;
  auto store = Store::Open(dir / "db");
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->CreateCollection("c", R"({"dim_hs": 3, "dim_rw": 2})").ok());
  auto w1 = (*store)->Upsert("c", {Doc("a", 1), Doc("b", 2)}, true);
  auto w2 = (*store)->Upsert("c", {Doc("a", 3)}, true);  // a replacement: new internal id, old one removed
  auto w3 = (*store)->Delete("c", {"b", "missing"}, true);
  ASSERT_TRUE(w1.ok() && w2.ok() && w3.ok());
  EXPECT_EQ(w2->removed, w1->added.size() ? std::vector<uint64_t>{w1->added[0]} : std::vector<uint64_t>{});
  EXPECT_EQ(w3->not_found, 1u);
  std::vector<OpRecord> ops;
  ASSERT_TRUE((*store)->ReadOps("c", 0, [&](const OpRecord& op) { ops.push_back(op); }).ok());
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].seq, w1->seq);
  EXPECT_EQ(ops[1].seq, w2->seq);
  EXPECT_EQ(ops[2].seq, w3->seq);
  EXPECT_LT(ops[0].seq, ops[1].seq);
  EXPECT_EQ(ops[1].added, w2->added);
  EXPECT_EQ(ops[1].removed, w2->removed);
  EXPECT_EQ(ops[2].removed, std::vector<uint64_t>{w1->added[1]});
  auto a = (*store)->Get("c", "a");
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_EQ((**a).hs[0], 3.0f);
  EXPECT_EQ((*store)->GetCollection("c")->count, 1u);
  ASSERT_TRUE((*store)->TrimOps("c", w2->seq).ok());
  ops.clear();
  ASSERT_TRUE((*store)->ReadOps("c", 0, [&](const OpRecord& op) { ops.push_back(op); }).ok());
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].seq, w3->seq);
}

TEST(StoreTest, PagesAndACheckpointSeeOneConsistentState) {
  test::TempDir dir;
  auto store = Store::Open(dir / "db");
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->CreateCollection("c", R"({"dim_hs": 3, "dim_rw": 2})").ok());
  std::vector<StoredDocument> docs;
  for (int i = 0; i < 25; ++i) docs.push_back(Doc("d" + std::to_string(100 + i), static_cast<float>(i)));
  ASSERT_TRUE((*store)->Upsert("c", docs, true).ok());
  std::vector<std::string> seen;
  std::string after;
  do {
    auto page = (*store)->ListDocuments("c", after, 10);
    ASSERT_TRUE(page.ok());
    for (const auto& d : page->documents) seen.push_back(d.id);
    after = page->next_after;
  } while (!after.empty());
  ASSERT_EQ(seen.size(), 25u);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  ASSERT_TRUE((*store)->Checkpoint(dir / "copy").ok());
  EXPECT_FALSE((*store)->Checkpoint(dir / "copy").ok());  // the folder must not exist
  ASSERT_TRUE((*store)->Delete("c", {"d100"}, true).ok());  // after the checkpoint: not in the copy
  auto copy = Store::Open(dir / "copy");
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ((*copy)->GetCollection("c")->count, 25u);
  EXPECT_TRUE((*(*copy)->Get("c", "d100")).has_value());
  size_t scanned = 0;
  ASSERT_TRUE((*copy)->ScanVectors("c", [&](uint64_t, const float* hs, size_t dh, const float*, size_t dr, const std::string&) {
    EXPECT_EQ(dh, 3u);
    EXPECT_EQ(dr, 2u);
    EXPECT_TRUE(std::isfinite(hs[0]));
    ++scanned;
  }).ok());
  EXPECT_EQ(scanned, 25u);
}

}  // namespace
}  // namespace moeedb
