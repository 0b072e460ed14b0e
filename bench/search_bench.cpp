// bench/search_bench: fused search over synthetic clustered vectors shaped like
// OLMoE's (hs 2048, rw 1024). Prints, in one run:
//   - one Faiss flat inner-product search over the concatenated [hs; rw]
//     vectors (the baseline), and exact fused search, per query, and their ratio;
//   - the exact scan against memory bandwidth (an OpenBLAS matrix-vector
//     product over the same rows) and against the previous exact path (two
//     Faiss passes), one query at a time, 16 queued queries per pass, and 16
//     client threads at once through a SearchBatcher (as the server runs them);
//   - per ANN index kind: build time, QPS and recall@10 against exact fused search.
//   Each ANN index is compared with the exact fused search of the same index
//   (same rows), so recall and the QPS ratio are like for like;
//   - for hnsw, the previous HNSW (Faiss IndexHNSWFlat, one per half, same M
//     and efConstruction) against the engine's (hnswlib over int8 codes) on the
//     first --faiss-rows documents: build time, and the fused search of each
//     (same candidates per half, same exact re-scoring) against exact search.
// Usage: search_bench [N=100000] [QUERIES=100] [KINDS=hnsw,ivf] [--sq8] [--fp16] [--nprobe=16]
//                     [--ef-search=64] [--faiss-rows=20000]
//   --sq8: 8-bit scalar-quantized ANN indexes; --fp16: fp16 rows for exact
//   scoring (with both, 1M documents fit in ~10 GB). The flat [hs; rw]
//   baseline runs when N <= 200000; --faiss-rows=0 skips the Faiss HNSW one.
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>

#include <atomic>
#include <chrono>
#include <thread>
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

#include <faiss/utils/distances.h>

#include <algorithm>
#include <fstream>

#include "index/dual_index.h"
#include "bench/cpu_flags.h"
#include "index/exact_scan.h"
#include "index/hnsw_graph.h"
#include "index/search_batcher.h"

// OpenBLAS's matrix-vector product: the memory-bandwidth baseline.
extern "C" void sgemv_(const char* trans, const int* m, const int* n, const float* alpha, const float* a, const int* lda,
                       const float* x, const int* incx, const float* beta, float* y, const int* incy);

using namespace moeedb;
using Clock = std::chrono::steady_clock;

