// PostgresStore: the store in a PostgreSQL database (libpqxx), for several
// moeedb nodes serving one database. Tables (schema version 8, created or
// migrated at open; a database of a newer schema is refused):
//
//   moeedb_meta         key -> value ("schema_version")
//   moeedb_collections  id (never reused), name, spec, next_internal,
//                       last_op, doc_count
//   moeedb_documents    (coll, internal) -> external id, {"id","text",
//                       "metadata"} record, hs and rw as raw little-endian
//                       float32 bytes (bytea)
//   moeedb_ops          (coll, seq) -> internal ids added and removed
//   moeedb_writes       write id -> (coll, seq): resolves lost commit answers
//   moeedb_aliases      alias -> collection name
//   moeedb_internal_ids a sequence: every document row's internal id
//
// A write's statements, in order: its collection's id and new internal ids
// (the sequence moeedb_internal_ids: ids are unique, not the log's numbers),
// the documents it replaces deleted (their rows locked: writes of the same
// ids queue there; a write whose insert then collides with one committed
// meanwhile is retried), its documents inserted (one statement), and last,
// in one statement,
//   UPDATE moeedb_collections SET last_op = last_op + 1 ... RETURNING last_op
// with the change-log entry and the write id; then COMMIT. The row lock that
// UPDATE takes makes the transactions of one collection commit one after
// another from there, so the log's numbers are gapless and in commit order
// (an aborted write rolls its number back with it); taken last (a delete
// that looks again for ids a concurrent replacement moved takes it before
// that look), it is held only for those statements and the COMMIT (with its wait for the synchronous
// standby), while the documents of concurrent writes go in side by side on a
// pool of write connections (write_connections=N, moeedb's parameter, 1-64,
// default 4). A node runs at most kWriteGroupsInFlight transactions of one
// collection at once; the writes to it that arrive meanwhile queue (up to
// 64 writes, 16,384 documents) and then go in one transaction: upserts, then
// deletes, each kind in the order it queued, each write's statements behind
// a savepoint (its Conflict, bad data or collision leaves the others) and
// each with its own log entry. Answers read inside the transaction are given
// once it commits. A commit then carries many writes, so a collection's
// write rate grows with its writers. A sequence would not do for the log: a number
// taken before commit can become visible after a larger one, and a follower
// reading "everything above my cursor" would skip it. Writes are acknowledged after COMMIT
// returns; NOTIFY follows in a transaction of its own (a NOTIFY inside the
// write would hold PostgreSQL's one notify lock, which every notifying
// commit of the server takes, through the write's WAL flush and its wait for
// the synchronous standby); a notification lost with a crash between the
// two costs a follower one poll period.
//
// High availability (a primary and synchronous standbys under Patroni;
// docs/cluster.md): `uri` may name several servers with
// target_session_attrs=read-write, so a connection finds the primary; with
// moeedb's own parameter patroni=HOST:PORT,... (Patroni's REST APIs) the
// primary is the server Patroni's leader names (PatroniMembers: a postgres
// whose Patroni died is fenced off), and the connections follow it. A
// write whose connection fails before COMMIT retries for a while (a failover
// takes seconds), then answers Unavailable. A write whose COMMIT answer was
// lost looks its write id up on the primary of the moment: stored, it is
// acknowledged; not stored, it is retried with the same id (so at most one
// attempt commits); not answerable, OutcomeUnknown. A write needing a
// synchronous standby while none streams answers Unavailable at once rather
// than hang at COMMIT. A node frozen inside a write (SIGSTOP, a paused VM)
// holds its collection's row or its documents' rows: PostgreSQL ends its session once it has idled
// 5 s in the transaction, and a write waits at most 8 s for the row before it
// retries; reads run on connections apart from the writes', a pool of
// read_connections=N (moeedb's parameter, 1-64, default 4) per server kind,
// each read on the least busy one. Reads of
// documents fall back, while no primary answers, to a synchronous standby
// as Patroni names it (without patroni=, to any of the servers), so a node
// keeps serving searches; the change log is read from the primary only (a
// failed primary, restarted, may hold entries the new one never had until
// it rejoins).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "storage/patroni_members.h"
#include "storage/store.h"

