#include "database/vector_collection.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/utf8.h"
#include "index/metadata_filter.h"

namespace moeedb {

namespace fs = std::filesystem;
using json = nlohmann::json;

VectorCollection::~VectorCollection() {
  replicas_.clear();  // closes the lexical indexes before their folders go
  if (remove_folders_) RemoveIndexFolders(index_dir_);
}

std::string VectorCollection::IndexDir(const Store& store, const std::string& index_root, const CollectionRecord& rec) {
  const fs::path root = index_root.empty() ? fs::path(store.location()) : fs::path(index_root);
  return (root / "indexes" / (std::to_string(rec.id) + "-" + rec.name)).string();
}

Result<std::unique_ptr<VectorCollection>> VectorCollection::Create(Store* store, const std::string& name,
                                                                   const CollectionOptions& o,
                                                                   const std::string& index_root, ShardPeers* peers) {
  if (o.dim_hs == 0 || o.dim_rw == 0) return Status::InvalidArgument("collection dims must be positive");
  if (o.shards == 0 || o.replicas == 0) return Status::InvalidArgument("a collection has at least 1 shard and 1 replica");
  if (!std::isfinite(o.default_alpha)) return Status::InvalidArgument("alpha must be finite");
  MOEEDB_RETURN_IF_ERROR(o.lexical.Validate());
  DualIndexSpec ix = o.index;
  ix.dim_hs = o.dim_hs;
  ix.dim_rw = o.dim_rw;
  Standardizer sh = Standardizer::Identity(o.dim_hs), sr = Standardizer::Identity(o.dim_rw);
  if (!o.std_hs_json.empty()) { MOEEDB_ASSIGN_OR_RETURN(sh, Standardizer::FromJson(o.std_hs_json)); }
  if (!o.std_rw_json.empty()) { MOEEDB_ASSIGN_OR_RETURN(sr, Standardizer::FromJson(o.std_rw_json)); }
  if (sh.dim() != o.dim_hs || sr.dim() != o.dim_rw)
    return Status::InvalidArgument("standardizer statistics do not match the collection dims");
  // Codes asked of a collection apply to its halves of unit vectors: a plain
  // collection's RW half is the client vectors' absence flags (raw), which
  // no client quantizes; a raw HS half (Dot, Euclid) with codes is refused.
  if (!sr.normalizes() && ix.rw.kind == IndexKind::kFlat) ix.rw.codes = CodeKind::kNone;
  // Refused before the record is written, so a refused create leaves nothing behind.
  MOEEDB_RETURN_IF_ERROR(DualIndex::CheckSpec(ix, sh, sr));
  json info;
  try {
    info = json::parse(o.info_json);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("collection info is not JSON: ") + e.what());
  }
  json spec = {{"dim_hs", o.dim_hs},   {"dim_rw", o.dim_rw},   {"index", json::parse(ix.ToJson())},
               {"std_hs", json::parse(sh.ToJson())}, {"std_rw", json::parse(sr.ToJson())},
               {"alpha", o.default_alpha}, {"info", info}, {"lexical", json::parse(o.lexical.ToJson())},
               {"shard_layout", "range"}};
  // Recorded only when sharded: a collection of one shard keeps the spec it always had.
  if (o.shards > 1 || o.replicas > 1) spec["shards"] = o.shards, spec["replicas"] = o.replicas;
  if (!o.payload_indexes.empty()) {
    MOEEDB_RETURN_IF_ERROR(PayloadIndexFieldsFromJson(PayloadIndexFieldsToJson(o.payload_indexes)).status());
    spec["payload_indexes"] = PayloadIndexFieldsToJson(o.payload_indexes);
  }
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord rec, store->CreateCollection(name, spec.dump()));
  (void)rec;
  return Open(store, name, index_root, peers);
}

Result<std::string> VectorCollection::RecordedInfo(const CollectionRecord& record) {
  const json spec = json::parse(record.spec_json, nullptr, false);
  if (spec.is_discarded() || !spec.is_object()) return Status::Corruption("collection '" + record.name + "' spec is damaged");
  return spec.value("info", json::object()).dump();
}

