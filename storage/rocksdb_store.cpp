#include "storage/rocksdb_store.h"

#include <rocksdb/db.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

namespace moeedb {

using json = nlohmann::json;

namespace {

enum Cf { kMeta = 0, kIds, kDocs, kHs, kRw, kOps, kNumCf };
const char* kCfNames[kNumCf] = {"meta", "ids", "docs", "hs", "rw", "ops"};

void PutBE32(std::string* s, uint32_t v) {
  for (int i = 3; i >= 0; --i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutBE64(std::string* s, uint64_t v) {
  for (int i = 7; i >= 0; --i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t GetBE64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
std::string CollPrefix(uint32_t coll) {
  std::string s;
  PutBE32(&s, coll);
  return s;
}
std::string DocKey(uint32_t coll, uint64_t internal) {
  std::string s = CollPrefix(coll);
  PutBE64(&s, internal);
  return s;
}
// External id -> internal id, keyed in listing order (IdOrderKey). Stores
// written before kept these under "e" + the id's bytes: Open moves them.
std::string ExtKey(uint32_t coll, const std::string& external) { return CollPrefix(coll) + "k" + IdOrderKey(external); }
constexpr char kOldExtTag = 'e';
// The meta key that says every id key is in listing order.
constexpr const char* kIdsInListingOrder = "format/ids-in-listing-order";
std::string IntKey(uint32_t coll, uint64_t internal) {
  std::string s = CollPrefix(coll) + "i";
  PutBE64(&s, internal);
  return s;
}
std::string MetaKey(const std::string& name) { return "c/" + name; }
constexpr const char* kAliasesKey = "aliases";  // a JSON object alias -> collection
std::string FloatBytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}
std::vector<float> BytesFloats(const std::string& s) {
  std::vector<float> v(s.size() / sizeof(float));
  std::memcpy(v.data(), s.data(), v.size() * sizeof(float));
  return v;
}
// A docs record, without vectors.
Result<StoredDocument> ParseDocument(const std::string& v) {
  StoredDocument d;
  MOEEDB_RETURN_IF_ERROR(ParseDocumentRecord(v, &d));
  return d;
}
std::string EncodeOp(const std::vector<uint64_t>& added, const std::vector<uint64_t>& removed) {
  std::string s;
  PutBE64(&s, added.size());
  for (uint64_t a : added) PutBE64(&s, a);
  PutBE64(&s, removed.size());
  for (uint64_t r : removed) PutBE64(&s, r);
  return s;
}
bool DecodeOp(const std::string& s, OpRecord* op) {
  size_t pos = 0;
  auto read = [&](uint64_t* v) {
    if (pos + 8 > s.size()) return false;
    *v = GetBE64(s.data() + pos);
    pos += 8;
    return true;
  };
  uint64_t n = 0, v = 0;
  if (!read(&n) || n > s.size() / 8) return false;
  for (uint64_t i = 0; i < n; ++i) { if (!read(&v)) return false; op->added.push_back(v); }
  if (!read(&n) || n > s.size() / 8) return false;
  for (uint64_t i = 0; i < n; ++i) { if (!read(&v)) return false; op->removed.push_back(v); }
  return pos == s.size();
}
Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::OK();
  if (s.IsNotFound()) return Status::NotFound(what + ": " + s.ToString());
  if (s.IsCorruption()) return Status::Corruption(what + ": " + s.ToString());
  return Status::IOError(what + ": " + s.ToString());
}

}  // namespace

RocksStore::~RocksStore() {
  for (auto* h : cf_) if (db_) db_->DestroyColumnFamilyHandle(h);
  if (db_) db_->Close();
}

Result<std::unique_ptr<RocksStore>> RocksStore::Open(const std::string& path) {
  rocksdb::DBOptions opts;
  opts.create_if_missing = true;
  opts.create_missing_column_families = true;
  // One memtable budget across all column families (each would otherwise
  // grow to 64 MB, x2, before flushing): a server under steady writes levels
  // off instead of growing by hundreds of MB.
  opts.db_write_buffer_size = 32 << 20;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  cfs.emplace_back(rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions());
  for (const char* n : kCfNames) cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(opts, path, cfs, &handles, &raw);
  if (!s.ok()) return FromRocks(s, "opening database " + path);
  std::unique_ptr<RocksStore> st(new RocksStore());
  st->path_ = path;
  st->db_.reset(raw);
  raw->DestroyColumnFamilyHandle(handles[0]);  // default family: unused
  st->cf_.assign(handles.begin() + 1, handles.end());
  MOEEDB_RETURN_IF_ERROR(st->MoveIdsToListingOrder());
  return st;
}

Status RocksStore::MoveIdsToListingOrder() {
  // Done once: the marker says the ids are in listing order (a store
  // written from now on is not for older versions to open).
  std::string done;
  if (db_->Get(rocksdb::ReadOptions(), cf_[kMeta], kIdsInListingOrder, &done).ok()) return Status::OK();
  // Keys are 4 bytes of collection id, a tag, the rest; the old id keys'
  // tag is 'e'. Each id moves in one batch (its new key and the old one's
  // deletion together), batches of kMoveBatch ids; the store serves nothing
  // until the move is done, and a crash resumes it on the next open.
  constexpr size_t kMoveBatch = 8192;
  rocksdb::WriteOptions wo;
  wo.sync = true;
  rocksdb::WriteBatch batch;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf_[kIds]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const rocksdb::Slice k = it->key();
    if (k.size() < 5 || k[4] != kOldExtTag) continue;
    const std::string external(k.data() + 5, k.size() - 5);
    uint32_t coll = 0;
    for (int i = 0; i < 4; ++i) coll = (coll << 8) | static_cast<uint8_t>(k[i]);
    batch.Put(cf_[kIds], ExtKey(coll, external), it->value());
    batch.Delete(cf_[kIds], k);
    if (batch.Count() >= 2 * kMoveBatch) {
      MOEEDB_RETURN_IF_ERROR(FromRocks(db_->Write(wo, &batch), "moving ids of " + path_ + " to listing order"));
      batch.Clear();
    }
  }
  MOEEDB_RETURN_IF_ERROR(FromRocks(it->status(), "reading ids of " + path_));
  batch.Put(cf_[kMeta], kIdsInListingOrder, "1");
  return FromRocks(db_->Write(wo, &batch), "moving ids of " + path_ + " to listing order");
}

Result<CollectionRecord> RocksStore::LoadCollection(const std::string& name) const {
  std::string v;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), cf_[kMeta], MetaKey(name), &v);
  if (s.IsNotFound()) return Status::NotFound("no collection named '" + name + "'");
  if (!s.ok()) return FromRocks(s, "reading collection " + name);
  try {
    json j = json::parse(v);
    CollectionRecord r;
    r.name = name;
    r.id = j.at("id").get<uint32_t>();
    r.spec_json = j.at("spec").dump();
    r.next_internal = j.at("next_internal").get<uint64_t>();
    r.last_op = j.at("last_op").get<uint64_t>();
    r.count = j.at("count").get<uint64_t>();
    return r;
  } catch (const std::exception& e) {
    return Status::Corruption("collection record '" + name + "' is damaged: " + e.what());
  }
}

