#include "database/client_vectors.h"

#include <algorithm>
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

std::vector<float> UnitLength(std::vector<float> v) {
  const double norm = std::sqrt(Dot(v.data(), v.data(), v.size()));
  if (norm > 0)
    for (float& x : v) x = static_cast<float>(x / norm);
  return v;
}

// The raw vectors whose standardized images are the halves of `fused`.
void Unfuse(const VectorCollection& c, const std::vector<float>& fused, std::vector<float>* hs, std::vector<float>* rw) {
  hs->resize(c.dim_hs());
  rw->resize(c.dim_rw());
  // Invert wants unit-length halves (Apply's image); scale each first.
  const auto uh = UnitLength({fused.begin(), fused.begin() + c.dim_hs()});
  const auto ur = UnitLength({fused.begin() + c.dim_hs(), fused.end()});
  c.standardizer_hs().Invert(uh.data(), hs->data());
  c.standardizer_rw().Invert(ur.data(), rw->data());
}

std::string Quoted(const std::string& name) { return "'" + name.substr(0, 80) + "'"; }

// The client's vector under `name` ("" the unnamed one); nullptr when not given.
const std::vector<float>* Given(const ClientVector& v, const std::string& name) {
  if (name.empty()) return v.unnamed.empty() ? nullptr : &v.unnamed;
  auto it = v.named.find(name);
  return it == v.named.end() ? nullptr : &it->second;
}

// InvalidArgument for a vector the client gave under a name this collection does not declare.
Status RefuseUndeclared(const VectorCollection& c, const ClientVector& v) {
  const VectorSchema& s = c.schema();
  // A fused or model collection takes the fused vector unnamed too.
  if (!v.unnamed.empty() && s.kind == VectorKind::kPlain) MOEEDB_RETURN_IF_ERROR(s.Find("").status());
  for (const auto& [name, x] : v.named) MOEEDB_RETURN_IF_ERROR(s.Find(name).status());
  if (s.kind == VectorKind::kPlain && (!v.hs.empty() || !v.rw.empty()))
    return Status::InvalidArgument("this collection's vectors are the client's own; named vectors hs and rw belong to "
                                   "collections of the served model");
  return Status::OK();
}

// Where a plain collection's declared vector sits in the stored HS row:
// `size` components from `offset`, then Euclid's term -|x|^2/2.
struct Segment {
  NamedVector v;
  size_t offset = 0;
  size_t width() const { return v.size + (v.distance == Distance::kEuclid ? 1 : 0); }
};

std::vector<Segment> Segments(const VectorSchema& s) {
  std::vector<Segment> out;
  size_t at = 0;
  for (const NamedVector& v : s.Vectors(0)) {
    out.push_back({v, at});
    at += out.back().width();
  }
  return out;
}

// A collection of one Cosine vector keeps it as given (clients such as
// Chroma read back what they wrote) and lets the HS standardizer normalise
// it; a Cosine vector beside others is kept at unit length, as Qdrant keeps
// it, since one row's normalisation cannot be per segment.
bool LoneCosine(const VectorSchema& s) { return s.rest.empty() && s.distance == Distance::kCosine; }

// Whether a stored point of a plain collection carries its vector i (the
// RW row holds 1 for each declared vector the point lacks; VectorSchema::CarriedBy).
bool Carries(const StoredDocument& doc, size_t i) { return i < doc.rw.size() && doc.rw[i] < 0.5f; }

}  // namespace

Result<CollectionOptions> PlainCollectionOptions(const VectorSchema& schema) {
  if (schema.kind != VectorKind::kPlain || (schema.size == 0 && !schema.named))
    return Status::InvalidArgument("a plain collection needs a positive vector size");
  CollectionOptions o;
  for (const Segment& seg : Segments(schema)) o.dim_hs += seg.width();
  o.dim_rw = schema.Vectors(0).size();  // one absence flag per declared vector
  // No vectors at all: a row of one 0 and one set flag, which no query reaches.
  o.dim_hs = std::max<size_t>(o.dim_hs, 1);
  o.dim_rw = std::max<size_t>(o.dim_rw, 1);
  o.std_hs_json = (LoneCosine(schema) ? Standardizer::Identity(o.dim_hs) : Standardizer::Raw(o.dim_hs)).ToJson();
  o.std_rw_json = Standardizer::Raw(o.dim_rw).ToJson();
  o.default_alpha = 1.0f;
  MOEEDB_ASSIGN_OR_RETURN(o.info_json, schema.RecordIn("{}"));
  return o;
}

