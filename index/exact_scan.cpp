#include "index/exact_scan.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "base/simd.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace moeedb {

uint16_t FloatToF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (exp <= 0) return static_cast<uint16_t>(sign);
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  if ((mant & 0x1fff) > 0x1000 || ((mant & 0x1fff) == 0x1000 && (h & 1))) ++h;  // round to nearest even
  return static_cast<uint16_t>(h);
}

float F16ToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t x;
  if (exp == 0) x = sign;  // zero (subnormals flushed)
  else if (exp == 31) x = sign | 0x7f800000 | (mant << 13);
  else x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

namespace {

float DotF32Portable(const float* q, const float* r, size_t d) {
  float s = 0;
  for (size_t j = 0; j < d; ++j) s += q[j] * r[j];
  return s;
}

float DotF16Portable(const float* q, const uint16_t* r, size_t d) {
  float s = 0;
  for (size_t j = 0; j < d; ++j) s += q[j] * F16ToFloat(r[j]);
  return s;
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) float DotF32Avx2(const float* q, const float* r, size_t d) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  size_t j = 0;
  for (; j + 16 <= d; j += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j), _mm256_loadu_ps(r + j), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j + 8), _mm256_loadu_ps(r + j + 8), a1);
  }
  for (; j + 8 <= d; j += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + j), _mm256_loadu_ps(r + j), a0);
  float s = Hsum8(_mm256_add_ps(a0, a1));
  for (; j < d; ++j) s += q[j] * r[j];
  return s;
}

__attribute__((target("avx2,f16c,fma"))) float DotF16Avx2(const float* q, const uint16_t* r, size_t d) {
  __m256 acc = _mm256_setzero_ps();
  size_t j = 0;
  for (; j + 8 <= d; j += 8) {
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + j)));
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + j), v, acc);
  }
  float s = Hsum8(acc);
  for (; j < d; ++j) s += q[j] * F16ToFloat(r[j]);
  return s;
}

// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_ps as the
// pass-through of unmasked conversions and reductions): a known false alarm.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) float DotF32Avx512(const float* q, const float* r, size_t d) {
  // Four accumulators: enough independent FMAs in flight to keep up with memory.
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  size_t j = 0;
  for (; j + 64 <= d; j += 64) {
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + j), _mm512_loadu_ps(r + j), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + j + 16), _mm512_loadu_ps(r + j + 16), a1);
    a2 = _mm512_fmadd_ps(_mm512_loadu_ps(q + j + 32), _mm512_loadu_ps(r + j + 32), a2);
    a3 = _mm512_fmadd_ps(_mm512_loadu_ps(q + j + 48), _mm512_loadu_ps(r + j + 48), a3);
  }
  for (; j + 16 <= d; j += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + j), _mm512_loadu_ps(r + j), a0);
  float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  for (; j < d; ++j) s += q[j] * r[j];
  return s;
}

__attribute__((target("avx512f"))) float DotF16Avx512(const float* q, const uint16_t* r, size_t d) {
  __m512 acc = _mm512_setzero_ps();
  size_t j = 0;
  for (; j + 16 <= d; j += 16) {
    const __m512 v = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + j)));
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + j), v, acc);
  }
  float s = _mm512_reduce_add_ps(acc);
  for (; j < d; ++j) s += q[j] * F16ToFloat(r[j]);
  return s;
}
#pragma GCC diagnostic pop
#endif

enum class Level { kPortable, kAvx2, kAvx512 };

Level DetectLevel() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return Level::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    return Level::kAvx2;
#endif
  return Level::kPortable;
}

const Level kLevel = DetectLevel();

inline float Dot(const float* q, const ScanRows& r, size_t p) {
  const size_t d = r.dim;
#if defined(__x86_64__)
  if (r.f32) {
    const float* row = r.f32 + p * d;
    return kLevel == Level::kAvx512 ? DotF32Avx512(q, row, d)
           : kLevel == Level::kAvx2 ? DotF32Avx2(q, row, d)
                                    : DotF32Portable(q, row, d);
  }
  const uint16_t* row = r.f16 + p * d;
  return kLevel == Level::kAvx512 ? DotF16Avx512(q, row, d)
         : kLevel == Level::kAvx2 ? DotF16Avx2(q, row, d)
                                  : DotF16Portable(q, row, d);
#else
  return r.f32 ? DotF32Portable(q, r.f32 + p * d, d) : DotF16Portable(q, r.f16 + p * d, d);
#endif
}

