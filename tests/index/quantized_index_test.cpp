// Quantized codes in the dual index (index/dual_index.h, index/binary_codes.h,
// index/row_buffer.h): the Hamming kernel against a bit-by-bit count; the
// 1-bit scan's top k against a sort; and for every code kind (sq8, sq4, pq,
// binary) under every index kind (flat, hnsw, ivf), with the full rows in the
// heap or on disk: each returned hit's scores equal the fused cosine computed
// here in double from the raw vectors (the re-scoring is exact), the ranking
// finds most of the exact top 10, snapshots load back to the same answers,
// deletions and the rebuild they cause keep it so, and rows on disk leave
// the heap.
#include <gtest/gtest.h>

#include <fstream>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

#include "index/binary_codes.h"
#include "index/dual_index.h"
#include "index/row_buffer.h"
#include "tests/index/reference_cosine.h"
#include "tests/test_util.h"

namespace moeedb {
namespace {

namespace fs = std::filesystem;

uint32_t NaiveHamming(const uint64_t* a, const uint64_t* b, size_t words) {
  uint32_t d = 0;
  for (size_t w = 0; w < words; ++w)
    for (int bit = 0; bit < 64; ++bit) d += ((a[w] >> bit) & 1) != ((b[w] >> bit) & 1);
  return d;
}

TEST(BinaryCodes, HammingDistancesEqualABitByBitCountAtEveryWidth) {
  std::mt19937_64 rng(3);
  for (size_t words : {1, 2, 3, 7, 8, 9, 16, 17, 32, 41}) {
    const size_t n = 37;
    std::vector<uint64_t> q(words), codes(n * words);
    for (auto& w : q) w = rng();
    for (auto& w : codes) w = rng();
    std::vector<uint32_t> got(n);
    HammingDistances(q.data(), codes.data(), n, words, got.data());
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], NaiveHamming(q.data(), codes.data() + i * words, words)) << words << " words, row " << i;
  }
}

