// The SQL of the PostgreSQL store, row by row (storage/postgres_rows.h).
#include "storage/postgres_rows.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

namespace moeedb::postgres {

namespace {
// Write ids are kept this long (resolution needs them for seconds).
constexpr const char* kWriteIdsKept = "1 day";
}  // namespace

// store.h's IdOrderKey in SQL; the index on it and ListDocuments spell it alike.
#define MOEEDB_ID_ORDER_SQL \
  "(CASE WHEN external ~ '^[0-9]{1,20}$' THEN '0' || lpad(external, 20, '0') || external ELSE '1' || external END)"
const char* const kIdOrderSql = MOEEDB_ID_ORDER_SQL;

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
    // 2 -> 3: each document's shard key (store.h's ShardKey), so a node
    // reads only the shards it holds; BackfillShardKeys fills in the rows
    // written before, then the column becomes NOT NULL.
    "ALTER TABLE moeedb_documents ADD COLUMN shard_key bigint;",
    // 3 -> 4: each change-log entry's identity (its write's random id), which
    // followers compare at their cursor: a log that went back under them (a
    // lost commit, a point-in-time restore) and numbered other writes anew is
    // noticed. Entries written before have none (NULL).
    "ALTER TABLE moeedb_ops ADD COLUMN entry_id text;",
    // 4 -> 5: documents listed in IdOrderKey's order (integer ids by number,
    // then the rest by bytes), paged through this index.
    "CREATE INDEX moeedb_documents_order ON moeedb_documents (coll, " MOEEDB_ID_ORDER_SQL ");",
    // 5 -> 6: collection aliases (Qdrant's), switched in one transaction.
    "CREATE TABLE moeedb_aliases (alias text PRIMARY KEY, collection text NOT NULL);",
    // 6 -> 7: internal ids from one sequence, taken before a write locks its
    // collection's row (the row then numbers the change log only), starting
    // above every id given so far. Vectors stored out of line uncompressed:
    // float bytes do not compress, and pglz's attempt at each one was the
    // largest single cost of the server's CPU under 16 writers (perf, 5 %).
    "CREATE SEQUENCE moeedb_internal_ids;"
    "SELECT setval('moeedb_internal_ids', (SELECT coalesce(max(next_internal), 1) FROM moeedb_collections), false);"
    "ALTER TABLE moeedb_documents ALTER COLUMN hs SET STORAGE EXTERNAL, ALTER COLUMN rw SET STORAGE EXTERNAL;",
    // 7 -> 8: no foreign keys from documents and the log to their collection.
    // Each inserted row's key check locked the collection's row FOR KEY
    // SHARE, so concurrent writes to one collection shared that lock through
    // multixacts, and every check walked the row's chain of versions (each
    // write updates it): perf put the checks at 14 % of the machine's CPU
    // under 16 writers. A write's last statement updates that row and finds
    // a dropped collection there (nothing commits); DropCollection deletes
    // the collection's rows itself once it holds the row. (A node of an
    // older version, still running beside the migrated ones, drops a
    // collection's row alone: upgrade every node before dropping.)
    "DO $$ DECLARE c record; BEGIN "
    "  FOR c IN SELECT conrelid::regclass AS t, conname FROM pg_constraint "
    "      WHERE contype = 'f' AND confrelid = 'moeedb_collections'::regclass LOOP "
    "    EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', c.t, c.conname); "
    "  END LOOP; END $$;",
    // 8 -> 9: documents by shard key, so one shard of a collection placed by
    // ranges of keys (ShardLayout::kRange) is read alone, in pages keyed by
    // (shard_key, internal): kShardIndexSql, built after this transaction
    // (CONCURRENTLY: writes go on meanwhile, which inside it they could not).
    "SELECT 1;",
};

const char* const kShardIndexSql =
    "CREATE INDEX CONCURRENTLY moeedb_documents_shard ON moeedb_documents (coll, shard_key, internal)";

