#include "database/shard_replica.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "base/atomic_file.h"
#include "base/file_text.h"
#include "base/log.h"

namespace moeedb {

using json = nlohmann::json;

namespace {

// Beside a dense snapshot: "<seq> <entry id>", the identity of the change-log
// entry the snapshot covers (OpRecord::entry_id).
constexpr const char* kEntryFile = "/applied_entry";

// Beside a dense snapshot: the metadata of every document it holds, as of
// the entry it covers, so a replica opens without reading them from the
// store. "moeedb-metadata 1\n", then little-endian u64 seq, u64 count, and
// per document u64 internal id, u32 length, the JSON text.
constexpr const char* kMetadataFile = "/metadata";
// Which placement chose a shard's documents in its folders ("range" or
// "modulo"; none: modulo, folders written before layouts existed).
constexpr const char* kPlacementFile = "/placement";
constexpr char kMetadataMagic[] = "moeedb-metadata 1\n";

std::string MetadataBytes(uint64_t seq, const std::unordered_map<uint64_t, std::string>& metadata) {
  size_t size = sizeof(kMetadataMagic) - 1 + 16;
  for (const auto& [id, m] : metadata) size += 12 + m.size();
  std::string out;
  out.reserve(size);
  out.append(kMetadataMagic, sizeof(kMetadataMagic) - 1);
  const auto put = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  put(seq, 8);
  put(metadata.size(), 8);
  for (const auto& [id, m] : metadata) {
    put(id, 8);
    put(m.size(), 4);
    out += m;
  }
  return out;
}

// The metadata the snapshot in `dir` saved for entry `seq`; std::nullopt when
// there is none for that entry (a snapshot older than the file) or it is damaged.
std::optional<std::unordered_map<uint64_t, std::string>> ReadMetadata(const std::string& dir, uint64_t seq) {
  auto bytes = ReadFileText(dir + kMetadataFile);
  if (!bytes.ok()) return std::nullopt;
  const std::string& b = *bytes;
  size_t at = sizeof(kMetadataMagic) - 1;
  if (b.size() < at + 16 || b.compare(0, at, kMetadataMagic) != 0) return std::nullopt;
  const auto get = [&](int n, uint64_t* v) {
    if (at + n > b.size()) return false;
    *v = 0;
    for (int i = 0; i < n; ++i) *v |= static_cast<uint64_t>(static_cast<unsigned char>(b[at + i])) << (8 * i);
    at += n;
    return true;
  };
  uint64_t saved_seq = 0, count = 0;
  if (!get(8, &saved_seq) || !get(8, &count) || saved_seq != seq || count > (b.size() - at) / 12) return std::nullopt;
  std::unordered_map<uint64_t, std::string> out;
  out.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t id = 0, len = 0;
    if (!get(8, &id) || !get(4, &len) || at + len > b.size()) return std::nullopt;
    out.emplace(id, b.substr(at, len));
    at += len;
  }
  if (at != b.size()) return std::nullopt;
  return out;
}

// The entry id the snapshot in `dir` recorded for entry `seq` ("" unknown).
std::string SnapshotEntry(const std::string& dir, uint64_t seq) {
  auto text = ReadFileText(dir + kEntryFile);
  if (!text.ok()) return "";
  std::istringstream in(*text);
  uint64_t at = 0;
  std::string id;
  if (!(in >> at >> id) || at != seq) return "";
  return id;
}

}  // namespace

Result<CollectionLayout> CollectionLayout::FromRecord(const CollectionRecord& rec) {
  CollectionLayout l;
  l.name = rec.name;
  l.store_id = rec.id;
  try {
    const json spec = json::parse(rec.spec_json);
    l.dim_hs = spec.at("dim_hs").get<size_t>();
    l.dim_rw = spec.at("dim_rw").get<size_t>();
    l.default_alpha = spec.value("alpha", 1.0f);
    l.info_json = spec.value("info", json::object()).dump();
    l.shards = spec.value("shards", 1u);
    l.replicas = spec.value("replicas", 1u);
    const std::string shard_layout = spec.value("shard_layout", std::string("modulo"));
    if (shard_layout != "modulo" && shard_layout != "range") throw std::runtime_error("shard_layout " + shard_layout);
    l.shard_layout = shard_layout == "range" ? ShardLayout::kRange : ShardLayout::kModulo;
    l.placed = spec.contains("shards") || spec.contains("replicas");
    l.resharded = spec.value("resharded", false);
    MOEEDB_ASSIGN_OR_RETURN(l.index, DualIndexSpec::FromJson(spec.at("index").dump()));
    MOEEDB_ASSIGN_OR_RETURN(l.std_hs, Standardizer::FromJson(spec.at("std_hs").dump()));
    MOEEDB_ASSIGN_OR_RETURN(l.std_rw, Standardizer::FromJson(spec.at("std_rw").dump()));
    // Recorded before the lexical index existed: off.
    if (spec.contains("lexical")) { MOEEDB_ASSIGN_OR_RETURN(l.lexical, LexicalSpec::FromJson(spec["lexical"].dump())); }
    if (spec.contains("payload_indexes")) {
      MOEEDB_ASSIGN_OR_RETURN(l.payload_indexes, PayloadIndexFieldsFromJson(spec["payload_indexes"]));
    }
  } catch (const std::exception& e) {
    return Status::Corruption("collection '" + rec.name + "' spec is damaged: " + e.what());
  }
  if (l.shards == 0) return Status::Corruption("collection '" + rec.name + "' spec records 0 shards");
  return l;
}

