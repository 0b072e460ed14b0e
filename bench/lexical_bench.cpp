// bench/lexical_bench: the lexical (BM25, Xapian) index of a collection and the
// cost of hybrid search over dense search, on synthetic short documents
// (8-30 words from a Zipfian vocabulary of 50,000 pseudo-words) with random
// clustered vectors shaped like the default model's (HS 512, RW 32). For
// each size it prints, in one run:
//   - ingest rate of the collection without and with its lexical index
//     (store + dense indexes; store + dense + lexical) and their ratio;
//   - per-query latency (mean, p50, p99) of dense fused, lexical and hybrid
//     (weighted and rrf) search, k = 10, exact dense scoring, and hybrid's
//     ratio to dense;
//   - the CPU's vector flags.
// Usage: lexical_bench [SIZES=100000,1000000] [QUERIES=200]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/cpu_flags.h"
#include "database/vector_collection.h"

using namespace moeedb;
using Clock = std::chrono::steady_clock;

namespace {

double Secs(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

// Pseudo-words: 2-4 syllables, distinct per rank.
std::vector<std::string> Vocabulary(size_t n) {
  static const char* kSyl[] = {"ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "zi", "pa", "qu", "ber",
                               "dor", "fin", "gal", "hum", "jet", "kil", "mar", "nop", "ost", "pru", "rix", "sul"};
  const size_t ns = sizeof(kSyl) / sizeof(kSyl[0]);
  std::vector<std::string> v;
  for (size_t i = 0; i < n; ++i) {
    std::string w;
    size_t x = i + ns;  // at least two syllables
    while (x > 0) w += kSyl[x % ns], x /= ns;
    v.push_back(w);
  }
  return v;
}

struct Corpus {
  std::vector<std::string> vocab;
  std::discrete_distribution<size_t> zipf;
  explicit Corpus(size_t words) : vocab(Vocabulary(words)) {
    std::vector<double> w(words);
    for (size_t i = 0; i < words; ++i) w[i] = 1.0 / std::pow(static_cast<double>(i + 1), 1.07);
    zipf = std::discrete_distribution<size_t>(w.begin(), w.end());
  }
  std::string Text(std::mt19937_64& rng, size_t lo, size_t hi) {
    const size_t n = std::uniform_int_distribution<size_t>(lo, hi)(rng);
    std::string t;
    for (size_t i = 0; i < n; ++i) t += (i ? " " : "") + vocab[zipf(rng)];
    return t;
  }
};

struct Latency {
  double mean = 0, p50 = 0, p99 = 0;
};

Latency Measure(std::vector<double> ms) {
  Latency l;
  for (double x : ms) l.mean += x / ms.size();
  std::sort(ms.begin(), ms.end());
  l.p50 = ms[ms.size() / 2];
  l.p99 = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  return l;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes = {100000, 1000000};
  size_t nq = 200;
  if (argc > 1) {
    sizes.clear();
    std::stringstream ss(argv[1]);
    for (std::string s; std::getline(ss, s, ',');) sizes.push_back(std::strtoull(s.c_str(), nullptr, 10));
  }
  if (argc > 2) nq = std::strtoull(argv[2], nullptr, 10);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const size_t dh = 512, dr = 32, batch = 1000;
  std::printf("lexical bench: CPU flags: %s\n", bench::CpuFlags().c_str());
  std::printf("documents of 8-30 words (Zipf 1.07 over 50000 words), HS %zu + RW %zu dims, flat dense indexes, "
              "%zu queries of 2-5 words, k=10, one thread\n", dh, dr, nq);
  Corpus corpus(50000);
  for (size_t n : sizes) {
    const std::string root = (std::filesystem::temp_directory_path() / ("lexical-bench-" + std::to_string(n))).string();
    std::filesystem::remove_all(root);
    auto store = Store::Open(root);
    if (!store.ok()) { std::fprintf(stderr, "%s\n", store.status().ToString().c_str()); return 1; }
    double ingest_s[2] = {0, 0};
    std::unique_ptr<VectorCollection> colls[2];
    for (int lex = 0; lex < 2; ++lex) {
      CollectionOptions o;
      o.dim_hs = dh;
      o.dim_rw = dr;
      o.default_alpha = 0.15f;
      o.lexical.enabled = lex == 1;
      auto c = VectorCollection::Create(store->get(), lex ? "lexical" : "dense", o);
      if (!c.ok()) { std::fprintf(stderr, "%s\n", c.status().ToString().c_str()); return 1; }
      colls[lex] = std::move(c).value();
      std::mt19937_64 rng(11);  // the same documents in both collections
      std::normal_distribution<float> g(0, 1);
      std::vector<std::vector<float>> centers(64, std::vector<float>(dh + dr));
      for (auto& c : centers) for (auto& v : c) v = g(rng);
      const auto t0 = Clock::now();
      for (size_t at = 0; at < n; at += batch) {
        std::vector<StoredDocument> docs;
        for (size_t i = at; i < std::min(n, at + batch); ++i) {
          StoredDocument d;
          d.id = "d" + std::to_string(i);
          d.text = corpus.Text(rng, 8, 30);
          d.metadata_json = "{}";
          const auto& c = centers[rng() % centers.size()];
          d.hs.resize(dh);
          d.rw.resize(dr);
          for (size_t j = 0; j < dh; ++j) d.hs[j] = c[j] + 0.5f * g(rng);
          for (size_t j = 0; j < dr; ++j) d.rw[j] = c[dh + j] + 0.5f * g(rng);
          docs.push_back(std::move(d));
        }
        auto w = colls[lex]->Upsert(docs, /*sync=*/false);
        if (!w.ok()) { std::fprintf(stderr, "%s\n", w.status().ToString().c_str()); return 1; }
      }
      if (Status s = colls[lex]->SaveIndex(); !s.ok()) { std::fprintf(stderr, "%s\n", s.ToString().c_str()); return 1; }
      ingest_s[lex] = Secs(t0);
    }
    std::printf("\n%zu documents\n  ingest (store + indexes, snapshot at the end): dense only %.0f docs/s, with lexical "
                "%.0f docs/s (x%.2f time)\n",
                n, n / ingest_s[0], n / ingest_s[1], ingest_s[1] / ingest_s[0]);
    // Queries: words drawn like the documents', vectors near a document's.
    std::mt19937_64 qrng(99);
    std::normal_distribution<float> g(0, 1);
    std::vector<std::string> qtext;
    std::vector<std::vector<float>> qhs, qrw;
    for (size_t q = 0; q < nq; ++q) {
      qtext.push_back(corpus.Text(qrng, 2, 5));
      auto d = colls[1]->Get("d" + std::to_string(qrng() % n));
      std::vector<float> h = (*d)->hs, r = (*d)->rw;
      for (auto& v : h) v += 0.3f * g(qrng);
      for (auto& v : r) v += 0.3f * g(qrng);
      qhs.push_back(h);
      qrw.push_back(r);
    }
    struct Row { const char* name; QueryMode mode; FusionKind fusion; };
    const Row rows[] = {{"dense fused", QueryMode::kFused, FusionKind::kWeighted},
                        {"lexical", QueryMode::kLexical, FusionKind::kWeighted},
                        {"hybrid weighted", QueryMode::kHybrid, FusionKind::kWeighted},
                        {"hybrid rrf", QueryMode::kHybrid, FusionKind::kRrf}};
    double dense_mean = 0;
    for (const Row& row : rows) {
      std::vector<double> ms;
      for (size_t q = 0; q < nq; ++q) {
        SearchSpec so;
        so.k = 10;
        so.mode = row.mode;
        so.fusion = row.fusion;
        so.query = qtext[q];
        so.exact = true;
        const auto t0 = Clock::now();
        auto hits = colls[1]->Search(qhs[q].data(), qrw[q].data(), so);
        ms.push_back(1000 * Secs(t0));
        if (!hits.ok()) { std::fprintf(stderr, "%s\n", hits.status().ToString().c_str()); return 1; }
      }
      const Latency l = Measure(ms);
      if (row.mode == QueryMode::kFused) dense_mean = l.mean;
      std::printf("  %-16s mean %8.2f ms  p50 %8.2f ms  p99 %8.2f ms  (x%.2f dense)\n", row.name, l.mean, l.p50, l.p99,
                  l.mean / dense_mean);
    }
    colls[0].reset();
    colls[1].reset();
    store->reset();
    std::filesystem::remove_all(root);
  }
  return 0;
}
