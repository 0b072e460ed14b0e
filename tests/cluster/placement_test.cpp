// Placement: the plan spreads replicas evenly and never puts a shard twice
// on a node, replaces dead nodes, lets a joining node take its share while
// the old owner serves until the new one is ready; and in etcd a placement
// changes only by a transaction on the revision its writer read: of two
// coordinators racing, exactly one wins, and a stale one is refused. A
// node's claims go with its lease.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cluster/cluster_status.h"
#include "cluster/cluster_view.h"
#include "cluster/etcd_client.h"
#include "cluster/membership.h"
#include "cluster/node_lock.h"
#include "cluster/placement.h"
#include "cluster/replica_holder.h"
#include "database/database.h"
#include "tests/database/held_shards_peers.h"

namespace moeedb::cluster {
namespace {

std::map<std::string, size_t> Loads(const Placement& p) {
  std::map<std::string, size_t> out;
  for (const auto& a : p.assigned)
    for (const auto& n : a) ++out[n];
  return out;
}

ReadyReplicas AllReady(const Placement& p) {
  ReadyReplicas r;
  for (uint32_t k = 0; k < p.shards; ++k)
    for (const auto& n : p.assigned[k]) r[ShardRef{p.shards, k}].insert(n);
  return r;
}

TEST(Plan, SpreadsSixShardsTimesTwoEvenlyOverThreeNodes) {
  std::map<std::string, size_t> load;
  const Placement p = Plan(std::nullopt, 7, 6, 2, {"n3", "n1", "n2"}, {}, &load);
  ASSERT_EQ(p.assigned.size(), 6u);
  for (const auto& a : p.assigned) {
    EXPECT_EQ(a.size(), 2u);
    EXPECT_NE(a[0], a[1]);  // never twice on one node
  }
  EXPECT_EQ(Loads(p), (std::map<std::string, size_t>{{"n1", 4}, {"n2", 4}, {"n3", 4}}));
  for (const auto& l : p.leaving) EXPECT_TRUE(l.empty());
  EXPECT_EQ(load, Loads(p));
  // Planned again with nothing changed: the same placement.
  std::map<std::string, size_t> again;
  EXPECT_EQ(Plan(p, 7, 6, 2, {"n1", "n2", "n3"}, AllReady(p), &again), p);
}

TEST(Plan, ADeadNodesReplicasGoToTheSurvivors) {
  std::map<std::string, size_t> load;
  const Placement p = Plan(std::nullopt, 7, 6, 2, {"n1", "n2", "n3"}, {}, &load);
  load.clear();
  const Placement q = Plan(p, 7, 6, 2, {"n1", "n3"}, AllReady(p), &load);
  for (uint32_t k = 0; k < 6; ++k) {
    EXPECT_EQ(q.assigned[k], (std::vector<std::string>{"n1", "n3"})) << k;
    // The survivor that held it keeps it (no needless rebuild).
    for (const auto& n : p.assigned[k])
      if (n != "n2") EXPECT_TRUE(std::count(q.assigned[k].begin(), q.assigned[k].end(), n)) << k;
  }
}

TEST(Plan, AJoiningNodeTakesItsShareWhileTheOldOwnersServeUntilItIsReady) {
  std::map<std::string, size_t> load;
  const Placement p = Plan(std::nullopt, 7, 6, 1, {"n1", "n2"}, {}, &load);
  load.clear();
  const Placement q = Plan(p, 7, 6, 1, {"n1", "n2", "n3"}, AllReady(p), &load);
  EXPECT_EQ(Loads(q), (std::map<std::string, size_t>{{"n1", 2}, {"n2", 2}, {"n3", 2}}));
  size_t moving = 0;
  for (uint32_t k = 0; k < 6; ++k)
    if (std::count(q.assigned[k].begin(), q.assigned[k].end(), "n3")) {
      ++moving;
      ASSERT_EQ(q.leaving[k].size(), 1u) << "the old owner serves shard " << k;
      EXPECT_EQ(q.leaving[k][0], p.assigned[k][0]);
      EXPECT_EQ(q.ShardsOf(p.assigned[k][0]).size(), 3u + (p.assigned[k][0] == "n1" ? 0 : 0));
    }
  EXPECT_EQ(moving, 2u);
  // n3 not ready yet: nothing changes; ready: the leaving owners let go.
  ReadyReplicas old_ready = AllReady(p);
  load.clear();
  EXPECT_EQ(Plan(q, 7, 6, 1, {"n1", "n2", "n3"}, old_ready, &load), q);
  load.clear();
  const Placement r = Plan(q, 7, 6, 1, {"n1", "n2", "n3"}, AllReady(q), &load);
  for (const auto& l : r.leaving) EXPECT_TRUE(l.empty());
  EXPECT_EQ(r.assigned, q.assigned);
}

TEST(Plan, ADrainingNodeServesUntilItsReplacementsAreReadyThenHoldsNothing) {
  std::map<std::string, size_t> load;
  const Placement p = Plan(std::nullopt, 7, 6, 2, {"n1", "n2", "n3", "n4"}, {}, &load);
  ASSERT_FALSE(p.ShardsOf("n2").empty());
  load.clear();
  const Placement q = Plan(p, 7, 6, 2, {"n1", "n2", "n3", "n4"}, AllReady(p), &load, {"n2"});
  for (uint32_t k = 0; k < 6; ++k) {
    EXPECT_EQ(q.assigned[k].size(), 2u);
    EXPECT_FALSE(std::count(q.assigned[k].begin(), q.assigned[k].end(), "n2")) << k;
    // Still serving what it held.
    if (std::count(p.assigned[k].begin(), p.assigned[k].end(), "n2"))
      EXPECT_EQ(q.leaving[k], std::vector<std::string>{"n2"}) << k;
  }
  EXPECT_EQ(q.ShardsOf("n2"), p.ShardsOf("n2"));
  load.clear();
  const Placement r = Plan(q, 7, 6, 2, {"n1", "n2", "n3", "n4"}, AllReady(q), &load, {"n2"});
  EXPECT_TRUE(r.ShardsOf("n2").empty());
  EXPECT_EQ(Loads(r), (std::map<std::string, size_t>{{"n1", 4}, {"n3", 4}, {"n4", 4}}));
}

TEST(Plan, FewerLiveNodesThanReplicasAssignsEachNodeOnce) {
  std::map<std::string, size_t> load;
  const Placement p = Plan(std::nullopt, 1, 3, 3, {"a", "b"}, {}, &load);
  for (const auto& a : p.assigned) EXPECT_EQ(a, (std::vector<std::string>{"a", "b"}));
}

TEST(Plan, AReshardBuildsTheNextSplitSwitchesOnceItIsReadyAndRetiresTheOldOneLater) {
  std::map<std::string, size_t> load;
  const std::vector<std::string> nodes{"n1", "n2", "n3"};
  const Placement p = Plan(std::nullopt, 7, 3, 2, nodes, {}, &load);
  Placement asked = p;
  asked.next = Placement::Split{6, std::vector<std::vector<std::string>>(6)};
  load.clear();
  const Placement q = Plan(asked, 7, 3, 2, nodes, AllReady(p), &load, {}, 1000);
  // The next split gets two nodes a shard, spread; the split in use is untouched.
  ASSERT_TRUE(q.next.has_value());
  EXPECT_EQ(q.shards, 3u);
  EXPECT_EQ(q.assigned, p.assigned);
  std::map<std::string, size_t> next_load;
  for (const auto& n : q.next->nodes) {
    ASSERT_EQ(n.size(), 2u);
    EXPECT_NE(n[0], n[1]);
    for (const auto& x : n) ++next_load[x];
  }
  EXPECT_EQ(next_load, (std::map<std::string, size_t>{{"n1", 4}, {"n2", 4}, {"n3", 4}}));
  // A node holds both splits' replicas meanwhile.
  EXPECT_EQ(q.ShardsOf("n1").size(), 2u + 4u);
  // All but one of the new shards ready: no switch.
  ReadyReplicas ready = AllReady(p);
  for (uint32_t k = 0; k < 6; ++k)
    for (const auto& n : q.next->nodes[k]) ready[ShardRef{6, k}].insert(n);
  ReadyReplicas almost = ready;
  almost.erase(ShardRef{6, 5});
  load.clear();
  EXPECT_EQ(Plan(q, 7, 3, 2, nodes, almost, &load, {}, 2000), q);
  // Every new shard ready: one plan switches, the old split retiring 10 s on.
  load.clear();
  const Placement r = Plan(q, 7, 3, 2, nodes, ready, &load, {}, 3000);
  EXPECT_EQ(r.shards, 6u);
  EXPECT_EQ(r.assigned, q.next->nodes);
  EXPECT_FALSE(r.next.has_value());
  ASSERT_TRUE(r.previous.has_value());
  EXPECT_EQ(r.previous->shards, 3u);
  EXPECT_EQ(r.previous->nodes, p.assigned);
  EXPECT_EQ(r.retire_at_ms, 3000 + kRetireSplitAfterMs);
  for (const auto& l : r.leaving) EXPECT_TRUE(l.empty());
  EXPECT_EQ(r.ShardsOf("n1"), q.ShardsOf("n1"));  // still serving the old split
  // Another reshard asked meanwhile is built but waits for the old split to retire.
  Placement again = r;
  again.next = Placement::Split{2, std::vector<std::vector<std::string>>(2)};
  load.clear();
  Placement s = Plan(again, 7, 3, 2, nodes, ready, &load, {}, 4000);
  ASSERT_TRUE(s.next.has_value());
  for (uint32_t k = 0; k < 2; ++k)
    for (const auto& n : s.next->nodes[k]) ready[ShardRef{2, k}].insert(n);
  load.clear();
  s = Plan(s, 7, 3, 2, nodes, ready, &load, {}, 5000);
  EXPECT_EQ(s.shards, 6u);
  EXPECT_EQ(s.previous->shards, 3u);
  // Retired at its time, the waiting split switches in the same plan.
  load.clear();
  const Placement t = Plan(s, 7, 3, 2, nodes, ready, &load, {}, 3000 + kRetireSplitAfterMs);
  EXPECT_EQ(t.shards, 2u);
  ASSERT_TRUE(t.previous.has_value());
  EXPECT_EQ(t.previous->shards, 6u);
  // A dead node leaves the next split too; its shards get a live node.
  Placement asked4 = t;
  asked4.previous.reset();
  asked4.next = Placement::Split{4, std::vector<std::vector<std::string>>(4)};
  load.clear();
  const Placement u = Plan(asked4, 7, 3, 2, nodes, {}, &load, {}, 0);
  load.clear();
  const Placement v = Plan(u, 7, 3, 2, {"n1", "n3"}, {}, &load, {}, 0);
  for (const auto& n : v.next->nodes) EXPECT_EQ(n, (std::vector<std::string>{"n1", "n3"}));
  // The placement's own split holds whatever the record says (it is updated after a switch).
  load.clear();
  EXPECT_EQ(Plan(t, 7, 3, 2, nodes, ready, &load, {}, 0).shards, 2u);
  // And the whole of it round-trips through JSON.
  auto back = Placement::FromJson(s.ToJson().dump());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);
}

TEST(Plan, AGoneNodeKeepsItsReplicasForTheDelayWhileOthersAnswerAndLosesThemAfter) {
  std::map<std::string, size_t> load;
  const std::vector<std::string> all{"n1", "n2", "n3"}, without{"n1", "n3"};
  const Placement p = Plan(std::nullopt, 7, 6, 2, all, {}, &load);
  const ReadyReplicas ready = AllReady(p);
  constexpr int64_t kDelay = 60000;
  // n2 gone at t = 1000: within the delay it stays assigned, nothing is built elsewhere.
  load.clear();
  const Placement q = Plan(p, 7, 6, 2, without, ready, &load, {}, 1000, kDelay);
  EXPECT_EQ(q.assigned, p.assigned);
  EXPECT_EQ(q.lost, (std::map<std::string, int64_t>{{"n2", 1000}}));
  EXPECT_EQ(q.ShardsOf("n2"), p.ShardsOf("n2"));
  load.clear();
  EXPECT_EQ(Plan(q, 7, 6, 2, without, ready, &load, {}, 1000 + kDelay - 1, kDelay), q);
  // Back within it: the same replicas, no longer lost.
  load.clear();
  EXPECT_EQ(Plan(q, 7, 6, 2, all, ready, &load, {}, 30000, kDelay), p);
  // Past it: its replicas go to the others, as with no delay.
  load.clear();
  const Placement r = Plan(q, 7, 6, 2, without, ready, &load, {}, 1000 + kDelay, kDelay);
  load.clear();
  const Placement at_once = Plan(p, 7, 6, 2, without, ready, &load);
  EXPECT_EQ(r.assigned, at_once.assigned);
  EXPECT_TRUE(r.lost.empty());
  EXPECT_TRUE(r.ShardsOf("n2").empty());
  // A shard with no other ready replica does not wait: of one replica per shard, n2's move at once.
  load.clear();
  const Placement single = Plan(std::nullopt, 7, 6, 1, all, {}, &load);
  load.clear();
  const Placement moved = Plan(single, 7, 6, 1, without, AllReady(single), &load, {}, 1000, kDelay);
  EXPECT_TRUE(moved.ShardsOf("n2").empty());
  for (const auto& a : moved.assigned) EXPECT_EQ(a.size(), 1u);
  // The lost times round-trip through JSON.
  auto back = Placement::FromJson(q.ToJson().dump());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, q);
}

