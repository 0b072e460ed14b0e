// The PostgreSQL store's schema and statements, one function per step of a
// read or a write (storage/postgres_store.h says how they make its
// contract); libpqxx's types stay in storage/.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "storage/store.h"

namespace moeedb::postgres {

// Statements taking the schema from version i to i + 1, in order.
extern const char* const kMigrations[];
// store.h's IdOrderKey of a row's `external`, as SQL (the index's expression).
extern const char* const kIdOrderSql;
// Schema 9's index of documents by shard key (PostgresStore::EnsureShardIndex).
extern const char* const kShardIndexSql;
// Migration 2 -> 3's second half: every row's shard key, then NOT NULL.
void BackfillShardKeys(pqxx::work& t);
// The WHERE clause's tail that keeps `shard`'s documents ("" for all).
std::string ShardCondition(const ShardFilter& shard);
// The columns RecordOf reads, in a SELECT list.
extern const char* const kCollectionColumns;
// The channel every write notifies on (after its COMMIT: NotifyChange).
inline constexpr const char* kChangeChannel = "moeedb_changes";

// SQLSTATEs of a server that cannot take a statement now while another may
// (read-only, shutting down, starting, connection exceptions).
bool IsUnavailableState(const std::string& state);
// A random 128-bit write id, in hex.
std::string NewWriteId();
// `uri` with target_session_attrs=any appended (libpq keeps the last value).
std::string AnyServerUri(const std::string& uri);
// `uri` narrowed to the one server at `host_port` (host= and port= appended:
// they replace the URI's list of servers).
std::string ServerUri(const std::string& uri, const std::string& host_port);
// `uri` without its parameter `name` (URI query or keyword form), whose value
// goes to `*value` ("" if absent): a parameter of moeedb's, not libpq's.
std::string TakeParameter(const std::string& uri, const std::string& name, std::string* value);
// `uri` without its password, for messages.
std::string HidePassword(const std::string& uri);

// Array literals and their parse: bigint[] and text[] (every element quoted).
std::string ArrayLiteral(const std::vector<uint64_t>& v);
std::string TextArrayLiteral(const std::vector<std::string>& v);
Result<std::vector<uint64_t>> ParseArray(const std::string& s);
// float32 vectors as raw little-endian bytea, and back.
pqxx::binarystring Bytes(const std::vector<float>& v);
std::vector<float> Floats(const pqxx::field& f);

CollectionRecord RecordOf(const pqxx::row& r);
// The collection's row; NotFound when there is none.
Result<CollectionRecord> LoadCollection(pqxx::transaction_base& t, const std::string& name);
// A write's first step, taking no lock: its collection's id and `n` new
// internal ids (ascending, from the sequence moeedb_internal_ids); NotFound
// when there is no such collection.
struct PreparedWrite {
  uint32_t coll = 0;
  std::vector<uint64_t> internal;
};
Result<PreparedWrite> PrepareWrite(pqxx::transaction_base& t, const std::string& name, size_t n);
// A document row (record, and hs/rw when `with_vectors`).
Result<std::optional<StoredDocument>> DocumentOf(const pqxx::row& row, bool with_vectors);

// Deletes the collection's documents of these external ids in one statement;
// external id -> internal id of each one that was there.
std::map<std::string, uint64_t> RemoveDocuments(pqxx::transaction_base& t, uint32_t coll,
                                                const std::vector<std::string>& ids);
// Inserts docs[i] under internal[i] with records[i], all in one statement.
void InsertDocuments(pqxx::transaction_base& t, uint32_t coll, const std::vector<uint64_t>& internal,
                     const std::vector<StoredDocument>& docs, const std::vector<std::string>& records);
// A write's last statements before COMMIT, once its documents are written:
// the collection's row locked and its last_op advanced (res->seq, gapless and
// in commit order: postgres_store.h), the counters, the change-log entry,
// the write id (a unique violation if an earlier attempt of the same write
// committed); res->previous_entry_id. NotFound if the collection is gone.
Status AppendToLog(pqxx::work& t, uint32_t coll, WriteResult* res, const std::string& write_id);
// Wakes the nodes LISTENing (WaitForChange) after a write's COMMIT, in a
// transaction of its own that waits for no flush or standby.
void NotifyChange(pqxx::connection& c);
// Unavailable when the server requires a synchronous standby and none
// streams; IOError when the role may not see them (needs pg_monitor).
Status HasSynchronousStandby(pqxx::work& t);

}  // namespace moeedb::postgres