Status VectorCollection::Drop(Store* store, const std::string& name, const std::string& index_root) {
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord rec, store->GetCollection(name));
  MOEEDB_RETURN_IF_ERROR(store->DropCollection(name));
  RemoveIndexFolders(IndexDir(*store, index_root, rec));
  return Status::OK();
}

void VectorCollection::RemoveIndexFolders(const std::string& index_dir) {
  ShardReplica::RemoveFolders(index_dir);  // one shard's
  // Every split's shards: "<index_dir>.shard-...", whatever their count.
  const fs::path dir(index_dir);
  const std::string prefix = dir.filename().string() + ".shard-";
  std::error_code ec;
  std::vector<fs::path> gone;
  for (fs::directory_iterator it(dir.parent_path(), ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind(prefix, 0) == 0) gone.push_back(it->path());
  for (const fs::path& p : gone) fs::remove_all(p, ec);
}

Result<std::unique_ptr<VectorCollection>> VectorCollection::Open(Store* store, const std::string& name,
                                                                 const std::string& index_root, ShardPeers* peers) {
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord rec, store->GetCollection(name));
  std::unique_ptr<VectorCollection> c(new VectorCollection());
  c->store_ = store;
  c->peers_ = peers;
  c->name_ = name;
  c->index_dir_ = IndexDir(*store, index_root, rec);
  c->spec_json_ = rec.spec_json;
  MOEEDB_ASSIGN_OR_RETURN(c->layout_, CollectionLayout::FromRecord(rec));
  MOEEDB_ASSIGN_OR_RETURN(c->schema_, VectorSchema::FromInfo(c->layout_.info_json));
  c->payload_indexes_ = c->layout_.payload_indexes;
  c->shards_ = c->layout_.shards;
  MOEEDB_RETURN_IF_ERROR(c->SyncShards());
  return c;
}

Result<std::unique_ptr<ShardReplica>> VectorCollection::OpenReplica(ShardRef ref) const {
  CollectionLayout layout = layout_;
  layout.shards = ref.shards;
  layout.payload_indexes = payload_indexes();
  const std::string dir = ShardReplica::Dir(index_dir_, ref.shard, ref.shards);
  // Folders named before splits were told apart ("<dir>.shard-K") hold a
  // shard of the split the collection was created with: used, not rebuilt,
  // while that is the split (never once it was resharded: an old node's
  // folder could hold a shard of another split, and a lexical index is
  // trusted by its log position alone).
  const std::string legacy = index_dir_ + ".shard-" + std::to_string(ref.shard);
  std::error_code ec;
  if (ref.shards > 1 && ref.shards == layout_.shards && !layout_.resharded && !fs::exists(dir, ec) &&
      fs::exists(legacy, ec)) {
    fs::rename(legacy, dir, ec);
    if (fs::exists(legacy + ".lexical", ec)) fs::rename(legacy + ".lexical", dir + ".lexical", ec);
  }
  const auto on_floor = [this, ref](uint64_t seq) {
    {
      std::lock_guard lock(opening_mu_);
      opening_floors_[ref] = seq;
    }
    if (peers_ != nullptr) peers_->HoldLogFrom(layout_, ref, seq);
  };
  return ShardReplica::Open(store_, layout, ref.shard, dir, on_floor);
}

void VectorCollection::ForgetOpening(ShardRef ref) const {
  std::lock_guard lock(opening_mu_);
  opening_floors_.erase(ref);
}