TEST(ReplicaClaimTest, RoundTripsThroughJsonAndRejectsAValueWithoutAKnownState) {
  ReplicaClaim c;
  c.state = ReplicaClaim::State::kBuilding;
  c.store_id = 9, c.applied_seq = 1ull << 40, c.documents = 12, c.index_bytes = 4096, c.address = "10.0.0.2:8080";
  const auto back = ReplicaClaim::FromJson(nlohmann::json::parse(c.ToJson().dump()));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, c);
  EXPECT_EQ(c.ToJson()["state"], "building");
  EXPECT_FALSE(ReplicaClaim::FromJson(nlohmann::json::parse("{}")).has_value());
  EXPECT_FALSE(ReplicaClaim::FromJson(nlohmann::json::parse(R"({"state": "maybe"})")).has_value());
  EXPECT_FALSE(ReplicaClaim::FromJson(nlohmann::json::parse("[1]")).has_value());
  // A stale claim is not among a shard's ready nodes, nor one of another store id.
  ClusterKeys keys;
  keys.nodes["a"], keys.nodes["b"], keys.nodes["c"];
  ReplicaClaim ready;
  ready.store_id = 9;
  ReplicaClaim stale = ready;
  stale.state = ReplicaClaim::State::kStale;
  ReplicaClaim recreated = ready;
  recreated.store_id = 10;
  keys.claims["coll"][ShardRef{1, 0}] = {{"a", ready}, {"b", stale}, {"c", recreated}, {"gone", ready}};
  EXPECT_EQ(keys.ReadyNodes("coll", ShardRef{1, 0}, 9), std::vector<std::string>{"a"});
  EXPECT_TRUE(keys.ReadyNodes("coll", ShardRef{2, 0}, 9).empty());  // another split's shard 0
}

