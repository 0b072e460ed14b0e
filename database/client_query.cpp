#include "database/client_query.h"

#include <algorithm>
#include <set>
#include <random>
#include <map>
#include <cmath>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "database/database.h"
#include "database/document_scan.h"
#include "index/fusion.h"
#include "index/mmr.h"

namespace moeedb {

using json = nlohmann::json;

bool HigherIsBetterFor(const VectorCollection& c, const ClientQuery& q);

namespace {

// A candidate with both exact cosines (or a plain vector's terms), the score
// that ranks it (higher better) and the score the client sees.
struct Candidate {
  std::string id;
  double hs = 0, rw = 0, rank = 0, shown = 0;
  std::string metadata_json;
};

float AlphaOf(const VectorCollection& c, const SearchSpec& spec) { return spec.alpha.value_or(c.default_alpha()); }

Result<std::vector<Candidate>> Nearest(Database* db, VectorCollection* c, const ClientSearch& s) {
  MOEEDB_ASSIGN_OR_RETURN(auto hits, db->SearchVectors(c->name(), s.query, s.spec));
  const float alpha = AlphaOf(*c, s.spec);
  const bool higher = HigherIsBetter(*c, s.query);
  std::vector<Candidate> out;
  for (const auto& h : hits) {
    const double shown = ClientScore(*c, s.query, h.score, alpha);
    out.push_back({h.id, h.score_hs, h.score_rw, higher ? shown : -shown, shown, h.metadata_json});
  }
  return out;
}

// MMR's picks among the search's candidates; a score threshold keeps the
// candidates it passes before the picking (as Qdrant's), not after.
Result<std::vector<Candidate>> Mmr(Database* db, VectorCollection* c, const ClientSearch& s, const MmrSpec& m,
                                   std::optional<double> threshold) {
  if (!(m.diversity >= 0 && m.diversity <= 1)) return Status::InvalidArgument("'mmr.diversity' must be a number in [0, 1]");
  ClientSearch pooled = s;
  pooled.spec.k = std::max(m.candidates, s.spec.k);
  MOEEDB_ASSIGN_OR_RETURN(auto candidates, Nearest(db, c, pooled));
  if (threshold) {
    const bool higher = HigherIsBetter(*c, s.query);
    candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                    [&](const Candidate& x) { return higher ? x.shown < *threshold : x.shown > *threshold; }),
                     candidates.end());
  }
  std::vector<ComparablePoint> points;
  std::vector<double> relevance;
  // Relevance and similarity on Qdrant's core scale: a Euclid search's
  // minus squared distance, as its diversity term is.
  const bool euclid = !HigherIsBetter(*c, s.query);
  for (const auto& x : candidates) {
    MOEEDB_ASSIGN_OR_RETURN(auto d, c->Get(x.id));
    points.push_back(d ? Comparable(*c, s.query, *d) : ComparablePoint{});
    relevance.push_back(euclid ? -x.shown * x.shown : x.rank);
  }
  const float a = AlphaOf(*c, s.spec);
  const auto order = SelectMmr(
      relevance, [&](size_t i, size_t j) { return PointSimilarity(*c, s.query, points[i], points[j], a); }, s.spec.k,
      m.diversity);
  std::vector<Candidate> out;
  for (size_t i : order) out.push_back(candidates[i]);
  return out;
}

