// bench/quantized_search: the dual index with its codes in RAM and its full
// rows on disk (index/dual_index.h), against exact fused search and against
// Faiss's own quantized indexes run in the same process on the same vectors.
//
// For each moeedb configuration (index kind / code kind / oversample), over
// the same documents and queries:
//   - bytes per document: the index's heap (DualIndex::memory_bytes), its
//     row files (mapped_bytes), and measured: the growth of the process's
//     anonymous RSS (RssAnon) while it was built, and its file-backed RSS;
//   - recall@10 of the fused ranking (cos_HS + alpha * cos_RW) against the
//     exact one, and whether every returned score equals the exact score;
//   - p50 / p99 latency of one query at a time, and QPS with 2 client threads.
// The Faiss baselines index the concatenation [hs; rw] (a fused query is
// [q_hs; alpha * q_rw], so their inner product is the fused score) as
// IndexBinaryFlat (sign codes), IndexHNSWSQ (8-bit) and IndexIVFPQ: their
// bytes (serialized), recall@10 and latency, with no re-scoring.
//
//   quantized_search (--vectors FILE.jsonl | --synthetic HS,RW) [--docs N] [--queries Q]
//                    [--alpha A] [--configs LIST] [--oversample LIST] [--nprobe N]
//                    [--faiss binaryflat,hnswsq,ivfpq]
// FILE.jsonl is `moeedb embed` output ({"hs": [...], "rw": [...]} a line):
// the first N lines are the documents, the next Q the queries (a binary
// copy, FILE.f32, is written beside it on first read). --synthetic embeds
// nothing: clustered random vectors of those dimensions (OLMoE's: 2048,1024).
// Prints one JSON object (with the CPU flags it ran with) on stdout.
#include <faiss/IndexBinaryFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/IndexFlat.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_samples.h"
#include "bench/cpu_flags.h"
#include "index/binary_codes.h"
#include "index/dual_index.h"

using namespace moeedb;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// Rows a collection's calibration statistics are fitted on here, and rows
// added per Add call (an ingest's batches); neither is the search k limit.
constexpr size_t kCalibrationRows = 10'000;
constexpr size_t kAddBatch = 10'000;

[[noreturn]] void Die(const std::string& m) {
  std::fprintf(stderr, "quantized_search: %s\n", m.c_str());
  std::exit(2);
}

struct Vectors {
  size_t dh = 0, dr = 0, n = 0;
  std::vector<float> hs, rw;
};

Vectors ReadJsonl(const std::string& path, size_t want) {
  Vectors v;
  const std::string cache = path + ".f32";
  std::ifstream bin(cache, std::ios::binary);
  if (bin) {
    uint64_t head[3];
    bin.read(reinterpret_cast<char*>(head), sizeof head);
    v.n = head[0], v.dh = head[1], v.dr = head[2];
    if (v.n >= want) {
      v.n = want;
      v.hs.resize(v.n * v.dh), v.rw.resize(v.n * v.dr);
      std::vector<float> row(v.dh + v.dr);
      for (size_t i = 0; i < v.n; ++i) {
        bin.read(reinterpret_cast<char*>(row.data()), static_cast<std::streamsize>(row.size() * 4));
        std::copy(row.begin(), row.begin() + v.dh, v.hs.begin() + i * v.dh);
        std::copy(row.begin() + v.dh, row.end(), v.rw.begin() + i * v.dr);
      }
      if (bin) return v;
    }
    v = Vectors{};
  }
  std::ifstream in(path);
  if (!in) Die("cannot read " + path);
  std::string line;
  while (v.n < want && std::getline(in, line)) {
    const json j = json::parse(line);
    const auto h = j.at("hs").get<std::vector<float>>(), r = j.at("rw").get<std::vector<float>>();
    if (v.n == 0) v.dh = h.size(), v.dr = r.size();
    if (h.size() != v.dh || r.size() != v.dr) Die("vectors of different sizes in " + path);
    v.hs.insert(v.hs.end(), h.begin(), h.end());
    v.rw.insert(v.rw.end(), r.begin(), r.end());
    ++v.n;
  }
  if (v.n < want) Die(path + " holds " + std::to_string(v.n) + " vectors, " + std::to_string(want) + " needed");
  std::ofstream out(cache, std::ios::binary | std::ios::trunc);
  const uint64_t head[3] = {v.n, v.dh, v.dr};
  out.write(reinterpret_cast<const char*>(head), sizeof head);
  for (size_t i = 0; i < v.n; ++i) {
    out.write(reinterpret_cast<const char*>(&v.hs[i * v.dh]), static_cast<std::streamsize>(v.dh * 4));
    out.write(reinterpret_cast<const char*>(&v.rw[i * v.dr]), static_cast<std::streamsize>(v.dr * 4));
  }
  return v;
}

