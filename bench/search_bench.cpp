// bench/search: fused search over synthetic clustered vectors shaped like
// OLMoE's (hs 2048, rw 1024). Prints, in one run:
//   - one Faiss flat inner-product search over the concatenated [hs; rw]
//     vectors (the baseline), and exact fused search, per query, and their ratio;
//   - per ANN index kind: build time, QPS and recall@10 against exact fused search.
//   Each ANN index is compared with the exact fused search of the same index
//   (same rows), so recall and the QPS ratio are like for like.
// Usage: search_bench [N=100000] [QUERIES=100] [KINDS=hnsw,ivf] [--sq8] [--fp16] [--nprobe=16]
//   --sq8: 8-bit scalar-quantized ANN indexes; --fp16: fp16 rows for exact
//   scoring (with both, 1M documents fit in ~10 GB). The flat [hs; rw]
//   baseline runs when N <= 200000.
#include <faiss/IndexFlat.h>

#include <chrono>
#include <cmath>
#include <functional>
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
  bool sq8 = false, fp16 = false;
  int nprobe = 16;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--sq8") == 0) sq8 = true;
    else if (std::strcmp(argv[i], "--fp16") == 0) fp16 = true;
    else if (std::strncmp(argv[i], "--nprobe=", 9) == 0) nprobe = std::atoi(argv[i] + 9);
    else pos.push_back(argv[i]);
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (pos.size() > 0) n = std::strtoull(pos[0].c_str(), nullptr, 10);
  if (pos.size() > 1) nq = std::strtoull(pos[1].c_str(), nullptr, 10);
  if (pos.size() > 2) kinds = pos[2];
  const size_t dh = 2048, dr = 1024, clusters = std::max<size_t>(10, n / 100), k = 10;
  const float alpha = 1.0f;
  std::printf("search bench: %zu documents, hs %zu + rw %zu dims, %zu clusters, %zu queries, k=%zu, alpha=%.1f%s%s\n", n,
              dh, dr, clusters, nq, k, alpha, sq8 ? ", SQ8 indexes" : "", fp16 ? ", fp16 rows" : "");

  // Clustered data: centers, then points = center + noise; documents are
  // generated chunk by chunk from a fixed seed (the same for every index).
  std::mt19937 crng(7);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> ch(clusters * dh), cr(clusters * dr);
  for (auto& v : ch) v = g(crng);
  for (auto& v : cr) v = g(crng);
  auto make = [&](std::mt19937& rng, size_t count, std::vector<float>* hs, std::vector<float>* rw) {
    hs->resize(count * dh);
    rw->resize(count * dr);
    for (size_t i = 0; i < count; ++i) {
      const size_t c = rng() % clusters, c2 = (c + rng() % 3) % clusters;  // RW clusters overlap HS clusters only partly
      for (size_t j = 0; j < dh; ++j) (*hs)[i * dh + j] = ch[c * dh + j] + 0.7f * g(rng);
      for (size_t j = 0; j < dr; ++j) (*rw)[i * dr + j] = cr[c2 * dr + j] + 0.7f * g(rng);
    }
  };
  std::vector<float> qh, qr;
  std::mt19937 qrng(11);
  make(qrng, nq, &qh, &qr);
  const size_t chunk = std::min<size_t>(n, 100000);
  // Calls fn(first_id, count, hs, rw) for each chunk of the documents.
  auto for_chunks = [&](const std::function<bool(size_t, size_t, const float*, const float*)>& fn) {
    std::mt19937 rng(13);
    std::vector<float> hs, rw;
    for (size_t s = 0; s < n; s += chunk) {
      const size_t c = std::min(chunk, n - s);
      make(rng, c, &hs, &rw);
      if (!fn(s, c, hs.data(), rw.data())) return false;
    }
    return true;
  };
  auto ids_for = [](size_t first, size_t count) {
    std::vector<uint64_t> ids(count);
    for (size_t i = 0; i < count; ++i) ids[i] = first + i;
    return ids;
  };
  auto search_all = [&](const DualIndex& index, bool exact, std::vector<std::set<uint64_t>>* found) {
    found->assign(nq, {});
    auto t = Clock::now();
    for (size_t q = 0; q < nq; ++q) {
      SearchRequest r;
      r.hs = &qh[q * dh];
      r.rw = &qr[q * dr];
      r.k = k;
      r.alpha = alpha;
      r.exact = exact;
      auto hits = index.Search(r);
      for (const auto& h : *hits) (*found)[q].insert(h.id);
    }
    return Secs(t);
  };
  DualIndexSpec base;
  base.dim_hs = dh;
  base.dim_rw = dr;
  base.fp16_rows = fp16;

  if (n <= 200000) {
    // Baseline: one flat index over the concatenated unit halves [hs; rw]
    // (query [hs_q; alpha * rw_q]) against exact fused search over the two halves.
    auto exact = DualIndex::Create(base, Standardizer::Identity(dh), Standardizer::Identity(dr));
    faiss::IndexFlatIP flat(dh + dr);
    auto normalise_into = [](const float* src, size_t d, float* dst, float scale) {
      double s = 0;
      for (size_t j = 0; j < d; ++j) s += double(src[j]) * src[j];
      const float inv = static_cast<float>(scale / std::sqrt(s));
      for (size_t j = 0; j < d; ++j) dst[j] = src[j] * inv;
    };
    auto t = Clock::now();
    for_chunks([&](size_t first, size_t c, const float* hs, const float* rw) {
      std::vector<float> cat(c * (dh + dr));
      for (size_t i = 0; i < c; ++i) {
        normalise_into(hs + i * dh, dh, &cat[i * (dh + dr)], 1.0f);
        normalise_into(rw + i * dr, dr, &cat[i * (dh + dr) + dh], 1.0f);
      }
      flat.add(c, cat.data());
      return (*exact)->Add(ids_for(first, c), hs, rw).ok();
    });
    std::printf("loaded flat baseline and flat dual index in %.1f s\n", Secs(t));
    std::vector<float> qcat(nq * (dh + dr));
    for (size_t i = 0; i < nq; ++i) {
      normalise_into(&qh[i * dh], dh, &qcat[i * (dh + dr)], 1.0f);
      normalise_into(&qr[i * dr], dr, &qcat[i * (dh + dr) + dh], alpha);
    }
    std::vector<float> fd(k);
    std::vector<faiss::Index::idx_t> fl(k);
    flat.search(1, qcat.data(), k, fd.data(), fl.data());  // warm-up
    std::vector<std::set<uint64_t>> truth;
    (void)search_all(**exact, true, &truth);                  // warm-up
    t = Clock::now();
    size_t agree = 0;
    std::vector<std::vector<faiss::Index::idx_t>> flat_ids(nq, std::vector<faiss::Index::idx_t>(k));
    for (size_t q = 0; q < nq; ++q) flat.search(1, &qcat[q * (dh + dr)], k, fd.data(), flat_ids[q].data());
    const double flat_s = Secs(t);
    const double exact_s = search_all(**exact, true, &truth);
    for (size_t q = 0; q < nq; ++q)
      for (auto l : flat_ids[q]) agree += truth[q].count(static_cast<uint64_t>(l));
    std::printf("\n%-36s %10s %10s\n", "path (one query at a time)", "ms/query", "QPS");
    std::printf("%-36s %10.2f %10.1f\n", "faiss flat over [hs; rw] (baseline)", 1e3 * flat_s / nq, nq / flat_s);
    std::printf("%-36s %10.2f %10.1f\n", "exact fused (dual flat)", 1e3 * exact_s / nq, nq / exact_s);
    std::printf("exact fused / flat [hs; rw] time ratio: %.2f (same top-10: %.3f)\n\n", exact_s / flat_s,
                double(agree) / (nq * k));
  }

  std::printf("%-14s %10s %12s %10s %10s %10s\n", "index", "build s", "exact QPS", "ANN QPS", "x exact", "recall@10");
  std::stringstream ks(kinds);
  std::string kind;
  while (std::getline(ks, kind, ',')) {
    auto parsed = ParseIndexKind(kind);
    if (!parsed.ok()) { std::fprintf(stderr, "%s\n", parsed.status().message().c_str()); return 2; }
    DualIndexSpec spec = base;
    spec.hs.kind = spec.rw.kind = *parsed;
    spec.hs.sq8 = spec.rw.sq8 = sq8;
    spec.hs.nprobe = spec.rw.nprobe = nprobe;
    spec.min_train_rows = chunk;  // IVF / SQ8 train on the first chunk
    auto ann = DualIndex::Create(spec, Standardizer::Identity(dh), Standardizer::Identity(dr));
    auto t = Clock::now();
    if (!for_chunks([&](size_t first, size_t c, const float* hs, const float* rw) {
          return (*ann)->Add(ids_for(first, c), hs, rw).ok();
        }))
      return 1;
    const double build = Secs(t);
    std::vector<std::set<uint64_t>> truth, got;
    const double exact_s = search_all(**ann, true, &truth);
    const double ann_s = search_all(**ann, false, &got);
    double hit = 0;
    for (size_t q = 0; q < nq; ++q)
      for (uint64_t id : got[q]) hit += truth[q].count(id);
    std::printf("%-14s %10.1f %12.2f %10.1f %10.1f %10.3f\n", (kind + (sq8 ? "+sq8" : "")).c_str(), build, nq / exact_s,
                nq / ann_s, exact_s / ann_s, hit / (nq * k));
  }
  return 0;
}
