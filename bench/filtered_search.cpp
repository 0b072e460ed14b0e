// A filtered search with a selective payload index, beside the unfiltered
// search and the same filtered search without the index (each document's
// payload tested: a full scan), in one process over one collection:
//
//   filtered_search --dir DIR [--docs 1000000] [--dim-hs 384] [--dim-rw 8]
//                   [--index flat|hnsw] [--groups 100] [--queries 50] [--k 10]
//
// The collection (RocksDB in DIR, written through the store: no model,
// random vectors) holds --docs documents whose payload is {"group": "g<i %
// groups>", "n": i}; the filter {"group": "g7"} keeps 1 / groups of them.
// Each kind of search runs --queries times with the same query vectors.
// Prints one JSON object: p50/p99 milliseconds of each, the ratios, the
// payload index's bytes, and each filtered answer's recall@k against the
// exact filtered answer (the indexed one scores every candidate exactly: it
// must be 1; an ANN search without the index may miss some).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "bench/bench_child.h"
#include "bench/bench_samples.h"
#include "bench/cpu_flags.h"
#include "database/database.h"
#include "database/vector_collection.h"

namespace fs = std::filesystem;
using namespace moeedb::bench;  // Flag, IntFlag, Die, Gaussian, Percentiles
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  const BenchFlags flags("filtered_search", argc, argv);
  const std::string dir = Flag("dir");
  if (dir.empty()) Die("--dir DIR is required");
  const int64_t docs = IntFlag("docs", 1000000), groups = IntFlag("groups", 100);
  const int64_t queries = IntFlag("queries", 50), k = IntFlag("k", 10);
  const size_t dh = IntFlag("dim-hs", 384), dr = IntFlag("dim-rw", 8);
  auto kind = moeedb::kIndexKinds.Parse(Flag("index", "flat"));
  if (!kind.ok()) Die(kind.status().ToString());
  std::printf("CPU flags: %s\n", CpuFlags().c_str());
  std::fflush(stdout);

  fs::remove_all(dir);
  const auto t0 = Clock::now();
  {
    auto store = moeedb::Store::Open(dir);
    if (!store.ok()) Die(store.status().ToString());
    moeedb::CollectionOptions o;
    o.dim_hs = dh;
    o.dim_rw = dr;
    o.lexical.enabled = false;
    o.index.hs.kind = o.index.rw.kind = *kind;
    if (auto c = moeedb::VectorCollection::Create(store->get(), "docs", o, dir + "/writer"); !c.ok())
      Die(c.status().ToString());
    std::mt19937_64 rng(1);
    constexpr int64_t kBatch = 4096;
    for (int64_t at = 0; at < docs; at += kBatch) {
      std::vector<moeedb::StoredDocument> batch;
      for (int64_t i = at; i < std::min(docs, at + kBatch); ++i) {
        const nlohmann::json payload = {{"group", "g" + std::to_string(i % groups)}, {"n", i}};
        batch.push_back({"d" + std::to_string(i), "", payload.dump(), Gaussian(rng, dh), Gaussian(rng, dr)});
      }
      if (auto w = (*store)->Upsert("docs", batch, /*sync=*/false); !w.ok()) Die(w.status().ToString());
    }
    fs::remove_all(dir + "/writer");
  }
  const double write_s = std::chrono::duration<double>(Clock::now() - t0).count();

  moeedb::DatabaseOptions options;
  options.index_dir = dir + "/node";
  auto db = moeedb::Database::Open(dir, options);
  if (!db.ok()) Die(db.status().ToString());
  const auto t1 = Clock::now();
  auto c = (*db)->OpenCollection("docs");
  if (!c.ok()) Die(c.status().ToString());
  const double build_s = std::chrono::duration<double>(Clock::now() - t1).count();
  std::fprintf(stderr, "wrote %lld documents in %.1f s, built the replica in %.1f s\n", static_cast<long long>(docs),
               write_s, build_s);

  std::mt19937_64 rng(99);
  std::vector<std::pair<std::vector<float>, std::vector<float>>> qs;
  for (int64_t i = 0; i < queries; ++i) qs.push_back({Gaussian(rng, dh), Gaussian(rng, dr)});
  auto filter = moeedb::MetadataFilter::Parse(R"({"group": "g7"})");
  if (!filter.ok()) Die(filter.status().ToString());
  // Runs every query; their latencies and answers (ids in order).
  auto run = [&](bool filtered, std::vector<std::vector<std::string>>* answers, bool exact = false) {
    std::vector<double> ms;
    for (const auto& [hs, rw] : qs) {
      moeedb::SearchSpec spec;
      spec.k = static_cast<size_t>(k);
      spec.exact = exact;
      if (filtered) spec.filter = *filter;
      const auto t = Clock::now();
      auto hits = (*c)->Search(hs.data(), rw.data(), spec);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
      if (!hits.ok()) Die(hits.status().ToString());
      if (hits->size() != static_cast<size_t>(k)) Die("a search found " + std::to_string(hits->size()) + " hits");
      std::vector<std::string> ids;
      for (const auto& h : *hits) ids.push_back(h.id);
      if (answers) answers->push_back(std::move(ids));
    }
    return Percentiles(ms);
  };

  const nlohmann::json unfiltered = run(false, nullptr);
  std::vector<std::vector<std::string>> truth, scanned, indexed;
  run(true, &truth, /*exact=*/true);
  const nlohmann::json full_scan = run(true, &scanned);
  const auto t2 = Clock::now();
  if (auto s = (*db)->SetPayloadIndex("docs", "group", moeedb::PayloadFieldKind::kKeyword); !s.ok()) Die(s.ToString());
  const double index_s = std::chrono::duration<double>(Clock::now() - t2).count();
  const nlohmann::json with_index = run(true, &indexed);
  size_t payload_bytes = 0;
  for (const auto& r : (*c)->ReplicaStates()) payload_bytes += r.payload_index_bytes;

  auto recall = [&](const std::vector<std::vector<std::string>>& got) {
    size_t found = 0, want = 0;
    for (size_t i = 0; i < truth.size(); ++i) {
      want += truth[i].size();
      for (const auto& id : got[i]) found += std::count(truth[i].begin(), truth[i].end(), id);
    }
    return want ? static_cast<double>(found) / static_cast<double>(want) : 1.0;
  };
  const double indexed_recall = recall(indexed);
  auto ratio = [](const nlohmann::json& a, const nlohmann::json& b) {
    return b["p50_ms"].get<double>() > 0 ? a["p50_ms"].get<double>() / b["p50_ms"].get<double>() : 0.0;
  };
  const nlohmann::json out = {{"docs", docs},
                              {"dims", {dh, dr}},
                              {"index", moeedb::kIndexKinds.Name(*kind)},
                              {"filter_keeps", 1.0 / static_cast<double>(groups)},
                              {"k", k},
                              {"unfiltered", unfiltered},
                              {"filtered_full_scan", full_scan},
                              {"filtered_payload_index", with_index},
                              {"p50_full_scan_over_indexed", ratio(full_scan, with_index)},
                              {"p50_indexed_over_unfiltered", ratio(with_index, unfiltered)},
                              {"payload_index_bytes", payload_bytes},
                              {"payload_index_build_s", index_s},
                              {"recall_full_scan", recall(scanned)},
                              {"recall_payload_index", indexed_recall},
                              {"indexed_equals_exact", indexed == truth}};
  std::printf("%s\n", out.dump().c_str());
  fs::remove_all(dir);
  return indexed_recall == 1.0 ? 0 : 1;
}
