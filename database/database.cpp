#include "database/database.h"

#include "database/document_update.h"
#include "database/spec/collection_name.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/model/model_defaults.h"
#include "engine/model/routing_policy.h"

namespace moeedb {

namespace fs = std::filesystem;
using json = nlohmann::json;

Result<EmbeddingSpec> RecordedSetup(const std::string& info_json) {
  const json info = json::parse(info_json, nullptr, false);
  if (info.is_discarded() || !info.is_object()) return Status::Corruption("collection info is damaged");
  auto field = [&](const char* key, const char* fallback) {
    return info.contains(key) && info[key].is_string() ? info[key].get<std::string>() : std::string(fallback);
  };
  EmbeddingSpec c;
  // Collections recorded before prompts and poolings were selectable used
  // the MoEE reference setup, which is what a model folder without
  // embedding.json asks for.
  const EmbeddingDefaults reference;
  c.model_dir = field("model_dir", "");
  c.routing = field("routing", c.routing.c_str());
  c.prompt = field("prompt", reference.prompt.c_str());
  c.hs_pooling = field("hs_pooling", reference.hs_pooling.c_str());
  c.rw_pooling = field("rw_pooling", reference.rw_pooling.c_str());
  return c;
}

namespace {

// A setup's identity: its recorded fields, resolved (absolute model folder,
// the model's defaults filled in, the routing spelled canonically).
std::string SetupKey(const EmbeddingSpec& c) {
  return json{c.model_dir, c.routing, c.prompt, c.hs_pooling, c.rw_pooling}.dump();
}

}  // namespace

Result<std::unique_ptr<Database>> Database::Open(const std::string& location, DatabaseOptions options) {
  if (location.empty()) return Status::InvalidArgument("no database folder given");
  const bool postgres = IsPostgresLocation(location);
  if (postgres && options.index_dir.empty())
    return Status::InvalidArgument("a PostgreSQL database needs a local folder for its indexes (--index-dir DIR)");
  if (!postgres && options.must_exist && !fs::exists(fs::path(location) / "CURRENT"))
    return Status::NotFound("no database at " + location);
  std::unique_ptr<Database> db(new Database(std::move(options)));
  MOEEDB_ASSIGN_OR_RETURN(db->store_, Store::Open(location));
  return db;
}

Database::~Database() { (void)SaveIndexes(); }

Result<std::vector<CollectionRecord>> Database::ListCollections() const { return store_->ListCollections(); }

Result<CollectionRecord> Database::GetCollection(const std::string& name) const { return store_->GetCollection(name); }

Result<std::optional<StoredDocument>> Database::GetDocument(const std::string& collection, const std::string& id) const {
  return store_->Get(collection, id);
}

Status Database::Checkpoint(const std::string& dir) const { return store_->Checkpoint(dir); }

std::shared_ptr<VectorCollection> Database::FindOpen(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = collections_.find(name);
  return it == collections_.end() ? nullptr : it->second;
}

std::vector<std::pair<std::string, std::shared_ptr<VectorCollection>>> Database::OpenOnes() {
  std::lock_guard<std::mutex> lock(mu_);
  return {collections_.begin(), collections_.end()};
}

void Database::Retire(const std::string& name, const std::shared_ptr<VectorCollection>& c) {
  c->RemoveFoldersWhenClosed();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = collections_.find(name);
  if (it != collections_.end() && it->second == c) collections_.erase(it);
}

Result<std::shared_ptr<VectorCollection>> Database::OpenCollection(const std::string& name) {
  if (auto c = FindOpen(name)) return c;
  // Opened (its replicas loaded or built from the store) without mu_, so
  // requests for open collections go on meanwhile; one at a time, since two
  // opens of one collection would build the same folders.
  std::lock_guard<std::mutex> opening(open_mu_);
  if (auto c = FindOpen(name)) return c;
  MOEEDB_ASSIGN_OR_RETURN(std::shared_ptr<VectorCollection> c, VectorCollection::Open(store_.get(), name, options_.index_dir, options_.peers));
  c->SetMaxStaleness(options_.max_staleness_ms);
  c->SetMaxLag(options_.max_lag_entries);
  std::lock_guard<std::mutex> lock(mu_);
  collections_[name] = c;
  return c;
}

Result<CollectionOptions> Database::NewCollectionOptions(const EmbeddingSetup& setup) {
  std::lock_guard<std::mutex> lock(setups_mu_);
  auto it = stats_.find(&setup);
  if (it == stats_.end()) {
    MOEEDB_ASSIGN_OR_RETURN(auto stats, setup.CalibrationStats());
    it = stats_.emplace(&setup, std::move(stats)).first;
  }
  return setup.NewCollectionOptions(it->second);
}

Result<std::shared_ptr<VectorCollection>> Database::CreateCollection(const std::string& name,
                                                                      const CollectionOptions& options) {
  MOEEDB_RETURN_IF_ERROR(CheckCollectionName(name));
  std::shared_ptr<VectorCollection> created;
  {
    std::lock_guard<std::mutex> opening(open_mu_);
    if (store_->GetCollection(name).ok()) return Status::InvalidArgument("collection '" + name + "' already exists");
    MOEEDB_ASSIGN_OR_RETURN(auto aliases, store_->ListAliases());
    if (aliases.count(name))
      return Status::InvalidArgument("'" + name + "' is an alias of collection '" + aliases[name] + "'");
    MOEEDB_ASSIGN_OR_RETURN(created, VectorCollection::Create(store_.get(), name, options, options_.index_dir, options_.peers));
    created->SetMaxStaleness(options_.max_staleness_ms);
    created->SetMaxLag(options_.max_lag_entries);
    std::lock_guard<std::mutex> lock(mu_);
    collections_[name] = created;
  }
  // Unlocked: this node's own replicas are claimed by a thread that opens
  // collections through this database.
  if (options_.peers != nullptr) options_.peers->AwaitReplicas(created->layout(), std::chrono::seconds(30));
  return created;
}

Status Database::DropCollection(const std::string& name) {
  std::lock_guard<std::mutex> opening(open_mu_);
  MOEEDB_RETURN_IF_ERROR(store_->GetCollection(name).status());
  // Requests may still hold it: closed, and its folders removed, when the last one ends.
  if (auto c = FindOpen(name)) Retire(name, c);
  return VectorCollection::Drop(store_.get(), name, options_.index_dir);
}

Status Database::ChangeAliases(const std::vector<AliasChange>& changes) {
  constexpr int kAttempts = 8;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    MOEEDB_ASSIGN_OR_RETURN(auto before, store_->ListAliases());
    auto aliases = before;
    for (const AliasChange& c : changes) {
      if (c.kind == AliasChange::Kind::kDelete) {
        aliases.erase(c.alias);
        continue;
      }
      const std::string& name = c.kind == AliasChange::Kind::kCreate ? c.alias : c.target;
      if (Status s = CheckCollectionName(name); !s.ok()) return Status::InvalidArgument("alias: " + s.message());
      if (store_->GetCollection(name).ok())
        return Status::InvalidArgument("alias '" + name + "': a collection has that name");
      if (c.kind == AliasChange::Kind::kCreate) {
        MOEEDB_RETURN_IF_ERROR(store_->GetCollection(c.target).status());
        aliases[c.alias] = c.target;
      } else {
        auto it = aliases.find(c.alias);
        if (it == aliases.end()) return Status::NotFound("no alias named '" + c.alias + "'");
        const std::string target = it->second;
        aliases.erase(it);
        aliases[c.target] = target;
      }
    }
    Status s = store_->UpdateAliases(before, aliases);
    if (s.code() != Status::Code::kConflict) return s;
  }
  return Status::Unavailable("the aliases kept changing; try again");
}

