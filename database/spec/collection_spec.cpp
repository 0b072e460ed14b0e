#include "database/spec/collection_spec.h"

#include "database/client_vectors.h"

namespace moeedb {

using json = nlohmann::json;
using namespace spec;

namespace {

FieldTable<CollectionSpec> MakeCollectionFields() {
  FieldTable<CollectionSpec> t;
  t.push_back(Enum("index_hs", &CollectionSpec::index_hs, kIndexKinds, "KIND", "HS index: flat | hnsw | ivf"));
  t.push_back(Enum("index_rw", &CollectionSpec::index_rw, kIndexKinds, "KIND", "RW index: flat | hnsw | ivf"));
  t.push_back(Boolean("sq8", &CollectionSpec::sq8, "8-bit scalar codes (the same as --codes sq8)"));
  t.push_back(Enum("codes", &CollectionSpec::codes, kCodeKinds, "KIND",
                   "codes in RAM that find each half's candidates, re-scored exactly from the full rows: "
                   "none | sq8 | sq4 | pq | binary"));
  t.push_back(Integer("pq_dims", &CollectionSpec::pq_dims, 1, 256, "N", "dimensions per byte of product-quantization codes"));
  t.push_back(Integer("oversample", &CollectionSpec::oversample, 1, 1000, "N",
                      "candidates each ANN or coded half proposes per hit asked for, re-scored exactly"));
  t.push_back(Boolean("on_disk", &CollectionSpec::on_disk,
                      "the full-precision rows in memory-mapped files (the page cache holds them), not the heap"));
  t.push_back(Boolean("fp16_rows", &CollectionSpec::fp16_rows, "the full-precision rows in fp16 (half the bytes)"));
  t.push_back(Number("alpha", &CollectionSpec::alpha, -HUGE_VAL, HUGE_VAL, "X", "default alpha of the collection's searches",
                     "the model's, else 1.0"));
  Field<CollectionSpec> lexical = Boolean("lexical", &CollectionSpec::lexical,
                                          "BM25 index over the texts, for lexical and hybrid search");
  lexical.meta = "on|off";  // a value on the command line: the index is on unless turned off
  lexical.get = [](const CollectionSpec& s) { return json(s.lexical); };
  t.push_back(std::move(lexical));
  t.push_back(String("language", &CollectionSpec::language, "NAME", "stemmer of the lexical index (a Snowball name, or none)"));
  t.push_back(Number("bm25_k1", &CollectionSpec::bm25_k1, 0, HUGE_VAL, "X", "BM25 k1"));
  t.push_back(Number("bm25_b", &CollectionSpec::bm25_b, 0, 1, "X", "BM25 b"));
  t.push_back(Integer("vector_size", &CollectionSpec::vector_size, 1, 65536, "N",
                      "size of the client's own vectors: the model's fused size takes its fused vector, any other "
                      "makes a plain vector collection (no model)",
                      "the model's named hs and rw"));
  t.push_back(Enum("distance", &CollectionSpec::distance, kDistances, "NAME",
                   "how a plain collection compares vectors: Cosine | Dot | Euclid"));
  t.push_back(String("text_key", &CollectionSpec::text_key, "KEY",
                     "payload field holding a point's text for the lexical index",
                     "content, then _node_content's text"));
  t.push_back(Integer("shards", &CollectionSpec::shards, 1, kMaxShards, "S",
                      "split the documents into S shards (by a hash of their ids) that a cluster's nodes share"));
  t.push_back(Integer("replicas", &CollectionSpec::replicas, 1, kMaxReplicas, "R",
                      "copies of each shard a cluster keeps on different nodes (at most the node count)"));
  return t;
}

}  // namespace

const FieldTable<CollectionSpec>& CollectionFields() {
  static const FieldTable<CollectionSpec> kTable = MakeCollectionFields();
  return kTable;
}

LexicalSpec CollectionSpec::Lexical() const {
  LexicalSpec l;
  l.enabled = lexical;
  l.language = language;
  l.k1 = bm25_k1;
  l.b = bm25_b;
  return l;
}

Status CollectionSpec::Check(Spelling spelling) const {
  if (sq8 && codes != CodeKind::kNone && codes != CodeKind::kSq8)
    return Status::InvalidArgument(FieldLabel("sq8", spelling) + " asks for sq8 codes, " + FieldLabel("codes", spelling) +
                                   " for " + kCodeKinds.Name(codes) + ": give one");
  Status s = Lexical().Validate();
  if (!s.ok()) return Status::InvalidArgument(FieldLabel("language", spelling) + ": " + s.message());
  return Status::OK();
}

VectorSchema CollectionSpec::Schema(size_t fused_size) const {
  VectorSchema s;
  s.text_key = text_key;
  if (!vector_size) return s;
  s.size = static_cast<size_t>(*vector_size);
  s.distance = distance;
  s.kind = s.size == fused_size && distance == Distance::kCosine ? VectorKind::kFused : VectorKind::kPlain;
  return s;
}

void CollectionSpec::ApplyTo(CollectionOptions* o) const {
  o->index.hs.kind = index_hs;
  o->index.rw.kind = index_rw;
  // sq8, the older spelling, quantizes the HNSW and IVF halves only, as it always has.
  o->index.hs.codes = sq8 ? (index_hs == IndexKind::kFlat ? CodeKind::kNone : CodeKind::kSq8) : codes;
  o->index.rw.codes = sq8 ? (index_rw == IndexKind::kFlat ? CodeKind::kNone : CodeKind::kSq8) : codes;
  o->index.hs.pq_dims = o->index.rw.pq_dims = pq_dims;
  o->index.oversample = oversample;
  o->index.rows_on_disk = on_disk;
  o->index.fp16_rows = fp16_rows;
  if (alpha) o->default_alpha = *alpha;
  o->lexical = Lexical();
  o->shards = shards;
  o->replicas = replicas;
  o->payload_indexes = payload_indexes;
}

Result<CollectionOptions> CollectionSpec::NewOptions(const CollectionOptions& model) const {
  const VectorSchema schema = Schema(model.dim_hs + model.dim_rw);
  CollectionOptions o = model;
  if (schema.kind == VectorKind::kPlain) { MOEEDB_ASSIGN_OR_RETURN(o, PlainCollectionOptions(schema)); }
  MOEEDB_ASSIGN_OR_RETURN(o.info_json, schema.RecordIn(o.info_json));
  ApplyTo(&o);
  return o;
}

Result<CollectionSpec> CollectionSpecFromJson(const json& body) {
  if (!body.is_object()) return Status::InvalidArgument("the collection's settings must be a JSON object");
  json flat = body;
  if (body.contains("index")) {
    const json& ix = body["index"];
    if (!ix.is_object()) return Status::InvalidArgument("'index' must be an object {\"hs\": kind, \"rw\": kind, \"codes\": kind, ...}");
    static const char* const kNested[] = {"sq8", "codes", "pq_dims", "oversample", "on_disk", "fp16_rows"};
    for (auto it = ix.begin(); it != ix.end(); ++it) {
      const bool kind = it.key() == "hs" || it.key() == "rw";
      bool known = kind;
      for (const char* k : kNested) known = known || it.key() == k;
      if (!known)
        return Status::InvalidArgument("unknown field 'index." + it.key().substr(0, 80) +
                                       "' (hs, rw, sq8, codes, pq_dims, oversample, on_disk, fp16_rows)");
      flat[kind ? "index_" + it.key() : it.key()] = it.value();
    }
    flat.erase("index");
  }
  if (body.contains("lexical") && body["lexical"].is_object()) {
    const json& l = body["lexical"];
    flat["lexical"] = l.value("enabled", json(true));
    for (auto it = l.begin(); it != l.end(); ++it) {
      static const std::pair<const char*, const char*> kNested[] = {{"language", "language"}, {"k1", "bm25_k1"}, {"b", "bm25_b"}};
      bool known = it.key() == "enabled";
      for (auto [from, to] : kNested)
        if (it.key() == from) flat[to] = it.value(), known = true;
      if (!known) return Status::InvalidArgument("unknown field 'lexical." + it.key().substr(0, 80) + "' (language, k1, b)");
    }
  }
  CollectionSpec s;
  if (body.contains("payload_indexes")) {
    MOEEDB_ASSIGN_OR_RETURN(s.payload_indexes, PayloadIndexFieldsFromJson(body["payload_indexes"]));
    flat.erase("payload_indexes");
  }
  MOEEDB_RETURN_IF_ERROR(ReadJson(CollectionFields(), flat, /*refuse_unknown=*/false, &s));
  MOEEDB_RETURN_IF_ERROR(s.Check(Spelling::kJson));
  return s;
}

json CollectionSpecToJson(const CollectionSpec& s) {
  json j = WriteJson(CollectionFields(), s);
  if (!s.payload_indexes.empty()) j["payload_indexes"] = PayloadIndexFieldsToJson(s.payload_indexes);
  return j;
}

}  // namespace moeedb