Status VectorCollection::SyncShards() {
  std::lock_guard sync(sync_mu_);
  PlacedShards want;
  std::optional<PlacedShards> placed;
  if (peers_ != nullptr) placed = peers_->HeldShards(layout_);
  placed_ = placed.has_value();
  if (placed) want = *placed;
  else {
    want.shards = shards_;
    for (uint32_t k = 0; k < want.shards; ++k) want.held.push_back(ShardRef{want.shards, k});
  }
  const std::vector<ShardRef> held = HeldReplicas();
  const auto holds = [](const std::vector<ShardRef>& v, ShardRef r) { return std::find(v.begin(), v.end(), r) != v.end(); };
  // New replicas are opened without the lock (searches go on meanwhile), a
  // few at once: a restarted node loads its snapshots side by side.
  std::vector<ShardRef> opening;
  for (ShardRef ref : want.held)
    if (!holds(held, ref)) opening.push_back(ref);
  Status first;
  std::mutex first_mu;
  std::atomic<size_t> next{0};
  const auto open_some = [&] {
    for (size_t i; (i = next++) < opening.size();) {
      Result<std::unique_ptr<ShardReplica>> r = Status::Internal("not opened");
      try {
        r = OpenReplica(opening[i]);
      } catch (const std::exception& e) {  // bad_alloc: this thread must not end the process
        r = Status::Internal(std::string("opening a replica: ") + e.what());
      }
      if (!r.ok()) {
        ForgetOpening(opening[i]);
        std::lock_guard lock(first_mu);
        if (first.ok()) first = r.status();
        continue;
      }
      {
        std::unique_lock lock(replicas_mu_);
        replicas_[opening[i]] = std::move(r).value();
      }
      ForgetOpening(opening[i]);  // its applied entry is the floor now
    }
  };
  std::vector<std::thread> openers;
  const size_t threads = std::min<size_t>(opening.size(), kOpenReplicasAtOnce);
  for (size_t t = 1; t < threads; ++t) openers.emplace_back(open_some);
  open_some();
  for (auto& t : openers) t.join();
  // Searches move to the placed split once its replicas here are open (a
  // shard not held here is asked of the peers).
  {
    std::unique_lock lock(replicas_mu_);
    shards_ = want.shards;
  }
  for (ShardRef ref : held) {
    if (holds(want.held, ref)) continue;
    std::unique_ptr<ShardReplica> gone;
    {
      std::unique_lock lock(replicas_mu_);
      auto it = replicas_.find(ref);
      if (it == replicas_.end()) continue;
      gone = std::move(it->second);
      replicas_.erase(it);
    }
    const std::string dir = gone->dir();
    gone.reset();  // closes its lexical index before the folders go
    ShardReplica::RemoveFolders(dir);
  }
  return first;
}

Status VectorCollection::Reshard(uint32_t shards) {
  if (shards == 0 || shards > kMaxShards)
    return Status::InvalidArgument("a collection has 1 to " + std::to_string(kMaxShards) + " shards, not " +
                                   std::to_string(shards));
  if (placed_) return peers_->Reshard(layout_, shards);
  // In a cluster a collection every node holds whole (created without shards
  // or replicas) is not placed: split here it would be placed with one
  // replica a shard, behind the nodes' backs.
  if (peers_ != nullptr)
    return Status::InvalidArgument("collection '" + name_ + "' is held whole by every node of the cluster (created "
                                   "without shards or replicas): create it with shards or replicas to reshard it");
  std::lock_guard sync(sync_mu_);
  // The log keeps what the new split reads meanwhile (its replicas' floors;
  // RocksDB's snapshot trim waits): it catches up from where its build began.
  resharding_ = true;
  const uint32_t from = shards_;
  struct Done {
    VectorCollection* c;
    uint32_t shards;
    ~Done() {
      for (uint32_t k = 0; k < shards; ++k) c->ForgetOpening(ShardRef{shards, k});  // in replicas_, or dropped
      c->resharding_ = false;
    }
  } done{this, shards};
  if (shards == from) return Status::OK();
  // The new split, built from the store beside the old one.
  std::vector<std::unique_ptr<ShardReplica>> built;
  for (uint32_t k = 0; k < shards; ++k) {
    // A folder of that split left by an earlier reshard cut short is stale.
    ShardReplica::RemoveFolders(ShardReplica::Dir(index_dir_, k, shards));
    MOEEDB_ASSIGN_OR_RETURN(auto r, OpenReplica(ShardRef{shards, k}));
    built.push_back(std::move(r));
  }
  // The record names the new count before the swap: a process stopped
  // after this opens the new split (its folders, or rebuilt from the store).
  MOEEDB_RETURN_IF_ERROR(RecordSplit(store_, name_, layout_.store_id, shards));
  std::vector<std::unique_ptr<ShardReplica>> old;
  {
    // No write of this node in between: the new replicas hold every entry
    // the old ones do when they swap.
    std::unique_lock write = [&] {
      std::lock_guard gate(write_gate_);
      return std::unique_lock(write_mu_);
    }();
    for (auto& r : built) MOEEDB_RETURN_IF_ERROR(r->CatchUp().status());
    std::unique_lock lock(replicas_mu_);
    for (auto it = replicas_.begin(); it != replicas_.end();) {
      old.push_back(std::move(it->second));
      it = replicas_.erase(it);
    }
    for (uint32_t k = 0; k < shards; ++k) replicas_[ShardRef{shards, k}] = std::move(built[k]);
    shards_ = shards;
  }
  for (auto& r : old) {
    const std::string dir = r->dir();
    r.reset();
    ShardReplica::RemoveFolders(dir);
  }
  return Status::OK();
}