// A prefetch's list: its search, or the answer of its own query (inner),
// each candidate ranked higher-better.
Result<std::vector<Candidate>> PrefetchList(Database* db, VectorCollection* c, const ClientSearch& p) {
  if (!p.inner) {
    MOEEDB_ASSIGN_OR_RETURN(auto hits, Nearest(db, c, p));
    if (p.score_threshold) {
      const bool higher = HigherIsBetter(*c, p.query);
      const double t = *p.score_threshold;
      hits.erase(std::remove_if(hits.begin(), hits.end(),
                                [&](const Candidate& x) { return higher ? x.shown < t : x.shown > t; }),
                 hits.end());
    }
    return hits;
  }
  ClientQuery inner = *p.inner;
  inner.search.spec.filter = p.spec.filter;  // the outer filters, already combined into p's
  inner.search.spec.filter_json = p.spec.filter_json;
  MOEEDB_ASSIGN_OR_RETURN(std::vector<ClientHit> hits, RunClientQuery(db, c, inner));
  const bool higher = HigherIsBetterFor(*c, inner);
  std::vector<Candidate> out;
  for (const auto& h : hits) out.push_back({h.id, 0, 0, higher ? h.score : -h.score, h.score, h.metadata_json});
  return out;
}

Result<std::vector<Candidate>> Prefetched(Database* db, VectorCollection* c, const ClientQuery& q) {
  std::vector<std::vector<Candidate>> lists;
  for (ClientSearch p : q.prefetches) {
    // The request's filter and the prefetch's own, both.
    MOEEDB_RETURN_IF_ERROR(p.spec.NarrowFilter(q.search.spec.filter_json));
    if (!p.spec.alpha) p.spec.alpha = q.search.spec.alpha;
    p.spec.exact = p.spec.exact || q.search.spec.exact;
    MOEEDB_ASSIGN_OR_RETURN(auto hits, PrefetchList(db, c, p));
    lists.push_back(std::move(hits));
  }
  std::unordered_map<std::string, size_t> at;
  std::vector<Candidate> all;
  for (const auto& l : lists)
    for (const auto& h : l)
      if (at.emplace(h.id, all.size()).second) all.push_back(h);
  if (q.combine == Combine::kRrf || q.combine == Combine::kDbsf) {
    std::vector<std::vector<RankedItem>> ranked;
    for (const auto& l : lists) {
      ranked.emplace_back();
      // dbsf normalises the scores the client sees (a Euclid list's distances as they are), as Qdrant does.
      for (const auto& h : l) ranked.back().push_back({at[h.id], q.combine == Combine::kDbsf ? h.shown : h.rank});
    }
    const auto fused = FuseLists(q.combine == Combine::kRrf ? ListFusion::kRrf : ListFusion::kDbsf, ranked, all.size(),
                                 q.rrf_k);
    for (size_t i = 0; i < all.size(); ++i) all[i].rank = all[i].shown = fused[i];
  } else if (q.combine == Combine::kFormula) {
    // $score[i]: a candidate's score in prefetch i's list, where it is in it.
    std::vector<std::unordered_map<std::string, double>> shown(lists.size());
    for (size_t i = 0; i < lists.size(); ++i)
      for (const auto& h : lists[i]) shown[i].emplace(h.id, h.shown);
    for (auto& x : all) {
      FormulaPoint point;
      for (const auto& l : shown) {
        auto it = l.find(x.id);
        point.scores.push_back(it == l.end() ? std::nullopt : std::optional<double>(it->second));
      }
      const json payload = json::parse(x.metadata_json.empty() ? "{}" : x.metadata_json, nullptr, false);
      point.payload = &payload;
      point.id = x.id;
      point.vectors = [&]() -> std::vector<std::string> {
        auto d = c->Get(x.id);
        if (!d.ok() || !*d) return {};
        return c->schema().CarriedBy((*d)->rw);
      };
      MOEEDB_ASSIGN_OR_RETURN(double score, q.formula.Evaluate(point));
      x.rank = x.shown = score;
    }
  } else if (q.combine == Combine::kRescore) {
    // The prefetched candidates ranked by the main vector. Over kMaxSearchK
    // documents, a candidate outside the exact top kMaxSearchK ranks below
    // every kept one, past any page asked for unless fewer candidates than
    // the page fall inside it.
    ClientSearch every = q.search;
    every.spec.k = std::max<size_t>(1, std::min(c->size(), kMaxSearchK));
    every.spec.exact = true;
    MOEEDB_ASSIGN_OR_RETURN(auto exact, Nearest(db, c, every));
    std::vector<Candidate> rescored;
    for (const auto& h : exact)
      if (at.count(h.id)) rescored.push_back(h);
    all = std::move(rescored);
  } else {
    return Status::InvalidArgument("prefetches need a way to combine them: a fusion, a formula or a vector");
  }
  std::stable_sort(all.begin(), all.end(), [](const Candidate& x, const Candidate& y) { return x.rank > y.rank; });
  return all;
}

