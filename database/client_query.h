// Client queries: a search by a client's own vectors as a vector API asks
// it (Qdrant's query and search API), in moeedb's service layer so every
// front end shares it. One of:
//   - a nearest-neighbour search (`search`);
//   - maximal marginal relevance over a search's candidates (`mmr`), the
//     similarity between two points being what the search would score
//     between them (PointSimilarity);
//   - prefetches, each a search of its own, combined by list fusion (rrf,
//     dbsf: index/fusion.h), by a score formula over their scores
//     (score_formula.h), or re-ranked by `search`'s vector. Every candidate
//     of the union is scored exactly on each prefetch's signal, so a formula
//     never needs a default for a point one prefetch did not return;
//   - Qdrant's example queries (`examples`): recommend, discover, context.
// Scores are what the client sees (ClientScore): a fusion's or formula's own
// score, a plain Euclid search's distance; `score_threshold` and `offset`
// apply to them.
#pragma once

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "database/client_vectors.h"
#include "database/payload_groups.h"
#include "database/payload_order.h"
#include "database/score_formula.h"
#include "database/spec/search_spec.h"

namespace moeedb {

class Database;

// One nearest-neighbour search by a client's vector: the vector, and the
// spec's k, filter, alpha and exact.
struct ClientQuery;

struct ClientSearch {
  VectorQuery query;
  SearchSpec spec;
  // A prefetch with prefetches of its own: its list is this query's answer
  // (up to spec.k), not a search by `query`.
  std::shared_ptr<const ClientQuery> inner;
  // A prefetch's own threshold on the scores the client sees (a Euclid
  // distance at most it, any other score at least it).
  std::optional<double> score_threshold;
};

struct MmrSpec {
  double diversity = 0.5;  // Qdrant's default; in [0, 1]
  size_t candidates = 0;   // the search's candidates MMR picks from (0: its k)
};

// Qdrant's queries by examples, each vector given or read from a point
// (StoredVector). kAverage searches by mean(positive) + (mean(positive) -
// mean(negative)) (the mean alone without negatives). The others score
// every point that has the vector searched (under the filter) from its
// core similarities to the examples, as Qdrant does (qdrant-client's
// distances.py): the cosine, the dot product, or minus the squared
// distance; with s(x) = x / (1 + |x|) and S(x) = (s(x) + 1) / 2:
//   kBestScore  best positive p, best negative n: S(p) if p > n, else -S(n);
//   kSumScores  the sum over positives minus the sum over negatives;
//   kDiscover   per pair +1 (closer to its positive), 0 or -1, summed, plus
//               S(similarity to the target);
//   kContext    per pair s(min(pos - neg - 2^-23, 0)), summed;
//   kFeedback   relevance feedback (Qdrant's naive strategy): a * sim(target)
//               plus, for each ordered pair of feedback items whose scores
//               differ by d > 0, d^b * c * (sim(higher) - sim(lower)).
// Points past the kMaxSearchK best by each example are not scored.
struct ExampleQuery {
  enum class Kind { kAverage, kBestScore, kSumScores, kDiscover, kContext, kFeedback };
  Kind kind = Kind::kAverage;
  std::string use;  // the vector searched
  std::vector<std::vector<float>> positive, negative;                    // recommend
  std::vector<float> target;                                             // discover, feedback
  std::vector<std::pair<std::vector<float>, double>> feedback;           // feedback: each example and its score
  double a = 1, b = 1, c = 1;                                            // feedback's coefficients
  std::vector<std::pair<std::vector<float>, std::vector<float>>> pairs;  // discover, context
};

enum class Combine { kNone, kRrf, kDbsf, kFormula, kRescore };

struct ClientQuery {
  ClientSearch search;                   // k (limit + offset) and filter of the answer; its vector unless combined
  std::vector<ClientSearch> prefetches;  // each filtered by search's filter too
  Combine combine = Combine::kNone;      // with prefetches: how; kNone: no prefetches
  int rrf_k = 2;                         // Qdrant's default
  ScoreFormula formula;
  std::optional<MmrSpec> mmr;            // without prefetches
  std::optional<ExampleQuery> examples;  // without prefetches: search's vector unused
  // No vector at all: the points (the prefetched ones, with prefetches) in
  // id order (`scroll`), ordered by a payload field (`order_by`, each with
  // its order value), or a random choice of them (`sample`), each scored 1.
  bool scroll = false;
  std::optional<OrderBySpec> order_by;
  bool sample = false;
  std::optional<double> score_threshold;
  size_t offset = 0;
};

struct ClientHit {
  std::string id;
  double score = 0;  // what the client sees
  std::string metadata_json;
  nlohmann::json order_value;  // order_by: the value ordered by (else null)
};

// The query's hits, best first, past `offset` (at most search.spec.k -
// offset of them). InvalidArgument for a query this collection cannot run.
Result<std::vector<ClientHit>> RunClientQuery(Database* db, VectorCollection* c, const ClientQuery& q);

// Groups (Qdrant's query groups): the query's hits over every point (up to
// kMaxSearchK), grouped by each string, integer or boolean value at a
// payload key (index/metadata_filter.h's PayloadKey; a point with several
// values joins each group), groups in the order of their best hit, each
// keeping its `group_size` best hits; the first `limit` groups.
using ClientGroup = HitGroup<ClientHit>;
Result<std::vector<ClientGroup>> RunGroupedQuery(Database* db, VectorCollection* c, ClientQuery q, const GroupSpec& groups);

// A distance matrix (Qdrant's search matrix): `sample` points of those the
// filter keeps that have vector `use` (all of them when there are no more;
// a random choice otherwise), in id order, and for each its `limit`
// nearest among the others, scored as a search by its vector scores them.
struct MatrixRow {
  std::string id;
  std::vector<ClientHit> nearest;
};
Result<std::vector<MatrixRow>> DistanceMatrix(Database* db, VectorCollection* c, const SearchSpec& filter,
                                              const std::string& use, size_t sample, size_t limit);

}  // namespace moeedb