TEST(Base64, RoundTripsEveryByte) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (size_t n = 0; n <= all.size(); n += 37) {
    auto back = Base64Decode(Base64Encode(all.substr(0, n)));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, all.substr(0, n));
  }
  EXPECT_EQ(Base64Encode("/moeedb"), "L21vZWVkYg==");  // RFC 4648 alphabet, padded
}

// The test etcd (tests/cluster/etcd_server.sh, a ctest fixture).
std::string Endpoint() {
  const char* dir = std::getenv("MOEEDB_TEST_ETCD_DIR");
  std::ifstream in(std::string(dir ? dir : "") + "/endpoint");
  std::string e;
  std::getline(in, e);
  return e;
}

class EtcdPlacement : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(Endpoint().empty()) << "no test etcd (run through ctest)";
    cluster_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  EtcdClient etcd_{{Endpoint()}};
  std::string cluster_;
};

TEST_F(EtcdPlacement, OfTwoCoordinatorsRacingForTheSameReplicaExactlyOneWins) {
  EtcdClient a({Endpoint()}), b({Endpoint()});
  PlacementStore pa(&a, cluster_), pb(&b, cluster_);
  // Both read the same (absent) placement and plan the same shard onto different nodes.
  auto ra = pa.Read("c"), rb = pb.Read("c");
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(ra->second, 0);
  std::map<std::string, size_t> la{{"n2", 5}}, lb{{"n1", 5}};
  const Placement planned_a = Plan(ra->first, 3, 1, 1, {"n1", "n2"}, {}, &la);
  const Placement planned_b = Plan(rb->first, 3, 1, 1, {"n1", "n2"}, {}, &lb);
  ASSERT_NE(planned_a.assigned[0], planned_b.assigned[0]);
  // Racing from two threads: exactly one transaction succeeds.
  Result<bool> wa = false, wb = false;
  std::thread ta([&] { wa = pa.Write("c", planned_a, ra->second); });
  std::thread tb([&] { wb = pb.Write("c", planned_b, rb->second); });
  ta.join();
  tb.join();
  ASSERT_TRUE(wa.ok() && wb.ok()) << wa.status().ToString() << wb.status().ToString();
  EXPECT_NE(*wa, *wb) << "exactly one coordinator wins";
  auto now = pa.Read("c");
  ASSERT_TRUE(now.ok() && now->first);
  EXPECT_EQ(*now->first, *wa ? planned_a : planned_b);
  EXPECT_GT(now->second, 0);
}

