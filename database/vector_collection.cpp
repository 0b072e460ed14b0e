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

VectorCollection::~VectorCollection() = default;

std::string VectorCollection::IndexDir(const Store& store, const std::string& index_root, const CollectionRecord& rec) {
  const fs::path root = index_root.empty() ? fs::path(store.location()) : fs::path(index_root);
  return (root / "indexes" / (std::to_string(rec.id) + "-" + rec.name)).string();
}

Result<std::unique_ptr<VectorCollection>> VectorCollection::Create(Store* store, const std::string& name,
                                                                   const CollectionOptions& o,
                                                                   const std::string& index_root) {
  if (o.dim_hs == 0 || o.dim_rw == 0) return Status::InvalidArgument("collection dims must be positive");
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
  json info;
  try {
    info = json::parse(o.info_json);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("collection info is not JSON: ") + e.what());
  }
  json spec = {{"dim_hs", o.dim_hs},   {"dim_rw", o.dim_rw},   {"index", json::parse(ix.ToJson())},
               {"std_hs", json::parse(sh.ToJson())}, {"std_rw", json::parse(sr.ToJson())},
               {"alpha", o.default_alpha}, {"info", info}, {"lexical", json::parse(o.lexical.ToJson())}};
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord rec, store->CreateCollection(name, spec.dump()));
  (void)rec;
  return Open(store, name, index_root);
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
  // Leftovers would only waste disk (a new collection of the same name gets
  // a new id, hence new folders), so errors are ignored.
  std::error_code ec;
  fs::remove_all(index_dir, ec);
  fs::remove_all(index_dir + ".lexical", ec);
}

Result<std::unique_ptr<VectorCollection>> VectorCollection::Open(Store* store, const std::string& name,
                                                                 const std::string& index_root) {
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord rec, store->GetCollection(name));
  std::unique_ptr<VectorCollection> c(new VectorCollection());
  c->store_ = store;
  c->name_ = name;
  c->store_id_ = rec.id;
  c->index_dir_ = IndexDir(*store, index_root, rec);
  c->spec_json_ = rec.spec_json;
  DualIndexSpec ix;
  Standardizer sh, sr;
  try {
    json spec = json::parse(rec.spec_json);
    c->dim_hs_ = spec.at("dim_hs").get<size_t>();
    c->dim_rw_ = spec.at("dim_rw").get<size_t>();
    c->default_alpha_ = spec.value("alpha", 1.0f);
    c->info_json_ = spec.value("info", json::object()).dump();  // as RecordedInfo reads it
    MOEEDB_ASSIGN_OR_RETURN(ix, DualIndexSpec::FromJson(spec.at("index").dump()));
    MOEEDB_ASSIGN_OR_RETURN(sh, Standardizer::FromJson(spec.at("std_hs").dump()));
    MOEEDB_ASSIGN_OR_RETURN(sr, Standardizer::FromJson(spec.at("std_rw").dump()));
    // Recorded before the lexical index existed: off.
    if (spec.contains("lexical")) { MOEEDB_ASSIGN_OR_RETURN(c->lexical_spec_, LexicalSpec::FromJson(spec["lexical"].dump())); }
  } catch (const std::exception& e) {
    return Status::Corruption("collection '" + name + "' spec is damaged: " + e.what());
  }
  MOEEDB_ASSIGN_OR_RETURN(c->schema_, VectorSchema::FromInfo(c->info_json_));
  // Metadata for filters.
  MOEEDB_RETURN_IF_ERROR(store->ScanMetadata(name, [&](uint64_t id, const std::string& m) { c->metadata_[id] = m; }));
  // The index: snapshot + op-log replay when possible, else a rebuild.
  uint64_t applied = 0;
  auto snap = DualIndex::Load(c->index_dir_, &applied);
  bool usable = snap.ok() && applied <= rec.last_op && (*snap)->spec().ToJson() == ix.ToJson();
  if (usable) {
    c->index_ = std::move(snap).value();
    c->applied_seq_ = applied;
    auto replayed = c->CatchUpLocked();  // the lexical index is not open yet: it catches up on its own
    c->replayed_ops_ = replayed.ok() ? *replayed : 0;
    // A snapshot whose op log was trimmed past it cannot be caught up: rebuild.
    if (!replayed.ok() || c->applied_seq_ != rec.last_op || c->index_->size() != rec.count) usable = false;
    else c->from_snapshot_ = true;
  }
  if (!usable) {
    MOEEDB_ASSIGN_OR_RETURN(c->index_, DualIndex::Create(ix, sh, sr));
    std::vector<uint64_t> ids;
    std::vector<float> hs, rw;
    Status bad;
    MOEEDB_RETURN_IF_ERROR(store->ScanVectors(
        name, [&](uint64_t id, const float* h, size_t dh, const float* r, size_t dr, const std::string&) {
          if (dh != c->dim_hs_ || dr != c->dim_rw_) { bad = Status::Corruption("stored vector of the wrong size"); return; }
          ids.push_back(id);
          hs.insert(hs.end(), h, h + dh);
          rw.insert(rw.end(), r, r + dr);
        }));
    MOEEDB_RETURN_IF_ERROR(bad);
    MOEEDB_RETURN_IF_ERROR(c->index_->Add(ids, hs.data(), rw.data()));
    c->applied_seq_ = rec.last_op;
    c->replayed_ops_ = 0;
  }
  if (c->lexical_spec_.enabled) MOEEDB_RETURN_IF_ERROR(c->OpenLexical(rec));
  return c;
}