// Rows around 1000 cluster centres with a shared offset, as embeddings are.
Vectors Synthetic(size_t dh, size_t dr, size_t n) {
  Vectors v;
  v.dh = dh, v.dr = dr, v.n = n;
  std::mt19937 rng(17);
  std::normal_distribution<float> g(0.f, 1.f);
  const size_t clusters = 1000;
  std::vector<float> ch(clusters * dh), cr(clusters * dr), off_h(dh), off_r(dr);
  for (auto& x : ch) x = g(rng);
  for (auto& x : cr) x = g(rng);
  for (auto& x : off_h) x = 2 * g(rng);
  for (auto& x : off_r) x = 2 * g(rng);
  v.hs.resize(n * dh), v.rw.resize(n * dr);
  std::uniform_int_distribution<size_t> pick(0, clusters - 1);
  for (size_t i = 0; i < n; ++i) {
    const size_t c = pick(rng);
    for (size_t j = 0; j < dh; ++j) v.hs[i * dh + j] = off_h[j] + ch[c * dh + j] + 0.8f * g(rng);
    for (size_t j = 0; j < dr; ++j) v.rw[i * dr + j] = off_r[j] + cr[c * dr + j] + 0.8f * g(rng);
  }
  return v;
}

struct Timing {
  double p50_ms = 0, p99_ms = 0, qps = 0;
};

