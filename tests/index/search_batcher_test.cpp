// SearchBatcher (index/search_batcher.h): many threads searching at once get
// exactly what DualIndex::Search gives each of them alone, whether or not
// their requests shared a pass; a bad request fails alone; requests that do
// not scan every row (filtered) run as Search runs them.
#include "index/search_batcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

namespace moeedb {
namespace {

TEST(SearchBatcher, ConcurrentSearchesGetWhatEachGetsAlone) {
  const size_t dh = 24, dr = 8, n = 6000, nq = 64;
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> hs(n * dh), rw(n * dr), qh(nq * dh), qr(nq * dr);
  for (auto* v : {&hs, &rw, &qh, &qr})
    for (auto& x : *v) x = g(rng);
  DualIndexSpec spec;
  spec.dim_hs = dh;
  spec.dim_rw = dr;
  auto index = DualIndex::Create(spec, Standardizer::Identity(dh), Standardizer::Identity(dr));
  ASSERT_TRUE(index.ok());
  std::vector<uint64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = 1000 + i;
  ASSERT_TRUE((*index)->Add(ids, hs.data(), rw.data()).ok());
  auto request = [&](size_t q) {
    SearchRequest r;
    r.hs = &qh[q * dh];
    r.rw = &qr[q * dr];
    r.k = 5 + q % 7;
    r.alpha = 0.25f * static_cast<float>(q % 5);
    if (q % 9 == 4) r.filter = [](uint64_t id) { return id % 2 == 0; };  // runs alone
    return r;
  };
  std::vector<std::vector<Hit>> alone(nq);
  for (size_t q = 0; q < nq; ++q) alone[q] = *(*index)->Search(request(q));

  SearchBatcher batcher;
  std::vector<std::vector<Hit>> got(nq);
  std::atomic<size_t> next{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (size_t q = next++; q < nq; q = next++) {
        auto r = batcher.Search(**index, request(q));
        if (!r.ok()) ++failures;
        else got[q] = *r;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0u);
  for (size_t q = 0; q < nq; ++q) {
    ASSERT_EQ(got[q].size(), alone[q].size()) << q;
    for (size_t i = 0; i < got[q].size(); ++i) {
      EXPECT_EQ(got[q][i].id, alone[q][i].id) << q;
      EXPECT_FLOAT_EQ(got[q][i].score, alone[q][i].score) << q;
    }
  }
  // Every shareable request went through a batch; filtered ones did not.
  size_t shared = 0;
  for (size_t q = 0; q < nq; ++q) shared += q % 9 != 4;
  EXPECT_EQ(batcher.batched_requests(), shared);
  EXPECT_LE(batcher.batches(), shared);

  // A non-finite query fails alone.
  std::vector<float> bad(qh.begin(), qh.begin() + dh);
  bad[3] = std::nanf("");
  SearchRequest r = request(0);
  r.hs = bad.data();
  EXPECT_EQ(batcher.Search(**index, r).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(batcher.batched_requests(), shared);
}

}  // namespace
}  // namespace moeedb