static double Secs(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

int main(int argc, char** argv) {
  size_t n = 100000, nq = 100;
  std::string kinds = "hnsw,ivf";
  bool sq8 = false, fp16 = false;
  int nprobe = 16, ef_search = 64;
  size_t faiss_rows = 20000;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--sq8") == 0) sq8 = true;
    else if (std::strcmp(argv[i], "--fp16") == 0) fp16 = true;
    else if (std::strncmp(argv[i], "--nprobe=", 9) == 0) nprobe = std::atoi(argv[i] + 9);
    else if (std::strncmp(argv[i], "--ef-search=", 12) == 0) ef_search = std::atoi(argv[i] + 12);
    else if (std::strncmp(argv[i], "--faiss-rows=", 13) == 0) faiss_rows = std::strtoull(argv[i] + 13, nullptr, 10);
    else pos.push_back(argv[i]);
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (pos.size() > 0) n = std::strtoull(pos[0].c_str(), nullptr, 10);
  if (pos.size() > 1) nq = std::strtoull(pos[1].c_str(), nullptr, 10);
  if (pos.size() > 2) kinds = pos[2];
  const size_t dh = 2048, dr = 1024, clusters = std::max<size_t>(10, n / 100), k = 10;
  const float alpha = 1.0f;
  std::printf("search bench: CPU flags: %s; exact scan: %s; HNSW distances: %s\n", bench::CpuFlags().c_str(),
              ScanSimdLevel(), HnswGraph::SimdLevel());
  std::printf("search bench: BLAS (the bandwidth baseline's matrix-vector product): %s\n", bench::BlasCore().c_str());
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
  auto request = [&](size_t q, bool exact) {
    SearchRequest r;
    r.hs = &qh[q * dh];
    r.rw = &qr[q * dr];
    r.k = k;
    r.alpha = alpha;
    r.exact = exact;
    return r;
  };
  auto search_all = [&](const DualIndex& index, bool exact, std::vector<std::set<uint64_t>>* found) {
    found->assign(nq, {});
    auto t = Clock::now();
    for (size_t q = 0; q < nq; ++q) {
      auto hits = index.Search(request(q, exact));
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
    std::printf("exact fused / flat [hs; rw] time ratio: %.2f (same top-10: %.3f)\n", exact_s / flat_s,
                double(agree) / (nq * k));

    // The memory-bandwidth baseline: one OpenBLAS matrix-vector product over
    // the same n x (hs + rw) f32 rows per query (all threads), no top-k.
    const int m_rows = static_cast<int>(dh + dr), n_rows = static_cast<int>(n), one = 1;
    const float f_one = 1.0f, f_zero = 0.0f;
    std::vector<float> y(n);
    const float* xb = flat.get_xb();
    sgemv_("T", &m_rows, &n_rows, &f_one, xb, &m_rows, qcat.data(), &one, &f_zero, y.data(), &one);  // warm-up
    t = Clock::now();
    for (size_t q = 0; q < nq; ++q)
      sgemv_("T", &m_rows, &n_rows, &f_one, xb, &m_rows, &qcat[q * (dh + dr)], &one, &f_zero, y.data(), &one);
    const double gemv_s = Secs(t);
    const double gb = double(n) * (dh + dr) * 4 / 1e9;

    // The previous exact path, as it ran before the fused scan: two Faiss
    // inner-product passes over the halves' rows, a hit per row, a partial sort.
    std::vector<float> hs_rows(n * dh), rw_rows(n * dr);
    for (size_t p = 0; p < n; ++p) {
      std::memcpy(&hs_rows[p * dh], xb + p * (dh + dr), dh * 4);
      std::memcpy(&rw_rows[p * dr], xb + p * (dh + dr) + dh, dr * 4);
    }
    t = Clock::now();
    for (size_t q = 0; q < nq; ++q) {
      std::vector<float> ih(n), ir(n);
      faiss::fvec_inner_products_ny(ih.data(), &qcat[q * (dh + dr)], hs_rows.data(), dh, n);
      faiss::fvec_inner_products_ny(ir.data(), &qcat[q * (dh + dr) + dh], rw_rows.data(), dr, n);
      std::vector<std::pair<float, size_t>> all;
      all.reserve(n);
      for (size_t p = 0; p < n; ++p) all.push_back({ih[p] + ir[p], p});
      std::partial_sort(all.begin(), all.begin() + k, all.end(), std::greater<>());
    }
    const double previous_s = Secs(t);

    // 16 queued queries per SearchBatch: the rows are read once per batch.
    const size_t batch = 16;
    std::vector<std::set<uint64_t>> batched(nq);
    t = Clock::now();
    for (size_t q0 = 0; q0 < nq; q0 += batch) {
      std::vector<SearchRequest> rs;
      for (size_t q = q0; q < std::min(nq, q0 + batch); ++q) rs.push_back(request(q, true));
      auto hits = (*exact)->SearchBatch(rs);
      for (size_t i = 0; i < rs.size(); ++i)
        for (const auto& h : (*hits)[i]) batched[q0 + i].insert(h.id);
    }
    const double batch_s = Secs(t);
    size_t same = 0;
    for (size_t q = 0; q < nq; ++q) same += batched[q] == truth[q];

    // 16 client threads searching at once through a SearchBatcher, as the
    // server's collections do: concurrent exact searches share passes.
    SearchBatcher batcher;
    std::vector<std::set<uint64_t>> concurrent(nq);
    std::atomic<size_t> next_q{0};
    t = Clock::now();
    {
      std::vector<std::thread> clients;
      for (int c = 0; c < 16; ++c)
        clients.emplace_back([&] {
          for (size_t q = next_q++; q < nq; q = next_q++) {
            auto hits = batcher.Search(**exact, request(q, true));
            for (const auto& h : *hits) concurrent[q].insert(h.id);
          }
        });
      for (auto& c : clients) c.join();
    }
    const double concurrent_s = Secs(t);
    size_t same_concurrent = 0;
    for (size_t q = 0; q < nq; ++q) same_concurrent += concurrent[q] == truth[q];

    std::printf("\n%-44s %10s %10s %10s\n", "exact path", "ms/query", "QPS", "GB/s");
    std::printf("%-44s %10.2f %10.1f %10.1f\n", "OpenBLAS sgemv over the rows (bandwidth)", 1e3 * gemv_s / nq, nq / gemv_s,
                gb * nq / gemv_s);
    std::printf("%-44s %10.2f %10.1f %10.1f\n", "previous exact path (two Faiss passes)", 1e3 * previous_s / nq,
                nq / previous_s, gb * nq / previous_s);
    std::printf("%-44s %10.2f %10.1f %10.1f\n", "exact fused scan, one query at a time", 1e3 * exact_s / nq, nq / exact_s,
                gb * nq / exact_s);
    std::printf("%-44s %10.2f %10.1f %10.1f\n", "exact fused scan, 16 queued queries", 1e3 * batch_s / nq, nq / batch_s,
                gb * nq / batch_s);
    std::printf("%-44s %10.2f %10.1f %10.1f\n", "exact fused scan, 16 client threads (batcher)", 1e3 * concurrent_s / nq,
                nq / concurrent_s, gb * nq / concurrent_s);
    std::printf("one query: %.2f of the sgemv rate; %.2fx the previous exact path\n", gemv_s / exact_s,
                previous_s / exact_s);
    std::printf("16 queued: %.2fx the QPS of one at a time, %.2fx the previous exact path; same top-10 as one at a "
                "time for %zu of %zu queries\n",
                exact_s / batch_s, previous_s / batch_s, same, nq);
    std::printf("16 client threads: %.2fx the QPS of one at a time, %.1f queries per pass (%llu passes); same top-10 "
                "for %zu of %zu queries\n\n",
                exact_s / concurrent_s, double(batcher.batched_requests()) / std::max<uint64_t>(1, batcher.batches()),
                static_cast<unsigned long long>(batcher.batches()), same_concurrent, nq);
  }

  if (faiss_rows > 0 && !sq8 && kinds.find("hnsw") != std::string::npos) {
    // The previous HNSW against the engine's, on the first faiss_rows documents.
    const size_t m = std::min(faiss_rows, n);
    DualIndexSpec spec = base;
    spec.hs.kind = spec.rw.kind = IndexKind::kHnsw;
    spec.hs.ef_search = spec.rw.ef_search = ef_search;
    auto graph = DualIndex::Create(spec, Standardizer::Identity(dh), Standardizer::Identity(dr));
    faiss::IndexHNSWFlat fh(dh, spec.hs.hnsw_m, faiss::METRIC_INNER_PRODUCT), fr(dr, spec.rw.hnsw_m, faiss::METRIC_INNER_PRODUCT);
    fh.hnsw.efConstruction = fr.hnsw.efConstruction = spec.hs.ef_construction;
    std::mt19937 rng(13);
    std::vector<float> hs, rw;
    make(rng, m, &hs, &rw);
    std::vector<float> hn(m * dh), rn(m * dr);
    const Standardizer sh = Standardizer::Identity(dh), sr = Standardizer::Identity(dr);
    for (size_t i = 0; i < m; ++i) {
      sh.Apply(&hs[i * dh], &hn[i * dh]);
      sr.Apply(&rw[i * dr], &rn[i * dr]);
    }
    auto t = Clock::now();
    if (!(*graph)->Add(ids_for(0, m), hs.data(), rw.data()).ok()) return 1;
    const double graph_build = Secs(t);
    t = Clock::now();
    fh.add(m, hn.data());
    fr.add(m, rn.data());
    const double faiss_build = Secs(t);
    // Fused search as DualIndex runs it: oversample * k candidates per half,
    // the union re-scored exactly.
    const size_t kk = 4 * k;
    fh.hnsw.efSearch = fr.hnsw.efSearch = std::max<int>(ef_search, static_cast<int>(kk));
    std::vector<std::set<uint64_t>> truth(nq), via_faiss(nq), via_graph(nq);
    auto fused = [&](size_t q, const std::vector<faiss::Index::idx_t>& cands) {
      std::vector<float> qhn(dh), qrn(dr);
      sh.Apply(&qh[q * dh], qhn.data());
      sr.Apply(&qr[q * dr], qrn.data());
      std::vector<std::pair<float, uint64_t>> scored;
      std::set<faiss::Index::idx_t> seen;
      for (auto c : cands) {
        if (c < 0 || !seen.insert(c).second) continue;
        float s = 0;
        for (size_t j = 0; j < dh; ++j) s += qhn[j] * hn[c * dh + j];
        for (size_t j = 0; j < dr; ++j) s += alpha * qrn[j] * rn[c * dr + j];
        scored.push_back({-s, static_cast<uint64_t>(c)});
      }
      std::sort(scored.begin(), scored.end());
      std::set<uint64_t> out;
      for (size_t i = 0; i < std::min(k, scored.size()); ++i) out.insert(scored[i].second);
      return out;
    };
    auto ids_of = [&](size_t q, bool exact, std::set<uint64_t>* out) {
      auto hits = (*graph)->Search(request(q, exact));  // kept alive while read
      for (const auto& h : *hits) out->insert(h.id);
    };
    for (size_t q = 0; q < nq; ++q) ids_of(q, true, &truth[q]);
    t = Clock::now();
    for (size_t q = 0; q < nq; ++q) {
      std::vector<float> qhn(dh), qrn(dr), d1(kk), d2(kk);
      sh.Apply(&qh[q * dh], qhn.data());
      sr.Apply(&qr[q * dr], qrn.data());
      std::vector<faiss::Index::idx_t> l1(kk), l2(kk);
      fh.search(1, qhn.data(), kk, d1.data(), l1.data());
      fr.search(1, qrn.data(), kk, d2.data(), l2.data());
      l1.insert(l1.end(), l2.begin(), l2.end());
      via_faiss[q] = fused(q, l1);
    }
    const double faiss_s = Secs(t);
    t = Clock::now();
    for (size_t q = 0; q < nq; ++q) ids_of(q, false, &via_graph[q]);
    const double graph_s = Secs(t);
    auto recall = [&](const std::vector<std::set<uint64_t>>& got) {
      double hit = 0;
      for (size_t q = 0; q < nq; ++q)
        for (uint64_t id : got[q]) hit += truth[q].count(id);
      return hit / double(nq * k);
    };
    std::printf("HNSW on the first %zu documents (M %d, efConstruction %d, efSearch %d, %zu candidates per half):\n", m,
                spec.hs.hnsw_m, spec.hs.ef_construction, ef_search, kk);
    std::printf("%-40s %10s %10s %10s\n", "HNSW", "build s", "QPS", "recall@10");
    std::printf("%-40s %10.1f %10.1f %10.3f\n", "previous: Faiss IndexHNSWFlat per half", faiss_build, nq / faiss_s,
                recall(via_faiss));
    std::printf("%-40s %10.1f %10.1f %10.3f\n", "engine: hnswlib over int8 codes", graph_build, nq / graph_s,
                recall(via_graph));
    std::printf("engine / previous: build %.2fx faster, %.2fx the QPS\n\n", faiss_build / graph_build, faiss_s / graph_s);
  }

  std::printf("%-14s %10s %12s %10s %10s %10s\n", "index", "build s", "exact QPS", "ANN QPS", "x exact", "recall@10");
  std::stringstream ks(kinds);
  std::string kind;
  while (std::getline(ks, kind, ',')) {
    auto parsed = kIndexKinds.Parse(kind);
    if (!parsed.ok()) { std::fprintf(stderr, "%s\n", parsed.status().message().c_str()); return 2; }
    DualIndexSpec spec = base;
    spec.hs.kind = spec.rw.kind = *parsed;
    spec.hs.codes = spec.rw.codes = sq8 ? moeedb::CodeKind::kSq8 : moeedb::CodeKind::kNone;
    spec.hs.nprobe = spec.rw.nprobe = nprobe;
    spec.hs.ef_search = spec.rw.ef_search = ef_search;
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
