#include "index/binary_codes.h"

#include <algorithm>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace moeedb {

namespace {

void HammingPortable(const uint64_t* q, const uint64_t* codes, size_t n, size_t words, uint32_t* out) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t d = 0;
    for (size_t w = 0; w < words; ++w) {
      uint64_t x = q[w] ^ codes[i * words + w];
      while (x) { x &= x - 1; ++d; }
    }
    out[i] = d;
  }
}

#if defined(__x86_64__)
__attribute__((target("popcnt"))) void HammingPopcnt(const uint64_t* q, const uint64_t* codes, size_t n, size_t words,
                                                     uint32_t* out) {
  if (words == 1) {  // a short signal (e.g. RW of 32 features): one word a row
    const uint64_t q0 = q[0];
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint32_t>(_mm_popcnt_u64(q0 ^ codes[i]));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const uint64_t* c = codes + i * words;
    uint64_t a = 0, b = 0;
    size_t w = 0;
    for (; w + 2 <= words; w += 2) {
      a += _mm_popcnt_u64(q[w] ^ c[w]);
      b += _mm_popcnt_u64(q[w + 1] ^ c[w + 1]);
    }
    if (w < words) a += _mm_popcnt_u64(q[w] ^ c[w]);
    out[i] = static_cast<uint32_t>(a + b);
  }
}

// Eight words at a time; a row's remainder below eight words by a mask.
__attribute__((target("avx512f,avx512vpopcntdq"))) void HammingAvx512(const uint64_t* q, const uint64_t* codes,
                                                                       size_t n, size_t words, uint32_t* out) {
  const size_t full = words / 8, rest = words % 8;
  const __mmask8 tail = static_cast<__mmask8>((1u << rest) - 1);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t* c = codes + i * words;
    __m512i acc = _mm512_setzero_si512();
    for (size_t b = 0; b < full; ++b) {
      const __m512i x = _mm512_xor_si512(_mm512_loadu_si512(q + 8 * b), _mm512_loadu_si512(c + 8 * b));
      acc = _mm512_add_epi64(acc, _mm512_popcnt_epi64(x));
    }
    if (rest) {
      const __m512i x = _mm512_xor_si512(_mm512_maskz_loadu_epi64(tail, q + 8 * full),
                                         _mm512_maskz_loadu_epi64(tail, c + 8 * full));
      acc = _mm512_add_epi64(acc, _mm512_popcnt_epi64(x));
    }
    out[i] = static_cast<uint32_t>(_mm512_reduce_add_epi64(acc));
  }
}
#endif

enum class Level { kPortable, kPopcnt, kAvx512 };

Level DetectLevel() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vpopcntdq")) return Level::kAvx512;
  if (__builtin_cpu_supports("popcnt")) return Level::kPopcnt;
#endif
  return Level::kPortable;
}

const Level kLevel = DetectLevel();

}  // namespace

void HammingDistances(const uint64_t* q, const uint64_t* codes, size_t n, size_t words, uint32_t* out) {
#if defined(__x86_64__)
  // A row of fewer than four words gains nothing from a 512-bit register.
  if (kLevel == Level::kAvx512 && words >= 4) return HammingAvx512(q, codes, n, words, out);
  if (kLevel != Level::kPortable) return HammingPopcnt(q, codes, n, words, out);
#endif
  HammingPortable(q, codes, n, words, out);
}

const char* HammingSimdLevel() {
  return kLevel == Level::kAvx512 ? "avx512-vpopcntdq" : kLevel == Level::kPopcnt ? "popcnt" : "portable";
}

BinaryCodes::BinaryCodes(size_t dim, const float* train, size_t n) : dim_(dim), words_((dim + 63) / 64) {
  if (n == 0) return;
  std::vector<double> sum(dim, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < dim; ++j) sum[j] += train[i * dim + j];
  centre_.resize(dim);
  for (size_t j = 0; j < dim; ++j) centre_[j] = static_cast<float>(sum[j] / static_cast<double>(n));
}

Result<BinaryCodes> BinaryCodes::FromParts(size_t dim, std::vector<float> centre, std::vector<uint64_t> codes) {
  BinaryCodes b;
  b.dim_ = dim;
  b.words_ = (dim + 63) / 64;
  if (dim == 0 || (!centre.empty() && centre.size() != dim) || codes.size() % b.words_ != 0)
    return Status::Corruption("binary codes do not match their dimension");
  b.centre_ = std::move(centre);
  b.codes_ = std::move(codes);
  return b;
}

