#include "index/lexical_index.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <xapian.h>

namespace moeedb {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kSeqKey = "moeedb_applied_seq";
constexpr const char* kLanguageKey = "moeedb_language";
constexpr const char* kEntryKey = "moeedb_applied_entry";
constexpr uint64_t kMaxDocId = 0xffffffffull;

// Okapi BM25 with Lucene's idf (never negative, unlike Robertson's), the
// formula the header states; the matcher (LuceneBm25) and Score() both use
// these two. Xapian's own BM25Weight clamps small idfs and floors document
// lengths, which no other engine does.
double Idf(double docs, double docs_with_term) {
  return std::log(1.0 + (docs - docs_with_term + 0.5) / (docs_with_term + 0.5));
}
double TermPart(double idf, double wdf, double doclen, double avgdl, double k1, double b) {
  if (wdf == 0) return 0.0;
  const double norm = avgdl > 0 ? doclen / avgdl : 0.0;
  return idf * wdf * (k1 + 1.0) / (wdf + k1 * (1.0 - b + b * norm));
}

// Each term's idf comes in as the OP_SCALE_WEIGHT factor of its leaf (the
// query builds it from whichever statistics it scores with, this index's or
// a sharded collection's) and avgdl through the constructor: Xapian's own
// statistics are this index's alone. The bound the matcher prunes by,
// get_maxpart, uses the same idf, so it holds for every document.
class LuceneBm25 : public Xapian::Weight {
 public:
  LuceneBm25(double k1, double b, double avgdl) : k1_(k1), b_(b), avgdl_(avgdl) {
    need_stat(DOC_LENGTH);
    need_stat(WDF);
    need_stat(WQF);
  }
  Xapian::Weight* clone() const override { return new LuceneBm25(k1_, b_, avgdl_); }
  void init(double factor) override { idf_ = factor * static_cast<double>(get_wqf()); }
  double get_sumpart(Xapian::termcount wdf, Xapian::termcount doclen, Xapian::termcount) const override {
    return TermPart(idf_, wdf, doclen, avgdl_, k1_, b_);
  }
  // f / (f + K) < 1 for every f, so idf * (k1 + 1) bounds every part.
  double get_maxpart() const override { return idf_ * (k1_ + 1.0); }
  double get_sumextra(Xapian::termcount, Xapian::termcount) const override { return 0.0; }
  double get_maxextra() const override { return 0.0; }

 private:
  double k1_, b_, avgdl_, idf_ = 0;
};

// Every word stemmed (STEM_ALL), or kept as written for "none" (STEM_ALL
// without a stemmer would index nothing).
void ConfigureGenerator(Xapian::TermGenerator* g, const std::string& language) {
  if (language == "none") {
    g->set_stemming_strategy(Xapian::TermGenerator::STEM_NONE);
    return;
  }
  g->set_stemmer(Xapian::Stem(language));
  g->set_stemming_strategy(Xapian::TermGenerator::STEM_ALL);
}

}  // namespace

void LexicalStats::Add(const LexicalStats& other) {
  docs += other.docs;
  total_length += other.total_length;
  for (const auto& [t, n] : other.term_docs) term_docs[t] += n;
}

std::string LexicalSpec::ToJson() const {
  return json{{"enabled", enabled}, {"language", language}, {"k1", k1}, {"b", b}}.dump();
}

Status LexicalSpec::Validate() const {
  if (!std::isfinite(k1) || k1 < 0) return Status::InvalidArgument("BM25 k1 must be a finite number >= 0");
  if (!std::isfinite(b) || b < 0 || b > 1) return Status::InvalidArgument("BM25 b must be in [0, 1]");
  if (language != "none") {
    try {
      Xapian::Stem s(language);
    } catch (const Xapian::Error&) {
      return Status::InvalidArgument("unknown stemmer language '" + language + "' (one of: none " +
                                     Xapian::Stem::get_available_languages() + ")");
    }
  }
  return Status::OK();
}

Result<LexicalSpec> LexicalSpec::FromJson(const std::string& text) {
  LexicalSpec s;
  try {
    const json j = json::parse(text);
    if (!j.is_object()) return Status::InvalidArgument("lexical settings must be a JSON object");
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "enabled" && it.key() != "language" && it.key() != "k1" && it.key() != "b")
        return Status::InvalidArgument("unknown lexical setting '" + it.key() + "'");
    s.enabled = j.value("enabled", s.enabled);
    s.language = j.value("language", s.language);
    s.k1 = j.value("k1", s.k1);
    s.b = j.value("b", s.b);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("lexical settings: ") + e.what());
  }
  MOEEDB_RETURN_IF_ERROR(s.Validate());
  return s;
}

struct LexicalIndex::Db {
  std::string dir;
  Xapian::WritableDatabase db;
  Xapian::TermGenerator generator;
};

LexicalIndex::LexicalIndex() = default;
LexicalIndex::~LexicalIndex() = default;