Result<std::map<std::string, std::string>> Database::ListAliases() const { return store_->ListAliases(); }

Result<std::string> Database::ResolveName(const std::string& name) const {
  auto rec = store_->GetCollection(name);
  if (rec.ok()) return name;
  if (rec.status().code() != Status::Code::kNotFound) return rec.status();
  MOEEDB_ASSIGN_OR_RETURN(auto aliases, store_->ListAliases());
  auto it = aliases.find(name);
  return it == aliases.end() ? name : it->second;
}

Status Database::SetPayloadIndex(const std::string& name, const std::string& key, std::optional<PayloadFieldKind> kind) {
  MOEEDB_ASSIGN_OR_RETURN(std::shared_ptr<VectorCollection> c, OpenCollection(name));
  std::lock_guard<std::mutex> lock(spec_mu_);
  // Read, change, and write the spec if no one changed it meanwhile.
  constexpr int kAttempts = 8;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    MOEEDB_ASSIGN_OR_RETURN(CollectionRecord rec, store_->GetCollection(name));
    if (rec.id != c->store_id()) return Status::NotFound("collection '" + name + "' was dropped");
    json spec = json::parse(rec.spec_json, nullptr, false);
    if (!spec.is_object()) return Status::Corruption("collection '" + name + "' spec is damaged");
    json declared = spec.value("payload_indexes", json::object());
    if (kind) declared[key] = kPayloadFieldKinds.Name(*kind);
    else declared.erase(key);
    MOEEDB_ASSIGN_OR_RETURN(PayloadIndexFields fields, PayloadIndexFieldsFromJson(declared));
    spec["payload_indexes"] = PayloadIndexFieldsToJson(fields);
    Status s = store_->UpdateSpec(name, rec.spec_json, spec.dump());
    if (s.code() == Status::Code::kConflict) continue;
    MOEEDB_RETURN_IF_ERROR(s);
    return c->SetPayloadIndexes(fields);
  }
  return Status::Unavailable("collection '" + name + "': its spec kept changing; try again");
}

