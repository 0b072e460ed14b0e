#include "database/client_vectors.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace moeedb {

using json = nlohmann::json;

namespace {

Status CheckFinite(const std::vector<float>& v, const std::string& what) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      return Status::InvalidArgument(what + " component " + std::to_string(i) + " is not a finite number");
  return Status::OK();
}

Status CheckSize(const std::vector<float>& v, size_t want, const std::string& what) {
  if (v.size() != want)
    return Status::InvalidArgument(what + " has " + std::to_string(v.size()) + " components; this collection takes " +
                                   std::to_string(want));
  return CheckFinite(v, what);
}

double Dot(const float* a, const float* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// The raw vectors whose standardized images are the halves of `fused`.
void Unfuse(const VectorCollection& c, const std::vector<float>& fused, std::vector<float>* hs, std::vector<float>* rw) {
  hs->resize(c.dim_hs());
  rw->resize(c.dim_rw());
  // Invert wants unit-length halves (Apply's image); scale each first.
  auto half = [](const float* in, size_t n) {
    std::vector<float> u(in, in + n);
    const double norm = std::sqrt(Dot(in, in, n));
    if (norm > 0)
      for (float& x : u) x = static_cast<float>(x / norm);
    return u;
  };
  const auto uh = half(fused.data(), c.dim_hs()), ur = half(fused.data() + c.dim_hs(), c.dim_rw());
  c.standardizer_hs().Invert(uh.data(), hs->data());
  c.standardizer_rw().Invert(ur.data(), rw->data());
}

}  // namespace

Result<CollectionOptions> PlainCollectionOptions(const VectorSchema& schema) {
  if (schema.kind != VectorKind::kPlain || schema.size == 0)
    return Status::InvalidArgument("a plain collection needs a positive vector size");
  CollectionOptions o;
  o.dim_hs = schema.size;
  o.dim_rw = 1;  // the Euclid term, or 0 (client_vectors.h)
  const bool cosine = schema.distance == Distance::kCosine;
  o.std_hs_json = (cosine ? Standardizer::Identity(schema.size) : Standardizer::Raw(schema.size)).ToJson();
  o.std_rw_json = Standardizer::Raw(1).ToJson();
  o.default_alpha = 1.0f;
  MOEEDB_ASSIGN_OR_RETURN(o.info_json, schema.RecordIn("{}"));
  return o;
}

Status ToStoredVectors(const VectorCollection& c, const ClientVector& v, StoredDocument* doc) {
  const VectorSchema& s = c.schema();
  if (s.kind == VectorKind::kPlain) {
    if (!v.hs.empty() || !v.rw.empty())
      return Status::InvalidArgument("this collection has one unnamed vector of size " + std::to_string(s.size) +
                                     "; named vectors (hs, rw) belong to collections of the served model");
    MOEEDB_RETURN_IF_ERROR(CheckSize(v.unnamed, s.size, "the vector"));
    const double n2 = Dot(v.unnamed.data(), v.unnamed.data(), v.unnamed.size());
    const float aux = s.distance == Distance::kEuclid ? static_cast<float>(-n2 / 2) : 0.0f;
    if (!std::isfinite(aux)) return Status::InvalidArgument("the vector's squared length overflows a float");
    doc->hs = v.unnamed;
    doc->rw = {aux};
    return Status::OK();
  }
  const size_t fused = c.dim_hs() + c.dim_rw();
  if (!v.unnamed.empty()) {
    if (!v.hs.empty() || !v.rw.empty()) return Status::InvalidArgument("give either one unnamed vector or named hs and rw");
    MOEEDB_RETURN_IF_ERROR(CheckSize(v.unnamed, fused, "the fused vector"));
    Unfuse(c, v.unnamed, &doc->hs, &doc->rw);
    return Status::OK();
  }
  if (v.hs.empty() || v.rw.empty())
    return Status::InvalidArgument("a point needs both hs (" + std::to_string(c.dim_hs()) + ") and rw (" +
                                   std::to_string(c.dim_rw()) + "): they come from one forward pass");
  MOEEDB_RETURN_IF_ERROR(CheckSize(v.hs, c.dim_hs(), "vector 'hs'"));
  MOEEDB_RETURN_IF_ERROR(CheckSize(v.rw, c.dim_rw(), "vector 'rw'"));
  doc->hs = v.hs;
  doc->rw = v.rw;
  return Status::OK();
}

ClientVector FromStoredVectors(const VectorCollection& c, const StoredDocument& doc) {
  ClientVector out;
  const VectorSchema& s = c.schema();
  if (s.kind == VectorKind::kPlain) {
    out.unnamed = doc.hs;
  } else if (s.kind == VectorKind::kFused) {
    if (doc.hs.size() != c.dim_hs() || doc.rw.size() != c.dim_rw()) return out;
    out.unnamed.resize(c.dim_hs() + c.dim_rw());
    c.standardizer_hs().Apply(doc.hs.data(), out.unnamed.data());
    c.standardizer_rw().Apply(doc.rw.data(), out.unnamed.data() + c.dim_hs());
  } else {
    out.hs = doc.hs;
    out.rw = doc.rw;
  }
  return out;
}