// Qdrant's core similarity of a hit to the query (client_query.h): minus
// the squared distance for Euclid, else the client's score.
double CoreSimilarity(const VectorCollection& c, const ClientSearch& s, const Candidate& x) {
  return QueryDistance(c, s.query) == Distance::kEuclid ? -x.shown * x.shown : x.shown;
}

double Sigmoid(double x) { return x / (1 + std::fabs(x)); }
double ScaledSigmoid(double x) { return 0.5 * (Sigmoid(x) + 1); }

Result<std::vector<Candidate>> ByExamples(Database* db, VectorCollection* c, const ClientSearch& search, const ExampleQuery& e) {
  using Kind = ExampleQuery::Kind;
  auto query_by = [&](const std::vector<float>& v) -> Result<ClientSearch> {
    ClientSearch s = search;
    ClientVector cv;
    cv.unnamed = v;
    MOEEDB_ASSIGN_OR_RETURN(s.query, ToVectorQuery(*c, cv, e.use));
    return s;
  };
  if (e.kind == Kind::kAverage) {
    if (e.positive.empty()) return Status::InvalidArgument("recommend by the average vector needs positive examples");
    auto mean = [](const std::vector<std::vector<float>>& xs) {
      std::vector<double> m(xs[0].size(), 0.0);
      for (const auto& x : xs)
        for (size_t i = 0; i < m.size() && i < x.size(); ++i) m[i] += x[i];
      for (double& v : m) v /= xs.size();
      return m;
    };
    const std::vector<double> pos = mean(e.positive);
    std::vector<float> v(pos.begin(), pos.end());
    if (!e.negative.empty()) {
      const std::vector<double> neg = mean(e.negative);
      for (size_t i = 0; i < v.size() && i < neg.size(); ++i) v[i] = static_cast<float>(2 * pos[i] - neg[i]);
    }
    MOEEDB_ASSIGN_OR_RETURN(ClientSearch s, query_by(v));
    return Nearest(db, c, s);
  }
  if ((e.kind == Kind::kBestScore || e.kind == Kind::kSumScores) && e.positive.empty() && e.negative.empty())
    return Status::InvalidArgument("recommend needs positive or negative examples");
  if (e.kind == Kind::kContext && e.pairs.empty()) return Status::InvalidArgument("a context query needs context pairs");
  if ((e.kind == Kind::kDiscover || e.kind == Kind::kFeedback) && e.target.empty())
    return Status::InvalidArgument(e.kind == Kind::kDiscover ? "discover needs a target" : "relevance feedback needs a target");
  // Every point's core similarity to each example, by one exact search each.
  std::vector<const std::vector<float>*> examples;
  for (const auto& x : e.positive) examples.push_back(&x);
  for (const auto& x : e.negative) examples.push_back(&x);
  for (const auto& [p, n] : e.pairs) examples.push_back(&p), examples.push_back(&n);
  for (const auto& [x, score] : e.feedback) examples.push_back(&x);
  if (e.kind == Kind::kDiscover || e.kind == Kind::kFeedback) examples.push_back(&e.target);
  std::unordered_map<std::string, size_t> at;
  std::vector<Candidate> points;
  std::vector<std::vector<double>> sims;  // sims[example][point]
  for (size_t k = 0; k < examples.size(); ++k) {
    MOEEDB_ASSIGN_OR_RETURN(ClientSearch s, query_by(*examples[k]));
    s.spec.k = std::max<size_t>(1, std::min(c->size(), kMaxSearchK));
    s.spec.exact = true;
    MOEEDB_ASSIGN_OR_RETURN(auto hits, Nearest(db, c, s));
    sims.emplace_back(points.size(), -INFINITY);
    for (const auto& h : hits) {
      auto [it, fresh] = at.emplace(h.id, points.size());
      if (fresh) {
        points.push_back(h);
        for (auto& row : sims) row.push_back(-INFINITY);
      }
      sims[k][it->second] = CoreSimilarity(*c, s, h);
    }
  }
  std::vector<Candidate> out;
  const size_t np = e.positive.size(), nn = e.negative.size();
  for (size_t i = 0; i < points.size(); ++i) {
    bool complete = true;
    for (const auto& row : sims) complete = complete && std::isfinite(row[i]);
    if (!complete) continue;  // past some example's kMaxSearchK best
    double score = 0;
    if (e.kind == Kind::kBestScore || e.kind == Kind::kSumScores) {
      double pos = e.kind == Kind::kBestScore ? -INFINITY : 0, neg = pos;
      for (size_t k = 0; k < np; ++k) pos = e.kind == Kind::kBestScore ? std::max(pos, sims[k][i]) : pos + sims[k][i];
      for (size_t k = np; k < np + nn; ++k) neg = e.kind == Kind::kBestScore ? std::max(neg, sims[k][i]) : neg + sims[k][i];
      score = e.kind == Kind::kSumScores ? pos - neg : pos > neg ? ScaledSigmoid(pos) : -ScaledSigmoid(neg);
    } else if (e.kind == Kind::kFeedback) {
      score = e.a * sims.back()[i];
      const size_t nf = e.feedback.size();
      for (size_t p = 0; p < nf; ++p)
        for (size_t n = 0; n < nf; ++n) {
          const double d = e.feedback[p].second - e.feedback[n].second;
          if (p == n || d <= 0) continue;
          score += std::pow(d, e.b) * e.c * (sims[p][i] - sims[n][i]);
        }
    } else {
      constexpr double kEpsilon = 1.1920929e-7;  // f32's, as Qdrant's
      for (size_t j = 0; j < e.pairs.size(); ++j) {
        const double pos = sims[np + nn + 2 * j][i], neg = sims[np + nn + 2 * j + 1][i];
        if (e.kind == Kind::kDiscover) score += pos > neg ? 1 : pos == neg ? 0 : -1;
        else score += Sigmoid(std::min(pos - neg - kEpsilon, 0.0));
      }
      if (e.kind == Kind::kDiscover) score += ScaledSigmoid(sims.back()[i]);
    }
    Candidate x = points[i];
    x.rank = x.shown = score;
    out.push_back(std::move(x));
  }
  std::stable_sort(out.begin(), out.end(), [](const Candidate& x, const Candidate& y) { return x.rank > y.rank; });
  return out;
}

}  // namespace

