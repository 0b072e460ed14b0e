// Client vectors (client_vectors.h): a fused vector round-trips to raw
// vectors that search exactly like the originals; plain Cosine, Dot and
// Euclid collections against brute force computed here; bad vectors refused
// with nothing stored; the payload's text; metadata filters on nested keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "database/client_vectors.h"
#include "index/metadata_filter.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

struct Env {
  test::TempDir dir;
  std::unique_ptr<Store> store;
  Env() { store = std::move(Store::Open(dir / "db")).value(); }
};

std::vector<float> Random(std::mt19937* rng, size_t n, float offset) {
  std::normal_distribution<float> g(0, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = offset + 2 * g(*rng);
  return v;
}

// Per-feature statistics of `rows` (mean, 1/std) written here, not by Standardizer::Fit.
std::string StatsJson(const std::vector<std::vector<float>>& rows) {
  const size_t d = rows[0].size();
  std::vector<double> mean(d), var(d);
  for (const auto& r : rows) for (size_t j = 0; j < d; ++j) mean[j] += r[j] / rows.size();
  for (const auto& r : rows) for (size_t j = 0; j < d; ++j) var[j] += (r[j] - mean[j]) * (r[j] - mean[j]) / (rows.size() - 1);
  std::vector<float> m(d), inv(d);
  for (size_t j = 0; j < d; ++j) m[j] = mean[j], inv[j] = 1.0 / (std::sqrt(var[j]) + 1e-8);
  return json{{"mean", m}, {"inv_std", inv}}.dump();
}

// z-score then unit length, as the method defines the fused halves.
std::vector<float> Image(const std::vector<float>& x, const std::string& stats) {
  const json s = json::parse(stats);
  std::vector<float> out(x.size());
  double n = 0;
  for (size_t j = 0; j < x.size(); ++j) {
    out[j] = (x[j] - s["mean"][j].get<float>()) * s["inv_std"][j].get<float>();
    n += out[j] * out[j];
  }
  for (auto& v : out) v /= std::sqrt(n);
  return out;
}

TEST(ClientVectors, FusedVectorsSearchLikeTheirRawVectors) {
  Env env;
  std::mt19937 rng(3);
  const size_t dh = 12, dr = 6, n = 60;
  std::vector<std::vector<float>> hs, rw;
  for (size_t i = 0; i < n; ++i) hs.push_back(Random(&rng, dh, 3)), rw.push_back(Random(&rng, dr, 20));
  CollectionOptions o;
  o.dim_hs = dh;
  o.dim_rw = dr;
  o.std_hs_json = StatsJson(hs);
  o.std_rw_json = StatsJson(rw);
  o.default_alpha = 0.7f;
  VectorSchema fused;
  fused.kind = VectorKind::kFused;
  o.info_json = fused.RecordIn("{}").value();
  auto raw = VectorCollection::Create(env.store.get(), "raw", o);
  auto cli = VectorCollection::Create(env.store.get(), "fused", o);
  ASSERT_TRUE(raw.ok() && cli.ok());
  std::vector<StoredDocument> a, b;
  for (size_t i = 0; i < n; ++i) {
    a.push_back({"p" + std::to_string(i), "", "{}", hs[i], rw[i]});
    ClientVector v;
    v.unnamed = Image(hs[i], o.std_hs_json);
    const auto r = Image(rw[i], o.std_rw_json);
    v.unnamed.insert(v.unnamed.end(), r.begin(), r.end());
    StoredDocument d{"p" + std::to_string(i), "", "{}", {}, {}};
    ASSERT_TRUE(ToStoredVectors(**cli, v, &d).ok());
    // What the client reads back is what it gave.
    const ClientVector back = FromStoredVectors(**cli, d);
    ASSERT_EQ(back.unnamed.size(), dh + dr);
    for (size_t j = 0; j < dh + dr; ++j) EXPECT_NEAR(back.unnamed[j], v.unnamed[j], 1e-5);
    b.push_back(std::move(d));
  }
  ASSERT_TRUE((*raw)->Upsert(a).ok());
  ASSERT_TRUE((*cli)->Upsert(b).ok());
  for (size_t qi : {0, 7, 31}) {
    ClientVector q;
    q.unnamed = Image(hs[qi], o.std_hs_json);
    const auto r = Image(rw[qi], o.std_rw_json);
    q.unnamed.insert(q.unnamed.end(), r.begin(), r.end());
    auto vq = ToVectorQuery(**cli, q, "");
    ASSERT_TRUE(vq.ok()) << vq.status().ToString();
    SearchSpec s;
    s.k = 10;
    auto want = (*raw)->Search(hs[qi].data(), rw[qi].data(), s);
    auto got = (*cli)->Search(vq->hs.data(), vq->rw.data(), s);
    ASSERT_TRUE(want.ok() && got.ok());
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_EQ((*got)[i].id, (*want)[i].id);
      EXPECT_NEAR((*got)[i].score, (*want)[i].score, 1e-5);
      // The score is cos_HS + alpha * cos_RW of the two fused halves.
      EXPECT_NEAR((*got)[i].score, (*got)[i].score_hs + 0.7f * (*got)[i].score_rw, 1e-5);
    }
  }
  // Wrong sizes and non-finite components: refused, nothing changed.
  StoredDocument d{"x", "", "{}", {}, {}};
  ClientVector bad;
  bad.unnamed.assign(dh + dr - 1, 0.1f);
  EXPECT_EQ(ToStoredVectors(**cli, bad, &d).code(), Status::Code::kInvalidArgument);
  bad.unnamed.assign(dh + dr, 0.1f);
  bad.unnamed[3] = NAN;
  EXPECT_EQ(ToStoredVectors(**cli, bad, &d).code(), Status::Code::kInvalidArgument);
  ClientVector half;
  half.hs.assign(dh, 1.0f);
  EXPECT_EQ(ToStoredVectors(**cli, half, &d).code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(d.hs.empty() && d.rw.empty());
}

TEST(ClientVectors, PlainCollectionsMatchBruteForce) {
  Env env;
  std::mt19937 rng(11);
  const size_t dim = 7, n = 80;
  std::vector<std::vector<float>> rows;
  for (size_t i = 0; i < n; ++i) rows.push_back(Random(&rng, dim, 0.5f));
  const auto q = Random(&rng, dim, 0.5f);
  auto dot = [](const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (size_t j = 0; j < a.size(); ++j) s += static_cast<double>(a[j]) * b[j];
    return s;
  };
  for (Distance distance : {Distance::kCosine, Distance::kDot, Distance::kEuclid}) {
    VectorSchema schema;
    schema.kind = VectorKind::kPlain;
    schema.size = dim;
    schema.distance = distance;
    auto o = PlainCollectionOptions(schema);
    ASSERT_TRUE(o.ok());
    const std::string name = kDistances.Name(distance);
    auto c = VectorCollection::Create(env.store.get(), name, *o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    std::vector<StoredDocument> docs;
    for (size_t i = 0; i < n; ++i) {
      StoredDocument d{std::to_string(i), "", "{}", {}, {}};
      ASSERT_TRUE(ToStoredVectors(**c, ClientVector{rows[i], {}, {}}, &d).ok());
      docs.push_back(std::move(d));
    }
    ASSERT_TRUE((*c)->Upsert(docs).ok());
    // Brute force, computed here.
    std::vector<std::pair<double, size_t>> truth;
    for (size_t i = 0; i < n; ++i) {
      double v = dot(q, rows[i]);
      if (distance == Distance::kCosine) v /= std::sqrt(dot(q, q) * dot(rows[i], rows[i]));
      if (distance == Distance::kEuclid) {
        double d2 = 0;
        for (size_t j = 0; j < dim; ++j) d2 += (q[j] - rows[i][j]) * (q[j] - rows[i][j]);
        v = -std::sqrt(d2);
      }
      truth.push_back({v, i});
    }
    std::sort(truth.begin(), truth.end(), [](auto& x, auto& y) { return x.first > y.first; });
    auto vq = ToVectorQuery(**c, ClientVector{q, {}, {}}, "");
    ASSERT_TRUE(vq.ok());
    SearchSpec s;
    s.k = 10;
    s.alpha = 1.0f;
    auto hits = (*c)->Search(vq->hs.data(), vq->rw.data(), s);
    ASSERT_TRUE(hits.ok()) << hits.status().ToString();
    ASSERT_EQ(hits->size(), 10u);
    for (size_t i = 0; i < 10; ++i) {
      EXPECT_EQ((*hits)[i].id, std::to_string(truth[i].second)) << name << " rank " << i;
      const double shown = ClientScore(**c, *vq, (*hits)[i].score, 1.0);
      EXPECT_NEAR(distance == Distance::kEuclid ? -shown : shown, truth[i].first, 1e-4) << name;
    }
    EXPECT_EQ(HigherIsBetter(**c, *vq), distance != Distance::kEuclid);
    // A filter on the documents' own ids (Qdrant's has_id), read from the store.
    SearchSpec by_id = s;
    ASSERT_TRUE(by_id.SetFilter(R"({"$id": {"$in": ["3", "7", "nope"]}})").ok());
    auto only = (*c)->Search(vq->hs.data(), vq->rw.data(), by_id);
    ASSERT_TRUE(only.ok());
    std::vector<std::string> ids;
    for (const auto& h : *only) ids.push_back(h.id);
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids, (std::vector<std::string>{"3", "7"}));
    // The vector comes back as given; a wrong size or named vectors are refused.
    EXPECT_EQ(FromStoredVectors(**c, docs[4]).unnamed, rows[4]);
    StoredDocument d{"x", "", "{}", {}, {}};
    EXPECT_FALSE(ToStoredVectors(**c, ClientVector{std::vector<float>(dim + 1, 1.0f), {}, {}}, &d).ok());
    EXPECT_FALSE(ToStoredVectors(**c, ClientVector{{}, rows[0], rows[0]}, &d).ok());
    EXPECT_FALSE(ToVectorQuery(**c, ClientVector{q, {}, {}}, "hs").ok());
  }
  // An ANN index needs unit rows: a Dot collection with HNSW is refused.
  VectorSchema dotted{VectorKind::kPlain, dim, Distance::kDot, ""};
  auto o = PlainCollectionOptions(dotted);
  o->index.hs.kind = IndexKind::kHnsw;
  EXPECT_FALSE(VectorCollection::Create(env.store.get(), "hnsw-dot", *o).ok());
}

// Three named vectors of the client's, each its own size and distance and
// each optional per point (what Qdrant allows): each searched alone ranks
// as brute force computed here over the points that have it, and leaves out
// those that lack it; a point reads back the vectors it has under their
// names (Cosine at unit length); a name not declared is refused with
// nothing stored.
TEST(ClientVectors, NamedVectorsSearchEachByItsOwnDistanceAndMayBeMissing) {
  Env env;
  std::mt19937 rng(11);
  const size_t n = 60;
  const std::vector<std::string> names = {"text", "image", "code"};
  const std::vector<size_t> sizes = {5, 3, 4};
  for (auto distances : {std::vector{Distance::kCosine, Distance::kEuclid, Distance::kDot},
                         std::vector{Distance::kEuclid, Distance::kDot, Distance::kCosine}}) {
    std::vector<NamedVector> declared;
    for (size_t v = 0; v < 3; ++v) declared.push_back({names[v], sizes[v], distances[v]});
    auto schema = VectorSchema::Declared(declared, true, 8, 4);
    ASSERT_TRUE(schema.ok()) << schema.status().ToString();
    ASSERT_EQ(schema->kind, VectorKind::kPlain);
    auto o = PlainCollectionOptions(*schema);
    ASSERT_TRUE(o.ok());
    const std::string name = std::string("three-") + kDistances.Name(distances[0]);
    auto c = VectorCollection::Create(env.store.get(), name, *o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    // rows[v][i]: point i's vector v; empty where the point lacks it (every
    // 4th point lacks image, every 5th code, point 0 has none at all).
    std::vector<std::vector<std::vector<float>>> rows(3);
    std::vector<StoredDocument> docs;
    for (size_t i = 0; i < n; ++i) {
      StoredDocument d{std::to_string(i), "", "{}", {}, {}};
      ClientVector v;
      for (size_t k = 0; k < 3; ++k) {
        const bool lacks = i == 0 || (k == 1 && i % 4 == 1) || (k == 2 && i % 5 == 2);
        rows[k].push_back(lacks ? std::vector<float>() : Random(&rng, sizes[k], 0.3f * (k + 1)));
        if (!lacks) v.named[names[k]] = rows[k].back();
      }
      ASSERT_TRUE(ToStoredVectors(**c, v, &d).ok());
      docs.push_back(std::move(d));
    }
    ASSERT_TRUE((*c)->Upsert(docs).ok());
    for (size_t slot = 0; slot < 3; ++slot) {
      const Distance distance = distances[slot];
      const auto q = Random(&rng, sizes[slot], 0.1f);
      std::vector<std::pair<double, size_t>> truth;
      for (size_t i = 0; i < n; ++i) {
        const auto& x = rows[slot][i];
        if (x.empty()) continue;
        double dot = 0, qq = 0, rr = 0, d2 = 0;
        for (size_t j = 0; j < q.size(); ++j)
          dot += q[j] * x[j], qq += q[j] * q[j], rr += x[j] * x[j], d2 += (q[j] - x[j]) * (q[j] - x[j]);
        truth.push_back({distance == Distance::kCosine ? dot / std::sqrt(qq * rr) : distance == Distance::kDot ? dot : -std::sqrt(d2), i});
      }
      std::sort(truth.begin(), truth.end(), [](auto& x, auto& y) { return x.first > y.first; });
      auto vq = ToVectorQuery(**c, ClientVector{q, {}, {}, {}}, names[slot]);
      ASSERT_TRUE(vq.ok()) << vq.status().ToString();
      EXPECT_EQ(QueryDistance(**c, *vq), distance);
      // Every point: those lacking the vector are left out, not ranked last.
      SearchSpec s;
      s.k = n;
      auto hits = SearchByVectors(**c, *vq, s);
      ASSERT_TRUE(hits.ok()) << hits.status().ToString();
      ASSERT_EQ(hits->size(), truth.size()) << name << " slot " << slot;
      for (size_t i = 0; i < truth.size(); ++i) {
        EXPECT_EQ((*hits)[i].id, std::to_string(truth[i].second)) << name << " slot " << slot << " rank " << i;
        const double shown = ClientScore(**c, *vq, (*hits)[i].score, 1.0);
        EXPECT_NEAR(distance == Distance::kEuclid ? -shown : shown, truth[i].first, 1e-4);
      }
      EXPECT_EQ(HigherIsBetter(**c, *vq), distance != Distance::kEuclid);
    }
    const ClientVector back = FromStoredVectors(**c, docs[1], /*unit_length=*/true);
    ASSERT_EQ(back.named.size(), 2u);  // point 1 lacks image
    EXPECT_EQ(back.named.count("image"), 0u);
    EXPECT_TRUE(back.unnamed.empty());
    for (size_t k : {size_t{0}, size_t{2}}) {
      const auto& t = back.named.at(names[k]);
      double norm = 0, dot = 0, xx = 0;
      for (size_t j = 0; j < t.size(); ++j) norm += t[j] * t[j], dot += t[j] * rows[k][1][j], xx += rows[k][1][j] * rows[k][1][j];
      if (distances[k] == Distance::kCosine) {
        EXPECT_NEAR(norm, 1.0, 1e-5);
        EXPECT_NEAR(dot, std::sqrt(xx), 1e-4);  // the same direction
      } else {
        EXPECT_EQ(t, rows[k][1]);
      }
    }
    EXPECT_TRUE(FromStoredVectors(**c, docs[0]).named.empty());
    StoredDocument d{"x", "", "{}", {}, {}};
    ClientVector stranger;
    stranger.named = {{"text", rows[0][1]}, {"audio", rows[0][1]}};
    EXPECT_FALSE(ToStoredVectors(**c, stranger, &d).ok());
    ClientVector short_one;
    short_one.named = {{"code", {1.0f}}};
    EXPECT_FALSE(ToStoredVectors(**c, short_one, &d).ok());
    EXPECT_TRUE(d.hs.empty() && d.rw.empty());
    EXPECT_FALSE(ToVectorQuery(**c, ClientVector{rows[0][1], {}, {}, {}}, "").ok());  // no unnamed vector here
  }
}

// Hybrid search fuses a lexical list that knows nothing of vectors: points
// lacking the searched vector, however well their text matches, are kept
// out before the top k, so k points that have it come back.
TEST(ClientVectors, HybridSearchOfANamedVectorAnswersKPointsThatHaveIt) {
  Env env;
  auto schema = VectorSchema::Declared({{"text", 3, Distance::kCosine}, {"image", 2, Distance::kDot}}, true, 8, 4);
  ASSERT_TRUE(schema.ok());
  auto o = PlainCollectionOptions(*schema);
  ASSERT_TRUE(o.ok());
  auto c = VectorCollection::Create(env.store.get(), "hybrid", *o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::vector<StoredDocument> docs;
  for (int i = 0; i < 20; ++i) {
    // The even points lack "image" and hold the query's word; the odd ones have it.
    StoredDocument d{std::to_string(i), i % 2 == 0 ? "apple apple apple" : "pear and a bit of apple", "{}", {}, {}};
    ClientVector v;
    v.named["text"] = {1.0f, static_cast<float>(i), 0.5f};
    if (i % 2 == 1) v.named["image"] = {static_cast<float>(i), 1.0f};
    ASSERT_TRUE(ToStoredVectors(**c, v, &d).ok());
    docs.push_back(std::move(d));
  }
  ASSERT_TRUE((*c)->Upsert(docs).ok());
  auto q = ToVectorQuery(**c, ClientVector{{1.0f, 0.5f}, {}, {}, {}}, "image");
  ASSERT_TRUE(q.ok());
  SearchSpec s;
  s.k = 3;
  s.mode = QueryMode::kHybrid;
  s.query = "apple";
  auto hits = SearchByVectors(**c, *q, s);
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  ASSERT_EQ(hits->size(), 3u);
  for (const auto& h : *hits) EXPECT_EQ(std::stoi(h.id) % 2, 1) << h.id << " lacks the vector";
}

// What a client may declare: none or hs/rw (the model's), one vector of the
// fused size and Cosine under any name (fused), else plain; refused: more
// than kMaxClientVectors, a name twice, hs beside another name, hs of
// another size.
TEST(ClientVectors, DeclaredVectorsMakeTheSchema) {
  const size_t dh = 8, dr = 4;
  EXPECT_EQ(VectorSchema::Declared({}, false, dh, dr)->kind, VectorKind::kModel);
  // An empty map of names (Qdrant's vectors: {}): points of payload only.
  auto none = VectorSchema::Declared({}, true, dh, dr);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->kind, VectorKind::kPlain);
  EXPECT_TRUE(none->Vectors(0).empty());
  EXPECT_FALSE(none->Find("").ok());
  auto none_back = VectorSchema::FromInfo(*none->RecordIn("{}"));
  ASSERT_TRUE(none_back.ok());
  EXPECT_TRUE(none_back->Vectors(0).empty());
  EXPECT_TRUE(PlainCollectionOptions(*none).ok());
  EXPECT_EQ(VectorSchema::Declared({{"hs", 8, Distance::kCosine}, {"rw", 4, Distance::kCosine}}, true, dh, dr)->kind,
            VectorKind::kModel);
  auto fused = VectorSchema::Declared({{"text-dense", 12, Distance::kCosine}}, true, dh, dr);
  ASSERT_TRUE(fused.ok());
  EXPECT_EQ(fused->kind, VectorKind::kFused);
  EXPECT_EQ(fused->name, "text-dense");
  auto back = VectorSchema::FromInfo(*fused->RecordIn("{}"));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->name, "text-dense");
  EXPECT_TRUE(back->named);
  EXPECT_EQ(VectorSchema::Declared({{"", 12, Distance::kDot}}, true, dh, dr)->kind, VectorKind::kPlain);
  auto two = VectorSchema::Declared({{"a", 3, Distance::kDot}, {"b", 5, Distance::kEuclid}}, true, dh, dr);
  ASSERT_TRUE(two.ok());
  auto two_back = VectorSchema::FromInfo(*two->RecordIn("{}"));
  ASSERT_TRUE(two_back.ok());
  ASSERT_EQ(two_back->rest.size(), 1u);
  EXPECT_EQ(two_back->rest[0].name, "b");
  EXPECT_EQ(two_back->rest[0].size, 5u);
  EXPECT_EQ(two_back->rest[0].distance, Distance::kEuclid);
  EXPECT_EQ(*two_back->Find("b"), 1u);
  const auto unknown = two_back->Find("c");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("'a' and 'b'"), std::string::npos) << unknown.status().message();
  std::vector<NamedVector> many;
  for (size_t i = 0; i <= kMaxClientVectors; ++i) many.push_back({"v" + std::to_string(i), 3, Distance::kDot});
  const auto too_many = VectorSchema::Declared(many, true, dh, dr);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("at most 64"), std::string::npos);
  many.pop_back();
  EXPECT_TRUE(VectorSchema::Declared(many, true, dh, dr).ok());
  EXPECT_FALSE(VectorSchema::Declared({{"a", 3, Distance::kDot}, {"a", 3, Distance::kDot}}, true, dh, dr).ok());
  EXPECT_FALSE(VectorSchema::Declared({{"hs", 8, Distance::kCosine}, {"a", 3, Distance::kDot}}, true, dh, dr).ok());
  EXPECT_FALSE(VectorSchema::Declared({{"hs", 9, Distance::kCosine}}, true, dh, dr).ok());
  EXPECT_FALSE(VectorSchema::Declared({{"a", 0, Distance::kDot}}, true, dh, dr).ok());
}