// Pages of [p, p + bytes) in the page cache (mincore: the file's pages,
// whether or not this process maps them now).
size_t ResidentPages(const uint8_t* p, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((bytes + page - 1) / page);
  if (mincore(const_cast<uint8_t*>(p), bytes, in.data()) != 0) return SIZE_MAX;
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

// Rows on disk leave the page cache when evicted and keep their bytes (the
// disk holds them); a prefetch brings them back without a read. tmpfs keeps
// every page in memory (nothing to evict to): there only the bytes are checked.
TEST(RowBuffer, EvictDropsTheRowsPagesAndPrefetchReadsThemBack) {
  test::TempDir tmp;
  auto buf = RowBuffer::OnDisk(tmp.path() + "/rows");
  ASSERT_TRUE(buf.ok()) << buf.status().ToString();
  std::vector<uint8_t> bytes(8 << 20);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 2654435761u >> 24);
  ASSERT_TRUE(buf->Append(bytes.data(), bytes.size()).ok());
  const size_t pages = bytes.size() / static_cast<size_t>(sysconf(_SC_PAGESIZE));
  EXPECT_EQ(ResidentPages(buf->data(), buf->size()), pages);
  EXPECT_TRUE(buf->Resident(0) && buf->Resident(bytes.size() - 1));
  EXPECT_FALSE(buf->Resident(bytes.size()));  // past the end
  ASSERT_TRUE(buf->Evict().ok());
  struct statfs fs_info{};
  ASSERT_EQ(statfs((tmp.path() + "/rows").c_str(), &fs_info), 0);
  const bool evictable = fs_info.f_type != TMPFS_MAGIC;
  if (evictable) {
    EXPECT_LE(ResidentPages(buf->data(), buf->size()), pages / 16) << "pages still cached after Evict";
    EXPECT_FALSE(buf->Resident(0) && buf->Resident(bytes.size() / 2) && buf->Resident(bytes.size() - 1));
  }
  buf->Prefetch(0, buf->size());
  size_t resident = 0;
  for (int i = 0; i < 200 && resident < pages; ++i) {  // the read-ahead is asynchronous
    resident = ResidentPages(buf->data(), buf->size());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(resident, pages) << "pages not read back by the prefetch";
  EXPECT_EQ(std::memcmp(buf->data(), bytes.data(), bytes.size()), 0);
  // In the heap both are no-ops.
  RowBuffer heap;
  ASSERT_TRUE(heap.Append(bytes.data(), 4096).ok());
  EXPECT_TRUE(heap.Evict().ok());
  EXPECT_TRUE(heap.Resident(0));
  heap.Prefetch(0, 4096);
  EXPECT_EQ(std::memcmp(heap.data(), bytes.data(), 4096), 0);
}

// A file's rows appended whole land after what the buffer held, byte for
// byte, in the heap and on disk; a file shorter than asked is an error that
// leaves the buffer as it was.
TEST(RowBuffer, AppendFileReadsTheFilesRowsAfterWhatItHeld) {
  test::TempDir tmp;
  std::vector<uint8_t> bytes((3 << 20) + 123);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 2654435761u >> 24);
  const std::string file = tmp.path() + "/rows.f32";
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  auto disk = RowBuffer::OnDisk(tmp.path() + "/scratch");
  ASSERT_TRUE(disk.ok()) << disk.status().ToString();
  RowBuffer heap;
  for (RowBuffer* b : {&heap, &*disk}) {
    ASSERT_TRUE(b->Append(bytes.data() + 7, 1000).ok());
    ASSERT_TRUE(b->AppendFile(file, bytes.size() - 5).ok());
    ASSERT_EQ(b->size(), 1000 + bytes.size() - 5);
    EXPECT_EQ(std::memcmp(b->data(), bytes.data() + 7, 1000), 0);
    EXPECT_EQ(std::memcmp(b->data() + 1000, bytes.data(), bytes.size() - 5), 0);
    const Status st = b->AppendFile(file, bytes.size() + 1);
    EXPECT_EQ(st.code(), Status::Code::kIOError);
    EXPECT_NE(st.message().find("shorter"), std::string::npos) << st.message();
    EXPECT_EQ(b->size(), 1000 + bytes.size() - 5);
    EXPECT_EQ(b->AppendFile(tmp.path() + "/absent", 10).code(), Status::Code::kIOError);
    ASSERT_TRUE(b->Append(bytes.data(), 10).ok());  // appends go on after the file's rows
    EXPECT_EQ(std::memcmp(b->data() + 1000 + bytes.size() - 5, bytes.data(), 10), 0);
  }
}

// The k nearest kept rows of a 1-bit search against a sort of distances
// computed here (sign after centring by the mean), ties by position.
void ExpectNearestKeptCodes(size_t n, size_t k, bool with_keep) {
  // 16 dimensions: many rows share a distance, so the tie order is tested.
  const size_t dim = 16;
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> rows(n * dim), q(dim);
  for (auto& x : rows) x = g(rng) + 0.3f;
  for (auto& x : q) x = g(rng);
  BinaryCodes codes(dim, rows.data(), n);
  codes.Add(rows.data(), n);
  ASSERT_EQ(codes.size(), n);
  std::vector<uint8_t> keep(n);
  for (size_t p = 0; p < n; ++p) keep[p] = !with_keep || p % 3 != 0;
  const auto got = codes.Search(q.data(), k, with_keep ? keep.data() : nullptr);
  std::vector<double> mean(dim, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < dim; ++j) mean[j] += rows[i * dim + j] / double(n);
  std::vector<std::pair<int, size_t>> ref;
  for (size_t i = 0; i < n; ++i) {
    if (!keep[i]) continue;
    int d = 0;
    for (size_t j = 0; j < dim; ++j) d += (rows[i * dim + j] - mean[j] > 0) != (q[j] - mean[j] > 0);
    ref.push_back({d, i});
  }
  std::sort(ref.begin(), ref.end());
  ASSERT_EQ(got.size(), std::min(k, ref.size()));
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], ref[i].second) << "rank " << i << " of " << n << " rows";
  const std::vector<uint8_t> none(n, 0);
  EXPECT_TRUE(codes.Search(q.data(), 10, none.data()).empty());
}

