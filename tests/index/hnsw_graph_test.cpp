// HnswGraph (index/hnsw_graph.h): recall against a brute-force loop over the
// float rows written here; best-first order; rows added in several batches;
// a saved graph searches as the original did; damaged files are refused.
#include "index/hnsw_graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "tests/test_util.h"

namespace moeedb {
namespace {

// Unit rows around 40 random centres (clustered, as embeddings are).
std::vector<float> Clustered(size_t n, size_t dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> centres(40 * dim);
  for (auto& x : centres) x = g(rng);
  std::vector<float> rows(n * dim);
  for (size_t i = 0; i < n; ++i) {
    const size_t c = rng() % 40;
    double norm = 0;
    for (size_t j = 0; j < dim; ++j) {
      rows[i * dim + j] = centres[c * dim + j] + 0.6f * g(rng);
      norm += rows[i * dim + j] * rows[i * dim + j];
    }
    for (size_t j = 0; j < dim; ++j) rows[i * dim + j] /= static_cast<float>(std::sqrt(norm));
  }
  return rows;
}

// The k rows of highest inner product with q, by a plain loop.
std::vector<size_t> BruteForce(const std::vector<float>& rows, size_t dim, const float* q, size_t k) {
  const size_t n = rows.size() / dim;
  std::vector<double> score(n);
  for (size_t i = 0; i < n; ++i) {
    double s = 0;
    for (size_t j = 0; j < dim; ++j) s += static_cast<double>(q[j]) * rows[i * dim + j];
    score[i] = s;
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
  order.resize(k);
  return order;
}

double Recall(const HnswGraph& g, const std::vector<float>& rows, const std::vector<float>& queries, size_t dim) {
  double hit = 0;
  const size_t nq = queries.size() / dim;
  for (size_t i = 0; i < nq; ++i) {
    const float* q = queries.data() + i * dim;
    const auto truth = BruteForce(rows, dim, q, 10);
    const auto got = g.Search(q, 10);
    EXPECT_EQ(got.size(), 10u);
    const std::set<size_t> t(truth.begin(), truth.end());
    for (size_t r : got) hit += t.count(r);
  }
  return hit / (10.0 * static_cast<double>(nq));
}

TEST(HnswGraph, FindsTheBruteForceNeighbours) {
  std::printf("graph distances: %s\n", HnswGraph::SimdLevel());
  for (size_t dim : {48, 100}) {  // 100: codes padded to 128
    const size_t n = 3000;
    const std::vector<float> rows = Clustered(n, dim, 1), queries = Clustered(50, dim, 2);
    HnswGraph g(dim, 16, 64, 128);
    g.Add(rows.data(), 1000, 1);  // in batches, the later ones on two threads
    g.Add(rows.data() + 1000 * dim, n - 1000, 2);
    EXPECT_EQ(g.size(), n);
    EXPECT_GE(Recall(g, rows, queries, dim), 0.95) << dim;
    // Best first: the float inner products along a result never increase
    // by more than the codes' error.
    const auto got = g.Search(queries.data(), 30);
    ASSERT_EQ(got.size(), 30u);
    auto dot = [&](size_t row) {
      double s = 0;
      for (size_t j = 0; j < dim; ++j) s += static_cast<double>(queries[j]) * rows[row * dim + j];
      return s;
    };
    for (size_t i = 1; i < got.size(); ++i) EXPECT_GE(dot(got[i - 1]) + 0.01, dot(got[i]));
    // Every row finds itself first.
    for (size_t r = 0; r < n; r += 97) EXPECT_EQ(g.Search(rows.data() + r * dim, 1), std::vector<size_t>{r});
  }
}

TEST(HnswGraph, ASavedGraphSearchesAsTheOriginal) {
  const size_t dim = 32, n = 1500;
  const std::vector<float> rows = Clustered(n, dim, 3), queries = Clustered(20, dim, 4);
  HnswGraph g(dim, 12, 40, 32);
  g.Add(rows.data(), n, 2);
  test::TempDir dir;
  const std::string path = dir / "g.hnsw";
  ASSERT_TRUE(g.Save(path).ok());
  auto loaded = HnswGraph::Load(path, dim, 32);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ((*loaded)->size(), n);
  for (size_t i = 0; i < 20; ++i) EXPECT_EQ((*loaded)->Search(queries.data() + i * dim, 10), g.Search(queries.data() + i * dim, 10));
  EXPECT_EQ(HnswGraph::Load(path, dim + 64, 32).status().code(), Status::Code::kCorruption);  // other codes
  test::WriteFile(dir / "bad.hnsw", "not a graph");
  EXPECT_FALSE(HnswGraph::Load(dir / "bad.hnsw", dim, 32).ok());
  std::string bytes = test::ReadFile(path);
  test::WriteFile(dir / "short.hnsw", bytes.substr(0, bytes.size() / 2));
  EXPECT_EQ(HnswGraph::Load(dir / "short.hnsw", dim, 32).status().code(), Status::Code::kCorruption);
}

}  // namespace
}  // namespace moeedb