Status VectorCollection::SetPayloadIndexes(const PayloadIndexFields& fields) {
  std::lock_guard sync(sync_mu_);  // no replica opens meanwhile with the fields before
  {
    std::lock_guard lock(payload_mu_);
    payload_indexes_ = fields;
  }
  Status first;
  std::shared_lock lock(replicas_mu_);
  for (ShardReplica* r : Replicas()) {
    Status s = r->SetPayloadIndexes(fields);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

PayloadIndexFields VectorCollection::payload_indexes() const {
  std::lock_guard lock(payload_mu_);
  return payload_indexes_;
}

std::map<std::string, uint64_t> VectorCollection::PayloadIndexPoints() const {
  std::map<std::string, uint64_t> out;
  for (const auto& [key, kind] : payload_indexes()) out[key] = 0;
  std::shared_lock lock(replicas_mu_);
  for (ShardReplica* r : Replicas())
    for (const auto& [key, n] : r->PayloadIndexPoints()) out[key] += n;
  return out;
}

Status VectorCollection::RecordSplit(Store* store, const std::string& name, uint32_t store_id, uint32_t shards) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    MOEEDB_ASSIGN_OR_RETURN(CollectionRecord rec, store->GetCollection(name));
    if (rec.id != store_id) return Status::NotFound("collection '" + name + "' was dropped");
    json spec = json::parse(rec.spec_json, nullptr, false);
    if (!spec.is_object()) return Status::Corruption("collection '" + name + "' spec is damaged");
    if (spec.value("shards", 1u) == shards && spec.contains("shards")) return Status::OK();
    spec["shards"] = shards;  // kept, even at 1: the collection stays placed (CollectionLayout::placed)
    if (!spec.contains("replicas")) spec["replicas"] = 1;
    spec["resharded"] = true;
    Status s = store->UpdateSpec(name, rec.spec_json, spec.dump());
    if (s.code() != Status::Code::kConflict) return s;
  }
  return Status::Unavailable("collection '" + name + "': its spec kept changing; try again");
}

std::vector<uint32_t> VectorCollection::HeldShards() const {
  std::shared_lock lock(replicas_mu_);
  std::vector<uint32_t> out;
  for (const auto& [ref, r] : replicas_)
    if (ref.shards == shards_) out.push_back(ref.shard);
  return out;
}

std::vector<ShardRef> VectorCollection::HeldReplicas() const {
  std::shared_lock lock(replicas_mu_);
  std::vector<ShardRef> out;
  for (const auto& [ref, r] : replicas_) out.push_back(ref);
  return out;
}

std::vector<ShardReplica*> VectorCollection::Replicas() const {
  std::vector<ShardReplica*> out;
  for (const auto& [k, r] : replicas_) out.push_back(r.get());
  return out;
}