// A query without a vector (scroll, order_by, sample) over the points the
// filter keeps, and with prefetches only over those they found.
Result<std::vector<ClientHit>> WithoutVector(Database* db, VectorCollection* c, const ClientQuery& q) {
  ScanSpec scan;
  scan.filter = q.search.spec.filter;
  if (!q.prefetches.empty()) {
    std::set<std::string> found;
    for (const ClientSearch& p : q.prefetches) {
      ClientSearch both = p;
      MOEEDB_RETURN_IF_ERROR(both.spec.NarrowFilter(q.search.spec.filter_json));
      MOEEDB_ASSIGN_OR_RETURN(auto hits, PrefetchList(db, c, both));
      for (const auto& h : hits) found.insert(h.id);
    }
    std::vector<std::string> ids(found.begin(), found.end());
    std::sort(ids.begin(), ids.end(), [](const std::string& a, const std::string& b) { return IdOrderKey(a) < IdOrderKey(b); });
    scan.ids = std::move(ids);
  }
  const size_t want = q.search.spec.k;  // limit + offset
  std::vector<ClientHit> out;
  if (q.order_by) {
    MOEEDB_ASSIGN_OR_RETURN(auto ordered, ScanOrdered(*c, scan, *q.order_by, want));
    for (auto& o : ordered) out.push_back({o.doc.id, 1.0, o.doc.metadata_json, o.value});
  } else {
    if (!q.sample) scan.limit = want;
    MOEEDB_ASSIGN_OR_RETURN(ScanPage page, Scan(*c, scan));
    if (q.sample) {
      // A random choice of limit points (the offset does not shrink it, as in Qdrant).
      std::mt19937_64 rng(std::random_device{}());
      std::shuffle(page.documents.begin(), page.documents.end(), rng);
      if (page.documents.size() > want - std::min(want, q.offset)) page.documents.resize(want - std::min(want, q.offset));
      for (auto& d : page.documents) out.push_back({d.id, 1.0, d.metadata_json, nullptr});
      return out;
    }
    for (auto& d : page.documents) out.push_back({d.id, 1.0, d.metadata_json, nullptr});
  }
  out.erase(out.begin(), out.begin() + std::min(out.size(), q.offset));
  return out;
}