std::string ShardReplica::Dir(const std::string& collection_dir, uint32_t shard, uint32_t shards) {
  // One shard keeps the folder collections had before shards existed; a
  // shard's folder names its split, so two splits' replicas of a collection
  // being resharded live side by side.
  return shards <= 1 ? collection_dir
                     : collection_dir + ".shard-" + std::to_string(shard) + "-of-" + std::to_string(shards);
}

void ShardReplica::RemoveFolders(const std::string& dir) {
  // Leftovers would only waste disk (a collection created again gets a new
  // id, hence new folders), so errors are ignored.
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::remove_all(dir + ".lexical", ec);
  std::filesystem::remove_all(dir + ".lexical.new", ec);  // a rebuild's, cut short
  std::filesystem::remove_all(dir + ".lexical.old", ec);
}

ShardReplica::~ShardReplica() = default;

Result<std::unique_ptr<ShardReplica>> ShardReplica::Open(Store* store, const CollectionLayout& layout, uint32_t shard,
                                                         const std::string& dir, const LogFloorListener& on_floor) {
  if (shard >= layout.shards)
    return Status::InvalidArgument("collection '" + layout.name + "' has " + std::to_string(layout.shards) +
                                   " shards; there is no shard " + std::to_string(shard));
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord rec, store->GetCollection(layout.name));
  if (rec.id != layout.store_id) return Status::NotFound("collection '" + layout.name + "' was dropped");
  std::unique_ptr<ShardReplica> r(new ShardReplica());
  r->store_ = store;
  r->layout_ = layout;
  r->shard_ = shard;
  r->filter_ = ShardFilter{shard, layout.shards, layout.shard_layout};
  r->dir_ = dir;
  if (layout.shards > 1) {
    // Folders another placement filled (an older node's in a rolling
    // upgrade, which places by modulo whatever the spec says) hold another
    // shard's documents under this name: they go, and the shard is built.
    auto recorded = ReadFileText(dir + kPlacementFile);
    const std::string was = recorded.ok() ? recorded->substr(0, recorded->find('\n')) : "modulo";
    if (was != r->PlacementName()) RemoveFolders(dir);
    MOEEDB_RETURN_IF_ERROR(r->RecordPlacement());
  }
  // Each stage's seconds, logged when opening took long (what a restart waits for).
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::pair<const char*, double>> stages;
  auto stage_at = t0;
  const auto stage = [&](const char* what) {
    const auto now = std::chrono::steady_clock::now();
    stages.emplace_back(what, std::chrono::duration<double>(now - stage_at).count());
    stage_at = now;
  };
  // The index: snapshot + op-log replay when possible, else a rebuild.
  uint64_t applied = 0;
  // The snapshot's entry is the floor from before it loads (minutes at 100 M
  // documents: the log must not be trimmed past it meanwhile).
  std::optional<uint64_t> told;
  if (on_floor)
    if ((told = DualIndex::SnapshotSeq(dir)) && *told <= rec.last_op) on_floor(*told);
  auto snap = DualIndex::Load(dir, &applied);
  stage("snapshot load");
  bool usable = snap.ok() && applied <= rec.last_op && (*snap)->spec().ToJson() == layout.index.ToJson();
  if (snap.ok() && applied > rec.last_op && store->shared()) r->NoteRewind(applied);  // the log is shorter than the snapshot
  if (usable) {
    // Saved beside the snapshot (as of its entry), or read from the store.
    if (auto saved = ReadMetadata(dir, applied)) {
      r->metadata_ = std::move(*saved);
      stage("metadata load");
    } else {
      MOEEDB_RETURN_IF_ERROR(store->ScanMetadata(
          layout.name, [&](uint64_t id, const std::string& m) { r->metadata_[id] = m; }, r->filter_));
      stage("metadata read from the store");
    }
    MOEEDB_ASSIGN_OR_RETURN(r->payload_, BuildPayload(layout.payload_indexes, r->metadata_));
    r->index_ = std::move(snap).value();
    if (on_floor && told != applied) on_floor(applied);
    r->applied_seq_ = applied;
    r->snapshot_seq_ = applied;
    r->applied_entry_ = SnapshotEntry(dir, applied);
    auto replayed = r->CatchUpLocked();  // the lexical index is not open yet: it catches up on its own
    stage("log replay");
    r->replayed_ops_ = replayed.ok() ? *replayed : 0;
    // A snapshot whose op log was trimmed past it cannot be caught up: rebuild.
    if (!replayed.ok() || r->index_->size() != r->metadata_.size()) usable = false;
    else r->from_snapshot_ = r->log_rewinds_ == 0;
  }
  if (!usable) {
    // The lexical index may still be usable (it catches up on its own below,
    // from its own commit); one a rebuild during the replay put in place is
    // closed, or it would lack what the dense build adds since.
    r->lexical_.reset();
    MOEEDB_ASSIGN_OR_RETURN(Built b, r->BuildFromStore(/*with_lexical=*/false, on_floor));
    MOEEDB_RETURN_IF_ERROR(r->Install(std::move(b)));
    stage("build from the store");
  }
  // (A rebuild during the replay above installed a lexical index already.)
  if (layout.lexical.enabled && !r->lexical_) MOEEDB_RETURN_IF_ERROR(r->OpenLexical());
  stage("lexical index");
  r->needs_rebuild_ = false;
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (total >= 1.0) {
    std::string line = "moeedb: collection " + layout.name + " shard " + std::to_string(shard) + " of " +
                       std::to_string(layout.shards) + " opened in " + std::to_string(total) + " s (" +
                       std::to_string(r->index_->size()) + " documents):";
    for (const auto& [what, seconds] : stages) {
      char part[96];
      std::snprintf(part, sizeof(part), " %s %.3f s;", what, seconds);
      line += part;
    }
    LogLine(line);
  }
  return r;
}