Status ToStoredVectors(const VectorCollection& c, const ClientVector& v, StoredDocument* doc) {
  const VectorSchema& s = c.schema();
  MOEEDB_RETURN_IF_ERROR(RefuseUndeclared(c, v));
  if (s.kind == VectorKind::kPlain) {
    std::vector<float> hs(c.dim_hs(), 0.0f), rw(c.dim_rw(), 1.0f);
    const std::vector<Segment> segments = Segments(s);
    for (size_t i = 0; i < segments.size(); ++i) {
      const Segment& seg = segments[i];
      const std::vector<float>* given = Given(v, seg.v.name);
      if (given == nullptr) continue;  // a point may lack any of its vectors
      MOEEDB_RETURN_IF_ERROR(CheckSize(*given, seg.v.size, seg.v.name.empty() ? "the vector" : "vector " + Quoted(seg.v.name)));
      const std::vector<float> x =
          seg.v.distance == Distance::kCosine && !LoneCosine(s) ? UnitLength(*given) : *given;
      std::copy(x.begin(), x.end(), hs.begin() + seg.offset);
      if (seg.v.distance == Distance::kEuclid) {
        const float term = static_cast<float>(-Dot(x.data(), x.data(), x.size()) / 2);
        if (!std::isfinite(term)) return Status::InvalidArgument("the vector's squared length overflows a float");
        hs[seg.offset + seg.v.size] = term;
      }
      rw[i] = 0.0f;
    }
    doc->hs = std::move(hs);
    doc->rw = std::move(rw);
    return Status::OK();
  }
  const size_t fused = c.dim_hs() + c.dim_rw();
  const std::vector<float>* whole = s.kind == VectorKind::kFused ? Given(v, s.name) : nullptr;
  if (whole == nullptr && !v.unnamed.empty()) whole = &v.unnamed;  // a model collection takes the fused vector too
  if (whole != nullptr) {
    if (!v.hs.empty() || !v.rw.empty()) return Status::InvalidArgument("give either the fused vector or named hs and rw");
    MOEEDB_RETURN_IF_ERROR(CheckSize(*whole, fused, "the fused vector"));
    Unfuse(c, *whole, &doc->hs, &doc->rw);
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

ClientVector FromStoredVectors(const VectorCollection& c, const StoredDocument& doc, bool unit_length) {
  ClientVector out;
  const VectorSchema& s = c.schema();
  if (doc.hs.size() != c.dim_hs() || doc.rw.size() != c.dim_rw()) return out;
  auto put = [&](const std::string& name, std::vector<float> x) {
    (name.empty() ? out.unnamed : out.named[name]) = std::move(x);
  };
  if (s.kind == VectorKind::kPlain) {
    const std::vector<Segment> segments = Segments(s);
    for (size_t i = 0; i < segments.size(); ++i) {
      if (!Carries(doc, i)) continue;
      const Segment& seg = segments[i];
      std::vector<float> x(doc.hs.begin() + seg.offset, doc.hs.begin() + seg.offset + seg.v.size);
      put(seg.v.name, unit_length && seg.v.distance == Distance::kCosine ? UnitLength(std::move(x)) : x);
    }
  } else if (s.kind == VectorKind::kFused) {
    std::vector<float> x(c.dim_hs() + c.dim_rw());
    c.standardizer_hs().Apply(doc.hs.data(), x.data());
    c.standardizer_rw().Apply(doc.rw.data(), x.data() + c.dim_hs());
    put(s.name, unit_length ? UnitLength(std::move(x)) : x);
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
    if (!v.hs.empty() || !v.rw.empty() || !v.named.empty())
      return Status::InvalidArgument("give the query as one vector and name the vector searched by 'using'");
    MOEEDB_ASSIGN_OR_RETURN(q.slot, s.Find(use));
    const Segment seg = Segments(s)[q.slot];
    MOEEDB_RETURN_IF_ERROR(CheckSize(v.unnamed, seg.v.size, "the query vector"));
    q.norm2 = Dot(v.unnamed.data(), v.unnamed.data(), v.unnamed.size());
    const std::vector<float> x = seg.v.distance == Distance::kCosine ? UnitLength(v.unnamed) : v.unnamed;
    q.hs.assign(c.dim_hs(), 0.0f);
    std::copy(x.begin(), x.end(), q.hs.begin() + seg.offset);
    if (seg.v.distance == Distance::kEuclid) q.hs[seg.offset + seg.v.size] = 1.0f;
    q.rw.assign(c.dim_rw(), 0.0f);
    q.rw[q.slot] = kLacksVectorScore;  // alpha 1: a point without the vector ranks after every other
    q.mode = QueryMode::kFused;
    return q;
  }
  // The fused vector under its declared name: searched as "".
  const std::string half = s.kind == VectorKind::kFused && !s.name.empty() && use == s.name ? "" : use;
  if (!half.empty() && half != "hs" && half != "rw") return s.Find(use).status();
  if (half.empty() && s.kind == VectorKind::kFused && s.named && s.name != use) return s.Find(use).status();
  if (!v.named.empty()) return Status::InvalidArgument("give the query as one vector and name the vector searched by 'using'");
  if (!v.unnamed.empty()) {
    // An unnamed vector under `using`: that half alone, given raw.
    if (half == "hs" || half == "rw") {
      ClientVector named;
      (half == "hs" ? named.hs : named.rw) = v.unnamed;
      return ToVectorQuery(c, named, half);
    }
    MOEEDB_RETURN_IF_ERROR(CheckSize(v.unnamed, c.dim_hs() + c.dim_rw(), "the fused query vector"));
    Unfuse(c, v.unnamed, &q.hs, &q.rw);
    return q;
  }
  if (!v.hs.empty()) MOEEDB_RETURN_IF_ERROR(CheckSize(v.hs, c.dim_hs(), "vector 'hs'"));
  if (!v.rw.empty()) MOEEDB_RETURN_IF_ERROR(CheckSize(v.rw, c.dim_rw(), "vector 'rw'"));
  q.hs = v.hs.empty() ? std::vector<float>(c.dim_hs(), 0.0f) : v.hs;
  q.rw = v.rw.empty() ? std::vector<float>(c.dim_rw(), 0.0f) : v.rw;
  if (half == "hs" || (half.empty() && v.rw.empty())) {
    if (v.hs.empty()) return Status::InvalidArgument("give vector 'hs' to search hs");
    q.mode = QueryMode::kHs;
  } else if (half == "rw" || (half.empty() && v.hs.empty())) {
    if (v.rw.empty()) return Status::InvalidArgument("give vector 'rw' to search rw");
    q.mode = QueryMode::kRw;
  }
  return q;
}

Result<std::vector<float>> StoredVector(const VectorCollection& c, const std::string& id, const std::string& use) {
  if (c.schema().kind == VectorKind::kModel)
    return Status::InvalidArgument("the points of collection '" + c.name() +
                                   "' hold the served model's hs and rw, not a vector of their own to search by");
  MOEEDB_RETURN_IF_ERROR(c.schema().Find(use).status());
  MOEEDB_ASSIGN_OR_RETURN(std::optional<StoredDocument> d, c.Get(id));
  if (!d) return Status::NotFound("no point with id " + id.substr(0, 80) + " in collection '" + c.name() + "'");
  ClientVector v = FromStoredVectors(c, *d, /*unit_length=*/true);
  const std::vector<float>* x = use.empty() ? &v.unnamed : nullptr;
  if (!use.empty()) {
    auto it = v.named.find(use);
    if (it != v.named.end()) x = &it->second;
  }
  if (x == nullptr || x->empty())
    return Status::InvalidArgument("point " + id.substr(0, 80) + " has no vector " + Quoted(use));
  return *x;
}

Result<std::vector<SearchHit>> SearchByVectors(const VectorCollection& c, const VectorQuery& query, SearchSpec options,
                                               SearchInfo* info) {
  if (options.mode != QueryMode::kHybrid) options.mode = query.mode;
  if (c.schema().kind != VectorKind::kPlain) return c.Search(query.hs.data(), query.rw.data(), options, info);
  // Dense: the RW half sinks the points that lack the searched vector
  // (weight 1). Hybrid fuses each signal's own ranking, where that half is
  // no signal at all.
  options.alpha = options.mode == QueryMode::kHybrid ? 0.0f : 1.0f;
  // Hybrid's lexical list and an ANN index's candidates do not see the RW
  // half: there the points that lack the vector are filtered out before
  // they take a place in the top k.
  if (options.mode == QueryMode::kHybrid || c.layout().index.hs.kind != IndexKind::kFlat) {
    const auto declared = c.schema().Vectors(0);
    if (query.slot < declared.size()) {
      MOEEDB_RETURN_IF_ERROR(options.NarrowFilter(json{{"$has_vector", declared[query.slot].name}}.dump()));
    }
  }
  MOEEDB_ASSIGN_OR_RETURN(std::vector<SearchHit> hits, c.Search(query.hs.data(), query.rw.data(), options, info));
  hits.erase(std::remove_if(hits.begin(), hits.end(), [](const SearchHit& h) { return LacksVector(h.score_rw); }),
             hits.end());
  return hits;
}

Distance QueryDistance(const VectorCollection& c, const VectorQuery& q) {
  const VectorSchema& s = c.schema();
  if (s.kind != VectorKind::kPlain) return Distance::kCosine;
  return q.slot < 1 + s.rest.size() ? Segments(s)[q.slot].v.distance : s.distance;
}

double ClientScore(const VectorCollection& c, const VectorQuery& q, double score, double alpha) {
  if (QueryDistance(c, q) == Distance::kEuclid) return std::sqrt(std::max(0.0, q.norm2 - 2 * score));
  if (c.schema().kind != VectorKind::kPlain && q.mode == QueryMode::kFused) return score / (1 + std::fabs(alpha));
  return score;
}

bool HigherIsBetter(const VectorCollection& c, const VectorQuery& q) { return QueryDistance(c, q) != Distance::kEuclid; }

ComparablePoint Comparable(const VectorCollection& c, const VectorQuery& q, const StoredDocument& doc) {
  ComparablePoint p;
  const VectorSchema& s = c.schema();
  auto image = [](const Standardizer& st, const std::vector<float>& x) {
    if (x.size() != st.dim()) return std::vector<float>();
    std::vector<float> u(x.size());
    st.Apply(x.data(), u.data());
    return u;
  };
  if (s.kind == VectorKind::kPlain) {
    // The searched vector alone, as given or at unit length (Cosine).
    const Segment seg = Segments(s)[q.slot];
    if (doc.hs.size() != c.dim_hs() || !Carries(doc, q.slot)) return p;
    std::vector<float> x(doc.hs.begin() + seg.offset, doc.hs.begin() + seg.offset + seg.v.size);
    p.hs = seg.v.distance == Distance::kCosine ? UnitLength(std::move(x)) : std::move(x);
    return p;
  }
  if (q.mode != QueryMode::kRw) p.hs = image(c.standardizer_hs(), doc.hs);
  if (q.mode != QueryMode::kHs) p.rw = image(c.standardizer_rw(), doc.rw);
  return p;
}

double PointSimilarity(const VectorCollection& c, const VectorQuery& q, const ComparablePoint& a,
                       const ComparablePoint& b, float alpha) {
  const size_t n = std::min(a.hs.size(), b.hs.size());
  if (c.schema().kind == VectorKind::kPlain && QueryDistance(c, q) == Distance::kEuclid) {
    double d2 = 0;
    for (size_t i = 0; i < n; ++i) d2 += (static_cast<double>(a.hs[i]) - b.hs[i]) * (static_cast<double>(a.hs[i]) - b.hs[i]);
    return -d2;  // Qdrant's core similarity for Euclid: minus the squared distance
  }
  const double hs = Dot(a.hs.data(), b.hs.data(), n);
  if (c.schema().kind == VectorKind::kPlain) return hs;  // the cosine (unit images) or the dot product
  const double rw = Dot(a.rw.data(), b.rw.data(), std::min(a.rw.size(), b.rw.size()));
  if (q.mode == QueryMode::kHs) return hs;
  if (q.mode == QueryMode::kRw) return rw;
  return hs + alpha * rw;
}

std::string PayloadText(const VectorSchema& schema, const json& payload) {
  if (!payload.is_object()) return "";
  if (!schema.text_key.empty()) {
    auto it = payload.find(schema.text_key);
    return it != payload.end() && it->is_string() ? it->get<std::string>() : "";
  }
  for (const char* key : {"content", "page_content"}) {
    auto it = payload.find(key);
    if (it != payload.end() && it->is_string()) return it->get<std::string>();
  }
  auto node = payload.find("_node_content");
  if (node != payload.end() && node->is_string()) {
    const json n = json::parse(node->get<std::string>(), nullptr, false);
    if (n.is_object() && n.contains("text") && n["text"].is_string()) return n["text"].get<std::string>();
  }
  return "";
}

}  // namespace moeedb