Status Database::Reshard(const std::string& name, uint32_t shards) {
  MOEEDB_ASSIGN_OR_RETURN(std::shared_ptr<VectorCollection> c, OpenCollection(name));
  return c->Reshard(shards);
}

Result<const EmbeddingSetup*> Database::LoadSetup(const EmbeddingSpec& config) {
  std::lock_guard<std::mutex> lock(setups_mu_);
  return LoadSetupLocked(config);
}

Result<const EmbeddingSetup*> Database::LoadSetupLocked(const EmbeddingSpec& recorded) {
  if (recorded.model_dir.empty()) return Status::InvalidArgument("no model folder: pass --model DIR");
  EmbeddingSpec c = options_.compute;
  c.model_dir = fs::absolute(recorded.model_dir).lexically_normal().string();
  c.routing = recorded.routing;
  c.prompt = recorded.prompt;
  c.hs_pooling = recorded.hs_pooling;
  c.rw_pooling = recorded.rw_pooling;
  // The key names the setup as it will be loaded: the model folder's
  // defaults filled in, the routing in its canonical spelling.
  MOEEDB_ASSIGN_OR_RETURN(EmbeddingDefaults defaults, ModelEmbeddingDefaults(c.model_dir));
  if (c.prompt.empty()) c.prompt = defaults.prompt;
  if (c.hs_pooling.empty()) c.hs_pooling = defaults.hs_pooling;
  if (c.rw_pooling.empty()) c.rw_pooling = defaults.rw_pooling;
  MOEEDB_ASSIGN_OR_RETURN(RoutingPolicy policy, RoutingPolicy::Parse(c.routing));
  c.routing = policy.ToString();
  const std::string key = SetupKey(c);
  auto it = setups_.find(key);
  if (it == setups_.end()) {
    MOEEDB_ASSIGN_OR_RETURN(std::unique_ptr<EmbeddingSetup> s, EmbeddingSetup::Load(c));
    it = setups_.emplace(key, s.get()).first;
    loaded_.push_back(std::move(s));
  }
  return it->second;
}

void Database::AddSetup(const EmbeddingSetup* setup) {
  std::lock_guard<std::mutex> lock(setups_mu_);
  EmbeddingSpec c = setup->config();
  c.routing = setup->routing();
  setups_[SetupKey(c)] = setup;
}

Result<const EmbeddingSetup*> Database::SetupOf(const std::string& name) {
  MOEEDB_ASSIGN_OR_RETURN(std::shared_ptr<VectorCollection> c, OpenCollection(name));
  if (c->schema().kind == VectorKind::kPlain)
    return Status::InvalidArgument("collection '" + name + "' holds the client's own vectors (the first of size " +
                                   std::to_string(c->schema().size) + ", " + kDistances.Name(c->schema().distance) +
                                   ") and has no model: give vectors, not text");
  MOEEDB_ASSIGN_OR_RETURN(EmbeddingSpec recorded, RecordedSetup(c->info_json()));
  if (!options_.model_override.empty()) recorded.model_dir = options_.model_override;
  if (recorded.model_dir.empty())
    return Status::InvalidArgument("collection '" + name + "' has no recorded model: pass --model DIR");
  MOEEDB_ASSIGN_OR_RETURN(const EmbeddingSetup* s, LoadSetup(recorded));
  MOEEDB_RETURN_IF_ERROR(s->CheckMatches(c->info_json()));
  return s;
}