TEST_F(EtcdPlacement, ACoordinatorActingOnAPlacementThatChangedSinceItReadItIsRefused) {
  PlacementStore ps(&etcd_, cluster_);
  std::map<std::string, size_t> load;
  const Placement first = Plan(std::nullopt, 3, 2, 1, {"n1", "n2"}, {}, &load);
  ASSERT_TRUE(*ps.Write("c", first, 0));
  auto read = ps.Read("c");
  ASSERT_TRUE(read.ok());
  const int64_t stale = read->second;
  // Another coordinator moves shard 0 meanwhile.
  Placement moved = first;
  moved.assigned[0] = {"n3"};
  ASSERT_TRUE(*ps.Write("c", moved, stale));
  // The first acts on what it read: refused, and the placement is the other's.
  Placement mine = first;
  mine.assigned[1] = {"n4"};
  auto refused = ps.Write("c", mine, stale);
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(*refused);
  EXPECT_FALSE(*ps.Write("c", mine, 0)) << "absent is a revision too";
  auto now = ps.Read("c");
  EXPECT_EQ(*now->first, moved);
  // A claim made under the stale revision is refused too; under the current one it holds.
  auto lease = etcd_.GrantLease(30);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_FALSE(*ps.Claim("c", ShardRef{2, 0}, "n1", *lease, ReplicaClaim{}, stale));
  EXPECT_FALSE(etcd_.Get(ps.ReplicaKey("c", ShardRef{2, 0}, "n1"))->has_value());
  EXPECT_TRUE(*ps.Claim("c", ShardRef{2, 0}, "n3", *lease, ReplicaClaim{}, now->second));
  auto claim = etcd_.Get(ps.ReplicaKey("c", ShardRef{2, 0}, "n3"));
  ASSERT_TRUE(claim.ok() && claim->has_value());
  EXPECT_EQ((*claim)->lease, *lease);
}

