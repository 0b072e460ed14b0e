#include "index/dual_index.h"

#include <charconv>

#include "index/binary_codes.h"
#include "index/exact_scan.h"
#include "index/hnsw_graph.h"
#include "index/row_buffer.h"

#include <faiss/IndexBinaryFlat.h>
#include <faiss/IndexBinaryHNSW.h>
#include <faiss/IndexBinaryIVF.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/IndexPQ.h>
#include <faiss/IndexScalarQuantizer.h>
#include <faiss/impl/IDSelector.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>
#include <faiss/utils/distances.h>


#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_set>

namespace moeedb {

namespace fs = std::filesystem;
using FaissId = faiss::Index::idx_t;  // Faiss 1.7.3 keeps idx_t inside Index
using json = nlohmann::json;

namespace {

// The number of PQ sub-quantizers for `dim` dimensions at about `pq_dims`
// each (Faiss needs a divisor of dim): the divisor nearest dim / pq_dims,
// the smaller on a tie.
size_t PqSubquantizers(size_t dim, int pq_dims) {
  const double target = std::max(1.0, double(dim) / double(std::max(1, pq_dims)));
  size_t best = 1;
  for (size_t m = 1; m <= dim; ++m)
    if (dim % m == 0 && std::fabs(double(m) - target) < std::fabs(double(best) - target)) best = m;
  return best;
}

faiss::ScalarQuantizer::QuantizerType ScalarType(CodeKind c) {
  return c == CodeKind::kSq4 ? faiss::ScalarQuantizer::QT_4bit : faiss::ScalarQuantizer::QT_8bit;
}

}  // namespace

// One half: its standardized rows and what proposes its candidates (ids =
// row positions): an HnswGraph (int8 codes of the rows) for HNSW without
// codes; a Faiss index for IVF, for HNSW over codes and for scalar or PQ
// codes scanned flat; BinaryCodes for 1-bit codes scanned flat, and a Faiss
// binary index (over BinaryCodes' encoding) for HNSW or IVF over them.
// A half whose codes need training stays "pending" (searched exactly) until
// min_train_rows rows exist.
struct DualIndex::SignalIndex {
  size_t dim = 0;
  SignalIndexSpec spec;
  bool fp16 = false;
  RowBuffer rows_buf;    // row-major, every row (dead ones included until a rebuild); f32 or fp16
  std::unique_ptr<faiss::Index> ann;
  std::unique_ptr<faiss::IndexBinary> bann;
  std::unique_ptr<BinaryCodes> bits;  // 1-bit codes: the encoder (centre); flat, the codes too
  std::unique_ptr<HnswGraph> graph;
  size_t ann_rows = 0;      // rows [0, ann_rows) are in `ann`, `bann`, `bits` or `graph`
  size_t trained_rows = 0;  // rows the codes were trained on

  size_t row_bytes() const { return dim * (fp16 ? 2 : 4); }
  size_t rows() const { return rows_buf.size() / row_bytes(); }
  Status Append(const float* src, size_t n) {
    if (!fp16) return rows_buf.Append(src, n * dim * sizeof(float));
    std::vector<uint16_t> h(n * dim);
    for (size_t i = 0; i < n * dim; ++i) h[i] = FloatToF16(src[i]);
    return rows_buf.Append(h.data(), h.size() * 2);
  }
  ScanRows scan_rows() const {
    ScanRows r;
    r.dim = dim;
    if (fp16) r.f16 = reinterpret_cast<const uint16_t*>(rows_buf.data());
    else r.f32 = reinterpret_cast<const float*>(rows_buf.data());
    return r;
  }
  float Dot(const float* q, size_t row) const { return DotRow(q, scan_rows(), row); }
  // Rows on disk: the pages of these rows requested from the disk at once
  // (ranges sharing a page merged), before they are read one by one. A
  // sample of them in the page cache already (the common, warm case) skips
  // the advice, which costs a system call per range. MOEEDB_ROW_PREFETCH=off
  // reads them one fault at a time (benchmarks compare; read per call so one
  // process can time both).
  void Prefetch(const std::vector<size_t>& candidates) const {
    if (!rows_buf.on_disk() || candidates.empty()) return;
    if (const char* e = std::getenv("MOEEDB_ROW_PREFETCH"); e != nullptr && std::strcmp(e, "off") == 0) return;
    constexpr size_t kSample = 8;
    const size_t stride = std::max<size_t>(1, candidates.size() / kSample);
    bool warm = true;
    for (size_t i = 0; i < candidates.size() && warm; i += stride) {
      const size_t at = candidates[i] * row_bytes();
      warm = rows_buf.Resident(at) && rows_buf.Resident(at + row_bytes() - 1);
    }
    if (warm) return;
    std::vector<size_t> positions = candidates;
    std::sort(positions.begin(), positions.end());
    static const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_t from = positions[0] * row_bytes(), to = from + row_bytes();
    for (size_t i = 1; i < positions.size(); ++i) {
      const size_t b = positions[i] * row_bytes();
      if (b / kPage > (to - 1) / kPage + 1) {  // a page between: a new range
        rows_buf.Prefetch(from, to - from);
        from = b;
      }
      to = b + row_bytes();
    }
    rows_buf.Prefetch(from, to - from);
  }
  // Rows [from, to) as floats: a pointer into the rows, or decoded into *tmp.
  const float* Rows(size_t from, size_t to, std::vector<float>* tmp) const {
    if (!fp16) return reinterpret_cast<const float*>(rows_buf.data()) + from * dim;
    const uint16_t* h = reinterpret_cast<const uint16_t*>(rows_buf.data());
    tmp->resize((to - from) * dim);
    for (size_t i = 0; i < tmp->size(); ++i) (*tmp)[i] = F16ToFloat(h[from * dim + i]);
    return tmp->data();
  }
  void ClearCodes() { ann.reset(); bann.reset(); bits.reset(); graph.reset(); ann_rows = trained_rows = 0; }
  bool HasIndex() const { return ann || bann || bits || graph; }
  bool UsesGraph() const { return spec.kind == IndexKind::kHnsw && spec.codes == CodeKind::kNone && !ann; }
  bool Binary() const { return spec.codes == CodeKind::kBinary; }
  bool NeedsTraining() const { return spec.kind == IndexKind::kIvf || spec.codes != CodeKind::kNone; }
  size_t binary_bytes() const { return (dim + 7) / 8; }
  size_t nlist(size_t n) const {
    return spec.ivf_nlist > 0 ? static_cast<size_t>(spec.ivf_nlist)
                              : std::max<size_t>(1, static_cast<size_t>(4 * std::sqrt(double(n))));
  }

