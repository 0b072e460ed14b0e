#include "plugin/server/server_core.h"

namespace moeedb {

ServerCore::ServerCore(ApiOptions options, const EmbeddingSetup* setup, EmbedQueue* queue, Store* store,
                       const std::string& std_hs_json, const std::string& std_rw_json)
    : options_(std::move(options)), setup_(setup), queue_(queue), store_(store) {
  auto h = Standardizer::FromJson(std_hs_json);
  auto r = Standardizer::FromJson(std_rw_json);
  std_hs_ = h.ok() ? *h : Standardizer::Identity(setup->dim_hs());
  std_rw_ = r.ok() ? *r : Standardizer::Identity(setup->dim_rw());
}

Result<std::vector<Embedding>> ServerCore::EmbedTexts(const std::vector<std::string>& texts, bool allow_truncate,
                                                      bool keep_end, bool token_states) {
  MOEEDB_ASSIGN_OR_RETURN(auto ids, TokenizeTexts(texts, allow_truncate, keep_end));
  return EmbedIds(std::move(ids), token_states);
}

Result<std::vector<std::vector<int32_t>>> ServerCore::TokenizeTexts(const std::vector<std::string>& texts,
                                                                    bool allow_truncate, bool keep_end) const {
  std::vector<std::vector<int32_t>> ids;
  ids.reserve(texts.size());
  const size_t limit = options_.max_tokens_per_input;
  for (size_t i = 0; i < texts.size(); ++i) {
    auto t = setup_->Tokenize(texts[i]);
    if (!t.ok()) return Status::InvalidArgument("input " + std::to_string(i) + ": " + t.status().message());
    if (t->size() > limit) {
      if (!allow_truncate)
        return Status::NotSupported("input " + std::to_string(i) + " has " + std::to_string(t->size()) +
                                    " tokens, more than the limit of " + std::to_string(limit));
      if (keep_end) t->erase(t->begin(), t->end() - static_cast<std::ptrdiff_t>(limit));
      else t->resize(limit);
    }
    ids.push_back(std::move(t).value());
  }
  return ids;
}

Result<std::vector<Embedding>> ServerCore::EmbedIds(std::vector<std::vector<int32_t>> ids, bool token_states) {
  MOEEDB_ASSIGN_OR_RETURN(auto future, queue_->Submit(std::move(ids), token_states));
  return future.get();
}

std::vector<float> ServerCore::Fused(const Embedding& e) const {
  std::vector<float> out(e.hs.size() + e.rw.size());
  std_hs_.Apply(e.hs.data(), out.data());
  std_rw_.Apply(e.rw.data(), out.data() + e.hs.size());
  return out;
}

Result<VectorCollection*> ServerCore::OpenCollection(const std::string& name) {
  std::lock_guard<std::mutex> lock(collections_mu_);
  auto it = collections_.find(name);
  if (it != collections_.end()) return it->second.get();
  MOEEDB_ASSIGN_OR_RETURN(std::unique_ptr<VectorCollection> c, VectorCollection::Open(store_, name));
  MOEEDB_RETURN_IF_ERROR(setup_->CheckMatches(c->info_json()));
  VectorCollection* raw = c.get();
  collections_[name] = std::move(c);
  return raw;
}

Result<VectorCollection*> ServerCore::CreateCollection(const std::string& name, const CollectionOptions& options) {
  std::lock_guard<std::mutex> lock(collections_mu_);
  if (store_->GetCollection(name).ok()) return Status::InvalidArgument("collection '" + name + "' already exists");
  MOEEDB_ASSIGN_OR_RETURN(std::unique_ptr<VectorCollection> c, VectorCollection::Create(store_, name, options));
  VectorCollection* raw = c.get();
  collections_[name] = std::move(c);
  return raw;
}

CollectionOptions ServerCore::NewCollectionOptions() const {
  return setup_->NewCollectionOptions({std_hs_.ToJson(), std_rw_.ToJson()});
}

Status ServerCore::DropCollection(const std::string& name) {
  std::lock_guard<std::mutex> lock(collections_mu_);
  MOEEDB_RETURN_IF_ERROR(store_->GetCollection(name).status());
  collections_.erase(name);
  return VectorCollection::Drop(store_, name);
}

Status ServerCore::SaveIndexes() {
  std::lock_guard<std::mutex> lock(collections_mu_);
  Status first;
  for (auto& [name, c] : collections_) {
    Status s = c->SaveIndex();
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

}  // namespace moeedb
