#include "storage/postgres_store.h"

#include <cstring>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

namespace moeedb {

using json = nlohmann::json;

namespace {

// Rows a scan reads at a time.
constexpr int kScanPage = 1000;

// Migrations, in order: statements taking the schema from version i to i + 1.
const char* const kMigrations[] = {
    // 0 -> 1
    "CREATE TABLE moeedb_collections ("
    "  id serial PRIMARY KEY,"
    "  name text NOT NULL UNIQUE,"
    "  spec text NOT NULL,"
    "  next_internal bigint NOT NULL DEFAULT 1,"
    "  last_op bigint NOT NULL DEFAULT 0,"
    "  doc_count bigint NOT NULL DEFAULT 0);"
    "CREATE TABLE moeedb_documents ("
    "  coll integer NOT NULL REFERENCES moeedb_collections(id) ON DELETE CASCADE,"
    "  internal bigint NOT NULL,"
    "  external text COLLATE \"C\" NOT NULL,"
    "  record text NOT NULL,"
    "  hs bytea NOT NULL,"
    "  rw bytea NOT NULL,"
    "  PRIMARY KEY (coll, internal));"
    "CREATE UNIQUE INDEX moeedb_documents_external ON moeedb_documents (coll, external);"
    "CREATE TABLE moeedb_ops ("
    "  coll integer NOT NULL REFERENCES moeedb_collections(id) ON DELETE CASCADE,"
    "  seq bigint NOT NULL,"
    "  added bigint[] NOT NULL,"
    "  removed bigint[] NOT NULL,"
    "  PRIMARY KEY (coll, seq));",
    // 1 -> 2: the id of every write, stored in the write's transaction, so a
    // commit whose answer was lost can be resolved on whichever server is
    // primary now (pg_xact_status is not: transaction ids restart their
    // meaning on a new timeline).
    "CREATE TABLE moeedb_writes ("
    "  id text PRIMARY KEY,"
    "  coll integer NOT NULL,"
    "  seq bigint NOT NULL,"
    "  at timestamptz NOT NULL DEFAULT now());"
    "CREATE INDEX moeedb_writes_at ON moeedb_writes (at);",
};

// How long a write keeps retrying while no primary answers (a failover takes
// a few seconds) before it answers Unavailable, and how long it keeps trying
// to learn the outcome of a commit whose answer was lost.
constexpr auto kWriteRetry = std::chrono::seconds(10);
constexpr auto kResolveFor = std::chrono::seconds(30);
constexpr auto kRetryPause = std::chrono::milliseconds(200);
// Write ids are kept this long (resolution needs them for seconds).
constexpr const char* kWriteIdsKept = "1 day";

// SQLSTATEs that mean "this server cannot take the statement now, another
// may": read-only (a standby, or a primary demoted under us), shutting down,
// starting up, or any connection exception (class 08).
bool IsUnavailableState(const std::string& state) {
  return state == "25006" || state == "57P01" || state == "57P02" || state == "57P03" || state.rfind("08", 0) == 0;
}

// A random 128-bit write id (hex).
std::string NewWriteId() {
  thread_local std::mt19937_64 rng(std::random_device{}() ^
                                   (static_cast<uint64_t>(std::hash<std::thread::id>{}(std::this_thread::get_id())) << 1));
  char out[33];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return out;
}

// The connection string for reads when no primary answers: the same servers,
// any of them (a standby serves reads with synchronous_commit = remote_apply
// making every acknowledged write visible there). libpq keeps the last value
// of a repeated parameter.
std::string AnyServerUri(const std::string& uri) {
  const bool url = uri.rfind("postgresql://", 0) == 0 || uri.rfind("postgres://", 0) == 0;
  if (url) return uri + (uri.find('?') == std::string::npos ? "?" : "&") + "target_session_attrs=any";
  return uri + " target_session_attrs=any";
}

// The URI without its password (for messages and location()).
std::string HidePassword(const std::string& uri) {
  static const std::regex kUserinfo(R"(^(postgres(?:ql)?://[^:/@]*):[^@/]*@)");
  static const std::regex kParam(R"((password=)[^&\s]*)");
  return std::regex_replace(std::regex_replace(uri, kUserinfo, "$1:***@"), kParam, "$1***");
}

std::string ArrayLiteral(const std::vector<uint64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s + "}";
}

// A text[] literal: every element quoted, '"' and '\\' escaped.
std::string TextArrayLiteral(const std::vector<std::string>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += '"';
    for (char ch : v[i]) {
      if (ch == '"' || ch == '\\') s += '\\';
      s += ch;
    }
    s += '"';
  }
  return s + "}";
}

// A bigint[] column's text form, "{1,2,3}".
Result<std::vector<uint64_t>> ParseArray(const std::string& s) {
  std::vector<uint64_t> out;
  if (s.size() < 2 || s.front() != '{' || s.back() != '}') return Status::Corruption("damaged change-log entry");
  std::stringstream in(s.substr(1, s.size() - 2));
  for (std::string item; std::getline(in, item, ',');) {
    try {
      out.push_back(std::stoull(item));
    } catch (...) {
      return Status::Corruption("damaged change-log entry");
    }
  }
  return out;
}

pqxx::binarystring Bytes(const std::vector<float>& v) { return pqxx::binarystring(v.data(), v.size() * sizeof(float)); }

std::vector<float> Floats(const pqxx::field& f) {
  const pqxx::binarystring b(f);
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), v.size() * sizeof(float));
  return v;
}

