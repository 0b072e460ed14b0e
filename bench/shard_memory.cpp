// What a node's indexes hold in memory, measured (DualIndex::memory_bytes:
// rows, ANN structures, id maps), not RSS (the model dominates a node's RSS):
//
//  1. bytes per document of one node's dense indexes, per index kind (flat,
//     HNSW over int8 codes, IVF + SQ8), rows in f32 or fp16, at --kind-docs;
//  2. scale-out: --docs documents in one collection of --nodes shards in a
//     store (PostgreSQL: --store postgresql://...), opened as one node
//     holding every shard and as --nodes nodes holding one shard each (the
//     placement of R = 1): each node's index bytes against the one's.
//
//   shard_memory --store LOCATION [--docs 300000] [--nodes 3] [--kind-docs 50000]
//                [--dim-hs 1024] [--dim-rw 32] [--batch 512]
// Prints one JSON object with the CPU flags it ran with.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <unistd.h>

#include "bench/bench_child.h"
#include "bench/bench_samples.h"
#include "bench/cpu_flags.h"
#include "database/vector_collection.h"
#include "index/dual_index.h"
#include "storage/store.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace moeedb::bench;  // Flag, IntFlag, Die, Gaussian

namespace {

// Holds the shards it is given.
class FixedShards : public moeedb::ShardPeers {
 public:
  explicit FixedShards(std::vector<uint32_t> held) : held_(std::move(held)) {}
  std::optional<moeedb::PlacedShards> HeldShards(const moeedb::CollectionLayout& layout) override {
    moeedb::PlacedShards p{layout.shards, {}};
    for (uint32_t k : held_) p.held.push_back(moeedb::ShardRef{layout.shards, k});
    return p;
  }
  std::vector<std::pair<uint32_t, moeedb::LexicalStats>> Stats(const moeedb::ShardQuery&,
                                                               const std::vector<uint32_t>&) override {
    return {};
  }
  std::vector<moeedb::ShardAnswer> Search(const moeedb::ShardQuery&, const std::vector<uint32_t>&) override {
    return {};
  }

 private:
  std::vector<uint32_t> held_;
};

json KindBytes(size_t docs, size_t dh, size_t dr) {
  std::mt19937 rng(7);
  const auto hs = Gaussian(rng, docs * dh), rw = Gaussian(rng, docs * dr);
  std::vector<uint64_t> ids(docs);
  for (size_t i = 0; i < docs; ++i) ids[i] = i + 1;
  json out = json::array();
  struct Kind {
    const char* name;
    moeedb::IndexKind kind;
    bool sq8, fp16;
  };
  for (const Kind& k : {Kind{"flat", moeedb::IndexKind::kFlat, false, false},
                        Kind{"flat, fp16 rows", moeedb::IndexKind::kFlat, false, true},
                        Kind{"hnsw (int8 codes)", moeedb::IndexKind::kHnsw, false, false},
                        Kind{"hnsw (int8 codes), fp16 rows", moeedb::IndexKind::kHnsw, false, true},
                        Kind{"ivf + sq8", moeedb::IndexKind::kIvf, true, false},
                        Kind{"ivf + sq8, fp16 rows", moeedb::IndexKind::kIvf, true, true}}) {
    moeedb::DualIndexSpec spec;
    spec.dim_hs = dh;
    spec.dim_rw = dr;
    spec.hs.kind = spec.rw.kind = k.kind;
    spec.hs.codes = spec.rw.codes = k.sq8 ? moeedb::CodeKind::kSq8 : moeedb::CodeKind::kNone;
    spec.fp16_rows = k.fp16;
    auto ix = moeedb::DualIndex::Create(spec, moeedb::Standardizer::Identity(dh), moeedb::Standardizer::Identity(dr));
    if (!ix.ok()) Die(ix.status().ToString());
    if (auto s = (*ix)->Add(ids, hs.data(), rw.data()); !s.ok()) Die(s.ToString());
    const double bytes = static_cast<double>((*ix)->memory_bytes());
    out.push_back({{"index", k.name}, {"bytes_per_doc", bytes / docs}, {"raw_vector_bytes", (dh + dr) * 4}});
  }
  return out;
}

size_t NodeBytes(const moeedb::VectorCollection& c) {
  size_t b = 0;
  for (const auto& r : c.ReplicaStates()) b += r.index_bytes;
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  const BenchFlags flags("shard_memory", argc, argv);
  const std::string location = Flag("store");
  if (location.empty()) Die("--store LOCATION is required");
  const int64_t docs = IntFlag("docs", 300000), nodes = IntFlag("nodes", 3), kind_docs = IntFlag("kind-docs", 50000);
  const int64_t dh = IntFlag("dim-hs", 1024), dr = IntFlag("dim-rw", 32), batch = IntFlag("batch", 512);
  json out = {{"cpu", CpuFlags()}, {"dim_hs", dh}, {"dim_rw", dr}};
  out["bytes_per_doc_by_index"] = KindBytes(static_cast<size_t>(kind_docs), static_cast<size_t>(dh), static_cast<size_t>(dr));

  auto store = moeedb::Store::Open(location);
  if (!store.ok()) Die(store.status().ToString());
  (void)(*store)->DropCollection("shard_memory");
  const std::string root = (fs::temp_directory_path() / ("shard_memory." + std::to_string(getpid()))).string();
  moeedb::CollectionOptions o;
  o.dim_hs = dh;
  o.dim_rw = dr;
  o.shards = static_cast<uint32_t>(nodes);
  o.lexical.enabled = false;  // dense indexes only: the lexical one lives on disk
  FixedShards none({});
  {
    auto c = moeedb::VectorCollection::Create(store->get(), "shard_memory", o, root + "/writer", &none);
    if (!c.ok()) Die(c.status().ToString());
    std::mt19937 rng(1);
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t at = 0; at < docs; at += batch) {
      std::vector<moeedb::StoredDocument> b;
      for (int64_t i = at; i < std::min(docs, at + batch); ++i)
        b.push_back({"doc-" + std::to_string(i), "", "{}", Gaussian(rng, dh), Gaussian(rng, dr)});
      if (auto w = (*c)->Upsert(b, true); !w.ok()) Die(w.status().ToString());
    }
    out["ingest_docs_per_s"] = docs / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  size_t all_bytes = 0;
  {
    auto all = moeedb::VectorCollection::Open(store->get(), "shard_memory", root + "/all");
    if (!all.ok()) Die(all.status().ToString());
    all_bytes = NodeBytes(**all);
    out["one_node_holding_all"] = {{"documents", (*all)->IndexedIds().size()}, {"index_bytes", all_bytes}};
  }
  json per = json::array();
  for (int64_t n = 0; n < nodes; ++n) {
    FixedShards mine({static_cast<uint32_t>(n)});
    auto c = moeedb::VectorCollection::Open(store->get(), "shard_memory", root + "/node" + std::to_string(n), &mine);
    if (!c.ok()) Die(c.status().ToString());
    const size_t b = NodeBytes(**c);
    per.push_back({{"node", n}, {"documents", (*c)->IndexedIds().size()}, {"index_bytes", b},
                   {"share_of_one_node", static_cast<double>(b) / static_cast<double>(all_bytes)}});
  }
  out["nodes_holding_one_shard_each"] = per;
  std::error_code ec;
  fs::remove_all(root, ec);
  (void)(*store)->DropCollection("shard_memory");
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