const char* ShardReplica::PlacementName() const {
  return layout_.shard_layout == ShardLayout::kRange ? "range" : "modulo";
}

Status ShardReplica::RecordPlacement() const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return Status::IOError("cannot create " + dir_ + ": " + ec.message());
  return WriteFileAtomic(dir_ + kPlacementFile, std::string(PlacementName()) + "\n");
}

Result<ShardReplica::Built> ShardReplica::BuildFromStore(bool with_lexical, const LogFloorListener& on_floor) const {
  Built b;
  b.head_read_at = std::chrono::steady_clock::now();  // what the build holds is as fresh as this
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord rec, store_->GetCollection(layout_.name));
  if (rec.id != layout_.store_id) return Status::NotFound("collection '" + layout_.name + "' was dropped");
  b.seq = rec.last_op;
  MOEEDB_ASSIGN_OR_RETURN(b.entry, EntryAt(rec.last_op));
  if (on_floor) on_floor(b.seq);
  MOEEDB_ASSIGN_OR_RETURN(b.index, DualIndex::Create(layout_.index, layout_.std_hs, layout_.std_rw, dir_));
  // Added a chunk at a time: the build holds the index and one chunk, not
  // a second copy of every vector (several builds may run side by side).
  // Halves that train on their rows (IVF, codes) get them all at once, so
  // they train on the whole shard as before.
  const auto trains = [](const SignalIndexSpec& h) { return h.kind == IndexKind::kIvf || h.codes != CodeKind::kNone; };
  const bool chunked = !trains(layout_.index.hs) && !trains(layout_.index.rw);
  std::vector<uint64_t> ids;
  std::vector<float> hs, rw;
  Status bad;
  const auto add = [&] {
    if (ids.empty() || !bad.ok()) return;
    bad = b.index->Add(ids, hs.data(), rw.data());
    ids.clear(), hs.clear(), rw.clear();
  };
  MOEEDB_RETURN_IF_ERROR(store_->ScanVectors(
      layout_.name,
      [&](uint64_t id, const float* h, size_t dh, const float* w, size_t dr, const std::string& m) {
        if (!bad.ok()) return;
        if (dh != layout_.dim_hs || dr != layout_.dim_rw) {
          bad = Status::Corruption("stored vector of the wrong size");
          return;
        }
        b.metadata[id] = m;
        ids.push_back(id);
        hs.insert(hs.end(), h, h + dh);
        rw.insert(rw.end(), w, w + dr);
        if (chunked && ids.size() == kBuildChunkDocuments) add();
      },
      filter_));
  add();
  MOEEDB_RETURN_IF_ERROR(bad);
  MOEEDB_ASSIGN_OR_RETURN(b.payload, BuildPayload(layout_.payload_indexes, b.metadata));
  if (with_lexical) {
    const std::string aside = dir_ + ".lexical.new";
    std::error_code ec;
    std::filesystem::remove_all(aside, ec);  // a build cut short before
    MOEEDB_ASSIGN_OR_RETURN(b.lexical, LexicalIndex::Open(aside, layout_.lexical));
    MOEEDB_RETURN_IF_ERROR(FillLexical(b.lexical.get(), b.metadata));
    MOEEDB_RETURN_IF_ERROR(b.lexical->Commit(b.seq, b.entry));
  }
  // The scan read each document once, as of its page's moment, at or past
  // b.seq; the next catch-up applies the entries after b.seq again (a
  // document read after its entry's change is changed to what it already is).
  return b;
}