Status RocksStore::WriteCollection(void* batch_ptr, const CollectionRecord& r) {
  auto* batch = static_cast<rocksdb::WriteBatch*>(batch_ptr);
  json j = {{"id", r.id}, {"spec", json::parse(r.spec_json)}, {"next_internal", r.next_internal},
            {"last_op", r.last_op}, {"count", r.count}};
  return FromRocks(batch->Put(cf_[kMeta], MetaKey(r.name), j.dump()), "batch");
}

Result<CollectionRecord> RocksStore::CreateCollection(const std::string& name, const std::string& spec_json) {
  MOEEDB_RETURN_IF_ERROR(CheckNewCollection(name, spec_json));
  std::lock_guard<std::mutex> lock(write_mu_);
  if (LoadCollection(name).ok()) return Status::InvalidArgument("collection '" + name + "' already exists");
  MOEEDB_ASSIGN_OR_RETURN(auto aliases, ListAliases());
  if (aliases.count(name)) return Status::InvalidArgument("'" + name + "' is an alias of collection '" + aliases[name] + "'");
  // Collection ids are never reused: a counter in meta.
  std::string v;
  uint32_t id = 1;
  if (db_->Get(rocksdb::ReadOptions(), cf_[kMeta], "next_collection_id", &v).ok() && v.size() == 8)
    id = static_cast<uint32_t>(GetBE64(v.data()));
  CollectionRecord r;
  r.name = name;
  r.id = id;
  r.spec_json = spec_json;
  rocksdb::WriteBatch batch;
  std::string next;
  PutBE64(&next, id + 1);
  batch.Put(cf_[kMeta], "next_collection_id", next);
  MOEEDB_RETURN_IF_ERROR(WriteCollection(&batch, r));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  MOEEDB_RETURN_IF_ERROR(FromRocks(db_->Write(wo, &batch), "creating collection " + name));
  return r;
}