// A placement a node wrote and read back stays in its view though a
// snapshot taken before the write (an older one) is offered after it, and
// a refresh brings what etcd holds now.
TEST_F(EtcdPlacement, TheClusterViewNeverGoesBack) {
  PlacementStore ps(&etcd_, cluster_);
  ClusterView view(&ps);
  ASSERT_TRUE(view.Refresh().ok());
  const int64_t before = view.Current()->revision;
  EXPECT_GT(before, 0);
  std::map<std::string, size_t> load;
  const Placement first = Plan(std::nullopt, 1, 2, 1, {"n1"}, {}, &load);
  ASSERT_TRUE(*ps.Write("c", first, 0));
  auto read1 = ps.Read("c");
  Placement second = first;
  second.assigned[0] = {"n2"};
  ASSERT_TRUE(*ps.Write("c", second, read1->second));
  auto read2 = ps.Read("c");
  view.SetPlacement("c", ClusterKeys::Placed{*read2->first, read2->second});
  EXPECT_EQ(view.Current()->placements.at("c").placement, second);
  EXPECT_GE(view.Current()->revision, read2->second);
  view.SetPlacement("c", ClusterKeys::Placed{*read1->first, read1->second});  // older: dropped
  EXPECT_EQ(view.Current()->placements.at("c").placement, second);
  ASSERT_TRUE(view.Refresh().ok());
  EXPECT_EQ(view.Current()->placements.at("c").placement, second);
  EXPECT_EQ(view.Current()->placements.at("c").revision, read2->second);
}

TEST_F(EtcdPlacement, ANodesClaimsGoWithItsLease) {
  PlacementStore ps(&etcd_, cluster_);
  auto lease = etcd_.GrantLease(30);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(etcd_.Put(ps.NodeKey("n1"), "{\"address\":\"127.0.0.1:1\"}", *lease).ok());
  ASSERT_TRUE(*ps.Claim("c", ShardRef{3, 2}, "n1", *lease, ReplicaClaim{}, 0));
  EXPECT_TRUE(etcd_.KeepAlive(*lease).ok());
  int64_t revision = 0;
  auto listed = etcd_.List(ps.prefix(), &revision);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 2u);
  EXPECT_GT(revision, 0);
  // The lease ends (a node that stopped renewing it): its keys are gone.
  ASSERT_TRUE(etcd_.RevokeLease(*lease).ok());
  EXPECT_EQ(etcd_.List(ps.prefix())->size(), 0u);
  auto renewed = etcd_.KeepAlive(*lease);
  EXPECT_EQ(renewed.code(), Status::Code::kNotFound) << renewed.ToString();
}

