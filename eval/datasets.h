// Readers for the evaluation sets (../shared/data/eval) and for CSV corpora.
// Each reader fails with the file and line of the first malformed record.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/csv.h"
#include "base/status.h"

namespace moeedb::eval {

struct StsPair {
  std::string a, b;
  double score = 0;  // gold similarity, 0..5
};
// STS-B split file: `sentence1,sentence2,score`, no header.
Result<std::vector<StsPair>> LoadSts(const std::string& path);

struct LabeledText {
  std::string text;
  std::string label;
};
// Banking77 split file: header `text,category`.
Result<std::vector<LabeledText>> LoadLabeled(const std::string& path);

struct RetrievalSet {
  std::vector<std::string> doc_ids;    // Cranfield .I numbers, as text
  std::vector<std::string> doc_texts;  // title + abstract
  std::vector<std::string> queries;    // queries[i] is judged as query i + 1
  // qrels[query index] = {doc id -> graded gain}; gain = 5 - Cranfield code (1..4 -> 4..1).
  std::vector<std::map<std::string, int>> qrels;
};
// A Cranfield folder: cran.all.1400, cran.qry, cranqrel (judgments number the
// queries 1..N in file order; codes -1 and 5 are not relevant).
Result<RetrievalSet> LoadCranfield(const std::string& dir);

}  // namespace moeedb::eval
