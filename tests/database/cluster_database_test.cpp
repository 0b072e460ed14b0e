// Collections created and dropped on one node reach another node over the
// same PostgreSQL database: a collection created on A opens on B at its first
// use; one A drops is closed on B at B's next catch-up (not an error there),
// and the name, created again on A, opens on B as the new collection.
#include <gtest/gtest.h>

#include <filesystem>

#include "database/database.h"
#include "tests/storage/pg_test_db.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

CollectionOptions Flat() {
  CollectionOptions o;
  o.dim_hs = 4;
  o.dim_rw = 2;
  o.index.hs.kind = o.index.rw.kind = IndexKind::kFlat;
  return o;
}

StoredDocument Doc(const std::string& id, float x) { return {id, "text " + id, "{}", {x, 1, 0, 0}, {1, x}}; }

TEST(ClusterDatabase, ADropOnOneNodeClosesTheCollectionOnAnotherAndItsNameOpensAnew) {
  test::TempDir dir;
  test::PgDatabase pg;
  DatabaseOptions oa, ob;
  oa.index_dir = dir / "a";
  ob.index_dir = dir / "b";
  auto a = Database::Open(pg.uri(), oa);
  auto b = Database::Open(pg.uri(), ob);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
  auto ca = (*a)->CreateCollection("c", Flat());
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  ASSERT_TRUE((*ca)->Upsert({Doc("x1", 0.5f)}).ok());
  // Created on A: B opens it at its first use, from the store.
  auto cb = (*b)->OpenCollection("c");
  ASSERT_TRUE(cb.ok()) << cb.status().ToString();
  EXPECT_EQ((*cb)->size(), 1u);
  const uint32_t old_id = (*cb)->store_id();
  // Dropped on A: B's catch-up closes its copy instead of failing on it.
  ASSERT_TRUE((*a)->DropCollection("c").ok());
  auto n = (*b)->CatchUp();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ((*b)->OpenCollection("c").status().code(), Status::Code::kNotFound);
  // Created again on A with other documents: B opens the new one.
  auto again = (*a)->CreateCollection("c", Flat());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_TRUE((*again)->Upsert({Doc("y1", 0.25f), Doc("y2", 0.75f)}).ok());
  auto cb2 = (*b)->OpenCollection("c");
  ASSERT_TRUE(cb2.ok()) << cb2.status().ToString();
  EXPECT_NE((*cb2)->store_id(), old_id);
  EXPECT_EQ((*cb2)->size(), 2u);
  EXPECT_FALSE((*(*cb2)->Get("x1")).has_value());
  EXPECT_TRUE((*(*cb2)->Get("y2")).has_value());
  // A collection dropped and created again between two catch-ups: same name,
  // a new store id, so B's copy is replaced, not followed into the wrong log.
  ASSERT_TRUE((*a)->DropCollection("c").ok());
  auto third = (*a)->CreateCollection("c", Flat());
  ASSERT_TRUE(third.ok());
  ASSERT_TRUE((*third)->Upsert({Doc("z1", 0.1f)}).ok());
  ASSERT_TRUE((*b)->CatchUp().ok());
  auto cb3 = (*b)->OpenCollection("c");
  ASSERT_TRUE(cb3.ok());
  EXPECT_EQ((*cb3)->size(), 1u);
  EXPECT_TRUE((*(*cb3)->Get("z1")).has_value());
  EXPECT_NE((*cb3)->index_dir(), (*cb2)->index_dir());
}

}  // namespace
}  // namespace moeedb
