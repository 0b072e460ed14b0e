// The evaluation harness: STS-B, Cranfield retrieval and Banking77 kNN for
// an embedding setup (or, with a null setup, the TF-IDF baseline). Each run
// gives a JSON object (the numbers) and a readable table; `moeedb eval`
// prints them.
//
// Normalisation follows method.md A.3/A.4: HS alone is raw; RW, concat and
// the sum use per-feature z-scores. STS replicates the reference (z-scores
// over batches of 128, one side at a time); kNN fits them on the training
// split; retrieval goes through a real collection (its calibration stats).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "database/embedding_setup.h"
#include "database/vector_collection.h"
#include "eval/text_vectors.h"

namespace moeedb::eval {

struct EvalReport {
  nlohmann::json json;  // one object: task, setup, sizes, scores, seconds
  std::string table;    // the same for a person
};

// What is evaluated: a model setup; else an outside model's vectors (HS
// alone: no RW, so no fused rows); else the TF-IDF baseline.
struct EvalInput {
  const EmbeddingSetup* setup = nullptr;
  std::string label;                      // names the method in the table
  std::string data_dir;                   // the dataset's folder
  size_t limit = 0;                       // > 0: the CI subset (see each task)
  const TextVectors* vectors = nullptr;   // used when setup is null
};

// STS-B (stsb-en-dev.csv, stsb-en-test.csv): Spearman x100 on test for HS,
// RW, concat and cos_HS + alpha cos_RW with alpha 1, alpha chosen on dev
// (grid 0..3 step 0.05), the label-free alpha and the model's; `plot`
// (non-empty): Spearman against alpha on dev and test as a PNG.
Result<EvalReport> EvaluateSts(const EvalInput& in, const std::string& plot = "");

struct RetrievalOptions {
  std::string queries = "all";  // all | tune (the even-numbered half) | test (the odd-numbered half)
  SearchSpec hybrid;         // alpha, beta, fusion, norm, rrf_k of the hybrid runs
  bool tune = false;            // also a grid of hybrid settings
  std::string scratch_dir;      // an empty folder for the collection's database
};
// Cranfield: the documents go into a real collection, each query is searched
// with modes hs, rw, fused, lexical and the hybrid pairs and triple; nDCG@10
// (graded), MRR@10, Recall@100. limit N: the first N queries over their
// judged documents plus the first 200.
Result<EvalReport> EvaluateRetrieval(const EvalInput& in, const RetrievalOptions& options);
// The search settings a retrieval evaluation compares: the dense modes,
// BM25 alone, for each fusion every pair of signals and all three; with
// `tune`, also a grid of lexical weights and normalisations.
std::vector<std::pair<std::string, SearchSpec>> RetrievalMethods(const SearchSpec& base, bool tune);

// Banking77 (train.csv, test.csv): kNN accuracy (k neighbours) of the test
// texts against the training texts by HS (raw), RW and the fused similarity
// at `alpha` (z-scores fitted on train). limit N: every (rows/N)-th row of
// each split, so every label stays represented.
Result<EvalReport> EvaluateClassify(const EvalInput& in, size_t k, float alpha);

}  // namespace moeedb::eval
