#include "index/hnsw_graph.h"

// hnswlib's header defines (non-inline) CPU-detection helpers: included in
// this file only. Its own distance spaces are not used (CodeSpace below).
#include <hnswlib/hnswlib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace moeedb {

namespace {

// A node's data: the row's int8 code, q[i] = round(x[i] / scale), with
// scale = max|x| / 127, zero-padded to a multiple of 64 values; and the sum
// of q (the VNNI kernel multiplies unsigned by signed bytes, so it offsets
// one side by 128 and takes 128 * sum off again).
struct CodeHeader {
  float scale = 0;
  int32_t sum = 0;
};

size_t PaddedDim(size_t dim) { return (dim + 63) / 64 * 64; }
size_t CodeBytes(size_t dim) { return sizeof(CodeHeader) + PaddedDim(dim); }

void Encode(const float* x, size_t dim, uint8_t* out) {
  float amax = 0;
  for (size_t i = 0; i < dim; ++i) amax = std::max(amax, std::fabs(x[i]));
  CodeHeader h;
  h.scale = amax / 127.0f;
  const float inv = amax > 0 ? 127.0f / amax : 0.0f;
  auto* q = reinterpret_cast<int8_t*>(out + sizeof(CodeHeader));
  std::memset(q, 0, PaddedDim(dim));
  for (size_t i = 0; i < dim; ++i) {
    q[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * inv), -127.0f, 127.0f));
    h.sum += q[i];
  }
  std::memcpy(out, &h, sizeof h);
}

// Sum of a[i] * b[i] over n (a multiple of 64) int8 values; b_sum = sum of b.
using IntDot = int32_t (*)(const int8_t* a, const int8_t* b, size_t n, int32_t b_sum);

int32_t IntDotPortable(const int8_t* a, const int8_t* b, size_t n, int32_t) {
  int32_t s = 0;
  for (size_t i = 0; i < n; ++i) s += int32_t{a[i]} * b[i];
  return s;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) int32_t IntDotAvx2(const int8_t* a, const int8_t* b, size_t n, int32_t) {
  __m256i acc = _mm256_setzero_si256();
  for (size_t i = 0; i < n; i += 16) {
    const __m256i x = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m256i y = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(x, y));
  }
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// (a + 128) · b by vpdpbusd (a's sign bit flipped makes it a + 128 as an
// unsigned byte), minus 128 · sum(b).
__attribute__((target("avx512f,avx512bw,avx512vnni"))) int32_t IntDotVnni(const int8_t* a, const int8_t* b, size_t n,
                                                                         int32_t b_sum) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i acc0 = _mm512_setzero_si512(), acc1 = _mm512_setzero_si512();
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    acc0 = _mm512_dpbusd_epi32(acc0, _mm512_xor_si512(_mm512_loadu_si512(a + i), flip), _mm512_loadu_si512(b + i));
    acc1 = _mm512_dpbusd_epi32(acc1, _mm512_xor_si512(_mm512_loadu_si512(a + i + 64), flip),
                               _mm512_loadu_si512(b + i + 64));
  }
  if (i < n) acc0 = _mm512_dpbusd_epi32(acc0, _mm512_xor_si512(_mm512_loadu_si512(a + i), flip), _mm512_loadu_si512(b + i));
  return _mm512_reduce_add_epi32(_mm512_add_epi32(acc0, acc1)) - 128 * b_sum;
}
#endif

struct Kernel {
  IntDot dot;
  const char* name;
};

Kernel PickKernel() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni"))
    return {&IntDotVnni, "avx512-vnni"};
  if (__builtin_cpu_supports("avx2")) return {&IntDotAvx2, "avx2"};
#endif
  return {&IntDotPortable, "portable"};
}

const Kernel& ChosenKernel() {
  static const Kernel k = PickKernel();
  return k;
}

class CodeSpace final : public hnswlib::SpaceInterface<float> {
 public:
  explicit CodeSpace(size_t dim) : dim_(dim), padded_(PaddedDim(dim)), dot_(ChosenKernel().dot) {}
  size_t get_data_size() override { return CodeBytes(dim_); }
  hnswlib::DISTFUNC<float> get_dist_func() override { return &Distance; }
  void* get_dist_func_param() override { return this; }

 private:
  // 1 - <a, b> of the decoded codes: hnswlib keeps the smallest distances.
  static float Distance(const void* a, const void* b, const void* param) {
    const auto* s = static_cast<const CodeSpace*>(param);
    CodeHeader ha, hb;
    std::memcpy(&ha, a, sizeof ha);
    std::memcpy(&hb, b, sizeof hb);
    const int32_t dot = s->dot_(reinterpret_cast<const int8_t*>(static_cast<const uint8_t*>(a) + sizeof(CodeHeader)),
                                reinterpret_cast<const int8_t*>(static_cast<const uint8_t*>(b) + sizeof(CodeHeader)),
                                s->padded_, hb.sum);
    return 1.0f - ha.scale * hb.scale * static_cast<float>(dot);
  }

  size_t dim_, padded_;
  IntDot dot_;
};

// hnswlib's file starts with 6 size_t, 2 uint32 and 5 more 8-byte fields,
// then every node's bottom-layer block. Checked before hnswlib reads it: its
// loader trusts the sizes it finds and would allocate from garbage.
constexpr size_t kHeaderBytes = 6 * 8 + 2 * 4 + 5 * 8;

