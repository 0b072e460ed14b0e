// Client vectors: a point's or a query's own vectors as a client gives them
// (Qdrant's unnamed or named vectors, Chroma's embeddings, the collections
// API's "vector"), mapped onto a collection's raw HS and RW vectors by its
// VectorSchema (vector_schema.h), and back.
//
// A fused vector [u_hs; u_rw] is kept as the raw vectors whose standardized
// images are u_hs/|u_hs| and u_rw/|u_rw| (Standardizer::Invert), so a point
// or query given fused scores exactly as if moeedb had embedded its text:
// cos_HS + alpha * cos_RW with the collection's alpha.
//
// A plain collection lays its declared vectors out as segments of the HS
// row, in declaration order: x (Cosine: at unit length, unless it is the
// collection's only vector, which is kept as given and normalised by the
// HS standardizer), then for Euclid the term -|x|^2/2. The RW row holds one
// flag per declared vector, 1 where the point lacks it (its segment zeros).
// A query for vector i puts q (Cosine: at unit length; Euclid: [q, 1]) in
// segment i and zeros elsewhere, so the HS inner product is that vector's
// cosine, dot product, or q.x - |x|^2/2 = (|q|^2 - d^2)/2 (the Euclidean
// ranking; ClientScore turns it back into the distance d); its RW half is
// kLacksVectorScore at flag i, searched with alpha 1, so a point without
// vector i scores about -1e30, ranks after every point that has it, and is
// dropped from the answer (LacksVector).
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "database/vector_collection.h"

namespace moeedb {

// The RW query weight that sinks a point lacking the searched vector.
inline constexpr float kLacksVectorScore = -1e30f;
// Whether a plain collection's hit (its exact RW score) lacked the searched vector.
inline bool LacksVector(double score_rw) { return score_rw < kLacksVectorScore / 2; }

struct ClientVector {
  std::vector<float> unnamed;  // one unnamed vector (Qdrant's name "")
  std::vector<float> hs, rw;   // the model's named vectors (a query may give one of them)
  std::map<std::string, std::vector<float>> named;  // vectors under the client's own names
  bool empty() const { return unnamed.empty() && hs.empty() && rw.empty() && named.empty(); }
};

// The options of a new collection of the client's own vectors (`schema`
// plain): no model, no statistics, a flat index, lexical on.
Result<CollectionOptions> PlainCollectionOptions(const VectorSchema& schema);

// Fills doc->hs and doc->rw from `v`; InvalidArgument (the sizes this
// collection takes, a non-finite component, a name not declared) and
// nothing changed otherwise. A plain collection's point may lack any of its
// declared vectors (Qdrant's optional named vectors), or all of them.
Status ToStoredVectors(const VectorCollection& c, const ClientVector& v, StoredDocument* doc);
// What a client reads back for a stored point: its vectors under their
// declared names (a name "" as `unnamed`; fused: the two standardized
// halves; plain: x, for the vectors the point has) or, for a model
// collection, hs and rw. `unit_length`:
// Cosine vectors scaled to length 1, as Qdrant answers them (it normalises
// them on the way in); otherwise as the client gave them.
ClientVector FromStoredVectors(const VectorCollection& c, const StoredDocument& doc, bool unit_length = false);

// The vector `use` ("" the unnamed one) of stored point `id` as a client
// reads it (Cosine at unit length): NotFound for no such point,
// InvalidArgument for a name not declared or a vector the point lacks.
Result<std::vector<float>> StoredVector(const VectorCollection& c, const std::string& id, const std::string& use);

// A search by a client's vector: the raw query halves and the mode that
// scores them.
struct VectorQuery {
  std::vector<float> hs, rw;
  QueryMode mode = QueryMode::kFused;
  double norm2 = 0;  // |q|^2 of a plain query (Euclid distances)
  size_t slot = 0;   // plain: the declared vector searched (0 the first)
};
// `use` names the vector searched: "" (the unnamed one, or fused), a
// declared name, "hs" or "rw"; InvalidArgument for a size or name this
// collection does not take.
Result<VectorQuery> ToVectorQuery(const VectorCollection& c, const ClientVector& v, const std::string& use);
// Searches `c` by a client's vector query: the query's mode (unless
// `options` asks hybrid) and the alpha its layout needs; a plain
// collection's points that lack the searched vector are left out.
Result<std::vector<SearchHit>> SearchByVectors(const VectorCollection& c, const VectorQuery& query, SearchSpec options,
                                               SearchInfo* info = nullptr);
// The distance of the vector a query searches (Cosine for the model's).
Distance QueryDistance(const VectorCollection& c, const VectorQuery& q);
// The score a client sees for a hit's score under `alpha` (the search's):
// a plain Euclid vector reports the distance (smaller is nearer); a fused
// search, which ranks by cos_HS + alpha * cos_RW, that score over
// 1 + |alpha|, a cosine in [-1, 1] as a Cosine collection's clients expect;
// every other, the score itself.
double ClientScore(const VectorCollection& c, const VectorQuery& q, double score, double alpha);
// Whether a larger client score is better (false for Euclid distances).
bool HigherIsBetter(const VectorCollection& c, const VectorQuery& q);

// A stored point as PointSimilarity compares it under a query `q`, computed
// once per point: the standardized halves the query's mode scores (a plain
// Dot or Euclid vector as given).
struct ComparablePoint {
  std::vector<float> hs, rw;
};
ComparablePoint Comparable(const VectorCollection& c, const VectorQuery& q, const StoredDocument& doc);
// The similarity between two points that a search like `q` by one of them
// would rank the other with (MMR's diversity term): cos_HS + alpha * cos_RW,
// cos_HS or cos_RW by q's mode for model vectors; the cosine, dot product or
// minus the squared distance (Qdrant's core similarity) of the searched
// vector for plain ones.
double PointSimilarity(const VectorCollection& c, const VectorQuery& q, const ComparablePoint& a,
                       const ComparablePoint& b, float alpha);

// A point's text from its payload: the string under the schema's text key,
// or by default "content", else "page_content", else the "text" of the JSON
// string "_node_content"; "" when there is none.
std::string PayloadText(const VectorSchema& schema, const nlohmann::json& payload);

}  // namespace moeedb