namespace pqxx {
class transaction_base;  // libpqxx's (its headers stay in the .cpp)
}  // namespace pqxx

namespace moeedb {

class PostgresStore final : public Store {
 public:
  // How long a read waits, while Patroni names neither a primary nor a
  // synchronous standby, for one of them (a promotion takes well under this).
  static constexpr std::chrono::milliseconds kReadFailoverWait{1500};
  // The application_name of a scan's sessions, as pg_stat_activity shows
  // them (a replica's build reading its shard).
  static constexpr const char* kScanSessionName = "moeedb scan";
  // How long a scan waits for the synchronous standby to replay what the
  // primary had committed when it began, before it reads the primary instead.
  static constexpr std::chrono::milliseconds kStandbyScanWait{1000};
  // The schema version this build reads and writes.
  static constexpr int kSchemaVersion = 9;
  // Connections in each read pool (the primary's, the fallback's) unless
  // read_connections= says otherwise.
  static constexpr int kDefaultReadConnections = 4;
  // Connections writes (and DDL) run on unless write_connections= says
  // otherwise: concurrent writes of a node commit side by side up to it.
  static constexpr int kDefaultWriteConnections = 4;
  // Transactions of one collection a node runs at once; writes to it that
  // come meanwhile queue and then commit together in one transaction (each
  // with its own log entry), as the collection's commits follow one another
  // (the header above). More than one, so a group's documents go in while
  // the one before it waits for its commit.
  static constexpr int kWriteGroupsInFlight = 4;

  // Connects to `uri` (any libpq connection string, with moeedb's own
  // parameters patroni=, read_connections= and write_connections=) and creates or migrates the
  // tables; Unavailable naming the server (password hidden) when it cannot
  // connect, NotSupported for a database of a newer schema version,
  // InvalidArgument for a bad moeedb parameter.
  static Result<std::unique_ptr<PostgresStore>> Open(const std::string& uri);
  ~PostgresStore() override;

  Result<CollectionRecord> CreateCollection(const std::string& name, const std::string& spec_json) override;
  Result<CollectionRecord> GetCollection(const std::string& name) const override;
  Result<LogHead> GetLogHead(const std::string& collection) const override;
  Result<std::vector<CollectionRecord>> ListCollections() const override;
  Status DropCollection(const std::string& name) override;
  Status UpdateSpec(const std::string& name, const std::string& expected, const std::string& spec_json) override;
  Result<std::map<std::string, std::string>> ListAliases() const override;
  Status UpdateAliases(const std::map<std::string, std::string>& expected,
                       const std::map<std::string, std::string>& aliases) override;
  // Every write commits synced (sync=false too): a commit that is visible,
  // NOTIFYed and acknowledged is never lost to a crash or failover, which
  // would rewind the change log under the nodes that applied it.
  Result<WriteResult> Upsert(const std::string& collection, const std::vector<StoredDocument>& docs,
                             bool sync) override;
  Result<WriteResult> UpsertIfUnchanged(const std::string& collection, const std::vector<StoredDocument>& docs,
                                        const std::vector<uint64_t>& expected, bool sync) override;
  Result<std::optional<uint64_t>> InternalId(const std::string& collection, const std::string& external_id) const override;
  Result<WriteResult> Delete(const std::string& collection, const std::vector<std::string>& ids, bool sync) override;
  Result<std::optional<StoredDocument>> Get(const std::string& collection,
                                            const std::string& external_id) const override;
  Result<StoredDocument> GetByInternal(const std::string& collection, uint64_t internal_id,
                                       bool with_vectors) const override;
  Result<std::vector<std::optional<StoredDocument>>> GetManyByInternal(const std::string& collection,
                                                                       const std::vector<uint64_t>& internal_ids,
                                                                       bool with_vectors,
                                                                       const ShardFilter& shard) const override;
  Result<DocumentPage> ListDocuments(const std::string& collection, const std::string& after,
                                     size_t limit) const override;
  // Read in pages of one repeatable-read snapshot, on a connection of its own.
  Status ScanVectors(const std::string& collection,
                     const std::function<void(uint64_t, const float*, size_t, const float*, size_t,
                                              const std::string&)>& fn,
                     const ShardFilter& shard) const override;
  Status ScanMetadata(const std::string& collection,
                      const std::function<void(uint64_t, const std::string&)>& fn,
                      const ShardFilter& shard) const override;
  using Store::ReadOps;
  Status ReadOps(const std::string& collection, uint64_t after, size_t limit,
                 const std::function<void(const OpRecord&)>& fn) const override;
  using Store::ReadOpsFromStandby;
  // With patroni=: the log as the synchronous standby Patroni names holds it
  // (it replays the primary's WAL; strict synchronous mode promotes only it).
  Status ReadOpsFromStandby(const std::string& collection, uint64_t after, size_t limit,
                            const std::function<void(const OpRecord&)>& fn) const override;
  // Other nodes follow the log from their own cursors: the caller keeps a
  // retention window (moeedb serve --log-retention-entries), not one node's
  // snapshot.
  Status TrimOps(const std::string& collection, uint64_t upto) override;
  // NotSupported: PostgreSQL's own backups (pg_basebackup, pg_dump) copy it.
  Status Checkpoint(const std::string& dir) const override;
  std::string location() const override { return location_; }
  bool shared() const override { return true; }
  // LISTEN on a connection of its own: every write NOTIFYs once it has
  // committed. True also after (re)connecting, since
  // notifications sent meanwhile are lost: the caller reads the log anyway.
  bool WaitForChange(int timeout_ms) const override;
  // Called right before each write's COMMIT (false) and right after it
  // returns (true): tests lose connections and answers there.
  void SetCommitHookForTest(std::function<void(bool committed)> hook);
  // Called after each page a scan reads, before its rows are handed out:
  // tests write there, between two pages of one scan.
  void SetScanPageHookForTest(std::function<void()> hook);