Result<CollectionRecord> RocksStore::GetCollection(const std::string& name) const { return LoadCollection(name); }

Result<std::vector<CollectionRecord>> RocksStore::ListCollections() const {
  std::vector<CollectionRecord> out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf_[kMeta]));
  for (it->Seek("c/"); it->Valid() && it->key().starts_with("c/"); it->Next()) {
    auto r = LoadCollection(it->key().ToString().substr(2));
    if (!r.ok()) return r.status();
    out.push_back(std::move(r).value());
  }
  return out;
}

Status RocksStore::DropCollection(const std::string& name) {
  std::lock_guard<std::mutex> lock(write_mu_);
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(name));
  rocksdb::WriteBatch batch;
  const std::string begin = CollPrefix(r.id), end = CollPrefix(r.id + 1);
  for (int cf = kIds; cf < kNumCf; ++cf) batch.DeleteRange(cf_[cf], begin, end);
  batch.Delete(cf_[kMeta], MetaKey(name));
  MOEEDB_ASSIGN_OR_RETURN(auto aliases, ListAliases());
  if (std::erase_if(aliases, [&](const auto& a) { return a.second == name; }) > 0)
    batch.Put(cf_[kMeta], kAliasesKey, json(aliases).dump());
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return FromRocks(db_->Write(wo, &batch), "dropping collection " + name);
}

Result<std::map<std::string, std::string>> RocksStore::ListAliases() const {
  std::string v;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), cf_[kMeta], kAliasesKey, &v);
  if (s.IsNotFound()) return std::map<std::string, std::string>();
  MOEEDB_RETURN_IF_ERROR(FromRocks(s, "reading aliases"));
  const json j = json::parse(v, nullptr, false);
  if (!j.is_object()) return Status::Corruption("the aliases record is damaged");
  std::map<std::string, std::string> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_string()) return Status::Corruption("the aliases record is damaged");
    out[it.key()] = it.value().get<std::string>();
  }
  return out;
}

Status RocksStore::UpdateAliases(const std::map<std::string, std::string>& expected,
                                 const std::map<std::string, std::string>& aliases) {
  std::lock_guard<std::mutex> lock(write_mu_);
  MOEEDB_ASSIGN_OR_RETURN(auto now, ListAliases());
  if (now != expected) return Status::Conflict("the aliases changed meanwhile");
  // Under write_mu_: no collection is created or dropped meanwhile.
  for (const auto& [alias, collection] : aliases) {
    if (LoadCollection(alias).ok()) return Status::InvalidArgument("alias '" + alias + "': a collection has that name");
    MOEEDB_RETURN_IF_ERROR(LoadCollection(collection).status());
  }
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return FromRocks(db_->Put(wo, cf_[kMeta], kAliasesKey, json(aliases).dump()), "changing aliases");
}

Status RocksStore::UpdateSpec(const std::string& name, const std::string& expected, const std::string& spec_json) {
  std::lock_guard<std::mutex> lock(write_mu_);
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(name));
  if (r.spec_json != expected) return Status::Conflict("collection " + name + "'s spec changed meanwhile");
  r.spec_json = spec_json;
  rocksdb::WriteBatch batch;
  MOEEDB_RETURN_IF_ERROR(WriteCollection(&batch, r));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return FromRocks(db_->Write(wo, &batch), "updating collection " + name);
}

Result<WriteResult> RocksStore::Upsert(const std::string& collection, const std::vector<StoredDocument>& docs, bool sync) {
  return Write(collection, docs, nullptr, sync);
}

Result<WriteResult> RocksStore::UpsertIfUnchanged(const std::string& collection, const std::vector<StoredDocument>& docs,
                                                  const std::vector<uint64_t>& expected, bool sync) {
  if (expected.size() != docs.size()) return Status::InvalidArgument("one expected internal id per document");
  return Write(collection, docs, &expected, sync);
}

Result<std::optional<uint64_t>> RocksStore::InternalId(const std::string& collection, const std::string& external) const {
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(collection));
  return InternalIdIn(r, external);
}