  // A Faiss index of this half's kind and codes (not binary; nullptr for a
  // flat half without codes).
  std::unique_ptr<faiss::Index> MakeAnn(size_t n) const {
    const int d = static_cast<int>(dim);
    const size_t pq_m = PqSubquantizers(dim, spec.pq_dims);
    if (spec.kind == IndexKind::kFlat) {
      if (spec.codes == CodeKind::kPq) return std::make_unique<faiss::IndexPQ>(d, pq_m, 8, faiss::METRIC_INNER_PRODUCT);
      return std::make_unique<faiss::IndexScalarQuantizer>(d, ScalarType(spec.codes), faiss::METRIC_INNER_PRODUCT);
    }
    if (spec.kind == IndexKind::kHnsw) {
      std::unique_ptr<faiss::IndexHNSW> h;
      // Faiss 1.7.3's HNSW over PQ is L2 only: on unit rows the same order.
      if (spec.codes == CodeKind::kPq) h = std::make_unique<faiss::IndexHNSWPQ>(d, static_cast<int>(pq_m), spec.hnsw_m);
      else if (spec.codes != CodeKind::kNone)
        h = std::make_unique<faiss::IndexHNSWSQ>(d, ScalarType(spec.codes), spec.hnsw_m, faiss::METRIC_INNER_PRODUCT);
      else h = std::make_unique<faiss::IndexHNSWFlat>(d, spec.hnsw_m, faiss::METRIC_INNER_PRODUCT);
      h->hnsw.efConstruction = spec.ef_construction;
      return h;
    }
    auto* quantizer = new faiss::IndexFlatIP(d);
    std::unique_ptr<faiss::IndexIVF> ivf;
    if (spec.codes == CodeKind::kPq)
      ivf = std::make_unique<faiss::IndexIVFPQ>(quantizer, d, nlist(n), pq_m, 8, faiss::METRIC_INNER_PRODUCT);
    else if (spec.codes != CodeKind::kNone)
      ivf = std::make_unique<faiss::IndexIVFScalarQuantizer>(quantizer, d, nlist(n), ScalarType(spec.codes),
                                                              faiss::METRIC_INNER_PRODUCT);
    else
      ivf = std::make_unique<faiss::IndexIVFFlat>(quantizer, d, nlist(n), faiss::METRIC_INNER_PRODUCT);
    ivf->own_fields = true;
    // k-means on a bounded sample, few iterations: training cost stays
    // proportional to nlist, not to the collection.
    ivf->cp.max_points_per_centroid = 64;
    ivf->cp.niter = 10;
    return ivf;
  }

  std::unique_ptr<faiss::IndexBinary> MakeBinaryAnn(size_t n) const {
    const int d = static_cast<int>(8 * binary_bytes());
    if (spec.kind == IndexKind::kHnsw) {
      auto h = std::make_unique<faiss::IndexBinaryHNSW>(d, spec.hnsw_m);
      h->hnsw.efConstruction = spec.ef_construction;
      return h;
    }
    auto ivf = std::make_unique<faiss::IndexBinaryIVF>(new faiss::IndexBinaryFlat(d), d, nlist(n));
    ivf->own_fields = true;
    ivf->cp.max_points_per_centroid = 64;
    ivf->cp.niter = 10;
    return ivf;
  }

  // Rows [from, to) as `encoder`'s 1-bit codes, binary_bytes() bytes each, for a Faiss binary index.
  std::vector<uint8_t> BinaryRows(const BinaryCodes& encoder, size_t from, size_t to) const {
    std::vector<float> tmp;
    const float* src = Rows(from, to, &tmp);
    std::vector<uint64_t> word(encoder.words());
    std::vector<uint8_t> out((to - from) * binary_bytes());
    for (size_t i = 0; i < to - from; ++i) {
      encoder.Encode(src + i * dim, word.data());
      std::memcpy(out.data() + i * binary_bytes(), word.data(), binary_bytes());
    }
    return out;
  }

