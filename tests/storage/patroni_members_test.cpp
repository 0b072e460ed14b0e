// Finding the primary through Patroni (storage/patroni_members): against a
// fake Patroni REST API whose answers the test sets, the locator names the
// leader only while the leader's own Patroni answers 200 to GET /primary; a
// PostgresStore given patroni= connects where the leader's Patroni says,
// whatever servers its URI lists, and refuses to use a server that is up and
// writable once its Patroni stops answering (the fence), until a leader is
// named again; while no primary answers it reads from the synchronous
// standby Patroni names, never from another server its URI lists.
#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>

#include "storage/patroni_members.h"
#include "storage/postgres_rows.h"
#include "storage/postgres_store.h"
#include "storage/store.h"
#include "tests/storage/fake_patroni.h"
#include "tests/storage/pg_test_db.h"

namespace moeedb {
namespace {

using json = nlohmann::json;
using test::FakePatroni;
using test::Member;
using test::PgHostPort;

// GET /cluster: `leader` leads, at pg_host_port, its REST API at
// leader_rest; one synchronous standby beside it.
std::string ClusterJson(const std::string& leader, const std::string& pg_host_port, const std::string& leader_rest) {
  return json{{"members", {Member(leader, "leader", pg_host_port, leader_rest), Member("other", "sync_standby", "127.0.0.1:1")}},
              {"scope", "test"}}
      .dump();
}

// A store over `uri` (connect_timeout=2 and patroni= the fake's API added)
// holding collection c with one document, a; nullptr (and a failure) if not.
std::unique_ptr<Store> OpenWithDocument(std::string uri, const FakePatroni& patroni) {
  uri += std::string(uri.find('?') == std::string::npos ? "?" : "&") + "connect_timeout=2&patroni=" + patroni.host_port();
  auto opened = Store::Open(uri);
  if (!opened.ok()) {
    ADD_FAILURE() << opened.status().ToString();
    return nullptr;
  }
  auto store = std::move(opened).value();
  Status s = store->CreateCollection("c", "{}").status();
  if (s.ok()) s = store->Upsert("c", {{"a", "text of a", json{{"id", "a"}}.dump(), {1.f, 2.f}, {3.f}}}, true).status();
  if (!s.ok()) {
    ADD_FAILURE() << s.ToString();
    return nullptr;
  }
  return store;
}

TEST(PatroniMembers, NamesTheLeaderOnlyWhileItsOwnPatroniSaysPrimary) {
  FakePatroni any, leader;
  any.Set("/cluster", 200, ClusterJson("pg1", "10.0.0.7:5433", leader.host_port()));
  leader.Set("/primary", 200);
  // The first endpoint is down: another answers.
  auto p = PatroniMembers::Parse("127.0.0.1:1," + any.host_port());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto hp = (*p)->Primary();
  ASSERT_TRUE(hp.ok()) << hp.status().ToString();
  EXPECT_EQ(*hp, "10.0.0.7:5433");

  // The leader key still names pg1, but its Patroni says it is not primary.
  leader.Set("/primary", 503);
  std::this_thread::sleep_for(PatroniMembers::kFresh);
  hp = (*p)->Primary();
  EXPECT_EQ(hp.status().code(), Status::Code::kUnavailable) << (hp.ok() ? *hp : "");
  EXPECT_NE(hp.status().message().find("pg1"), std::string::npos) << hp.status().ToString();

  // Its Patroni is gone (the key outlives it by its TTL): still no primary.
  leader.Stop();
  std::this_thread::sleep_for(PatroniMembers::kFresh);
  EXPECT_EQ((*p)->Primary().status().code(), Status::Code::kUnavailable);

  // A failover: another member leads, its Patroni answers.
  FakePatroni next;
  next.Set("/primary", 200);
  any.Set("/cluster", 200, ClusterJson("pg2", "10.0.0.8:5434", next.host_port()));
  std::this_thread::sleep_for(PatroniMembers::kFresh);
  hp = (*p)->Primary();
  ASSERT_TRUE(hp.ok()) << hp.status().ToString();
  EXPECT_EQ(*hp, "10.0.0.8:5434");

  // No leader in the key (mid-election).
  any.Set("/cluster", 200, json{{"members", json::array()}}.dump());
  std::this_thread::sleep_for(PatroniMembers::kFresh);
  EXPECT_EQ((*p)->Primary().status().code(), Status::Code::kUnavailable);

  // A leader named again: the cached answer stands until it is kFresh old,
  // unless a caller with nowhere to read asks for a recheck.
  any.Set("/cluster", 200, ClusterJson("pg2", "10.0.0.8:5434", next.host_port()));
  std::this_thread::sleep_for(PatroniMembers::kRecheck);
  (*p)->Recheck();
  hp = (*p)->Primary();
  ASSERT_TRUE(hp.ok()) << hp.status().ToString();
  EXPECT_EQ(*hp, "10.0.0.8:5434");
}

TEST(PatroniMembers, NamesTheSynchronousStandbysOnly) {
  FakePatroni any;
  any.Set("/cluster", 200,
          json{{"members",
                {Member("pg1", "leader", "10.0.0.1:5432"), Member("pg2", "replica", "10.0.0.2:5432"),
                 Member("pg3", "sync_standby", "10.0.0.3:5432")}}}
              .dump());
  auto p = PatroniMembers::Parse(any.host_port());
  ASSERT_TRUE(p.ok());
  auto sync = (*p)->SynchronousStandbys();
  ASSERT_TRUE(sync.ok()) << sync.status().ToString();
  EXPECT_EQ(*sync, std::vector<std::string>{"10.0.0.3:5432"});
  EXPECT_FALSE((*p)->Primary().ok());  // the leader's Patroni does not answer

  // Mid-failover the /sync key may name none: no server to fall back to.
  any.Set("/cluster", 200,
          json{{"members", {Member("pg1", "leader", "10.0.0.1:5432"), Member("pg2", "replica", "10.0.0.2:5432")}}}
              .dump());
  std::this_thread::sleep_for(PatroniMembers::kFresh);
  EXPECT_EQ((*p)->SynchronousStandbys().status().code(), Status::Code::kUnavailable);
  any.Stop();
  std::this_thread::sleep_for(PatroniMembers::kFresh);
  EXPECT_EQ((*p)->SynchronousStandbys().status().code(), Status::Code::kUnavailable);
}

TEST(PatroniMembers, AMalformedListIsRefused) {
  for (const char* bad : {"", "host", "host:", ":80", "a:1,,b:2", "a:x"})
    EXPECT_EQ(PatroniMembers::Parse(bad).status().code(), Status::Code::kInvalidArgument) << bad;
  EXPECT_TRUE(PatroniMembers::Parse("localhost:8008,127.0.0.1:8009").ok());
}

TEST(PatroniMembers, ItsParameterIsTakenOutOfEitherFormOfConnectionString) {
  std::string v;
  EXPECT_EQ(postgres::TakeParameter("postgresql://u@h1:1,h2:2/db?patroni=a:1,b:2&connect_timeout=2", "patroni", &v),
            "postgresql://u@h1:1,h2:2/db?connect_timeout=2");
  EXPECT_EQ(v, "a:1,b:2");
  EXPECT_EQ(postgres::TakeParameter("postgresql://u@h/db?sslmode=require&patroni=a:1", "patroni", &v),
            "postgresql://u@h/db?sslmode=require");
  EXPECT_EQ(v, "a:1");
  EXPECT_EQ(postgres::TakeParameter("host=h1,h2 patroni=a:1 dbname=db", "patroni", &v), "host=h1,h2 dbname=db");
  EXPECT_EQ(v, "a:1");
  EXPECT_EQ(postgres::TakeParameter("postgresql://u@h/db", "patroni", &v), "postgresql://u@h/db");
  EXPECT_EQ(v, "");
  EXPECT_EQ(postgres::ServerUri("postgresql://u@h1:1,h2:2/db?target_session_attrs=read-write", "10.0.0.8:5434"),
            "postgresql://u@h1:1,h2:2/db?target_session_attrs=read-write&host=10.0.0.8&port=5434");
  EXPECT_EQ(postgres::ServerUri("host=h1,h2 dbname=db", "10.0.0.8:5434"), "host=h1,h2 dbname=db host=10.0.0.8 port=5434");
}

TEST(PatroniMembers, AStoreConnectsWherePatroniSaysAndIsFencedWhenItsPatroniDies) {
  test::PgDatabase db;
  const std::string real = PgHostPort(db.uri());
  FakePatroni any;
  auto leader = std::make_unique<FakePatroni>();
  leader->Set("/primary", 200);
  any.Set("/cluster", 200, ClusterJson("pg0", real, leader->host_port()));
  // The URI lists only a server that is not there: every connection goes
  // where Patroni says.
  auto store = OpenWithDocument(std::regex_replace(db.uri(), std::regex(R"(@[^/?]+/)"), "@127.0.0.1:1/"), any);
  ASSERT_TRUE(store);
  auto log = [&] {
    int entries = 0;
    Status s = store->ReadOps("c", 0, [&](const OpRecord&) { ++entries; });
    return s.ok() ? Result<int>(entries) : Result<int>(s);
  };
  ASSERT_EQ(*log(), 1);

  // The leader's Patroni dies; its postgres runs on, writable: fenced.
  leader->Stop();
  std::this_thread::sleep_for(PatroniMembers::kFresh);
  auto fenced = log();
  EXPECT_EQ(fenced.status().code(), Status::Code::kUnavailable) << (fenced.ok() ? "read the log" : "");
  EXPECT_TRUE(pqxx::connection(db.uri()).is_open());  // the server itself is up

  // A new Patroni leads the same server (as after a restart): in use again.
  leader = std::make_unique<FakePatroni>();
  leader->Set("/primary", 200);
  any.Set("/cluster", 200, ClusterJson("pg0", real, leader->host_port()));
  std::this_thread::sleep_for(PatroniMembers::kFresh);
  ASSERT_TRUE(store->Upsert("c", {{"b", "text of b", json{{"id", "b"}}.dump(), {1.f, 2.f}, {3.f}}}, true).ok());
  EXPECT_EQ(*log(), 2);
}

TEST(PatroniMembers, WhileNoPrimaryAnswersAStoreReadsFromTheSynchronousStandbyOnly) {
  test::PgDatabase db;
  const std::string real = PgHostPort(db.uri());
  FakePatroni any, leader;
  leader.Set("/primary", 200);
  auto members = [&](json list) { any.Set("/cluster", 200, json{{"members", list}}.dump()); };
  members({Member("pg0", "leader", real, leader.host_port()), Member("pg1", "sync_standby", "127.0.0.1:1")});
  // The URI lists the test server too, as a cluster's DSN lists every member.
  auto store = OpenWithDocument(db.uri(), any);
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->GetCollection("c").ok());
  std::string entry;
  ASSERT_TRUE(store->ReadOps("c", 0, [&](const OpRecord& op) { entry = op.entry_id; }).ok());
  ASSERT_FALSE(entry.empty());

