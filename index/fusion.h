// Fusion of a collection's three signals into one ranking: HS cosine, RW
// cosine (the dense MoEE pair) and the lexical BM25 score.
//
//   weighted: each signal is normalised over the query's candidates, then
//             fused = w_hs * n_hs + w_rw * n_rw + w_lex * n_lex.
//             min-max (the default) maps each signal onto [0, 1] by the
//             candidates' lowest and highest score; z-score subtracts their
//             mean and divides by their standard deviation. Min-max keeps
//             the weights' meaning ("how much of the range") whatever the
//             signal's scale; the two were within 0.4 nDCG@10 of each other
//             on the tuning half of Cranfield.
//   rrf:      reciprocal rank fusion, fused = sum of w / (k + rank), with a
//             signal's rank among the candidates (1 = best); a candidate
//             without any query word gets no lexical term.
// A signal with weight 0 plays no part. Candidates are re-scored exactly on
// every signal before fusion, so the ranking never depends on which index
// proposed a document.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/enum_table.h"
#include "base/status.h"
#include "index/query_mode.h"

namespace moeedb {

enum class FusionKind { kWeighted, kRrf };
inline constexpr EnumTable<FusionKind, 2> kFusionKinds{"fusion",
                                                       {{{FusionKind::kWeighted, "weighted"}, {FusionKind::kRrf, "rrf"}}}};

enum class ScoreNorm { kMinMax, kZScore };
inline constexpr EnumTable<ScoreNorm, 2> kScoreNorms{"score normalisation",
                                                     {{{ScoreNorm::kMinMax, "minmax"}, {ScoreNorm::kZScore, "zscore"}}}};

// rrf k's range (1/(k + rank) needs k >= 1; beyond 100000 every rank weighs
// about the same) and its default, the value of the RRF paper.
inline constexpr int kMinRrfK = 1, kMaxRrfK = 100000;
inline constexpr int kDefaultRrfK = 60;

struct FusionOptions {
  FusionKind kind = FusionKind::kWeighted;
  ScoreNorm norm = ScoreNorm::kMinMax;
  double w_hs = 1.0, w_rw = 1.0, w_lex = 1.0;  // w_rw is the query's alpha, w_lex its beta
  int rrf_k = kDefaultRrfK;
  // InvalidArgument for a negative or non-finite weight, every weight 0, or
  // rrf_k outside [kMinRrfK, kMaxRrfK].
  Status Validate() const;
};

struct FusedCandidate {
  uint64_t id = 0;
  double hs = 0, rw = 0, lex = 0;  // exact scores of each signal
  double fused = 0;                // filled in by Fuse
  // Each signal's share of `fused` (they sum to it): w * normalised score for
  // weighted fusion, w / (k + rank) for rrf. Filled in by Fuse.
  double part_hs = 0, part_rw = 0, part_lex = 0;
};

// Fills in `fused` for every candidate and sorts them by it, descending
// (ties by ascending id).
void Fuse(const FusionOptions& options, std::vector<FusedCandidate>* candidates);

// Fusion of ranked lists (each its own search's candidates, best first, with
// its scores: rrf reads only the order, dbsf the scores as given), as
// Qdrant fuses a query's prefetches:
//   rrf:  sum over the lists holding a candidate of 1 / (k + position), the
//         position counted from 0 (Qdrant's k defaults to 2);
//   dbsf: distribution-based score fusion: each list's scores mapped onto
//         [0, 1] by its mean -+ 3 sample standard deviations (n - 1; 0.5 when
//         they are all equal or the list has one), summed over the lists
//         holding the candidate.
enum class ListFusion { kRrf, kDbsf };
inline constexpr EnumTable<ListFusion, 2> kListFusions{"fusion", {{{ListFusion::kRrf, "rrf"}, {ListFusion::kDbsf, "dbsf"}}}};
inline constexpr int kDefaultListRrfK = 2;

struct RankedItem {
  size_t key = 0;      // the caller's candidate number, shared across lists
  double score = 0;
};
// Each key's fused score (keys absent from every list: 0), indexed by key;
// `keys` is one past the largest key.
std::vector<double> FuseLists(ListFusion kind, const std::vector<std::vector<RankedItem>>& lists, size_t keys,
                              int rrf_k = kDefaultListRrfK);

}  // namespace moeedb