TEST_F(EtcdPlacement, TheStatusShowsNodesPlacementAndClaimsAndDrainingIsSetAndUnset) {
  PlacementStore ps(&etcd_, cluster_);
  auto lease = etcd_.GrantLease(30);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(etcd_.Put(ps.NodeKey("n1"), "{\"address\":\"127.0.0.1:1\"}", *lease).ok());
  std::map<std::string, size_t> load;
  ASSERT_TRUE(*ps.Write("c", Plan(std::nullopt, 3, 2, 1, {"n1"}, {}, &load), 0));
  auto read = ps.Read("c");
  ReplicaClaim claim;
  claim.applied_seq = 7, claim.documents = 3;
  ASSERT_TRUE(*ps.Claim("c", ShardRef{2, 1}, "n1", *lease, claim, read->second));
  EXPECT_EQ(SetDraining(etcd_, cluster_, "nobody", true).code(), Status::Code::kNotFound);
  ASSERT_TRUE(SetDraining(etcd_, cluster_, "n1", true).ok());
  auto status = ReadClusterStatus(etcd_, cluster_, nullptr);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  const auto& j = *status;
  ASSERT_EQ(j["nodes"].size(), 1u);
  EXPECT_EQ(j["nodes"][0]["id"], "n1");
  EXPECT_EQ(j["nodes"][0]["draining"], true);
  EXPECT_GT(j["nodes"][0]["ttl_s"].get<int64_t>(), 20);
  ASSERT_EQ(j["collections"].size(), 1u);
  EXPECT_EQ(j["collections"][0]["shard_list"][1]["assigned"], nlohmann::json::array({"n1"}));
  EXPECT_EQ(j["collections"][0]["shard_list"][1]["replicas"][0]["applied_seq"], 7);
  EXPECT_EQ(j["collections"][0]["shard_list"][1]["replicas"][0]["state"], "ready");
  ASSERT_TRUE(SetDraining(etcd_, cluster_, "n1", false).ok());
  EXPECT_EQ((*ReadClusterStatus(etcd_, cluster_, nullptr))["nodes"][0]["draining"], false);
  ASSERT_TRUE(etcd_.RevokeLease(*lease).ok());
}