// Whether the query's client scores are higher-better.
bool HigherIsBetterFor(const VectorCollection& c, const ClientQuery& q) {
  if (q.combine == Combine::kRrf || q.combine == Combine::kDbsf || q.combine == Combine::kFormula) return true;
  if (q.scroll || q.order_by || q.sample) return true;
  if (q.examples) {
    // Example scores are higher-better; the average vector's follow its distance.
    auto slot = c.schema().Find(q.examples->use);
    const auto declared = c.schema().Vectors(0);
    return q.examples->kind != ExampleQuery::Kind::kAverage || !slot.ok() || *slot >= declared.size() ||
           c.schema().kind != VectorKind::kPlain || declared[*slot].distance != Distance::kEuclid;
  }
  return HigherIsBetter(c, q.search.query);
}

Result<std::vector<ClientHit>> RunClientQuery(Database* db, VectorCollection* c, const ClientQuery& q) {
  if (q.scroll || q.order_by || q.sample) return WithoutVector(db, c, q);
  std::vector<Candidate> ranked;
  if (!q.prefetches.empty()) {
    MOEEDB_ASSIGN_OR_RETURN(ranked, Prefetched(db, c, q));
  } else if (q.examples) {
    MOEEDB_ASSIGN_OR_RETURN(ranked, ByExamples(db, c, q.search, *q.examples));
  } else if (q.mmr) {
    MOEEDB_ASSIGN_OR_RETURN(ranked, Mmr(db, c, q.search, *q.mmr, q.score_threshold));
  } else {
    MOEEDB_ASSIGN_OR_RETURN(ranked, Nearest(db, c, q.search));
  }
  // A fusion's or formula's score is higher-better; a search's follows its distance.
  const bool higher = HigherIsBetterFor(*c, q);
  const size_t limit = q.search.spec.k - std::min(q.search.spec.k, q.offset);
  std::vector<ClientHit> out;
  for (size_t i = q.offset; i < ranked.size() && out.size() < limit; ++i) {
    const Candidate& x = ranked[i];
    if (q.score_threshold && (higher ? x.shown < *q.score_threshold : x.shown > *q.score_threshold)) continue;
    out.push_back({x.id, x.shown, x.metadata_json, nullptr});
  }
  return out;
}

namespace {

// Every prefetch's limit, nested ones' too, raised to `k` (as Qdrant's
// groups do: a group's hits come from every point the prefetches reach).
void RaisePrefetchLimits(ClientQuery* q, size_t k) {
  for (auto& p : q->prefetches) {
    p.spec.k = k;
    if (p.inner) {
      auto inner = std::make_shared<ClientQuery>(*p.inner);
      inner->search.spec.k = k;
      inner->offset = 0;
      RaisePrefetchLimits(inner.get(), k);
      p.inner = std::move(inner);
    }
  }
}

}  // namespace

