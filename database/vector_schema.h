// VectorSchema: how a collection's points carry vectors to and from the
// client, recorded in the collection's info ("vectors"). Every point keeps
// raw HS and RW vectors in the store (store.h); the schema says what a
// client's own vectors are:
//   model  named "hs" and "rw" vectors of the model's sizes, kept as given
//          (the default; Documents are embedded by moeedb as always);
//   fused  one unnamed vector of the model's fused size, [z(hs)/|.|; z(rw)/|.|]
//          (what moeedb's /v1/embeddings returns); named hs/rw are taken too;
//   plain  one vector of a size no served model produces: no model runs,
//          vectors are stored and searched as given by Cosine, Dot or Euclid.
// text_key names the payload field whose string is the point's text (what
// the lexical index reads); empty: "content" (LangChain), then the "text"
// inside the JSON string "_node_content" (LlamaIndex).
#pragma once

#include <cstddef>
#include <string>

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

struct VectorSchema {
  VectorKind kind = VectorKind::kModel;
  size_t size = 0;                     // plain: the vector's size
  Distance distance = Distance::kCosine;  // plain: how vectors are compared
  std::string text_key;                // "": content, then _node_content's text

  // The "vectors" value of a collection's info, and back (absent: model).
  std::string ToJson() const;
  static Result<VectorSchema> FromInfo(const std::string& info_json);
  // `info_json` with this schema recorded under "vectors".
  Result<std::string> RecordIn(const std::string& info_json) const;
};

}  // namespace moeedb