  // The old primary's Patroni says it is no longer primary; its postgres
  // (the test server) is up, and the synchronous standby unreachable: a
  // read is refused rather than answered by the old primary.
  leader.Set("/primary", 503);
  std::this_thread::sleep_for(PatroniMembers::kFresh);
  auto read = store->GetCollection("c");
  EXPECT_EQ(read.status().code(), Status::Code::kUnavailable) << (read.ok() ? "read from the old primary" : "");

  // Nor by an asynchronous standby.
  members({Member("pg0", "leader", "127.0.0.1:2", leader.host_port()), Member("pg1", "replica", real),
           Member("pg2", "sync_standby", "127.0.0.1:1")});
  std::this_thread::sleep_for(PatroniMembers::kFresh);
  read = store->GetCollection("c");
  EXPECT_EQ(read.status().code(), Status::Code::kUnavailable) << (read.ok() ? "read from the async standby" : "");

  // The synchronous standby answers the read; the change log stays primary-only.
  members({Member("pg0", "leader", "127.0.0.1:2", leader.host_port()), Member("pg1", "sync_standby", real)});
  std::this_thread::sleep_for(PatroniMembers::kFresh);
  read = store->GetCollection("c");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->last_op, 1u);
  auto head = store->GetLogHead("c");  // the log's head and its entry, from the standby too
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->record.last_op, 1u);
  EXPECT_EQ(head->entry_id, entry);
  auto doc = store->Get("c", "a");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  ASSERT_TRUE(doc->has_value());
  EXPECT_EQ((*doc)->text, "text of a");
  EXPECT_EQ(store->ReadOps("c", 0, [](const OpRecord&) {}).code(), Status::Code::kUnavailable);
  // ReadOpsFromStandby reads it there: what a replica follows during a failover.
  std::string standby_entry;
  ASSERT_TRUE(store->ReadOpsFromStandby("c", 0, [&](const OpRecord& op) { standby_entry = op.entry_id; }).ok());
  EXPECT_EQ(standby_entry, entry);
  // Never from an asynchronous standby or the old primary.
  members({Member("pg0", "leader", real, leader.host_port()), Member("pg1", "replica", real),
           Member("pg2", "sync_standby", "127.0.0.1:1")});
  std::this_thread::sleep_for(PatroniMembers::kFresh);
  EXPECT_EQ(store->ReadOpsFromStandby("c", 0, [](const OpRecord&) {}).code(), Status::Code::kUnavailable);
  // Without patroni= no server can be named the synchronous standby.
  auto plain = Store::Open(db.uri());
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ((*plain)->ReadOpsFromStandby("c", 0, [](const OpRecord&) {}).code(), Status::Code::kNotSupported);
}

}  // namespace
}  // namespace moeedb