Result<std::unique_ptr<LexicalIndex>> LexicalIndex::Open(const std::string& dir, const LexicalSpec& spec) {
  MOEEDB_RETURN_IF_ERROR(spec.Validate());
  std::unique_ptr<LexicalIndex> ix(new LexicalIndex());
  ix->spec_ = spec;
  std::error_code ec;
  fs::create_directories(fs::path(dir).parent_path(), ec);
  if (ec) return Status::IOError("cannot create the folder of " + dir + ": " + ec.message());
  ix->db_ = std::make_unique<Db>();
  ix->db_->dir = dir;
  ConfigureGenerator(&ix->db_->generator, spec.language);
  try {
    try {
      ix->db_->db = Xapian::WritableDatabase(dir, Xapian::DB_CREATE_OR_OPEN);
    } catch (const Xapian::DatabaseLockError&) {
      throw;  // open elsewhere: never wipe it
    } catch (const Xapian::DatabaseError& e) {
      // Damaged or unreadable: the index is derived, so start it empty; the
      // collection rebuilds it from the store (committed_seq 0).
      fs::remove_all(dir, ec);
      ix->db_->db = Xapian::WritableDatabase(dir, Xapian::DB_CREATE_OR_OPEN);
    }
    const std::string lang = ix->db_->db.get_metadata(kLanguageKey);
    if (!lang.empty() && lang != spec.language) MOEEDB_RETURN_IF_ERROR(ix->Clear());
    const std::string seq = ix->db_->db.get_metadata(kSeqKey);
    ix->committed_seq_ = seq.empty() ? 0 : std::stoull(seq);
    ix->committed_entry_ = ix->db_->db.get_metadata(kEntryKey);
  } catch (const Xapian::DatabaseLockError& e) {
    return Status::IOError("lexical index " + dir + " is open elsewhere: " + e.get_description());
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical index " + dir + ": " + e.get_description());
  } catch (const std::exception& e) {
    return Status::Corruption("lexical index " + dir + ": " + e.what());
  }
  return ix;
}

Status LexicalIndex::Clear() {
  try {
    db_->db.close();
    std::error_code ec;
    fs::remove_all(db_->dir, ec);
    if (ec) return Status::IOError("cannot clear " + db_->dir + ": " + ec.message());
    db_->db = Xapian::WritableDatabase(db_->dir, Xapian::DB_CREATE_OR_OPEN);
    committed_seq_ = 0;
    committed_entry_.clear();
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical index " + db_->dir + ": " + e.get_description());
  }
  return Status::OK();
}

Status LexicalIndex::Replace(const std::vector<uint64_t>& ids, const std::vector<const std::string*>& texts) {
  if (ids.size() != texts.size()) return Status::InvalidArgument("lexical index: ids and texts differ in number");
  for (uint64_t id : ids)
    if (id == 0 || id > kMaxDocId)
      return Status::ResourceExhausted("lexical index: internal id " + std::to_string(id) +
                                       " is beyond the 32-bit document numbers Xapian supports");
  try {
    for (size_t i = 0; i < ids.size(); ++i) {
      Xapian::Document doc;
      db_->generator.set_document(doc);
      db_->generator.index_text_without_positions(*texts[i]);
      db_->db.replace_document(static_cast<Xapian::docid>(ids[i]), doc);
    }
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical index: " + e.get_description());
  }
  return Status::OK();
}

Status LexicalIndex::Remove(const std::vector<uint64_t>& ids) {
  try {
    for (uint64_t id : ids) {
      if (id == 0 || id > kMaxDocId) continue;
      try {
        db_->db.delete_document(static_cast<Xapian::docid>(id));
      } catch (const Xapian::DocNotFoundError&) {
      }
    }
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical index: " + e.get_description());
  }
  return Status::OK();
}

std::vector<std::string> LexicalIndex::Terms(const std::string& text) const {
  Xapian::Document doc;
  Xapian::TermGenerator g;
  ConfigureGenerator(&g, spec_.language);
  g.set_document(doc);
  g.index_text_without_positions(text);
  std::vector<std::string> out;
  for (auto t = doc.termlist_begin(); t != doc.termlist_end(); ++t)
    for (Xapian::termcount i = 0; i < t.get_wdf(); ++i) out.push_back(*t);
  return out;
}

namespace {

// The query's distinct terms with their counts.
std::map<std::string, Xapian::termcount> QueryTerms(const std::vector<std::string>& terms) {
  std::map<std::string, Xapian::termcount> out;
  for (const auto& t : terms) ++out[t];
  return out;
}

class FilterDecider : public Xapian::MatchDecider {
 public:
  explicit FilterDecider(const std::function<bool(uint64_t)>& f) : f_(f) {}
  bool operator()(const Xapian::Document& doc) const override { return f_(doc.get_docid()); }

 private:
  const std::function<bool(uint64_t)>& f_;
};

}  // namespace