TEST(BinaryCodes, SearchReturnsTheNearestKeptCodesTiesByPosition) {
  ExpectNearestKeptCodes(2000, 50, true);
  ExpectNearestKeptCodes(2000, 50, false);
  // Enough rows for the scan to split over threads (32,768 rows a thread at
  // least), and a k whose last distance is shared by rows of both halves.
  ExpectNearestKeptCodes(70000, 3000, true);
  ExpectNearestKeptCodes(70000, 3000, false);
}

constexpr size_t kDh = 96, kDr = 20, kRows = 3000, kClusters = 40;

struct Data {
  std::vector<float> hs, rw;
};

// Rows around cluster centres (real embeddings cluster; uniform noise would
// make every code kind look alike), with an offset a standardizer removes.
Data Clustered(size_t n, uint32_t seed, const Data& centres) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  std::uniform_int_distribution<size_t> pick(0, kClusters - 1);
  Data d;
  for (size_t i = 0; i < n; ++i) {
    const size_t c = pick(rng);
    for (size_t j = 0; j < kDh; ++j) d.hs.push_back(centres.hs[c * kDh + j] + 0.6f * g(rng) + 0.4f);
    for (size_t j = 0; j < kDr; ++j) d.rw.push_back(centres.rw[c * kDr + j] + 0.6f * g(rng) - 0.2f);
  }
  return d;
}

Data Centres() {
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.f, 1.f);
  Data c;
  for (size_t i = 0; i < kClusters * kDh; ++i) c.hs.push_back(g(rng));
  for (size_t i = 0; i < kClusters * kDr; ++i) c.rw.push_back(g(rng));
  return c;
}

using test::FitZScore;
using test::ZScore;
using test::ZScoredCosine;

class QuantizedIndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    centres_ = Centres();
    rows_ = Clustered(kRows, 7, centres_);
    queries_ = Clustered(20, 99, centres_);
    zh_ = FitZScore(rows_.hs, kDh);
    zr_ = FitZScore(rows_.rw, kDr);
    for (size_t i = 0; i < kRows; ++i) ids_.push_back(10 + 7 * i);
    dir_ = fs::path(tmp_.path());
  }
  std::unique_ptr<DualIndex> Make(IndexKind kind, CodeKind codes, bool on_disk, size_t n = kRows) {
    DualIndexSpec spec;
    spec.dim_hs = kDh, spec.dim_rw = kDr;
    spec.hs.kind = spec.rw.kind = kind;
    spec.hs.codes = spec.rw.codes = codes;
    spec.hs.nprobe = spec.rw.nprobe = 64;
    spec.oversample = 20;
    spec.rows_on_disk = on_disk;
    auto ix = DualIndex::Create(spec, Standardizer::Fit(rows_.hs.data(), kRows, kDh),
                                Standardizer::Fit(rows_.rw.data(), kRows, kDr), (dir_ / "rows").string());
    EXPECT_TRUE(ix.ok()) << ix.status().ToString();
    std::unique_ptr<DualIndex> index = std::move(ix).value();
    // Two batches: the codes are trained on the first and retrained when the
    // rows have grown 8-fold.
    const size_t first = 300;
    std::vector<uint64_t> a(ids_.begin(), ids_.begin() + first), b(ids_.begin() + first, ids_.begin() + n);
    EXPECT_TRUE(index->Add(a, rows_.hs.data(), rows_.rw.data()).ok());
    EXPECT_TRUE(index->Add(b, rows_.hs.data() + first * kDh, rows_.rw.data() + first * kDr).ok());
    return index;
  }
  double Fused(size_t q, size_t row, float alpha) const {
    return ZScoredCosine(&queries_.hs[q * kDh], &rows_.hs[row * kDh], kDh, zh_) +
           alpha * ZScoredCosine(&queries_.rw[q * kDr], &rows_.rw[row * kDr], kDr, zr_);
  }
  // Checks every hit's scores against the reference and returns recall@k
  // against the reference top k (of the rows `alive` keeps).
  double CheckQuery(const DualIndex& ix, size_t q, size_t k, const std::string& label,
                    const std::vector<bool>* alive = nullptr) {
    const float alpha = 0.5f;
    SearchRequest r;
    r.hs = &queries_.hs[q * kDh], r.rw = &queries_.rw[q * kDr], r.k = k, r.alpha = alpha;
    auto hits = ix.Search(r);
    EXPECT_TRUE(hits.ok()) << label << ": " << hits.status().ToString();
    if (!hits.ok()) return 0;
    std::vector<std::pair<double, uint64_t>> ref;
    for (size_t i = 0; i < ids_.size(); ++i)
      if (!alive || (*alive)[i]) ref.push_back({-Fused(q, i, alpha), ids_[i]});
    std::sort(ref.begin(), ref.end());
    std::set<uint64_t> want;
    for (size_t i = 0; i < k && i < ref.size(); ++i) want.insert(ref[i].second);
    EXPECT_EQ(hits->size(), std::min(k, ref.size())) << label;
    size_t found = 0;
    for (size_t i = 0; i < hits->size(); ++i) {
      const Hit& h = (*hits)[i];
      const size_t row = (h.id - 10) / 7;
      EXPECT_TRUE(!alive || (*alive)[row]) << label << ": a removed id came back";
      EXPECT_NEAR(h.score_hs, ZScoredCosine(r.hs, &rows_.hs[row * kDh], kDh, zh_), 1e-4) << label;
      EXPECT_NEAR(h.score_rw, ZScoredCosine(r.rw, &rows_.rw[row * kDr], kDr, zr_), 1e-4) << label;
      EXPECT_NEAR(h.score, Fused(q, row, alpha), 2e-4) << label;
      if (i > 0) EXPECT_GE((*hits)[i - 1].score, h.score) << label;
      found += want.count(h.id);
    }
    return double(found) / double(want.size());
  }
  Data centres_, rows_, queries_;
  ZScore zh_, zr_;
  std::vector<uint64_t> ids_;
  test::TempDir tmp_;
  fs::path dir_;
};

TEST_F(QuantizedIndexTest, EveryCodeKindReturnsExactFusedScoresAndFindsTheTopHits) {
  for (IndexKind kind : {IndexKind::kFlat, IndexKind::kHnsw, IndexKind::kIvf})
    for (CodeKind codes : {CodeKind::kSq8, CodeKind::kSq4, CodeKind::kPq, CodeKind::kBinary}) {
      const bool on_disk = codes == CodeKind::kPq || codes == CodeKind::kBinary;
      const std::string label = std::string(kIndexKinds.Name(kind)) + "/" + kCodeKinds.Name(codes) +
                                (on_disk ? "/disk" : "/heap");
      auto ix = Make(kind, codes, on_disk);
      double recall = 0;
      for (size_t q = 0; q < 20; ++q) recall += CheckQuery(*ix, q, 10, label) / 20;
      // Codes that proposed unrelated candidates would find ~10/3000 of them.
      EXPECT_GE(recall, 0.8) << label;
    }
}

