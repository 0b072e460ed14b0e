// bench/search: fused search over synthetic clustered vectors shaped like
// OLMoE's (hs 2048, rw 1024). Prints, in one run:
//   - one Faiss flat inner-product search over the concatenated [hs; rw]
//     vectors (the baseline), and exact fused search, per query, and their ratio;
//   - per ANN index kind: build time, QPS and recall@10 against exact fused search.
// Usage: search_bench [N=100000] [QUERIES=100] [KINDS=hnsw,ivf] [--sq8]
#include <faiss/IndexFlat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "index/dual_index.h"

using namespace moeedb;
using Clock = std::chrono::steady_clock;

static double Secs(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

int main(int argc, char** argv) {
  size_t n = 100000, nq = 100;
  std::string kinds = "hnsw,ivf";
  bool sq8 = false;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--sq8") == 0) sq8 = true;
    else pos.push_back(argv[i]);
  }
  if (pos.size() > 0) n = std::strtoull(pos[0].c_str(), nullptr, 10);
  if (pos.size() > 1) nq = std::strtoull(pos[1].c_str(), nullptr, 10);
  if (pos.size() > 2) kinds = pos[2];
  const size_t dh = 2048, dr = 1024, clusters = std::max<size_t>(10, n / 100), k = 10;
  const float alpha = 1.0f;
  std::printf("search bench: %zu documents, hs %zu + rw %zu dims, %zu clusters, %zu queries, k=%zu, alpha=%.1f%s\n", n,
              dh, dr, clusters, nq, k, alpha, sq8 ? ", SQ8" : "");

  // Clustered data: centers, then points = center + noise (queries: held-out points).
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> ch(clusters * dh), cr(clusters * dr);
  for (auto& v : ch) v = g(rng);
  for (auto& v : cr) v = g(rng);
  auto make = [&](size_t count, std::vector<float>* hs, std::vector<float>* rw) {
    hs->resize(count * dh);
    rw->resize(count * dr);
    for (size_t i = 0; i < count; ++i) {
      const size_t c = rng() % clusters, c2 = (c + rng() % 3) % clusters;  // RW clusters overlap HS clusters only partly
      for (size_t j = 0; j < dh; ++j) (*hs)[i * dh + j] = ch[c * dh + j] + 0.7f * g(rng);
      for (size_t j = 0; j < dr; ++j) (*rw)[i * dr + j] = cr[c2 * dr + j] + 0.7f * g(rng);
    }
  };
  std::vector<float> hs, rw, qh, qr;
  auto t = Clock::now();
  make(n, &hs, &rw);
  make(nq, &qh, &qr);
  std::printf("generated data in %.1f s\n", Secs(t));
  std::vector<uint64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = i;

  // Exact fused search (flat halves).
  DualIndexSpec flat_spec;
  flat_spec.dim_hs = dh;
  flat_spec.dim_rw = dr;
  auto exact = DualIndex::Create(flat_spec, Standardizer::Identity(dh), Standardizer::Identity(dr));
  t = Clock::now();
  if (!exact.ok() || !(*exact)->Add(ids, hs.data(), rw.data()).ok()) return 1;
  std::printf("flat dual index: %.1f s to add\n", Secs(t));

  // Baseline: one flat index over [hs; alpha-ready rw] (unit halves, as the dual index stores them).
  std::vector<float> cat(n * (dh + dr)), qcat(nq * (dh + dr));
  auto normalise_into = [](const float* src, size_t d, float* dst, float scale) {
    double s = 0;
    for (size_t j = 0; j < d; ++j) s += double(src[j]) * src[j];
    const float inv = static_cast<float>(scale / std::sqrt(s));
    for (size_t j = 0; j < d; ++j) dst[j] = src[j] * inv;
  };
  for (size_t i = 0; i < n; ++i) {
    normalise_into(&hs[i * dh], dh, &cat[i * (dh + dr)], 1.0f);
    normalise_into(&rw[i * dr], dr, &cat[i * (dh + dr) + dh], 1.0f);
  }
  for (size_t i = 0; i < nq; ++i) {
    normalise_into(&qh[i * dh], dh, &qcat[i * (dh + dr)], 1.0f);
    normalise_into(&qr[i * dr], dr, &qcat[i * (dh + dr) + dh], alpha);
  }
  faiss::IndexFlatIP flat(dh + dr);
  flat.add(n, cat.data());
  std::vector<float> fd(k);
  std::vector<faiss::Index::idx_t> fl(k);
  // Warm up both paths once.
  flat.search(1, qcat.data(), k, fd.data(), fl.data());
  SearchRequest warm;
  warm.hs = qh.data();
  warm.rw = qr.data();
  warm.k = k;
  (void)(*exact)->Search(warm);

  t = Clock::now();
  size_t agree = 0;
  std::vector<std::set<uint64_t>> truth(nq);
  for (size_t q = 0; q < nq; ++q) flat.search(1, &qcat[q * (dh + dr)], k, fd.data(), fl.data());
  const double flat_s = Secs(t);
  t = Clock::now();
  for (size_t q = 0; q < nq; ++q) {
    SearchRequest r;
    r.hs = &qh[q * dh];
    r.rw = &qr[q * dr];
    r.k = k;
    r.alpha = alpha;
    r.exact = true;
    auto hits = (*exact)->Search(r);
    for (const auto& h : *hits) truth[q].insert(h.id);
  }
  const double exact_s = Secs(t);
  for (size_t q = 0; q < nq; ++q) {
    flat.search(1, &qcat[q * (dh + dr)], k, fd.data(), fl.data());
    for (auto l : fl) agree += truth[q].count(static_cast<uint64_t>(l));
  }
  std::printf("\n%-34s %10s %10s\n", "path", "ms/query", "QPS");
  std::printf("%-34s %10.2f %10.1f\n", "faiss flat over [hs; rw] (baseline)", 1e3 * flat_s / nq, nq / flat_s);
  std::printf("%-34s %10.2f %10.1f\n", "exact fused (dual flat)", 1e3 * exact_s / nq, nq / exact_s);
  std::printf("exact fused / flat [hs; rw] time ratio: %.2f (same top-10: %.3f)\n", exact_s / flat_s,
              double(agree) / (nq * k));
  std::vector<float>().swap(cat);
  flat.reset();

  std::printf("\n%-14s %10s %10s %10s %10s\n", "index", "build s", "QPS", "x exact", "recall@10");
  std::stringstream ks(kinds);
  std::string kind;
  while (std::getline(ks, kind, ',')) {
    auto parsed = ParseIndexKind(kind);
    if (!parsed.ok()) { std::fprintf(stderr, "%s\n", parsed.status().message().c_str()); return 2; }
    DualIndexSpec spec = flat_spec;
    spec.hs.kind = spec.rw.kind = *parsed;
    spec.hs.sq8 = spec.rw.sq8 = sq8;
    spec.min_train_rows = std::min<size_t>(n, 1000);
    auto ann = DualIndex::Create(spec, Standardizer::Identity(dh), Standardizer::Identity(dr));
    t = Clock::now();
    // Add in chunks, as ingest does (training happens on the first chunk that reaches min_train_rows).
    const size_t chunk = std::max<size_t>(spec.min_train_rows, n / 10);
    for (size_t s = 0; s < n; s += chunk) {
      const size_t e = std::min(n, s + chunk);
      std::vector<uint64_t> part(ids.begin() + s, ids.begin() + e);
      if (!(*ann)->Add(part, &hs[s * dh], &rw[s * dr]).ok()) return 1;
    }
    const double build = Secs(t);
    double hit = 0;
    t = Clock::now();
    for (size_t q = 0; q < nq; ++q) {
      SearchRequest r;
      r.hs = &qh[q * dh];
      r.rw = &qr[q * dr];
      r.k = k;
      r.alpha = alpha;
      auto hits = (*ann)->Search(r);
      for (const auto& h : *hits) hit += truth[q].count(h.id);
    }
    const double s = Secs(t);
    std::printf("%-14s %10.1f %10.1f %10.1f %10.3f\n", (kind + (sq8 ? "+sq8" : "")).c_str(), build, nq / s,
                (nq / s) / (nq / exact_s), hit / (nq * k));
  }
  return 0;
}