void BackfillShardKeys(pqxx::work& t) {
  constexpr int kRowsPerUpdate = 4096;
  for (;;) {
    pqxx::result rows = t.exec_params(
        "SELECT coll, internal, external FROM moeedb_documents WHERE shard_key IS NULL LIMIT $1", kRowsPerUpdate);
    if (rows.empty()) break;
    std::vector<uint64_t> colls, internals, keys;
    for (const auto& row : rows) {
      colls.push_back(row[0].as<uint64_t>());
      internals.push_back(row[1].as<uint64_t>());
      keys.push_back(ShardKey(row[2].as<std::string>()));
    }
    t.exec_params("UPDATE moeedb_documents d SET shard_key = u.k FROM unnest($1::bigint[], $2::bigint[], "
                  "$3::bigint[]) AS u(c, i, k) WHERE d.coll = u.c AND d.internal = u.i",
                  ArrayLiteral(colls), ArrayLiteral(internals), ArrayLiteral(keys));
  }
  t.exec("ALTER TABLE moeedb_documents ALTER COLUMN shard_key SET NOT NULL");
}

std::string ShardCondition(const ShardFilter& shard) {
  if (shard.all()) return "";
  if (shard.layout == ShardLayout::kModulo)
    return " AND shard_key % " + std::to_string(shard.count) + " = " + std::to_string(shard.shard);
  std::string c = " AND shard_key >= " + std::to_string(ShardKeyFloor(shard.shard, shard.count));
  // The last shard's bound, 2^63, is past every bigint.
  if (shard.shard + 1 < shard.count) c += " AND shard_key < " + std::to_string(ShardKeyFloor(shard.shard + 1, shard.count));
  return c;
}

