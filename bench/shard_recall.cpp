// HNSW across shards: recall@10 of a collection of --shards shards (each
// shard its own HNSW indexes, answers merged: database/shard_query.h) and of
// one shard, both against the exact answer, with each one's queries per
// second (one query at a time, all shards on this node, as a node asking
// itself; a cluster adds one round trip per node asked).
//
// Data: --docs documents drawn around --clusters centres (the centres
// Gaussian, each document centre + noise of relative size --noise), as
// embeddings cluster by topic; queries are fresh draws around random
// centres. Fused mode (cos_HS + alpha * cos_RW, alpha 1), the default index
// settings (HNSW over int8 codes, M 32, ef_construction 80, ef_search 64,
// candidates 4 * k per half re-scored exactly).
//
//   shard_recall [--docs 100000] [--shards 6] [--queries 500] [--dim-hs 512]
//                [--dim-rw 32] [--clusters 1000] [--noise 0.5] [--k 10]
// Prints one JSON object with the CPU flags it ran with.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <unistd.h>

#include "bench/bench_child.h"
#include "bench/cpu_flags.h"
#include "database/vector_collection.h"
#include "storage/store.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace moeedb::bench;  // Flag, IntFlag, Die

namespace {

struct Data {
  size_t dh, dr;
  std::vector<std::vector<float>> centres_hs, centres_rw;
  // A point around centre c.
  void Draw(std::mt19937& rng, size_t c, float noise, std::vector<float>* hs, std::vector<float>* rw) const {
    std::normal_distribution<float> g(0.0f, noise);
    hs->resize(dh);
    rw->resize(dr);
    for (size_t i = 0; i < dh; ++i) (*hs)[i] = centres_hs[c][i] + g(rng);
    for (size_t i = 0; i < dr; ++i) (*rw)[i] = centres_rw[c][i] + g(rng);
  }
};

std::unique_ptr<moeedb::VectorCollection> Create(moeedb::Store* store, const std::string& name, size_t dh, size_t dr,
                                                 uint32_t shards, const std::string& root) {
  (void)store->DropCollection(name);
  moeedb::CollectionOptions o;
  o.dim_hs = dh;
  o.dim_rw = dr;
  o.shards = shards;
  o.lexical.enabled = false;
  o.index.hs.kind = o.index.rw.kind = moeedb::IndexKind::kHnsw;
  auto c = moeedb::VectorCollection::Create(store, name, o, root);
  if (!c.ok()) Die(c.status().ToString());
  return std::move(c).value();
}

}  // namespace

int main(int argc, char** argv) {
  const BenchFlags flags("shard_recall", argc, argv);
  const int64_t docs = IntFlag("docs", 100000), shards = IntFlag("shards", 6), queries = IntFlag("queries", 500);
  const size_t dh = static_cast<size_t>(IntFlag("dim-hs", 512)), dr = static_cast<size_t>(IntFlag("dim-rw", 32));
  const int64_t clusters = IntFlag("clusters", 1000), k = IntFlag("k", 10);
  const float noise = std::stof(Flag("noise", "0.5"));
  json out = {{"cpu", CpuFlags()}, {"docs", docs}, {"shards", shards}, {"queries", queries}, {"dim_hs", dh},
              {"dim_rw", dr}, {"clusters", clusters}, {"noise", noise}, {"k", k}};

  const std::string root = (fs::temp_directory_path() / ("shard_recall." + std::to_string(getpid()))).string();
  fs::create_directories(root);
  auto store = moeedb::Store::Open(root + "/store");
  if (!store.ok()) Die(store.status().ToString());
  Data data{dh, dr, {}, {}};
  std::mt19937 rng(11);
  std::normal_distribution<float> unit;
  for (int64_t c = 0; c < clusters; ++c) {
    std::vector<float> h(dh), w(dr);
    for (auto& x : h) x = unit(rng);
    for (auto& x : w) x = unit(rng);
    data.centres_hs.push_back(std::move(h));
    data.centres_rw.push_back(std::move(w));
  }
  auto one = Create(store->get(), "one", dh, dr, 1, root);
  auto many = Create(store->get(), "many", dh, dr, static_cast<uint32_t>(shards), root);
  std::uniform_int_distribution<size_t> pick(0, static_cast<size_t>(clusters) - 1);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t at = 0; at < docs; at += 1000) {
    std::vector<moeedb::StoredDocument> b;
    for (int64_t i = at; i < std::min(docs, at + 1000); ++i) {
      moeedb::StoredDocument d{"doc-" + std::to_string(i), "", "{}", {}, {}};
      data.Draw(rng, pick(rng), noise, &d.hs, &d.rw);
      b.push_back(std::move(d));
    }
    if (auto w = one->Upsert(b, false); !w.ok()) Die(w.status().ToString());
    if (auto w = many->Upsert(b, false); !w.ok()) Die(w.status().ToString());
  }
  out["ingest_s_both"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  moeedb::SearchSpec exact_spec, ann_spec;
  exact_spec.k = ann_spec.k = static_cast<size_t>(k);
  exact_spec.alpha = ann_spec.alpha = 1.0f;
  exact_spec.exact = true;
  std::vector<std::vector<float>> qh(queries), qr(queries);
  for (int64_t q = 0; q < queries; ++q) data.Draw(rng, pick(rng), noise, &qh[q], &qr[q]);
  std::vector<std::set<std::string>> truth(queries);
  size_t exact_agree = 0;
  for (int64_t q = 0; q < queries; ++q) {
    auto e = one->Search(qh[q].data(), qr[q].data(), exact_spec);
    auto e6 = many->Search(qh[q].data(), qr[q].data(), exact_spec);
    if (!e.ok() || !e6.ok()) Die("exact search failed");
    for (const auto& h : *e) truth[q].insert(h.id);
    size_t same = 0;
    for (const auto& h : *e6) same += truth[q].count(h.id);
    exact_agree += same;
  }
  // The sharded exact answer is the one shard's (a check of the merge, not a figure).
  if (exact_agree != static_cast<size_t>(queries * k)) Die("the sharded exact answer differs from one shard's");
  const auto measure = [&](const moeedb::VectorCollection& c, const moeedb::SearchSpec& spec) {
    size_t found = 0;
    const auto s0 = std::chrono::steady_clock::now();
    for (int64_t q = 0; q < queries; ++q) {
      auto r = c.Search(qh[q].data(), qr[q].data(), spec);
      if (!r.ok()) Die(r.status().ToString());
      for (const auto& h : *r) found += truth[q].count(h.id);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
    return json{{"recall_at_k", static_cast<double>(found) / static_cast<double>(queries * k)}, {"qps", queries / s}};
  };
  out["hnsw_one_shard"] = measure(*one, ann_spec);
  out["hnsw_sharded"] = measure(*many, ann_spec);
  out["exact_one_shard"] = measure(*one, exact_spec);
  out["exact_sharded"] = measure(*many, exact_spec);
  out["sharded_over_one_qps_hnsw"] = out["hnsw_sharded"]["qps"].get<double>() / out["hnsw_one_shard"]["qps"].get<double>();
  one.reset();
  many.reset();
  std::error_code ec;
  fs::remove_all(root, ec);
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
