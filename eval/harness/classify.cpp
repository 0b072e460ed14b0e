#include <ATen/ATen.h>

#include <chrono>
#include <filesystem>
#include <map>

#include "eval/datasets.h"
#include "eval/harness/harness.h"
#include "eval/harness/harness_util.h"
#include "eval/metrics.h"
#include "eval/tfidf.h"

namespace moeedb::eval {

using namespace harness;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

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

}  // namespace

Result<EvalReport> EvaluateClassify(const EvalInput& in, size_t k_in, float alpha) {
  const int64_t k_ = static_cast<int64_t>(k_in);
  auto train = LoadLabeled((fs::path(in.data_dir) / "train.csv").string());
  auto test = LoadLabeled((fs::path(in.data_dir) / "test.csv").string());
  MOEEDB_RETURN_IF_ERROR(train.status());
  MOEEDB_RETURN_IF_ERROR(test.status());
  auto stride = [&](const std::vector<LabeledText>& v) {
    if (in.limit == 0 || v.size() <= in.limit) return v;
    std::vector<LabeledText> out;
    const double step = static_cast<double>(v.size()) / static_cast<double>(in.limit);
    for (size_t i = 0; i < in.limit; ++i) out.push_back(v[static_cast<size_t>(i * step)]);
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
  if (!in.setup && in.vectors) {
    MOEEDB_ASSIGN_OR_RETURN(Matrix htr, in.vectors->Of(trt));
    MOEEDB_ASSIGN_OR_RETURN(Matrix hte, in.vectors->Of(tet));
    sims["hs"] = at::mm(Normalised(hte, nullptr), Normalised(htr, nullptr).t());
  } else if (!in.setup) {
    TfIdf tfidf(trt);
    std::vector<SparseVector> a, b;
    for (const auto& t : trt) a.push_back(tfidf.Vector(t));
    for (const auto& t : tet) b.push_back(tfidf.Vector(t));
    at::Tensor s = at::empty({static_cast<int64_t>(b.size()), static_cast<int64_t>(a.size())}, at::kFloat);
    float* p = s.data_ptr<float>();
    for (size_t i = 0; i < b.size(); ++i)
      for (size_t j = 0; j < a.size(); ++j) p[i * a.size() + j] = TfIdf::Cosine(b[i], a[j]);
    sims["tfidf"] = s;
  } else {
    auto etr = in.setup->Embed(trt);
    auto ete = in.setup->Embed(tet);
    MOEEDB_RETURN_IF_ERROR(etr.status());
    MOEEDB_RETURN_IF_ERROR(ete.status());
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
    // A trained pooler's HS is fused raw: the "hs" similarities already.
    const at::Tensor fused_hs = in.setup->standardizes_hs()
                                    ? at::mm(Normalised(hte, &htr), Normalised(htr, &htr).t())
                                    : sims["hs"];
    sims["fused"] = fused_hs + alpha * sims["rw"];
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  json out = {{"task", "classify"}, {"setup", SetupJson(in)}, {"train", tr.size()}, {"test", te.size()},
              {"k", k_}, {"alpha", alpha}, {"seconds", secs}};
  std::ostringstream table;
  table << "Banking77 kNN (k=" << k_ << ", " << tr.size() << " train, " << te.size() << " test) — " << in.label
        << "\n";
  for (const auto& [name, s] : sims) {
    auto [vals, idx] = s.topk(std::min<int64_t>(k_, s.size(1)), 1);
    const auto va = vals.accessor<float, 2>();
    const auto ia = idx.accessor<int64_t, 2>();
    size_t correct = 0;
    for (int64_t i = 0; i < s.size(0); ++i) {
      std::vector<std::pair<float, int>> nb;
      for (int64_t j = 0; j < vals.size(1); ++j) nb.emplace_back(va[i][j], ytr[ia[i][j]]);
      correct += KnnVote(nb, static_cast<size_t>(k_)) == yte[i];
    }
    const double acc = 100.0 * static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(1, s.size(0)));
    out["accuracy"][name] = acc;
    table << "  " << std::left << std::setw(6) << name << " " << F2(acc) << "\n";
  }
  return EvalReport{std::move(out), table.str()};
}

}  // namespace moeedb::eval