Result<std::optional<uint64_t>> RocksStore::InternalIdIn(const CollectionRecord& r, const std::string& external) const {
  std::string v;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), cf_[kIds], ExtKey(r.id, external), &v);
  if (s.IsNotFound()) return std::optional<uint64_t>();
  if (!s.ok() || v.size() != 8) return FromRocks(s, "reading id " + external);
  return std::optional<uint64_t>(GetBE64(v.data()));
}

Result<WriteResult> RocksStore::Write(const std::string& collection, const std::vector<StoredDocument>& docs,
                                      const std::vector<uint64_t>* expected, bool sync) {
  std::lock_guard<std::mutex> lock(write_mu_);
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(collection));
  MOEEDB_RETURN_IF_ERROR(CheckBatchIds(docs));
  WriteResult res;
  if (docs.empty()) return res;
  rocksdb::WriteBatch batch;
  for (size_t i = 0; i < docs.size(); ++i) {
    const StoredDocument& d = docs[i];
    std::string existing;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), cf_[kIds], ExtKey(r.id, d.id), &existing);
    const uint64_t now = s.ok() && existing.size() == 8 ? GetBE64(existing.data()) : 0;
    if (expected != nullptr && (*expected)[i] != now)
      return Status::Conflict("document '" + d.id + "' of " + collection + " changed since it was read");
    if (s.ok() && existing.size() == 8) {
      const uint64_t old = GetBE64(existing.data());
      res.removed.push_back(old);
      for (int cf : {kDocs, kHs, kRw}) batch.Delete(cf_[cf], DocKey(r.id, old));
      batch.Delete(cf_[kIds], IntKey(r.id, old));
    } else if (!s.IsNotFound()) {
      return FromRocks(s, "reading id " + d.id);
    } else {
      ++r.count;
    }
    const uint64_t internal = r.next_internal++;
    res.added.push_back(internal);
    std::string ib;
    PutBE64(&ib, internal);
    batch.Put(cf_[kIds], ExtKey(r.id, d.id), ib);
    batch.Put(cf_[kIds], IntKey(r.id, internal), d.id);
    MOEEDB_ASSIGN_OR_RETURN(std::string doc_bytes, DocumentRecord(d));
    batch.Put(cf_[kDocs], DocKey(r.id, internal), doc_bytes);
    batch.Put(cf_[kHs], DocKey(r.id, internal), FloatBytes(d.hs));
    batch.Put(cf_[kRw], DocKey(r.id, internal), FloatBytes(d.rw));
  }
  res.seq = ++r.last_op;
  std::string op_key = CollPrefix(r.id);
  PutBE64(&op_key, res.seq);
  batch.Put(cf_[kOps], op_key, EncodeOp(res.added, res.removed));
  MOEEDB_RETURN_IF_ERROR(WriteCollection(&batch, r));
  rocksdb::WriteOptions wo;
  wo.sync = sync;
  MOEEDB_RETURN_IF_ERROR(FromRocks(db_->Write(wo, &batch), "writing to " + collection));
  return res;
}

Result<WriteResult> RocksStore::Delete(const std::string& collection, const std::vector<std::string>& ids, bool sync) {
  MOEEDB_RETURN_IF_ERROR(CheckDeleteIds(ids));
  std::lock_guard<std::mutex> lock(write_mu_);
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(collection));
  WriteResult res;
  rocksdb::WriteBatch batch;
  std::set<std::string> seen;
  for (const auto& id : ids) {
    if (!seen.insert(id).second) continue;
    std::string existing;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), cf_[kIds], ExtKey(r.id, id), &existing);
    if (s.IsNotFound()) { ++res.not_found; continue; }
    if (!s.ok() || existing.size() != 8) return FromRocks(s, "reading id " + id);
    const uint64_t old = GetBE64(existing.data());
    res.removed.push_back(old);
    for (int cf : {kDocs, kHs, kRw}) batch.Delete(cf_[cf], DocKey(r.id, old));
    batch.Delete(cf_[kIds], IntKey(r.id, old));
    batch.Delete(cf_[kIds], ExtKey(r.id, id));
    --r.count;
  }
  if (res.removed.empty()) return res;
  res.seq = ++r.last_op;
  std::string op_key = CollPrefix(r.id);
  PutBE64(&op_key, res.seq);
  batch.Put(cf_[kOps], op_key, EncodeOp({}, res.removed));
  MOEEDB_RETURN_IF_ERROR(WriteCollection(&batch, r));
  rocksdb::WriteOptions wo;
  wo.sync = sync;
  MOEEDB_RETURN_IF_ERROR(FromRocks(db_->Write(wo, &batch), "deleting from " + collection));
  return res;
}