// code_bytes: the node data size the file must hold (0: any).
Status CheckGraphFile(const std::string& path, size_t code_bytes) {
  std::error_code ec;
  const uintmax_t bytes = std::filesystem::file_size(path, ec);
  if (ec) return Status::IOError("HNSW graph " + path + ": " + ec.message());
  if (bytes < kHeaderBytes) return Status::Corruption("HNSW graph " + path + " is truncated");
  std::ifstream in(path, std::ios::binary);
  uint64_t head[6];
  in.read(reinterpret_cast<char*>(head), sizeof head);
  const uint64_t max_elements = head[1], count = head[2], per_element = head[3];
  const uint64_t label_offset = head[4], data_offset = head[5];
  if (in && code_bytes != 0 && label_offset - data_offset != code_bytes)
    return Status::Corruption("HNSW graph " + path + " holds codes of another dimension");
  if (!in || count > max_elements || count > (1ULL << 32) || per_element > (1ULL << 20) ||
      bytes < kHeaderBytes + count * per_element)
    return Status::Corruption("HNSW graph " + path + " is damaged");
  return Status::OK();
}

}  // namespace

struct HnswGraph::Impl {
  explicit Impl(size_t d) : dim(d), space(d) {}
  size_t dim;
  CodeSpace space;  // declared before the graph, which reads it until destroyed
  std::unique_ptr<hnswlib::HierarchicalNSW<float>> graph;
};

HnswGraph::HnswGraph() = default;
HnswGraph::~HnswGraph() = default;

HnswGraph::HnswGraph(size_t dim, int m, int ef_construction, int ef_search) : impl_(std::make_unique<Impl>(dim)) {
  impl_->graph = std::make_unique<hnswlib::HierarchicalNSW<float>>(&impl_->space, 1024, static_cast<size_t>(m),
                                                                   static_cast<size_t>(ef_construction));
  impl_->graph->setEf(static_cast<size_t>(ef_search));
}

const char* HnswGraph::SimdLevel() { return ChosenKernel().name; }

size_t HnswGraph::size() const { return impl_->graph->cur_element_count; }

size_t HnswGraph::memory_bytes() const {
  const auto& g = *impl_->graph;
  // Level 0 (links, code, label) for every allocated element, the upper
  // levels' link lists of the elements that have them, the per-element
  // level and list pointer, and the label map's entries.
  size_t bytes = g.max_elements_ * (g.size_data_per_element_ + sizeof(int) + sizeof(char*));
  for (size_t i = 0; i < g.cur_element_count; ++i)
    if (g.element_levels_[i] > 0) bytes += g.size_links_per_element_ * static_cast<size_t>(g.element_levels_[i]);
  bytes += g.label_lookup_.size() * (sizeof(hnswlib::labeltype) + sizeof(hnswlib::tableint) + 2 * sizeof(void*));
  return bytes;
}

void HnswGraph::Add(const float* rows, size_t n, int threads) {
  if (n == 0) return;
  auto& g = *impl_->graph;
  const size_t from = size(), to = from + n, bytes = CodeBytes(impl_->dim);
  if (to > g.max_elements_) g.resizeIndex(std::max(to, 2 * g.max_elements_));
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&] {
    std::vector<uint8_t> code(bytes);
    for (size_t i = next++; i < n; i = next++) {
      try {
        Encode(rows + i * impl_->dim, impl_->dim, code.data());
        g.addPoint(code.data(), static_cast<hnswlib::labeltype>(from + i));
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
      }
    }
  };
  if (from == 0) {  // the first node alone: it becomes the entry point
    std::vector<uint8_t> code(bytes);
    Encode(rows, impl_->dim, code.data());
    g.addPoint(code.data(), 0);
    next = 1;
  }
  const int workers = static_cast<int>(std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(std::max(threads, 1)), n)));
  std::vector<std::thread> pool;
  for (int t = 1; t < workers; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

std::vector<size_t> HnswGraph::Search(const float* q, size_t k) const {
  std::vector<uint8_t> code(CodeBytes(impl_->dim));
  Encode(q, impl_->dim, code.data());
  auto found = impl_->graph->searchKnn(code.data(), k);  // farthest on top
  std::vector<size_t> out(found.size());
  for (size_t i = out.size(); i-- > 0; found.pop()) out[i] = static_cast<size_t>(found.top().second);
  return out;
}

Status HnswGraph::Save(const std::string& path) const {
  try {
    impl_->graph->saveIndex(path);  // reports no write errors itself
  } catch (const std::exception& e) {
    return Status::IOError("writing HNSW graph " + path + ": " + e.what());
  }
  const Status st = CheckGraphFile(path, CodeBytes(impl_->dim));
  return st.ok() ? st : Status::IOError("writing HNSW graph " + path + ": " + st.message());
}

Result<std::unique_ptr<HnswGraph>> HnswGraph::Load(const std::string& path, size_t dim, int ef_search) {
  MOEEDB_RETURN_IF_ERROR(CheckGraphFile(path, CodeBytes(dim)));
  std::unique_ptr<HnswGraph> h(new HnswGraph());
  h->impl_ = std::make_unique<Impl>(dim);
  try {
    h->impl_->graph = std::make_unique<hnswlib::HierarchicalNSW<float>>(&h->impl_->space, path);
  } catch (const std::exception& e) {
    return Status::Corruption("HNSW graph " + path + ": " + e.what());
  }
  h->impl_->graph->setEf(static_cast<size_t>(ef_search));
  return h;
}

}  // namespace moeedb