Status VectorCollection::OpenLexical(const CollectionRecord& rec) {
  MOEEDB_ASSIGN_OR_RETURN(lexical_, LexicalIndex::Open(index_dir_ + ".lexical", lexical_spec_));
  // Catch up from the op log when it holds every op since the last commit
  // (consecutive sequence numbers from committed + 1); replaying is
  // idempotent, so ops a Xapian auto-flush already wrote are harmless.
  const uint64_t from = lexical_->committed_seq();
  bool usable = from <= rec.last_op;
  if (usable) {
    uint64_t expect = from + 1;
    Status inner;
    Status read = store_->ReadOps(name_, from, [&](const OpRecord& op) {
      if (!inner.ok()) return;
      if (op.seq != expect) { inner = Status::NotFound("op log gap"); return; }
      ++expect;
      inner = lexical_->Remove(op.removed);
      if (!inner.ok() || op.added.empty()) return;
      auto docs = store_->GetManyByInternal(name_, op.added, false);
      if (!docs.ok()) { inner = docs.status(); return; }
      std::vector<uint64_t> ids;
      std::vector<const std::string*> texts;
      for (size_t i = 0; i < op.added.size(); ++i)
        if ((*docs)[i]) ids.push_back(op.added[i]), texts.push_back(&(*docs)[i]->text);
      inner = lexical_->Replace(ids, texts);
    });
    usable = read.ok() && inner.ok() && expect == rec.last_op + 1 && lexical_->size() == rec.count;
  }
  if (!usable) {
    MOEEDB_RETURN_IF_ERROR(lexical_->Clear());
    std::vector<uint64_t> all;
    for (const auto& [id, m] : metadata_) all.push_back(id);
    std::sort(all.begin(), all.end());
    constexpr size_t kChunk = 512;
    for (size_t at = 0; at < all.size(); at += kChunk) {
      std::vector<uint64_t> ids(all.begin() + at, all.begin() + std::min(all.size(), at + kChunk));
      MOEEDB_ASSIGN_OR_RETURN(auto docs, store_->GetManyByInternal(name_, ids, false));
      std::vector<uint64_t> kept;
      std::vector<const std::string*> texts;
      for (size_t i = 0; i < ids.size(); ++i) {
        if (!docs[i]) {
          // Removed by another node's write since the dense index's snapshot:
          // the change-log entry that removed it takes it out of both.
          if (store_->shared()) continue;
          return Status::Corruption("document " + std::to_string(ids[i]) + " of " + name_ + " is not stored");
        }
        kept.push_back(ids[i]);
        texts.push_back(&docs[i]->text);
      }
      MOEEDB_RETURN_IF_ERROR(lexical_->Replace(kept, texts));
    }
    lexical_rebuilt_ = true;
  }
  return lexical_->Commit(rec.last_op);
}