Result<std::optional<StoredDocument>> RocksStore::ReadDocument(const CollectionRecord& r, uint64_t internal,
                                                          bool with_vectors) const {
  std::string v;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), cf_[kDocs], DocKey(r.id, internal), &v);
  if (s.IsNotFound()) return std::optional<StoredDocument>();
  if (!s.ok()) return FromRocks(s, "document " + std::to_string(internal) + " of " + r.name);
  MOEEDB_ASSIGN_OR_RETURN(StoredDocument d, ParseDocument(v));
  if (with_vectors) {
    std::string hs, rw;
    MOEEDB_RETURN_IF_ERROR(FromRocks(db_->Get(rocksdb::ReadOptions(), cf_[kHs], DocKey(r.id, internal), &hs), "hs"));
    MOEEDB_RETURN_IF_ERROR(FromRocks(db_->Get(rocksdb::ReadOptions(), cf_[kRw], DocKey(r.id, internal), &rw), "rw"));
    d.hs = BytesFloats(hs);
    d.rw = BytesFloats(rw);
  }
  return std::optional<StoredDocument>(std::move(d));
}

Result<StoredDocument> RocksStore::GetByInternal(const std::string& collection, uint64_t internal, bool with_vectors) const {
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(collection));
  MOEEDB_ASSIGN_OR_RETURN(std::optional<StoredDocument> d, ReadDocument(r, internal, with_vectors));
  if (!d) return Status::NotFound("document " + std::to_string(internal) + " of " + collection + " is not stored");
  return std::move(*d);
}

Result<std::vector<std::optional<StoredDocument>>> RocksStore::GetManyByInternal(const std::string& collection,
                                                                            const std::vector<uint64_t>& internal_ids,
                                                                            bool with_vectors,
                                                                            const ShardFilter& shard) const {
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(collection));
  std::vector<std::optional<StoredDocument>> out;
  out.reserve(internal_ids.size());
  for (uint64_t id : internal_ids) {
    MOEEDB_ASSIGN_OR_RETURN(std::optional<StoredDocument> d, ReadDocument(r, id, with_vectors));
    if (d && !shard.Holds(d->id)) d.reset();
    out.push_back(std::move(d));
  }
  return out;
}

Result<std::optional<StoredDocument>> RocksStore::Get(const std::string& collection, const std::string& external) const {
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(collection));
  MOEEDB_ASSIGN_OR_RETURN(std::optional<uint64_t> internal, InternalIdIn(r, external));
  if (!internal) return std::optional<StoredDocument>();
  return ReadDocument(r, *internal, true);
}

Result<DocumentPage> RocksStore::ListDocuments(const std::string& collection, const std::string& after, size_t limit) const {
  if (limit == 0) return Status::InvalidArgument("a page holds at least one document");
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(collection));
  const std::string prefix = CollPrefix(r.id) + "k";
  rocksdb::ReadOptions ro;
  const rocksdb::Snapshot* snap = db_->GetSnapshot();
  ro.snapshot = snap;
  struct Release {
    rocksdb::DB* db;
    const rocksdb::Snapshot* s;
    ~Release() { db->ReleaseSnapshot(s); }
  } release{db_.get(), snap};
  DocumentPage page;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, cf_[kIds]));
  it->Seek(after.empty() ? prefix : ExtKey(r.id, after));
  if (!after.empty() && it->Valid() && it->key() == ExtKey(r.id, after)) it->Next();
  for (; it->Valid() && it->key().starts_with(prefix); it->Next()) {
    if (page.documents.size() == limit) {
      page.next_after = page.documents.back().id;
      break;
    }
    if (it->value().size() != 8) return Status::Corruption("collection " + collection + ": damaged id record");
    std::string v;
    MOEEDB_RETURN_IF_ERROR(FromRocks(db_->Get(ro, cf_[kDocs], DocKey(r.id, GetBE64(it->value().data())), &v),
                                     "document of " + collection));
    MOEEDB_ASSIGN_OR_RETURN(StoredDocument d, ParseDocument(v));
    page.documents.push_back(std::move(d));
  }
  MOEEDB_RETURN_IF_ERROR(FromRocks(it->status(), "listing " + collection));
  return page;
}

