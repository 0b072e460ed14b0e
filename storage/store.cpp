#include "storage/store.h"

#include <nlohmann/json.hpp>
#include <chrono>
#include <set>
#include <thread>

#include "base/utf8.h"
#include "storage/postgres_store.h"
#include "storage/rocksdb_store.h"

namespace moeedb {

using json = nlohmann::json;

bool IsPostgresLocation(const std::string& location) {
  return location.rfind("postgresql://", 0) == 0 || location.rfind("postgres://", 0) == 0;
}

Result<std::unique_ptr<Store>> Store::Open(const std::string& location) {
  if (IsPostgresLocation(location)) {
    MOEEDB_ASSIGN_OR_RETURN(auto pg, PostgresStore::Open(location));
    return std::unique_ptr<Store>(std::move(pg));
  }
  MOEEDB_ASSIGN_OR_RETURN(auto rocks, RocksStore::Open(location));
  return std::unique_ptr<Store>(std::move(rocks));
}

uint64_t ShardKey(const std::string& external_id) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a offset basis
  for (unsigned char c : external_id) h = (h ^ c) * 1099511628211ull;
  // MurmurHash3's fmix64: FNV-1a's low bits depend only on the bytes' low
  // bits, so ids differing in a pattern (doc-0, doc-2, ...) would pile into
  // some shards; the finalizer spreads every input bit over every output bit.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h >> 1;
}

std::string IdOrderKey(const std::string& external_id) {
  const bool number = !external_id.empty() && external_id.size() <= 20 &&
                      external_id.find_first_not_of("0123456789") == std::string::npos;
  if (!number) return "1" + external_id;
  return "0" + std::string(20 - external_id.size(), '0') + external_id + external_id;
}

uint32_t ShardOfKey(uint64_t key, uint32_t count, ShardLayout layout) {
  if (count <= 1) return 0;
  if (layout == ShardLayout::kModulo) return static_cast<uint32_t>(key % count);
  // floor(key * count / 2^63): the k with ShardKeyFloor(k) <= key < ShardKeyFloor(k + 1).
  return static_cast<uint32_t>((static_cast<unsigned __int128>(key & ~(1ull << 63)) * count) >> 63);
}

uint64_t ShardKeyFloor(uint32_t shard, uint32_t count) {
  const unsigned __int128 scaled = static_cast<unsigned __int128>(shard) << 63;
  return static_cast<uint64_t>((scaled + count - 1) / count);
}

uint32_t ShardOfId(const std::string& external_id, uint32_t count, ShardLayout layout) {
  return ShardOfKey(ShardKey(external_id), count, layout);
}

bool ShardFilter::Holds(const std::string& external_id) const {
  return all() || ShardOfId(external_id, count, layout) == shard;
}

Result<Store::LogHead> Store::GetLogHead(const std::string& collection) const {
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord record, GetCollection(collection));
  return LogHead{std::move(record), ""};
}

Status Store::ReadOpsFromStandby(const std::string& collection, uint64_t, size_t,
                                 const std::function<void(const OpRecord&)>&) const {
  return Status::NotSupported("collection '" + collection + "': this store names no synchronous standby to read the log from");
}

bool Store::WaitForChange(int timeout_ms) const {
  std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
  return false;
}

Status CheckNewCollection(const std::string& name, const std::string& spec_json) {
  if (name.empty() || name.size() > 128 || name.find('/') != std::string::npos)
    return Status::InvalidArgument("collection name must be 1-128 characters without '/'");
  try {
    if (!json::parse(spec_json).is_object()) return Status::InvalidArgument("collection spec must be a JSON object");
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("collection spec is not JSON: ") + e.what());
  }
  return Status::OK();
}

Status CheckId(const std::string& id, const std::string& where) {
  if (id.empty()) return Status::InvalidArgument(where + ": empty id");
  if (id.size() > 512) return Status::InvalidArgument(where + ": id longer than 512 bytes");
  if (id.find('\0') != std::string::npos || !IsValidUtf8(id))
    return Status::InvalidArgument(where + ": the id is not UTF-8 text (or holds a NUL byte)");
  return Status::OK();
}

Status CheckDeleteIds(const std::vector<std::string>& ids) {
  for (size_t i = 0; i < ids.size(); ++i) MOEEDB_RETURN_IF_ERROR(CheckId(ids[i], "id " + std::to_string(i)));
  return Status::OK();
}

Status CheckBatchIds(const std::vector<StoredDocument>& docs) {
  std::set<std::string> seen;
  for (size_t i = 0; i < docs.size(); ++i) {
    MOEEDB_RETURN_IF_ERROR(CheckId(docs[i].id, "document " + std::to_string(i)));
    if (!seen.insert(docs[i].id).second)
      return Status::InvalidArgument("document " + std::to_string(i) + ": id '" + docs[i].id +
                                     "' appears twice in the batch");
  }
  return Status::OK();
}

Result<std::string> DocumentRecord(const StoredDocument& d) {
  try {
    json doc = {{"id", d.id}, {"text", d.text}};
    doc["metadata"] = d.metadata_json.empty() ? json::object() : json::parse(d.metadata_json);
    return doc.dump();
  } catch (const std::exception& e) {
    return Status::InvalidArgument("document '" + d.id + "': " + e.what());
  }
}

Status ParseDocumentRecord(const std::string& record, StoredDocument* d) {
  try {
    json j = json::parse(record);
    d->id = j.at("id").get<std::string>();
    d->text = j.at("text").get<std::string>();
    d->metadata_json = j.at("metadata").dump();
  } catch (const std::exception& e) {
    return Status::Corruption("document record is damaged: " + std::string(e.what()));
  }
  return Status::OK();
}

}  // namespace moeedb