size_t VectorCollection::size() const {
  std::shared_lock lock(mu_);
  return index_->size();
}

size_t VectorCollection::index_rebuilds() const {
  std::shared_lock lock(mu_);
  return index_->rebuilds();
}

std::vector<uint64_t> VectorCollection::IndexedIds() const {
  std::shared_lock lock(mu_);
  return index_->Ids();
}

std::vector<uint64_t> VectorCollection::LexicalIds() const {
  std::shared_lock lock(mu_);
  if (!lexical_) return {};
  std::lock_guard lex(lexical_mu_);
  return lexical_->Ids();
}

Result<WriteResult> VectorCollection::Upsert(const std::vector<StoredDocument>& docs, bool sync) {
  for (size_t i = 0; i < docs.size(); ++i) {
    const StoredDocument& d = docs[i];
    const std::string where = "document " + std::to_string(i) + (d.id.empty() ? "" : " ('" + d.id + "')") + ": ";
    if (d.id.empty()) return Status::InvalidArgument(where + "empty id");
    if (!IsValidUtf8(d.id) || !IsValidUtf8(d.text)) return Status::InvalidArgument(where + "invalid UTF-8");
    if (d.hs.size() != dim_hs_)
      return Status::InvalidArgument(where + "hs has " + std::to_string(d.hs.size()) + " dims, the collection " +
                                     std::to_string(dim_hs_));
    if (d.rw.size() != dim_rw_)
      return Status::InvalidArgument(where + "rw has " + std::to_string(d.rw.size()) + " dims, the collection " +
                                     std::to_string(dim_rw_));
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
  std::unique_lock lock(mu_);
  MOEEDB_ASSIGN_OR_RETURN(WriteResult res, store_->Upsert(name_, docs, sync));
  MOEEDB_RETURN_IF_ERROR(FollowOwnWrite(res, &docs));
  return res;
}

Result<WriteResult> VectorCollection::Delete(const std::vector<std::string>& ids, bool sync) {
  std::unique_lock lock(mu_);
  MOEEDB_ASSIGN_OR_RETURN(WriteResult res, store_->Delete(name_, ids, sync));
  MOEEDB_RETURN_IF_ERROR(FollowOwnWrite(res, nullptr));
  return res;
}

Status VectorCollection::FollowOwnWrite(const WriteResult& res, const std::vector<StoredDocument>* docs) {
  if (res.seq == 0 || res.seq <= applied_seq_) return Status::OK();
  if (res.seq == applied_seq_ + 1) return ApplyToIndex(res, docs);
  // Entries other nodes committed before this one: from the log, this one with them.
  Status s;
  for (int attempt = 0; attempt < 10; ++attempt) {
    s = CatchUpLocked().status();
    if (s.code() != Status::Code::kUnavailable && s.code() != Status::Code::kIOError) return s;
    // A hot standby's read cancelled by recovery, a server gone a moment:
    // read-your-writes is worth a short wait.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // The write is committed: a store that stays unreadable leaves these
  // indexes behind (the follower catches them up); it does not make an
  // acknowledged write an error.
  return Status::OK();
}

uint64_t VectorCollection::applied_seq() const {
  std::shared_lock lock(mu_);
  return applied_seq_;
}

Result<size_t> VectorCollection::CatchUp() {
  std::unique_lock lock(mu_);
  return CatchUpLocked();
}

Result<size_t> VectorCollection::CatchUpLocked() {
  size_t applied = 0;
  Status inner;
  MOEEDB_RETURN_IF_ERROR(store_->ReadOps(name_, applied_seq_, [&](const OpRecord& op) {
    if (!inner.ok()) return;
    if (op.seq != applied_seq_ + 1) {
      inner = Status::Corruption("collection " + name_ + ": change log entry " + std::to_string(applied_seq_ + 1) +
                                 " is missing (trimmed?); reopen the collection to rebuild its indexes");
      return;
    }
    inner = ApplyLoggedOp(op);
    if (inner.ok()) ++applied;
  }));
  MOEEDB_RETURN_IF_ERROR(inner);
  return applied;
}

Status VectorCollection::ApplyLoggedOp(const OpRecord& op) {
  std::vector<std::optional<StoredDocument>> docs;
  if (!op.added.empty()) { MOEEDB_ASSIGN_OR_RETURN(docs, store_->GetManyByInternal(name_, op.added, true)); }
  std::vector<uint64_t> ids;
  std::vector<const StoredDocument*> present;
  for (size_t i = 0; i < docs.size(); ++i) {
    if (!docs[i]) continue;  // replaced or deleted by a later entry
    if (docs[i]->hs.size() != dim_hs_ || docs[i]->rw.size() != dim_rw_)
      return Status::Corruption("collection " + name_ + ": stored vector of the wrong size");
    ids.push_back(op.added[i]);
    present.push_back(&*docs[i]);
  }
  // Whatever of the entry the indexes may hold already goes first.
  std::vector<uint64_t> gone = op.removed;
  gone.insert(gone.end(), op.added.begin(), op.added.end());
  return ApplyChange(op.seq, gone, ids, present);
}

Status VectorCollection::ApplyToIndex(const WriteResult& res, const std::vector<StoredDocument>* docs) {
  if (res.seq == 0) return Status::OK();
  std::vector<const StoredDocument*> added;
  if (docs != nullptr)
    for (const auto& d : *docs) added.push_back(&d);
  return ApplyChange(res.seq, res.removed, docs != nullptr ? res.added : std::vector<uint64_t>{}, added);
}

Status VectorCollection::ApplyChange(uint64_t seq, const std::vector<uint64_t>& gone, const std::vector<uint64_t>& ids,
                                     const std::vector<const StoredDocument*>& docs) {
  // Writers hold mu_ exclusively: no search is using either index.
  index_->Remove(gone);
  for (uint64_t id : gone) metadata_.erase(id);
  if (lexical_) MOEEDB_RETURN_IF_ERROR(lexical_->Remove(gone));
  if (!ids.empty()) {
    std::vector<float> hs, rw;
    std::vector<const std::string*> texts;
    for (size_t i = 0; i < docs.size(); ++i) {
      hs.insert(hs.end(), docs[i]->hs.begin(), docs[i]->hs.end());
      rw.insert(rw.end(), docs[i]->rw.begin(), docs[i]->rw.end());
      texts.push_back(&docs[i]->text);
      metadata_[ids[i]] = docs[i]->metadata_json.empty() ? "{}" : docs[i]->metadata_json;
    }
    MOEEDB_RETURN_IF_ERROR(index_->Add(ids, hs.data(), rw.data()));
    if (lexical_) MOEEDB_RETURN_IF_ERROR(lexical_->Replace(ids, texts));
  }
  applied_seq_ = seq;
  return Status::OK();
}

Result<std::optional<StoredDocument>> VectorCollection::Get(const std::string& id) const {
  return store_->Get(name_, id);
}

Result<DocumentPage> VectorCollection::List(const std::string& after, size_t limit) const {
  return store_->ListDocuments(name_, after, limit);
}

Status VectorCollection::SaveIndex() {
  std::unique_lock lock(mu_);
  // Both indexes cover applied_seq_ before the op log is trimmed to it.
  if (lexical_) MOEEDB_RETURN_IF_ERROR(lexical_->Commit(applied_seq_));
  MOEEDB_RETURN_IF_ERROR(index_->Save(index_dir_, applied_seq_));
  return store_->TrimOps(name_, applied_seq_);
}

}  // namespace moeedb
