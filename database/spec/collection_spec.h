// CollectionSpec: the settings a user chooses for a new collection (its
// index kinds, default alpha, lexical index and, for vectors the client
// brings, their size and distance), as the CLI's ingest flags,
// the collections API's PUT body and the C API's JSON give them. The
// embedding setup's part (model, routing, prompt, poolings) is the
// EmbeddingSpec's; dims and calibration statistics follow from the setup.
#pragma once

#include <optional>
#include <string>

#include "base/field_table.h"
#include "database/vector_collection.h"
#include "database/vector_schema.h"
#include "index/dual_index.h"
#include "index/lexical_index.h"
#include "index/payload_index.h"

namespace moeedb {

// The most copies kept of each shard (kMaxShards: shard_query.h).
inline constexpr uint32_t kMaxReplicas = 16;

struct CollectionSpec {
  IndexKind index_hs = IndexKind::kFlat;
  IndexKind index_rw = IndexKind::kFlat;
  bool sq8 = false;            // 8-bit scalar codes: the same as codes sq8 (the older spelling)
  CodeKind codes = CodeKind::kNone;  // what both halves' candidates are found by in RAM (index/dual_index.h)
  int pq_dims = SignalIndexSpec{}.pq_dims;
  int oversample = DualIndexSpec{}.oversample;  // candidates per half = oversample * k, re-scored exactly
  bool on_disk = false;        // the full rows in memory-mapped files (the page cache), not the heap
  bool fp16_rows = false;      // the full rows in fp16
  std::optional<float> alpha;  // the collection's default alpha; unset: the model's
  bool lexical = true;         // BM25 over the texts (lexical and hybrid search)
  std::string language = LexicalSpec{}.language;
  double bm25_k1 = LexicalSpec{}.k1;
  double bm25_b = LexicalSpec{}.b;
  // The client's own vectors (vector_schema.h): unset, the served model's
  // named hs and rw; its fused size with Cosine, that fused vector; any
  // other, a plain collection compared by `distance`.
  std::optional<int64_t> vector_size;
  Distance distance = Distance::kCosine;
  std::string text_key;        // payload field holding a point's text; "": content, then _node_content
  uint32_t shards = 1;         // ShardOfId(id, shards, kRange) places each document (storage/store.h)
  uint32_t replicas = 1;       // a cluster keeps each shard on this many nodes
  PayloadIndexFields payload_indexes;  // payload keys indexed from the start ("payload_indexes": {"key": "kind"})

  // The vector schema a collection of a model with this fused size records.
  VectorSchema Schema(size_t fused_size) const;

  // The lexical settings as the index takes them.
  LexicalSpec Lexical() const;
  // The rules the table cannot say alone: a stemmer Xapian knows.
  Status Check(spec::Spelling spelling) const;
  // Into a new collection's options, whose dims, statistics, recorded info
  // and model alpha the embedding setup filled in.
  void ApplyTo(CollectionOptions* options) const;
  // A new collection's options: `model`'s (what the embedding setup fills
  // in) with the vector schema recorded, or a plain collection's when
  // vector_size asks for one; then ApplyTo.
  Result<CollectionOptions> NewOptions(const CollectionOptions& model) const;
};

// index_hs, index_rw, sq8, codes, pq_dims, oversample, on_disk, fp16_rows,
// alpha, lexical, language, bm25_k1, bm25_b, vector_size, distance,
// text_key, shards, replicas.
const spec::FieldTable<CollectionSpec>& CollectionFields();
// A JSON body into a checked spec. Besides the table's flat fields it reads
// the nested forms the collections API has always taken: "index": {"hs",
// "rw", "sq8", "codes", "pq_dims", "oversample", "on_disk", "fp16_rows"}, "lexical": true | false | {"language", "k1", "b"} and
// "payload_indexes": {"key": "keyword" | "integer" | ...}.
// Unknown keys are ignored (the server reads "routing" itself).
Result<CollectionSpec> CollectionSpecFromJson(const nlohmann::json& body);
// The set fields, flat: CollectionSpecFromJson reads it back equal.
nlohmann::json CollectionSpecToJson(const CollectionSpec& spec);

}  // namespace moeedb
