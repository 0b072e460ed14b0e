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
// A plain collection of one vector keeps x as HS = x and a one-component
// RW: 0 for Cosine and Dot, -|x|^2/2 for Euclid. A query q searches with
// RW = [1] and alpha 1 (Euclid) so the dual index's fused inner product is
// q.x - |x|^2/2 = (|q|^2 - d^2)/2: the Euclidean ranking, with no metric of
// the index's own; ClientScore turns it back into the distance d. A plain
// collection of two vectors keeps each in a slot of its own (the first in
// HS, the second in RW), a Euclid one with its -|x|^2/2 appended, and
// searches one slot at a time (QueryMode kHs or kRw) with [q, 1].
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "database/vector_collection.h"

namespace moeedb {

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
// collection takes, a non-finite component) and nothing changed otherwise.
Status ToStoredVectors(const VectorCollection& c, const ClientVector& v, StoredDocument* doc);
// What a client reads back for a stored point: its vectors under their
// declared names (a name "" as `unnamed`; fused: the two standardized
// halves; plain: x) or, for a model collection, hs and rw. `unit_length`:
// Cosine vectors scaled to length 1, as Qdrant answers them (it normalises
// them on the way in); otherwise as the client gave them.
ClientVector FromStoredVectors(const VectorCollection& c, const StoredDocument& doc, bool unit_length = false);

// A search by a client's vector: the raw query halves and the mode that
// scores them.
struct VectorQuery {
  std::vector<float> hs, rw;
  QueryMode mode = QueryMode::kFused;
  double norm2 = 0;  // |q|^2 of a plain query (Euclid distances)
  size_t slot = 0;   // plain: the declared vector searched (0 first, 1 second)
};
// `use` names the vector searched: "" (the unnamed one, or fused), a
// declared name, "hs" or "rw"; InvalidArgument for a size or name this
// collection does not take.
Result<VectorQuery> ToVectorQuery(const VectorCollection& c, const ClientVector& v, const std::string& use);
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
// -distance of the searched vector for plain ones.
double PointSimilarity(const VectorCollection& c, const VectorQuery& q, const ComparablePoint& a,
                       const ComparablePoint& b, float alpha);

// A point's text from its payload: the string under the schema's text key,
// or by default "content", else "page_content", else the "text" of the JSON
// string "_node_content"; "" when there is none.
std::string PayloadText(const VectorSchema& schema, const nlohmann::json& payload);

}  // namespace moeedb