// Latency one query at a time, then QPS with two client threads.
template <class F>
Timing Time(size_t nq, F&& search) {
  Timing t;
  std::vector<double> ms;
  for (size_t q = 0; q < nq; ++q) {
    const auto t0 = Clock::now();
    search(q);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  const json p = bench::Percentiles(ms);
  t.p50_ms = p["p50_ms"].get<double>(), t.p99_ms = p["p99_ms"].get<double>();
  std::atomic<size_t> next{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < 2; ++c)
    clients.emplace_back([&] {
      for (size_t q; (q = next.fetch_add(1)) < 2 * nq;) search(q % nq);
    });
  for (auto& th : clients) th.join();
  t.qps = static_cast<double>(2 * nq) / std::chrono::duration<double>(Clock::now() - t0).count();
  return t;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) if (!x.empty()) out.push_back(x);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string vectors_path, synthetic;
  size_t docs = 100000, nq = 200;
  double alpha = 1.0;
  // Faiss's scalar codes scanned flat (sq8, sq4) are left out by default:
  // Debian's generic Faiss build scores them without SIMD (~100 ms a query at 100k).
  std::string configs = "flat/binary,ivf/binary,hnsw/binary,ivf/pq,hnsw/pq,hnsw/none,hnsw/sq8";
  std::string oversamples = "2,4,8,16";
  int nprobe = 32;
  std::string faiss_kinds = "binaryflat,hnswsq,ivfpq";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--vectors") vectors_path = next();
    else if (a == "--synthetic") synthetic = next();
    else if (a == "--docs") docs = std::stoul(next());
    else if (a == "--queries") nq = std::stoul(next());
    else if (a == "--alpha") alpha = std::stod(next());
    else if (a == "--configs") configs = next();
    else if (a == "--oversample") oversamples = next();
    else if (a == "--nprobe") nprobe = std::stoi(next());
    else if (a == "--faiss") faiss_kinds = next();
    else Die("unknown flag " + a);
  }
  Vectors all;
  if (!vectors_path.empty()) all = ReadJsonl(vectors_path, docs + nq);
  else if (!synthetic.empty()) {
    const auto dims = Split(synthetic);
    if (dims.size() != 2) Die("--synthetic HS,RW");
    all = Synthetic(std::stoul(dims[0]), std::stoul(dims[1]), docs + nq);
  } else Die("--vectors FILE or --synthetic HS,RW");
  const size_t dh = all.dh, dr = all.dr;
  const float* qhs = all.hs.data() + docs * dh;
  const float* qrw = all.rw.data() + docs * dr;
  std::vector<uint64_t> ids(docs);
  for (size_t i = 0; i < docs; ++i) ids[i] = i + 1;
  // The collection's calibration: statistics of a sample of the documents.
  const size_t calib = std::min<size_t>(docs, kCalibrationRows);
  const Standardizer sh = Standardizer::Fit(all.hs.data(), calib, dh), sr = Standardizer::Fit(all.rw.data(), calib, dr);
  const char* tmp = std::getenv("TMPDIR");
  const std::string rows_folder = std::string(tmp ? tmp : "/var/tmp") + "/moeedb-quantized-bench";

  json out = {{"cpu_flags", bench::CpuFlags()}, {"hamming", HammingSimdLevel()}, {"docs", docs}, {"queries", nq}, {"nprobe", nprobe},
              {"dim_hs", dh}, {"dim_rw", dr}, {"alpha", alpha},
              {"source", vectors_path.empty() ? "synthetic " + synthetic : vectors_path}};

  // The exact fused top 10 of each query: the reference every row is measured against.
  DualIndexSpec exact_spec;
  exact_spec.dim_hs = dh, exact_spec.dim_rw = dr;
  auto exact = DualIndex::Create(exact_spec, sh, sr);
  if (!exact.ok()) Die(exact.status().ToString());
  for (size_t at = 0; at < docs; at += kAddBatch) {
    const size_t n = std::min<size_t>(kAddBatch, docs - at);
    std::vector<uint64_t> part(ids.begin() + at, ids.begin() + at + n);
    if (!(*exact)->Add(part, all.hs.data() + at * dh, all.rw.data() + at * dr).ok()) Die("exact add");
  }
  std::vector<std::vector<Hit>> truth(nq);
  auto request = [&](size_t q) {
    SearchRequest r;
    r.hs = qhs + q * dh, r.rw = qrw + q * dr, r.k = 10, r.alpha = static_cast<float>(alpha);
    return r;
  };
  for (size_t q = 0; q < nq; ++q) {
    SearchRequest r = request(q);
    r.exact = true;
    truth[q] = *(*exact)->Search(r);
  }
  const Timing exact_t = Time(nq, [&](size_t q) { SearchRequest r = request(q); r.exact = true; (void)(*exact)->Search(r); });
  const double exact_bytes = static_cast<double>((*exact)->memory_bytes()) / static_cast<double>(docs);
  out["exact"] = {{"heap_bytes_per_doc", exact_bytes}, {"p50_ms", exact_t.p50_ms}, {"p99_ms", exact_t.p99_ms}, {"qps", exact_t.qps}};
  std::fprintf(stderr, "exact: %.0f B/doc, p50 %.2f ms, p99 %.2f ms, %.0f qps\n", exact_bytes, exact_t.p50_ms,
               exact_t.p99_ms, exact_t.qps);
  auto recall_of = [&](size_t q, const std::vector<uint64_t>& got) {
    std::set<uint64_t> want;
    for (const Hit& h : truth[q]) want.insert(h.id);
    size_t found = 0;
    for (uint64_t id : got) found += want.count(id);
    return static_cast<double>(found) / static_cast<double>(std::max<size_t>(1, want.size()));
  };
  // Standardized queries, for the Faiss baselines (the index standardizes its own).
  std::vector<float> qcat(nq * (dh + dr));
  for (size_t q = 0; q < nq; ++q) {
    sh.Apply(qhs + q * dh, &qcat[q * (dh + dr)]);
    sr.Apply(qrw + q * dr, &qcat[q * (dh + dr) + dh]);
    for (size_t j = 0; j < dr; ++j) qcat[q * (dh + dr) + dh + j] *= static_cast<float>(alpha);
  }
  exact->reset();
  malloc_trim(0);

  json rows = json::array();
  for (const std::string& config : Split(configs)) {
    const auto slash = config.find('/');
    if (slash == std::string::npos) Die("a config is KIND/CODES: " + config);
    auto kind = kIndexKinds.Parse(config.substr(0, slash));
    auto codes = kCodeKinds.Parse(config.substr(slash + 1));
    if (!kind.ok() || !codes.ok()) Die("bad config " + config);
    DualIndexSpec spec;
    spec.dim_hs = dh, spec.dim_rw = dr;
    spec.hs.kind = spec.rw.kind = *kind;
    spec.hs.codes = spec.rw.codes = *codes;
    spec.hs.nprobe = spec.rw.nprobe = nprobe;
    spec.rows_on_disk = true;
    malloc_trim(0);
    const int64_t anon0 = bench::StatusBytes("RssAnon:"), file0 = bench::StatusBytes("RssFile:");
    const auto t0 = Clock::now();
    auto ix = DualIndex::Create(spec, sh, sr, rows_folder);
    if (!ix.ok()) Die(ix.status().ToString());
    for (size_t at = 0; at < docs; at += kAddBatch) {
      const size_t n = std::min<size_t>(kAddBatch, docs - at);
      std::vector<uint64_t> part(ids.begin() + at, ids.begin() + at + n);
      Status st = (*ix)->Add(part, all.hs.data() + at * dh, all.rw.data() + at * dr);
      if (!st.ok()) Die(config + ": " + st.ToString());
    }
    const double build_s = std::chrono::duration<double>(Clock::now() - t0).count();
    malloc_trim(0);
    const double anon = static_cast<double>(bench::StatusBytes("RssAnon:") - anon0) / double(docs);
    const double file = static_cast<double>(bench::StatusBytes("RssFile:") - file0) / double(docs);
    const double heap = static_cast<double>((*ix)->memory_bytes()) / double(docs);
    const double mapped = static_cast<double>((*ix)->mapped_bytes()) / double(docs);
    const bool coded = *kind != IndexKind::kFlat || *codes != CodeKind::kNone;
    for (const std::string& os : coded ? Split(oversamples) : std::vector<std::string>{"1"}) {
      const double factor = std::stod(os);
      double recall = 0, worst_score_error = 0;
      for (size_t q = 0; q < nq; ++q) {
        SearchRequest r = request(q);
        r.oversample = factor;
        auto hits = (*ix)->Search(r);
        if (!hits.ok()) Die(hits.status().ToString());
        std::vector<uint64_t> got;
        for (const Hit& h : *hits) {
          got.push_back(h.id);
          // The exact fused score of this id, from the reference's cosines.
          auto ref = (*ix)->Score(r.hs, r.rw, r.alpha, {h.id});
          worst_score_error = std::max(worst_score_error, std::fabs(double((*ref)[0].score) - double(h.score)));
        }
        recall += recall_of(q, got) / static_cast<double>(nq);
      }
      const Timing t = Time(nq, [&](size_t q) {
        SearchRequest r = request(q);
        r.oversample = factor;
        (void)(*ix)->Search(r);
      });
      rows.push_back({{"index", config}, {"oversample", factor}, {"recall_at_10", recall},
                      {"max_score_error", worst_score_error}, {"heap_bytes_per_doc", heap},
                      {"rss_anon_bytes_per_doc", anon}, {"row_file_bytes_per_doc", mapped},
                      {"rss_file_bytes_per_doc", file}, {"build_s", build_s}, {"p50_ms", t.p50_ms},
                      {"p99_ms", t.p99_ms}, {"qps", t.qps}, {"qps_vs_exact", t.qps / exact_t.qps}});
      std::fprintf(stderr, "%-12s x%-4s recall %.3f  heap %6.0f B/doc  anon %6.0f  rows %6.0f  p50 %.2f p99 %.2f ms  %.0f qps\n",
                   config.c_str(), os.c_str(), recall, heap, anon, mapped, t.p50_ms, t.p99_ms, t.qps);
    }
    ix->reset();
  }
  out["moeedb"] = rows;

  // Faiss on the concatenated, standardized [hs; alpha-weighted rw] vectors.
  const size_t d = dh + dr;
  std::vector<float> cat(docs * d);
  for (size_t i = 0; i < docs; ++i) {
    sh.Apply(all.hs.data() + i * dh, &cat[i * d]);
    sr.Apply(all.rw.data() + i * dr, &cat[i * d + dh]);
  }
  all = Vectors{};
  json faiss_rows = json::array();
  auto faiss_row = [&](const std::string& name, size_t bytes, double build_s, auto&& search) {
    double recall = 0;
    for (size_t q = 0; q < nq; ++q) recall += recall_of(q, search(q)) / static_cast<double>(nq);
    const Timing t = Time(nq, [&](size_t q) { (void)search(q); });
    faiss_rows.push_back({{"index", name}, {"recall_at_10", recall}, {"bytes_per_doc", double(bytes) / double(docs)},
                          {"build_s", build_s}, {"p50_ms", t.p50_ms}, {"p99_ms", t.p99_ms}, {"qps", t.qps}});
    std::fprintf(stderr, "faiss %-22s recall %.3f  %6.0f B/doc  p50 %.2f p99 %.2f ms  %.0f qps\n", name.c_str(), recall,
                 double(bytes) / double(docs), t.p50_ms, t.p99_ms, t.qps);
  };
  auto labels_to_ids = [](const std::vector<faiss::Index::idx_t>& l) {
    std::vector<uint64_t> got;
    for (auto x : l) if (x >= 0) got.push_back(static_cast<uint64_t>(x) + 1);
    return got;
  };
  auto wanted = [&](const char* kind) { return ("," + faiss_kinds + ",").find(std::string(",") + kind + ",") != std::string::npos; };
  if (wanted("binaryflat")) {  // sign codes of the concatenation (Faiss does not centre: standardized rows are centred already)
    const size_t bytes = (d + 7) / 8;
    auto encode = [&](const float* x, uint8_t* code) {
      std::fill(code, code + bytes, 0);
      for (size_t j = 0; j < d; ++j) if (x[j] > 0) code[j / 8] |= uint8_t(1u << (j % 8));
    };
    const auto t0 = Clock::now();
    faiss::IndexBinaryFlat bf(static_cast<int>(8 * bytes));
    std::vector<uint8_t> codes(docs * bytes);
    for (size_t i = 0; i < docs; ++i) encode(&cat[i * d], &codes[i * bytes]);
    bf.add(static_cast<faiss::Index::idx_t>(docs), codes.data());
    const double build_s = std::chrono::duration<double>(Clock::now() - t0).count();
    faiss_row("IndexBinaryFlat", docs * bytes, build_s, [&](size_t q) {
      std::vector<uint8_t> qc(bytes);
      encode(&qcat[q * d], qc.data());
      std::vector<int32_t> dist(10);
      std::vector<faiss::Index::idx_t> lab(10);
      bf.search(1, qc.data(), 10, dist.data(), lab.data());
      return labels_to_ids(lab);
    });
  }
  if (wanted("hnswsq")) {
    const auto t0 = Clock::now();
    faiss::IndexHNSWSQ hsq(static_cast<int>(d), faiss::ScalarQuantizer::QT_8bit, 32, faiss::METRIC_INNER_PRODUCT);
    hsq.hnsw.efConstruction = 80;
    hsq.train(static_cast<faiss::Index::idx_t>(std::min<size_t>(docs, 100000)), cat.data());
    hsq.add(static_cast<faiss::Index::idx_t>(docs), cat.data());
    hsq.hnsw.efSearch = 64;
    const double build_s = std::chrono::duration<double>(Clock::now() - t0).count();
    faiss::VectorIOWriter w;
    faiss::write_index(&hsq, &w);
    faiss_row("IndexHNSWSQ(8bit,M32)", w.data.size(), build_s, [&](size_t q) {
      std::vector<float> dist(10);
      std::vector<faiss::Index::idx_t> lab(10);
      hsq.search(1, &qcat[q * d], 10, dist.data(), lab.data());
      return labels_to_ids(lab);
    });
  }
  if (wanted("ivfpq")) {
    size_t m = d / 8;
    while (m > 1 && d % m != 0) --m;
    const size_t nlist = static_cast<size_t>(4 * std::sqrt(double(docs)));
    const auto t0 = Clock::now();
    faiss::IndexFlatIP coarse(static_cast<int>(d));
    faiss::IndexIVFPQ ivfpq(&coarse, static_cast<int>(d), nlist, m, 8, faiss::METRIC_INNER_PRODUCT);
    ivfpq.cp.max_points_per_centroid = 64;
    ivfpq.cp.niter = 10;
    ivfpq.train(static_cast<faiss::Index::idx_t>(std::min<size_t>(docs, 100000)), cat.data());
    ivfpq.add(static_cast<faiss::Index::idx_t>(docs), cat.data());
    ivfpq.nprobe = static_cast<size_t>(nprobe);
    const double build_s = std::chrono::duration<double>(Clock::now() - t0).count();
    faiss::VectorIOWriter w;
    faiss::write_index(&ivfpq, &w);
    faiss_row("IndexIVFPQ(m=d/8,nprobe=" + std::to_string(nprobe) + ")", w.data.size(), build_s, [&](size_t q) {
      std::vector<float> dist(10);
      std::vector<faiss::Index::idx_t> lab(10);
      ivfpq.search(1, &qcat[q * d], 10, dist.data(), lab.data());
      return labels_to_ids(lab);
    });
  }
  out["faiss"] = faiss_rows;
  std::printf("%s\n", out.dump(1).c_str());
  return 0;
}