Result<VectorQuery> ToVectorQuery(const VectorCollection& c, const ClientVector& v, const std::string& use) {
  const VectorSchema& s = c.schema();
  VectorQuery q;
  if (s.kind == VectorKind::kPlain) {
    if (!use.empty()) return Status::InvalidArgument("vector '" + use + "' does not exist: this collection has one unnamed vector");
    if (!v.hs.empty() || !v.rw.empty()) return Status::InvalidArgument("this collection has one unnamed vector, not hs and rw");
    MOEEDB_RETURN_IF_ERROR(CheckSize(v.unnamed, s.size, "the query vector"));
    q.hs = v.unnamed;
    q.rw = {s.distance == Distance::kEuclid ? 1.0f : 0.0f};
    q.norm2 = Dot(v.unnamed.data(), v.unnamed.data(), v.unnamed.size());
    return q;
  }
  if (!use.empty() && use != "hs" && use != "rw")
    return Status::InvalidArgument("vector '" + use + "' does not exist; the vectors are hs and rw");
  if (!v.unnamed.empty()) {
    // An unnamed vector under `using`: that half alone, given raw.
    if (use == "hs" || use == "rw") {
      ClientVector named;
      (use == "hs" ? named.hs : named.rw) = v.unnamed;
      return ToVectorQuery(c, named, use);
    }
    MOEEDB_RETURN_IF_ERROR(CheckSize(v.unnamed, c.dim_hs() + c.dim_rw(), "the fused query vector"));
    Unfuse(c, v.unnamed, &q.hs, &q.rw);
    return q;
  }
  if (!v.hs.empty()) MOEEDB_RETURN_IF_ERROR(CheckSize(v.hs, c.dim_hs(), "vector 'hs'"));
  if (!v.rw.empty()) MOEEDB_RETURN_IF_ERROR(CheckSize(v.rw, c.dim_rw(), "vector 'rw'"));
  q.hs = v.hs.empty() ? std::vector<float>(c.dim_hs(), 0.0f) : v.hs;
  q.rw = v.rw.empty() ? std::vector<float>(c.dim_rw(), 0.0f) : v.rw;
  if (use == "hs" || (use.empty() && v.rw.empty())) {
    if (v.hs.empty()) return Status::InvalidArgument("give vector 'hs' to search hs");
    q.mode = QueryMode::kHs;
  } else if (use == "rw" || (use.empty() && v.hs.empty())) {
    if (v.rw.empty()) return Status::InvalidArgument("give vector 'rw' to search rw");
    q.mode = QueryMode::kRw;
  }
  return q;
}

double ClientScore(const VectorCollection& c, const VectorQuery& q, double score) {
  if (c.schema().kind == VectorKind::kPlain && c.schema().distance == Distance::kEuclid)
    return std::sqrt(std::max(0.0, q.norm2 - 2 * score));
  return score;
}

bool HigherIsBetter(const VectorCollection& c) {
  return !(c.schema().kind == VectorKind::kPlain && c.schema().distance == Distance::kEuclid);
}

ComparablePoint Comparable(const VectorCollection& c, const StoredDocument& doc) {
  ComparablePoint p;
  const VectorSchema& s = c.schema();
  auto image = [](const Standardizer& st, const std::vector<float>& x) {
    if (x.size() != st.dim()) return std::vector<float>();
    std::vector<float> u(x.size());
    st.Apply(x.data(), u.data());
    return u;
  };
  if (s.kind == VectorKind::kPlain && s.distance != Distance::kCosine) {
    p.hs = doc.hs;
    return p;
  }
  p.hs = image(c.standardizer_hs(), doc.hs);
  if (s.kind != VectorKind::kPlain) p.rw = image(c.standardizer_rw(), doc.rw);
  return p;
}

double PointSimilarity(const VectorCollection& c, const ComparablePoint& a, const ComparablePoint& b, float alpha) {
  const VectorSchema& s = c.schema();
  const size_t n = std::min(a.hs.size(), b.hs.size());
  if (s.kind == VectorKind::kPlain && s.distance == Distance::kEuclid) {
    double d2 = 0;
    for (size_t i = 0; i < n; ++i) d2 += (static_cast<double>(a.hs[i]) - b.hs[i]) * (static_cast<double>(a.hs[i]) - b.hs[i]);
    return -std::sqrt(d2);
  }
  const double hs = Dot(a.hs.data(), b.hs.data(), n);
  if (s.kind == VectorKind::kPlain) return hs;  // the cosine (unit images) or the dot product
  return hs + alpha * Dot(a.rw.data(), b.rw.data(), std::min(a.rw.size(), b.rw.size()));
}

std::string PayloadText(const VectorSchema& schema, const json& payload) {
  if (!payload.is_object()) return "";
  if (!schema.text_key.empty()) {
    auto it = payload.find(schema.text_key);
    return it != payload.end() && it->is_string() ? it->get<std::string>() : "";
  }
  auto content = payload.find("content");
  if (content != payload.end() && content->is_string()) return content->get<std::string>();
  auto node = payload.find("_node_content");
  if (node != payload.end() && node->is_string()) {
    const json n = json::parse(node->get<std::string>(), nullptr, false);
    if (n.is_object() && n.contains("text") && n["text"].is_string()) return n["text"].get<std::string>();
  }
  return "";
}

}  // namespace moeedb