Status ShardReplica::Install(Built b) {
  const std::string dir = dir_ + ".lexical";
  std::error_code ec;
  std::unique_lock lock(mu_);
  built_unsaved_ = b.metadata.size();
  if (b.lexical) {
    // Xapian's folders are moved closed: the old index aside (removed after
    // the lock; a crash before leaves no .lexical, which reopens empty and is
    // rebuilt), the new one in its place.
    b.lexical.reset();
    lexical_.reset();
    std::filesystem::remove_all(dir + ".old", ec);
    std::filesystem::rename(dir, dir + ".old", ec);
    ec.clear();
    std::filesystem::rename(dir + ".new", dir, ec);
    if (ec) return Status::IOError("cannot move the rebuilt lexical index into " + dir + ": " + ec.message());
    MOEEDB_ASSIGN_OR_RETURN(lexical_, LexicalIndex::Open(dir, layout_.lexical));
    lexical_rebuilt_ = true;
  }
  index_ = std::move(b.index);
  metadata_ = std::move(b.metadata);
  payload_ = std::move(b.payload);
  applied_seq_ = b.seq;
  applied_entry_ = std::move(b.entry);
  replayed_ops_ = 0;
  log_read_at_ = b.head_read_at;
  lock.unlock();
  std::filesystem::remove_all(dir + ".old", ec);
  return Status::OK();
}

Status ShardReplica::Rebuild() {
  {
    // Under the searches' lock: a search either ended before or sees it.
    std::unique_lock lock(mu_);
    needs_rebuild_ = true;  // cleared only once the rebuilt indexes are in place
  }
  MOEEDB_ASSIGN_OR_RETURN(Built b, BuildFromStore(/*with_lexical=*/layout_.lexical.enabled));
  MOEEDB_RETURN_IF_ERROR(Install(std::move(b)));
  needs_rebuild_ = false;
  return Status::OK();
}

Status ShardReplica::FillLexical(LexicalIndex* lexical,
                                 const std::unordered_map<uint64_t, std::string>& metadata) const {
  std::vector<uint64_t> all;  // in id order: the store reads them in pages
  all.reserve(metadata.size());
  for (const auto& [id, m] : metadata) all.push_back(id);
  std::sort(all.begin(), all.end());
  constexpr size_t kChunk = 512;
  for (size_t at = 0; at < all.size(); at += kChunk) {
    std::vector<uint64_t> ids(all.begin() + at, all.begin() + std::min(all.size(), at + kChunk));
    MOEEDB_ASSIGN_OR_RETURN(auto docs, store_->GetManyByInternal(layout_.name, ids, false));
    std::vector<uint64_t> kept;
    std::vector<const std::string*> texts;
    for (size_t i = 0; i < ids.size(); ++i) {
      // Removed by a write since the scan (another node's, or this one's
      // while a reshard builds this replica beside the split in use): the
      // change-log entry that removed it takes it out of both indexes.
      if (!docs[i]) continue;
      kept.push_back(ids[i]);
      texts.push_back(&docs[i]->text);
    }
    MOEEDB_RETURN_IF_ERROR(lexical->Replace(kept, texts));
  }
  return Status::OK();
}

void ShardReplica::NoteRewind(uint64_t seq) {
  ++log_rewinds_;  // atomic: read by the claims thread and /metrics
  LogLine("moeedb: collection " + layout_.name + " shard " + std::to_string(shard_) + ": change log entry " +
          std::to_string(seq) + " is not the one this replica applied (the log went back): rebuilding it from the store");
}

Result<std::string> ShardReplica::EntryAt(uint64_t seq) const {
  std::string id;
  if (seq == 0) return id;
  MOEEDB_RETURN_IF_ERROR(store_->ReadOps(layout_.name, seq - 1, 1, [&](const OpRecord& op) {
    if (op.seq == seq) id = op.entry_id;
  }));
  return id;
}