TEST_F(QuantizedIndexTest, RowsOnDiskLeaveTheHeapAndAnswerTheSame) {
  auto heap = Make(IndexKind::kFlat, CodeKind::kBinary, false);
  auto disk = Make(IndexKind::kFlat, CodeKind::kBinary, true);
  const size_t row_bytes = kRows * (kDh + kDr) * sizeof(float);
  EXPECT_EQ(heap->mapped_bytes(), 0u);
  EXPECT_EQ(disk->mapped_bytes(), row_bytes);
  EXPECT_GE(heap->memory_bytes(), disk->memory_bytes() + row_bytes);
  // The scratch files are unlinked: the folder holds no row file.
  for (const auto& f : fs::directory_iterator(dir_ / "rows")) ADD_FAILURE() << "left behind: " << f.path();
  for (size_t q = 0; q < 10; ++q) {
    if (q == 5) ASSERT_TRUE(disk->EvictRows().ok());  // re-scoring then reads the rows from the disk
    SearchRequest r;
    r.hs = &queries_.hs[q * kDh], r.rw = &queries_.rw[q * kDr], r.k = 10;
    auto a = heap->Search(r), b = disk->Search(r);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->size(), b->size());
    for (size_t i = 0; i < a->size(); ++i) {
      EXPECT_EQ((*a)[i].id, (*b)[i].id);
      EXPECT_EQ((*a)[i].score, (*b)[i].score);
    }
  }
}

TEST_F(QuantizedIndexTest, SnapshotsOfCodesLoadBackToTheSameAnswers) {
  for (auto [kind, codes] : {std::pair{IndexKind::kFlat, CodeKind::kBinary}, std::pair{IndexKind::kIvf, CodeKind::kBinary},
                             std::pair{IndexKind::kHnsw, CodeKind::kBinary}, std::pair{IndexKind::kIvf, CodeKind::kPq},
                             std::pair{IndexKind::kFlat, CodeKind::kSq4}}) {
    const std::string label = std::string(kIndexKinds.Name(kind)) + "/" + kCodeKinds.Name(codes);
    auto ix = Make(kind, codes, true);
    const fs::path snap = dir_ / ("snap-" + label.substr(0, label.find('/')) + kCodeKinds.Name(codes));
    ASSERT_TRUE(ix->Save(snap.string(), 42).ok()) << label;
    uint64_t seq = 0;
    auto loaded = DualIndex::Load(snap.string(), &seq);
    ASSERT_TRUE(loaded.ok()) << label << ": " << loaded.status().ToString();
    EXPECT_EQ(seq, 42u);
    EXPECT_EQ((*loaded)->mapped_bytes(), ix->mapped_bytes()) << label;
    for (size_t q = 0; q < 5; ++q) {
      SearchRequest r;
      r.hs = &queries_.hs[q * kDh], r.rw = &queries_.rw[q * kDr], r.k = 10;
      auto a = ix->Search(r), b = (*loaded)->Search(r);
      ASSERT_TRUE(a.ok() && b.ok()) << label;
      ASSERT_EQ(a->size(), b->size()) << label;
      for (size_t i = 0; i < a->size(); ++i) {
        EXPECT_EQ((*a)[i].id, (*b)[i].id) << label << " rank " << i;
        EXPECT_EQ((*a)[i].score, (*b)[i].score) << label;
      }
    }
  }
}

TEST_F(QuantizedIndexTest, DeletionsAndTheRebuildTheyCauseKeepScoresExact) {
  for (IndexKind kind : {IndexKind::kFlat, IndexKind::kIvf}) {
    auto ix = Make(kind, CodeKind::kBinary, true);
    std::vector<bool> alive(kRows, true);
    std::vector<uint64_t> gone;
    for (size_t i = 0; i < kRows; i += 3) gone.push_back(ids_[i]), alive[i] = false;
    // The first third stays tombstoned (under rebuild_ratio), the rest triggers the rebuild.
    const size_t part = gone.size() / 3;
    EXPECT_EQ(ix->Remove(std::vector<uint64_t>(gone.begin(), gone.begin() + part)), part);
    EXPECT_EQ(ix->rebuilds(), 0u);
    std::vector<bool> alive_part(kRows, true);
    for (size_t i = 0; i < part; ++i) alive_part[(gone[i] - 10) / 7] = false;
    for (size_t q = 0; q < 5; ++q) CheckQuery(*ix, q, 10, "tombstoned", &alive_part);
    EXPECT_EQ(ix->Remove(std::vector<uint64_t>(gone.begin() + part, gone.end())), gone.size() - part);
    EXPECT_EQ(ix->rebuilds(), 1u);
    EXPECT_EQ(ix->size(), kRows - gone.size());
    EXPECT_EQ(ix->mapped_bytes(), (kRows - gone.size()) * (kDh + kDr) * sizeof(float));
    double recall = 0;
    for (size_t q = 0; q < 20; ++q) recall += CheckQuery(*ix, q, 10, "rebuilt", &alive) / 20;
    EXPECT_GE(recall, 0.8) << kIndexKinds.Name(kind);
  }
}

