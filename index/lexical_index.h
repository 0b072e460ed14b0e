// LexicalIndex: a collection's BM25 index over its document texts, kept in a
// Xapian database on disk. Derived, like the dense indexes: the store stays
// the source of truth, and the database records the op-log sequence number
// it reflects so a reopened collection catches up from the op log (every
// change is idempotent: replacing a document id, deleting an absent one).
//
// Terms come from Xapian's TermGenerator (Unicode word splitting, lower
// case) and one Snowball stemmer, every term stemmed (no unstemmed copies,
// so a document's length is its number of words). Scores are Okapi BM25 as
// Lucene computes it:
//   score(q, d) = sum over query words t of
//       idf(t) * f(t,d) * (k1 + 1) / (f(t,d) + k1 * (1 - b + b * |d| / avgdl))
//   idf(t) = ln(1 + (N - n(t) + 0.5) / (n(t) + 0.5))
// with N the documents, n(t) those containing t, avgdl the mean length; a
// word repeated in the query counts once per occurrence.
//
// Document ids are the store's internal ids; Xapian numbers documents with
// 32 bits, so ids above 4294967295 are refused. Not thread-safe: the
// caller serialises every call (Xapian objects are single-threaded).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace moeedb {

struct LexicalSpec {
  bool enabled = false;
  std::string language = "english";  // a Snowball stemmer name, or "none"
  double k1 = 1.2, b = 0.75;
  std::string ToJson() const;
  // InvalidArgument for an unknown language or k1 < 0, b outside [0, 1].
  static Result<LexicalSpec> FromJson(const std::string& json_text);
  Status Validate() const;
};

// The BM25 statistics of a query's terms over a set of documents: one
// index's, or a sharded collection's summed over its shards (Add), which
// every shard then scores with so that its scores are one index's.
struct LexicalStats {
  uint64_t docs = 0;          // N
  uint64_t total_length = 0;  // the documents' lengths summed (avgdl = total_length / N)
  std::map<std::string, uint64_t> term_docs;  // each query term's n(t)
  void Add(const LexicalStats& other);
};

struct LexicalHit {
  uint64_t id = 0;
  double score = 0;
};

class LexicalIndex {
 public:
  // Opens the database in `dir`, creating it when absent. A database built
  // with a different language, or one Xapian cannot read, starts empty
  // (committed_seq() 0: the caller rebuilds it); IOError when it is open
  // elsewhere.
  static Result<std::unique_ptr<LexicalIndex>> Open(const std::string& dir, const LexicalSpec& spec);
  ~LexicalIndex();

  // Indexes (or re-indexes) each id's text.
  Status Replace(const std::vector<uint64_t>& ids, const std::vector<const std::string*>& texts);
  // Removes the ids; absent ones are ignored.
  Status Remove(const std::vector<uint64_t>& ids);
  // Removes every document (before a rebuild).
  Status Clear();

  // This index's statistics of `query`'s terms.
  Result<LexicalStats> Stats(const std::string& query) const;
  // The best k documents for `query` by BM25 (descending, ties by ascending
  // id), only those `filter` accepts (empty: all), scored with `stats`
  // (nullptr: this index's own). No hits when the query has no words.
  Result<std::vector<LexicalHit>> Search(const std::string& query, size_t k, const std::function<bool(uint64_t)>& filter,
                                         const LexicalStats* stats = nullptr) const;
  // The BM25 score of each id (0 for a document without a query word or not
  // indexed), by the same formula and statistics as Search.
  Result<std::vector<double>> Score(const std::string& query, const std::vector<uint64_t>& ids,
                                    const LexicalStats* stats = nullptr) const;
  // The terms `text` is indexed under, sorted, each as often as it occurs (for tests and
  // the query side).
  std::vector<std::string> Terms(const std::string& text) const;

  // Records `applied_seq` (and the identity of that change-log entry,
  // OpRecord::entry_id) and makes everything durable.
  Status Commit(uint64_t applied_seq, const std::string& applied_entry = "");
  // The op-log sequence number recorded by the last commit (0: none), and its entry's identity ("" unknown).
  uint64_t committed_seq() const { return committed_seq_; }
  const std::string& committed_entry() const { return committed_entry_; }
  size_t size() const;
  std::vector<uint64_t> Ids() const;
  const LexicalSpec& spec() const { return spec_; }

 private:
  struct Db;
  LexicalIndex();
  std::unique_ptr<Db> db_;
  LexicalSpec spec_;
  uint64_t committed_seq_ = 0;
  std::string committed_entry_;
};

}  // namespace moeedb