Result<std::vector<Embedding>> Database::EmbedWith(const EmbeddingSetup& setup, const std::vector<std::string>& texts,
                                                   EmbedPurpose purpose) {
  if (options_.embed) return options_.embed(setup, texts, purpose);
  return setup.Embed(texts);
}

Result<WriteResult> Database::Upsert(const std::string& name, std::vector<StoredDocument> docs, bool sync,
                                     const UpsertCondition* condition) {
  MOEEDB_ASSIGN_OR_RETURN(std::shared_ptr<VectorCollection> c, OpenCollection(name));
  std::vector<std::string> texts;
  std::vector<size_t> which;
  for (size_t i = 0; i < docs.size(); ++i)
    if (docs[i].hs.empty()) {
      texts.push_back(docs[i].text);
      which.push_back(i);
    }
  if (!texts.empty()) {
    MOEEDB_ASSIGN_OR_RETURN(const EmbeddingSetup* setup, SetupOf(name));
    MOEEDB_ASSIGN_OR_RETURN(std::vector<Embedding> e, EmbedWith(*setup, texts, EmbedPurpose::kDocuments));
    for (size_t j = 0; j < which.size(); ++j) {
      docs[which[j]].hs = std::move(e[j].hs);
      docs[which[j]].rw = std::move(e[j].rw);
    }
  }
  if (condition) return UpsertWhere(c.get(), docs, *condition, sync);
  return c->Upsert(docs, sync);
}

Result<std::vector<SearchHit>> Database::Search(const std::string& name, const SearchSpec& options, SearchInfo* info) {
  MOEEDB_ASSIGN_OR_RETURN(std::shared_ptr<VectorCollection> c, OpenCollection(name));
  if (options.mode == QueryMode::kLexical) return c->Search(nullptr, nullptr, options, info);
  MOEEDB_ASSIGN_OR_RETURN(const EmbeddingSetup* setup, SetupOf(name));
  MOEEDB_ASSIGN_OR_RETURN(std::vector<Embedding> e, EmbedWith(*setup, {options.query}, EmbedPurpose::kQuery));
  return c->Search(e[0].hs.data(), e[0].rw.data(), options, info);
}

Result<std::vector<HitGroup<SearchHit>>> Database::SearchGroups(const std::string& name, SearchSpec options,
                                                                const GroupSpec& groups, const VectorQuery* vectors,
                                                                SearchInfo* info) {
  MOEEDB_ASSIGN_OR_RETURN(PayloadKey key, PayloadKey::Parse(groups.key));
  if (groups.group_size == 0 || groups.limit == 0) return Status::InvalidArgument("group_size and the group limit must be at least 1");
  MOEEDB_ASSIGN_OR_RETURN(std::shared_ptr<VectorCollection> c, OpenCollection(name));
  options.k = std::max<size_t>(1, std::min(c->size(), kMaxSearchK));
  MOEEDB_ASSIGN_OR_RETURN(std::vector<SearchHit> hits,
                          vectors ? SearchVectors(name, *vectors, options, info) : Search(name, options, info));
  return GroupByPayload<SearchHit>(hits, key, groups.group_size, groups.limit,
                                   [](const SearchHit& h) -> const std::string& { return h.metadata_json; });
}

Result<std::vector<SearchHit>> Database::SearchVectors(const std::string& name, const VectorQuery& query,
                                                      SearchSpec options, SearchInfo* info) {
  MOEEDB_ASSIGN_OR_RETURN(std::shared_ptr<VectorCollection> c, OpenCollection(name));
  return SearchByVectors(*c, query, std::move(options), info);
}