Result<std::vector<ClientGroup>> RunGroupedQuery(Database* db, VectorCollection* c, ClientQuery q, const GroupSpec& groups) {
  MOEEDB_ASSIGN_OR_RETURN(PayloadKey key, PayloadKey::Parse(groups.key));
  if (groups.group_size == 0 || groups.limit == 0) return Status::InvalidArgument("'group_size' and 'limit' must be at least 1");
  // Every point the query ranks, the prefetches' too, then grouped.
  const size_t all = std::max<size_t>(1, std::min(c->size(), kMaxSearchK));
  q.search.spec.k = all;
  q.offset = 0;
  RaisePrefetchLimits(&q, all);
  MOEEDB_ASSIGN_OR_RETURN(std::vector<ClientHit> hits, RunClientQuery(db, c, q));
  return GroupByPayload<ClientHit>(hits, key, groups.group_size, groups.limit,
                                   [](const ClientHit& h) -> const std::string& { return h.metadata_json; });
}

Result<std::vector<MatrixRow>> DistanceMatrix(Database* db, VectorCollection* c, const SearchSpec& filter,
                                              const std::string& use, size_t sample, size_t limit) {
  if (sample < 2) return Status::InvalidArgument("'sample' must be at least 2");
  // The points the filter keeps that have the vector, in id order.
  ScanSpec scan;
  scan.filter = filter.filter;
  MOEEDB_ASSIGN_OR_RETURN(ScanPage page, Scan(*c, scan));
  std::vector<std::pair<std::string, std::vector<float>>> points;
  for (const StoredDocument& d : page.documents) {
    auto v = StoredVector(*c, d.id, use);
    if (v.ok()) points.emplace_back(d.id, std::move(v).value());
    else if (v.status().code() != Status::Code::kInvalidArgument) return v.status();
    else MOEEDB_RETURN_IF_ERROR(c->schema().Find(use).status());  // a name not declared is the request's error
  }
  if (points.size() > sample) {
    std::mt19937_64 rng(std::random_device{}());
    std::shuffle(points.begin(), points.end(), rng);
    points.resize(sample);
    std::sort(points.begin(), points.end(),
              [](const auto& a, const auto& b) { return IdOrderKey(a.first) < IdOrderKey(b.first); });
  }
  std::vector<MatrixRow> rows;
  if (points.size() < 2) return rows;
  // The sample already meets the filter: every pair's score is computed
  // here from the vectors as the client reads them (Cosine at unit length).
  const auto declared = c->schema().Vectors(0);
  MOEEDB_ASSIGN_OR_RETURN(size_t slot, c->schema().Find(use));
  const Distance distance = slot < declared.size() ? declared[slot].distance : Distance::kCosine;
  auto score = [&](const std::vector<float>& a, const std::vector<float>& b) {
    double dot = 0, d2 = 0;
    for (size_t k = 0; k < a.size() && k < b.size(); ++k) dot += double(a[k]) * b[k], d2 += (double(a[k]) - b[k]) * (double(a[k]) - b[k]);
    return distance == Distance::kEuclid ? std::sqrt(d2) : dot;
  };
  const bool higher = distance != Distance::kEuclid;
  for (size_t i = 0; i < points.size(); ++i) {
    std::vector<ClientHit> all;
    for (size_t j = 0; j < points.size(); ++j)
      if (j != i) all.push_back({points[j].first, score(points[i].second, points[j].second), "", nullptr});
    std::stable_sort(all.begin(), all.end(),
                     [&](const ClientHit& x, const ClientHit& y) { return higher ? x.score > y.score : x.score < y.score; });
    if (all.size() > limit) all.resize(limit);
    rows.push_back({points[i].first, std::move(all)});
  }
  return rows;
}

}  // namespace moeedb