// A replica being built claims "building" at the entry it reads the log
// from, at once: coordinators do not ask it, and the other nodes' log
// retention keeps that entry. A round of a node that opens no such replica
// deletes the claim, though that holder never wrote it (an opening thread's
// claim the round's copy of its memory lost).
TEST_F(EtcdPlacement, AReplicaBeingBuiltIsClaimedAtTheEntryItReadsFromUntilNoneIsOpened) {
  PlacementStore ps(&etcd_, cluster_);
  ClusterView view(&ps);
  auto lease = etcd_.GrantLease(30);
  ASSERT_TRUE(lease.ok());
  for (const char* node : {"n1", "n2"})
    ASSERT_TRUE(etcd_.Put(ps.NodeKey(node), "{\"address\":\"127.0.0.1:1\"}", *lease).ok());
  std::map<std::string, size_t> load;
  ASSERT_TRUE(*ps.Write("c", Plan(std::nullopt, 3, 2, 1, {"n1"}, {}, &load), 0));  // n1 holds both shards
  auto read = ps.Read("c");
  ASSERT_TRUE(read.ok());
  ReplicaClaim ready;
  ready.store_id = 3, ready.applied_seq = 50;
  ASSERT_TRUE(*ps.Claim("c", ShardRef{2, 0}, "n2", *lease, ready, read->second));
  CollectionLayout layout;
  layout.name = "c", layout.store_id = 3, layout.shards = 2;
  ReplicaHolder holder(&etcd_, &ps, &view, "n1", "127.0.0.1:1");
  ASSERT_TRUE(holder.ClaimBuilding(layout, ShardRef{2, 1}, 20, *lease).ok());
  CollectionLayout other = layout;
  other.store_id = 4;  // a collection of the name dropped and made again: not the one placed
  ASSERT_TRUE(holder.ClaimBuilding(other, ShardRef{2, 0}, 7, *lease).ok());
  EXPECT_FALSE(etcd_.Get(ps.ReplicaKey("c", ShardRef{2, 0}, "n1"))->has_value());
  ASSERT_TRUE(holder.ClaimBuilding(layout, ShardRef{3, 0}, 7, *lease).ok());  // a split not placed: not n1's
  EXPECT_FALSE(etcd_.Get(ps.ReplicaKey("c", ShardRef{3, 0}, "n1"))->has_value());
  ASSERT_TRUE(view.Refresh().ok());
  auto keys = view.Current();
  const ReplicaClaim& claim = keys->claims.at("c").at(ShardRef{2, 1}).at("n1");
  EXPECT_EQ(claim.state, ReplicaClaim::State::kBuilding);
  EXPECT_EQ(claim.applied_seq, 20u);
  EXPECT_TRUE(keys->ReadyNodes("c", ShardRef{2, 1}, 3).empty()) << "a replica being built is not asked";
  EXPECT_EQ(keys->LowestApplied("c", 3, "n2"), std::optional<uint64_t>(20)) << "what n2's retention keeps";
  EXPECT_EQ(keys->LowestApplied("c", 3, "n1"), std::optional<uint64_t>(50));
  EXPECT_EQ(keys->LowestApplied("c", 4, "n2"), std::nullopt);
  // n1's next round (a holder with no memory of the claim; its database has
  // no collection "c", so no replica of it opens): the claim goes, n2's stays.
  const auto dir = std::filesystem::temp_directory_path() / ("moeedb-holder-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto db = Database::Open((dir / "db").string(), DatabaseOptions{});
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  ReplicaHolder next_round(&etcd_, &ps, &view, "n1", "127.0.0.1:1");
  ASSERT_TRUE(next_round.HoldAndClaim(db->get(), *lease).ok());
  EXPECT_FALSE(etcd_.Get(ps.ReplicaKey("c", ShardRef{2, 1}, "n1"))->has_value());
  EXPECT_TRUE(etcd_.Get(ps.ReplicaKey("c", ShardRef{2, 0}, "n2"))->has_value());
  ASSERT_TRUE(view.Refresh().ok());
  EXPECT_EQ(view.Current()->LowestApplied("c", 3, "n2"), std::nullopt);
  ASSERT_TRUE(etcd_.RevokeLease(*lease).ok());
  db->reset();
  std::filesystem::remove_all(dir);
}

// Holds shards `held` of every collection; a replica it opens reports its
// floor by claiming, through `holder`, another collection's replica as
// building: a claim written while the holder's round runs, after its reads.
class ClaimingPeers : public test::HeldShardsPeers {
 public:
  ClaimingPeers() { held = {0}; }
  void HoldLogFrom(const CollectionLayout& layout, ShardRef shard, uint64_t seq) override {
    if (holder != nullptr && layout.name == "x" && shard == ShardRef{2, 1})
      claimed = holder->ClaimBuilding(other, ShardRef{1, 0}, 4, lease);
  }
  ReplicaHolder* holder = nullptr;
  CollectionLayout other;
  int64_t lease = 0;
  Status claimed = Status::Internal("not called");
};

// A round does not delete a building claim written after it began (an
// opening on another thread), though etcd held a claim under that key when
// it began and it opens no such replica; the next round, which began after
// the claim, does.
TEST_F(EtcdPlacement, ARoundKeepsABuildingClaimWrittenWhileItRanAndTheNextDeletesAnUnopenedOne) {
  PlacementStore ps(&etcd_, cluster_);
  ClusterView view(&ps);
  auto lease = etcd_.GrantLease(30);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(etcd_.Put(ps.NodeKey("n1"), "{\"address\":\"127.0.0.1:1\"}", *lease).ok());
  const auto dir = std::filesystem::temp_directory_path() / ("moeedb-round-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ClaimingPeers peers;
  DatabaseOptions options;
  options.peers = &peers;
  auto db = Database::Open((dir / "db").string(), options);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  CollectionOptions two;
  two.dim_hs = 4, two.dim_rw = 2, two.shards = 2;
  two.index.hs.kind = two.index.rw.kind = IndexKind::kFlat;
  auto x = (*db)->CreateCollection("x", two);  // holds shard 0 of 2
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  // Both collections placed on n1; etcd holds an old claim of n1 on y's shard
  // (an opening that failed), and y is not a collection of n1's database.
  std::map<std::string, size_t> load;
  ASSERT_TRUE(*ps.Write("x", Plan(std::nullopt, (*x)->store_id(), 2, 1, {"n1"}, {}, &load), 0));
  ASSERT_TRUE(*ps.Write("y", Plan(std::nullopt, 9, 1, 1, {"n1"}, {}, &load), 0));
  auto y = ps.Read("y");
  ReplicaClaim old;
  old.state = ReplicaClaim::State::kBuilding, old.store_id = 9, old.applied_seq = 2;
  ASSERT_TRUE(*ps.Claim("y", ShardRef{1, 0}, "n1", *lease, old, y->second));
  ASSERT_TRUE(view.Refresh().ok());
  const std::string key = ps.ReplicaKey("y", ShardRef{1, 0}, "n1");
  // The round opens x's shard 1, whose build claims y's shard anew (at 4).
  ReplicaHolder holder(&etcd_, &ps, &view, "n1", "127.0.0.1:1");
  peers.held = {0, 1};
  peers.holder = &holder;
  peers.other.name = "y", peers.other.store_id = 9, peers.other.shards = 1;
  peers.lease = *lease;
  ASSERT_TRUE(holder.HoldAndClaim(db->get(), *lease).ok());
  ASSERT_TRUE(peers.claimed.ok()) << peers.claimed.ToString();
  EXPECT_EQ((*x)->HeldShards(), (std::vector<uint32_t>{0, 1}));
  auto kept = etcd_.Get(key);
  ASSERT_TRUE(kept.ok() && kept->has_value()) << "the claim written during the round is kept";
  EXPECT_EQ(ReplicaClaim::FromJson(nlohmann::json::parse((*kept)->value))->applied_seq, 4u);
  EXPECT_TRUE(etcd_.Get(ps.ReplicaKey("x", ShardRef{2, 1}, "n1"))->has_value());
  // The next round began after it, and no replica of y opens: it goes.
  peers.holder = nullptr;
  ASSERT_TRUE(view.Refresh().ok());
  ASSERT_TRUE(holder.HoldAndClaim(db->get(), *lease).ok());
  EXPECT_FALSE(etcd_.Get(key)->has_value());
  EXPECT_TRUE(etcd_.Get(ps.ReplicaKey("x", ShardRef{2, 0}, "n1"))->has_value());
  ASSERT_TRUE(etcd_.RevokeLease(*lease).ok());
  x->reset();
  db->reset();
  std::filesystem::remove_all(dir);
}

TEST(NodeLockTest, OneProcessAFolderAndTheTokenItLastRecorded) {
  const auto root = std::filesystem::temp_directory_path() / ("moeedb-nodelock-" + std::to_string(::getpid()));
  const std::string folder = (root / "node").string();
  {
    auto a = NodeLock::Acquire(folder);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ((*a)->previous(), "");
    auto b = NodeLock::Acquire(folder);  // another holder of the folder while `a` lives
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), Status::Code::kUnavailable);
    ASSERT_TRUE((*a)->Record("token-1").ok());
  }
  auto again = NodeLock::Acquire(folder);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->previous(), "token-1");
  EXPECT_NE(NodeLock::NewToken(), NodeLock::NewToken());
  // This boot's tokens prove their process gone to the folder's next holder; another machine's do not.
  EXPECT_TRUE(NodeLock::OfThisBoot(NodeLock::NewToken()));
  EXPECT_FALSE(NodeLock::OfThisBoot("token-1"));
  EXPECT_FALSE(NodeLock::OfThisBoot("00000000-0000-0000-0000-000000000000/0123456789abcdef0123456789abcdef"));
  again->reset();
  std::filesystem::remove_all(root);
}