TEST(ClientVectors, SchemaRecordAndPayloadText) {
  VectorSchema s{VectorKind::kPlain, 384, Distance::kEuclid, "body"};
  auto info = s.RecordIn(R"({"model_dir": "m"})");
  ASSERT_TRUE(info.ok());
  auto back = VectorSchema::FromInfo(*info);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->kind, VectorKind::kPlain);
  EXPECT_EQ(back->size, 384u);
  EXPECT_EQ(back->distance, Distance::kEuclid);
  EXPECT_EQ(back->text_key, "body");
  EXPECT_EQ(VectorSchema::FromInfo("{}")->kind, VectorKind::kModel);  // recorded before client vectors
  EXPECT_FALSE(VectorSchema::FromInfo(R"({"vectors": {"kind": "sparse"}})").ok());
  // The two-slot layout (no "layout"): one Cosine or Dot vector's rows are the segments' own; a
  // Euclid vector's or a second vector's are not.
  auto old_dot = VectorSchema::FromInfo(R"({"vectors": {"kind": "plain", "size": 3, "distance": "Dot"}})");
  ASSERT_TRUE(old_dot.ok());
  EXPECT_EQ(old_dot->Vectors(0).size(), 1u);
  EXPECT_EQ(VectorSchema::FromInfo(R"({"vectors": {"kind": "plain", "size": 3, "distance": "Euclid"}})").status().code(),
            Status::Code::kNotSupported);
  EXPECT_EQ(VectorSchema::FromInfo(R"({"vectors": {"kind": "plain", "size": 3, "distance": "Dot", "second": )"
                                   R"({"name": "b", "size": 2, "distance": "Dot"}}})")
                .status()
                .code(),
            Status::Code::kNotSupported);
  EXPECT_FALSE(kDistances.Parse("Manhattan").ok());

  const VectorSchema by_default;
  EXPECT_EQ(PayloadText(by_default, json{{"content", "lc text"}, {"metadata", {{"a", 1}}}}), "lc text");
  EXPECT_EQ(PayloadText(by_default, json{{"_node_content", json{{"text", "li text"}}.dump()}}), "li text");
  EXPECT_EQ(PayloadText(by_default, json{{"_node_content", "not json"}}), "");
  EXPECT_EQ(PayloadText(by_default, json{{"content", 3}}), "");
  EXPECT_EQ(PayloadText(s, json{{"body", "mine"}, {"content", "theirs"}}), "mine");
}