  // Brings the codes up to date with the rows (training them first when it
  // is due, retraining them when the rows have grown 8-fold since).
  void Sync(size_t n_rows, const std::vector<uint8_t>& alive, size_t min_train) {
    if (spec.kind == IndexKind::kFlat && spec.codes == CodeKind::kNone) return;
    std::vector<float> tmp;
    if (UsesGraph()) {  // dead rows stay in the graph; candidates are filtered
      if (!graph) graph = std::make_unique<HnswGraph>(dim, spec.hnsw_m, spec.ef_construction, spec.ef_search);
      graph->Add(Rows(ann_rows, n_rows, &tmp), n_rows - ann_rows,
                 static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
      ann_rows = n_rows;
      return;
    }
    if (NeedsTraining() && HasIndex() && trained_rows > 0 && trained_rows < kRetrainRows && n_rows >= 8 * trained_rows) ClearCodes();
    if (!HasIndex()) {
      if (NeedsTraining() && n_rows < min_train) return;
      // Training reads a bounded sample of the rows (Faiss samples too).
      const size_t sample = std::min(n_rows, kRetrainRows);
      const float* train = Rows(0, sample, &tmp);
      // Trained aside and kept only when training succeeds: a throw leaves
      // the half pending (searched exactly), to train again on the next add.
      if (Binary()) {
        auto encoder = std::make_unique<BinaryCodes>(dim, train, sample);
        std::unique_ptr<faiss::IndexBinary> index;
        if (spec.kind != IndexKind::kFlat) {
          index = MakeBinaryAnn(n_rows);
          if (!index->is_trained) {
            const auto codes = BinaryRows(*encoder, 0, sample);
            index->train(static_cast<FaissId>(sample), codes.data());
          }
        }
        bits = std::move(encoder);
        bann = std::move(index);
      } else {
        auto index = MakeAnn(n_rows);
        if (!index->is_trained) index->train(static_cast<FaissId>(sample), train);
        ann = std::move(index);
      }
      trained_rows = n_rows;
      ann_rows = 0;
    }
    if (ann_rows == n_rows) return;
    const size_t n = n_rows - ann_rows;
    const bool ivf = spec.kind == IndexKind::kIvf;
    // IVF takes row positions as ids and removes the rows already dead;
    // the other kinds number rows by position and filter dead candidates.
    std::vector<FaissId> ids, dead;
    if (ivf) {
      for (size_t i = ann_rows; i < n_rows; ++i) {
        ids.push_back(static_cast<FaissId>(i));
        if (!alive[i]) dead.push_back(static_cast<FaissId>(i));
      }
    }
    if (bits && !bann) {
      bits->Add(Rows(ann_rows, n_rows, &tmp), n);
    } else if (bann) {
      const auto codes = BinaryRows(*bits, ann_rows, n_rows);
      if (ivf) bann->add_with_ids(static_cast<FaissId>(n), codes.data(), ids.data());
      else bann->add(static_cast<FaissId>(n), codes.data());
      // Rows already dead when they reach an IVF index are removed again.
      if (ivf && !dead.empty()) bann->remove_ids(faiss::IDSelectorArray(dead.size(), dead.data()));
    } else {
      const float* src = Rows(ann_rows, n_rows, &tmp);
      if (ivf) ann->add_with_ids(static_cast<FaissId>(n), src, ids.data());
      else ann->add(static_cast<FaissId>(n), src);
      if (ivf && !dead.empty()) ann->remove_ids(faiss::IDSelectorArray(dead.size(), dead.data()));
    }
    ann_rows = n_rows;
  }
};

DualIndex::DualIndex() = default;
DualIndex::~DualIndex() = default;

Status DualIndex::CheckSpec(const DualIndexSpec& spec, const Standardizer& hs, const Standardizer& rw) {
  if (spec.dim_hs == 0 || spec.dim_rw == 0) return Status::InvalidArgument("index dimensions must be positive");
  if (hs.dim() != spec.dim_hs || rw.dim() != spec.dim_rw)
    return Status::InvalidArgument("standardizer dimensions do not match the index spec");
  // The ANN indexes and the codes assume unit rows (inner product = cosine).
  auto coded = [](const SignalIndexSpec& s) { return s.kind != IndexKind::kFlat || s.codes != CodeKind::kNone; };
  if ((!hs.normalizes() && coded(spec.hs)) || (!rw.normalizes() && coded(spec.rw)))
    return Status::InvalidArgument(
        "an hnsw or ivf index, or quantized codes, need unit vectors: Dot and Euclid collections are flat without codes");
  for (const SignalIndexSpec* s : {&spec.hs, &spec.rw}) {
    if (s->pq_dims < 1) return Status::InvalidArgument("pq_dims must be at least 1");
    // Codes train once min_train_rows rows exist: 8-bit PQ needs 256 of them, IVF one a list.
    if (s->codes == CodeKind::kPq && spec.min_train_rows < 256)
      return Status::InvalidArgument("pq codes train on at least 256 rows: min_train_rows is " +
                                     std::to_string(spec.min_train_rows));
    if (s->kind == IndexKind::kIvf && static_cast<size_t>(s->ivf_nlist) > spec.min_train_rows)
      return Status::InvalidArgument("ivf_nlist " + std::to_string(s->ivf_nlist) + " exceeds min_train_rows " +
                                     std::to_string(spec.min_train_rows));
  }
  return Status::OK();
}

Result<std::unique_ptr<DualIndex>> DualIndex::Create(const DualIndexSpec& spec, Standardizer hs, Standardizer rw,
                                                     const std::string& rows_folder) {
  MOEEDB_RETURN_IF_ERROR(CheckSpec(spec, hs, rw));
  std::unique_ptr<DualIndex> d(new DualIndex());
  d->spec_ = spec;
  d->rows_folder_ = rows_folder.empty() ? fs::temp_directory_path().string() : rows_folder;
  d->std_hs_ = std::move(hs);
  d->std_rw_ = std::move(rw);
  d->hs_ = std::make_unique<SignalIndex>();
  d->rw_ = std::make_unique<SignalIndex>();
  for (auto [half, dim, s] : {std::tuple{d->hs_.get(), spec.dim_hs, spec.hs}, std::tuple{d->rw_.get(), spec.dim_rw, spec.rw}}) {
    half->fp16 = spec.fp16_rows;
    half->dim = dim;
    half->spec = s;
    if (spec.rows_on_disk) { MOEEDB_ASSIGN_OR_RETURN(half->rows_buf, RowBuffer::OnDisk(d->rows_folder_)); }
  }
  return d;
}

Status DualIndex::Add(const std::vector<uint64_t>& ids, const float* hs, const float* rw) {
  const size_t n = ids.size(), dh = spec_.dim_hs, dr = spec_.dim_rw;
  // Dead rows count until a rebuild drops them.
  if (pos_to_id_.size() + n > IdPositions::kMaxRows)
    return Status::NotSupported("an index holds at most " + std::to_string(IdPositions::kMaxRows) +
                                " rows (dead ones until a rebuild): use more shards");
  std::unordered_set<uint64_t> batch;
  for (size_t i = 0; i < n; ++i) {
    if (id_to_pos_.Find(ids[i], pos_to_id_) != IdPositions::kNotFound || !batch.insert(ids[i]).second)
      return Status::InvalidArgument("id " + std::to_string(ids[i]) + " is already in the index");
    for (size_t j = 0; j < dh; ++j)
      if (!std::isfinite(hs[i * dh + j])) return Status::InvalidArgument("non-finite value in an HS vector");
    for (size_t j = 0; j < dr; ++j)
      if (!std::isfinite(rw[i * dr + j])) return Status::InvalidArgument("non-finite value in an RW vector");
  }
  std::vector<float> hn(n * dh), rn(n * dr);
  for (size_t i = 0; i < n; ++i) {
    std_hs_.Apply(hs + i * dh, hn.data() + i * dh);
    std_rw_.Apply(rw + i * dr, rn.data() + i * dr);
  }
  return AddNormalized(ids, hn.data(), rn.data());
}

Status DualIndex::SyncHalves(SignalIndex* hs, SignalIndex* rw, const std::vector<uint8_t>& alive, size_t min_train,
                             const char* what) {
  try {
    hs->Sync(alive.size(), alive, min_train);
    rw->Sync(alive.size(), alive, min_train);
  } catch (const std::exception& e) {
    return Status::Internal(std::string("ANN index ") + what + " failed: " + e.what());
  }
  return Status::OK();
}

Status DualIndex::AddNormalized(const std::vector<uint64_t>& ids, const float* hn, const float* rn) {
  const size_t n = ids.size(), hs_before = hs_->rows_buf.size();
  MOEEDB_RETURN_IF_ERROR(hs_->Append(hn, n));
  Status st = rw_->Append(rn, n);
  if (!st.ok()) {  // both halves keep the same rows: drop the HS rows just added
    hs_->rows_buf.Truncate(hs_before);
    return st;
  }
  for (size_t i = 0; i < n; ++i) {
    pos_to_id_.push_back(ids[i]);
    alive_.push_back(1);
    id_to_pos_.Insert(pos_to_id_.size() - 1, pos_to_id_);
  }
  return SyncHalves(hs_.get(), rw_.get(), alive_, spec_.min_train_rows, "add");
}

size_t DualIndex::Remove(const std::vector<uint64_t>& ids) {
  std::vector<FaissId> ivf_remove;
  size_t removed = 0;
  for (uint64_t id : ids) {
    const size_t pos = id_to_pos_.Erase(id, pos_to_id_);
    if (pos == IdPositions::kNotFound) continue;
    alive_[pos] = 0;
    if (pos < std::max(hs_->ann_rows, rw_->ann_rows)) ivf_remove.push_back(static_cast<FaissId>(pos));
    ++tombstones_;
    ++removed;
  }
  for (SignalIndex* h : {hs_.get(), rw_.get()}) {
    if (h->spec.kind != IndexKind::kIvf || ivf_remove.empty()) continue;
    faiss::IDSelectorArray sel(ivf_remove.size(), ivf_remove.data());
    if (h->ann) h->ann->remove_ids(sel);
    if (h->bann) h->bann->remove_ids(sel);
  }
  // A rebuild that fails (a full disk) leaves the tombstoned index, still correct.
  if (tombstones_ > 0 && static_cast<double>(tombstones_) > spec_.rebuild_ratio * static_cast<double>(pos_to_id_.size()))
    (void)Rebuild();
  return removed;
}

Status DualIndex::Rebuild() {
  // The live rows are copied as stored (f32 or fp16) into new halves built
  // aside; the codes are then trained once over all of them.
  std::unique_ptr<SignalIndex> halves[2];
  const SignalIndex* old[2] = {hs_.get(), rw_.get()};
  for (int i = 0; i < 2; ++i) {
    halves[i] = std::make_unique<SignalIndex>();
    halves[i]->dim = old[i]->dim;
    halves[i]->spec = old[i]->spec;
    halves[i]->fp16 = old[i]->fp16;
    if (spec_.rows_on_disk) { MOEEDB_ASSIGN_OR_RETURN(halves[i]->rows_buf, RowBuffer::OnDisk(rows_folder_)); }
  }
  std::vector<uint64_t> pos_to_id;
  for (size_t p = 0; p < pos_to_id_.size(); ++p) {
    if (!alive_[p]) continue;
    pos_to_id.push_back(pos_to_id_[p]);
    for (int i = 0; i < 2; ++i) {
      const size_t rb = old[i]->row_bytes();
      MOEEDB_RETURN_IF_ERROR(halves[i]->rows_buf.Append(old[i]->rows_buf.data() + p * rb, rb));
    }
  }
  const std::vector<uint8_t> alive(pos_to_id.size(), 1);
  MOEEDB_RETURN_IF_ERROR(SyncHalves(halves[0].get(), halves[1].get(), alive, spec_.min_train_rows, "rebuild"));
  hs_ = std::move(halves[0]);
  rw_ = std::move(halves[1]);
  pos_to_id_ = std::move(pos_to_id);
  alive_ = alive;
  MOEEDB_RETURN_IF_ERROR(IndexLiveIds());  // the kept rows' ids are distinct
  tombstones_ = 0;
  ++rebuilds_;
  return Status::OK();
}

size_t DualIndex::memory_bytes() const {
  size_t bytes = 0;
  for (const SignalIndex* h : {hs_.get(), rw_.get()}) {
    bytes += h->rows_buf.heap_bytes();
    if (h->graph) bytes += h->graph->memory_bytes();
    if (h->bits) bytes += h->bits->memory_bytes();
    if (h->ann) {
      faiss::VectorIOWriter w;
      faiss::write_index(h->ann.get(), &w);
      bytes += w.data.size();
    }
    if (h->bann) {
      faiss::VectorIOWriter w;
      faiss::write_index_binary(h->bann.get(), &w);
      bytes += w.data.size();
    }
  }
  bytes += pos_to_id_.capacity() * sizeof(uint64_t) + alive_.capacity();
  bytes += id_to_pos_.memory_bytes();
  return bytes;
}

size_t DualIndex::mapped_bytes() const {
  size_t bytes = 0;
  for (const SignalIndex* h : {hs_.get(), rw_.get()})
    if (h->rows_buf.on_disk()) bytes += h->rows_buf.size();
  return bytes;
}

Status DualIndex::EvictRows() const {
  for (const SignalIndex* h : {hs_.get(), rw_.get()}) MOEEDB_RETURN_IF_ERROR(h->rows_buf.Evict());
  return Status::OK();
}

Status DualIndex::IndexLiveIds() {
  id_to_pos_.Clear();
  for (size_t p = 0; p < pos_to_id_.size(); ++p) {
    if (!alive_[p]) continue;
    if (id_to_pos_.Find(pos_to_id_[p], pos_to_id_) != IdPositions::kNotFound)
      return Status::Corruption("id " + std::to_string(pos_to_id_[p]) + " is on two live rows");
    id_to_pos_.Insert(p, pos_to_id_);
  }
  return Status::OK();
}

bool DualIndex::RwRow(uint64_t id, std::vector<float>* out) const {
  const size_t pos = id_to_pos_.Find(id, pos_to_id_);
  if (pos == IdPositions::kNotFound) return false;
  std::vector<float> tmp;
  const float* row = rw_->Rows(pos, pos + 1, &tmp);
  out->assign(row, row + rw_->dim);
  return true;
}

std::vector<uint64_t> DualIndex::Ids() const {
  std::vector<uint64_t> out;
  for (size_t p = 0; p < pos_to_id_.size(); ++p)
    if (alive_[p]) out.push_back(pos_to_id_[p]);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<size_t> DualIndex::SignalCandidates(const SignalIndex& h, const float* q, size_t kk) const {
  const size_t rows = pos_to_id_.size();
  std::vector<size_t> out;
  if (h.graph && h.ann_rows > 0) {
    out = h.graph->Search(q, kk);
    for (size_t p = h.ann_rows; p < rows; ++p) out.push_back(p);
    return out;
  }
  if (h.bits && !h.bann && h.ann_rows > 0) {  // 1-bit codes scanned flat
    out = h.bits->Search(q, kk, alive_.data());
    for (size_t p = h.ann_rows; p < rows; ++p) out.push_back(p);
    return out;
  }
  if ((h.ann || h.bann) && h.ann_rows > 0) {
    std::vector<FaissId> labels(kk);
    {
      std::lock_guard<std::mutex> lock(ann_mu_);
      if (h.ann) {
        std::vector<float> dist(kk);
        if (auto* hn = dynamic_cast<faiss::IndexHNSW*>(h.ann.get()))
          hn->hnsw.efSearch = std::max<int>(h.spec.ef_search, static_cast<int>(kk));
        if (auto* ivf = dynamic_cast<faiss::IndexIVF*>(h.ann.get())) ivf->nprobe = std::min<size_t>(h.spec.nprobe, ivf->nlist);
        h.ann->search(1, q, static_cast<FaissId>(kk), dist.data(), labels.data());
      } else {
        std::vector<int32_t> dist(kk);
        std::vector<uint64_t> word(h.bits->words());
        h.bits->Encode(q, word.data());
        if (auto* hn = dynamic_cast<faiss::IndexBinaryHNSW*>(h.bann.get()))
          hn->hnsw.efSearch = std::max<int>(h.spec.ef_search, static_cast<int>(kk));
        if (auto* ivf = dynamic_cast<faiss::IndexBinaryIVF*>(h.bann.get()))
          ivf->nprobe = std::min<size_t>(h.spec.nprobe, ivf->nlist);
        h.bann->search(1, reinterpret_cast<const uint8_t*>(word.data()), static_cast<FaissId>(kk), dist.data(),
                       labels.data());
      }
    }
    for (FaissId l : labels)
      if (l >= 0) out.push_back(static_cast<size_t>(l));
    // Rows added after the ANN index (pending) are scanned exactly.
    for (size_t p = h.ann_rows; p < rows; ++p) out.push_back(p);
    return out;
  }
  // Flat (or not yet trained) half: its exact top kk.
  ScanQuery sq;
  sq.hs = q;
  ScanOptions so;
  so.k = kk;
  so.keep = [&](size_t p) { return static_cast<bool>(alive_[p]); };
  so.tie_before = [&](size_t a, size_t b) { return pos_to_id_[a] < pos_to_id_[b]; };
  std::vector<size_t> pos;
  for (const ScanHit& hit : ScanTopK(h.scan_rows(), ScanRows{}, rows, sq, so)) pos.push_back(hit.row);
  return pos;
}

Status DualIndex::StandardizeQuery(const float* hs, const float* rw, std::vector<float>* qh,
                                   std::vector<float>* qr) const {
  qh->assign(spec_.dim_hs, 0.0f);
  qr->assign(spec_.dim_rw, 0.0f);
  if (hs) {
    for (size_t j = 0; j < spec_.dim_hs; ++j)
      if (!std::isfinite(hs[j])) return Status::InvalidArgument("non-finite value in the HS query");
    std_hs_.Apply(hs, qh->data());
  }
  if (rw) {
    for (size_t j = 0; j < spec_.dim_rw; ++j)
      if (!std::isfinite(rw[j])) return Status::InvalidArgument("non-finite value in the RW query");
    std_rw_.Apply(rw, qr->data());
  }
  return Status::OK();
}

namespace {

// The weights of a request's two cosines in its score.
float WeightHs(const SearchRequest& r) { return r.mode == QueryMode::kRw ? 0.0f : 1.0f; }
float WeightRw(const SearchRequest& r) {
  return r.mode == QueryMode::kHs ? 0.0f : (r.mode == QueryMode::kRw ? 1.0f : r.alpha);
}

}  // namespace

Status DualIndex::PrepareQuery(const SearchRequest& r, std::vector<float>* qh, std::vector<float>* qr) const {
  if (!IsDenseMode(r.mode))
    return Status::InvalidArgument(std::string("the dense index has no ") + kQueryModes.Name(r.mode) + " search");
  if (r.hs == nullptr && r.mode != QueryMode::kRw) return Status::InvalidArgument("search needs an HS query vector");
  if (r.rw == nullptr && r.mode != QueryMode::kHs) return Status::InvalidArgument("search needs an RW query vector");
  if (!std::isfinite(r.alpha)) return Status::InvalidArgument("alpha must be finite");
  if (!(r.oversample >= 0) || !std::isfinite(r.oversample))
    return Status::InvalidArgument("oversample must be a finite number, at least 0 (0: the index's)");
  return StandardizeQuery(r.hs, r.rw, qh, qr);
}

bool DualIndex::ScansEveryRow(const SearchRequest& r) const {
  const bool hs_ann = hs_->HasIndex() && r.mode != QueryMode::kRw;
  const bool rw_ann = rw_->HasIndex() && r.mode != QueryMode::kHs;
  return r.exact || (!hs_ann && !rw_ann);
}

bool DualIndex::SharesScan(const SearchRequest& r) const {
  return !r.filter && !r.among && r.k > 0 && !id_to_pos_.empty() && ScansEveryRow(r);
}

Status DualIndex::CheckRequest(const SearchRequest& r) const {
  std::vector<float> qh, qr;
  return PrepareQuery(r, &qh, &qr);
}

std::vector<std::vector<Hit>> DualIndex::ScanExact(const std::vector<const SearchRequest*>& rs,
                                                   const std::vector<std::vector<float>>& qh,
                                                   const std::vector<std::vector<float>>& qr) const {
  std::vector<ScanQuery> queries;
  ScanOptions so;
  so.k = 0;
  for (size_t i = 0; i < rs.size(); ++i) {
    queries.push_back({qh[i].data(), qr[i].data(), WeightHs(*rs[i]), WeightRw(*rs[i])});
    so.k = std::max(so.k, rs[i]->k);
  }
  // One filter at most: a batch shares its scan only between unfiltered requests.
  const auto& filter = rs.size() == 1 ? rs[0]->filter : std::function<bool(uint64_t)>();
  so.keep = [&](size_t p) { return alive_[p] && (!filter || filter(pos_to_id_[p])); };
  so.tie_before = [&](size_t a, size_t b) { return pos_to_id_[a] < pos_to_id_[b]; };
  if (filter) so.threads = 1;  // a caller's filter need not be thread-safe
  const auto scanned = ScanTopKBatch(hs_->scan_rows(), rw_->scan_rows(), pos_to_id_.size(), queries, so);
  std::vector<std::vector<Hit>> out(rs.size());
  for (size_t i = 0; i < rs.size(); ++i) {
    for (size_t j = 0; j < scanned[i].size() && j < rs[i]->k; ++j) {
      const ScanHit& h = scanned[i][j];
      Hit hit{pos_to_id_[h.row], h.score, h.score_hs, h.score_rw};
      // Report both cosines whatever the mode: a half the mode skipped is
      // computed for the k hits only.
      if (queries[i].w_hs == 0.0f) hit.score_hs = hs_->Dot(qh[i].data(), h.row);
      if (queries[i].w_rw == 0.0f) hit.score_rw = rw_->Dot(qr[i].data(), h.row);
      out[i].push_back(hit);
    }
  }
  return out;
}

Result<std::vector<std::vector<Hit>>> DualIndex::SearchBatch(const std::vector<SearchRequest>& rs) const {
  std::vector<std::vector<Hit>> out(rs.size());
  std::vector<size_t> shared;
  std::vector<const SearchRequest*> scan;
  std::vector<std::vector<float>> qh, qr;
  for (size_t i = 0; i < rs.size(); ++i) {
    if (!SharesScan(rs[i])) {
      MOEEDB_ASSIGN_OR_RETURN(out[i], Search(rs[i]));
      continue;
    }
    qh.emplace_back();
    qr.emplace_back();
    MOEEDB_RETURN_IF_ERROR(PrepareQuery(rs[i], &qh.back(), &qr.back()));
    shared.push_back(i);
    scan.push_back(&rs[i]);
  }
  if (scan.empty()) return out;
  auto hits = ScanExact(scan, qh, qr);
  for (size_t j = 0; j < shared.size(); ++j) out[shared[j]] = std::move(hits[j]);
  return out;
}

Result<std::vector<Hit>> DualIndex::Search(const SearchRequest& r) const {
  std::vector<float> qh, qr;
  MOEEDB_RETURN_IF_ERROR(PrepareQuery(r, &qh, &qr));
  std::vector<Hit> hits;
  const size_t rows = pos_to_id_.size();
  if (r.k == 0 || id_to_pos_.empty()) return hits;
  // Few allowed ids (a selective payload index): each scored exactly,
  // which is cheaper than a scan and than growing an ANN search until
  // enough candidates pass; under a scan, so is any share of the rows.
  const bool score_among = r.among && (r.among->size() <= kScoreAmongMax || ScansEveryRow(r));
  if (ScansEveryRow(r) && !score_among) return std::move(ScanExact({&r}, {qh}, {qr})[0]);
  const float a_hs = WeightHs(r), a_rw = WeightRw(r);
  auto score_of = [&](size_t p, float* sh, float* sr) {
    *sh = hs_->Dot(qh.data(), p);
    *sr = rw_->Dot(qr.data(), p);
    return a_hs * *sh + a_rw * *sr;
  };
  auto better = [](const Hit& a, const Hit& b) { return a.score != b.score ? a.score > b.score : a.id < b.id; };
  auto finish = [&](std::vector<size_t>& cands) {
    hits.clear();
    hs_->Prefetch(cands);  // both cosines are reported, whatever the weights
    rw_->Prefetch(cands);
    for (size_t p : cands) {
      Hit h;
      h.id = pos_to_id_[p];
      h.score = score_of(p, &h.score_hs, &h.score_rw);
      hits.push_back(h);
    }
    const size_t take = std::min(r.k, hits.size());
    std::partial_sort(hits.begin(), hits.begin() + take, hits.end(), better);
    hits.resize(take);
  };

  if (score_among) {
    std::vector<size_t> cands;
    for (uint64_t id : *r.among) {
      const size_t pos = id_to_pos_.Find(id, pos_to_id_);
      if (pos != IdPositions::kNotFound && (!r.filter || r.filter(id))) cands.push_back(pos);
    }
    finish(cands);
    return hits;
  }
  // ANN: candidates from each half, union, exact re-scoring.
  auto allowed = [&](uint64_t id) {
    return (!r.among || std::binary_search(r.among->begin(), r.among->end(), id)) && (!r.filter || r.filter(id));
  };
  const double oversample = r.oversample > 0 ? r.oversample : static_cast<double>(spec_.oversample);
  size_t kk = std::max<size_t>(static_cast<size_t>(std::ceil(static_cast<double>(r.k) * oversample)), r.k);
  while (true) {
    std::unordered_set<size_t> seen;
    std::vector<size_t> cands;
    auto take = [&](const std::vector<size_t>& ps) {
      for (size_t p : ps)
        if (p < rows && alive_[p] && seen.insert(p).second && allowed(pos_to_id_[p])) cands.push_back(p);
    };
    if (r.mode != QueryMode::kRw) take(SignalCandidates(*hs_, qh.data(), std::min(kk, rows)));
    if (r.mode != QueryMode::kHs) take(SignalCandidates(*rw_, qr.data(), std::min(kk, rows)));
    if (cands.size() >= r.k || kk >= rows) {
      finish(cands);
      return hits;
    }
    kk *= 4;
  }
}

Result<std::vector<Hit>> DualIndex::Score(const float* hs, const float* rw, float alpha,
                                          const std::vector<uint64_t>& ids) const {
  if (hs == nullptr || rw == nullptr) return Status::InvalidArgument("scoring needs both query vectors");
  std::vector<float> qh, qr;
  MOEEDB_RETURN_IF_ERROR(StandardizeQuery(hs, rw, &qh, &qr));
  std::vector<Hit> out;
  for (uint64_t id : ids) {
    const size_t pos = id_to_pos_.Find(id, pos_to_id_);
    if (pos == IdPositions::kNotFound) continue;
    Hit h;
    h.id = id;
    h.score_hs = hs_->Dot(qh.data(), pos);
    h.score_rw = rw_->Dot(qr.data(), pos);
    h.score = h.score_hs + alpha * h.score_rw;
    out.push_back(h);
  }
  return out;
}

Status DualIndex::Save(const std::string& dir, uint64_t applied_seq) const {
  try {
    fs::create_directories(dir);
    const std::string name = "snap-" + std::to_string(applied_seq);
    const fs::path tmp = fs::path(dir) / (name + ".tmp"), final_dir = fs::path(dir) / name;
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    json meta = {{"spec", json::parse(spec_.ToJson())},
                 {"std_hs", json::parse(std_hs_.ToJson())},
                 {"std_rw", json::parse(std_rw_.ToJson())},
                 {"applied_seq", applied_seq},
                 {"pos_to_id", pos_to_id_},
                 {"alive", alive_},
                 {"tombstones", tombstones_},
                 {"hs_ann_rows", hs_->ann_rows},
                 {"rw_ann_rows", rw_->ann_rows},
                 {"hs_trained_rows", hs_->trained_rows},
                 {"rw_trained_rows", rw_->trained_rows}};
    for (const SignalIndex* h : {hs_.get(), rw_.get()})
      if (h->bits) meta[h == hs_.get() ? "hs_centre" : "rw_centre"] = h->bits->centre();
    auto write = [](const fs::path& p, const void* data, size_t n) {
      std::ofstream out(p, std::ios::binary | std::ios::trunc);
      out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
      out.flush();
      if (!out) throw std::runtime_error("cannot write " + p.string());
    };
    const std::string m = meta.dump();
    write(tmp / "meta.json", m.data(), m.size());
    for (const SignalIndex* h : {hs_.get(), rw_.get()}) {
      const std::string base = h == hs_.get() ? "hs" : "rw";
      write(tmp / (base + (h->fp16 ? ".f16" : ".f32")), h->rows_buf.data(), h->rows_buf.size());
      if (h->bits && !h->bann)
        write(tmp / (base + ".bits"), h->bits->codes().data(), h->bits->codes().size() * sizeof(uint64_t));
    }
    {
      // Searches set efSearch/nprobe under ann_mu_; the writer reads them.
      std::lock_guard<std::mutex> lock(ann_mu_);
      if (hs_->ann) faiss::write_index(hs_->ann.get(), (tmp / "hs.faiss").c_str());
      if (rw_->ann) faiss::write_index(rw_->ann.get(), (tmp / "rw.faiss").c_str());
      if (hs_->bann) faiss::write_index_binary(hs_->bann.get(), (tmp / "hs.faissbin").c_str());
      if (rw_->bann) faiss::write_index_binary(rw_->bann.get(), (tmp / "rw.faissbin").c_str());
    }
    for (const SignalIndex* h : {hs_.get(), rw_.get()})
      if (h->graph) {
        Status st = h->graph->Save((tmp / (h == hs_.get() ? "hs.hnsw" : "rw.hnsw")).string());
        if (!st.ok()) throw std::runtime_error(st.message());
      }
    // Make the files durable, then publish by renames.
    for (const auto& f : fs::directory_iterator(tmp)) {
      FILE* fp = std::fopen(f.path().c_str(), "rb");
      if (fp) { fsync(fileno(fp)); std::fclose(fp); }
    }
    fs::remove_all(final_dir);
    fs::rename(tmp, final_dir);
    const fs::path cur_tmp = fs::path(dir) / "CURRENT.tmp";
    write(cur_tmp, name.data(), name.size());
    { FILE* fp = std::fopen(cur_tmp.c_str(), "rb"); if (fp) { fsync(fileno(fp)); std::fclose(fp); } }
    fs::rename(cur_tmp, fs::path(dir) / "CURRENT");
    for (const auto& f : fs::directory_iterator(dir))
      if (f.is_directory() && f.path().filename() != name) fs::remove_all(f.path());
  } catch (const std::exception& e) {
    return Status::IOError(std::string("saving index snapshot to ") + dir + ": " + e.what());
  }
  return Status::OK();
}

std::optional<uint64_t> DualIndex::SnapshotSeq(const std::string& dir) {
  std::ifstream cin(fs::path(dir) / "CURRENT");
  std::string name;
  if (!std::getline(cin, name) || name.rfind("snap-", 0) != 0) return std::nullopt;
  uint64_t seq = 0;
  const char* digits = name.c_str() + 5;
  const auto [end, ec] = std::from_chars(digits, name.c_str() + name.size(), seq);
  if (ec != std::errc() || end == digits || *end != '\0') return std::nullopt;
  return seq;
}

Result<std::unique_ptr<DualIndex>> DualIndex::Load(const std::string& dir, uint64_t* applied_seq) {
  const fs::path cur = fs::path(dir) / "CURRENT";
  if (!fs::exists(cur)) return Status::NotFound("no index snapshot in " + dir);
  try {
    std::ifstream cin(cur);
    std::string name;
    std::getline(cin, name);
    const fs::path snap = fs::path(dir) / name;
    std::ifstream min(snap / "meta.json");
    json meta = json::parse(min);
    MOEEDB_ASSIGN_OR_RETURN(DualIndexSpec spec, DualIndexSpec::FromJson(meta.at("spec").dump()));
    MOEEDB_ASSIGN_OR_RETURN(Standardizer sh, Standardizer::FromJson(meta.at("std_hs").dump()));
    MOEEDB_ASSIGN_OR_RETURN(Standardizer sr, Standardizer::FromJson(meta.at("std_rw").dump()));
    MOEEDB_ASSIGN_OR_RETURN(std::unique_ptr<DualIndex> d, Create(spec, std::move(sh), std::move(sr), dir));
    d->pos_to_id_ = meta.at("pos_to_id").get<std::vector<uint64_t>>();
    d->alive_ = meta.at("alive").get<std::vector<uint8_t>>();
    d->tombstones_ = meta.at("tombstones").get<size_t>();
    if (d->alive_.size() != d->pos_to_id_.size() || d->pos_to_id_.size() > IdPositions::kMaxRows) return Status::Corruption("index snapshot " + snap.string() + " is inconsistent");
    if (Status st = d->IndexLiveIds(); !st.ok()) return Status::Corruption("index snapshot " + snap.string() + ": " + st.message());
    auto read = [&](const fs::path& p, void* dst, size_t bytes) {
      std::ifstream in(p, std::ios::binary);
      in.read(static_cast<char*>(dst), static_cast<std::streamsize>(bytes));
      if (!in || in.gcount() != static_cast<std::streamsize>(bytes)) throw std::runtime_error("short file " + p.string());
    };
    for (SignalIndex* h : {d->hs_.get(), d->rw_.get()}) {
      const std::string base = h == d->hs_.get() ? "hs" : "rw";
      const fs::path file = snap / (base + (h->fp16 ? ".f16" : ".f32"));
      if (Status st = h->rows_buf.AppendFile(file.string(), d->pos_to_id_.size() * h->row_bytes()); !st.ok())
        return Status::Corruption("index snapshot " + snap.string() + ": " + st.message());
      h->trained_rows = meta.value(base + "_trained_rows", meta.value(base + "_ann_rows", size_t{0}));
      if (meta.contains(base + "_centre") && h->Binary()) {
        std::vector<uint64_t> codes;
        if (h->spec.kind == IndexKind::kFlat) {
          h->ann_rows = meta.at(base + "_ann_rows").get<size_t>();
          codes.resize(h->ann_rows * ((h->dim + 63) / 64));
          read(snap / (base + ".bits"), codes.data(), codes.size() * sizeof(uint64_t));
        }
        MOEEDB_ASSIGN_OR_RETURN(BinaryCodes b, BinaryCodes::FromParts(h->dim, meta.at(base + "_centre").get<std::vector<float>>(),
                                                                   std::move(codes)));
        h->bits = std::make_unique<BinaryCodes>(std::move(b));
      }
    }
    for (const SignalIndex* h : {d->hs_.get(), d->rw_.get()})
      if (h->ann_rows > d->pos_to_id_.size())
        return Status::Corruption("index snapshot " + snap.string() + ": codes of more rows than it holds");
    for (auto [half, file, key] : {std::tuple{d->hs_.get(), "hs.faissbin", "hs_ann_rows"}, std::tuple{d->rw_.get(), "rw.faissbin", "rw_ann_rows"}}) {
      if (!fs::exists(snap / file)) continue;
      if (!half->bits) return Status::Corruption("index snapshot " + snap.string() + ": binary codes without their centre");
      half->bann.reset(faiss::read_index_binary((snap / file).c_str()));
      half->ann_rows = meta.at(key).get<size_t>();
    }
    for (auto [half, file, key] : {std::tuple{d->hs_.get(), "hs.faiss", "hs_ann_rows"}, std::tuple{d->rw_.get(), "rw.faiss", "rw_ann_rows"}}) {
      if (fs::exists(snap / file)) {
        half->ann.reset(faiss::read_index((snap / file).c_str()));
        half->ann_rows = meta.at(key).get<size_t>();
      }
    }
    for (auto [half, file, key] : {std::tuple{d->hs_.get(), "hs.hnsw", "hs_ann_rows"}, std::tuple{d->rw_.get(), "rw.hnsw", "rw_ann_rows"}}) {
      if (!fs::exists(snap / file)) continue;
      MOEEDB_ASSIGN_OR_RETURN(half->graph, HnswGraph::Load((snap / file).string(), half->dim, half->spec.ef_search));
      half->ann_rows = meta.at(key).get<size_t>();
      if (half->graph->size() != half->ann_rows || half->ann_rows > d->pos_to_id_.size())
        return Status::Corruption("index snapshot " + snap.string() + ": the HNSW graph does not match its rows");
    }
    *applied_seq = meta.at("applied_seq").get<uint64_t>();
    return d;
  } catch (const std::exception& e) {
    return Status::Corruption("index snapshot in " + dir + " is damaged: " + e.what());
  }
}

}  // namespace moeedb
