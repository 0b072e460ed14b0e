#include "storage/postgres_store.h"

#include <chrono>
#include <condition_variable>
#include <map>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "base/log.h"
#include "storage/postgres_rows.h"

namespace moeedb {

using json = nlohmann::json;
using namespace postgres;  // NOLINT: the store's own statements

namespace {

// Rows a scan reads at a time.
constexpr int kScanPage = 1000;

// How long a write keeps retrying while no primary answers (a failover takes
// a few seconds) before it answers Unavailable, and how long it keeps trying
// to learn the outcome of a commit whose answer was lost.
constexpr auto kWriteRetry = std::chrono::seconds(10);
constexpr auto kResolveFor = std::chrono::seconds(30);
constexpr auto kRetryPause = std::chrono::milliseconds(200);

// A write's transaction holds its collection's row (the change log's order):
// a node frozen inside one (SIGSTOP, a paused VM, a cut link that TCP has not
// noticed) would stop every writer of the collection for good. PostgreSQL
// ends a session idle inside a transaction this long, rolling it back; the
// frozen node, thawed, finds its connection gone and retries the write.
// Writes run in milliseconds between statements, far below it.
constexpr const char* kIdleInTransactionTimeout = "5s";
// A write waits this long for its collection's row, then retries (and answers
// Unavailable once kWriteRetry is spent) rather than hang: above the idle
// timeout, so a frozen holder is cut off before its waiters give up.
constexpr const char* kWriteLockTimeout = "8s";
}  // namespace

struct PostgresStore::Connection {
  // `writer`: the connection writes run on (the session timeout above);
  // `name`: its application_name in pg_stat_activity, if not libpq's.
  Connection(const std::string& uri, bool writer, const char* name = nullptr) : c(uri) {
    if (name != nullptr) pqxx::nontransaction(c).exec(std::string("SET application_name = '") + name + "'");
    // statement_timeout 0: a role's or database's timeout cancelling a
    // COMMIT's wait for the synchronous standby would leave it committed
    // here only, yet answered as a success.
    // plan_cache_mode: a custom plan folds the parameters into constants, so
    // a write's vectors (a megabyte a batch) were copied through the planner
    // on every statement (perf: the writers' largest cost after the kernel's
    // copies); the generic plans of a write's statements are the same plans.
    if (writer) pqxx::nontransaction(c).exec(std::string("SET idle_in_transaction_session_timeout = '") +
                                             kIdleInTransactionTimeout + "'; SET statement_timeout = 0; "
                                             "SET plan_cache_mode = force_generic_plan");
  }
  pqxx::connection c;
};

struct PostgresStore::Listener {
  struct Receiver : pqxx::notification_receiver {
    using pqxx::notification_receiver::notification_receiver;
    void operator()(const std::string&, int) override {}
  };
  explicit Listener(const std::string& uri) : uri(uri), c(uri), receiver(c, kChangeChannel) {}
  std::string uri;  // the primary it listens on
  pqxx::connection c;
  Receiver receiver;
};

Result<std::string> PostgresStore::PrimaryUri() const {
  if (!patroni_) return uri_;
  MOEEDB_ASSIGN_OR_RETURN(const std::string host_port, patroni_->Primary());
  return ServerUri(uri_, host_port);
}

Result<std::string> PostgresStore::FallbackUri(const std::string& current) const {
  if (!patroni_) return AnyServerUri(uri_);
  MOEEDB_ASSIGN_OR_RETURN(const std::vector<std::string> standbys, patroni_->SynchronousStandbys());
  for (const std::string& host_port : standbys) {
    std::string uri = AnyServerUri(ServerUri(uri_, host_port));
    if (uri == current) return uri;
  }
  return AnyServerUri(ServerUri(uri_, standbys.front()));
}

bool PostgresStore::WaitForChange(int timeout_ms) const {
  std::lock_guard<std::mutex> lock(listen_mu_);
  try {
    Result<std::string> primary = PrimaryUri();
    if (!primary.ok()) {
      listener_.reset();
      std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
      return true;
    }
    if (!listener_ || !listener_->c.is_open() || listener_->uri != *primary) {
      listener_.reset();
      listener_ = std::make_unique<Listener>(*primary);
      listener_->c.get_notifs();  // subscribes (LISTEN) now
      return true;
    }
    return listener_->c.await_notification(timeout_ms / 1000, (timeout_ms % 1000) * 1000L) > 0;
  } catch (const std::exception&) {
    listener_.reset();  // the server is away: wait out the period, then read the log
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
    return true;
  }
}

template <typename Fn>
auto PostgresStore::Guarded(const std::string& what, std::unique_ptr<Connection>* conn, Fn&& fn) const {
  using R = decltype(fn());
  auto drop = [&] {
    if (conn) conn->reset();
  };
  try {
    return R(fn());
  } catch (const pqxx::in_doubt_error& e) {
    drop();
    return R(Status::OutcomeUnknown(what + ": the connection was lost during COMMIT: " + e.what()));
  } catch (const pqxx::broken_connection& e) {
    drop();
    return R(Status::Unavailable(what + ": PostgreSQL at " + location_ + " is unreachable: " + e.what()));
  } catch (const pqxx::sql_error& e) {
    if (!IsUnavailableState(e.sqlstate())) return R(Status::IOError(what + ": " + e.what()));
    drop();
    return R(Status::Unavailable(what + ": PostgreSQL at " + location_ + " cannot take it now: " + e.what()));
  } catch (const std::exception& e) {
    return R(Status::IOError(what + ": " + e.what()));
  }
}

template <typename Fn>
auto PostgresStore::OnSession(const std::string& what, Session* s, bool primary, bool writer, Fn&& fn) const {
  std::lock_guard<std::mutex> lock(s->mu);
  return Guarded(what, &s->conn, [&] {
    using R = decltype(fn(s->conn->c));
    Result<std::string> uri = primary ? PrimaryUri() : FallbackUri(s->uri);
    if (!uri.ok()) {
      s->conn.reset();  // fenced: no longer the primary's word
      return R(Status::Unavailable(what + ": " + uri.status().message()));
    }
    // The primary moved (or its Patroni is gone): this connection goes.
    if (s->conn && (s->uri != *uri || !s->conn->c.is_open())) s->conn.reset();
    if (!s->conn) {
      s->conn = std::make_unique<Connection>(*uri, writer, s->name);
      s->uri = *uri;
    }
    return R(fn(s->conn->c));
  });
}

template <typename Fn>
auto PostgresStore::WithConnection(const std::string& what, Fn&& fn) const {
  const auto session = write_sessions_.Take();
  return OnSession(what, session.get(), /*primary=*/true, /*writer=*/true, [&](pqxx::connection& c) {
    return fn(c, session->uri);
  });
}

template <typename Fn>
auto PostgresStore::WithOwnConnection(const std::string& what, Fn&& fn) const {
  return Guarded(what, nullptr, [&] {
    using R = decltype(fn(std::declval<pqxx::connection&>()));
    Result<std::string> uri = PrimaryUri();
    if (!uri.ok()) return R(Status::Unavailable(what + ": " + uri.status().message()));
    pqxx::connection c(*uri);
    return R(fn(c));
  });
}

namespace {
const Status& StatusOf(const Status& s) { return s; }
template <typename T>
const Status& StatusOf(const Result<T>& r) { return r.status(); }
}  // namespace

void PostgresStore::SessionPool::Resize(size_t n) {
  sessions_.clear();
  for (size_t i = 0; i < n; ++i) sessions_.push_back(std::make_unique<Session>());
}

std::shared_ptr<PostgresStore::Session> PostgresStore::SessionPool::Take() {
  const size_t start = next_.fetch_add(1) % sessions_.size();
  Session* best = nullptr;
  for (size_t i = 0; i < sessions_.size(); ++i) {
    Session* s = sessions_[(start + i) % sessions_.size()].get();
    if (best == nullptr || s->users.load() < best->users.load()) best = s;
  }
  ++best->users;
  return std::shared_ptr<Session>(best, [](Session* s) { --s->users; });
}

template <typename Fn>
auto PostgresStore::ReadPrimary(const std::string& what, Fn&& fn) const {
  // Connections apart from the writes': a write waiting for its collection's
  // row does not hold up the reads (a search's hits, the change log).
  const auto session = primary_reads_.Take();
  auto r = OnSession(what, session.get(), /*primary=*/true, false, fn);
  // The connection may have died with a server long gone (a failover or a
  // restart since it was last used; the failure dropped it): the same
  // session connects anew to the primary of the moment.
  if (StatusOf(r).code() == Status::Code::kUnavailable) r = OnSession(what, session.get(), true, false, fn);
  return r;
}

template <typename Fn>
auto PostgresStore::Read(const std::string& what, Fn&& fn) const {
  using Clock = std::chrono::steady_clock;
  const int64_t now = Clock::now().time_since_epoch().count();
  if (now >= primary_retry_at_.load()) {
    auto r = ReadPrimary(what, fn);
    if (StatusOf(r).code() != Status::Code::kUnavailable) return r;
    // Asked again in a while; meanwhile reads go to any server at once.
    primary_retry_at_ = now + std::chrono::duration_cast<Clock::duration>(std::chrono::milliseconds(500)).count();
  }
  // Mid-promotion Patroni may name neither a primary nor a synchronous
  // standby (the new primary clears the /sync key until a standby streams
  // from it, and answers GET /primary only once promoted): asked again every
  // kRecheck for a while, the read goes wherever it can first.
  const auto deadline = Clock::now() + kReadFailoverWait;
  for (;;) {
    const auto session = fallback_reads_.Take();
    auto r = OnSession(what, session.get(), /*primary=*/false, false, fn);
    if (StatusOf(r).code() == Status::Code::kUnavailable) r = OnSession(what, session.get(), false, false, fn);
    if (StatusOf(r).code() != Status::Code::kUnavailable || !patroni_) return r;
    patroni_->Recheck();
    auto p = ReadPrimary(what, fn);
    if (StatusOf(p).code() != Status::Code::kUnavailable) {
      primary_retry_at_ = 0;
      return p;
    }
    if (Clock::now() >= deadline) return r;
    std::this_thread::sleep_for(PatroniMembers::kRecheck);
  }
}

PostgresStore::~PostgresStore() = default;

namespace {
// A pool's size from moeedb's parameter `name` (1-64), `def` when not given.
Result<int> PoolSize(const std::string& name, const std::string& value, int def) {
  if (value.empty()) return def;
  char* end = nullptr;
  const long n = std::strtol(value.c_str(), &end, 10);
  if (*end != '\0' || n < 1 || n > 64)
    return Status::InvalidArgument(name + " must be a number from 1 to 64, not '" + value + "'");
  return static_cast<int>(n);
}
}  // namespace

Result<std::unique_ptr<PostgresStore>> PostgresStore::Open(const std::string& uri) {
  std::unique_ptr<PostgresStore> s(new PostgresStore());
  // patroni=HOST:PORT,...: moeedb's own parameter (libpq would refuse it).
  std::string patroni, read_connections, write_connections;
  s->uri_ = TakeParameter(TakeParameter(TakeParameter(uri, "patroni", &patroni), "read_connections", &read_connections),
                          "write_connections", &write_connections);
  s->location_ = HidePassword(uri);
  if (!patroni.empty()) {
    MOEEDB_ASSIGN_OR_RETURN(s->patroni_, PatroniMembers::Parse(patroni));
  }
  MOEEDB_ASSIGN_OR_RETURN(const int reads, PoolSize("read_connections", read_connections, kDefaultReadConnections));
  MOEEDB_ASSIGN_OR_RETURN(const int writes, PoolSize("write_connections", write_connections, kDefaultWriteConnections));
  s->primary_reads_.Resize(reads);
  s->fallback_reads_.Resize(reads);
  s->write_sessions_.Resize(writes);
  s->groups_ = std::make_unique<WriteGroups>();
  MOEEDB_RETURN_IF_ERROR(s->Migrate());
  return s;
}

Status PostgresStore::Migrate() {
  MOEEDB_RETURN_IF_ERROR(WithConnection("opening " + location_, [&](pqxx::connection& c, const std::string&) -> Status {
    pqxx::work t(c);
    // One node migrates at a time; the others wait, then find it done.
    t.exec("SELECT pg_advisory_xact_lock(7325102367)");
    t.exec("CREATE TABLE IF NOT EXISTS moeedb_meta (key text PRIMARY KEY, value text NOT NULL)");
    pqxx::result v = t.exec("SELECT value FROM moeedb_meta WHERE key = 'schema_version'");
    const int version = v.empty() ? 0 : v[0][0].as<int>();
    if (version > kSchemaVersion)
      return Status::NotSupported("the store at " + location_ + " has schema version " + std::to_string(version) +
                                  "; this moeedb reads version " + std::to_string(kSchemaVersion) +
                                  " and older: upgrade moeedb");
    for (int i = version; i < kSchemaVersion; ++i) {
      t.exec(kMigrations[i]);
      if (i == 2) BackfillShardKeys(t);
    }
    t.exec_params("INSERT INTO moeedb_meta VALUES ('schema_version', $1) "
                  "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                  std::to_string(kSchemaVersion));
    t.commit();
    return Status::OK();
  }));
  return EnsureShardIndex();
}

Status PostgresStore::EnsureShardIndex() {
  return WithConnection("indexing shard keys at " + location_, [&](pqxx::connection& c, const std::string&) -> Status {
    // true: built; false: left invalid by a build cut short; nullopt: none.
    const auto valid = [&]() -> std::optional<bool> {
      pqxx::result r = pqxx::nontransaction(c).exec(
          "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('moeedb_documents_shard')");
      if (r.empty()) return std::nullopt;
      return r[0][0].as<bool>();
    };
    // One node builds it; the others wait here, then find it built. The
    // lock is the session's: a connection lost meanwhile releases it. The
    // others poll with pg_try_advisory_lock, each try a statement of its
    // own, and sleep between tries outside any transaction: a session
    // blocked in pg_advisory_lock is a transaction the builder's CREATE
    // INDEX CONCURRENTLY waits to end, which PostgreSQL ends as a deadlock.
    // A build takes minutes at 100 M rows: every 30 s of waiting is logged
    // with the session holding the lock (one stuck behind a long
    // transaction, or whose client is gone, is for an operator to end).
    const auto started = std::chrono::steady_clock::now();
    auto next_log = started + std::chrono::seconds(30);
    for (;;) {
      if (valid() == true) return Status::OK();
      if (pqxx::nontransaction(c).exec("SELECT pg_try_advisory_lock(7325102368)")[0][0].as<bool>()) break;
      if (std::chrono::steady_clock::now() >= next_log) {
        pqxx::result h = pqxx::nontransaction(c).exec(
            "SELECT a.pid, coalesce(a.application_name, ''), coalesce(a.state, ''), left(coalesce(a.query, ''), 120) "
            "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 1 AND l.objid = 3030135072 "  // the key's halves
            "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) LIMIT 1");
        const auto waited = std::chrono::duration_cast<std::chrono::seconds>(next_log - started).count();
        LogLine("moeedb: waiting " + std::to_string(waited) + " s for the shard-key index another session builds at " +
                location_ +
                (h.empty() ? std::string()
                           : ": pid " + h[0][0].as<std::string>() + " '" + h[0][1].as<std::string>() + "', " +
                                 h[0][2].as<std::string>() + ", " + h[0][3].as<std::string>()));
        next_log += std::chrono::seconds(30);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    try {
      const std::optional<bool> now = valid();
      if (now == false) pqxx::nontransaction(c).exec("DROP INDEX CONCURRENTLY moeedb_documents_shard");
      if (now != true) pqxx::nontransaction(c).exec(kShardIndexSql);
    } catch (...) {
      // The lock goes with the error: the session may live on in a pool.
      try {
        pqxx::nontransaction(c).exec("SELECT pg_advisory_unlock(7325102368)");
      } catch (...) {
      }
      throw;
    }
    pqxx::nontransaction(c).exec("SELECT pg_advisory_unlock(7325102368)");
    return Status::OK();
  });
}

Result<CollectionRecord> PostgresStore::CreateCollection(const std::string& name, const std::string& spec_json) {
  MOEEDB_RETURN_IF_ERROR(CheckNewCollection(name, spec_json));
  return WithConnection("creating collection " + name,
                        [&](pqxx::connection& c, const std::string&) -> Result<CollectionRecord> {
    pqxx::work t(c);
    // SHARE waits for an alias change under way (and holds the next one off)
    // until this creation commits: a name is an alias's or a collection's.
    t.exec("LOCK TABLE moeedb_aliases IN SHARE MODE");
    pqxx::result a = t.exec_params("SELECT collection FROM moeedb_aliases WHERE alias = $1", name);
    if (!a.empty())
      return Status::InvalidArgument("'" + name + "' is an alias of collection '" + a[0][0].as<std::string>() + "'");
    pqxx::result r = t.exec_params(std::string("INSERT INTO moeedb_collections (name, spec) VALUES ($1, $2) "
                                               "ON CONFLICT (name) DO NOTHING RETURNING ") + kCollectionColumns,
                                   name, spec_json);
    if (r.empty()) return Status::InvalidArgument("collection '" + name + "' already exists");
    CollectionRecord rec = RecordOf(r[0]);
    t.commit();
    return rec;
  });
}

Result<CollectionRecord> PostgresStore::GetCollection(const std::string& name) const {
  return Read("reading collection " + name, [&](pqxx::connection& c) -> Result<CollectionRecord> {
    pqxx::read_transaction t(c);
    return LoadCollection(t, name);
  });
}

Result<Store::LogHead> PostgresStore::GetLogHead(const std::string& collection) const {
  return Read("reading the log's head of " + collection, [&](pqxx::connection& c) -> Result<LogHead> {
    pqxx::read_transaction t(c);
    LogHead head;
    MOEEDB_ASSIGN_OR_RETURN(head.record, LoadCollection(t, collection));
    pqxx::result r = t.exec_params("SELECT entry_id FROM moeedb_ops WHERE coll = $1 AND seq = $2", head.record.id,
                                   static_cast<int64_t>(head.record.last_op));
    if (!r.empty() && !r[0][0].is_null()) head.entry_id = r[0][0].as<std::string>();
    return head;
  });
}

Result<std::vector<CollectionRecord>> PostgresStore::ListCollections() const {
  return Read("listing collections", [&](pqxx::connection& c) -> Result<std::vector<CollectionRecord>> {
    pqxx::read_transaction t(c);
    std::vector<CollectionRecord> out;
    for (const auto& row : t.exec(std::string("SELECT ") + kCollectionColumns + " FROM moeedb_collections ORDER BY name"))
      out.push_back(RecordOf(row));
    return out;
  });
}

Status PostgresStore::DropCollection(const std::string& name) {
  // A write that deleted documents it replaces waits for the collection's
  // row, which this holds while it waits for those documents: PostgreSQL
  // ends one of the two (a deadlock); a drop so ended goes again.
  for (int attempt = 1;; ++attempt) {
    bool deadlocked = false;
    Status s = WithConnection("dropping collection " + name, [&](pqxx::connection& c, const std::string&) -> Status {
      pqxx::work t(c);
      try {
        t.exec("LOCK TABLE moeedb_aliases IN ROW EXCLUSIVE MODE");  // first, as UpdateAliases and CreateCollection take it
        pqxx::result gone = t.exec_params("DELETE FROM moeedb_collections WHERE name = $1 RETURNING id", name);
        if (gone.empty()) return Status::NotFound("no collection named '" + name + "'");
        // Its rows (no foreign keys cascade: postgres_rows.cpp's schema 8). A
        // write that updated the collection's row before the DELETE above
        // committed before it went on, so these statements' snapshots hold its
        // documents; one that comes to the row after finds it gone and commits
        // nothing.
        const int64_t id = gone[0][0].as<int64_t>();
        t.exec_params("DELETE FROM moeedb_documents WHERE coll = $1", id);
        t.exec_params("DELETE FROM moeedb_ops WHERE coll = $1", id);
        t.exec_params("DELETE FROM moeedb_aliases WHERE collection = $1", name);
      } catch (const pqxx::transaction_rollback& e) {
        deadlocked = true;
        return Status::Unavailable("dropping collection " + name + ": " + e.what());
      }
      t.exec(std::string("NOTIFY ") + kChangeChannel);  // other nodes close theirs
      t.commit();
      return Status::OK();
    });
    if (!deadlocked || attempt == 5) return s;
  }
}

Status PostgresStore::UpdateSpec(const std::string& name, const std::string& expected, const std::string& spec_json) {
  return WithConnection("updating collection " + name, [&](pqxx::connection& c, const std::string&) -> Status {
    pqxx::work t(c);
    if (t.exec_params("UPDATE moeedb_collections SET spec = $3 WHERE name = $1 AND spec = $2", name, expected, spec_json)
            .affected_rows() == 0) {
      if (t.exec_params("SELECT 1 FROM moeedb_collections WHERE name = $1", name).empty())
        return Status::NotFound("no collection named '" + name + "'");
      return Status::Conflict("collection " + name + "'s spec changed meanwhile");
    }
    t.commit();
    return Status::OK();
  });
}

Result<std::map<std::string, std::string>> PostgresStore::ListAliases() const {
  std::map<std::string, std::string> out;
  MOEEDB_RETURN_IF_ERROR(WithConnection("listing aliases", [&](pqxx::connection& c, const std::string&) -> Status {
    pqxx::read_transaction t(c);
    out.clear();
    for (const auto& row : t.exec("SELECT alias, collection FROM moeedb_aliases"))
      out[row[0].as<std::string>()] = row[1].as<std::string>();
    return Status::OK();
  }));
  return out;
}

Status PostgresStore::UpdateAliases(const std::map<std::string, std::string>& expected,
                                    const std::map<std::string, std::string>& aliases) {
  return WithConnection("changing aliases", [&](pqxx::connection& c, const std::string&) -> Status {
    pqxx::work t(c);
    // The alias table's lock orders this change against every create and
    // drop of a collection (each takes it first: CreateCollection SHARE,
    // DropCollection ROW EXCLUSIVE, both conflicting with this one), so the
    // collections read below stay as read until this commits. One writer of
    // the table at a time; readers go on.
    t.exec("LOCK TABLE moeedb_aliases IN SHARE ROW EXCLUSIVE MODE");
    for (const auto& [alias, collection] : aliases) {
      if (!t.exec_params("SELECT 1 FROM moeedb_collections WHERE name = $1", alias).empty())
        return Status::InvalidArgument("alias '" + alias + "': a collection has that name");
      if (t.exec_params("SELECT 1 FROM moeedb_collections WHERE name = $1", collection).empty())
        return Status::NotFound("no collection named '" + collection + "'");
    }
    std::map<std::string, std::string> now;
    for (const auto& row : t.exec("SELECT alias, collection FROM moeedb_aliases"))
      now[row[0].as<std::string>()] = row[1].as<std::string>();
    if (now != expected) return Status::Conflict("the aliases changed meanwhile");
    t.exec("DELETE FROM moeedb_aliases");
    for (const auto& [alias, collection] : aliases)
      t.exec_params("INSERT INTO moeedb_aliases (alias, collection) VALUES ($1, $2)", alias, collection);
    t.commit();
    return Status::OK();
  });
}

void PostgresStore::SetScanPageHookForTest(std::function<void()> hook) { page_hook_ = std::move(hook); }

void PostgresStore::SetCommitHookForTest(std::function<void(bool committed)> hook) { commit_hook_ = std::move(hook); }

Result<std::optional<uint64_t>> PostgresStore::FindWrite(const std::string& collection, const std::string& write_id,
                                                         std::chrono::steady_clock::time_point until) const {
  for (;;) {
    auto r = WithConnection("resolving a write to " + collection,
                            [&](pqxx::connection& c, const std::string&) -> Result<std::optional<uint64_t>> {
      pqxx::work t(c);  // rolled back: it must not wait for a standby at COMMIT
      // An attempt whose COMMIT was sent holds the collection's row (taken
      // in its last statement): wait for it to end, a while, then ask again.
      // An attempt not that far cannot commit (its client is this process,
      // which no longer sends it anything), and the write id's key would
      // refuse a second commit of the write all the same.
      t.exec("SET LOCAL lock_timeout = '2s'");
      try {
        // It waits for an attempt holding the row for its log entry (the
        // UPDATE's lock, which NO KEY UPDATE conflicts with).
        t.exec_params("SELECT 1 FROM moeedb_collections WHERE name = $1 FOR NO KEY UPDATE", collection);
      } catch (const pqxx::sql_error& e) {
        if (e.sqlstate() != "55P03") throw;  // lock_not_available
        return Status::Unavailable("resolving a write to " + collection + ": an attempt of it is still in flight");
      }
      pqxx::result row = t.exec_params("SELECT seq FROM moeedb_writes WHERE id = $1", write_id);
      if (row.empty()) return std::optional<uint64_t>();
      return std::optional<uint64_t>(row[0][0].as<uint64_t>());
    });
    const bool again = !r.ok() && (r.status().code() == Status::Code::kUnavailable ||
                                   r.status().code() == Status::Code::kOutcomeUnknown);
    if (!again || std::chrono::steady_clock::now() >= until) return r;
    std::this_thread::sleep_for(kRetryPause);
  }
}

// A write waiting in its collection's queue, and what its attempts did.
struct PostgresStore::PendingWrite {
  std::string what;
  size_t docs = 0;
  bool is_delete = false;
  DocumentsStep step;
  std::string write_id = NewWriteId();
  std::map<uint64_t, WriteResult> attempted;  // seq -> an attempt of it about to COMMIT
  std::optional<Result<WriteResult>> answer;  // set by its group's leader, under WriteGroups::mu
};

// Per collection: the transactions under way and the group queued next. The
// first write of the queued group leads it: once fewer than kWriteGroupsInFlight
// transactions of the collection are under way it takes the whole group and
// runs it as one transaction, while the writes arriving meanwhile queue as
// the next group. A collection's log entries are numbered one commit after
// another (its row is held from the entries to COMMIT, through the
// synchronous standby's wait): a commit carrying many writes' entries is
// what lets one collection's writes grow with its writers.
struct PostgresStore::WriteGroups {
  // A queued group's bounds, in documents and in writes (each write of a
  // group is a savepoint: past 64 subtransactions PostgreSQL's snapshots,
  // the standby's too, look them up on disk).
  static constexpr size_t kGroupDocs = 16384;
  static constexpr size_t kGroupWrites = 64;
  struct Queue {
    int in_flight = 0;
    std::vector<PendingWrite*> queued;
    size_t queued_docs = 0;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, Queue> queues;
};

Result<WriteResult> PostgresStore::CommitWrite(const std::string& collection, const std::string& what, size_t docs,
                                               bool is_delete, DocumentsStep step) {
  PendingWrite self;
  self.what = what;
  self.docs = docs;
  self.is_delete = is_delete;
  self.step = std::move(step);
  WriteGroups& g = *groups_;
  // The collection's queue, looked up at each wake: an idle one is erased.
  const auto queue = [&]() -> WriteGroups::Queue& { return g.queues[collection]; };
  std::unique_lock<std::mutex> lock(g.mu);
  g.cv.wait(lock, [&] {
    const WriteGroups::Queue& q = queue();
    return q.queued.empty() ||
           (q.queued_docs + docs <= WriteGroups::kGroupDocs && q.queued.size() < WriteGroups::kGroupWrites);
  });
  queue().queued.push_back(&self);
  queue().queued_docs += docs;
  g.cv.wait(lock, [&] {
    if (self.answer) return true;
    const WriteGroups::Queue& q = queue();
    return !q.queued.empty() && q.queued.front() == &self && q.in_flight < kWriteGroupsInFlight;
  });
  if (self.answer) return std::move(*self.answer);  // its group's leader committed it
  std::vector<PendingWrite*> group;
  group.swap(queue().queued);
  queue().queued_docs = 0;
  ++queue().in_flight;
  g.cv.notify_all();  // writes held back by a full group queue now
  lock.unlock();
  std::vector<Result<WriteResult>> answers;
  try {
    answers = CommitGroup(collection, group);
  } catch (const std::exception& e) {  // not the server's (those are Statuses): out of memory
    // A write that was about to COMMIT may be stored: its outcome is not known.
    answers.clear();
    for (const PendingWrite* w : group)
      answers.push_back(w->attempted.empty() ? Status::Internal(w->what + ": " + e.what())
                                             : Status::OutcomeUnknown(w->what + ": " + e.what()));
  }
  lock.lock();
  for (size_t i = 0; i < group.size(); ++i) group[i]->answer = std::move(answers[i]);
  if (--queue().in_flight == 0 && queue().queued.empty()) g.queues.erase(collection);
  g.cv.notify_all();
  return std::move(*self.answer);
}

namespace {
// Whether a unique violation is of `constraint`: it is named on the message's
// first line (the DETAIL line after it holds the key's values, a document's
// id among them). moeedb_documents_external: a concurrent write inserted one
// of these ids after this one's DELETE looked; moeedb_writes_pkey: an
// earlier attempt of this write committed.
bool Violates(const pqxx::unique_violation& e, const char* constraint) {
  const std::string first_line = std::string(e.what()).substr(0, std::string(e.what()).find('\n'));
  return first_line.find(std::string("\"") + constraint + "\"") != std::string::npos;
}
constexpr const char* kDocumentCollision = "moeedb_documents_external";
constexpr const char* kStoredBefore = "moeedb_writes_pkey";

// A write whose COMMIT's answer was lost, when PostgreSQL cannot be asked.
Status LostAnswer(const std::string& what, const Status& lookup) {
  return Status::OutcomeUnknown(what + ": the answer to its COMMIT was lost and PostgreSQL could not be asked since: "
                                "the write may or may not be stored (" + lookup.message() + ")");
}
}  // namespace

std::vector<Result<WriteResult>> PostgresStore::CommitGroup(const std::string& collection,
                                                            const std::vector<PendingWrite*>& group) {
  using Clock = std::chrono::steady_clock;
  const size_t n = group.size();
  const std::string what = n == 1 ? group[0]->what
                                  : "writing a group of " + std::to_string(n) + " writes to " + collection;
  std::vector<std::optional<Result<WriteResult>>> answers(n);
  const auto retry_until = Clock::now() + kWriteRetry;
  for (;;) {
    // The writes without an answer: upserts, then deletes (all were pending
    // at once, so any order is theirs to take), each kind in queue order. A
    // delete may take the collection's row early (to look again for ids a
    // concurrent replacement moved): after the upserts, it holds the row
    // while deletes alone go on.
    std::vector<size_t> open;
    for (int deletes = 0; deletes < 2; ++deletes)
      for (size_t i = 0; i < n; ++i)
        if (!answers[i] && group[i]->is_delete == (deletes == 1)) open.push_back(i);
    if (open.empty()) break;
    bool no_standby = false, stored_before = false, collided = false;
    std::vector<size_t> retry_later;  // writes of a group that collided: the next attempt takes them
    // What this attempt answers and logs, published once it commits (or, if
    // it changes nothing, as it is): an answer read inside the transaction
    // may rest on an earlier write of the group that never commits.
    std::vector<std::pair<size_t, Result<WriteResult>>> tentative;
    std::vector<std::pair<size_t, WriteResult>> logged;
    Status attempt = WithConnection(what, [&](pqxx::connection& c, const std::string& server) -> Status {
      retry_later.clear();
      tentative.clear();
      logged.clear();
      pqxx::work t(c);
      t.exec(std::string("SET LOCAL lock_timeout = '") + kWriteLockTimeout + "'");
      if (Status standby = HasSynchronousStandby(t); !standby.ok()) {
        no_standby = true;
        return standby.code() == Status::Code::kUnavailable ? Status::Unavailable(what + ": " + standby.message())
                                                            : Status::IOError(what + ": " + standby.message());
      }
      std::vector<std::pair<size_t, uint32_t>> to_log;  // (write, its collection's id)
      std::vector<WriteResult> res(n);
      try {
        for (size_t i : open) {
          std::optional<Result<std::optional<uint32_t>>> step;
          if (open.size() == 1) {
            step = group[i]->step(t, &res[i]);  // a failure ends the attempt
          } else {
            // Each write of a group behind a savepoint: one write's failure
            // (a Conflict, bad data, a collision with another node's write
            // of the same ids, its rows' lock timing out) leaves the others'
            // statements standing. SQL, not pqxx::subtransaction: libpqxx 6
            // begins one only at its first exec(), never at exec_params(),
            // which the steps use (and exec_params, unlike exec, leaves the
            // transaction to the savepoint when a statement fails).
            t.exec("SAVEPOINT write");
            try {
              step = group[i]->step(t, &res[i]);
            } catch (const pqxx::unique_violation& e) {
              if (!Violates(e, kDocumentCollision)) throw;
              retry_later.push_back(i);
            } catch (const pqxx::transaction_rollback&) {  // a deadlock between writes of the same ids
              retry_later.push_back(i);
            } catch (const pqxx::data_exception& e) {
              step = Result<std::optional<uint32_t>>(Status::InvalidArgument(group[i]->what + ": " + e.what()));
            } catch (const pqxx::sql_error& e) {
              if (e.sqlstate() != "55P03") throw;  // lock_not_available; a server-wide state ends the attempt
              retry_later.push_back(i);  // its rows' lock timed out: the next attempt tries again
            }
            t.exec(step && step->ok() ? "RELEASE SAVEPOINT write" : "ROLLBACK TO SAVEPOINT write");
            if (!step) continue;
          }
          if (!step->ok()) tentative.push_back({i, step->status()});  // its own answer (Conflict, NotFound)
          else if (!**step) tentative.push_back({i, res[i]});         // it changes nothing: no entry
          else to_log.push_back({i, ***step});
        }
        if (to_log.empty()) {
          // Nothing to commit (rolled back): the answers rest on committed rows only.
          for (auto& [i, a] : tentative) answers[i] = std::move(a);
          return Status::OK();
        }
        // The log entries last, in the order the documents went in.
        for (const auto& [i, coll] : to_log) {
          res[i].entry_id = group[i]->write_id;
          if (Status s = AppendToLog(t, coll, &res[i], group[i]->write_id); !s.ok()) {
            // The collection was dropped: nothing commits, every write of it answers so.
            for (size_t j : open) answers[j] = s;
            return Status::OK();
          }
        }
      } catch (const pqxx::unique_violation& e) {
        if (Violates(e, kStoredBefore)) {
          stored_before = true;  // an earlier attempt of one of these writes committed
          return Status::Unavailable("stored before");
        }
        if (!Violates(e, kDocumentCollision)) throw;
        collided = true;  // nothing of this attempt commits; the next one sees the other write
        return Status::Unavailable(what + ": kept colliding with concurrent writes of the same ids");
      } catch (const pqxx::transaction_rollback& e) {
        collided = true;
        return Status::Unavailable(what + ": kept colliding with concurrent writes of the same ids: " + e.what());
      }
      for (const auto& [i, coll] : to_log) {
        group[i]->attempted[res[i].seq] = res[i];
        logged.push_back({i, res[i]});
      }
      // The primary named again right before COMMIT: a write that waited for
      // its collection's row while the server's Patroni died must not
      // commit there (once a standby is promoted such a COMMIT would wait
      // for ever for a standby that left; docs/cluster.md).
      if (patroni_) {
        Result<std::string> primary = PrimaryUri();
        if (!primary.ok() || *primary != server) {
          logged.clear();  // not sent: nothing of it is stored
          return Status::Unavailable(what + ": the primary moved before COMMIT: nothing was written");
        }
      }
      if (commit_hook_) commit_hook_(false);
      t.commit();
      if (commit_hook_) commit_hook_(true);
      for (auto& [i, r] : logged) answers[i] = r;
      for (auto& [i, a] : tentative) answers[i] = std::move(a);
      try {
        NotifyChange(c);
      } catch (const std::exception&) {
        // Committed all the same: followers find it at their next poll.
      }
      return Status::OK();
    });
    if (attempt.ok()) {
      // Writes that collided inside the group go again, at once, until the
      // retry time is spent.
      if (!retry_later.empty() && Clock::now() >= retry_until)
        for (size_t i : retry_later)
          answers[i] = Status::Unavailable(group[i]->what + ": kept colliding with concurrent writes of the same ids "
                                           "(or waiting for their rows' locks)");
      continue;
    }
    const Status::Code code = attempt.code();
    if (code == Status::Code::kOutcomeUnknown && !logged.empty()) {
      // The COMMIT's answer was lost: the attempt's writes committed all or
      // none, so one of their ids, looked up on the primary of the moment,
      // tells (FindWrite waits for an attempt still in flight); none stored,
      // they are retried with the same ids, so at most one attempt commits.
      auto seq = FindWrite(collection, group[logged[0].first]->write_id, Clock::now() + kResolveFor);
      if (!seq.ok()) {
        for (size_t i : open) answers[i] = LostAnswer(group[i]->what, seq.status());
        break;
      }
      if (*seq) {
        if (**seq != logged[0].second.seq) {
          for (size_t i : open) answers[i] = Status::Internal(what + ": a write id was stored under an unknown number");
          break;
        }
        for (auto& [i, r] : logged) answers[i] = r;
        for (auto& [i, a] : tentative) answers[i] = std::move(a);
      } else if (Clock::now() >= retry_until) {
        for (size_t i : open)
          answers[i] = Status::Unavailable(group[i]->what + ": its COMMIT kept failing: nothing was written");
        break;
      }
      continue;
    }
    if (stored_before) {
      // An earlier attempt that was about to COMMIT did commit though a
      // lookup said otherwise: each write is looked up by its id; one not
      // stored goes again until the retry time is spent.
      for (size_t i : open) {
        PendingWrite& w = *group[i];
        if (w.attempted.empty()) continue;
        auto seq = FindWrite(collection, w.write_id, Clock::now() + kResolveFor);
        if (!seq.ok()) {
          answers[i] = LostAnswer(w.what, seq.status());
        } else if (*seq) {
          auto it = w.attempted.find(**seq);
          answers[i] = it == w.attempted.end()
                           ? Result<WriteResult>(Status::Internal(w.what + ": a write id was stored under an unknown number"))
                           : Result<WriteResult>(it->second);
        } else if (Clock::now() >= retry_until) {
          answers[i] = Status::Unavailable(w.what + ": not stored, and the retry time is spent");
        }
      }
      continue;
    }
    if (code == Status::Code::kUnavailable && !no_standby && Clock::now() < retry_until) {
      // A collision is over once the other write commits: retried at once.
      if (!collided) std::this_thread::sleep_for(kRetryPause);
      continue;
    }
    for (size_t i : open)
      if (!answers[i]) answers[i] = attempt;
    break;
  }
  std::vector<Result<WriteResult>> out;
  out.reserve(n);
  for (auto& a : answers) out.push_back(std::move(*a));
  return out;
}

Result<WriteResult> PostgresStore::Upsert(const std::string& collection, const std::vector<StoredDocument>& docs,
                                          bool sync) {
  return Write(collection, docs, nullptr, sync);
}

Result<WriteResult> PostgresStore::UpsertIfUnchanged(const std::string& collection,
                                                     const std::vector<StoredDocument>& docs,
                                                     const std::vector<uint64_t>& expected, bool sync) {
  if (expected.size() != docs.size()) return Status::InvalidArgument("one expected internal id per document");
  return Write(collection, docs, &expected, sync);
}

Result<std::optional<uint64_t>> PostgresStore::InternalId(const std::string& collection,
                                                          const std::string& external) const {
  return Read("reading " + collection, [&](pqxx::connection& c) -> Result<std::optional<uint64_t>> {
    pqxx::read_transaction t(c);
    MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(t, collection));
    pqxx::result row =
        t.exec_params("SELECT internal FROM moeedb_documents WHERE coll = $1 AND external = $2", r.id, external);
    if (row.empty()) return std::optional<uint64_t>();
    return std::optional<uint64_t>(row[0][0].as<uint64_t>());
  });
}

Result<WriteResult> PostgresStore::Write(const std::string& collection, const std::vector<StoredDocument>& docs,
                                         const std::vector<uint64_t>* expected, bool sync) {
  MOEEDB_RETURN_IF_ERROR(CheckBatchIds(docs));
  std::vector<std::string> records;
  for (const auto& d : docs) {
    MOEEDB_ASSIGN_OR_RETURN(std::string rec, DocumentRecord(d));
    records.push_back(std::move(rec));
  }
  if (docs.empty()) {
    MOEEDB_RETURN_IF_ERROR(GetCollection(collection).status());
    return WriteResult{};
  }
  return CommitWrite(collection, "writing to " + collection, docs.size(), /*is_delete=*/false,
                     [&](pqxx::transaction_base& t, WriteResult* out) -> Result<std::optional<uint32_t>> {
    MOEEDB_ASSIGN_OR_RETURN(PreparedWrite p, PrepareWrite(t, collection, docs.size()));
    WriteResult& res = *out;
    // The documents these ids replace, removed in one statement (their rows
    // locked: a concurrent write of the same ids waits for this one).
    std::vector<std::string> ids;
    for (const auto& d : docs) ids.push_back(d.id);
    const auto replaced = RemoveDocuments(t, p.coll, ids);
    for (size_t i = 0; expected != nullptr && i < docs.size(); ++i) {
      auto old = replaced.find(docs[i].id);
      if ((*expected)[i] != (old == replaced.end() ? 0 : old->second))
        return Status::Conflict("document '" + docs[i].id + "' of " + collection + " changed since it was read");
    }
    for (size_t i = 0; i < docs.size(); ++i) {
      auto old = replaced.find(docs[i].id);
      if (old != replaced.end()) res.removed.push_back(old->second);
    }
    res.added = p.internal;
    InsertDocuments(t, p.coll, res.added, docs, records);
    return std::optional<uint32_t>(p.coll);
  });
}

Result<WriteResult> PostgresStore::Delete(const std::string& collection, const std::vector<std::string>& ids,
                                          bool sync) {
  MOEEDB_RETURN_IF_ERROR(CheckDeleteIds(ids));
  return CommitWrite(collection, "deleting from " + collection, ids.size(), /*is_delete=*/true,
                     [&](pqxx::transaction_base& t, WriteResult* out) -> Result<std::optional<uint32_t>> {
    MOEEDB_ASSIGN_OR_RETURN(PreparedWrite p, PrepareWrite(t, collection, 0));
    WriteResult& res = *out;
    auto removed = RemoveDocuments(t, p.coll, ids);
    std::vector<std::string> missing;
    for (const auto& id : ids)
      if (!removed.count(id)) missing.push_back(id);
    if (!missing.empty()) {
      // The DELETE skips a row a concurrent replacement deleted while it
      // waited, and its snapshot misses the replacement's new row: absent
      // ids are asked again once this write holds the collection's row,
      // when every write ordered before it has committed (writes of the
      // documents still under way commit after it, so "not found" is true
      // at this write's place in the log).
      t.exec_params("SELECT 1 FROM moeedb_collections WHERE id = $1 FOR NO KEY UPDATE", p.coll);
      removed.merge(RemoveDocuments(t, p.coll, missing));
    }
    std::set<std::string> seen;
    for (const auto& id : ids) {
      if (!seen.insert(id).second) continue;
      auto old = removed.find(id);
      if (old == removed.end()) ++res.not_found;
      else res.removed.push_back(old->second);
    }
    if (res.removed.empty()) return std::optional<uint32_t>();  // nothing changed: no entry
    return std::optional<uint32_t>(p.coll);
  });
}

Result<std::optional<StoredDocument>> PostgresStore::Get(const std::string& collection,
                                                         const std::string& external) const {
  return Read("reading " + collection, [&](pqxx::connection& c) -> Result<std::optional<StoredDocument>> {
    pqxx::read_transaction t(c);
    MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(t, collection));
    pqxx::result row = t.exec_params("SELECT record, hs, rw FROM moeedb_documents WHERE coll = $1 AND external = $2",
                                     r.id, external);
    if (row.empty()) return std::optional<StoredDocument>();
    return DocumentOf(row[0], true);
  });
}

Result<StoredDocument> PostgresStore::GetByInternal(const std::string& collection, uint64_t internal,
                                                    bool with_vectors) const {
  MOEEDB_ASSIGN_OR_RETURN(auto docs, GetManyByInternal(collection, {internal}, with_vectors, ShardFilter()));
  if (!docs[0]) return Status::NotFound("document " + std::to_string(internal) + " of " + collection + " is not stored");
  return std::move(*docs[0]);
}

Result<std::vector<std::optional<StoredDocument>>> PostgresStore::GetManyByInternal(
    const std::string& collection, const std::vector<uint64_t>& internal_ids, bool with_vectors,
    const ShardFilter& shard) const {
  using Docs = std::vector<std::optional<StoredDocument>>;
  return Read("reading " + collection, [&](pqxx::connection& c) -> Result<Docs> {
    pqxx::read_transaction t(c);
    MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(t, collection));
    pqxx::result rows = t.exec_params(
        std::string("SELECT internal, record") + (with_vectors ? ", hs, rw" : "") +
            " FROM moeedb_documents WHERE coll = $1 AND internal = ANY($2::bigint[])" + ShardCondition(shard),
        r.id, ArrayLiteral(internal_ids));
    std::map<uint64_t, const pqxx::row*> by_id;
    std::vector<pqxx::row> kept(rows.begin(), rows.end());
    for (const auto& row : kept) by_id[row["internal"].as<uint64_t>()] = &row;
    Docs out;
    out.reserve(internal_ids.size());
    for (uint64_t id : internal_ids) {
      auto it = by_id.find(id);
      if (it == by_id.end()) {
        out.emplace_back();
        continue;
      }
      MOEEDB_ASSIGN_OR_RETURN(std::optional<StoredDocument> d, DocumentOf(*it->second, with_vectors));
      out.push_back(std::move(d));
    }
    return out;
  });
}

Result<DocumentPage> PostgresStore::ListDocuments(const std::string& collection, const std::string& after,
                                                  size_t limit) const {
  if (limit == 0) return Status::InvalidArgument("a page holds at least one document");
  return Read("listing " + collection, [&](pqxx::connection& c) -> Result<DocumentPage> {
    pqxx::read_transaction t(c);
    MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(t, collection));
    const std::string order = postgres::kIdOrderSql;
    pqxx::result rows = t.exec_params("SELECT record FROM moeedb_documents WHERE coll = $1 AND " + order + " > $2 ORDER BY " +
                                          order + " LIMIT $3",
                                      r.id, after.empty() ? std::string() : IdOrderKey(after),
                                      static_cast<int64_t>(limit) + 1);
    DocumentPage page;
    for (const auto& row : rows) {
      if (page.documents.size() == limit) {
        page.next_after = page.documents.back().id;
        break;
      }
      StoredDocument d;
      MOEEDB_RETURN_IF_ERROR(ParseDocumentRecord(row["record"].as<std::string>(), &d));
      page.documents.push_back(std::move(d));
    }
    return page;
  });
}

std::unique_ptr<PostgresStore::Connection> PostgresStore::StandbyPast(const std::string& lsn) const {
  if (!patroni_) return nullptr;
  try {
    Result<std::vector<std::string>> standbys = patroni_->SynchronousStandbys();
    if (!standbys.ok() || standbys->empty()) return nullptr;
    auto c = std::make_unique<Connection>(AnyServerUri(ServerUri(uri_, standbys->front())), /*writer=*/false,
                                          kScanSessionName);
    for (const auto until = std::chrono::steady_clock::now() + kStandbyScanWait;;) {
      pqxx::nontransaction t(c->c);
      pqxx::row r = t.exec_params1("SELECT pg_is_in_recovery(), coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)", lsn);
      // Promoted since Patroni named it: the primary's reads are as good.
      if (!r[0].as<bool>()) return nullptr;
      if (r[1].as<bool>()) return c;
      if (std::chrono::steady_clock::now() >= until) return nullptr;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  } catch (const std::exception&) {
    return nullptr;  // unreachable or refusing: the primary serves the scan
  }
}

Status PostgresStore::ScanDocuments(const std::string& collection, bool with_vectors, const ShardFilter& shard,
                                    const std::function<void(uint64_t, const StoredDocument&)>& fn) const {
  const std::string what = "scanning " + collection;
  // The collection, and the primary's WAL position: every commit visible
  // before this call (its caller's cursor included) lies below it.
  uint32_t coll = 0;
  std::string lsn;
  MOEEDB_RETURN_IF_ERROR(ReadPrimary(what, [&](pqxx::connection& c) -> Status {
    pqxx::read_transaction t(c);
    MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(t, collection));
    coll = r.id;
    // The insert position: past even a commit made without waiting for its
    // flush (synchronous_commit = off), visible before it is written.
    lsn = t.exec1("SELECT pg_current_wal_insert_lsn()::text")[0].as<std::string>();
    return Status::OK();
  }));
  // A shard placed by key ranges is read through the shard-key index, in
  // (shard_key, internal) order; every other scan in internal-id order (a
  // modulo-placed shard: the whole collection is walked).
  const bool by_key = !shard.all() && shard.layout == ShardLayout::kRange;
  const std::string columns = std::string("SELECT internal, shard_key, record") + (with_vectors ? ", hs, rw" : "");
  const std::string sql =
      by_key ? columns + " FROM moeedb_documents WHERE coll = $1 AND (shard_key, internal) > ($2, $3)" +
                   ShardCondition(shard) + " ORDER BY shard_key, internal LIMIT $4"
             : columns + " FROM moeedb_documents WHERE coll = $1 AND internal > $2" + ShardCondition(shard) +
                   " ORDER BY internal LIMIT $3";
  // Pages from the synchronous standby once it has replayed past `lsn`
  // (a replica's build kept off the primary), else from the primary; each
  // page a transaction of its own, so no snapshot is held for the whole
  // scan (a long one holds back vacuum, on the primary too through the
  // standby's feedback). Later pages may see later writes: a reader that
  // took its cursor before the call applies the log's entries after it again.
  std::unique_ptr<Connection> standby = StandbyPast(lsn);
  // The primary's pages on a session of the scan's own: OnSession follows
  // the primary Patroni names (the old one may show commits the new one
  // never had, their wait for the standby cancelled).
  Session primary;
  primary.name = kScanSessionName;
  int64_t last_key = -1, last_internal = -1;  // the last row handed out
  std::vector<std::pair<uint64_t, StoredDocument>> page;
  int64_t page_key = -1, page_internal = -1;  // the page's last row
  const auto read_page = [&](pqxx::connection& c) -> Status {
    page.clear();
    pqxx::nontransaction t(c);  // one statement: its own snapshot, one round trip
    pqxx::result rows = by_key ? t.exec_params(sql, coll, last_key, last_internal, kScanPage)
                               : t.exec_params(sql, coll, last_internal, kScanPage);
    for (const auto& row : rows) {
      MOEEDB_ASSIGN_OR_RETURN(std::optional<StoredDocument> d, DocumentOf(row, with_vectors));
      page.emplace_back(row["internal"].as<uint64_t>(), std::move(*d));
      page_key = row["shard_key"].as<int64_t>();
      page_internal = row["internal"].as<int64_t>();
    }
    return Status::OK();
  };
  for (;;) {
    Status read;
    if (standby) {
      try {
        read = read_page(standby->c);
      } catch (const std::exception&) {
        standby.reset();  // gone, or a query cancelled by its replay: the primary goes on from the same key
        continue;
      }
    } else {
      read = OnSession(what, &primary, /*primary=*/true, /*writer=*/false, read_page);
    }
    MOEEDB_RETURN_IF_ERROR(read);
    if (page_hook_) page_hook_();
    if (page.empty()) return Status::OK();
    last_key = page_key, last_internal = page_internal;
    // Handed out after the page's statement ended: `fn` may call the store.
    try {
      for (const auto& [id, d] : page) fn(id, d);
    } catch (const std::exception& e) {
      return Status::Internal(what + ": " + e.what());
    }
    if (page.size() < static_cast<size_t>(kScanPage)) return Status::OK();
  }
}

Status PostgresStore::ScanVectors(const std::string& collection,
                                  const std::function<void(uint64_t, const float*, size_t, const float*, size_t,
                                                           const std::string&)>& fn,
                                  const ShardFilter& shard) const {
  return ScanDocuments(collection, true, shard, [&](uint64_t id, const StoredDocument& d) {
    fn(id, d.hs.data(), d.hs.size(), d.rw.data(), d.rw.size(), d.metadata_json);
  });
}

Status PostgresStore::ScanMetadata(const std::string& collection,
                                   const std::function<void(uint64_t, const std::string&)>& fn,
                                   const ShardFilter& shard) const {
  return ScanDocuments(collection, false, shard, [&](uint64_t id, const StoredDocument& d) { fn(id, d.metadata_json); });
}

namespace {

// The first `limit` change-log entries of `collection` with seq > after, read on `c`.
Status LoadOps(pqxx::connection& c, const std::string& collection, uint64_t after, size_t limit,
               std::vector<OpRecord>* out) {
  std::vector<OpRecord>& ops = *out;
  {
    pqxx::read_transaction t(c);
    MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(t, collection));
    pqxx::result rows = t.exec_params(
        "SELECT seq, added, removed, entry_id FROM moeedb_ops WHERE coll = $1 AND seq > $2 ORDER BY seq LIMIT $3", r.id,
        static_cast<int64_t>(after), static_cast<int64_t>(std::min<size_t>(limit, INT64_MAX)));
    for (const auto& row : rows) {
      OpRecord op;
      op.seq = row["seq"].as<uint64_t>();
      MOEEDB_ASSIGN_OR_RETURN(op.added, ParseArray(row["added"].as<std::string>()));
      MOEEDB_ASSIGN_OR_RETURN(op.removed, ParseArray(row["removed"].as<std::string>()));
      if (!row["entry_id"].is_null()) op.entry_id = row["entry_id"].as<std::string>();
      ops.push_back(std::move(op));
    }
  }
  return Status::OK();
}

}  // namespace