// SQLSTATEs that mean "this server cannot take the statement now, another
// (or a retry) may": read-only (a standby, or a primary demoted under us),
// shutting down, starting up, any connection exception (class 08), a session
// ended idle in a transaction (25P03), a row still locked at lock_timeout (55P03).
bool IsUnavailableState(const std::string& state) {
  return state == "25006" || state == "25P03" || state == "55P03" || state == "57P01" || state == "57P02" ||
         state == "57P03" || state.rfind("08", 0) == 0;
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

namespace {
bool IsUrl(const std::string& uri) {
  return uri.rfind("postgresql://", 0) == 0 || uri.rfind("postgres://", 0) == 0;
}
std::string Appended(const std::string& uri, const std::string& key, const std::string& value) {
  if (IsUrl(uri)) return uri + (uri.find('?') == std::string::npos ? "?" : "&") + key + "=" + value;
  return uri + " " + key + "=" + value;
}
}  // namespace

// The connection string for reads when no primary answers: the same servers,
// any of them (a standby serves reads with synchronous_commit = remote_apply
// making every acknowledged write visible there). libpq keeps the last value
// of a repeated parameter.
std::string AnyServerUri(const std::string& uri) { return Appended(uri, "target_session_attrs", "any"); }

std::string ServerUri(const std::string& uri, const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  return Appended(Appended(uri, "host", host_port.substr(0, colon)), "port", host_port.substr(colon + 1));
}

namespace {
// `list` (items separated by `sep`; empty ones dropped) without its item
// name=..., whose value goes to `*value`.
std::string WithoutItem(const std::string& list, char sep, const std::string& name, std::string* value) {
  std::string kept;
  for (size_t start = 0; start <= list.size();) {
    size_t end = list.find(sep, start);
    if (end == std::string::npos) end = list.size();
    const std::string item = list.substr(start, end - start);
    if (item.rfind(name + "=", 0) == 0)
      *value = item.substr(name.size() + 1);
    else if (!item.empty())
      kept += (kept.empty() ? "" : std::string(1, sep)) + item;
    start = end + 1;
  }
  return kept;
}
}  // namespace

std::string TakeParameter(const std::string& uri, const std::string& name, std::string* value) {
  value->clear();
  if (!IsUrl(uri)) return WithoutItem(uri, ' ', name, value);
  const size_t q = uri.find('?');
  if (q == std::string::npos) return uri;
  const std::string kept = WithoutItem(uri.substr(q + 1), '&', name, value);
  return uri.substr(0, q) + (kept.empty() ? "" : "?" + kept);
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

const char* const kCollectionColumns = "id, name, spec, next_internal, last_op, doc_count";

Result<CollectionRecord> LoadCollection(pqxx::transaction_base& t, const std::string& name) {
  pqxx::result r =
      t.exec_params(std::string("SELECT ") + kCollectionColumns + " FROM moeedb_collections WHERE name = $1", name);
  if (r.empty()) return Status::NotFound("no collection named '" + name + "'");
  return RecordOf(r[0]);
}

Result<PreparedWrite> PrepareWrite(pqxx::transaction_base& t, const std::string& name, size_t n) {
  pqxx::result r = t.exec_params(
      "SELECT id, (SELECT array_agg(nextval('moeedb_internal_ids')) FROM generate_series(1, $2)) "
      "FROM moeedb_collections WHERE name = $1",
      name, static_cast<int64_t>(n));
  if (r.empty()) return Status::NotFound("no collection named '" + name + "'");
  PreparedWrite p;
  p.coll = r[0][0].as<uint32_t>();
  if (n > 0) {
    MOEEDB_ASSIGN_OR_RETURN(p.internal, ParseArray(r[0][1].as<std::string>()));
    std::sort(p.internal.begin(), p.internal.end());
  }
  return p;
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

Status AppendToLog(pqxx::work& t, uint32_t coll, WriteResult* out, const std::string& write_id) {
  WriteResult& res = *out;
  const int64_t live_delta = static_cast<int64_t>(res.added.size()) - static_cast<int64_t>(res.removed.size());
  const uint64_t next_internal = res.added.empty() ? 0 : *std::max_element(res.added.begin(), res.added.end()) + 1;
  // One statement: the row's lock (held to COMMIT), the entry's number, the
  // entry and the write id, all computed from the row as it is once locked.
  pqxx::result r = t.exec_params(
      "WITH c AS (UPDATE moeedb_collections SET last_op = last_op + 1, next_internal = greatest(next_internal, $2), "
      "doc_count = doc_count + $3 WHERE id = $1 RETURNING id, last_op), "
      "o AS (INSERT INTO moeedb_ops (coll, seq, added, removed, entry_id) "
      "SELECT id, last_op, $4::bigint[], $5::bigint[], $6 FROM c), "
      "w AS (INSERT INTO moeedb_writes (id, coll, seq) SELECT $6, id, last_op FROM c) "
      "SELECT last_op FROM c",
      coll, static_cast<int64_t>(next_internal), live_delta, ArrayLiteral(res.added), ArrayLiteral(res.removed),
      write_id);
  if (r.empty()) return Status::NotFound("the collection was dropped during the write");
  res.seq = r[0][0].as<uint64_t>();
  // The entry this one follows (a new statement: its snapshot holds the
  // commit of the row's previous holder, which wrote it): a node applying its
  // own write without reading the log checks that it is the one it applied last.
  pqxx::result previous = t.exec_params("SELECT entry_id FROM moeedb_ops WHERE coll = $1 AND seq = $2", coll,
                                        static_cast<int64_t>(res.seq - 1));
  res.previous_entry_id = previous.empty() || previous[0][0].is_null() ? "" : previous[0][0].as<std::string>();
  if (res.seq % 1024 == 0)
    t.exec(std::string("DELETE FROM moeedb_writes WHERE at < now() - interval '") + kWriteIdsKept + "'");
  return Status::OK();
}

void NotifyChange(pqxx::connection& c) {
  pqxx::nontransaction(c).exec(std::string("BEGIN; SET LOCAL synchronous_commit = off; NOTIFY ") + kChangeChannel +
                               "; COMMIT");
}

namespace {
// PostgreSQL's binary array format (array_recv), one dimension, no NULLs:
// ndim, has-nulls flag, element type, length, lower bound 1, then each
// element as its length and its bytes, integers big-endian.
class BinaryArray {
 public:
  BinaryArray(uint32_t element_type, size_t n) {
    Int32(1);
    Int32(0);
    Int32(element_type);
    Int32(static_cast<uint32_t>(n));
    Int32(1);
  }
  void Element(const void* data, size_t size) {
    Int32(static_cast<uint32_t>(size));
    bytes_.append(static_cast<const char*>(data), size);
  }
  void Int64Element(uint64_t v) {
    Int32(8);
    for (int shift = 56; shift >= 0; shift -= 8) bytes_.push_back(static_cast<char>(v >> shift));
  }
  pqxx::binarystring Take() const { return pqxx::binarystring(bytes_.data(), bytes_.size()); }

 private:
  void Int32(uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes_.push_back(static_cast<char>(v >> shift));
  }
  std::string bytes_;
};
// pg_type's oids of the element types.
constexpr uint32_t kInt8Oid = 20, kTextOid = 25, kByteaOid = 17;
}  // namespace

// The documents a few thousand a statement: each column one binary array
// parameter, unnested into rows. The plan is the same for any batch (a
// VALUES list of n rows was planned anew each time: 5 % of the servers' CPU
// under 16 writers), the vectors go as their bytes, and a statement stays
// far below the protocol's 1 GB message.
void InsertDocuments(pqxx::transaction_base& t, uint32_t coll, const std::vector<uint64_t>& internal,
                     const std::vector<StoredDocument>& docs, const std::vector<std::string>& records) {
  constexpr size_t kRowsPerStatement = 4096;
  for (size_t from = 0; from < docs.size(); from += kRowsPerStatement) {
    const size_t n = std::min(kRowsPerStatement, docs.size() - from);
    BinaryArray internals(kInt8Oid, n), ids(kTextOid, n), recs(kTextOid, n), hs(kByteaOid, n), rw(kByteaOid, n),
        keys(kInt8Oid, n);
    for (size_t i = from; i < from + n; ++i) {
      const StoredDocument& d = docs[i];
      internals.Int64Element(internal[i]);
      ids.Element(d.id.data(), d.id.size());
      recs.Element(records[i].data(), records[i].size());
      hs.Element(d.hs.data(), d.hs.size() * sizeof(float));
      rw.Element(d.rw.data(), d.rw.size() * sizeof(float));
      keys.Int64Element(ShardKey(d.id));
    }
    t.exec_params("INSERT INTO moeedb_documents (coll, internal, external, record, hs, rw, shard_key) "
                  "SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::bytea[], $6::bytea[], "
                  "$7::bigint[])",
                  coll, internals.Take(), ids.Take(), recs.Take(), hs.Take(), rw.Take(), keys.Take());
  }
}

// False when the server requires a synchronous standby (Patroni's strict
// synchronous mode sets synchronous_standby_names) and none is streaming: a
// COMMIT would wait until one comes back, and cancelling that wait does not
// undo the commit locally. Reading sync_state needs pg_read_all_stats (in
// pg_monitor) or superuser: without it every row reads NULL, and a role that
// lacks it is told so rather than told of a standby that is there.
Status HasSynchronousStandby(pqxx::work& t) {
  const pqxx::row r = t.exec1(
      "SELECT current_setting('synchronous_standby_names') = '' OR EXISTS (SELECT 1 FROM "
      "pg_stat_replication WHERE state = 'streaming' AND sync_state IN ('sync', 'quorum')), "
      "pg_has_role(current_user, 'pg_read_all_stats', 'USAGE'), current_user");
  if (r[0].as<bool>()) return Status::OK();
  if (!r[1].as<bool>())
    return Status::IOError("the role " + r[2].as<std::string>() +
                                    " cannot see whether a synchronous standby streams: GRANT pg_monitor TO " +
                                    r[2].as<std::string>());
  return Status::Unavailable("PostgreSQL has no synchronous standby now (after a failover, until a standby "
                             "streams again): nothing was written; retry in a few seconds");
}

}  // namespace moeedb::postgres