CollectionRecord RecordOf(const pqxx::row& r) {
  CollectionRecord c;
  c.id = r["id"].as<uint32_t>();
  c.name = r["name"].as<std::string>();
  c.spec_json = r["spec"].as<std::string>();
  c.next_internal = r["next_internal"].as<uint64_t>();
  c.last_op = r["last_op"].as<uint64_t>();
  c.count = r["doc_count"].as<uint64_t>();
  return c;
}

const char* kCollectionColumns = "id, name, spec, next_internal, last_op, doc_count";

Result<CollectionRecord> LoadCollection(pqxx::transaction_base& t, const std::string& name) {
  pqxx::result r =
      t.exec_params(std::string("SELECT ") + kCollectionColumns + " FROM moeedb_collections WHERE name = $1", name);
  if (r.empty()) return Status::NotFound("no collection named '" + name + "'");
  return RecordOf(r[0]);
}

// The collection's row, locked for this transaction's write, its last_op
// already advanced to the write's sequence number (see the header).
Result<CollectionRecord> LockForWrite(pqxx::transaction_base& t, const std::string& name) {
  pqxx::result r = t.exec_params(std::string("UPDATE moeedb_collections SET last_op = last_op + 1 WHERE name = $1 "
                                             "RETURNING ") + kCollectionColumns,
                                 name);
  if (r.empty()) return Status::NotFound("no collection named '" + name + "'");
  return RecordOf(r[0]);
}

Result<std::optional<StoredDocument>> DocumentOf(const pqxx::row& row, bool with_vectors) {
  StoredDocument d;
  MOEEDB_RETURN_IF_ERROR(ParseDocumentRecord(row["record"].as<std::string>(), &d));
  if (with_vectors) {
    d.hs = Floats(row["hs"]);
    d.rw = Floats(row["rw"]);
  }
  return std::optional<StoredDocument>(std::move(d));
}

}  // namespace

struct PostgresStore::Connection {
  explicit Connection(const std::string& uri) : c(uri) {}
  pqxx::connection c;
};

// The channel every write notifies on.
constexpr const char* kChangeChannel = "moeedb_changes";

struct PostgresStore::Listener {
  struct Receiver : pqxx::notification_receiver {
    using pqxx::notification_receiver::notification_receiver;
    void operator()(const std::string&, int) override {}
  };
  explicit Listener(const std::string& uri) : c(uri), receiver(c, kChangeChannel) {}
  pqxx::connection c;
  Receiver receiver;
};