void BinaryCodes::Encode(const float* x, uint64_t* out) const {
  std::fill(out, out + words_, uint64_t{0});
  for (size_t j = 0; j < dim_; ++j) {
    const float v = centre_.empty() ? x[j] : x[j] - centre_[j];
    if (v > 0.0f) out[j / 64] |= uint64_t{1} << (j % 64);
  }
}

void BinaryCodes::Add(const float* rows, size_t n) {
  const size_t at = codes_.size();
  codes_.resize(at + n * words_);
  for (size_t i = 0; i < n; ++i) Encode(rows + i * dim_, codes_.data() + at + i * words_);
}

uint32_t BinaryCodes::Distance(const uint64_t* q, size_t row) const {
  uint32_t d = 0;
  HammingDistances(q, codes_.data() + row * words_, 1, words_, &d);
  return d;
}

std::vector<size_t> BinaryCodes::Search(const float* query, size_t k, const uint8_t* keep) const {
  const size_t n = size();
  std::vector<size_t> out;
  if (k == 0 || n == 0) return out;
  std::vector<uint64_t> q(words_);
  Encode(query, q.data());
  // Every distance (4 bytes a row) and, per thread, a histogram of the kept
  // rows' distances in the same pass over the codes: distances are at most
  // 64 * words, so the histogram finds the k-th smallest without sorting.
  // Then each thread lists its rows at or below that distance. The codes are
  // read once; the distances (a 32nd of an f32 row's bytes) twice.
  constexpr uint32_t kDead = UINT32_MAX;
  const size_t bins = 64 * words_ + 1;  // any distance a code's words can give, padding bits included
  std::vector<uint32_t> dist(n);
  const size_t threads = std::max<size_t>(1, std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), n / 32768));
  const size_t step = (n + threads - 1) / threads;
  std::vector<std::vector<size_t>> counts(threads, std::vector<size_t>(bins, 0));
  auto in_threads = [&](const auto& part) {
    std::vector<std::thread> pool;
    for (size_t t = 1; t < threads; ++t)
      if (t * step < n) pool.emplace_back([&, t] { part(t, t * step, std::min(n, (t + 1) * step)); });
    part(0, 0, std::min(n, step));
    for (auto& th : pool) th.join();
  };
  in_threads([&](size_t t, size_t from, size_t to) {
    constexpr size_t kBlock = 4096;  // distances still in L1/L2 when counted
    std::vector<size_t>& count = counts[t];
    for (size_t b = from; b < to; b += kBlock) {
      const size_t e = std::min(to, b + kBlock);
      uint32_t* d = dist.data() + b;
      HammingDistances(q.data(), codes_.data() + b * words_, e - b, words_, d);
      if (keep) {
        for (size_t i = 0; i < e - b; ++i) {
          if (keep[b + i]) ++count[d[i]];
          else d[i] = kDead;
        }
      } else {
        for (size_t i = 0; i < e - b; ++i) ++count[d[i]];
      }
    }
  });
  std::vector<size_t>& count = counts[0];
  size_t kept = 0;
  for (size_t t = 1; t < threads; ++t)
    for (size_t j = 0; j < bins; ++j) count[j] += counts[t][j];
  for (size_t c : count) kept += c;
  const size_t take = std::min(k, kept);
  if (take == 0) return out;
  uint32_t threshold = 0;  // the distance of the take-th nearest
  for (size_t seen = 0; threshold < bins; ++threshold) {
    seen += count[threshold];
    if (seen >= take) break;
  }
  std::vector<std::vector<std::pair<uint32_t, size_t>>> found(threads);
  in_threads([&](size_t t, size_t from, size_t to) {
    for (size_t i = from; i < to; ++i)
      if (dist[i] <= threshold) found[t].emplace_back(dist[i], i);  // kDead is above any threshold
  });
  std::vector<std::pair<uint32_t, size_t>>& all = found[0];
  for (size_t t = 1; t < threads; ++t) all.insert(all.end(), found[t].begin(), found[t].end());
  std::sort(all.begin(), all.end());  // by distance, then position
  all.resize(take);
  out.reserve(take);
  for (const auto& f : all) out.push_back(f.second);
  return out;
}

}  // namespace moeedb
