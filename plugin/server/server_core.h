// ServerCore: what every protocol router of `moeedb serve` shares — the
// embedding setup and its queue, the store and the collections opened so far,
// the calibration statistics of the fused vector. Routers (protocols/) parse
// their protocol's request, call the core, and write their protocol's answer;
// none holds collection or embedding logic of its own.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "index/standardizer.h"
#include "plugin/server/embed_queue.h"
#include "plugin/service/embedding_setup.h"
#include "plugin/service/vector_collection.h"

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

class ServerCore {
 public:
  // All pointers must outlive the core. The calibration statistics
  // standardize the fused vectors ([z(hs)/|.|; z(rw)/|.|]).
  ServerCore(ApiOptions options, const EmbeddingSetup* setup, EmbedQueue* queue, Store* store,
             const std::string& std_hs_json, const std::string& std_rw_json);

  const ApiOptions& options() const { return options_; }
  const EmbeddingSetup& setup() const { return *setup_; }
  EmbedQueue& queue() { return *queue_; }
  Store* store() { return store_; }

  // Tokenizes (prompt applied) and embeds through the queue. An input longer
  // than max_tokens_per_input is NotSupported unless `allow_truncate` (then
  // its first tokens are kept, or its last with `keep_end`); a text the
  // tokenizer refuses is InvalidArgument naming its index; a full queue
  // ResourceExhausted.
  // The ids EmbedTexts embeds for `texts` (the same errors, nothing embedded).
  Result<std::vector<std::vector<int32_t>>> TokenizeTexts(const std::vector<std::string>& texts, bool allow_truncate,
                                                          bool keep_end = false) const;
  // With token_states, every token's final-normed hidden state too.
  Result<std::vector<Embedding>> EmbedTexts(const std::vector<std::string>& texts, bool allow_truncate,
                                            bool keep_end = false, bool token_states = false);
  // Token ids as given (each in the vocabulary, checked by the caller).
  Result<std::vector<Embedding>> EmbedIds(std::vector<std::vector<int32_t>> ids, bool token_states = false);
  // [z(hs)/|.|; z(rw)/|.|]: with it, an inner product computes cos_HS + alpha * cos_RW.
  std::vector<float> Fused(const Embedding& e) const;
  size_t dim_fused() const { return setup_->dim_hs() + setup_->dim_rw(); }

  // The collection, opened once and kept; refused (InvalidArgument) when it
  // was recorded with another embedding setup than the served one.
  Result<VectorCollection*> OpenCollection(const std::string& name);
  // InvalidArgument ("already exists") for an existing name.
  Result<VectorCollection*> CreateCollection(const std::string& name, const CollectionOptions& options);
  // What a new collection of the served setup records (its statistics included).
  CollectionOptions NewCollectionOptions() const;
  Status DropCollection(const std::string& name);
  // Snapshots every collection opened so far (graceful shutdown).
  Status SaveIndexes();

  void CountStored(size_t documents) { documents_stored_ += documents; }
  uint64_t documents_stored() const { return documents_stored_; }

 private:
  ApiOptions options_;
  const EmbeddingSetup* setup_;
  EmbedQueue* queue_;
  Store* store_;
  Standardizer std_hs_, std_rw_;
  std::mutex collections_mu_;
  std::map<std::string, std::unique_ptr<VectorCollection>> collections_;
  std::atomic<uint64_t> documents_stored_{0};
};

}  // namespace moeedb