Status RocksStore::ScanVectors(const std::string& collection,
                          const std::function<void(uint64_t, const float*, size_t, const float*, size_t,
                                                   const std::string&)>& fn,
                          const ShardFilter& shard) const {
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(collection));
  const std::string prefix = CollPrefix(r.id);
  // One snapshot for the three iterators: each would otherwise take its own
  // as it is made, and a write between them would make them disagree.
  rocksdb::ManagedSnapshot snap(db_.get());
  rocksdb::ReadOptions ro;
  ro.snapshot = snap.snapshot();
  std::unique_ptr<rocksdb::Iterator> hs(db_->NewIterator(ro, cf_[kHs]));
  std::unique_ptr<rocksdb::Iterator> rw(db_->NewIterator(ro, cf_[kRw]));
  std::unique_ptr<rocksdb::Iterator> docs(db_->NewIterator(ro, cf_[kDocs]));
  hs->Seek(prefix);
  rw->Seek(prefix);
  docs->Seek(prefix);
  for (; hs->Valid() && hs->key().starts_with(prefix); hs->Next(), rw->Next(), docs->Next()) {
    if (!rw->Valid() || !docs->Valid() || rw->key() != hs->key() || docs->key() != hs->key())
      return Status::Corruption("collection " + collection + ": hs, rw and docs records disagree");
    const uint64_t internal = GetBE64(hs->key().data() + 4);
    std::string meta = "{}";
    try {
      const json doc = json::parse(docs->value().ToString());
      if (!shard.Holds(doc.at("id").get<std::string>())) continue;
      meta = doc.at("metadata").dump();
    } catch (...) {
      return Status::Corruption("collection " + collection + ": damaged document record");
    }
    fn(internal, reinterpret_cast<const float*>(hs->value().data()), hs->value().size() / 4,
       reinterpret_cast<const float*>(rw->value().data()), rw->value().size() / 4, meta);
  }
  if (rw->Valid() && rw->key().starts_with(prefix))
    return Status::Corruption("collection " + collection + ": rw record without hs");
  return FromRocks(hs->status(), "scanning " + collection);
}

Status RocksStore::ScanMetadata(const std::string& collection,
                           const std::function<void(uint64_t, const std::string&)>& fn,
                           const ShardFilter& shard) const {
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(collection));
  const std::string prefix = CollPrefix(r.id);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf_[kDocs]));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    std::string meta;
    try {
      const json doc = json::parse(it->value().ToString());
      if (!shard.Holds(doc.at("id").get<std::string>())) continue;
      meta = doc.at("metadata").dump();
    } catch (...) {
      return Status::Corruption("collection " + collection + ": damaged document record");
    }
    fn(GetBE64(it->key().data() + 4), meta);
  }
  return FromRocks(it->status(), "scanning " + collection);
}

Status RocksStore::ReadOps(const std::string& collection, uint64_t after, size_t limit,
                           const std::function<void(const OpRecord&)>& fn) const {
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(collection));
  const std::string prefix = CollPrefix(r.id);
  std::string start = prefix;
  PutBE64(&start, after + 1);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf_[kOps]));
  size_t n = 0;
  for (it->Seek(start); it->Valid() && it->key().starts_with(prefix) && n < limit; it->Next(), ++n) {
    OpRecord op;
    op.seq = GetBE64(it->key().data() + 4);
    if (!DecodeOp(it->value().ToString(), &op)) return Status::Corruption("damaged op-log entry in " + collection);
    fn(op);
  }
  return FromRocks(it->status(), "reading op log of " + collection);
}

Status RocksStore::TrimOps(const std::string& collection, uint64_t upto) {
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord r, LoadCollection(collection));
  std::string end = CollPrefix(r.id);
  PutBE64(&end, upto + 1);
  return FromRocks(db_->DeleteRange(rocksdb::WriteOptions(), cf_[kOps], CollPrefix(r.id), end), "trimming op log");
}

Status RocksStore::Checkpoint(const std::string& dir) const {
  rocksdb::Checkpoint* cp = nullptr;
  MOEEDB_RETURN_IF_ERROR(FromRocks(rocksdb::Checkpoint::Create(db_.get(), &cp), "checkpoint"));
  std::unique_ptr<rocksdb::Checkpoint> owner(cp);
  return FromRocks(cp->CreateCheckpoint(dir), "checkpoint to " + dir);
}

}  // namespace moeedb