Result<size_t> Database::CatchUp() {
  std::lock_guard<std::mutex> pass(catch_up_mu_);  // one pass at a time
  // The store read and replicas built or caught up without mu_: requests go on.
  size_t applied = 0;
  Status first;
  for (const auto& [name, c] : OpenOnes()) {
    auto rec = store_->GetCollection(name);
    const bool gone = !rec.ok() && rec.status().code() == Status::Code::kNotFound;
    if (gone || (rec.ok() && rec->id != c->store_id())) {
      Retire(name, c);
      continue;
    }
    // Placement first: a replica this node takes on is built, one it gave up closed.
    Status synced = rec.ok() ? c->SyncShards() : rec.status();
    if (!synced.ok() && first.ok()) first = synced;
    // Payload indexes another node declared or removed, from the record as
    // it is now (read under spec_mu_: this node's own change is in it).
    std::optional<uint32_t> split;  // the record's split, when another process changed it
    if (rec.ok()) {
      std::lock_guard<std::mutex> spec(spec_mu_);
      auto now = store_->GetCollection(name);
      auto layout = now.ok() ? CollectionLayout::FromRecord(*now) : Result<CollectionLayout>(now.status());
      Status indexed = layout.ok() ? (layout->payload_indexes == c->payload_indexes()
                                          ? Status::OK()
                                          : c->SetPayloadIndexes(layout->payload_indexes))
                                   : layout.status();
      if (!indexed.ok() && first.ok()) first = indexed;
      if (layout.ok() && !c->placed() && layout->shards != c->shards()) split = layout->shards;
    }
    // A collection another process split anew (not a cluster's: its
    // placement names the split) is split alike here.
    if (split) {
      Status resharded = c->Reshard(*split);
      if (!resharded.ok() && first.ok()) first = resharded;
    }
    auto n = rec.ok() ? c->CatchUp() : Result<size_t>(rec.status());
    if (n.ok()) applied += *n;
    else if (first.ok()) first = n.status();
  }
  if (!first.ok()) return first;
  return applied;
}

std::vector<Database::IndexState> Database::OpenIndexStates() {
  std::vector<IndexState> out;
  for (const auto& [name, c] : OpenOnes()) out.push_back({name, c->applied_seq(), c->size()});
  return out;
}

std::vector<std::pair<std::string, VectorCollection::ReplicaState>> Database::OpenReplicaStates() {
  std::vector<std::pair<std::string, VectorCollection::ReplicaState>> out;
  for (const auto& [name, c] : OpenOnes())
    for (const auto& r : c->ReplicaStates()) out.emplace_back(name, r);
  return out;
}

Result<std::string> Database::ClusterStatus() {
  if (options_.peers == nullptr) return Status::NotFound("this node is not part of a cluster (moeedb serve --etcd)");
  return options_.peers->ClusterStatus();
}

Result<size_t> Database::SaveIndexesIfDue(uint64_t every_entries, std::chrono::milliseconds every) {
  Status first;
  size_t saved = 0;
  for (const auto& [name, c] : OpenOnes()) {
    Result<bool> s = c->SaveIndexIfDue(every_entries, every);
    if (s.ok()) saved += *s;
    else if (first.ok()) first = s.status();
  }
  if (!first.ok()) return first;
  return saved;
}

Status Database::TrimLogs(uint64_t keep_entries) {
  if (keep_entries == 0 || !store_->shared()) return Status::OK();
  Status first;
  for (const auto& [name, c] : OpenOnes()) {
    Result<CollectionRecord> rec = store_->GetCollection(name);
    Status s = rec.status();
    if (!s.ok() || rec->last_op <= keep_entries) {
      if (!s.ok() && first.ok()) first = s;
      continue;
    }
    // Below the window, but never past the entry a live replica applied last
    // (it reads on from there, checking that entry first) or a replica being
    // opened will read from: this node's, and the other nodes' as their
    // claims say.
    uint64_t upto = rec->last_op - keep_entries;
    if (auto mine = c->LogFloor()) upto = std::min(upto, *mine > 0 ? *mine - 1 : 0);
    if (options_.peers != nullptr)
      if (auto low = options_.peers->LowestApplied(c->layout())) upto = std::min(upto, *low > 0 ? *low - 1 : 0);
    if (upto > 0) s = store_->TrimOps(name, upto);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

Status Database::SaveIndexes() {
  Status first;
  for (const auto& [name, c] : OpenOnes()) {
    Status s = c->SaveIndex();
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

}  // namespace moeedb
