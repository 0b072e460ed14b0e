#include "index/dual_index.h"

#include "index/exact_scan.h"
#include "index/hnsw_graph.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/IndexScalarQuantizer.h>
#include <faiss/impl/IDSelector.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>
#include <faiss/utils/distances.h>


#include <algorithm>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_set>

namespace moeedb {

namespace fs = std::filesystem;
using FaissId = faiss::Index::idx_t;  // Faiss 1.7.3 keeps idx_t inside Index
using json = nlohmann::json;

// One half: its standardized rows and, for ANN kinds, an index over them
// (ids = row positions): an HnswGraph (int8 codes of the rows) for HNSW, a
// Faiss index for IVF and 8-bit HNSW (and for HNSW snapshots Faiss wrote).
// An ANN half that needs training stays "pending" (searched exactly) until
// min_train_rows rows exist.
struct DualIndex::SignalIndex {
  size_t dim = 0;
  SignalIndexSpec spec;
  bool fp16 = false;
  std::vector<float> data;       // row-major, every row (dead ones included until a rebuild); f32 mode
  std::vector<uint16_t> data16;  // the same in fp16 mode
  std::unique_ptr<faiss::Index> ann;
  std::unique_ptr<HnswGraph> graph;
  size_t ann_rows = 0;      // rows [0, ann_rows) are in `ann` or `graph`

  size_t rows() const { return fp16 ? data16.size() / dim : data.size() / dim; }
  void Append(const float* src, size_t n) {
    if (!fp16) { data.insert(data.end(), src, src + n * dim); return; }
    const size_t at = data16.size();
    data16.resize(at + n * dim);
    for (size_t i = 0; i < n * dim; ++i) data16[at + i] = FloatToF16(src[i]);
  }
  ScanRows scan_rows() const {
    ScanRows r;
    r.dim = dim;
    if (fp16) r.f16 = data16.data();
    else r.f32 = data.data();
    return r;
  }
  float Dot(const float* q, size_t row) const { return DotRow(q, scan_rows(), row); }
  // Rows [from, to) as floats: a pointer into `data`, or decoded into *tmp.
  const float* Rows(size_t from, size_t to, std::vector<float>* tmp) const {
    if (!fp16) return data.data() + from * dim;
    tmp->resize((to - from) * dim);
    for (size_t i = 0; i < tmp->size(); ++i) (*tmp)[i] = F16ToFloat(data16[from * dim + i]);
    return tmp->data();
  }
  void Clear() { data.clear(); data16.clear(); ann.reset(); graph.reset(); ann_rows = 0; }
  bool HasIndex() const { return ann || graph; }
  bool UsesGraph() const { return spec.kind == IndexKind::kHnsw && !spec.sq8 && !ann; }

  bool NeedsTraining() const { return spec.kind == IndexKind::kIvf || spec.sq8; }

  std::unique_ptr<faiss::Index> MakeAnn(size_t rows) const {
    const int d = static_cast<int>(dim);
    if (spec.kind == IndexKind::kHnsw) {
      std::unique_ptr<faiss::IndexHNSW> h;
      if (spec.sq8) h = std::make_unique<faiss::IndexHNSWSQ>(d, faiss::ScalarQuantizer::QT_8bit, spec.hnsw_m, faiss::METRIC_INNER_PRODUCT);
      else h = std::make_unique<faiss::IndexHNSWFlat>(d, spec.hnsw_m, faiss::METRIC_INNER_PRODUCT);
      h->hnsw.efConstruction = spec.ef_construction;
      return h;
    }
    const size_t nlist = spec.ivf_nlist > 0 ? static_cast<size_t>(spec.ivf_nlist)
                                            : std::max<size_t>(1, static_cast<size_t>(4 * std::sqrt(double(rows))));
    auto* quantizer = new faiss::IndexFlatIP(d);
    std::unique_ptr<faiss::IndexIVF> ivf;
    if (spec.sq8)
      ivf = std::make_unique<faiss::IndexIVFScalarQuantizer>(quantizer, d, nlist, faiss::ScalarQuantizer::QT_8bit,
                                                              faiss::METRIC_INNER_PRODUCT);
    else
      ivf = std::make_unique<faiss::IndexIVFFlat>(quantizer, d, nlist, faiss::METRIC_INNER_PRODUCT);
    ivf->own_fields = true;
    // k-means on a bounded sample, few iterations: training cost stays
    // proportional to nlist, not to the collection.
    ivf->cp.max_points_per_centroid = 64;
    ivf->cp.niter = 10;
    return ivf;
  }