 private:
  PostgresStore() = default;
  // Upsert, and UpsertIfUnchanged when `expected` is given.
  Result<WriteResult> Write(const std::string& collection, const std::vector<StoredDocument>& docs,
                            const std::vector<uint64_t>* expected, bool sync);
  struct Connection;  // libpqxx's connection (its headers stay in the .cpp)
  // A connection kept for one use (writes, primary reads, fallback reads),
  // one statement at a time.
  struct Session {
    std::mutex mu;
    std::unique_ptr<Connection> conn;
    std::string uri;  // what conn was made for
    const char* name = nullptr;  // conn's application_name, if not libpq's
    std::atomic<int> users{0};  // reads on it or waiting for it (SessionPool's choice)
  };
  // Read sessions: each read takes the one with the fewest users, so
  // concurrent reads (searches' hits, a replica's log, a catch-up) run side
  // by side up to the pool's size and queue beyond it.
  class SessionPool {
   public:
    void Resize(size_t n);
    // The least busy session, its users counted until the returned holder goes.
    std::shared_ptr<Session> Take();
    size_t size() const { return sessions_.size(); }

   private:
    std::vector<std::unique_ptr<Session>> sessions_;
    std::atomic<size_t> next_{0};  // where the search for the least busy starts
  };
  // Runs `fn` on the session's connection to the primary (`primary`, as
  // PrimaryUri names it) or as FallbackUri names, (re)connecting first if it is
  // closed or the primary moved (`writer`: the writes' session settings);
  // maps libpqxx's exceptions to a Status (errors are values past this class).
  template <typename Fn>
  auto OnSession(const std::string& what, Session* s, bool primary, bool writer, Fn&& fn) const;
  // The connection string of the primary: the URI as given, or with
  // patroni= the server Patroni's leader names (Unavailable while none).
  Result<std::string> PrimaryUri() const;
  // The connection string for reads while no primary answers: with patroni=
  // a synchronous standby Patroni names (it has applied every acknowledged
  // commit: synchronous_commit = remote_apply), else any of the servers.
  // `current`: the session's server, kept while it is still named.
  Result<std::string> FallbackUri(const std::string& current) const;
  // OnSession with a write session, as fn(connection, its server's URI).
  template <typename Fn>
  auto WithConnection(const std::string& what, Fn&& fn) const;
  // Runs `fn` on a connection of its own (scans: their callbacks may call
  // the store while the scan's snapshot stays open).
  template <typename Fn>
  auto WithOwnConnection(const std::string& what, Fn&& fn) const;
  // `fn()`, libpqxx's exceptions mapped to a Status (Unavailable: no server
  // could take it, nothing was done; OutcomeUnknown: COMMIT's answer was
  // lost); a lost connection `conn` is dropped (its mutex held).
  template <typename Fn>
  auto Guarded(const std::string& what, std::unique_ptr<Connection>* conn, Fn&& fn) const;
  // `fn` on the primary, on a connection of the reads' own; once more on a
  // new connection if it answers Unavailable.
  template <typename Fn>
  auto ReadPrimary(const std::string& what, Fn&& fn) const;
  // ReadPrimary, or while no primary answers, a connection FallbackUri
  // names (a standby's reads: the texts and metadata of hits); with
  // patroni=, while neither answers, both are tried again for up to
  // kReadFailoverWait (a promotion under way) before it answers Unavailable.
  template <typename Fn>
  auto Read(const std::string& what, Fn&& fn) const;
  // A write's own statements in its group's transaction: its documents
  // written and `res` filled but for its log entry; the collection's id when
  // the write changes it (its log entry follows), nullopt when it changes
  // nothing (as a delete of absent ids).
  using DocumentsStep = std::function<Result<std::optional<uint32_t>>(pqxx::transaction_base&, WriteResult* res)>;
  struct PendingWrite;  // a write in its collection's queue
  struct WriteGroups;   // the queues, one per collection written to
  // Runs one write of `docs` documents: queued while kWriteGroupsInFlight
  // transactions of its collection are under way, then committed in one
  // transaction with the writes queued beside it (each with its own log
  // entry), retried and resolved as the header says.
  Result<WriteResult> CommitWrite(const std::string& collection, const std::string& what, size_t docs,
                                  bool is_delete, DocumentsStep step);
  // One group's attempts until each write has its answer (answers[i] for group[i]).
  std::vector<Result<WriteResult>> CommitGroup(const std::string& collection, const std::vector<PendingWrite*>& group);
  // The number the write `write_id` was stored under, nullopt if it was not
  // (once no attempt of it is in flight); retried until `until`.
  Result<std::optional<uint64_t>> FindWrite(const std::string& collection, const std::string& write_id,
                                            std::chrono::steady_clock::time_point until) const;
  Status Migrate();
  // Builds schema 9's shard-key index CONCURRENTLY once the schema is at 9
  // (one node at a time; an invalid one left by a cut-short build is
  // dropped and built again); OK at once when it is there.
  Status EnsureShardIndex();
  // A connection to a synchronous standby Patroni names that has replayed
  // the primary's WAL up to `lsn` (waiting up to kStandbyScanWait for it);
  // null without patroni=, or when none is named, answers or catches up.
  std::unique_ptr<Connection> StandbyPast(const std::string& lsn) const;
  // Every document of `shard` committed before the call (and perhaps later
  // ones), with its vectors or not, in pages of kScanPage rows, each read in
  // a transaction of its own on a connection of its own: from the
  // synchronous standby Patroni names once it has replayed past the primary's
  // WAL position at the call (StandbyPast), else from the primary. A range-
  // placed shard is read through the shard-key index, in (shard_key,
  // internal) order; anything else in internal-id order.
  Status ScanDocuments(const std::string& collection, bool with_vectors, const ShardFilter& shard,
                       const std::function<void(uint64_t internal, const StoredDocument&)>& fn) const;

  std::string uri_, location_;  // uri_: without patroni=
  std::unique_ptr<PatroniMembers> patroni_;  // null: libpq finds the primary
  mutable SessionPool write_sessions_;  // writes, DDL and write lookups
  mutable SessionPool primary_reads_;   // ReadPrimary's
  mutable SessionPool fallback_reads_;  // Read()'s, while no primary answers
  mutable std::atomic<int64_t> primary_retry_at_{0};  // steady_clock ticks
  std::function<void(bool)> commit_hook_;
  std::function<void()> page_hook_;
  std::unique_ptr<WriteGroups> groups_;
  struct Listener;          // the LISTEN connection (WaitForChange's alone)
  mutable std::unique_ptr<Listener> listener_;
  mutable std::mutex listen_mu_;
};

}  // namespace moeedb