// A bounded set of the k best hits; the worst sits at the heap's front.
class TopK {
 public:
  TopK(size_t k, const ScanOptions& o) : k_(k), o_(&o) {}
  // Whether a hit of this score could enter (cheap test before building it).
  bool Admits(float score) const { return heap_.size() < k_ || score >= heap_.front().score; }
  void Push(const ScanHit& h) {
    if (k_ == 0) return;
    auto worse_first = [this](const ScanHit& a, const ScanHit& b) { return Before(a, b); };
    if (heap_.size() < k_) {
      heap_.push_back(h);
      std::push_heap(heap_.begin(), heap_.end(), worse_first);
    } else if (Before(h, heap_.front())) {
      std::pop_heap(heap_.begin(), heap_.end(), worse_first);
      heap_.back() = h;
      std::push_heap(heap_.begin(), heap_.end(), worse_first);
    }
  }
  std::vector<ScanHit>& hits() { return heap_; }
  // Whether a ranks before b: higher score, then the tie order.
  bool Before(const ScanHit& a, const ScanHit& b) const {
    if (a.score != b.score) return a.score > b.score;
    return o_->tie_before ? o_->tie_before(a.row, b.row) : a.row < b.row;
  }

 private:
  size_t k_;
  const ScanOptions* o_;
  std::vector<ScanHit> heap_;
};

// Rows [from, to) for every query, into heaps[q]. Rows outer, queries inner:
// a row's values are read from memory once for all the queries.
void ScanRange(const ScanRows& hs, const ScanRows& rw, size_t from, size_t to, const std::vector<ScanQuery>& queries,
               const ScanOptions& o, std::vector<TopK>* heaps) {
  for (size_t p = from; p < to; ++p) {
    if (o.keep && !o.keep(p)) continue;
    for (size_t i = 0; i < queries.size(); ++i) {
      const ScanQuery& q = queries[i];
      ScanHit h;
      h.row = p;
      if (q.w_hs != 0.0f) h.score_hs = Dot(q.hs, hs, p);
      if (q.w_rw != 0.0f) h.score_rw = Dot(q.rw, rw, p);
      h.score = q.w_hs * h.score_hs + q.w_rw * h.score_rw;
      if ((*heaps)[i].Admits(h.score)) (*heaps)[i].Push(h);
    }
  }
}

}  // namespace

float DotRow(const float* q, const ScanRows& r, size_t p) { return Dot(q, r, p); }

const char* ScanSimdLevel() {
  return kLevel == Level::kAvx512 ? "avx512" : kLevel == Level::kAvx2 ? "avx2" : "portable";
}

std::vector<std::vector<ScanHit>> ScanTopKBatch(const ScanRows& hs, const ScanRows& rw, size_t rows,
                                                const std::vector<ScanQuery>& queries, const ScanOptions& o) {
  // Threads only where each gets enough rows to pay for its start (~tens of us).
  const size_t cores = o.threads > 0 ? static_cast<size_t>(o.threads) : std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::max<size_t>(1, std::min(cores, rows / 2048));
  std::vector<std::vector<TopK>> per_thread(threads, std::vector<TopK>(queries.size(), TopK(o.k, o)));
  const size_t step = (rows + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t)
    pool.emplace_back([&, t] { ScanRange(hs, rw, t * step, std::min(rows, (t + 1) * step), queries, o, &per_thread[t]); });
  ScanRange(hs, rw, 0, std::min(rows, step), queries, o, &per_thread[0]);
  for (auto& th : pool) th.join();
  std::vector<std::vector<ScanHit>> out(queries.size());
  for (size_t i = 0; i < queries.size(); ++i) {
    TopK merged(o.k, o);
    for (auto& heaps : per_thread)
      for (const ScanHit& h : heaps[i].hits()) merged.Push(h);
    out[i] = std::move(merged.hits());
    std::sort(out[i].begin(), out[i].end(), [&](const ScanHit& a, const ScanHit& b) { return merged.Before(a, b); });
  }
  return out;
}

std::vector<ScanHit> ScanTopK(const ScanRows& hs, const ScanRows& rw, size_t rows, const ScanQuery& q,
                              const ScanOptions& o) {
  return std::move(ScanTopKBatch(hs, rw, rows, {q}, o)[0]);
}

}  // namespace moeedb
