#include "plugin/server/server_core.h"

namespace moeedb {

Result<std::vector<std::vector<int32_t>>> TokenizeWithLimit(const EmbeddingSetup& setup,
                                                            const std::vector<std::string>& texts, size_t limit,
                                                            bool allow_truncate, bool keep_end) {
  std::vector<std::vector<int32_t>> ids;
  ids.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    auto t = setup.Tokenize(texts[i]);
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

EmbedFunction QueuedEmbedFunction(const ApiOptions& options, EmbedQueues* queues) {
  const size_t limit = options.max_tokens_per_input;
  const bool truncate = options.truncate;
  return [limit, truncate, queues](const EmbeddingSetup& setup, const std::vector<std::string>& texts,
                                   EmbedPurpose purpose) -> Result<std::vector<Embedding>> {
    MOEEDB_ASSIGN_OR_RETURN(auto ids, TokenizeWithLimit(setup, texts, limit, truncate || purpose == EmbedPurpose::kQuery));
    MOEEDB_ASSIGN_OR_RETURN(auto future, queues->For(setup).Submit(std::move(ids)));
    return future.get();
  };
}

ServerCore::ServerCore(ApiOptions options, Database* db, const EmbeddingSetup* served, EmbedQueues* queues,
                       const std::string& std_hs_json, const std::string& std_rw_json)
    : options_(std::move(options)), db_(db), setup_(served), queues_(queues) {
  auto h = Standardizer::FromJson(std_hs_json);
  auto r = Standardizer::FromJson(std_rw_json);
  std_hs_ = h.ok() ? *h : Standardizer::Identity(served->dim_hs());
  std_rw_ = r.ok() ? *r : Standardizer::Identity(served->dim_rw());
}

Result<std::vector<Embedding>> ServerCore::EmbedTexts(const std::vector<std::string>& texts, bool allow_truncate,
                                                      bool keep_end, bool token_states) {
  MOEEDB_ASSIGN_OR_RETURN(auto ids, TokenizeTexts(texts, allow_truncate, keep_end));
  return EmbedIds(std::move(ids), token_states);
}

Result<std::vector<std::vector<int32_t>>> ServerCore::TokenizeTexts(const std::vector<std::string>& texts,
                                                                    bool allow_truncate, bool keep_end) const {
  return TokenizeWithLimit(*setup_, texts, options_.max_tokens_per_input, allow_truncate, keep_end);
}

Result<std::vector<Embedding>> ServerCore::EmbedQuery(const std::string& name, const std::string& text) {
  MOEEDB_ASSIGN_OR_RETURN(const EmbeddingSetup* setup, db_->SetupOf(name));
  MOEEDB_ASSIGN_OR_RETURN(auto ids, TokenizeWithLimit(*setup, {text}, options_.max_tokens_per_input, true));
  MOEEDB_ASSIGN_OR_RETURN(auto future, queues_->For(*setup).Submit(std::move(ids)));
  return future.get();
}

Result<std::vector<Embedding>> ServerCore::EmbedIds(std::vector<std::vector<int32_t>> ids, bool token_states) {
  MOEEDB_ASSIGN_OR_RETURN(auto future, queues_->For(*setup_).Submit(std::move(ids), token_states));
  return future.get();
}

std::vector<float> ServerCore::Fused(const Embedding& e) const {
  std::vector<float> out(e.hs.size() + e.rw.size());
  std_hs_.Apply(e.hs.data(), out.data());
  std_rw_.Apply(e.rw.data(), out.data() + e.hs.size());
  return out;
}

CollectionOptions ServerCore::NewCollectionOptions() const {
  return setup_->NewCollectionOptions({std_hs_.ToJson(), std_rw_.ToJson()});
}

}  // namespace moeedb
