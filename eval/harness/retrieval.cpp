#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "database/database.h"
#include "eval/datasets.h"
#include "eval/harness/harness.h"
#include "eval/harness/harness_util.h"
#include "eval/metrics.h"
#include "eval/tfidf.h"

namespace moeedb::eval {

using namespace harness;
using json = nlohmann::json;

namespace {

// The setup's embeddings, or the outside model's vectors with the RW placeholder.
Result<std::vector<Embedding>> Embed(const EvalInput& in, const std::vector<std::string>& texts) {
  if (in.setup) return in.setup->Embed(texts);
  MOEEDB_ASSIGN_OR_RETURN(auto rows, in.vectors->Of(texts));
  std::vector<Embedding> out(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    out[i].hs = std::move(rows[i]);
    out[i].rw = {1.0f};
  }
  return out;
}

}  // namespace

std::vector<std::pair<std::string, SearchSpec>> RetrievalMethods(const SearchSpec& base, bool tune) {
  std::vector<std::pair<std::string, SearchSpec>> out;
  auto with = [&](const std::string& name, QueryMode mode, double w_hs, std::optional<float> alpha, double beta,
                  std::optional<FusionKind> f, std::optional<ScoreNorm> n) {
    SearchSpec so = base;
    so.mode = mode;
    so.w_hs = w_hs;
    if (alpha) so.alpha = alpha;
    so.beta = beta;
    so.fusion = f;
    so.norm = n;
    out.emplace_back(name, so);
  };
  const double beta = base.beta.value_or(kDefaultBeta);
  for (auto [name, mode] : {std::pair{"hs", QueryMode::kHs}, std::pair{"rw", QueryMode::kRw},
                            std::pair{"fused", QueryMode::kFused}, std::pair{"lexical", QueryMode::kLexical}})
    with(name, mode, 1, base.alpha, beta, base.fusion, base.norm);
  for (FusionKind f : {FusionKind::kWeighted, FusionKind::kRrf}) {
    const std::string tag = std::string(kFusionKinds.Name(f)) + ":";
    with(tag + "hs+rw", QueryMode::kHybrid, 1, base.alpha, 0, f, base.norm);
    with(tag + "hs+lex", QueryMode::kHybrid, 1, 0.0f, beta, f, base.norm);
    with(tag + "rw+lex", QueryMode::kHybrid, 0, base.alpha, beta, f, base.norm);
    with(tag + "hs+rw+lex", QueryMode::kHybrid, 1, base.alpha, beta, f, base.norm);
  }
  if (tune) {
    for (double b : {0.25, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0}) {
      char bs[16];
      std::snprintf(bs, sizeof(bs), "%g", b);
      for (ScoreNorm n : {ScoreNorm::kMinMax, ScoreNorm::kZScore})
        with(std::string("tune:") + kScoreNorms.Name(n) + ":beta=" + bs, QueryMode::kHybrid, 1, base.alpha, b,
             FusionKind::kWeighted, n);
      with(std::string("tune:rrf:beta=") + bs, QueryMode::kHybrid, 1, base.alpha, b, FusionKind::kRrf, base.norm);
    }
  }
  return out;
}

Result<EvalReport> EvaluateRetrieval(const EvalInput& in, const RetrievalOptions& o_) {
  const SearchSpec& hybrid_flags = o_.hybrid;
  const float alpha = hybrid_flags.alpha.value_or(in.setup ? static_cast<float>(in.setup->default_alpha()) : 1.0f);
  const std::string& which = o_.queries;
  if (which != "all" && which != "tune" && which != "test") return Status::InvalidArgument("queries must be all, tune or test");
  auto set = LoadCranfield(in.data_dir);
  MOEEDB_RETURN_IF_ERROR(set.status());
  // The subset: the first `limit` queries over their judged docs + the first 200.
  std::vector<size_t> queries;
  for (size_t q = 0; q < set->queries.size(); ++q)
    if (which == "all" || (q % 2 == 0) == (which == "tune")) queries.push_back(q);
  queries = Head(queries, in.limit);
  std::vector<size_t> docs;
  {
    std::set<std::string> keep;
    if (in.limit > 0) {
      for (size_t q : queries)
        for (const auto& [id, g] : set->qrels[q]) keep.insert(id);
      for (size_t d = 0; d < std::min<size_t>(200, set->doc_ids.size()); ++d) keep.insert(set->doc_ids[d]);
    }
    for (size_t d = 0; d < set->doc_ids.size(); ++d)
      if (in.limit == 0 || keep.count(set->doc_ids[d])) docs.push_back(d);
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::map<std::string, std::vector<std::vector<std::string>>> rankings;  // method -> per query
  if (!in.setup && !in.vectors) {
    std::vector<std::string> texts;
    for (size_t d : docs) texts.push_back(set->doc_texts[d]);
    TfIdf tfidf(texts);
    std::vector<SparseVector> dv;
    for (const auto& t : texts) dv.push_back(tfidf.Vector(t));
    for (size_t q : queries) {
      const auto qv = tfidf.Vector(set->queries[q]);
      std::vector<std::pair<float, size_t>> scored;
      for (size_t i = 0; i < docs.size(); ++i) scored.emplace_back(-TfIdf::Cosine(qv, dv[i]), i);
      std::sort(scored.begin(), scored.end());
      std::vector<std::string> r;
      for (size_t i = 0; i < std::min<size_t>(100, scored.size()); ++i) r.push_back(set->doc_ids[docs[scored[i].second]]);
      rankings["tfidf"].push_back(std::move(r));
    }
  } else {
    MOEEDB_ASSIGN_OR_RETURN(auto db, Database::Open(o_.scratch_dir, {}));
    CollectionOptions co;
    if (in.setup) {
      MOEEDB_ASSIGN_OR_RETURN(co, db->NewCollectionOptions(*in.setup));
    } else {
      // An outside model has no RW: a constant one-dimensional placeholder
      // lets the collection run HS, BM25 and their hybrids unchanged; the
      // methods that would read it are not run.
      co.dim_hs = in.vectors->dim();
      co.dim_rw = 1;
    }
    co.default_alpha = alpha;
    MOEEDB_ASSIGN_OR_RETURN(std::shared_ptr<VectorCollection> coll, db->CreateCollection("cranfield", co));
    for (size_t s = 0; s < docs.size(); s += 64) {
      std::vector<std::string> texts;
      std::vector<StoredDocument> batch;
      for (size_t i = s; i < std::min(docs.size(), s + 64); ++i) texts.push_back(set->doc_texts[docs[i]]);
      MOEEDB_ASSIGN_OR_RETURN(std::vector<Embedding> e, Embed(in, texts));
      for (size_t i = 0; i < texts.size(); ++i)
        batch.push_back({set->doc_ids[docs[s + i]], texts[i], "{}", std::move(e[i].hs), std::move(e[i].rw)});
      MOEEDB_RETURN_IF_ERROR(coll->Upsert(batch, /*sync=*/false).status());
    }
    std::vector<std::string> qtexts;
    for (size_t q : queries) qtexts.push_back(set->queries[q]);
    MOEEDB_ASSIGN_OR_RETURN(std::vector<Embedding> qe, Embed(in, qtexts));
    for (const auto& [name, so] : RetrievalMethods(hybrid_flags, o_.tune)) {
      // An outside model has no RW: the methods that read RW alone or in the
      // dense sum are not run, and every hybrid runs with RW's weight at 0
      // (the tuning grid included), so the placeholder never ranks a document.
      if (!in.setup && (name.find("rw") != std::string::npos || name == "fused")) continue;
      for (size_t i = 0; i < queries.size(); ++i) {
        SearchSpec q = so;
        q.query = set->queries[queries[i]];
        if (!in.setup) q.alpha = 0.0f;
        auto hits = coll->Search(qe[i].hs.data(), qe[i].rw.data(), q);
        if (!hits.ok()) return Status::Internal(name + ": " + hits.status().message());
        std::vector<std::string> r;
        for (const auto& h : *hits) r.push_back(h.id);
        rankings[name].push_back(std::move(r));
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  json out = {{"task", "retrieval"}, {"setup", SetupJson(in)}, {"queries", queries.size()}, {"query_set", which},
              {"documents", docs.size()}, {"alpha", alpha}, {"beta", hybrid_flags.beta.value_or(kDefaultBeta)},
              {"norm", kScoreNorms.Name(hybrid_flags.norm.value_or(kDefaultNorm))}, {"seconds", secs}};
  std::ostringstream table;
  table << "Cranfield (" << queries.size() << " queries, " << docs.size() << " documents) — " << in.label
        << "\n  method              nDCG@10  MRR@10  Recall@100\n";
  for (const auto& [name, per_query] : rankings) {
    double ndcg = 0, mrr = 0, recall = 0;
    for (size_t i = 0; i < queries.size(); ++i) {
      ndcg += NdcgAt(per_query[i], set->qrels[queries[i]], 10);
      mrr += MrrAt(per_query[i], set->qrels[queries[i]], 10);
      recall += RecallAt(per_query[i], set->qrels[queries[i]], 100);
    }
    const double n = static_cast<double>(std::max<size_t>(1, queries.size()));
    out["metrics"][name] = {{"ndcg@10", 100 * ndcg / n}, {"mrr@10", 100 * mrr / n}, {"recall@100", 100 * recall / n}};
    table << "  " << std::left << std::setw(19) << name << " " << F2(100 * ndcg / n) << "   " << F2(100 * mrr / n)
          << "   " << F2(100 * recall / n) << "\n";
  }
  return EvalReport{std::move(out), table.str()};
}

}  // namespace moeedb::eval
