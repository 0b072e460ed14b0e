// moeedb eval sts | retrieval | classify: the evaluation harness. Each
// command prints a readable table on stderr and one JSON object on stdout.
// The same commands evaluate the shipped model, a random-weight model of the
// same shape (moeedb model init) and, with --baseline tfidf, TF-IDF cosine.
//
// Normalisation follows method.md A.3/A.4: HS alone is raw; RW, concat and
// the sum use per-feature z-scores. STS replicates the reference (z-scores
// over batches of 128, one side at a time); kNN fits them on the training
// split; retrieval goes through a real collection (its calibration stats).
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <sstream>

#include "engine/analysis/alpha.h"
#include "eval/datasets.h"
#include "eval/metrics.h"
#include "eval/png_plot.h"
#include "eval/tfidf.h"
#include "plugin/cli/args.h"
#include "plugin/cli/commands.h"
#include "plugin/cli/common.h"
#include "plugin/cli/search_flags.h"
#include "database/database.h"
#include "database/embedding_setup.h"
#include "database/vector_collection.h"
#include "storage/store.h"

namespace moeedb::cli {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const std::vector<FlagSpec>& CommonFlags() {
  static const std::vector<FlagSpec> flags = WithWeightFormatFlags({
      {"model", "DIR", "model folder (or --baseline tfidf)"},
      {"baseline", "NAME", "tfidf: the lexical baseline instead of a model"},
      {"data", "DIR", "dataset folder"},
      {"routing", "MODE", "learned (default) | ssmoe[:c,k,sign] | top1[:weight]"},
      {"prompt", "NAME", "prompt template (default prompteol)"},
      {"hs-pooling", "P", "last (default) | mean | layers-mean"},
      {"rw-pooling", "P", "last (default) | mean"},
      {"limit", "N", "use the first N items of each split (CI subsets)"},
      {"threads", "N", "compute threads (default: all cores)"},
  });
  return flags;
}

struct Common {
  std::unique_ptr<EmbeddingSetup> setup;  // null for the TF-IDF baseline
  std::string method_label;               // "model DIR (routing, pooling)" or "tfidf"
  std::string data;
  size_t limit = 0;
};

Result<Common> ParseCommon(const Args& args, const std::string& cmd) {
  Common c;
  if (!args.Has("data")) return Status::InvalidArgument("--data DIR is required");
  c.data = args.Get("data");
  MOEEDB_ASSIGN_OR_RETURN(long long limit, args.GetInt("limit", 0, 0, 1LL << 40));
  c.limit = static_cast<size_t>(limit);
  if (args.Has("baseline")) {
    if (args.Get("baseline") != "tfidf") return Status::InvalidArgument("--baseline: only tfidf is known");
    if (args.Has("model")) return Status::InvalidArgument("give --model or --baseline, not both");
    c.method_label = "tfidf";
    return c;
  }
  if (ModelDirFlag(args).empty()) return Status::InvalidArgument("no default model was found: pass --model DIR (or --baseline tfidf)");
  MOEEDB_ASSIGN_OR_RETURN(long long threads, args.GetInt("threads", 0, 0, 1024));
  EmbeddingConfig cfg = EmbeddingConfigFromFlags(args);
  cfg.threads = static_cast<int>(threads);
  MOEEDB_ASSIGN_OR_RETURN(c.setup, EmbeddingSetup::Load(cfg));
  c.method_label = fs::path(c.setup->config().model_dir).filename().string() + " (routing " + c.setup->routing() +
                   ", prompt " + c.setup->config().prompt + ", hs " + c.setup->config().hs_pooling + ", rw " +
                   c.setup->config().rw_pooling + ")";
  return c;
}

json SetupJson(const Common& c) {
  if (!c.setup) return {{"baseline", "tfidf"}};
  return json::parse(c.setup->InfoJson());
}

template <typename T>
std::vector<T> Head(std::vector<T> v, size_t limit) {
  if (limit > 0 && v.size() > limit) v.resize(limit);
  return v;
}

using Matrix = std::vector<std::vector<float>>;

// Per-feature z-score over consecutive batches of `batch` rows (unbiased std
// + 1e-8; a feature that is NaN, e.g. in a batch of one, becomes 0).
Matrix ZScoreBatches(const Matrix& rows, size_t batch) {
  Matrix out = rows;
  for (size_t s = 0; s < rows.size(); s += batch) {
    const size_t e = std::min(rows.size(), s + batch), n = e - s, d = rows[s].size();
    for (size_t j = 0; j < d; ++j) {
      double mean = 0, var = 0;
      for (size_t i = s; i < e; ++i) mean += rows[i][j];
      mean /= static_cast<double>(n);
      for (size_t i = s; i < e; ++i) var += (rows[i][j] - mean) * (rows[i][j] - mean);
      const double sd = n > 1 ? std::sqrt(var / static_cast<double>(n - 1)) : std::nan("");
      for (size_t i = s; i < e; ++i) {
        const double z = (rows[i][j] - mean) / (sd + 1e-8);
        out[i][j] = std::isfinite(z) ? static_cast<float>(z) : 0.0f;
      }
    }
  }
  return out;
}

double Cos(const std::vector<float>& a, const std::vector<float>& b) {
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += static_cast<double>(a[i]) * b[i];
    na += static_cast<double>(a[i]) * a[i];
    nb += static_cast<double>(b[i]) * b[i];
  }
  return na > 0 && nb > 0 ? dot / std::sqrt(na * nb) : 0;
}