  // Brings `ann` up to date with `data` (training it first when it is due).
  void Sync(size_t rows, const std::vector<uint8_t>& alive, size_t min_train) {
    if (spec.kind == IndexKind::kFlat) return;
    std::vector<float> tmp;
    if (UsesGraph()) {  // dead rows stay in the graph; candidates are filtered
      if (!graph) graph = std::make_unique<HnswGraph>(dim, spec.hnsw_m, spec.ef_construction, spec.ef_search);
      graph->Add(Rows(ann_rows, rows, &tmp), rows - ann_rows,
                 static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
      ann_rows = rows;
      return;
    }
    if (!ann) {
      if (NeedsTraining() && rows < min_train) return;
      ann = MakeAnn(rows);
      if (NeedsTraining()) ann->train(static_cast<FaissId>(rows), Rows(0, rows, &tmp));
      ann_rows = 0;
    }
    if (ann_rows == rows) return;
    const size_t n = rows - ann_rows;
    const float* src = Rows(ann_rows, rows, &tmp);
    if (spec.kind == IndexKind::kIvf) {
      std::vector<FaissId> ids(n);
      for (size_t i = 0; i < n; ++i) ids[i] = static_cast<FaissId>(ann_rows + i);
      ann->add_with_ids(static_cast<FaissId>(n), src, ids.data());
      // Rows already dead when they reach the index are removed again.
      std::vector<FaissId> dead;
      for (size_t i = ann_rows; i < rows; ++i) if (!alive[i]) dead.push_back(static_cast<FaissId>(i));
      if (!dead.empty()) {
        faiss::IDSelectorArray sel(dead.size(), dead.data());
        ann->remove_ids(sel);
      }
    } else {
      ann->add(static_cast<FaissId>(n), src);
    }
    ann_rows = rows;
  }
};

DualIndex::DualIndex() = default;
DualIndex::~DualIndex() = default;

Result<std::unique_ptr<DualIndex>> DualIndex::Create(const DualIndexSpec& spec, Standardizer hs, Standardizer rw) {
  if (spec.dim_hs == 0 || spec.dim_rw == 0) return Status::InvalidArgument("index dimensions must be positive");
  if (hs.dim() != spec.dim_hs || rw.dim() != spec.dim_rw)
    return Status::InvalidArgument("standardizer dimensions do not match the index spec");
  // The ANN indexes and their int8 codes assume unit rows.
  if ((!hs.normalizes() && spec.hs.kind != IndexKind::kFlat) || (!rw.normalizes() && spec.rw.kind != IndexKind::kFlat))
    return Status::InvalidArgument("an hnsw or ivf index needs unit vectors: Dot and Euclid collections are flat");
  std::unique_ptr<DualIndex> d(new DualIndex());
  d->spec_ = spec;
  d->std_hs_ = std::move(hs);
  d->std_rw_ = std::move(rw);
  d->hs_ = std::make_unique<SignalIndex>();
  d->rw_ = std::make_unique<SignalIndex>();
  d->hs_->fp16 = d->rw_->fp16 = spec.fp16_rows;
  d->hs_->dim = spec.dim_hs;
  d->hs_->spec = spec.hs;
  d->rw_->dim = spec.dim_rw;
  d->rw_->spec = spec.rw;
  return d;
}

Status DualIndex::Add(const std::vector<uint64_t>& ids, const float* hs, const float* rw) {
  const size_t n = ids.size(), dh = spec_.dim_hs, dr = spec_.dim_rw;
  std::unordered_set<uint64_t> batch;
  for (size_t i = 0; i < n; ++i) {
    if (id_to_pos_.count(ids[i]) || !batch.insert(ids[i]).second)
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

Status DualIndex::AddNormalized(const std::vector<uint64_t>& ids, const float* hn, const float* rn) {
  const size_t n = ids.size();
  hs_->Append(hn, n);
  rw_->Append(rn, n);
  for (size_t i = 0; i < n; ++i) {
    id_to_pos_[ids[i]] = pos_to_id_.size();
    pos_to_id_.push_back(ids[i]);
    alive_.push_back(1);
  }
  try {
    hs_->Sync(pos_to_id_.size(), alive_, spec_.min_train_rows);
    rw_->Sync(pos_to_id_.size(), alive_, spec_.min_train_rows);
  } catch (const std::exception& e) {
    return Status::Internal(std::string("ANN index add failed: ") + e.what());
  }
  return Status::OK();
}

size_t DualIndex::Remove(const std::vector<uint64_t>& ids) {
  std::vector<FaissId> ivf_remove;
  size_t removed = 0;
  for (uint64_t id : ids) {
    auto it = id_to_pos_.find(id);
    if (it == id_to_pos_.end()) continue;
    alive_[it->second] = 0;
    if (it->second < std::max(hs_->ann_rows, rw_->ann_rows)) ivf_remove.push_back(static_cast<FaissId>(it->second));
    id_to_pos_.erase(it);
    ++tombstones_;
    ++removed;
  }
  for (SignalIndex* h : {hs_.get(), rw_.get()}) {
    if (h->ann && h->spec.kind == IndexKind::kIvf && !ivf_remove.empty()) {
      faiss::IDSelectorArray sel(ivf_remove.size(), ivf_remove.data());
      h->ann->remove_ids(sel);
    }
  }
  if (tombstones_ > 0 && static_cast<double>(tombstones_) > spec_.rebuild_ratio * static_cast<double>(pos_to_id_.size()))
    Rebuild();
  return removed;
}

void DualIndex::Rebuild() {
  std::vector<uint64_t> ids;
  std::vector<float> hn, rn, tmp;
  for (size_t p = 0; p < pos_to_id_.size(); ++p) {
    if (!alive_[p]) continue;
    ids.push_back(pos_to_id_[p]);
    const float* h = hs_->Rows(p, p + 1, &tmp);
    hn.insert(hn.end(), h, h + spec_.dim_hs);
    const float* r = rw_->Rows(p, p + 1, &tmp);
    rn.insert(rn.end(), r, r + spec_.dim_rw);
  }
  for (SignalIndex* h : {hs_.get(), rw_.get()}) h->Clear();
  pos_to_id_.clear();
  alive_.clear();
  id_to_pos_.clear();
  tombstones_ = 0;
  ++rebuilds_;
  (void)AddNormalized(ids, hn.data(), rn.data());
}

size_t DualIndex::memory_bytes() const {
  size_t bytes = 0;
  for (const SignalIndex* h : {hs_.get(), rw_.get()}) {
    bytes += h->data.capacity() * sizeof(float) + h->data16.capacity() * sizeof(uint16_t);
    if (h->graph) bytes += h->graph->memory_bytes();
    if (h->ann) {
      faiss::VectorIOWriter w;
      faiss::write_index(h->ann.get(), &w);
      bytes += w.data.size();
    }
  }
  bytes += pos_to_id_.capacity() * sizeof(uint64_t) + alive_.capacity();
  bytes += id_to_pos_.size() * (sizeof(uint64_t) + sizeof(size_t) + 2 * sizeof(void*));
  return bytes;
}

bool DualIndex::RwRow(uint64_t id, std::vector<float>* out) const {
  auto it = id_to_pos_.find(id);
  if (it == id_to_pos_.end()) return false;
  std::vector<float> tmp;
  const float* row = rw_->Rows(it->second, it->second + 1, &tmp);
  out->assign(row, row + rw_->dim);
  return true;
}

std::vector<uint64_t> DualIndex::Ids() const {
  std::vector<uint64_t> out;
  for (const auto& [id, pos] : id_to_pos_) out.push_back(id);
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
  if (h.ann && h.ann_rows > 0) {
    std::vector<float> dist(kk);
    std::vector<FaissId> labels(kk);
    {
      std::lock_guard<std::mutex> lock(ann_mu_);
      if (auto* hn = dynamic_cast<faiss::IndexHNSW*>(h.ann.get()))
        hn->hnsw.efSearch = std::max<int>(h.spec.ef_search, static_cast<int>(kk));
      if (auto* ivf = dynamic_cast<faiss::IndexIVF*>(h.ann.get())) ivf->nprobe = std::min<size_t>(h.spec.nprobe, ivf->nlist);
      h.ann->search(1, q, static_cast<FaissId>(kk), dist.data(), labels.data());
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
      auto it = id_to_pos_.find(id);
      if (it != id_to_pos_.end() && alive_[it->second] && (!r.filter || r.filter(id))) cands.push_back(it->second);
    }
    finish(cands);
    return hits;
  }
  // ANN: candidates from each half, union, exact re-scoring.
  auto allowed = [&](uint64_t id) {
    return (!r.among || std::binary_search(r.among->begin(), r.among->end(), id)) && (!r.filter || r.filter(id));
  };
  size_t kk = std::max<size_t>(r.k * static_cast<size_t>(spec_.oversample), r.k);
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
    auto it = id_to_pos_.find(id);
    if (it == id_to_pos_.end()) continue;
    Hit h;
    h.id = id;
    h.score_hs = hs_->Dot(qh.data(), it->second);
    h.score_rw = rw_->Dot(qr.data(), it->second);
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
                 {"rw_ann_rows", rw_->ann_rows}};
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
      if (h->fp16) write(tmp / (base + ".f16"), h->data16.data(), h->data16.size() * 2);
      else write(tmp / (base + ".f32"), h->data.data(), h->data.size() * 4);
    }
    {
      // Searches set efSearch/nprobe under ann_mu_; the writer reads them.
      std::lock_guard<std::mutex> lock(ann_mu_);
      if (hs_->ann) faiss::write_index(hs_->ann.get(), (tmp / "hs.faiss").c_str());
      if (rw_->ann) faiss::write_index(rw_->ann.get(), (tmp / "rw.faiss").c_str());
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
    MOEEDB_ASSIGN_OR_RETURN(std::unique_ptr<DualIndex> d, Create(spec, std::move(sh), std::move(sr)));
    d->pos_to_id_ = meta.at("pos_to_id").get<std::vector<uint64_t>>();
    d->alive_ = meta.at("alive").get<std::vector<uint8_t>>();
    d->tombstones_ = meta.at("tombstones").get<size_t>();
    if (d->alive_.size() != d->pos_to_id_.size()) return Status::Corruption("index snapshot " + snap.string() + " is inconsistent");
    for (size_t p = 0; p < d->pos_to_id_.size(); ++p)
      if (d->alive_[p]) d->id_to_pos_[d->pos_to_id_[p]] = p;
    auto read = [&](const fs::path& p, void* dst, size_t bytes) {
      std::ifstream in(p, std::ios::binary);
      in.read(static_cast<char*>(dst), static_cast<std::streamsize>(bytes));
      if (!in || in.gcount() != static_cast<std::streamsize>(bytes)) throw std::runtime_error("short file " + p.string());
    };
    for (SignalIndex* h : {d->hs_.get(), d->rw_.get()}) {
      const std::string base = h == d->hs_.get() ? "hs" : "rw";
      const size_t n = d->pos_to_id_.size() * h->dim;
      if (h->fp16) { h->data16.resize(n); read(snap / (base + ".f16"), h->data16.data(), n * 2); }
      else { h->data.resize(n); read(snap / (base + ".f32"), h->data.data(), n * 4); }
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
