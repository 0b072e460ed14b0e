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
//   quantized_search (--vectors FILE.f32 [--query-vectors FILE.f32] | --synthetic HS,RW)
//                    [--docs N] [--queries Q] [--alpha A] [--configs LIST]
//                    [--oversample LIST] [--nprobe N] [--faiss binaryflat,hnswsq,ivfpq]
//   moeedb embed ... | quantized_search --append FILE.f32
// FILE.f32 holds vectors (--append converts `moeedb embed` output, {"hs":
// [...], "rw": [...]} a line, and resumes where it stopped): the first N are
// the documents, the next Q the queries unless --query-vectors gives them
// (its first Q). --synthetic embeds nothing: clustered random vectors of
// those dimensions (OLMoE's: 2048,1024), the queries drawn as the documents.
// Rows are streamed for each index built, never all held at once.
// Prints one JSON object (with the CPU flags it ran with) on stdout.
#include <faiss/IndexBinaryFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/IndexFlat.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
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
static_assert(kCalibrationRows <= kAddBatch, "the calibration rows are read into one chunk");
// Rows Faiss's baselines are trained on (the first of the documents).
constexpr size_t kFaissTrainRows = 100'000;
// Queries timed from a cold page cache (each evicts the rows first).
constexpr size_t kColdQueries = 50;

[[noreturn]] void Die(const std::string& m) {
  std::fprintf(stderr, "quantized_search: %s\n", m.c_str());
  std::exit(2);
}

// Rows in order, a chunk at a time, the same rows again after each Rewind:
// nothing holds all of them, so a million OLMoE-sized rows (12 GB) are built
// into an index without a second copy in RAM.
class RowStream {
 public:
  virtual ~RowStream() = default;
  virtual void Rewind() = 0;
  // The next `n` rows: their HS halves into hs (n * dh), RW halves into rw (n * dr).
  virtual void Next(size_t n, float* hs, float* rw) = 0;
  size_t dh = 0, dr = 0;
};

// A vector file: header {rows, dh, dr} as uint64, then each row's hs then rw
// halves as f32 (written by --append from `moeedb embed` output).
class FileRows : public RowStream {
 public:
  FileRows(const std::string& path, size_t want) : path_(path) {
    f_ = std::fopen(path.c_str(), "rb");
    uint64_t head[3];
    if (!f_ || std::fread(head, sizeof head, 1, f_) != 1) Die("cannot read " + path);
    dh = head[1], dr = head[2];
    if (head[0] < want) Die(path + " holds " + std::to_string(head[0]) + " vectors, " + std::to_string(want) + " needed");
    row_.resize(dh + dr);
  }
  ~FileRows() override { std::fclose(f_); }
  void Rewind() override { std::fseek(f_, 3 * sizeof(uint64_t), SEEK_SET); }
  void Next(size_t n, float* hs, float* rw) override {
    for (size_t i = 0; i < n; ++i) {
      if (std::fread(row_.data(), sizeof(float), row_.size(), f_) != row_.size()) Die("short read in " + path_);
      std::copy(row_.begin(), row_.begin() + dh, hs + i * dh);
      std::copy(row_.begin() + dh, row_.end(), rw + i * dr);
    }
  }

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
  std::vector<float> row_;
};

// Rows around 1000 cluster centres with a shared offset, as embeddings are;
// one seeded generator, so every pass yields the same rows.
class SyntheticRows : public RowStream {
 public:
  SyntheticRows(size_t h, size_t r) {
    dh = h, dr = r;
    Rewind();
  }
  void Rewind() override {
    rng_.seed(17);
    g_.reset();  // its spare value would shift the next pass
    ch_.resize(kClusters * dh), cr_.resize(kClusters * dr), off_h_.resize(dh), off_r_.resize(dr);
    for (auto& x : ch_) x = g_(rng_);
    for (auto& x : cr_) x = g_(rng_);
    for (auto& x : off_h_) x = 2 * g_(rng_);
    for (auto& x : off_r_) x = 2 * g_(rng_);
  }
  void Next(size_t n, float* hs, float* rw) override {
    std::uniform_int_distribution<size_t> pick(0, kClusters - 1);
    for (size_t i = 0; i < n; ++i) {
      const size_t c = pick(rng_);
      for (size_t j = 0; j < dh; ++j) hs[i * dh + j] = off_h_[j] + ch_[c * dh + j] + 0.8f * g_(rng_);
      for (size_t j = 0; j < dr; ++j) rw[i * dr + j] = off_r_[j] + cr_[c * dr + j] + 0.8f * g_(rng_);
    }
  }