TEST(MetadataFilter, NestedKeysListsSubstringsAndEmptiness) {
  const json meta = {{"metadata", {{"topic", "animals"}, {"year", 2020}}}, {"tags", {"a", "b"}}, {"title", "A dog runs"},
                     {"none", nullptr}, {"empty", json::array()}, {"a.b", 1}};
  auto matches = [&](const char* f) {
    auto p = MetadataFilter::Parse(f);
    EXPECT_TRUE(p.ok()) << f << " " << p.status().ToString();
    return p.ok() && (*p)->Matches(meta);
  };
  EXPECT_TRUE(matches(R"({"metadata.topic": "animals"})"));
  EXPECT_FALSE(matches(R"({"metadata.topic": "money"})"));
  EXPECT_TRUE(matches(R"({"metadata.year": {"$gte": 2000}})"));
  EXPECT_FALSE(matches(R"({"metadata.missing.deeper": 1})"));
  EXPECT_TRUE(matches(R"({"a.b": 1})"));  // a literal key with a dot wins
  EXPECT_TRUE(matches(R"({"tags": "a"})"));  // a list matches when an element does
  EXPECT_TRUE(matches(R"({"tags": {"$in": ["z", "b"]}})"));
  EXPECT_FALSE(matches(R"({"tags": {"$nin": ["b"]}})"));
  EXPECT_TRUE(matches(R"({"metadata.topic": {"$nin": ["money", "music"]}})"));
  EXPECT_TRUE(matches(R"({"missing": {"$nin": ["x"]}})"));
  EXPECT_TRUE(matches(R"({"title": {"$contains": "dog"}})"));
  EXPECT_FALSE(matches(R"({"title": {"$contains": "cat"}})"));
  EXPECT_TRUE(matches(R"({"tags": {"$contains": "b"}})"));
  EXPECT_FALSE(matches(R"({"tags": {"$not_contains": "b"}})"));
  EXPECT_TRUE(matches(R"({"title": {"$not_contains": "cat"}})"));
  EXPECT_TRUE(matches(R"({"missing": {"$not_contains": "cat"}})"));
  for (const char* f : {R"({"none": {"$empty": true}})", R"({"empty": {"$empty": true}})", R"({"missing": {"$empty": true}})",
                        R"({"tags": {"$empty": false}})"})
    EXPECT_TRUE(matches(f)) << f;
  EXPECT_FALSE(matches(R"({"title": {"$empty": true}})"));
  auto by_id = MetadataFilter::Parse(R"({"$or": [{"$id": "p1"}, {"title": "x"}]})");
  ASSERT_TRUE(by_id.ok());
  EXPECT_TRUE((*by_id)->UsesIds());
  EXPECT_TRUE(MatchesDocument(**by_id, meta.dump(), "p1"));
  EXPECT_FALSE(MatchesDocument(**by_id, meta.dump(), "p2"));
  EXPECT_FALSE((*MetadataFilter::Parse(R"({"title": "x"})"))->UsesIds());
  for (const char* f : {R"({"x": {"$nin": 3}})", R"({"x": {"$empty": 1}})", R"({"x": {"$contains": [1]}})"})
    EXPECT_FALSE(MetadataFilter::Parse(f).ok()) << f;
}

}  // namespace
}  // namespace moeedb
