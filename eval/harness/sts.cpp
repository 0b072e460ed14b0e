#include <chrono>
#include <cmath>
#include <filesystem>

#include "base/statistics.h"
#include "engine/analysis/alpha.h"
#include "eval/datasets.h"
#include "eval/harness/harness.h"
#include "eval/harness/harness_util.h"
#include "base/png_plot.h"
#include "eval/tfidf.h"

namespace moeedb::eval {

using namespace harness;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

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

struct StsScores {
  std::vector<double> gold, hs, rw, concat, hs_z;  // per pair
};

Result<StsScores> ScoreSts(const EvalInput& in, const std::vector<StsPair>& pairs) {
  const EmbeddingSetup* setup = in.setup;
  StsScores s;
  std::vector<std::string> a, b;
  for (const auto& p : pairs) {
    s.gold.push_back(p.score);
    a.push_back(p.a);
    b.push_back(p.b);
  }
  if (!setup && in.vectors) {
    MOEEDB_ASSIGN_OR_RETURN(auto va, in.vectors->Of(a));
    MOEEDB_ASSIGN_OR_RETURN(auto vb, in.vectors->Of(b));
    for (size_t i = 0; i < pairs.size(); ++i) s.hs.push_back(Cos(va[i], vb[i]));
    return s;
  }
  if (!setup) {
    std::vector<std::string> all(a);
    all.insert(all.end(), b.begin(), b.end());
    TfIdf tfidf(all);
    for (size_t i = 0; i < pairs.size(); ++i) s.hs.push_back(TfIdf::Cosine(tfidf.Vector(a[i]), tfidf.Vector(b[i])));
    return s;
  }
  MOEEDB_ASSIGN_OR_RETURN(auto ea, setup->Embed(a));
  MOEEDB_ASSIGN_OR_RETURN(auto eb, setup->Embed(b));
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
    s.hs_z.push_back(setup->standardizes_hs() ? Cos(zha[i], zhb[i]) : s.hs.back());
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

}  // namespace

Result<EvalReport> EvaluateSts(const EvalInput& in, const std::string& plot) {
  auto dev = LoadSts((fs::path(in.data_dir) / "stsb-en-dev.csv").string());
  auto test = LoadSts((fs::path(in.data_dir) / "stsb-en-test.csv").string());
  MOEEDB_RETURN_IF_ERROR(dev.status());
  MOEEDB_RETURN_IF_ERROR(test.status());
  const auto t0 = std::chrono::steady_clock::now();
  auto sd = ScoreSts(in, Head(*dev, in.limit));
  auto st = ScoreSts(in, Head(*test, in.limit));
  MOEEDB_RETURN_IF_ERROR(sd.status());
  MOEEDB_RETURN_IF_ERROR(st.status());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  json out = {{"task", "sts"}, {"setup", SetupJson(in)}, {"pairs_dev", sd->gold.size()}, {"pairs_test", st->gold.size()},
              {"seconds", secs}};
  std::ostringstream table;
  table << "STS-B test, Spearman x100 — " << in.label << "\n";
  if (!in.setup) {
    const double r = 100.0 * Spearman(st->gold, st->hs);
    const char* name = in.vectors ? "hs" : "tfidf";
    out["spearman"] = {{name, r}};
    if (in.vectors) out["spearman_dev"] = {{name, 100.0 * Spearman(sd->gold, sd->hs)}};
    table << "  " << name << "  " << F2(r) << "\n";
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
               {"sum_alpha_model", SumSpearman(*st, in.setup->default_alpha())}};
    out["spearman"] = sp;
    out["alpha_model"] = in.setup->default_alpha();
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
          << "  sum, alpha " << F2(in.setup->default_alpha()) << " (the model's default)  " << F2(sp["sum_alpha_model"])
          << "\n";
    if (!plot.empty()) {
      PlotSeries d{grid, dev_curve, 40, 90, 200}, t{grid, test_curve, 210, 40, 40};
      MOEEDB_RETURN_IF_ERROR(WriteLinePlotPng(plot, {d, t}, {"sts-b spearman by alpha (blue dev, red test)", "alpha", "spearman"}));
      table << "  plot: " << plot << " (x: alpha 0..3; y: Spearman; blue dev, red test)\n";
    }
  }
  return EvalReport{std::move(out), table.str()};
}

}  // namespace moeedb::eval