bool PostgresStore::WaitForChange(int timeout_ms) const {
  std::lock_guard<std::mutex> lock(listen_mu_);
  try {
    if (!listener_ || !listener_->c.is_open()) {
      listener_.reset();
      listener_ = std::make_unique<Listener>(uri_);
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
auto PostgresStore::WithConnection(const std::string& what, Fn&& fn) const {
  std::lock_guard<std::mutex> lock(mu_);
  return Guarded(what, &conn_, [&] {
    if (!conn_ || !conn_->c.is_open()) conn_ = std::make_unique<Connection>(uri_);
    return fn(conn_->c);
  });
}

template <typename Fn>
auto PostgresStore::WithOwnConnection(const std::string& what, Fn&& fn) const {
  return Guarded(what, nullptr, [&] {
    pqxx::connection c(uri_);
    return fn(c);
  });
}

namespace {
const Status& StatusOf(const Status& s) { return s; }
template <typename T>
const Status& StatusOf(const Result<T>& r) { return r.status(); }
}  // namespace

template <typename Fn>
auto PostgresStore::ReadPrimary(const std::string& what, Fn&& fn) const {
  auto r = WithConnection(what, fn);
  // The connection may have died with a server long gone (a failover since
  // it was last used): a new one finds the primary of the moment.
  if (StatusOf(r).code() == Status::Code::kUnavailable) r = WithConnection(what, fn);
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
  std::lock_guard<std::mutex> lock(read_mu_);
  auto any = [&] {
    return Guarded(what, &read_conn_, [&] {
      if (!read_conn_ || !read_conn_->c.is_open()) read_conn_ = std::make_unique<Connection>(AnyServerUri(uri_));
      return fn(read_conn_->c);
    });
  };
  auto r = any();
  if (StatusOf(r).code() == Status::Code::kUnavailable) r = any();
  return r;
}

PostgresStore::~PostgresStore() = default;

Result<std::unique_ptr<PostgresStore>> PostgresStore::Open(const std::string& uri) {
  std::unique_ptr<PostgresStore> s(new PostgresStore());
  s->uri_ = uri;
  s->location_ = HidePassword(uri);
  MOEEDB_RETURN_IF_ERROR(s->Migrate());
  return s;
}

Status PostgresStore::Migrate() {
  return WithConnection("opening " + location_, [&](pqxx::connection& c) -> Status {
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
    for (int i = version; i < kSchemaVersion; ++i) t.exec(kMigrations[i]);
    t.exec_params("INSERT INTO moeedb_meta VALUES ('schema_version', $1) "
                  "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                  std::to_string(kSchemaVersion));
    t.commit();
    return Status::OK();
  });
}

Result<CollectionRecord> PostgresStore::CreateCollection(const std::string& name, const std::string& spec_json) {
  MOEEDB_RETURN_IF_ERROR(CheckNewCollection(name, spec_json));
  return WithConnection("creating collection " + name, [&](pqxx::connection& c) -> Result<CollectionRecord> {
    pqxx::work t(c);
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
  return WithConnection("dropping collection " + name, [&](pqxx::connection& c) -> Status {
    pqxx::work t(c);
    if (t.exec_params("DELETE FROM moeedb_collections WHERE name = $1", name).affected_rows() == 0)
      return Status::NotFound("no collection named '" + name + "'");
    t.exec(std::string("NOTIFY ") + kChangeChannel);  // other nodes close theirs
    t.commit();
    return Status::OK();
  });
}

Status PostgresStore::UpdateSpec(const std::string& name, const std::string& spec_json) {
  return WithConnection("updating collection " + name, [&](pqxx::connection& c) -> Status {
    pqxx::work t(c);
    if (t.exec_params("UPDATE moeedb_collections SET spec = $2 WHERE name = $1", name, spec_json).affected_rows() == 0)
      return Status::NotFound("no collection named '" + name + "'");
    t.commit();
    return Status::OK();
  });
}

namespace {

// Deletes the collection's documents of these external ids in one statement;
// external id -> internal id of each one that was there.
std::map<std::string, uint64_t> RemoveDocuments(pqxx::transaction_base& t, uint32_t coll,
                                                const std::vector<std::string>& ids) {
  std::map<std::string, uint64_t> removed;
  for (const auto& row : t.exec_params("DELETE FROM moeedb_documents WHERE coll = $1 AND external = ANY($2::text[]) "
                                       "RETURNING external, internal",
                                       coll, TextArrayLiteral(ids)))
    removed[row[0].as<std::string>()] = row[1].as<uint64_t>();
  return removed;
}

// A write's last statements before COMMIT: its change-log entry (numbered
// by LockForWrite), the collection's counters, its write id (a unique
// violation if an earlier attempt of the same write committed), the NOTIFY
// that wakes other nodes.
void LogChange(pqxx::work& t, const CollectionRecord& r, const WriteResult& res, uint64_t next_internal,
               const std::string& write_id) {
  t.exec_params("INSERT INTO moeedb_ops (coll, seq, added, removed) VALUES ($1, $2, $3::bigint[], $4::bigint[])", r.id,
                res.seq, ArrayLiteral(res.added), ArrayLiteral(res.removed));
  const int64_t live_delta = static_cast<int64_t>(res.added.size()) - static_cast<int64_t>(res.removed.size());
  t.exec_params("UPDATE moeedb_collections SET next_internal = $2, doc_count = doc_count + $3 WHERE id = $1", r.id,
                next_internal, live_delta);
  t.exec_params("INSERT INTO moeedb_writes (id, coll, seq) VALUES ($1, $2, $3)", write_id, r.id, res.seq);
  if (res.seq % 1024 == 0)
    t.exec(std::string("DELETE FROM moeedb_writes WHERE at < now() - interval '") + kWriteIdsKept + "'");
  t.exec(std::string("NOTIFY ") + kChangeChannel);  // delivered at commit
}

// The documents as rows, many per INSERT (one statement per row would cost a
// round trip each): parameters grouped by column, external ids, records,
// then the vectors as binary parameters; the integers are written inline.
void InsertDocuments(pqxx::work& t, uint32_t coll, const std::vector<uint64_t>& internal,
                     const std::vector<StoredDocument>& docs, const std::vector<std::string>& records) {
  constexpr size_t kRowsPerStatement = 512;  // 2048 parameters, far below the protocol's 65535
  for (size_t from = 0; from < docs.size(); from += kRowsPerStatement) {
    const size_t n = std::min(kRowsPerStatement, docs.size() - from);
    std::vector<std::string> ids, recs;
    std::vector<pqxx::binarystring> hs, rw;
    std::string sql = "INSERT INTO moeedb_documents (coll, internal, external, record, hs, rw) VALUES ";
    for (size_t i = 0; i < n; ++i) {
      const StoredDocument& d = docs[from + i];
      ids.push_back(d.id);
      recs.push_back(records[from + i]);
      hs.push_back(Bytes(d.hs));
      rw.push_back(Bytes(d.rw));
      const auto p = [&](size_t group) { return "$" + std::to_string(group * n + i + 1); };
      sql += (i ? ",(" : "(") + std::to_string(coll) + "," + std::to_string(internal[from + i]) + "," + p(0) + "," +
             p(1) + "," + p(2) + "," + p(3) + ")";
    }
    t.exec_params(sql, pqxx::prepare::make_dynamic_params(ids), pqxx::prepare::make_dynamic_params(recs),
                  pqxx::prepare::make_dynamic_params(hs), pqxx::prepare::make_dynamic_params(rw));
  }
}

// False when the server requires a synchronous standby (Patroni's strict
// synchronous mode sets synchronous_standby_names) and none is streaming: a
// COMMIT would wait until one comes back, and cancelling that wait does not
// undo the commit locally. Reading sync_state needs pg_monitor (or superuser).
bool HasSynchronousStandby(pqxx::work& t) {
  return t.exec("SELECT current_setting('synchronous_standby_names') = '' OR EXISTS (SELECT 1 FROM "
                "pg_stat_replication WHERE state = 'streaming' AND sync_state IN ('sync', 'quorum'))")[0][0]
      .as<bool>();
}

}  // namespace

void PostgresStore::SetCommitHookForTest(std::function<void(bool committed)> hook) { commit_hook_ = std::move(hook); }

Result<std::optional<uint64_t>> PostgresStore::FindWrite(const std::string& collection, const std::string& write_id,
                                                         std::chrono::steady_clock::time_point until) const {
  for (;;) {
    auto r = WithConnection("resolving a write to " + collection, [&](pqxx::connection& c) -> Result<std::optional<uint64_t>> {
      pqxx::work t(c);  // rolled back: it must not wait for a standby at COMMIT
      // An attempt still in flight holds the collection's row: wait for it
      // to end, a while (lock_not_available is retried below).
      t.exec("SET LOCAL lock_timeout = '2s'");
      t.exec_params("SELECT 1 FROM moeedb_collections WHERE name = $1 FOR UPDATE", collection);
      pqxx::result row = t.exec_params("SELECT seq FROM moeedb_writes WHERE id = $1", write_id);
      if (row.empty()) return std::optional<uint64_t>();
      return std::optional<uint64_t>(row[0][0].as<uint64_t>());
    });
    const bool again = !r.ok() && (r.status().code() == Status::Code::kUnavailable ||
                                   r.status().code() == Status::Code::kOutcomeUnknown ||
                                   r.status().message().find("lock timeout") != std::string::npos);
    if (!again || std::chrono::steady_clock::now() >= until) return r;
    std::this_thread::sleep_for(kRetryPause);
  }
}

template <typename Fn>
Result<WriteResult> PostgresStore::CommitWrite(const std::string& collection, const std::string& what, bool sync,
                                               Fn&& write) {
  using Clock = std::chrono::steady_clock;
  const std::string write_id = NewWriteId();
  std::map<uint64_t, WriteResult> attempted;  // seq -> an attempt that reached COMMIT
  bool uncertain = false;                     // an attempt's COMMIT answer was lost
  const auto retry_until = Clock::now() + kWriteRetry;
  for (;;) {
    bool no_standby = false, stored_before = false;
    Result<WriteResult> r = WithConnection(what, [&](pqxx::connection& c) -> Result<WriteResult> {
      pqxx::work t(c);
      if (!sync) {
        t.exec("SET LOCAL synchronous_commit = off");
      } else if (!HasSynchronousStandby(t)) {
        no_standby = true;
        return Status::Unavailable(what + ": PostgreSQL has no synchronous standby now (after a failover, until "
                                   "the old primary rejoins): nothing was written; retry in a few seconds");
      }
      WriteResult res;
      try {
        MOEEDB_ASSIGN_OR_RETURN(bool commit, write(t, write_id, &res));
        if (!commit) return res;  // nothing changed: rolled back
      } catch (const pqxx::unique_violation& e) {
        if (std::string(e.what()).find("moeedb_writes") == std::string::npos) throw;
        stored_before = true;  // an earlier attempt of this write committed
        return Status::Unavailable("stored before");
      }
      attempted[res.seq] = res;
      if (commit_hook_) commit_hook_(false);
      t.commit();
      if (commit_hook_) commit_hook_(true);
      return res;
    });
    if (r.ok()) return r;
    if (no_standby && !uncertain) return r.status();
    const Status::Code code = r.status().code();
    if (code == Status::Code::kOutcomeUnknown || stored_before || (uncertain && code == Status::Code::kUnavailable)) {
      uncertain = true;
      auto seq = FindWrite(collection, write_id, Clock::now() + kResolveFor);
      if (!seq.ok())
        return Status::OutcomeUnknown(what + ": the answer to its COMMIT was lost and PostgreSQL could not be asked "
                                      "since: the write may or may not be stored (" + seq.status().message() + ")");
      if (*seq) {
        auto it = attempted.find(**seq);
        if (it == attempted.end()) return Status::Internal(what + ": a write id was stored under an unknown number");
        return it->second;
      }
      uncertain = false;  // not stored, and no attempt is in flight: retry (same id: one attempt at most commits)
      continue;
    }
    if (code == Status::Code::kUnavailable && Clock::now() < retry_until) {
      std::this_thread::sleep_for(kRetryPause);
      continue;
    }
    return r.status();
  }
}

Result<WriteResult> PostgresStore::Upsert(const std::string& collection, const std::vector<StoredDocument>& docs,
                                          bool sync) {
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
  return CommitWrite(collection, "writing to " + collection, sync,
                     [&](pqxx::work& t, const std::string& write_id, WriteResult* out) -> Result<bool> {
    MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LockForWrite(t, collection));
    WriteResult& res = *out;
    res.seq = r.last_op;
    // The documents these ids replace, removed in one statement.
    std::vector<std::string> ids;
    for (const auto& d : docs) ids.push_back(d.id);
    const auto replaced = RemoveDocuments(t, r.id, ids);
    uint64_t next = r.next_internal;
    for (size_t i = 0; i < docs.size(); ++i) {
      auto old = replaced.find(docs[i].id);
      if (old != replaced.end()) res.removed.push_back(old->second);
      res.added.push_back(next++);
    }
    InsertDocuments(t, r.id, res.added, docs, records);
    LogChange(t, r, res, next, write_id);
    return true;
  });
}

Result<WriteResult> PostgresStore::Delete(const std::string& collection, const std::vector<std::string>& ids,
                                          bool sync) {
  return CommitWrite(collection, "deleting from " + collection, sync,
                     [&](pqxx::work& t, const std::string& write_id, WriteResult* out) -> Result<bool> {
    MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LockForWrite(t, collection));
    WriteResult& res = *out;
    const auto removed = RemoveDocuments(t, r.id, ids);
    std::set<std::string> seen;
    for (const auto& id : ids) {
      if (!seen.insert(id).second) continue;
      auto old = removed.find(id);
      if (old == removed.end()) ++res.not_found;
      else res.removed.push_back(old->second);
    }
    if (res.removed.empty()) return false;  // nothing changed: the advanced last_op is rolled back
    res.seq = r.last_op;
    LogChange(t, r, res, r.next_internal, write_id);
    return true;
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
  MOEEDB_ASSIGN_OR_RETURN(auto docs, GetManyByInternal(collection, {internal}, with_vectors));
  if (!docs[0]) return Status::NotFound("document " + std::to_string(internal) + " of " + collection + " is not stored");
  return std::move(*docs[0]);
}

Result<std::vector<std::optional<StoredDocument>>> PostgresStore::GetManyByInternal(
    const std::string& collection, const std::vector<uint64_t>& internal_ids, bool with_vectors) const {
  using Docs = std::vector<std::optional<StoredDocument>>;
  return Read("reading " + collection, [&](pqxx::connection& c) -> Result<Docs> {
    pqxx::read_transaction t(c);
    MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(t, collection));
    pqxx::result rows = t.exec_params(
        std::string("SELECT internal, record") + (with_vectors ? ", hs, rw" : "") +
            " FROM moeedb_documents WHERE coll = $1 AND internal = ANY($2::bigint[])",
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
    pqxx::result rows = t.exec_params(
        "SELECT record FROM moeedb_documents WHERE coll = $1 AND external > $2 ORDER BY external LIMIT $3", r.id, after,
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

Status PostgresStore::ScanDocuments(const std::string& collection, bool with_vectors,
                                    const std::function<void(uint64_t, const StoredDocument&)>& fn) const {
  return WithOwnConnection("scanning " + collection, [&](pqxx::connection& c) -> Status {
    pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> t(c);
    MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(t, collection));
    for (int64_t last = -1;;) {
      pqxx::result rows = t.exec_params(std::string("SELECT internal, record") + (with_vectors ? ", hs, rw" : "") +
                                            " FROM moeedb_documents WHERE coll = $1 AND internal > $2 "
                                            "ORDER BY internal LIMIT $3",
                                        r.id, last, kScanPage);
      for (const auto& row : rows) {
        MOEEDB_ASSIGN_OR_RETURN(std::optional<StoredDocument> d, DocumentOf(row, with_vectors));
        last = row["internal"].as<int64_t>();
        fn(static_cast<uint64_t>(last), *d);
      }
      if (rows.size() < static_cast<size_t>(kScanPage)) return Status::OK();
    }
  });
}

Status PostgresStore::ScanVectors(const std::string& collection,
                                  const std::function<void(uint64_t, const float*, size_t, const float*, size_t,
                                                           const std::string&)>& fn) const {
  return ScanDocuments(collection, true, [&](uint64_t id, const StoredDocument& d) {
    fn(id, d.hs.data(), d.hs.size(), d.rw.data(), d.rw.size(), d.metadata_json);
  });
}

Status PostgresStore::ScanMetadata(const std::string& collection,
                                   const std::function<void(uint64_t, const std::string&)>& fn) const {
  return ScanDocuments(collection, false, [&](uint64_t id, const StoredDocument& d) { fn(id, d.metadata_json); });
}

Status PostgresStore::ReadOps(const std::string& collection, uint64_t after,
                              const std::function<void(const OpRecord&)>& fn) const {
  // Read whole, then handed out: `fn` may call the store.
  std::vector<OpRecord> ops;
  // From the primary only: a server that lost the primary role in a failover
  // may still hold entries the new primary never had and will number anew.
  MOEEDB_RETURN_IF_ERROR(ReadPrimary("reading the change log of " + collection, [&](pqxx::connection& c) -> Status {
    pqxx::read_transaction t(c);
    MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(t, collection));
    pqxx::result rows = t.exec_params(
        "SELECT seq, added, removed FROM moeedb_ops WHERE coll = $1 AND seq > $2 ORDER BY seq", r.id,
        static_cast<int64_t>(after));
    for (const auto& row : rows) {
      OpRecord op;
      op.seq = row["seq"].as<uint64_t>();
      MOEEDB_ASSIGN_OR_RETURN(op.added, ParseArray(row["added"].as<std::string>()));
      MOEEDB_ASSIGN_OR_RETURN(op.removed, ParseArray(row["removed"].as<std::string>()));
      ops.push_back(std::move(op));
    }
    return Status::OK();
  }));
  for (const OpRecord& op : ops) fn(op);
  return Status::OK();
}

Status PostgresStore::TrimOps(const std::string& collection, uint64_t) {
  // Other nodes may not have applied what this node's snapshot covers: the
  // log is kept whole here (nodes follow it from their own cursors).
  return GetCollection(collection).status();
}

Status PostgresStore::Checkpoint(const std::string&) const {
  return Status::NotSupported("a PostgreSQL store is backed up with PostgreSQL's tools (pg_basebackup, pg_dump)");
}

}  // namespace moeedb