std::vector<float> Concat(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> v(a);
  v.insert(v.end(), b.begin(), b.end());
  return v;
}

std::string F2(double v) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(2) << v;
  return o.str();
}

// ---- STS ------------------------------------------------------------------

struct StsScores {
  std::vector<double> gold, hs, rw, concat, hs_z;  // per pair
};

Result<StsScores> ScoreSts(const Common& c, const std::vector<eval::StsPair>& pairs) {
  StsScores s;
  std::vector<std::string> a, b;
  for (const auto& p : pairs) {
    s.gold.push_back(p.score);
    a.push_back(p.a);
    b.push_back(p.b);
  }
  if (!c.setup) {
    std::vector<std::string> all(a);
    all.insert(all.end(), b.begin(), b.end());
    eval::TfIdf tfidf(all);
    for (size_t i = 0; i < pairs.size(); ++i) s.hs.push_back(eval::TfIdf::Cosine(tfidf.Vector(a[i]), tfidf.Vector(b[i])));
    return s;
  }
  MOEEDB_ASSIGN_OR_RETURN(auto ea, c.setup->Embed(a));
  MOEEDB_ASSIGN_OR_RETURN(auto eb, c.setup->Embed(b));
  Matrix ha, hb, ra, rb;
  for (size_t i = 0; i < pairs.size(); ++i) {
    ha.push_back(ea[i].hs);
    hb.push_back(eb[i].hs);
    ra.push_back(ea[i].rw);
    rb.push_back(eb[i].rw);
  }
  const Matrix zha = ZScoreBatches(ha, 128), zhb = ZScoreBatches(hb, 128), zra = ZScoreBatches(ra, 128),
               zrb = ZScoreBatches(rb, 128);
  for (size_t i = 0; i < pairs.size(); ++i) {
    s.hs.push_back(Cos(ha[i], hb[i]));
    s.hs_z.push_back(Cos(zha[i], zhb[i]));
    s.rw.push_back(Cos(zra[i], zrb[i]));
    s.concat.push_back(Cos(Concat(zha[i], zra[i]), Concat(zhb[i], zrb[i])));
  }
  return s;
}

double SumSpearman(const StsScores& s, double alpha) {
  std::vector<double> f(s.gold.size());
  for (size_t i = 0; i < f.size(); ++i) f[i] = s.hs_z[i] + alpha * s.rw[i];
  return 100.0 * Spearman(s.gold, f);
}

