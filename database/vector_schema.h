// VectorSchema: how a collection's points carry vectors to and from the
// client, recorded in the collection's info ("vectors"). Every point keeps
// raw HS and RW vectors in the store (store.h); the schema says what a
// client's own vectors are:
//   model  named "hs" and "rw" vectors of the model's sizes, kept as given
//          (the default; Documents are embedded by moeedb as always);
//   fused  one vector of the model's fused size and Cosine, [z(hs)/|.|;
//          z(rw)/|.|] (what moeedb's /v1/embeddings returns), unnamed or
//          under a name of the client's; named hs/rw are taken too;
//   plain  up to kMaxClientVectors vectors of the client's (any names, each
//          its own size and distance, each optional per point): no model
//          runs, vectors are stored and searched by Cosine, Dot or Euclid,
//          each in a segment of the stored HS row (client_vectors.h).
// A name "" is Qdrant's unnamed default vector; `named` says whether the
// client declared its vectors as a map of names ({"": {...}} included), so
// that a collection's config is answered in the form it was created with.
// text_key names the payload field whose string is the point's text (what
// the lexical index reads); empty: "content" (LangChain.js, Haystack), then
// "page_content" (Python LangChain), then the "text" inside the JSON string
// "_node_content" (LlamaIndex).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/enum_table.h"
#include "base/status.h"

namespace moeedb {

enum class VectorKind { kModel, kFused, kPlain };
inline constexpr EnumTable<VectorKind, 3> kVectorKinds{
    "vector kind", {{{VectorKind::kModel, "model"}, {VectorKind::kFused, "fused"}, {VectorKind::kPlain, "plain"}}}};

// Qdrant's spellings, which clients send.
enum class Distance { kCosine, kDot, kEuclid };
inline constexpr EnumTable<Distance, 3> kDistances{
    "distance", {{{Distance::kCosine, "Cosine"}, {Distance::kDot, "Dot"}, {Distance::kEuclid, "Euclid"}}}};

// Most vectors a collection of the client's own vectors declares (each a
// segment of the stored HS row, each searched alone).
inline constexpr size_t kMaxClientVectors = 64;

// One vector a client declares: its name ("" the unnamed one), size and distance.
struct NamedVector {
  std::string name;
  size_t size = 0;
  Distance distance = Distance::kCosine;
};

struct VectorSchema {
  VectorKind kind = VectorKind::kModel;
  size_t size = 0;                        // plain: the first vector's size (0: no vectors at all)
  Distance distance = Distance::kCosine;  // plain: how the first vector is compared
  std::string text_key;                   // "": content, page_content, then _node_content's text
  std::string name;                       // fused and plain: the first vector's name ("" unnamed)
  bool named = false;                     // declared as a map of names
  std::vector<NamedVector> rest;          // plain: the vectors after the first, in segment order

  // The vectors a client declared, as a schema: none (or hs and rw of the
  // model's sizes) a model collection, except an empty map of names
  // (`named`), a plain collection of no vectors (points of payload only); one of `fused_size` with Cosine a
  // fused one; anything else plain. InvalidArgument naming what moeedb does
  // not hold (more than kMaxClientVectors, a size of 0 or over 65536, a name
  // twice, hs/rw of other sizes or beside other names).
  static Result<VectorSchema> Declared(const std::vector<NamedVector>& vectors, bool named, size_t dim_hs,
                                       size_t dim_rw);
  // The vectors as the client declared them (empty for a model collection).
  std::vector<NamedVector> Vectors(size_t fused_size) const;
  // Which declared vector `name` is (0 the first, in declaration order);
  // InvalidArgument naming the ones there are.
  Result<size_t> Find(const std::string& name) const;

  // The names of the vectors a stored point carries, given its RW row: a
  // plain collection's holds one flag per declared vector, set where the
  // point lacks it (client_vectors.h); every point of a model or fused
  // collection carries them all.
  std::vector<std::string> CarriedBy(const std::vector<float>& rw) const;
  // The "vectors" value of a collection's info, and back (absent: model).
  // A plain schema recorded by a moeedb before segments (two fixed slots)
  // is NotSupported: its rows are laid out otherwise.
  std::string ToJson() const;
  static Result<VectorSchema> FromInfo(const std::string& info_json);
  // `info_json` with this schema recorded under "vectors".
  Result<std::string> RecordIn(const std::string& info_json) const;
};

}  // namespace moeedb