std::vector<VectorCollection::ReplicaState> VectorCollection::ReplicaStates() const {
  std::vector<ReplicaState> out;
  std::shared_lock lock(replicas_mu_);
  for (ShardReplica* r : Replicas())
    out.push_back(ReplicaState{r->shard(), r->shards(), r->size(), r->applied_seq(), r->index_bytes(), r->payload_index_bytes(),
                               r->log_rewinds(), r->log_read_age_ms(), r->building()});
  // The ones being opened, at the entry they will read the log from (a
  // replica moved into replicas_ is forgotten here after: listed once).
  std::lock_guard opening(opening_mu_);
  for (const auto& [ref, seq] : opening_floors_)
    if (!replicas_.count(ref)) {
      ReplicaState s;
      s.shard = ref.shard, s.shards = ref.shards, s.applied_seq = seq, s.building = true;
      out.push_back(s);
    }
  return out;
}

std::vector<VectorCollection::ReplicaContents> VectorCollection::Contents() const {
  std::shared_lock lock(replicas_mu_);
  std::vector<ReplicaContents> out;
  for (ShardReplica* r : Replicas()) {
    ReplicaContents c{r->shard(), r->shards(), r->applied_seq(), r->IndexedIds(), r->LexicalIds()};
    std::sort(c.dense.begin(), c.dense.end());
    std::sort(c.lexical.begin(), c.lexical.end());
    out.push_back(std::move(c));
  }
  return out;
}

size_t VectorCollection::size() const {
  {
    std::shared_lock lock(replicas_mu_);
    auto it = replicas_.find(ShardRef{1, 0});
    if (shards_ == 1 && it != replicas_.end()) return it->second->size();
  }
  auto rec = store_->GetCollection(name_);
  return rec.ok() ? rec->count : 0;
}

size_t VectorCollection::index_rebuilds() const {
  std::shared_lock lock(replicas_mu_);
  size_t n = 0;
  for (ShardReplica* r : Replicas()) n += r->index_rebuilds();
  return n;
}

void VectorCollection::RefreshStaleReplicas() {
  std::shared_lock lock(replicas_mu_);
  for (ShardReplica* r : Replicas()) (void)r->WithinStaleness(max_staleness_ms_);
}

size_t VectorCollection::log_rewinds() const {
  std::shared_lock lock(replicas_mu_);
  size_t n = 0;
  for (ShardReplica* r : Replicas()) n += r->log_rewinds();
  return n;
}

size_t VectorCollection::log_trims() const {
  std::shared_lock lock(replicas_mu_);
  size_t n = 0;
  for (ShardReplica* r : Replicas()) n += r->log_trims();
  return n;
}

size_t VectorCollection::replayed_ops() const {
  std::shared_lock lock(replicas_mu_);
  size_t n = 0;
  for (ShardReplica* r : Replicas()) n += r->replayed_ops();
  return n;
}

bool VectorCollection::opened_from_snapshot() const {
  std::shared_lock lock(replicas_mu_);
  for (ShardReplica* r : Replicas())
    if (!r->opened_from_snapshot()) return false;
  return !replicas_.empty();
}

bool VectorCollection::lexical_rebuilt() const {
  std::shared_lock lock(replicas_mu_);
  for (ShardReplica* r : Replicas())
    if (r->lexical_rebuilt()) return true;
  return false;
}