int RunEvalSts(const std::vector<std::string>& argv) {
  std::vector<FlagSpec> specs = CommonFlags();
  specs.push_back({"plot", "FILE", "write Spearman against alpha (dev: blue, test: red) as a PNG"});
  if (WantsHelp(argv)) {
    std::cout << HelpText("eval sts (--model DIR | --baseline tfidf) --data STSB_DIR [--plot FILE.png]",
                          "STS-B (stsb-en-dev.csv, stsb-en-test.csv): Spearman x100 on test for HS, RW, concat, "
                          "and cos_HS + alpha cos_RW with alpha = 1, alpha chosen on dev (grid 0..3 step 0.05) and "
                          "the label-free alpha (chosen on the unlabeled test pairs).",
                          specs);
    return 0;
  }
  auto args = Args::Parse(argv, specs);
  if (!args.ok()) return UsageError("eval sts", args.status().message());
  auto c = ParseCommon(*args, "sts");
  if (!c.ok()) return Fail("eval sts", c.status().message());
  auto dev = eval::LoadSts((fs::path(c->data) / "stsb-en-dev.csv").string());
  auto test = eval::LoadSts((fs::path(c->data) / "stsb-en-test.csv").string());
  if (!dev.ok()) return Fail("eval sts", dev.status().message());
  if (!test.ok()) return Fail("eval sts", test.status().message());
  const auto t0 = std::chrono::steady_clock::now();
  auto sd = ScoreSts(*c, Head(*dev, c->limit));
  auto st = ScoreSts(*c, Head(*test, c->limit));
  if (!sd.ok()) return Fail("eval sts", sd.status().message());
  if (!st.ok()) return Fail("eval sts", st.status().message());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  json out = {{"task", "sts"}, {"setup", SetupJson(*c)}, {"pairs_dev", sd->gold.size()}, {"pairs_test", st->gold.size()},
              {"seconds", secs}};
  std::ostringstream table;
  table << "STS-B test, Spearman x100 — " << c->method_label << "\n";
  if (!c->setup) {
    const double r = 100.0 * Spearman(st->gold, st->hs);
    out["spearman"] = {{"tfidf", r}};
    table << "  tfidf  " << F2(r) << "\n";
  } else {
    std::vector<double> grid, dev_curve, test_curve;
    double best_alpha = 0, best_dev = -1e9;
    for (int i = 0; i <= 60; ++i) {
      const double a = i / 20.0;  // exact decimals in the JSON
      grid.push_back(a);
      dev_curve.push_back(SumSpearman(*sd, a));
      test_curve.push_back(SumSpearman(*st, a));
      if (dev_curve.back() > best_dev + 1e-12) {
        best_dev = dev_curve.back();
        best_alpha = a;
      }
    }
    const AlphaChoice lf = ChooseAlphaLabelFree(st->hs_z, st->rw);
    json sp = {{"hs", 100.0 * Spearman(st->gold, st->hs)},
               {"rw", 100.0 * Spearman(st->gold, st->rw)},
               {"concat", 100.0 * Spearman(st->gold, st->concat)},
               {"sum_alpha1", SumSpearman(*st, 1.0)},
               {"sum_alpha_dev", SumSpearman(*st, best_alpha)},
               {"sum_alpha_labelfree", SumSpearman(*st, lf.alpha)},
               {"sum_alpha_model", SumSpearman(*st, c->setup->default_alpha())}};
    out["spearman"] = sp;
    out["alpha_model"] = c->setup->default_alpha();
    out["alpha_dev"] = best_alpha;
    out["alpha_labelfree"] = lf.alpha;
    out["sum_beats_hs_and_rw"] = sp["sum_alpha_dev"].get<double>() > std::max(sp["hs"].get<double>(), sp["rw"].get<double>());
    out["curve"] = {{"alpha", grid}, {"dev", dev_curve}, {"test", test_curve}};
    table << "  HS                 " << F2(sp["hs"]) << "\n"
          << "  RW                 " << F2(sp["rw"]) << "\n"
          << "  concat             " << F2(sp["concat"]) << "\n"
          << "  sum, alpha 1       " << F2(sp["sum_alpha1"]) << "\n"
          << "  sum, alpha " << F2(best_alpha) << " (dev)  " << F2(sp["sum_alpha_dev"]) << "\n"
          << "  sum, alpha " << F2(lf.alpha) << " (label-free)  " << F2(sp["sum_alpha_labelfree"]) << "\n"
          << "  sum, alpha " << F2(c->setup->default_alpha()) << " (the model's default)  " << F2(sp["sum_alpha_model"])
          << "\n";
    if (args->Has("plot")) {
      eval::PlotSeries d{grid, dev_curve, 40, 90, 200}, t{grid, test_curve, 210, 40, 40};
      Status s = eval::WriteLinePlotPng(args->Get("plot"), {d, t});
      if (!s.ok()) return Fail("eval sts", s.message());
      table << "  plot: " << args->Get("plot") << " (x: alpha 0..3; y: Spearman; blue dev, red test)\n";
    }
  }
  std::cerr << table.str();
  std::cout << out.dump() << std::endl;
  return 0;
}

