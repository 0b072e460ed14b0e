// ServerCore: what every protocol router of `moeedb serve` shares — the
// database (its collections, each embedded with the setup it recorded), the
// served embedding setup of the embedding routes (OpenAI, TEI, Ollama,
// Weaviate) with the calibration statistics of its fused vector, and the
// embedding queues. Routers (protocols/) parse their protocol's request,
// call the core, and write their protocol's answer; none holds collection or
// embedding logic of its own.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "index/standardizer.h"
#include "plugin/server/embed_queues.h"
#include "database/database.h"
#include "database/embedding_setup.h"
#include "database/vector_collection.h"

namespace moeedb {

struct ApiOptions {
  std::string served_model_name = "moeedb";
  std::string api_key;                 // empty: no authentication
  size_t max_inputs = 2048;            // OpenAI's limit per request
  size_t tei_max_batch = 32;           // TEI's max client batch size
  size_t max_tokens_per_input = 8192;
  bool truncate = false;               // over-long inputs: truncate (true) or refuse (false)
  size_t max_documents = 1000;         // per upsert request
  size_t max_embed_all_floats = 8 << 20;  // per TEI /embed_all answer (~100 MB of JSON)
};

// The ids `setup` embeds for `texts` (prompt applied): an input longer than
// `limit` tokens is NotSupported unless `allow_truncate` (then its first
// tokens are kept, or its last with `keep_end`); a text the tokenizer
// refuses is InvalidArgument naming its index.
Result<std::vector<std::vector<int32_t>>> TokenizeWithLimit(const EmbeddingSetup& setup,
                                                            const std::vector<std::string>& texts, size_t limit,
                                                            bool allow_truncate, bool keep_end = false);

// How the server's database embeds (DatabaseOptions::embed): through the
// queue of the collection's setup, documents under the length policy of
// `options`, queries truncated. `queues` must outlive the database.
EmbedFunction QueuedEmbedFunction(const ApiOptions& options, EmbedQueues* queues);

class ServerCore {
 public:
  // All pointers must outlive the core; `db` embeds through `queues`
  // (QueuedEmbedFunction). The calibration statistics standardize the served
  // setup's fused vectors ([z(hs)/|.|; z(rw)/|.|]).
  ServerCore(ApiOptions options, Database* db, const EmbeddingSetup* served, EmbedQueues* queues,
             const std::string& std_hs_json, const std::string& std_rw_json);

  const ApiOptions& options() const { return options_; }
  // The setup of the embedding routes (not of the collections: each has its own).
  const EmbeddingSetup& setup() const { return *setup_; }
  EmbedQueues& queues() { return *queues_; }
  Database& db() { return *db_; }

  // TokenizeWithLimit with the served setup and the server's token limit.
  Result<std::vector<std::vector<int32_t>>> TokenizeTexts(const std::vector<std::string>& texts, bool allow_truncate,
                                                          bool keep_end = false) const;
  // Tokenizes as TokenizeTexts does and embeds through the served setup's
  // queue (ResourceExhausted when it is full). With token_states, every
  // token's final-normed hidden state too.
  Result<std::vector<Embedding>> EmbedTexts(const std::vector<std::string>& texts, bool allow_truncate,
                                            bool keep_end = false, bool token_states = false);
  // `text` embedded as a query of collection `name`: with its recorded
  // setup, through that setup's queue, truncated to the token limit.
  Result<std::vector<Embedding>> EmbedQuery(const std::string& name, const std::string& text);
  // Token ids as given (each in the vocabulary, checked by the caller).
  Result<std::vector<Embedding>> EmbedIds(std::vector<std::vector<int32_t>> ids, bool token_states = false);
  // [z(hs)/|.|; z(rw)/|.|]: with it, an inner product computes cos_HS + alpha * cos_RW.
  std::vector<float> Fused(const Embedding& e) const;
  size_t dim_fused() const { return setup_->dim_hs() + setup_->dim_rw(); }

  // The database's collections (database.h); a new one is embedded with
  // the served setup: NewCollectionOptions() is what it records.
  Result<std::shared_ptr<VectorCollection>> OpenCollection(const std::string& name) { return db_->OpenCollection(name); }
  Result<std::vector<CollectionRecord>> ListCollections() const { return db_->ListCollections(); }
  Result<CollectionRecord> GetCollection(const std::string& name) const { return db_->GetCollection(name); }
  Result<std::shared_ptr<VectorCollection>> CreateCollection(const std::string& name, const CollectionOptions& options) {
    return db_->CreateCollection(name, options);
  }
  CollectionOptions NewCollectionOptions() const;
  Status DropCollection(const std::string& name) { return db_->DropCollection(name); }
  // Snapshots every collection opened so far (graceful shutdown).
  Status SaveIndexes() { return db_->SaveIndexes(); }

  void CountStored(size_t documents) { documents_stored_ += documents; }
  uint64_t documents_stored() const { return documents_stored_; }

 private:
  ApiOptions options_;
  Database* db_;
  const EmbeddingSetup* setup_;
  EmbedQueues* queues_;
  Standardizer std_hs_, std_rw_;
  std::atomic<uint64_t> documents_stored_{0};
};

}  // namespace moeedb