Status ShardReplica::OpenLexical() {
  MOEEDB_ASSIGN_OR_RETURN(CollectionRecord rec, store_->GetCollection(layout_.name));
  MOEEDB_ASSIGN_OR_RETURN(lexical_, LexicalIndex::Open(dir_ + ".lexical", layout_.lexical));
  const std::string& name = layout_.name;
  // Catch up from the op log when it holds every op since the last commit
  // (consecutive sequence numbers from committed + 1) and its entry at the
  // commit is still the one committed (the log did not go back); replaying
  // is idempotent, so ops a Xapian auto-flush already wrote are harmless.
  const uint64_t from = lexical_->committed_seq();
  bool usable = from <= rec.last_op && log_rewinds_ == 0;
  if (usable && store_->shared() && from > 0) {
    MOEEDB_ASSIGN_OR_RETURN(std::string entry, EntryAt(from));
    usable = !entry.empty() && entry == lexical_->committed_entry();
  }
  if (usable) {
    uint64_t expect = from + 1;
    Status inner, read;
    // In pages: a long backlog is not held in memory at once.
    for (size_t n = kLogPageEntries; read.ok() && inner.ok() && n == kLogPageEntries;) {
      n = 0;
      read = store_->ReadOps(name, expect - 1, kLogPageEntries, [&](const OpRecord& op) {
        ++n;
        if (!inner.ok()) return;
        if (op.seq != expect) {
          inner = Status::NotFound("op log gap");
          return;
        }
        ++expect;
        inner = lexical_->Remove(op.removed);
        if (!inner.ok() || op.added.empty()) return;
        auto docs = store_->GetManyByInternal(name, op.added, false, filter_);
        if (!docs.ok()) {
          inner = docs.status();
          return;
        }
        std::vector<uint64_t> ids;
        std::vector<const std::string*> texts;
        for (size_t i = 0; i < op.added.size(); ++i)
          if ((*docs)[i]) ids.push_back(op.added[i]), texts.push_back(&(*docs)[i]->text);
        inner = lexical_->Replace(ids, texts);
      });
    }
    usable = read.ok() && inner.ok() && expect == rec.last_op + 1 && lexical_->size() == index_->size();
  }
  if (!usable) {  // at open, before any search: rebuilt in place
    MOEEDB_RETURN_IF_ERROR(lexical_->Clear());
    MOEEDB_RETURN_IF_ERROR(FillLexical(lexical_.get(), metadata_));
    lexical_rebuilt_ = true;
  }
  return lexical_->Commit(applied_seq_, applied_entry_);
}

size_t ShardReplica::size() const {
  std::shared_lock lock(mu_);
  return index_->size();
}

size_t ShardReplica::log_rewinds() const { return log_rewinds_; }

uint64_t ShardReplica::applied_seq() const {
  std::shared_lock lock(mu_);
  return applied_seq_;
}

size_t ShardReplica::index_rebuilds() const {
  std::shared_lock lock(mu_);
  return index_->rebuilds();
}

size_t ShardReplica::index_bytes() const {
  std::shared_lock lock(mu_);
  return index_->memory_bytes();
}

std::vector<uint64_t> ShardReplica::IndexedIds() const {
  std::shared_lock lock(mu_);
  return index_->Ids();
}

std::vector<uint64_t> ShardReplica::LexicalIds() const {
  std::shared_lock lock(mu_);
  if (!lexical_) return {};
  std::lock_guard lex(lexical_mu_);
  return lexical_->Ids();
}