// ---- retrieval ------------------------------------------------------------

// The search settings a retrieval evaluation compares: the dense modes,
// BM25 alone, and for each fusion every pair of signals and all three; with
// `tune`, also a grid of lexical weights and normalisations (choose on the
// tuning half of the queries, report on the other).
std::vector<std::pair<std::string, SearchOptions>> RetrievalMethods(const SearchOptions& base, bool tune) {
  std::vector<std::pair<std::string, SearchOptions>> out;
  auto with = [&](const std::string& name, QueryMode mode, double w_hs, std::optional<float> alpha, double beta,
                  FusionKind f, ScoreNorm n) {
    SearchOptions so = base;
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
    const std::string tag = std::string(FusionKindName(f)) + ":";
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
        with(std::string("tune:") + ScoreNormName(n) + ":beta=" + bs, QueryMode::kHybrid, 1, base.alpha, b,
             FusionKind::kWeighted, n);
      with(std::string("tune:rrf:beta=") + bs, QueryMode::kHybrid, 1, base.alpha, b, FusionKind::kRrf, base.norm);
    }
  }
  return out;
}

int RunEvalRetrieval(const std::vector<std::string>& argv) {
  std::vector<FlagSpec> specs = CommonFlags();
  for (auto& f : SearchModeFlagSpecs())
    if (f.name != "mode") specs.push_back(f);
  specs.push_back({"queries", "SET", "all (default) | tune (the even-numbered half) | test (the odd-numbered half)"});
  specs.push_back({"tune", "", "also a grid of hybrid settings (lexical weight, normalisation, rrf)"});
  if (WantsHelp(argv)) {
    std::cout << HelpText("eval retrieval (--model DIR | --baseline tfidf) --data CRANFIELD_DIR",
                          "Cranfield: the documents go into a real collection (temporary database), each query is "
                          "searched with modes hs, rw and fused; prints nDCG@10 (graded), MRR@10 and Recall@100. "
                          "With --limit N: the first N queries, over their judged documents plus the first 200.",
                          specs);
    return 0;
  }
  auto args = Args::Parse(argv, specs);
  if (!args.ok()) return UsageError("eval retrieval", args.status().message());
  auto c = ParseCommon(*args, "retrieval");
  if (!c.ok()) return Fail("eval retrieval", c.status().message());
  float alpha = c->setup ? static_cast<float>(c->setup->default_alpha()) : 1.0f;
  SearchOptions hybrid_flags;
  hybrid_flags.k = 100;
  hybrid_flags.exact = true;
  if (Status s = ReadFusionFlags(*args, &hybrid_flags); !s.ok()) return UsageError("eval retrieval", s.message());
  if (hybrid_flags.alpha) alpha = *hybrid_flags.alpha;
  hybrid_flags.alpha = alpha;
  const std::string which = args->Get("queries", "all");
  if (which != "all" && which != "tune" && which != "test")
    return UsageError("eval retrieval", "--queries must be all, tune or test");
  auto set = eval::LoadCranfield(c->data);
  if (!set.ok()) return Fail("eval retrieval", set.status().message());
  // The subset: the first `limit` queries over their judged docs + the first 200.
  std::vector<size_t> queries;
  for (size_t q = 0; q < set->queries.size(); ++q)
    if (which == "all" || (q % 2 == 0) == (which == "tune")) queries.push_back(q);
  queries = Head(queries, c->limit);
  std::vector<size_t> docs;
  {
    std::set<std::string> keep;
    if (c->limit > 0) {
      for (size_t q : queries)
        for (const auto& [id, g] : set->qrels[q]) keep.insert(id);
      for (size_t d = 0; d < std::min<size_t>(200, set->doc_ids.size()); ++d) keep.insert(set->doc_ids[d]);
    }
    for (size_t d = 0; d < set->doc_ids.size(); ++d)
      if (c->limit == 0 || keep.count(set->doc_ids[d])) docs.push_back(d);
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::map<std::string, std::vector<std::vector<std::string>>> rankings;  // method -> per query
  if (!c->setup) {
    std::vector<std::string> texts;
    for (size_t d : docs) texts.push_back(set->doc_texts[d]);
    eval::TfIdf tfidf(texts);
    std::vector<eval::SparseVector> dv;
    for (const auto& t : texts) dv.push_back(tfidf.Vector(t));
    for (size_t q : queries) {
      const auto qv = tfidf.Vector(set->queries[q]);
      std::vector<std::pair<float, size_t>> scored;
      for (size_t i = 0; i < docs.size(); ++i) scored.emplace_back(-eval::TfIdf::Cosine(qv, dv[i]), i);
      std::sort(scored.begin(), scored.end());
      std::vector<std::string> r;
      for (size_t i = 0; i < std::min<size_t>(100, scored.size()); ++i) r.push_back(set->doc_ids[docs[scored[i].second]]);
      rankings["tfidf"].push_back(std::move(r));
    }
  } else {
    TempDirGuard tmp;
    auto db = Database::Open(tmp.path(), {});
    if (!db.ok()) return Fail("eval retrieval", db.status().message());
    auto o = (*db)->NewCollectionOptions(*c->setup);
    if (!o.ok()) return Fail("eval retrieval", o.status().message());
    o->default_alpha = alpha;
    auto coll = (*db)->CreateCollection("cranfield", *o);
    if (!coll.ok()) return Fail("eval retrieval", coll.status().message());
    for (size_t s = 0; s < docs.size(); s += 64) {
      std::vector<std::string> texts;
      std::vector<StoredDocument> batch;
      for (size_t i = s; i < std::min(docs.size(), s + 64); ++i) texts.push_back(set->doc_texts[docs[i]]);
      auto e = c->setup->Embed(texts);
      if (!e.ok()) return Fail("eval retrieval", e.status().message());
      for (size_t i = 0; i < texts.size(); ++i)
        batch.push_back({set->doc_ids[docs[s + i]], texts[i], "{}", std::move((*e)[i].hs), std::move((*e)[i].rw)});
      auto w = (*coll)->Upsert(batch, /*sync=*/false);
      if (!w.ok()) return Fail("eval retrieval", w.status().message());
    }
    std::vector<std::string> qtexts;
    for (size_t q : queries) qtexts.push_back(set->queries[q]);
    auto qe = c->setup->Embed(qtexts);
    if (!qe.ok()) return Fail("eval retrieval", qe.status().message());
    for (const auto& [name, so] : RetrievalMethods(hybrid_flags, args->Has("tune"))) {
      for (size_t i = 0; i < queries.size(); ++i) {
        SearchOptions q = so;
        q.text = set->queries[queries[i]];
        auto hits = (*coll)->Search((*qe)[i].hs.data(), (*qe)[i].rw.data(), q);
        if (!hits.ok()) return Fail("eval retrieval", name + ": " + hits.status().message());
        std::vector<std::string> r;
        for (const auto& h : *hits) r.push_back(h.id);
        rankings[name].push_back(std::move(r));
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  json out = {{"task", "retrieval"}, {"setup", SetupJson(*c)}, {"queries", queries.size()}, {"query_set", which},
              {"documents", docs.size()}, {"alpha", alpha}, {"beta", hybrid_flags.beta.value_or(kDefaultBeta)},
              {"norm", ScoreNormName(hybrid_flags.norm)}, {"seconds", secs}};
  std::ostringstream table;
  table << "Cranfield (" << queries.size() << " queries, " << docs.size() << " documents) — " << c->method_label
        << "\n  method              nDCG@10  MRR@10  Recall@100\n";
  for (const auto& [name, per_query] : rankings) {
    double ndcg = 0, mrr = 0, recall = 0;
    for (size_t i = 0; i < queries.size(); ++i) {
      ndcg += eval::NdcgAt(per_query[i], set->qrels[queries[i]], 10);
      mrr += eval::MrrAt(per_query[i], set->qrels[queries[i]], 10);
      recall += eval::RecallAt(per_query[i], set->qrels[queries[i]], 100);
    }
    const double n = static_cast<double>(std::max<size_t>(1, queries.size()));
    out["metrics"][name] = {{"ndcg@10", 100 * ndcg / n}, {"mrr@10", 100 * mrr / n}, {"recall@100", 100 * recall / n}};
    table << "  " << std::left << std::setw(19) << name << " " << F2(100 * ndcg / n) << "   " << F2(100 * mrr / n)
          << "   " << F2(100 * recall / n) << "\n";
  }
  std::cerr << table.str();
  std::cout << out.dump() << std::endl;
  return 0;
}

// ---- classification ---------------------------------------------------------

// Rows L2-normalised after an optional per-feature z-score fitted on `fit`.
at::Tensor Normalised(const Matrix& rows, const Matrix* fit) {
  const int64_t n = static_cast<int64_t>(rows.size()), d = static_cast<int64_t>(rows[0].size());
  at::Tensor t = at::empty({n, d}, at::kFloat);
  for (int64_t i = 0; i < n; ++i) std::copy(rows[i].begin(), rows[i].end(), t.data_ptr<float>() + i * d);
  if (fit != nullptr) {
    at::Tensor f = at::empty({static_cast<int64_t>(fit->size()), d}, at::kFloat);
    for (size_t i = 0; i < fit->size(); ++i) std::copy((*fit)[i].begin(), (*fit)[i].end(), f.data_ptr<float>() + i * d);
    t = (t - f.mean(0)) / (f.std(0, /*unbiased=*/true) + 1e-8);
  }
  return t / t.norm(2, {1}, true).clamp_min(1e-12);
}

int RunEvalClassify(const std::vector<std::string>& argv) {
  std::vector<FlagSpec> specs = CommonFlags();
  specs.push_back({"k", "N", "neighbours (default 10)"});
  specs.push_back({"alpha", "X", "alpha of the fused similarity (default: the model's, else 1)"});
  if (WantsHelp(argv)) {
    std::cout << HelpText("eval classify (--model DIR | --baseline tfidf) --data BANKING77_DIR [--k 10]",
                          "Banking77 (train.csv, test.csv): kNN accuracy of test texts against the training texts, "
                          "by HS (raw), RW and fused similarity (z-scores fitted on train). --limit N takes every "
                          "(rows/N)-th row of each split, so all labels stay represented.",
                          specs);
    return 0;
  }
  auto args = Args::Parse(argv, specs);
  if (!args.ok()) return UsageError("eval classify", args.status().message());
  auto c = ParseCommon(*args, "classify");
  if (!c.ok()) return Fail("eval classify", c.status().message());
  auto k = args->GetInt("k", 10, 1, 1000);
  if (!k.ok()) return UsageError("eval classify", k.status().message());
  float alpha = c->setup ? static_cast<float>(c->setup->default_alpha()) : 1.0f;
  try {
    if (args->Has("alpha")) alpha = std::stof(args->Get("alpha"));
  } catch (...) {
    return UsageError("eval classify", "--alpha needs a number");
  }
  auto train = eval::LoadLabeled((fs::path(c->data) / "train.csv").string());
  auto test = eval::LoadLabeled((fs::path(c->data) / "test.csv").string());
  if (!train.ok()) return Fail("eval classify", train.status().message());
  if (!test.ok()) return Fail("eval classify", test.status().message());
  auto stride = [&](const std::vector<eval::LabeledText>& v) {
    if (c->limit == 0 || v.size() <= c->limit) return v;
    std::vector<eval::LabeledText> out;
    const double step = static_cast<double>(v.size()) / static_cast<double>(c->limit);
    for (size_t i = 0; i < c->limit; ++i) out.push_back(v[static_cast<size_t>(i * step)]);
    return out;
  };
  const auto tr = stride(*train), te = stride(*test);
  std::map<std::string, int> label_id;
  std::vector<int> ytr, yte;
  for (const auto& x : tr) ytr.push_back(label_id.emplace(x.label, static_cast<int>(label_id.size())).first->second);
  for (const auto& x : te) yte.push_back(label_id.emplace(x.label, static_cast<int>(label_id.size())).first->second);
  std::vector<std::string> trt, tet;
  for (const auto& x : tr) trt.push_back(x.text);
  for (const auto& x : te) tet.push_back(x.text);

  const auto t0 = std::chrono::steady_clock::now();
  std::map<std::string, at::Tensor> sims;  // method -> [n_test, n_train]
  if (!c->setup) {
    eval::TfIdf tfidf(trt);
    std::vector<eval::SparseVector> a, b;
    for (const auto& t : trt) a.push_back(tfidf.Vector(t));
    for (const auto& t : tet) b.push_back(tfidf.Vector(t));
    at::Tensor s = at::empty({static_cast<int64_t>(b.size()), static_cast<int64_t>(a.size())}, at::kFloat);
    float* p = s.data_ptr<float>();
    for (size_t i = 0; i < b.size(); ++i)
      for (size_t j = 0; j < a.size(); ++j) p[i * a.size() + j] = eval::TfIdf::Cosine(b[i], a[j]);
    sims["tfidf"] = s;
  } else {
    auto etr = c->setup->Embed(trt);
    auto ete = c->setup->Embed(tet);
    if (!etr.ok()) return Fail("eval classify", etr.status().message());
    if (!ete.ok()) return Fail("eval classify", ete.status().message());
    Matrix htr, hte, rtr, rte;
    for (auto& e : *etr) {
      htr.push_back(std::move(e.hs));
      rtr.push_back(std::move(e.rw));
    }
    for (auto& e : *ete) {
      hte.push_back(std::move(e.hs));
      rte.push_back(std::move(e.rw));
    }
    sims["hs"] = at::mm(Normalised(hte, nullptr), Normalised(htr, nullptr).t());
    sims["rw"] = at::mm(Normalised(rte, &rtr), Normalised(rtr, &rtr).t());
    sims["fused"] = at::mm(Normalised(hte, &htr), Normalised(htr, &htr).t()) + alpha * sims["rw"];
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  json out = {{"task", "classify"}, {"setup", SetupJson(*c)}, {"train", tr.size()}, {"test", te.size()},
              {"k", *k}, {"alpha", alpha}, {"seconds", secs}};
  std::ostringstream table;
  table << "Banking77 kNN (k=" << *k << ", " << tr.size() << " train, " << te.size() << " test) — " << c->method_label
        << "\n";
  for (const auto& [name, s] : sims) {
    auto [vals, idx] = s.topk(std::min<int64_t>(*k, s.size(1)), 1);
    const auto va = vals.accessor<float, 2>();
    const auto ia = idx.accessor<int64_t, 2>();
    size_t correct = 0;
    for (int64_t i = 0; i < s.size(0); ++i) {
      std::vector<std::pair<float, int>> nb;
      for (int64_t j = 0; j < vals.size(1); ++j) nb.emplace_back(va[i][j], ytr[ia[i][j]]);
      correct += eval::KnnVote(nb, static_cast<size_t>(*k)) == yte[i];
    }
    const double acc = 100.0 * static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(1, s.size(0)));
    out["accuracy"][name] = acc;
    table << "  " << std::left << std::setw(6) << name << " " << F2(acc) << "\n";
  }
  std::cerr << table.str();
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace

int RunEval(const std::vector<std::string>& argv) {
  if (argv.empty() || argv[0] == "--help" || argv[0] == "-h") {
    std::cout << "Usage: moeedb eval sts|retrieval|classify [options] (see 'moeedb eval <task> --help')\n";
    return argv.empty() ? 2 : 0;
  }
  std::vector<std::string> rest(argv.begin() + 1, argv.end());
  if (argv[0] == "sts") return RunEvalSts(rest);
  if (argv[0] == "retrieval") return RunEvalRetrieval(rest);
  if (argv[0] == "classify") return RunEvalClassify(rest);
  return UsageError("eval", "unknown task '" + argv[0] + "' (sts, retrieval, classify)");
}

}  // namespace moeedb::cli