TEST_F(QuantizedIndexTest, OversampleIsARequestSettingWithItsChecks) {
  auto ix = Make(IndexKind::kFlat, CodeKind::kBinary, false);
  SearchRequest r;
  r.hs = queries_.hs.data(), r.rw = queries_.rw.data(), r.k = 10;
  for (double bad : {-1.0, std::nan(""), HUGE_VAL}) {
    r.oversample = bad;
    auto hits = ix->Search(r);
    ASSERT_FALSE(hits.ok());
    EXPECT_EQ(hits.status().code(), Status::Code::kInvalidArgument);
  }
  // More candidates never rank worse: recall with 1x is at most that with 50x.
  double low = 0, high = 0;
  for (size_t q = 0; q < 20; ++q) {
    std::set<uint64_t> exact;
    r.hs = &queries_.hs[q * kDh], r.rw = &queries_.rw[q * kDr];
    r.exact = true, r.oversample = 0;
    auto exact_hits = ix->Search(r);
    ASSERT_TRUE(exact_hits.ok());
    for (const Hit& h : *exact_hits) exact.insert(h.id);
    r.exact = false;
    for (auto [factor, out] : {std::pair{1.0, &low}, std::pair{50.0, &high}}) {
      r.oversample = factor;
      auto hits = ix->Search(r);
      ASSERT_TRUE(hits.ok());
      for (const Hit& h : *hits) *out += exact.count(h.id) / 200.0;
    }
  }
  EXPECT_LE(low, high);
  EXPECT_GE(high, 0.95);
}

TEST_F(QuantizedIndexTest, CodesRefuseWhatTheyCannotServe) {
  DualIndexSpec spec;
  spec.dim_hs = kDh, spec.dim_rw = kDr;
  spec.hs.codes = CodeKind::kBinary;
  auto ix = DualIndex::Create(spec, Standardizer::Raw(kDh), Standardizer::Raw(kDr));
  ASSERT_FALSE(ix.ok());
  EXPECT_EQ(ix.status().code(), Status::Code::kInvalidArgument);
  // 8-bit PQ trains 256 centroids a sub-quantizer: fewer training rows cannot.
  spec.hs.codes = CodeKind::kPq;
  spec.min_train_rows = 100;
  auto pq = DualIndex::Create(spec, Standardizer::Identity(kDh), Standardizer::Identity(kDr));
  ASSERT_FALSE(pq.ok());
  EXPECT_NE(pq.status().message().find("256"), std::string::npos) << pq.status().message();
}

// Records and snapshots written before code kinds said "sq8": true on every
// half; it quantized HNSW and IVF halves only, and still does.
TEST(DualIndexSpecJson, TheOlderSq8QuantizesOnlyAnnHalves) {
  auto spec = DualIndexSpec::FromJson(R"({"dim_hs": 8, "dim_rw": 4, "hs": {"kind": "hnsw", "sq8": true},
                                          "rw": {"kind": "flat", "sq8": true}})");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->hs.codes, CodeKind::kSq8);
  EXPECT_EQ(spec->rw.codes, CodeKind::kNone);
  auto back = DualIndexSpec::FromJson(spec->ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->ToJson(), spec->ToJson());
  EXPECT_FALSE(DualIndexSpec::FromJson(R"({"dim_hs": 8, "dim_rw": 4, "hs": {"codes": "rabitq"}})").ok());
}

}  // namespace
}  // namespace moeedb