TEST_F(EtcdPlacement, ANodeRestartedOnItsFolderTakesItsRegistrationOverAtOnceAndNoOtherDoes) {
  PlacementStore ps(&etcd_, cluster_);
  // A node killed with kill -9: its registration stays on its lease (30 s here).
  auto lease = etcd_.GrantLease(30);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(etcd_.Put(ps.NodeKey("n1"), R"({"address": "a:1", "instance": "dead"})", *lease).ok());
  // Another instance (not the folder's previous one) waits its own TTL (2 s)
  // plus 2 s for the id and is refused: the 30 s lease is still there.
  auto other = Membership::Register(&etcd_, &ps, "n1", "b:2", 2, nullptr, "other", "someone-else");
  EXPECT_FALSE(other.ok());
  // The folder's next process (its lock names "dead") revokes that lease and registers.
  auto next = Membership::Register(&etcd_, &ps, "n1", "a:1", 2, nullptr, "alive", "dead");
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  auto old = etcd_.LeaseTimeToLive(*lease);
  EXPECT_TRUE(!old.ok() || *old < 0) << "the dead registration's lease was revoked";
  auto kv = etcd_.Get(ps.NodeKey("n1"));
  ASSERT_TRUE(kv.ok() && kv->has_value());
  EXPECT_EQ(nlohmann::json::parse((*kv)->value).value("instance", ""), "alive");
  EXPECT_EQ((*kv)->lease, (*next)->lease());
}

TEST(EtcdClientTest, AnUnreachableClusterIsUnavailable) {
  EtcdClient dead({"127.0.0.1:1"}, std::chrono::milliseconds(300));
  auto r = dead.Get("k");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kUnavailable);
}

}  // namespace
}  // namespace moeedb::cluster
