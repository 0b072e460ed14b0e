#include "storage/postgres_store.h"

#include <cstring>
#include <map>
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
};

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
auto PostgresStore::Guarded(const std::string& what, bool shared, Fn&& fn) const {
  using R = decltype(fn());
  try {
    return R(fn());
  } catch (const pqxx::in_doubt_error& e) {
    if (shared) conn_.reset();
    return R(Status::IOError(what + ": the outcome is unknown (the connection was lost during COMMIT): " + e.what()));
  } catch (const pqxx::broken_connection& e) {
    if (shared) conn_.reset();
    return R(Status::IOError(what + ": PostgreSQL at " + location_ + " is unreachable: " + e.what()));
  } catch (const pqxx::sql_error& e) {
    return R(Status::IOError(what + ": " + e.what()));
  } catch (const std::exception& e) {
    return R(Status::IOError(what + ": " + e.what()));
  }
}

template <typename Fn>
auto PostgresStore::WithConnection(const std::string& what, Fn&& fn) const {
  std::lock_guard<std::mutex> lock(mu_);
  return Guarded(what, true, [&] {
    if (!conn_ || !conn_->c.is_open()) conn_ = std::make_unique<Connection>(uri_);
    return fn(conn_->c);
  });
}

template <typename Fn>
auto PostgresStore::WithOwnConnection(const std::string& what, Fn&& fn) const {
  return Guarded(what, false, [&] {
    pqxx::connection c(uri_);
    return fn(c);
  });
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
  return WithConnection("reading collection " + name, [&](pqxx::connection& c) -> Result<CollectionRecord> {
    pqxx::read_transaction t(c);
    return LoadCollection(t, name);
  });
}

Result<std::vector<CollectionRecord>> PostgresStore::ListCollections() const {
  return WithConnection("listing collections", [&](pqxx::connection& c) -> Result<std::vector<CollectionRecord>> {
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

// Ends a write: its change-log entry (numbered by LockForWrite), the
// collection's counters, the NOTIFY that wakes other nodes, the commit.
void CommitChange(pqxx::work& t, const CollectionRecord& r, const WriteResult& res, uint64_t next_internal) {
  t.exec_params("INSERT INTO moeedb_ops (coll, seq, added, removed) VALUES ($1, $2, $3::bigint[], $4::bigint[])", r.id,
                res.seq, ArrayLiteral(res.added), ArrayLiteral(res.removed));
  const int64_t live_delta = static_cast<int64_t>(res.added.size()) - static_cast<int64_t>(res.removed.size());
  t.exec_params("UPDATE moeedb_collections SET next_internal = $2, doc_count = doc_count + $3 WHERE id = $1", r.id,
                next_internal, live_delta);
  t.exec(std::string("NOTIFY ") + kChangeChannel);  // delivered at commit
  t.commit();
}

}  // namespace

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
  return WithConnection("writing to " + collection, [&](pqxx::connection& c) -> Result<WriteResult> {
    pqxx::work t(c);
    if (!sync) t.exec("SET LOCAL synchronous_commit = off");
    MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LockForWrite(t, collection));
    WriteResult res;
    res.seq = r.last_op;
    // The documents these ids replace, removed in one statement.
    std::vector<std::string> ids;
    for (const auto& d : docs) ids.push_back(d.id);
    const auto replaced = RemoveDocuments(t, r.id, ids);
    uint64_t next = r.next_internal;
    for (size_t i = 0; i < docs.size(); ++i) {
      auto old = replaced.find(docs[i].id);
      if (old != replaced.end()) res.removed.push_back(old->second);
      const uint64_t internal = next++;
      res.added.push_back(internal);
      t.exec_params("INSERT INTO moeedb_documents (coll, internal, external, record, hs, rw) VALUES ($1, $2, $3, $4, $5, $6)",
                    r.id, internal, docs[i].id, records[i], Bytes(docs[i].hs), Bytes(docs[i].rw));
    }
    CommitChange(t, r, res, next);
    return res;
  });
}

Result<WriteResult> PostgresStore::Delete(const std::string& collection, const std::vector<std::string>& ids,
                                          bool sync) {
  return WithConnection("deleting from " + collection, [&](pqxx::connection& c) -> Result<WriteResult> {
    pqxx::work t(c);
    if (!sync) t.exec("SET LOCAL synchronous_commit = off");
    MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LockForWrite(t, collection));
    WriteResult res;
    const auto removed = RemoveDocuments(t, r.id, ids);
    std::set<std::string> seen;
    for (const auto& id : ids) {
      if (!seen.insert(id).second) continue;
      auto old = removed.find(id);
      if (old == removed.end()) ++res.not_found;
      else res.removed.push_back(old->second);
    }
    if (res.removed.empty()) {
      t.abort();  // nothing changed: the advanced last_op is rolled back
      return res;
    }
    res.seq = r.last_op;
    CommitChange(t, r, res, r.next_internal);
    return res;
  });
}

Result<std::optional<StoredDocument>> PostgresStore::Get(const std::string& collection,
                                                         const std::string& external) const {
  return WithConnection("reading " + collection, [&](pqxx::connection& c) -> Result<std::optional<StoredDocument>> {
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
  return WithConnection("reading " + collection, [&](pqxx::connection& c) -> Result<Docs> {
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
  return WithConnection("listing " + collection, [&](pqxx::connection& c) -> Result<DocumentPage> {
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
  MOEEDB_RETURN_IF_ERROR(WithConnection("reading the change log of " + collection, [&](pqxx::connection& c) -> Status {
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
