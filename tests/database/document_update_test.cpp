// Document scans and metadata changes (database/document_scan.h,
// document_update.h): a scan keeps exactly what its filter, text test, ids,
// start, skip and limit say; each kind of change gives the metadata Qdrant
// gives; a change by ids with one id missing changes nothing; the text of a
// point whose text came from its payload follows the payload; vectors stay.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "database/client_vectors.h"
#include "database/document_scan.h"
#include "database/document_update.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

struct Env {
  test::TempDir dir;
  std::unique_ptr<Store> store;
  std::unique_ptr<VectorCollection> c;
  Env() {
    store = std::move(Store::Open(dir / "db")).value();
    VectorSchema schema;
    schema.kind = VectorKind::kPlain;
    schema.size = 2;
    schema.distance = Distance::kDot;
    c = std::move(VectorCollection::Create(store.get(), "c", *PlainCollectionOptions(schema))).value();
    std::vector<StoredDocument> docs;
    for (int i = 0; i < 30; ++i) {
      const json meta = {{"n", i}, {"even", i % 2 == 0}, {"content", "text " + std::to_string(i)}, {"deep", {{"x", i}}}};
      StoredDocument d{"d" + std::string(i < 10 ? "0" : "") + std::to_string(i), "", meta.dump(), {}, {}};
      ClientVector v;
      v.unnamed = {static_cast<float>(i), 1.0f};
      EXPECT_TRUE(ToStoredVectors(*c, v, &d).ok());
      d.text = PayloadText(c->schema(), meta);
      docs.push_back(std::move(d));
    }
    EXPECT_TRUE(c->Upsert(docs).ok());
  }
  json Meta(const std::string& id) { return json::parse((*c->Get(id))->metadata_json); }
};

std::vector<std::string> Ids(const ScanPage& p) {
  std::vector<std::string> out;
  for (const auto& d : p.documents) out.push_back(d.id);
  return out;
}

TEST(DocumentScan, KeepsWhatItsSpecSays) {
  Env env;
  ScanSpec even;
  even.filter = *MetadataFilter::Parse(R"({"even": true})");
  even.start = "d05";
  even.skip = 1;
  even.limit = 3;
  auto page = Scan(*env.c, even);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(Ids(*page), (std::vector<std::string>{"d08", "d10", "d12"}));  // d06 skipped
  EXPECT_EQ(page->next, "d14");
  ScanSpec texts;
  texts.text_test = [](const std::string& t) { return t.find("text 2") == 0; };
  EXPECT_EQ(*CountMatching(*env.c, texts), 11u);  // text 2, text 20..29
  ScanSpec ids;
  ids.ids = std::vector<std::string>{"d03", "nope", "d01"};
  EXPECT_EQ(Ids(*Scan(*env.c, ids)), (std::vector<std::string>{"d03", "d01"}));
  EXPECT_EQ(*CountMatching(*env.c, ScanSpec{}), 30u);
  ScanSpec last;
  last.start = "d28";
  EXPECT_EQ(Ids(*Scan(*env.c, last)), (std::vector<std::string>{"d28", "d29"}));
  EXPECT_EQ(Scan(*env.c, last)->next, "");
}

TEST(DocumentUpdate, EachChangeGivesQdrantsPayload) {
  Env env;
  const auto vectors_before = (*env.c->Get("d03"))->hs;
  ScanSpec one;
  one.ids = std::vector<std::string>{"d03"};
  MetadataChange set;
  set.values = {{"n", 100}, {"new", "yes"}};
  ASSERT_TRUE(ChangeMetadata(env.c.get(), one, set, true).ok());
  EXPECT_EQ(env.Meta("d03")["n"], 100);
  EXPECT_EQ(env.Meta("d03")["new"], "yes");
  EXPECT_EQ(env.Meta("d03")["even"], false);  // the rest kept
  MetadataChange nested;
  nested.values = {{"y", 1}};
  nested.at = "deep.inner";
  ASSERT_TRUE(ChangeMetadata(env.c.get(), one, nested, true).ok());
  EXPECT_EQ(env.Meta("d03")["deep"], (json{{"x", 3}, {"inner", {{"y", 1}}}}));
  MetadataChange del;
  del.kind = MetadataChange::Kind::kDeleteKeys;
  del.keys = {"new", "deep.x", "absent"};
  ASSERT_TRUE(ChangeMetadata(env.c.get(), one, del, true).ok());
  EXPECT_FALSE(env.Meta("d03").contains("new"));
  EXPECT_EQ(env.Meta("d03")["deep"], (json{{"inner", {{"y", 1}}}}));
  MetadataChange overwrite;
  overwrite.kind = MetadataChange::Kind::kOverwrite;
  overwrite.values = {{"content", "a new text"}};
  ASSERT_TRUE(ChangeMetadata(env.c.get(), one, overwrite, true).ok());
  EXPECT_EQ(env.Meta("d03"), (json{{"content", "a new text"}}));
  EXPECT_EQ((*env.c->Get("d03"))->text, "a new text");  // the text followed its payload
  EXPECT_EQ((*env.c->Get("d03"))->hs, vectors_before);  // the vectors stayed
  MetadataChange clear;
  clear.kind = MetadataChange::Kind::kClear;
  ASSERT_TRUE(ChangeMetadata(env.c.get(), one, clear, true).ok());
  EXPECT_EQ(env.Meta("d03"), json::object());
  EXPECT_EQ(env.c->size(), 30u);
}

TEST(DocumentUpdate, AMissingIdChangesNothingAndAFilterChangesWhatItKeeps) {
  Env env;
  ScanSpec ids;
  ids.ids = std::vector<std::string>{"d01", "missing"};
  MetadataChange set;
  set.values = {{"flag", true}};
  const uint64_t before = env.c->applied_seq();
  auto w = ChangeMetadata(env.c.get(), ids, set, true);
  EXPECT_EQ(w.status().code(), Status::Code::kNotFound);
  EXPECT_FALSE(env.Meta("d01").contains("flag"));
  EXPECT_EQ(env.c->applied_seq(), before);
  ScanSpec big;
  big.filter = *MetadataFilter::Parse(R"({"n": {"$gte": 25}})");
  auto bulk = ChangeMetadata(env.c.get(), big, set, true);
  ASSERT_TRUE(bulk.ok());
  EXPECT_EQ(bulk->added.size(), 5u);
  ScanSpec flagged;
  flagged.filter = *MetadataFilter::Parse(R"({"flag": true})");
  EXPECT_EQ(*CountMatching(*env.c, flagged), 5u);
  MetadataChange bad;
  bad.kind = MetadataChange::Kind::kDeleteKeys;
  bad.keys = {"a[].b"};
  EXPECT_EQ(ChangeMetadata(env.c.get(), big, bad, true).status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace moeedb