 private:
  static constexpr size_t kClusters = 1000;
  std::mt19937 rng_;
  std::normal_distribution<float> g_{0.f, 1.f};
  std::vector<float> ch_, cr_, off_h_, off_r_;
};

// Appends `moeedb embed` output ({"hs": [...], "rw": [...]} a line, on stdin)
// to the vector file `path`, creating it. The header is rewritten every
// kAddBatch rows and the file cut back to it first, so an interrupted run
// resumes from the last header: the caller embeds from row `rows` on.
void AppendJsonl(const std::string& path) {
  uint64_t head[3] = {0, 0, 0};
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  if (!f) f = std::fopen(path.c_str(), "w+b");
  if (!f) Die("cannot write " + path);
  const bool fresh = std::fread(head, sizeof head, 1, f) != 1;  // under a header's bytes: start it anew
  if (fresh) head[0] = head[1] = head[2] = 0;
  auto write_head = [&] {
    std::fflush(f);
    std::fseek(f, 0, SEEK_SET);
    std::fwrite(head, sizeof head, 1, f);
    std::fflush(f);
  };
  const long end = static_cast<long>(sizeof head + head[0] * (head[1] + head[2]) * sizeof(float));
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || (!fresh && st.st_size < end)) Die(path + " is shorter than its header says");
  if (ftruncate(fileno(f), fresh ? 0 : end) != 0) Die("cannot truncate " + path);
  if (fresh) write_head();
  std::fseek(f, end, SEEK_SET);
  std::string line;
  while (std::getline(std::cin, line)) {
    json j;
    try {
      j = json::parse(line);
    } catch (const std::exception& e) {  // a cut-off last line: keep what came before it
      write_head();
      Die("line " + std::to_string(head[0] + 1) + " is not JSON: " + e.what());
    }
    const auto h = j.at("hs").get<std::vector<float>>(), r = j.at("rw").get<std::vector<float>>();
    if (head[0] == 0 && head[1] == 0) head[1] = h.size(), head[2] = r.size();
    if (h.size() != head[1] || r.size() != head[2]) Die("vectors of different sizes appended to " + path);
    std::fwrite(h.data(), sizeof(float), h.size(), f);
    std::fwrite(r.data(), sizeof(float), r.size(), f);
    if (++head[0] % kAddBatch == 0) {
      write_head();
      std::fseek(f, 0, SEEK_END);
    }
  }
  write_head();
  if (std::ferror(f) || std::fclose(f) != 0) Die("cannot write " + path);
  std::fprintf(stderr, "%s: %llu vectors\n", path.c_str(), static_cast<unsigned long long>(head[0]));
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
  std::string vectors_path, synthetic, append_path, query_path;
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
    else if (a == "--append") append_path = next();
    else if (a == "--query-vectors") query_path = next();
    else if (a == "--docs") docs = std::stoul(next());
    else if (a == "--queries") nq = std::stoul(next());
    else if (a == "--alpha") alpha = std::stod(next());
    else if (a == "--configs") configs = next();
    else if (a == "--oversample") oversamples = next();
    else if (a == "--nprobe") nprobe = std::stoi(next());
    else if (a == "--faiss") faiss_kinds = next();
    else Die("unknown flag " + a);
  }
  if (!append_path.empty()) {
    AppendJsonl(append_path);
    return 0;
  }
  std::unique_ptr<RowStream> source;
  if (!vectors_path.empty()) source = std::make_unique<FileRows>(vectors_path, query_path.empty() ? docs + nq : docs);
  else if (!synthetic.empty()) {
    const auto dims = Split(synthetic);
    if (dims.size() != 2) Die("--synthetic HS,RW");
    source = std::make_unique<SyntheticRows>(std::stoul(dims[0]), std::stoul(dims[1]));
  } else Die("--vectors FILE.f32, --synthetic HS,RW or --append FILE.f32");
  const size_t dh = source->dh, dr = source->dr;
  // Passes over the documents in Add-sized chunks: each chunk's ids, hs, rw.
  std::vector<float> chunk_hs(kAddBatch * dh), chunk_rw(kAddBatch * dr);
  auto each_chunk = [&](auto&& use, size_t upto = 0) {
    const size_t end = upto ? std::min(upto, docs) : docs;
    source->Rewind();
    for (size_t at = 0; at < end; at += kAddBatch) {
      const size_t n = std::min<size_t>(kAddBatch, end - at);
      source->Next(n, chunk_hs.data(), chunk_rw.data());
      std::vector<uint64_t> part(n);
      for (size_t i = 0; i < n; ++i) part[i] = at + i + 1;
      use(part, chunk_hs.data(), chunk_rw.data());
    }
  };
  // Seconds spent in `f` (a build step), accumulated over a pass.
  auto timed = [](double* s, auto&& f) {
    const auto t0 = Clock::now();
    f();
    *s += std::chrono::duration<double>(Clock::now() - t0).count();
  };
  // The collection's calibration: statistics of a sample of the documents.
  const size_t calib = std::min<size_t>(docs, kCalibrationRows);
  source->Rewind();
  source->Next(calib, chunk_hs.data(), chunk_rw.data());
  const Standardizer sh = Standardizer::Fit(chunk_hs.data(), calib, dh), sr = Standardizer::Fit(chunk_rw.data(), calib, dr);
  const char* tmp = std::getenv("TMPDIR");
  const std::string rows_folder = std::string(tmp ? tmp : "/var/tmp") + "/moeedb-quantized-bench";

  json out = {{"cpu_flags", bench::CpuFlags()}, {"hamming", HammingSimdLevel()}, {"docs", docs}, {"queries", nq}, {"nprobe", nprobe},
              {"dim_hs", dh}, {"dim_rw", dr}, {"alpha", alpha},
              {"source", vectors_path.empty() ? "synthetic " + synthetic : vectors_path},
              {"query_source", query_path.empty() ? "the rows after the documents" : query_path}};

  // The exact fused top 10 of each query: the reference every row is measured against.
  DualIndexSpec exact_spec;
  exact_spec.dim_hs = dh, exact_spec.dim_rw = dr;
  auto exact = DualIndex::Create(exact_spec, sh, sr);
  if (!exact.ok()) Die(exact.status().ToString());
  each_chunk([&](const std::vector<uint64_t>& part, const float* hs, const float* rw) {
    if (!(*exact)->Add(part, hs, rw).ok()) Die("exact add");
  });
  // The queries: the nq rows after the documents, or the first of --query-vectors.
  std::vector<float> query_hs(nq * dh), query_rw(nq * dr);
  if (query_path.empty()) source->Next(nq, query_hs.data(), query_rw.data());
  else {
    FileRows queries(query_path, nq);
    if (queries.dh != dh || queries.dr != dr) Die(query_path + ": queries of other dimensions than the documents");
    queries.Next(nq, query_hs.data(), query_rw.data());
  }
  const float* qhs = query_hs.data();
  const float* qrw = query_rw.data();
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
    double build_s = 0;  // in Add only, not reading or generating the rows
    auto ix = DualIndex::Create(spec, sh, sr, rows_folder);
    if (!ix.ok()) Die(ix.status().ToString());
    each_chunk([&](const std::vector<uint64_t>& part, const float* hs, const float* rw) {
      timed(&build_s, [&] {
        Status st = (*ix)->Add(part, hs, rw);
        if (!st.ok()) Die(config + ": " + st.ToString());
      });
    });
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
      // From a cold page cache: every query's rows dropped from the cache
      // first (not timed), so re-scoring reads its candidates from the
      // disk, with the candidates' pages requested at once (the default)
      // and one fault at a time (MOEEDB_ROW_PREFETCH=off).
      // (Uncoded flat halves re-score by scanning every row: no cold pass.)
      json cold = json::object();
      for (const bool prefetch : {true, false}) {
        if (!coded) break;
        if (prefetch) unsetenv("MOEEDB_ROW_PREFETCH");
        else setenv("MOEEDB_ROW_PREFETCH", "off", 1);
        std::vector<double> ms;
        for (size_t q = 0; q < std::min<size_t>(nq, kColdQueries); ++q) {
          SearchRequest r = request(q);
          r.oversample = factor;
          if (Status st = (*ix)->EvictRows(); !st.ok()) Die(st.ToString());
          const auto t0 = Clock::now();
          (void)(*ix)->Search(r);
          ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        }
        unsetenv("MOEEDB_ROW_PREFETCH");
        const json p = bench::Percentiles(ms);
        cold[prefetch ? "prefetch" : "no_prefetch"] = {{"p50_ms", p["p50_ms"]}, {"p99_ms", p["p99_ms"]}};
      }
      rows.push_back({{"index", config}, {"oversample", factor}, {"recall_at_10", recall},
                      {"max_score_error", worst_score_error}, {"heap_bytes_per_doc", heap},
                      {"rss_anon_bytes_per_doc", anon}, {"row_file_bytes_per_doc", mapped},
                      {"rss_file_bytes_per_doc", file}, {"build_s", build_s}, {"p50_ms", t.p50_ms},
                      {"p99_ms", t.p99_ms}, {"qps", t.qps}, {"qps_vs_exact", t.qps / exact_t.qps},
                      {"cold_rows", cold}});
      std::fprintf(stderr, "%-12s x%-4s recall %.3f  heap %6.0f B/doc  anon %6.0f  rows %6.0f  p50 %.2f p99 %.2f ms  %.0f qps",
                   config.c_str(), os.c_str(), recall, heap, anon, mapped, t.p50_ms, t.p99_ms, t.qps);
      if (coded)
        std::fprintf(stderr, "  cold rows p50 %.2f p99 %.2f ms (one fault at a time %.2f / %.2f)",
                      cold["prefetch"]["p50_ms"].get<double>(), cold["prefetch"]["p99_ms"].get<double>(),
                      cold["no_prefetch"]["p50_ms"].get<double>(), cold["no_prefetch"]["p99_ms"].get<double>());
      std::fprintf(stderr, "\n");
    }
    ix->reset();
  }
  out["moeedb"] = rows;

  // Faiss on the concatenated, standardized [hs; rw] rows (the queries'
  // rw halves carry alpha), a chunk at a time (`use(n, rows)` for each).
  const size_t d = dh + dr;
  std::vector<float> cat(kAddBatch * d);
  auto each_cat_chunk = [&](auto&& use, size_t upto = 0) {
    each_chunk([&](const std::vector<uint64_t>& part, const float* hs, const float* rw) {
      for (size_t i = 0; i < part.size(); ++i) {
        sh.Apply(hs + i * dh, &cat[i * d]);
        sr.Apply(rw + i * dr, &cat[i * d + dh]);
      }
      use(part.size(), cat.data());
    }, upto);
  };
  // The first `n` of them, for training.
  auto first_cat_rows = [&](size_t n) {
    std::vector<float> rows;
    rows.reserve(n * d);
    each_cat_chunk([&](size_t m, const float* x) { rows.insert(rows.end(), x, x + m * d); }, n);
    return rows;
  };
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
    double build_s = 0;  // encoding and adding, not reading the rows
    faiss::IndexBinaryFlat bf(static_cast<int>(8 * bytes));
    std::vector<uint8_t> codes(kAddBatch * bytes);
    each_cat_chunk([&](size_t n, const float* x) {
      timed(&build_s, [&] {
        for (size_t i = 0; i < n; ++i) encode(x + i * d, &codes[i * bytes]);
        bf.add(static_cast<faiss::Index::idx_t>(n), codes.data());
      });
    });
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
    double build_s = 0;  // training and adding, not reading the rows
    faiss::IndexHNSWSQ hsq(static_cast<int>(d), faiss::ScalarQuantizer::QT_8bit, 32, faiss::METRIC_INNER_PRODUCT);
    hsq.hnsw.efConstruction = 80;
    const std::vector<float> train = first_cat_rows(std::min<size_t>(docs, kFaissTrainRows));
    timed(&build_s, [&] { hsq.train(static_cast<faiss::Index::idx_t>(train.size() / d), train.data()); });
    each_cat_chunk([&](size_t n, const float* x) { timed(&build_s, [&] { hsq.add(static_cast<faiss::Index::idx_t>(n), x); }); });
    hsq.hnsw.efSearch = 64;
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
    double build_s = 0;  // training and adding, not reading the rows
    faiss::IndexFlatIP coarse(static_cast<int>(d));
    faiss::IndexIVFPQ ivfpq(&coarse, static_cast<int>(d), nlist, m, 8, faiss::METRIC_INNER_PRODUCT);
    ivfpq.cp.max_points_per_centroid = 64;
    ivfpq.cp.niter = 10;
    const std::vector<float> train = first_cat_rows(std::min<size_t>(docs, kFaissTrainRows));
    timed(&build_s, [&] { ivfpq.train(static_cast<faiss::Index::idx_t>(train.size() / d), train.data()); });
    each_cat_chunk([&](size_t n, const float* x) { timed(&build_s, [&] { ivfpq.add(static_cast<faiss::Index::idx_t>(n), x); }); });
    ivfpq.nprobe = static_cast<size_t>(nprobe);
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