Result<LexicalStats> LexicalIndex::Stats(const std::string& query) const {
  LexicalStats stats;
  try {
    stats.docs = db_->db.get_doccount();
    stats.total_length = db_->db.get_total_length();
    for (const auto& [t, wqf] : QueryTerms(Terms(query))) stats.term_docs[t] = db_->db.get_termfreq(t);
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical statistics: " + e.get_description());
  }
  return stats;
}

namespace {

double AverageLength(const LexicalStats& s) {
  return s.docs > 0 ? static_cast<double>(s.total_length) / static_cast<double>(s.docs) : 0.0;
}

// The idf of `term` under `s` (0 when no document holds it).
double TermIdf(const LexicalStats& s, const std::string& term) {
  auto it = s.term_docs.find(term);
  if (it == s.term_docs.end() || it->second == 0) return 0.0;
  return Idf(static_cast<double>(s.docs), static_cast<double>(it->second));
}

}  // namespace

Result<std::vector<LexicalHit>> LexicalIndex::Search(const std::string& query, size_t k,
                                                     const std::function<bool(uint64_t)>& filter,
                                                     const LexicalStats* stats) const {
  std::vector<LexicalHit> hits;
  const auto terms = QueryTerms(Terms(query));
  if (terms.empty() || k == 0) return hits;
  LexicalStats own;
  if (stats == nullptr) {
    MOEEDB_ASSIGN_OR_RETURN(own, Stats(query));
    stats = &own;
  }
  try {
    std::vector<Xapian::Query> leaves;
    for (const auto& [t, wqf] : terms) {
      const double idf = TermIdf(*stats, t);
      if (idf > 0) leaves.emplace_back(Xapian::Query::OP_SCALE_WEIGHT, Xapian::Query(t, wqf), idf);
    }
    if (leaves.empty()) return hits;
    Xapian::Enquire enquire(db_->db);
    enquire.set_query(Xapian::Query(Xapian::Query::OP_OR, leaves.begin(), leaves.end()));
    enquire.set_weighting_scheme(LuceneBm25(spec_.k1, spec_.b, AverageLength(*stats)));
    enquire.set_docid_order(Xapian::Enquire::ASCENDING);
    FilterDecider decider(filter);
    const Xapian::MSet mset = enquire.get_mset(0, static_cast<Xapian::doccount>(k), nullptr,
                                               filter ? &decider : nullptr);
    for (auto m = mset.begin(); m != mset.end(); ++m) hits.push_back(LexicalHit{*m, m.get_weight()});
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical search: " + e.get_description());
  }
  return hits;
}

Result<std::vector<double>> LexicalIndex::Score(const std::string& query, const std::vector<uint64_t>& ids,
                                                const LexicalStats* stats) const {
  std::vector<double> scores(ids.size(), 0.0);
  const auto terms = QueryTerms(Terms(query));
  if (terms.empty() || ids.empty()) return scores;
  LexicalStats own;
  if (stats == nullptr) {
    MOEEDB_ASSIGN_OR_RETURN(own, Stats(query));
    stats = &own;
  }
  try {
    const Xapian::Database& db = db_->db;
    const double avgdl = AverageLength(*stats);
    // Walk each term's posting list once, over the ids in ascending order.
    std::vector<size_t> order(ids.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[a] < ids[b]; });
    std::vector<double> doclen(ids.size(), -1.0);
    for (const auto& [t, wqf] : terms) {
      const double idf = TermIdf(*stats, t) * wqf;
      if (idf == 0 || db.get_termfreq(t) == 0) continue;
      auto p = db.postlist_begin(t);
      for (size_t i : order) {
        if (ids[i] == 0 || ids[i] > kMaxDocId) continue;
        const Xapian::docid did = static_cast<Xapian::docid>(ids[i]);
        p.skip_to(did);
        if (p == db.postlist_end(t)) break;
        if (*p != did) continue;
        if (doclen[i] < 0) doclen[i] = db.get_doclength(did);
        scores[i] += TermPart(idf, p.get_wdf(), doclen[i], avgdl, spec_.k1, spec_.b);
      }
    }
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical scoring: " + e.get_description());
  }
  return scores;
}

Status LexicalIndex::Commit(uint64_t applied_seq, const std::string& applied_entry) {
  try {
    db_->db.set_metadata(kSeqKey, std::to_string(applied_seq));
    db_->db.set_metadata(kEntryKey, applied_entry);
    db_->db.set_metadata(kLanguageKey, spec_.language);
    db_->db.commit();
  } catch (const Xapian::Error& e) {
    return Status::IOError("lexical index commit: " + e.get_description());
  }
  committed_seq_ = applied_seq;
  committed_entry_ = applied_entry;
  return Status::OK();
}

size_t LexicalIndex::size() const { return db_->db.get_doccount(); }

std::vector<uint64_t> LexicalIndex::Ids() const {
  std::vector<uint64_t> out;
  for (auto p = db_->db.postlist_begin(""); p != db_->db.postlist_end(""); ++p) out.push_back(*p);
  return out;
}

}  // namespace moeedb