Status PostgresStore::ReadOps(const std::string& collection, uint64_t after, size_t limit,
                              const std::function<void(const OpRecord&)>& fn) const {
  // Read whole, then handed out: `fn` may call the store.
  std::vector<OpRecord> ops;
  // From the primary only: a server that lost the primary role in a failover
  // may still hold entries the new primary never had and will number anew
  // (the entries' identities let a node notice later, but a search would
  // answer with them meanwhile).
  MOEEDB_RETURN_IF_ERROR(ReadPrimary("reading the change log of " + collection, [&](pqxx::connection& c) {
    return LoadOps(c, collection, after, limit, &ops);
  }));
  for (const OpRecord& op : ops) fn(op);
  return Status::OK();
}

Status PostgresStore::ReadOpsFromStandby(const std::string& collection, uint64_t after, size_t limit,
                                         const std::function<void(const OpRecord&)>& fn) const {
  if (!patroni_) return Store::ReadOpsFromStandby(collection, after, limit, fn);
  std::vector<OpRecord> ops;
  const auto session = fallback_reads_.Take();
  MOEEDB_RETURN_IF_ERROR(OnSession("reading the change log of " + collection + " from the synchronous standby",
                                   session.get(), /*primary=*/false, false, [&](pqxx::connection& c) {
                                     return LoadOps(c, collection, after, limit, &ops);
                                   }));
  for (const OpRecord& op : ops) fn(op);
  return Status::OK();
}

Status PostgresStore::TrimOps(const std::string& collection, uint64_t upto) {
  return WithConnection("trimming the change log of " + collection,
                        [&](pqxx::connection& c, const std::string&) -> Status {
    pqxx::work t(c);
    pqxx::result r = t.exec_params("DELETE FROM moeedb_ops o USING moeedb_collections c WHERE c.name = $1 AND "
                                   "o.coll = c.id AND o.seq <= $2",
                                   collection, static_cast<int64_t>(std::min<uint64_t>(upto, INT64_MAX)));
    if (r.affected_rows() == 0) MOEEDB_RETURN_IF_ERROR(LoadCollection(t, collection).status());
    t.commit();
    return Status::OK();
  });
}

Status PostgresStore::Checkpoint(const std::string&) const {
  return Status::NotSupported("a PostgreSQL store is backed up with PostgreSQL's tools (pg_basebackup, pg_dump)");
}

}  // namespace moeedb
