// DualIndexSpec as JSON: what a collection records of its dense indexes.
#include <nlohmann/json.hpp>

#include "index/dual_index.h"

namespace moeedb {

using json = nlohmann::json;

namespace {

json SignalSpecToJson(const SignalIndexSpec& h) {
  return {{"kind", kIndexKinds.Name(h.kind)}, {"codes", kCodeKinds.Name(h.codes)}, {"pq_dims", h.pq_dims},
          {"hnsw_m", h.hnsw_m}, {"ef_construction", h.ef_construction}, {"ef_search", h.ef_search},
          {"ivf_nlist", h.ivf_nlist}, {"nprobe", h.nprobe}};
}

Result<SignalIndexSpec> SignalSpecFromJson(const json& j) {
  SignalIndexSpec h;
  MOEEDB_ASSIGN_OR_RETURN(h.kind, kIndexKinds.Parse(j.value("kind", "flat")));
  // Snapshots and records written before code kinds said "sq8": true, which
  // quantized HNSW and IVF halves only (a flat half stayed an exact scan).
  if (j.contains("codes")) {
    MOEEDB_ASSIGN_OR_RETURN(h.codes, kCodeKinds.Parse(j.at("codes").get<std::string>()));
  } else if (j.value("sq8", false) && h.kind != IndexKind::kFlat) {
    h.codes = CodeKind::kSq8;
  }
  h.pq_dims = j.value("pq_dims", 8);
  h.hnsw_m = j.value("hnsw_m", 32);
  h.ef_construction = j.value("ef_construction", 80);
  h.ef_search = j.value("ef_search", 64);
  h.ivf_nlist = j.value("ivf_nlist", 0);
  h.nprobe = j.value("nprobe", 16);
  if (h.hnsw_m < 2 || h.ef_search < 1 || h.nprobe < 1 || h.ivf_nlist < 0 || h.pq_dims < 1)
    return Status::InvalidArgument("index parameters out of range");
  return h;
}

}  // namespace

std::string DualIndexSpec::ToJson() const {
  return json{{"dim_hs", dim_hs},           {"dim_rw", dim_rw},         {"hs", SignalSpecToJson(hs)},
              {"rw", SignalSpecToJson(rw)},       {"oversample", oversample}, {"rebuild_ratio", rebuild_ratio},
              {"min_train_rows", min_train_rows}, {"fp16_rows", fp16_rows}, {"rows_on_disk", rows_on_disk}}
      .dump();
}

Result<DualIndexSpec> DualIndexSpec::FromJson(const std::string& text) {
  try {
    json j = json::parse(text);
    DualIndexSpec s;
    s.dim_hs = j.at("dim_hs").get<size_t>();
    s.dim_rw = j.at("dim_rw").get<size_t>();
    MOEEDB_ASSIGN_OR_RETURN(s.hs, SignalSpecFromJson(j.value("hs", json::object())));
    MOEEDB_ASSIGN_OR_RETURN(s.rw, SignalSpecFromJson(j.value("rw", json::object())));
    s.oversample = j.value("oversample", 4);
    s.rebuild_ratio = j.value("rebuild_ratio", 0.25);
    s.min_train_rows = j.value("min_train_rows", 256);
    s.fp16_rows = j.value("fp16_rows", false);
    s.rows_on_disk = j.value("rows_on_disk", false);
    if (s.oversample < 1 || !(s.rebuild_ratio > 0)) return Status::InvalidArgument("bad oversample or rebuild_ratio");
    return s;
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("index spec: ") + e.what());
  }
}

}  // namespace moeedb