std::vector<uint64_t> VectorCollection::SortedIds(std::vector<uint64_t> (ShardReplica::*ids)() const) const {
  std::shared_lock lock(replicas_mu_);
  std::vector<uint64_t> out;
  for (ShardReplica* r : Replicas()) {
    const std::vector<uint64_t> part = (r->*ids)();
    out.insert(out.end(), part.begin(), part.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<uint64_t> VectorCollection::IndexedIds() const { return SortedIds(&ShardReplica::IndexedIds); }

std::vector<uint64_t> VectorCollection::LexicalIds() const { return SortedIds(&ShardReplica::LexicalIds); }

Result<WriteResult> VectorCollection::Upsert(const std::vector<StoredDocument>& docs, bool sync) {
  return Write(docs, nullptr, sync);
}

Result<WriteResult> VectorCollection::UpsertIfUnchanged(const std::vector<StoredDocument>& docs,
                                                        const std::vector<uint64_t>& expected, bool sync) {
  return Write(docs, &expected, sync);
}

Result<std::optional<uint64_t>> VectorCollection::InternalId(const std::string& id) const {
  return store_->InternalId(name_, id);
}

Result<StoredDocument> VectorCollection::GetByInternal(uint64_t internal) const {
  return store_->GetByInternal(name_, internal, true);
}

Result<WriteResult> VectorCollection::Write(const std::vector<StoredDocument>& docs, const std::vector<uint64_t>* expected,
                                            bool sync) {
  const size_t dim_hs = layout_.dim_hs, dim_rw = layout_.dim_rw;
  for (size_t i = 0; i < docs.size(); ++i) {
    const StoredDocument& d = docs[i];
    const std::string where = "document " + std::to_string(i) + (d.id.empty() ? "" : " ('" + d.id + "')") + ": ";
    if (d.id.empty()) return Status::InvalidArgument(where + "empty id");
    if (!IsValidUtf8(d.id) || !IsValidUtf8(d.text)) return Status::InvalidArgument(where + "invalid UTF-8");
    if (d.hs.size() != dim_hs)
      return Status::InvalidArgument(where + "hs has " + std::to_string(d.hs.size()) + " dims, the collection " +
                                     std::to_string(dim_hs));
    if (d.rw.size() != dim_rw)
      return Status::InvalidArgument(where + "rw has " + std::to_string(d.rw.size()) + " dims, the collection " +
                                     std::to_string(dim_rw));
    for (float v : d.hs) if (!std::isfinite(v)) return Status::InvalidArgument(where + "hs holds NaN or Inf");
    for (float v : d.rw) if (!std::isfinite(v)) return Status::InvalidArgument(where + "rw holds NaN or Inf");
    if (!d.metadata_json.empty()) {
      try {
        if (!json::parse(d.metadata_json).is_object()) return Status::InvalidArgument(where + "metadata must be a JSON object");
      } catch (const std::exception&) {
        return Status::InvalidArgument(where + "metadata is not valid JSON");
      }
    }
  }
  std::shared_lock write = SharedWriteLock();
  MOEEDB_ASSIGN_OR_RETURN(WriteResult res, expected != nullptr ? store_->UpsertIfUnchanged(name_, docs, *expected, sync)
                                                               : store_->Upsert(name_, docs, sync));
  MOEEDB_RETURN_IF_ERROR(ApplyOwnWrite(res, &docs));
  return res;
}

Result<WriteResult> VectorCollection::Delete(const std::vector<std::string>& ids, bool sync) {
  std::shared_lock write = SharedWriteLock();
  MOEEDB_ASSIGN_OR_RETURN(WriteResult res, store_->Delete(name_, ids, sync));
  MOEEDB_RETURN_IF_ERROR(ApplyOwnWrite(res, nullptr));
  return res;
}

std::shared_lock<std::shared_mutex> VectorCollection::SharedWriteLock() {
  std::lock_guard gate(write_gate_);
  return std::shared_lock(write_mu_);
}

Status VectorCollection::ApplyOwnWrite(const WriteResult& res, const std::vector<StoredDocument>* docs) {
  if (res.seq == 0) return Status::OK();  // nothing changed
  std::unique_lock own(own_mu_);
  const auto mine = own_applying_.insert(res.seq);
  // Listed until applied, whatever happens (the writes after it wait for it).
  struct Unlist {
    VectorCollection* c;
    std::multiset<uint64_t>::iterator it;
    ~Unlist() {
      {
        std::lock_guard lock(c->own_mu_);
        c->own_applying_.erase(it);
      }
      c->own_cv_.notify_all();
    }
  };
  // The smallest entry being applied goes first; one committed but not yet
  // listed here is read back from the log by the replica instead.
  own_cv_.wait(own, [&] { return *own_applying_.begin() == res.seq; });
  own.unlock();
  Unlist unlist{this, mine};
  std::shared_lock lock(replicas_mu_);
  for (ShardReplica* r : Replicas()) MOEEDB_RETURN_IF_ERROR(r->FollowOwnWrite(res, docs));
  return Status::OK();
}

uint64_t VectorCollection::applied_seq() const {
  std::shared_lock lock(replicas_mu_);
  uint64_t seq = UINT64_MAX;
  for (ShardReplica* r : Replicas()) seq = std::min(seq, r->applied_seq());
  return replicas_.empty() ? 0 : seq;
}

std::optional<uint64_t> VectorCollection::LogFloor() const {
  std::optional<uint64_t> floor;
  std::shared_lock lock(replicas_mu_);
  for (ShardReplica* r : Replicas()) floor = std::min(floor.value_or(UINT64_MAX), r->applied_seq());
  std::lock_guard opening(opening_mu_);
  for (const auto& [ref, seq] : opening_floors_) floor = std::min(floor.value_or(UINT64_MAX), seq);
  return floor;
}

Result<size_t> VectorCollection::CatchUp() {
  std::shared_lock lock(replicas_mu_);
  size_t n = 0;
  for (ShardReplica* r : Replicas()) {
    MOEEDB_ASSIGN_OR_RETURN(size_t applied, r->CatchUp());
    n = std::max(n, applied);
  }
  return n;
}

Result<std::optional<StoredDocument>> VectorCollection::Get(const std::string& id) const {
  return store_->Get(name_, id);
}

Result<DocumentPage> VectorCollection::List(const std::string& after, size_t limit) const {
  return store_->ListDocuments(name_, after, limit);
}

Status VectorCollection::SaveIndex() {
  std::shared_lock lock(replicas_mu_);
  // Every replica that can be saved is (one being rebuilt cannot): the first error after.
  uint64_t covered = UINT64_MAX;
  Status first;
  for (ShardReplica* r : Replicas()) {
    // A snapshot that covers everything applied stays (rewriting it costs
    // its size in disk writes, every time another replica fails to save).
    if (r->snapshot_seq() > 0 && r->snapshot_seq() == r->applied_seq() && r->built_unsaved() == 0) {
      covered = std::min(covered, r->snapshot_seq());
      continue;
    }
    auto seq = r->Save();
    if (!seq.ok()) {
      if (first.ok()) first = seq.status();
      continue;
    }
    covered = std::min(covered, *seq);
  }
  if (!first.ok()) return first;
  // The log is trimmed to what every replica's snapshot covers (a shared
  // store keeps it: other nodes follow it, and its retention window trims it).
  size_t current = 0;  // replicas of the split searches use
  for (const auto& [ref, r] : replicas_) current += ref.shards == shards_;
  if (current < shards_ || covered == UINT64_MAX || store_->shared() || resharding_) return Status::OK();
  return store_->TrimOps(name_, covered);
}

Result<bool> VectorCollection::SaveIndexIfDue(uint64_t every_entries, std::chrono::milliseconds every) {
  std::lock_guard lock(snapshot_mu_);
  const auto now = std::chrono::steady_clock::now();
  if (!snapshot_at_) snapshot_at_ = now;
  // The entries the oldest of the replicas' snapshots on disk leaves to
  // replay; a replica just built from the store of at least every_entries
  // documents (a restart would build it all again) is saved at once.
  uint64_t since = 0;
  bool built = false;
  {
    std::shared_lock replicas(replicas_mu_);
    for (ShardReplica* r : Replicas()) {
      since = std::max(since, r->applied_seq() > r->snapshot_seq() ? r->applied_seq() - r->snapshot_seq() : 0);
      built |= every_entries > 0 && r->built_unsaved() >= every_entries;
    }
  }
  const bool due = (since > 0 || built) && ((every_entries > 0 && (since >= every_entries || built)) ||
                                            (every.count() > 0 && now - *snapshot_at_ >= every));
  if (!due) return false;
  MOEEDB_RETURN_IF_ERROR(SaveIndex());
  snapshot_at_ = now;
  return true;
}

}  // namespace moeedb