Status ShardReplica::FollowOwnWrite(const WriteResult& res, const std::vector<StoredDocument>* docs) {
  std::lock_guard follow(follow_mu_);
  if (res.seq == 0) return Status::OK();
  // Applied already (the follower read it first) or, in a shared store, a
  // number at or below this replica's that the log may have reused after
  // going back: the catch-up below checks which.
  if (res.seq <= applied_seq_ && !store_->shared()) return Status::OK();
  // The next entry, written on top of the one this replica applied last (in
  // a shared store the write names that one: if the log went back and other
  // nodes reused the numbers, it names another, and the catch-up below
  // notices and rebuilds).
  if (res.seq == applied_seq_ + 1 && !needs_rebuild_ &&
      (!store_->shared() || res.previous_entry_id == applied_entry_)) {
    std::vector<uint64_t> ids;
    std::vector<const StoredDocument*> added;
    if (docs != nullptr)
      for (size_t i = 0; i < docs->size(); ++i)
        if (filter_.Holds((*docs)[i].id)) ids.push_back(res.added[i]), added.push_back(&(*docs)[i]);
    // A rebuild's scan may have seen this write already (it reads the
    // documents after the log's head): what the indexes hold of it goes first.
    std::vector<uint64_t> gone = res.removed;
    gone.insert(gone.end(), res.added.begin(), res.added.end());
    Status s;
    {
      std::unique_lock lock(mu_);
      applied_entry_next_ = res.entry_id;
      s = ApplyChange(res.seq, gone, ids, added);
      // Half applied: searches are refused from here; the next catch-up rebuilds.
      if (!s.ok()) needs_rebuild_ = true;
    }
    if (s.ok()) return s;
    LogLine("moeedb: collection " + layout_.name + " shard " + std::to_string(shard_) + ": this node's own write " +
            std::to_string(res.seq) + " is committed but not in its indexes: " + s.message() + "; rebuilding");
    return Status::OK();
  }
  // Entries other nodes committed before this one: from the log, this one with them.
  Status s;
  for (int attempt = 0; attempt < 10; ++attempt) {
    s = CatchUpLocked().status();
    if (s.ok()) return s;
    if (s.code() != Status::Code::kUnavailable && s.code() != Status::Code::kIOError) break;
    // A hot standby's read cancelled by recovery, a server gone a moment:
    // read-your-writes is worth a short wait.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // The write is committed: a store that stays unreadable (or a rebuild that
  // failed) leaves these indexes behind, for the follower to catch up; it
  // does not make an acknowledged write an error.
  LogLine("moeedb: collection " + layout_.name + " shard " + std::to_string(shard_) +
          ": this node's own write " + std::to_string(res.seq) + " is committed but not yet in its indexes: " + s.message());
  return Status::OK();
}

Result<size_t> ShardReplica::CatchUp() {
  std::lock_guard follow(follow_mu_);
  auto n = CatchUpLocked();
  if (!n.ok() && n.status().code() == Status::Code::kUnavailable && store_->shared()) {
    // No primary answers (a failover): the synchronous standby's log, which
    // will be the new primary's, is followed as far as it holds this
    // replica's last entry.
    auto from_standby = CatchUpFromStandbyLocked();
    if (from_standby.ok()) return from_standby;
  }
  if (!n.ok() && store_->shared()) {
    // The log is read from the primary only. While a failover has no
    // primary, no write is acknowledged either: the synchronous standby
    // (which holds every acknowledged write; the store reads from it then)
    // at exactly the number this replica applied says it misses nothing, so
    // it stays fresh. (An entry this replica read from the old primary that
    // the standby lacks makes the standby's head lower, not equal.)
    // The entry's identity too: the old primary may have shown this replica
    // an entry under that number that was never acknowledged.
    const auto asked_at = std::chrono::steady_clock::now();
    auto head = store_->GetLogHead(layout_.name);
    if (head.ok() && head->record.id == layout_.store_id && head->record.last_op == applied_seq_ &&
        head->entry_id == applied_entry_ && !needs_rebuild_) {
      std::unique_lock lock(mu_);
      log_read_at_ = asked_at;
    }
  }
  return n;
}

Result<size_t> ShardReplica::CatchUpLocked() {
  if (needs_rebuild_) {  // an earlier rebuild did not finish, or a change failed halfway
    MOEEDB_RETURN_IF_ERROR(Rebuild());
    return size_t{0};
  }
  bool rewound = false, trimmed = false;
  MOEEDB_ASSIGN_OR_RETURN(const size_t applied, FollowLog(/*from_standby=*/false, &rewound, &trimmed));
  if (trimmed) {
    // The log's retention window passed this replica's cursor (a node down
    // longer than it): the entries it needs are gone, so it rebuilds.
    LogLine("moeedb: collection " + layout_.name + " shard " + std::to_string(shard_) + ": the change log no longer " +
            "holds entry " + std::to_string(applied_seq_) + " (trimmed past this replica's cursor): rebuilding it "
            "from the store");
    ++log_trims_;
    MOEEDB_RETURN_IF_ERROR(Rebuild());
    return applied;
  }
  if (rewound) {
    // The log went back under this replica (a crash that lost commits, a
    // point-in-time restore): the entry it applied last is gone or another
    // one. What it holds may name other documents: rebuild from the store,
    // unless the collection was dropped (and made again under its name).
    MOEEDB_ASSIGN_OR_RETURN(CollectionRecord rec, store_->GetCollection(layout_.name));
    if (rec.id != layout_.store_id) return Status::NotFound("collection '" + layout_.name + "' was dropped");
    NoteRewind(applied_seq_);
    MOEEDB_RETURN_IF_ERROR(Rebuild());
  }
  return applied;
}

Result<size_t> ShardReplica::CatchUpFromStandbyLocked() {
  if (needs_rebuild_) return Status::Unavailable("collection " + layout_.name + ": a rebuild is due");
  // Only a log that holds this replica's last entry, under its identity, is
  // followed: the standby may not have received yet what the old primary
  // showed this replica, and whether the log went back is the primary's to say.
  bool rewound = false, trimmed = false;
  const uint64_t before = applied_seq_;
  MOEEDB_ASSIGN_OR_RETURN(const size_t applied, FollowLog(/*from_standby=*/true, &rewound, &trimmed));
  if (rewound && applied_seq_ == before)
    return Status::Unavailable("collection " + layout_.name + ": the synchronous standby's log does not hold entry " +
                               std::to_string(applied_seq_) + " as this replica applied it");
  return applied;
}

Result<size_t> ShardReplica::FollowLog(bool from_standby, bool* rewound, bool* trimmed) {
  size_t applied = 0;
  // Once a page comes back full, the log's head is read once: the pages stop
  // there, so writes arriving faster than this replica applies pages cannot
  // keep it here (holding follow_mu_) for ever. Everything acknowledged
  // before that read is at or below it.
  uint64_t head = UINT64_MAX;
  std::chrono::steady_clock::time_point head_read_at;
  for (;;) {
    // A store that keeps its whole log (PostgreSQL; the standby's is a copy)
    // still holds the entry these indexes applied last: read from it, and
    // check that it is the same entry. (Only this thread changes
    // applied_seq_: follow_mu_.)
    const bool check = (from_standby || store_->shared()) && applied_seq_ > 0;
    const uint64_t after = check ? applied_seq_ - 1 : applied_seq_;
    const auto read_at = std::chrono::steady_clock::now();  // a page that ends the log is as fresh as this
    std::vector<OpRecord> ops;
    const auto keep = [&](const OpRecord& op) { ops.push_back(op); };
    MOEEDB_RETURN_IF_ERROR(from_standby ? store_->ReadOpsFromStandby(layout_.name, after, kLogPageEntries, keep)
                                        : store_->ReadOps(layout_.name, after, kLogPageEntries, keep));
    // An entry of unknown identity here (a snapshot without it) against one
    // the log names cannot be vouched for either.
    if (check && !HoldsLastApplied(ops)) {
      *rewound = true;
      *trimmed = !ops.empty() && ops[0].seq > applied_seq_;
      return applied;
    }
    // A replica that applied nothing yet, over a log that starts past entry 1: trimmed under it.
    if (!check && applied_seq_ == 0 && (from_standby || store_->shared()) && !ops.empty() && ops[0].seq > 1) {
      *rewound = *trimmed = true;
      return applied;
    }
    const bool end = ops.size() < kLogPageEntries;
    if (!end && head == UINT64_MAX && !from_standby) {
      head_read_at = std::chrono::steady_clock::now();
      if (auto rec = store_->GetCollection(layout_.name); rec.ok()) head = rec->last_op;
    }
    const bool at_head = !end && !ops.empty() && ops.back().seq >= head;
    std::optional<std::chrono::steady_clock::time_point> fresh;
    if (end) fresh = read_at;
    else if (at_head) fresh = head_read_at;
    MOEEDB_ASSIGN_OR_RETURN(const size_t n, ApplyEntries(ops, check ? 1 : 0, fresh));
    applied += n;
    if (end || at_head) return applied;
  }
}

bool ShardReplica::HoldsLastApplied(const std::vector<OpRecord>& ops) const {
  return !ops.empty() && ops[0].seq == applied_seq_ && ops[0].entry_id == applied_entry_;
}

Result<size_t> ShardReplica::ApplyEntries(const std::vector<OpRecord>& ops, size_t next,
                                          std::optional<std::chrono::steady_clock::time_point> read_at) {
  size_t applied = 0;
  while (next < ops.size()) {
    // A batch of entries: their documents read from the store without the
    // searches' lock, then applied under it.
    size_t end = next, documents = 0;
    while (end < ops.size() && end - next < kReplayBatchEntries &&
           (end == next || documents + ops[end].added.size() <= kReplayBatchDocuments))
      documents += ops[end++].added.size();
    // One read of the store for the batch's documents, handed back per entry.
    std::vector<uint64_t> wanted;
    wanted.reserve(documents);
    for (size_t i = next; i < end; ++i) wanted.insert(wanted.end(), ops[i].added.begin(), ops[i].added.end());
    std::vector<std::optional<StoredDocument>> all;
    if (!wanted.empty()) {
      MOEEDB_ASSIGN_OR_RETURN(all, store_->GetManyByInternal(layout_.name, wanted, true, filter_));
    }
    std::vector<std::vector<std::optional<StoredDocument>>> fetched(end - next);
    for (size_t i = next, at = 0; i < end; ++i)
      for (size_t k = 0; k < ops[i].added.size(); ++k) fetched[i - next].push_back(std::move(all[at++]));
    std::unique_lock lock(mu_);
    for (size_t i = next; i < end; ++i) {
      if (ops[i].seq != applied_seq_ + 1)
        return Status::Corruption("collection " + layout_.name + ": change log entry " +
                                  std::to_string(applied_seq_ + 1) +
                                  " is missing (trimmed?); reopen the collection to rebuild its indexes");
      Status s = ApplyLoggedOp(ops[i], std::move(fetched[i - next]));
      if (!s.ok()) {
        needs_rebuild_ = true;  // half applied: refused until rebuilt
        return s;
      }
      ++applied;
    }
    next = end;
  }
  if (read_at) {
    std::unique_lock lock(mu_);
    log_read_at_ = *read_at;
  }
  return applied;
}

Status ShardReplica::ApplyLoggedOp(const OpRecord& op, std::vector<std::optional<StoredDocument>> docs) {
  applied_entry_next_ = op.entry_id;
  std::vector<uint64_t> ids;
  std::vector<const StoredDocument*> present;
  for (size_t i = 0; i < docs.size(); ++i) {
    if (!docs[i]) continue;  // another shard's, or replaced or deleted by a later entry
    if (docs[i]->hs.size() != layout_.dim_hs || docs[i]->rw.size() != layout_.dim_rw)
      return Status::Corruption("collection " + layout_.name + ": stored vector of the wrong size");
    ids.push_back(op.added[i]);
    present.push_back(&*docs[i]);
  }
  // Whatever of the entry the indexes may hold already goes first.
  std::vector<uint64_t> gone = op.removed;
  gone.insert(gone.end(), op.added.begin(), op.added.end());
  return ApplyChange(op.seq, gone, ids, present);
}

Status ShardReplica::ApplyChange(uint64_t seq, const std::vector<uint64_t>& gone, const std::vector<uint64_t>& ids,
                                 const std::vector<const StoredDocument*>& docs) {
  // Writers hold mu_ exclusively: no search is using either index.
  index_->Remove(gone);
  for (uint64_t id : gone) {
    auto it = metadata_.find(id);
    if (it == metadata_.end()) continue;
    if (payload_) payload_->Remove(id, json::parse(it->second, nullptr, false));
    metadata_.erase(it);
  }
  if (lexical_) MOEEDB_RETURN_IF_ERROR(lexical_->Remove(gone));
  if (!ids.empty()) {
    std::vector<float> hs, rw;
    std::vector<const std::string*> texts;
    for (size_t i = 0; i < docs.size(); ++i) {
      hs.insert(hs.end(), docs[i]->hs.begin(), docs[i]->hs.end());
      rw.insert(rw.end(), docs[i]->rw.begin(), docs[i]->rw.end());
      texts.push_back(&docs[i]->text);
      metadata_[ids[i]] = docs[i]->metadata_json.empty() ? "{}" : docs[i]->metadata_json;
      if (payload_) payload_->Add(ids[i], json::parse(metadata_[ids[i]], nullptr, false));
    }
    MOEEDB_RETURN_IF_ERROR(index_->Add(ids, hs.data(), rw.data()));
    if (lexical_) MOEEDB_RETURN_IF_ERROR(lexical_->Replace(ids, texts));
  }
  applied_seq_ = seq;
  applied_entry_ = std::move(applied_entry_next_);
  applied_entry_next_.clear();
  return Status::OK();
}

Result<std::unique_ptr<PayloadIndex>> ShardReplica::BuildPayload(
    const PayloadIndexFields& fields, const std::unordered_map<uint64_t, std::string>& metadata) {
  if (fields.empty()) return std::unique_ptr<PayloadIndex>();
  MOEEDB_ASSIGN_OR_RETURN(std::unique_ptr<PayloadIndex> p, PayloadIndex::Create(fields));
  for (const auto& [id, m] : metadata) p->Add(id, json::parse(m, nullptr, false));
  return p;
}

Status ShardReplica::SetPayloadIndexes(const PayloadIndexFields& fields) {
  // No change meanwhile (follow_mu_); searches go on while it builds.
  std::lock_guard follow(follow_mu_);
  std::unique_ptr<PayloadIndex> built;
  {
    std::shared_lock lock(mu_);
    if (payload_ ? payload_->fields() == fields : fields.empty()) return Status::OK();
    MOEEDB_ASSIGN_OR_RETURN(built, BuildPayload(fields, metadata_));
  }
  std::unique_lock lock(mu_);
  payload_ = std::move(built);
  layout_.payload_indexes = fields;  // what a rebuild indexes
  return Status::OK();
}

std::map<std::string, uint64_t> ShardReplica::PayloadIndexPoints() const {
  std::shared_lock lock(mu_);
  std::map<std::string, uint64_t> out;
  if (payload_)
    for (const auto& [key, kind] : payload_->fields()) out[key] = payload_->Points(key);
  return out;
}

size_t ShardReplica::payload_index_bytes() const {
  std::shared_lock lock(mu_);
  return payload_ ? payload_->memory_bytes() : 0;
}

Result<uint64_t> ShardReplica::Save() {
  // Nothing changes meanwhile (follow_mu_); searches go on (mu_ shared).
  std::lock_guard follow(follow_mu_);
  std::shared_lock lock(mu_);
  if (needs_rebuild_)
    return Status::Unavailable("shard " + std::to_string(shard_) + " of " + layout_.name + " is being rebuilt");
  // Both indexes cover applied_seq_ before the op log is trimmed to it.
  if (lexical_) {
    std::lock_guard lex(lexical_mu_);
    MOEEDB_RETURN_IF_ERROR(lexical_->Commit(applied_seq_, applied_entry_));
  }
  MOEEDB_RETURN_IF_ERROR(index_->Save(dir_, applied_seq_));
  MOEEDB_RETURN_IF_ERROR(WriteFileAtomic(dir_ + kMetadataFile, MetadataBytes(applied_seq_, metadata_)));
  MOEEDB_RETURN_IF_ERROR(WriteFileAtomic(dir_ + kEntryFile, std::to_string(applied_seq_) + " " + applied_entry_ + "\n"));
  if (layout_.shards > 1) MOEEDB_RETURN_IF_ERROR(RecordPlacement());
  snapshot_seq_ = applied_seq_;
  built_unsaved_ = 0;
  return applied_seq_;
}

}  // namespace moeedb
